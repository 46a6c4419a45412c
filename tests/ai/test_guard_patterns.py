"""promptGuard regex: kgateway's built-ins (names, what they catch, their masks), custom
patterns with kgateway's flags, and settings errors that name the field."""

from __future__ import annotations

import pytest

from lychgate.ai.guard_regex import RegexGuard, parse_regex
from lychgate.ai.rejection import PolicyError


def guard(*builtins: str, matches: tuple[object, ...] = ()) -> RegexGuard:
    g = parse_regex({"builtins": list(builtins), "matches": list(matches)}, "regex")
    assert g is not None
    return g


@pytest.mark.parametrize("number", [
    "4111 1111 1111 1111",  # Visa, grouped by spaces
    "4111-1111-1111-1111",  # by hyphens
    "4111111111111111",
    "5555 5555 5555 4444",  # Mastercard
    "2223 0031 2200 3222",  # Mastercard 2-series
    "3782 822463 10005",  # Amex, 4-6-5
    "6011 1111 1111 1117",  # Discover
    "4000 0000 0000 0000 006",  # 19 digits
])
def test_credit_card_numbers_that_pass_luhn_are_masked(number: str) -> None:
    assert guard("CREDIT_CARD").mask(f"Charge {number} today.") == "Charge <CREDIT_CARD> today."


@pytest.mark.parametrize("text", [
    "Charge 4111 1111 1111 1112 today.",  # one digit off: fails Luhn
    "Ticket 1234 5678 9012 3456 is open.",  # no card network starts with 1
    "Order 20240115 shipped.",  # too short
    "Call 555-123-4567.",
    "Tracking 94001 11899 22333 44455 66677 7",  # too long a run
])
def test_other_digit_runs_are_not_cards(text: str) -> None:
    assert guard("CREDIT_CARD").mask(text) == text


def test_a_card_followed_by_more_digits_is_still_found() -> None:
    # The regex takes "... 1111 12" greedily; the card inside it passes Luhn.
    assert guard("CREDIT_CARD").mask("Card 4111 1111 1111 1111 12/27") == "Card <CREDIT_CARD> 12/27"


@pytest.mark.parametrize("ssn", ["123-45-6789", "123 45 6789", "123.45.6789", "987-65-4320"])
def test_ssns_are_masked_as_us_ssn(ssn: str) -> None:
    assert guard("SSN").mask(f"SSN: {ssn}, thanks") == "SSN: <US_SSN>, thanks"


@pytest.mark.parametrize("text", [
    "000-12-3456",  # area 000 never issued
    "666-12-3456",  # area 666 never issued
    "123-00-4567",  # group 00
    "123-45-0000",  # serial 0000
    "111-11-1111",  # one digit
    "123-45 6789",  # two different separators
    "ZIP 94105-1234",  # ZIP+4
    "on 2024-01-15",
    "call 555-123-4567",
])
def test_numbers_that_are_not_ssns_stay(text: str) -> None:
    assert guard("SSN").mask(text) == text


@pytest.mark.parametrize("phone", [
    "(555) 123-4567", "555-123-4567", "555.123.4567", "5551234567", "+1 555 123 4567",
    "+1 (555) 123-4567",
    "1-800-555-0199", "+44 20 7946 0958", "+49 30 1234567", "+33 1 23 45 67 89",
])
def test_phone_numbers_are_masked(phone: str) -> None:
    assert guard("PHONE_NUMBER").mask(f"Call {phone} now") == "Call <PHONE_NUMBER> now"


@pytest.mark.parametrize("text", [
    "SSN 123-45-6789", "pi is 3.14159", "released 2024-01-15", "a score of +1 2 3",
    "extension 1234", "room 555-12",
])
def test_other_numbers_are_not_phone_numbers(text: str) -> None:
    assert guard("PHONE_NUMBER").mask(text) == text


@pytest.mark.parametrize("email", [
    "jane.doe@example.com", "first+tag@mail.example.co.uk", "UPPER@EXAMPLE.ORG", "a_b-c@x-y.io",
])
def test_email_addresses_are_masked(email: str) -> None:
    assert guard("EMAIL").mask(f"Write to {email}.") == "Write to <EMAIL_ADDRESS>."


@pytest.mark.parametrize("text", ["ssh user@localhost", "ping @handle", "a@b.c", "foo@bar", "x @ y.com"])
def test_other_at_signs_are_not_email_addresses(text: str) -> None:
    assert guard("EMAIL").mask(text) == text


def test_all_builtins_at_once() -> None:
    g = guard("SSN", "CREDIT_CARD", "PHONE_NUMBER", "EMAIL")
    text = ("I'm Jane (jane@example.com, +1 415 555 0100), SSN 123-45-6789, "
            "card 5555555555554444.")
    assert g.mask(text) == ("I'm Jane (<EMAIL_ADDRESS>, <PHONE_NUMBER>), SSN <US_SSN>, "
                            "card <CREDIT_CARD>.")


def test_custom_patterns_use_kgateways_flags_and_mask_as_custom() -> None:
    g = guard(matches=({"pattern": "credit card", "name": "CC"}, {"pattern": r"^secret: \w+"},
                       {"pattern": "begin.*?end"}, "project-\\d+"))
    # IGNORECASE, MULTILINE (^ after a newline), DOTALL (. across lines); plain strings too.
    text = "My CREDIT Card is\nsecret: hunter2\nbegin\nmiddle\nend of project-42"
    assert g.mask(text) == "My <CUSTOM> is\n<CUSTOM>\n<CUSTOM> of <CUSTOM>"


def test_overlapping_matches_become_one_mask() -> None:
    # One mask for the union, named after the match that starts first (the longer on a tie).
    g = guard("EMAIL", matches=({"pattern": "jane"}, {"pattern": "example.com please"}))
    assert g.mask("mail jane@example.com please!") == "mail <EMAIL_ADDRESS>!"


def test_contains_is_what_reject_asks() -> None:
    g = guard("SSN")
    assert g.contains("id 123-45-6789")
    assert not g.contains("id 000-45-6789")


def test_no_patterns_is_no_guard() -> None:
    assert parse_regex({"action": "REJECT"}, "regex") is None


@pytest.mark.parametrize(("raw", "field"), [
    ({"builtins": ["IBAN"]}, "promptGuard.request.regex.builtins[0]: unknown built-in 'IBAN'"),
    ({"matches": [{"pattern": "ok"}, {"pattern": "(unclosed"}]},
     "promptGuard.request.regex.matches[1].pattern: invalid regular expression"),
    ({"matches": [{"name": "no pattern"}]}, "promptGuard.request.regex.matches[0].pattern: required"),
    ({"builtins": ["SSN"], "action": "BLOCK"}, "promptGuard.request.regex.action: must be MASK or REJECT"),
])
def test_settings_errors_name_the_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(PolicyError) as err:
        parse_regex(raw, "promptGuard.request.regex")
    assert str(err.value).startswith(field)

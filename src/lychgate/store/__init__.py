from lychgate.store.store import Change, Read, Refusal, Store, reached

__all__ = ["Change", "Read", "Refusal", "Store", "reached"]

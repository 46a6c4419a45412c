"""Route tables split into scopes (xds/translator/scoped.py).

The incremental split must equal a fresh split after any change, a host must
sit in the scope its name hashes to, wildcard hosts in every scope, and the
tables that must stay whole (too few hosts, wildcard-heavy) must stay whole.
tests/e2e/test_scoped_routes.py sends requests through the real Envoy, whose
scope keys (lychgate's module and the CEL expression) compute the same hash."""

from __future__ import annotations

import collections
import random
from pathlib import Path

import pytest
import re2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.extensions.http.early_header_mutation.header_mutation.v3 import (
    header_mutation_pb2 as early_pb,
)
from google.protobuf import wrappers_pb2

from lychgate import ir, native
from lychgate.controlplane import ControlPlane
from lychgate.deploy.bootstrap import XdsTarget
from lychgate.deploy.local import LocalDeployer
from lychgate.settings import Settings
from lychgate.xds import types
from lychgate.xds.translator import Resources, build, chain_routes, scope_module, scoped
from lychgate.xds.translator.wire import WireCache

CLUSTER = "kube/default/svc/80"


def vhost(host: str, routes: int = 1, tag: str = "") -> ir.VirtualHost:
    return ir.VirtualHost(
        name=f"80/{host}", domains=(host,),
        routes=tuple(ir.Route(ir.RouteSource("HTTPRoute", "default", f"{host}{tag}", i, 0),
                              ir.Match(path=f"/{i}"), ir.Forward((ir.WeightedCluster(CLUSTER, 1),)))
                     for i in range(routes)))


def gateway(vhosts: list[ir.VirtualHost], **listener: object) -> ir.GatewayIR:
    http = ir.HTTPListener(name="http-80", address="127.0.0.1", port=80, virtual_hosts=tuple(vhosts),
                           **listener)  # type: ignore[arg-type]
    return ir.GatewayIR(namespace="default", name="gw", listeners=(http,), clusters=())


def route_tables(resources: Resources) -> list[str]:
    """The route tables the listener's chain uses (not the stand-in for its other
    chain, chain_routes.py: these listeners have no policy filters)."""
    return sorted(n for n in resources.by_type[types.ROUTE] if not n.endswith(chain_routes.POLICY_CHAIN))


def fresh_split(vhosts: list[ir.VirtualHost], native: bool = False) -> tuple[list[list[str]], list[str]]:
    table = scoped.ScopedTable(native)
    table.update(vhosts)
    return [[vh.name for vh in e] for e in table.exact], [vh.name for vh in table.shared]


@pytest.mark.parametrize("native", [False, True], ids=["cel", "native"])
def test_incremental_split_equals_a_fresh_split(native: bool) -> None:
    rng = random.Random(7)
    hosts = [vhost(f"h{i:03d}.example.com") for i in range(200)] + [vhost("*.wild.example.com")]
    table = scoped.ScopedTable(native)
    current = sorted(rng.sample(hosts, 120), key=lambda v: v.name)
    table.update(current)
    for step in range(60):
        kind = step % 4
        if kind == 0:  # a host comes
            current = sorted({*current, rng.choice(hosts)}, key=lambda v: v.name)
        elif kind == 1 and current:  # a host goes
            current = [v for v in current if v is not rng.choice(current)]
        elif kind == 2 and current:  # a host's routes change: a new object, same name
            i = rng.randrange(len(current))
            current = [*current[:i], vhost(current[i].domains[0], 2, tag=str(step)), *current[i + 1:]]
        else:  # two changes far apart in one pass
            if len(current) > 2:
                current = [vhost(current[0].domains[0], 3, str(step)), *current[1:-1],
                           vhost(current[-1].domains[0], 3, str(step))]
        table.update(current)
        exact, shared = fresh_split(current, native)
        assert [[vh.name for vh in e] for e in table.exact] == exact, f"step {step}"
        assert [vh.name for vh in table.shared] == shared, f"step {step}"
        assert table.exact_routes == sum(len(v.routes) for v in current if "*" not in v.domains[0])


@pytest.mark.parametrize("native", [False, True], ids=["cel", "native"])
def test_each_host_sits_in_the_scope_of_its_hash_and_wildcards_in_all(native: bool) -> None:
    hosts = [vhost(f"h{i}.example.com") for i in range(600)]
    wild = [vhost("*.example.com"), vhost("*")]
    table = scoped.ScopedTable(native)
    table.update(sorted([*hosts, *wild], key=lambda v: v.name))
    for bits in range(1, (scoped.NATIVE_MAX_BITS if native else scoped.MAX_BITS) + 1):
        table.bits = bits
        scopes = [table.scope(i) for i in range(1 << bits)]
        for vh in hosts:
            assert [i for i, scope in enumerate(scopes) if vh in scope] == [scoped.bucket(vh.domains[0], bits, native)]
        for scope in scopes:
            exact = scope[:-2]
            assert exact == sorted(exact, key=lambda v: v.name)  # by name, as a fresh table lists them
            assert scope[-2:] == sorted(wild, key=lambda v: v.name)
    # The hash ignores ASCII case, as Envoy's host matching does.
    assert scoped.bucket("H1.Example.COM", native=native) == scoped.bucket("h1.example.com", native=native)


def test_a_host_of_several_domains_sits_once_in_each_scope_of_one() -> None:
    """Two domains in different buckets that one scope merges: listed once."""
    a, b = next((f"a{i}.example.com", f"b{i}.example.com") for i in range(1000)
                if scoped.bucket(f"a{i}.example.com") != scoped.bucket(f"b{i}.example.com")
                and scoped.bucket(f"a{i}.example.com", 1) == scoped.bucket(f"b{i}.example.com", 1))
    both = ir.VirtualHost(name="80/both", domains=(a, b), routes=vhost(a).routes)
    table = scoped.ScopedTable()
    table.update([both, *(vhost(f"h{i}.example.com") for i in range(20))])
    table.bits = 1
    assert table.scope(scoped.bucket(a, 1)).count(both) == 1
    table.bits = scoped.MAX_BITS
    assert both in table.scope(scoped.bucket(a)) and both in table.scope(scoped.bucket(b))


def _regex_bucket(host: str) -> int:
    """The scope as the regexes of Envoy's scope key expression find it (RE2)."""
    return sum(1 << j for j, chars in enumerate(scoped._SETS) if re2.search(scoped.parity_regex(chars), host))


def test_the_python_hash_is_the_one_envoy_computes() -> None:
    """bucket() against the very regexes Envoy's CEL runs (RE2, the engine of CEL's
    matches): on any host, in any case, with or without a port. Envoy itself is
    asked in tests/e2e/test_scoped_routes.py."""
    rng = random.Random(3)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-."
    for _ in range(3000):
        host = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
        for request_host in (host, host.upper(), f"{host}:8080", f"{host}:"):
            assert _regex_bucket(request_host) == scoped.bucket(host), request_host
    # A Host no exact host can match goes to scope 0 (wildcards and catch-all are everywhere).
    for other in ("", "a_b.example", "[::1]:8080", "*.example.com"):
        assert _regex_bucket(other) == 0
    # A key of fewer bits is the first terms of the same hash: the low bits.
    for bits in range(1, scoped.MAX_BITS + 1):
        expression = scoped.scope_key_expression(bits)
        assert expression.count(".matches(") == bits
        assert all(scoped.parity_regex(chars) in expression for chars in scoped._SETS[:bits])
    # Envoy's CEL refuses regexes whose RE2 program is over 100.
    sizes = [re2.compile(scoped.parity_regex(chars)).programsize for chars in scoped._SETS]
    assert max(sizes) <= 100, sizes


def test_hosts_spread_evenly_over_the_scopes() -> None:
    """The families of names users have: the fullest scope holds at most 2.2 times the mean."""
    words = random.Random(5)

    def word() -> str:
        return "".join(words.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(words.randint(4, 9)))

    families = {
        "numbered": [f"svc-{i:04d}.example.com" for i in range(3000)],
        "unpadded": [f"{i}.apps.example.org" for i in range(3000)],
        "words": list({f"{word()}.example.com" for _ in range(3000)}),
        "tenants": list({f"www.{word()}.com" for _ in range(3000)}),
        "two labels": [f"app{i}.team{j}.example.net" for i in range(100) for j in range(30)],
    }
    for family, hosts in families.items():
        for bits in range(1, scoped.MAX_BITS + 1):
            fullest = max(collections.Counter(scoped.bucket(h, bits) for h in hosts).values())
            assert fullest <= 2.2 * len(hosts) / (1 << bits), (family, bits)
            assert len({scoped.bucket(h, bits) for h in hosts}) == 1 << bits, family  # every scope is used
        # lychgate's module's mixed hash, to 256 scopes: no fuller than random placement
        # would make one (the mean and four standard deviations of a scope's count).
        for bits in range(1, scoped.NATIVE_MAX_BITS + 1):
            mean = len(hosts) / (1 << bits)
            counts = collections.Counter(scoped.bucket(h, bits, native=True) for h in hosts)
            assert max(counts.values()) <= mean + 4 * mean ** 0.5 + 1, (family, bits)
            assert len(counts) == 1 << bits, family


def test_build_splits_a_big_table_into_scopes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scoped, "SCOPE_ROUTES", 1)  # 100 routes: all 6 bits
    vhosts = [vhost(f"h{i:03d}.example.com") for i in range(100)]
    resources = build(gateway(vhosts), WireCache(), scope_threshold=50)
    assert route_tables(resources) == sorted(scoped.scope_name("http-80", i) for i in range(1 << scoped.MAX_BITS))
    assert len(resources.by_type[types.SCOPED_ROUTE]) == 1 << scoped.MAX_BITS
    target = scoped.scope_name("http-80", scoped.bucket("h042.example.com"))
    held = {vh.name for vh in resources.message(types.ROUTE, target).virtual_hosts}
    assert "80/h042.example.com" in held
    assert list(resources.message(types.ROUTE, target).request_headers_to_remove) == [scoped.SCOPE_HEADER]
    hcm = hcm_pb.HttpConnectionManager()
    resources.message(types.LISTENER, "http-80").filter_chains[0].filters[0].typed_config.Unpack(hcm)
    assert hcm.WhichOneof("route_specifier") == "scoped_routes"
    # The connection manager sets the key itself, before the route lookup: no filter for it.
    early = hcm.early_header_mutation_extensions[-1]  # last: after any a ListenerPolicy sets
    mutation = early_pb.HeaderMutation()
    early.typed_config.Unpack(mutation)
    assert mutation.mutations[0].append.header.key == scoped.SCOPE_HEADER
    assert mutation.mutations[0].append.header.value == f"http-80/%CEL({scoped.scope_key_expression(6)})%"
    assert "lua" not in str(hcm.http_filters)
    assert hcm.http_filters[-1].name == "envoy.filters.http.router"


def test_the_native_key_carries_the_hash_to_lychgates_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the module on the proxies, the key is one early mutation of the module,
    handed the header, the table and the hash's character sets (the module's
    keys are compared with bucket() through Envoy in tests/e2e/test_scoped_routes.py)."""
    monkeypatch.setattr(scoped, "NATIVE_SCOPE_ROUTES", 10)  # 100 routes: 4 bits
    resources = build(gateway([vhost(f"h{i:03d}.example.com") for i in range(100)]), WireCache(),
                      scope_threshold=50, native_key=True)
    hcm = hcm_pb.HttpConnectionManager()
    resources.message(types.LISTENER, "http-80").filter_chains[0].filters[0].typed_config.Unpack(hcm)
    [early] = hcm.early_header_mutation_extensions
    mutation = scope_module.mutation_class()()
    assert early.typed_config.Unpack(mutation)
    assert mutation.dynamic_module_config.name == native.SCOPE_MODULE
    config = wrappers_pb2.StringValue()
    assert mutation.early_header_mutation_config.Unpack(config)
    assert config.value.split(" ") == [scoped.SCOPE_HEADER, "http-80/", scoped._ALPHABET, "#4"]
    # The module's own hash, not CEL's: each host sits in the scope the module computes for it.
    for i in (0, 7, 42, 99):
        host = f"h{i:03d}.example.com"
        target = scoped.scope_name("http-80", scoped.bucket(host, 4, native=True))
        assert f"80/{host}" in {vh.name for vh in resources.message(types.ROUTE, target).virtual_hosts}


def test_local_proxies_get_the_module_kubernetes_ones_when_told(tmp_path: Path) -> None:
    """Local mode hands its Envoys the module when built; a Kubernetes proxy image
    carries it only when the Helm value says so (LYCHGATE_NATIVE_SCOPE_KEY)."""
    module = tmp_path / "liblychgate_scope.so"
    module.touch()
    local = LocalDeployer(tmp_path, XdsTarget("127.0.0.1", 9977), scope_module=module)
    assert ControlPlane(Settings(state_dir=tmp_path), local).native_scope_key
    assert not ControlPlane(Settings(state_dir=tmp_path, native_scope_key=False), local).native_scope_key
    kube = object()  # a deployer that hands its proxies no module
    assert not ControlPlane(Settings(state_dir=tmp_path), kube).native_scope_key  # type: ignore[arg-type]
    assert ControlPlane(Settings(state_dir=tmp_path, native_scope_key=True), kube).native_scope_key  # type: ignore[arg-type]


def _key_bits(resources: Resources) -> int:
    """The terms of the listener's scope key expression."""
    hcm = hcm_pb.HttpConnectionManager()
    resources.message(types.LISTENER, "http-80").filter_chains[0].filters[0].typed_config.Unpack(hcm)
    mutation = early_pb.HeaderMutation()
    hcm.early_header_mutation_extensions[-1].typed_config.Unpack(mutation)
    return mutation.mutations[0].append.header.value.count(".matches(")


def test_a_table_gets_as_few_scopes_as_keep_them_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each bit of the key costs every request; a scope of many routes costs
    Envoy a slow rebuild: a table splits with a bit for each doubling past
    SCOPE_ROUTES routes a scope, and keeps its bits while it stays split (a new
    count would change the listener under draining connections)."""
    r = scoped.SCOPE_ROUTES
    assert [scoped.scope_bits(n) for n in (1, 2 * r, 2 * r + 1, 4 * r, 4 * r + 1, 16 * r, 32 * r + 1, 10**9)] \
        == [1, 1, 2, 2, 3, 4, 6, 6]
    # lychgate's module costs the same at any bits: scopes of NATIVE_SCOPE_ROUTES, so a change
    # re-sends a small table (3,000 two-match routes: 64 scopes instead of 16).
    assert scoped.scope_bits(6000) == 4 and scoped.scope_bits(6000, native=True) == 8
    n = scoped.NATIVE_SCOPE_ROUTES
    assert [scoped.scope_bits(k, native=True) for k in (2 * n, 2 * n + 1, 32 * n + 1, 128 * n + 1, 10**9)] \
        == [1, 2, 6, 8, 8]
    native = build(gateway([vhost(f"h{i:04d}.example.com") for i in range(2000)]), WireCache(),
                   scope_threshold=1000, native_key=True)
    assert len(native.by_type[types.SCOPED_ROUTE]) == 128  # 7 bits
    monkeypatch.setattr(scoped, "SCOPE_ROUTES", 10)  # through build: 10 routes a scope
    hosts = [vhost(f"h{i:03d}.example.com") for i in range(400)]

    def split(cache: WireCache, n: int) -> tuple[int, list[list[str]]]:
        resources = build(gateway(hosts[:n]), cache, scope_threshold=50)
        bits = _key_bits(resources)
        tables = [[vh.name for vh in resources.message(types.ROUTE, scoped.scope_name("http-80", i)).virtual_hosts]
                  for i in range(1 << bits)]
        assert route_tables(resources) == sorted(scoped.scope_name("http-80", i) for i in range(1 << bits))
        assert len(resources.by_type[types.SCOPED_ROUTE]) == 1 << bits
        return bits, tables

    growing, loaded = WireCache(), WireCache()
    # (routes, the bits of the table that grew to them, of one loaded at that size; 41: below
    # the threshold, still split down to 4/5 of it)
    for n, kept, fresh in ((50, 3, 3), (81, 3, 4), (161, 3, 5), (400, 3, 6), (41, 3, 0)):
        for cache, bits in ((growing, kept), (WireCache(), fresh)):
            if not bits:
                continue
            got, tables = split(cache, n)
            assert got == bits, n
            # Each scope holds exactly the hosts of its hash's low bits, as a fresh table would.
            assert tables == [[vh.name for vh in hosts[:n] if scoped.bucket(vh.domains[0], bits) == i]
                              for i in range(1 << bits)], n
    assert split(loaded, 400)[0] == 6  # loaded big: split at once with the bits its size needs
    build(gateway(hosts[:30]), growing, scope_threshold=50)  # below 4/5 of the threshold: whole again
    assert split(growing, 400)[0] == 6  # split again: bits chosen afresh


def test_tables_that_stay_whole() -> None:
    many = [vhost(f"h{i:03d}.example.com") for i in range(100)]

    def whole(gw: ir.GatewayIR, threshold: int = 50) -> bool:
        return route_tables(build(gw, WireCache(), scope_threshold=threshold)) == ["http-80"]

    assert whole(gateway(many[:49]))  # below the threshold
    assert whole(gateway(many), threshold=0)  # turned off (strict validation)
    # A catch-all with more routes than a scope's share would be copied into every scope.
    assert whole(gateway([*many, vhost("*", routes=51)]))  # 100 routes: 2 scopes
    assert not whole(gateway([*many, vhost("*", routes=50)]))
    # Filters that routes turn on are chosen after the scope is known: such tables split too.
    assert not whole(gateway(many, policy_filters=True))


def test_wildcard_routes_split_a_table_into_fewer_scopes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wildcard hosts are copied into every scope: a table splits into as many scopes as
    keep them fewer than the table's routes per scope, not into more, nor none."""
    monkeypatch.setattr(scoped, "NATIVE_SCOPE_ROUTES", 1)  # 100 routes: all 8 bits, without wildcards
    many = [vhost(f"h{i:03d}.example.com") for i in range(100)]
    resources = build(gateway([*many, vhost("*", routes=3)]), WireCache(), scope_threshold=50, native_key=True)
    assert len(resources.by_type[types.SCOPED_ROUTE]) == 32  # 3 << 5 <= 100 < 3 << 6
    everywhere = {n for n in resources.by_type[types.ROUTE] if "80/*" in
                  {vh.name for vh in resources.message(types.ROUTE, n).virtual_hosts}}
    assert everywhere == {scoped.scope_name("http-80", i) for i in range(32)}


def test_a_changed_host_rebuilds_only_its_scope() -> None:
    cache = WireCache()
    vhosts = [vhost(f"h{i:03d}.example.com") for i in range(100)]
    before = build(gateway(vhosts), cache, scope_threshold=50).by_type[types.ROUTE]
    vhosts[42] = vhost("h042.example.com", routes=2)
    after = build(gateway(vhosts), cache, scope_threshold=50).by_type[types.ROUTE]
    changed = {name for name in after if after[name] is not before[name]}
    assert changed == {scoped.scope_name("http-80", scoped.bucket("h042.example.com", 1))}


@pytest.mark.parametrize("native", [False, True], ids=["cel", "native"])
def test_a_changed_wildcard_host_reaches_every_scope(native: bool) -> None:
    """Wildcard hosts are copied into every scope: a change to one rebuilds them all (a scope
    left as built before would route the wildcard's requests as before)."""
    cache = WireCache()
    vhosts = [vhost(f"h{i:03d}.example.com") for i in range(100)] + [vhost("*.wild.example.com")]
    before = build(gateway(vhosts), cache, scope_threshold=50, native_key=native).by_type[types.ROUTE]
    vhosts[-1] = vhost("*.wild.example.com", routes=2)
    resources = build(gateway(vhosts), cache, scope_threshold=50, native_key=native)
    scopes = [n for n in route_tables(resources) if n != "http-80"]
    assert len(scopes) > 1 and all(resources.by_type[types.ROUTE][n] is not before[n] for n in scopes)
    for name in scopes:
        [wild] = [vh for vh in resources.message(types.ROUTE, name).virtual_hosts if vh.name == "80/*.wild.example.com"]
        assert len(wild.routes) == 2, name


def test_a_split_table_stays_split_a_little_below_the_threshold() -> None:
    """Switching changes the listener (its connections drain): no flapping at the threshold."""
    cache = WireCache()
    hosts = [vhost(f"h{i:03d}.example.com") for i in range(100)]

    def split(n: int) -> bool:
        return types.SCOPED_ROUTE in build(gateway(hosts[:n]), cache, scope_threshold=50).by_type

    assert not split(49)
    assert split(50)
    assert split(45)  # stays split down to 4/5 of the threshold
    assert not split(39)
    assert not split(45)  # and once whole, splits again only at the threshold


def test_the_threshold_counts_routes_on_enough_hosts() -> None:
    """Envoy's cost of a change grows with the routes of a table, on many hosts or few."""
    def split(vhosts: list[ir.VirtualHost]) -> bool:
        return types.SCOPED_ROUTE in build(gateway(vhosts), WireCache(), scope_threshold=150).by_type

    assert split([vhost(f"h{i:02d}.example.com", routes=10) for i in range(20)])  # 200 routes on 20 hosts
    assert not split([vhost(f"h{i:02d}.example.com", routes=7) for i in range(20)])  # 140 routes
    # One host's routes are one scope whatever is done: too few hosts stay whole.
    assert not split([vhost(f"h{i:02d}.example.com", routes=100) for i in range(scoped.MIN_HOSTS - 1)])

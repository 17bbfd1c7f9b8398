"""Shard awareness as ScyllaDB's Python driver sees it (run from .venv-scylla).

Checks that the server advertises its shards in SUPPORTED, that scylla-driver opens one
connection per shard, and that token-aware prepared requests land on the owning shard:
the server's forwarded-request counter (Prometheus text on the API port) must not grow.

Env: SHOAL_SMP (shard count, default 2), SHOAL_API_PORT (default 10000),
     SHOAL_API_HOST (default SHOAL_HOST), SHOAL_SHARD_AWARE_PORT (checked when set).
"""

import os
import time
import urllib.request

import pytest

from conftest import HOST, IS_CASSANDRA, make_cluster, wait_until

if IS_CASSANDRA:
    pytest.skip("Cassandra is not sharded", allow_module_level=True)
pytest.importorskip("cassandra.shard_info", reason="needs scylla-driver (.venv-scylla)")

SMP = int(os.environ.get("SHOAL_SMP", "2"))
API_HOST = os.environ.get("SHOAL_API_HOST", HOST)
API_PORT = int(os.environ.get("SHOAL_API_PORT", "10000"))
METRIC = "shoal_cql_forwarded_requests_total"


def forwarded_total():
    """Sum of shoal_cql_forwarded_requests_total over all label sets."""
    url = "http://%s:%d/metrics" % (API_HOST, API_PORT)
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode("utf-8")
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(METRIC):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name != METRIC:
            continue
        total += float(line.rsplit(" ", 1)[1])
        seen = True
    assert seen, "%s not found in %s" % (METRIC, url)
    return total


@pytest.fixture(scope="module")
def sharded(keyspace):
    c = make_cluster()
    s = c.connect(keyspace, wait_for_all_pools=True)
    yield c, s
    c.shutdown()


def shard_connections(session):
    pools = list(session.get_pools())
    assert len(pools) == 1
    return pools[0]._connections


def test_driver_sees_sharding_info(sharded):
    cluster, session = sharded
    hosts = cluster.metadata.all_hosts()
    assert len(hosts) == 1
    info = hosts[0].sharding_info
    assert info is not None, "no SCYLLA_* sharding keys in SUPPORTED"
    assert info.shards_count == SMP
    assert info.partitioner == "org.apache.cassandra.dht.Murmur3Partitioner"
    assert info.sharding_algorithm == "biased-token-round-robin"
    assert info.sharding_ignore_msb >= 0
    if os.environ.get("SHOAL_SHARD_AWARE_PORT"):
        assert info.shard_aware_port == int(os.environ["SHOAL_SHARD_AWARE_PORT"])


def test_one_connection_per_shard(sharded):
    _, session = sharded
    conns = wait_until(lambda: len(shard_connections(session)) == SMP and shard_connections(session),
                       timeout=15)
    assert conns, "driver did not open a connection to every shard: %r" % sorted(shard_connections(session))
    assert sorted(conns) == list(range(SMP))
    for shard_id, conn in conns.items():
        assert conn.features.shard_id == shard_id


def test_token_aware_requests_are_not_forwarded(sharded):
    _, session = sharded
    assert wait_until(lambda: len(shard_connections(session)) == SMP, timeout=15), \
        "driver did not connect to every shard"
    session.execute("CREATE TABLE IF NOT EXISTS shard_aware (k int PRIMARY KEY, v int)")
    ins = session.prepare("INSERT INTO shard_aware (k, v) VALUES (?, ?)")
    sel = session.prepare("SELECT v FROM shard_aware WHERE k = ?")
    # Let any schema work (which may legitimately cross shards) finish first.
    time.sleep(0.5)
    before = forwarded_total()
    for k in range(200):
        session.execute(ins, (k, k * 2))
    for k in range(0, 200, 10):
        assert session.execute(sel, (k,)).one().v == k * 2
    after = forwarded_total()
    assert after == before, "%d token-aware requests were forwarded between shards" % (after - before)


def test_conditional_statements_carry_the_lwt_mark(sharded):
    """SCYLLA_LWT_ADD_METADATA_MARK: the driver negotiates it and reads the
    bit from the PREPARED metadata flags (it routes LWTs to the primary)."""
    _, session = sharded
    session.execute("CREATE TABLE IF NOT EXISTS lwt_mark (k int PRIMARY KEY, v int)")
    conditional = [
        "INSERT INTO lwt_mark (k, v) VALUES (?, ?) IF NOT EXISTS",
        "UPDATE lwt_mark SET v = ? WHERE k = ? IF v = ?",
        "DELETE FROM lwt_mark WHERE k = ? IF EXISTS",
    ]
    plain = ["INSERT INTO lwt_mark (k, v) VALUES (?, ?)", "SELECT v FROM lwt_mark WHERE k = ?"]
    assert [session.prepare(q).is_lwt() for q in conditional] == [True] * 3
    assert [session.prepare(q).is_lwt() for q in plain] == [False] * 2
    assert session.execute(session.prepare(conditional[0]), (1, 1)).was_applied


def test_a_statement_prepared_on_one_shard_executes_on_every_shard(sharded):
    """A PREPARE fills every shard's cache before it is answered, as on
    ScyllaDB: drivers prepare on one connection per node and execute on
    any, and an Unprepared answer costs them a round trip."""
    from cassandra import ConsistencyLevel
    from cassandra.protocol import ExecuteMessage, PrepareMessage, ResultMessage

    _, session = sharded
    conns = wait_until(lambda: len(shard_connections(session)) == SMP and shard_connections(session), timeout=15)
    assert conns, "driver did not connect to every shard"
    query = "SELECT key FROM system.local WHERE key = 'local' -- prepared on shard 0 only"
    prepared = conns[0].wait_for_response(PrepareMessage(query=query, keyspace=None))
    for shard_id, conn in sorted(conns.items()):
        answer = conn.wait_for_response(ExecuteMessage(
            query_id=prepared.query_id, query_params=[], consistency_level=ConsistencyLevel.ONE,
            result_metadata_id=getattr(prepared, "result_metadata_id", None)))
        assert isinstance(answer, ResultMessage), "shard %d: %r" % (shard_id, answer)

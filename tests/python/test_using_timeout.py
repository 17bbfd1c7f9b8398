"""`USING TIMEOUT`, ScyllaDB's per-statement timeout (its
test/cqlpy/test_using_timeout.py): it replaces the node's read, write and
truncate timeouts for the statement, on SELECT, INSERT, UPDATE, DELETE,
BATCH and TRUNCATE, literal or bound (a `duration` marker), beside TTL and
TIMESTAMP; only whole, non-negative milliseconds are timeouts.
"""
import pytest
from cassandra import InvalidRequest, ReadTimeout, WriteTimeout
from cassandra.cluster import NoHostAvailable
from cassandra.protocol import SyntaxException
from cassandra.util import Duration

from conftest import IS_CASSANDRA

pytestmark = pytest.mark.skipif(IS_CASSANDRA, reason="USING TIMEOUT is ScyllaDB's")

FOREVER = Duration(nanoseconds=10**15)
ZERO = Duration(nanoseconds=0)

_next_key = [0]


def unique_key():
    _next_key[0] += 1
    return _next_key[0]


@pytest.fixture(scope="module")
def t(session):
    session.execute("CREATE TABLE ut (p bigint, c int, v int, PRIMARY KEY (p, c))")
    return "ut"


@pytest.mark.parametrize("statement,error", [
    ("SELECT * FROM {t} USING TIMEOUT 0ms", ReadTimeout),
    ("SELECT * FROM {t} WHERE p = {key} USING TIMEOUT 0ms", ReadTimeout),
    ("INSERT INTO {t} (p,c,v) VALUES ({key},1,1) USING TIMEOUT 0ms", WriteTimeout),
    ("UPDATE {t} USING TIMEOUT 0ms SET v = 5 WHERE p = {key} AND c = 1", WriteTimeout),
    ("DELETE FROM {t} USING TIMEOUT 0ms WHERE p = {key}", WriteTimeout),
    ("DELETE FROM {t} USING TIMEOUT 0ms AND timestamp 42 WHERE p = {key}", WriteTimeout),
])
def test_zero_timeout_times_out(session, t, statement, error):
    with pytest.raises(error):
        session.execute(statement.format(t=t, key=unique_key()))


def test_large_timeout_succeeds(session, t):
    k1, k2, k3, key = unique_key(), unique_key(), unique_key(), unique_key()
    session.execute(f"INSERT INTO {t} (p,c,v) VALUES ({key},1,1) USING TIMEOUT 60m")
    session.execute(f"UPDATE {t} USING TIMEOUT 48h SET v = 5 WHERE p = {key} AND c = 1")
    res = list(session.execute(f"SELECT * FROM {t} WHERE p IN ({k1},{k2},{k3},{key}) USING TIMEOUT 24h"))
    assert set(res) == set(session.execute(f"SELECT * FROM {t} WHERE p IN ({k1},{k2},{k3},{key})"))
    assert [(r.c, r.v) for r in res] == [(1, 5)]


def test_prepared_statements(session, t):
    key = unique_key()
    prep = session.prepare(f"INSERT INTO {t} (p,c,v) VALUES ({key},6,7) USING TIMEOUT ?")
    assert prep.column_metadata[0].name == "[timeout]"
    assert prep.column_metadata[0].type.typename == "duration"
    with pytest.raises(WriteTimeout):
        session.execute(prep, (ZERO,))
    session.execute(prep, (FOREVER,))
    result = list(session.execute(f"SELECT * FROM {t} WHERE p = {key}"))
    assert len(result) == 1 and (result[0].c, result[0].v) == (6, 7)
    prep = session.prepare(f"SELECT * FROM {t} USING TIMEOUT ?")
    with pytest.raises(ReadTimeout):
        session.execute(prep, (ZERO,))
    session.execute(prep, (FOREVER,))
    prep = session.prepare(f"UPDATE {t} USING TIMEOUT ? AND TIMESTAMP ? SET v = ? WHERE p = {key} and c = 1")
    with pytest.raises(WriteTimeout):
        session.execute(prep, (ZERO, 3, 42))
    session.execute(prep, (FOREVER, 3, 42))
    named = session.prepare(
        f"UPDATE {t} USING TIMEOUT :timeout AND TIMESTAMP :ts SET v = :v WHERE p = {key} and c = 1")
    # The timeout cannot be left unbound.
    with pytest.raises(InvalidRequest):
        session.execute(named, {"ts": 42, "v": 3})
    session.execute(named, {"ts": 42, "v": 3, "timeout": FOREVER})
    result = list(session.execute(f"SELECT * FROM {t} WHERE p = {key} AND c = 1"))
    assert len(result) == 1 and (result[0].c, result[0].v) == (1, 3)


def test_batch(session, t):
    key, key1 = unique_key(), unique_key()

    def row(p, c):
        found = list(session.execute(f"SELECT * FROM {t} WHERE p = {p} and c = {c}"))
        assert len(found) == 1
        return (found[0].c, found[0].v)

    session.execute(f"""BEGIN BATCH USING TIMEOUT 48h
        INSERT INTO {t} (p,c,v) VALUES ({key},7,8);
        INSERT INTO {t} (p,c,v) VALUES ({key1},8,9);
        APPLY BATCH""")
    assert (row(key, 7), row(key1, 8)) == ((7, 8), (8, 9))
    prep1 = session.prepare(f"""BEGIN BATCH USING TIMEOUT ?
        INSERT INTO {t} (p,c,v) VALUES ({key},7,10);
        INSERT INTO {t} (p,c,v) VALUES ({key1},8,11);
        APPLY BATCH""")
    prep2 = session.prepare(f"""BEGIN BATCH USING TIMEOUT 48h
        INSERT INTO {t} (p,c,v) VALUES (?,7,2);
        INSERT INTO {t} (p,c,v) VALUES (?,?,14);
        APPLY BATCH""")
    named = session.prepare(f"""BEGIN BATCH USING TIMEOUT :timeout
        INSERT INTO {t} (p,c,v) VALUES (:key,7,8);
        INSERT INTO {t} (p,c,v) VALUES ({key1},8,:nine);
        APPLY BATCH""")
    session.execute(prep1, (FOREVER,))
    assert (row(key, 7), row(key1, 8)) == ((7, 10), (8, 11))
    session.execute(prep2, (key, key1, 8))
    assert (row(key, 7), row(key1, 8)) == ((7, 2), (8, 14))
    session.execute(named, {"timeout": FOREVER, "key": key, "nine": 9})
    assert (row(key, 7), row(key1, 8)) == ((7, 8), (8, 9))
    with pytest.raises(WriteTimeout):
        session.execute(prep1, (ZERO,))
    with pytest.raises(WriteTimeout):
        session.execute(named, {"timeout": ZERO, "key": key, "nine": 9})


def test_mixed_with_ttl_and_timestamp(session, t):
    key = unique_key()
    session.execute(f"INSERT INTO {t} (p,c,v) VALUES ({key},1,1) USING TIMEOUT 60m AND TTL 1000000 AND TIMESTAMP 321")
    session.execute(f"INSERT INTO {t} (p,c,v) VALUES ({key},2,1) USING TIMESTAMP 42 AND TIMEOUT 30m")
    res = list(session.execute(f"SELECT ttl(v), writetime(v) FROM {t} WHERE p = {key} and c = 1"))
    assert len(res) == 1 and res[0].ttl_v > 0 and res[0].writetime_v == 321
    res = list(session.execute(f"SELECT ttl(v), writetime(v) FROM {t} WHERE p = {key} and c = 2"))
    assert len(res) == 1 and not res[0].ttl_v and res[0].writetime_v == 42


@pytest.mark.parametrize("timeout,message", [
    ("'hey'", None),
    ("3mo", "Timeout values cannot be expressed in days/months"),
    ("40y", "Timeout values cannot be expressed in days/months"),
    ("2d", "Timeout values cannot be expressed in days/months"),
    ("917", None),
    ("null", "Timeout value cannot be null"),
    ("60s5ns", "Timeout values cannot have granularity finer than milliseconds"),
    ("-10ms", "Timeout values must be non-negative"),
])
def test_invalid_timeout(session, t, timeout, message):
    with pytest.raises(InvalidRequest) as refused:
        session.execute(f"SELECT * FROM {t} USING TIMEOUT {timeout}")
    if message:
        assert message in str(refused.value)


@pytest.mark.parametrize("statement", [
    "SELECT * FROM {t} USING TIMEOUT 60s AND TIMESTAMP 42",
    "SELECT * FROM {t} USING TIMEOUT 60s AND TTL 10000",
    "SELECT * FROM {t} USING TIMEOUT 60s AND TTL 123 AND TIMESTAMP 911",
    "DELETE FROM {t} USING TIMEOUT 60s AND TTL 42 WHERE p = 42",
    "TRUNCATE TABLE {t} USING TTL 1",
    "TRUNCATE TABLE {t} USING TIMESTAMP 123456789",
    "TRUNCATE TABLE {t} USING TIMEOUT 1h AND TTL 42",
])
def test_options_a_statement_does_not_take(session, t, statement):
    with pytest.raises(SyntaxException):
        session.execute(statement.format(t=t))


def test_truncate_using_timeout(session, table):
    tbl = table("(p bigint, c int, v int, PRIMARY KEY (p, c))")
    session.execute(f"INSERT INTO {tbl} (p,c,v) VALUES (1,1,1)")
    assert len(list(session.execute(f"SELECT * FROM {tbl} WHERE p = 1 and c = 1"))) == 1
    session.execute(f"TRUNCATE TABLE {tbl} USING TIMEOUT 1000s")
    assert list(session.execute(f"SELECT * FROM {tbl} WHERE p = 1 and c = 1")) == []
    # ScyllaDB's truncate error: the driver tries the other hosts.
    with pytest.raises(NoHostAvailable):
        session.execute(f"TRUNCATE TABLE {tbl} USING TIMEOUT 0s")
    prep = session.prepare(f"TRUNCATE TABLE {tbl} USING TIMEOUT ?")
    session.execute(prep, (FOREVER,))

"""Counter columns on one node: increments and decrements summed exactly
(also from concurrent clients), deletes, Cassandra's errors, COUNTER
batches, and sums that stay exact across flush, compaction and kill -9.
"""
import threading

import pytest
from cassandra import InvalidRequest
from cassandra.query import BatchStatement, BatchType

from node import skip_reason, temp_node

COUNTERS = "(k int, c int, hits counter, misses counter, PRIMARY KEY (k, c))"


def counts(session, table, k):
    return {r.c: (r.hits, r.misses) for r in session.execute(f"SELECT c, hits, misses FROM {table} WHERE k = {k}")}


def test_increment_and_decrement(session, table):
    t = table(COUNTERS)
    session.execute(f"UPDATE {t} SET hits = hits + 1 WHERE k = 1 AND c = 1")
    session.execute(f"UPDATE {t} SET hits = hits + 5, misses = misses - 2 WHERE k = 1 AND c = 1")
    update = session.prepare(f"UPDATE {t} SET hits = hits - ?, misses = misses + ? WHERE k = ? AND c = ?")
    session.execute(update, (3, 7, 1, 1))
    session.execute(update, (1, 1, 1, 2))
    assert counts(session, t, 1) == {1: (3, 5), 2: (-1, 1)}
    # A counter never updated reads as null.
    session.execute(f"UPDATE {t} SET hits = hits + 1 WHERE k = 2 AND c = 1")
    assert counts(session, t, 2) == {1: (1, None)}
    # Values beyond 32 bits.
    session.execute(update, (-(2**40), 0, 3, 1))
    session.execute(update, (2**41, 0, 3, 1))
    assert counts(session, t, 3) == {1: (-(2**40), 0)}


def test_concurrent_increments_from_threads_sum_exactly(session, table):
    t = table(COUNTERS)
    update = session.prepare(f"UPDATE {t} SET hits = hits + ?, misses = misses - 1 WHERE k = ? AND c = ?")
    threads, per_thread = 8, 100
    errors = []

    def work(seed):
        try:
            futures = [session.execute_async(update, (seed + 1, i % 3, 0)) for i in range(per_thread)]
            for f in futures:
                f.result()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    total_hits = sum(per_thread * (n + 1) for n in range(threads))
    rows = [tuple(r) for r in session.execute(f"SELECT hits, misses FROM {t}")]
    assert sum(h for h, _ in rows) == total_hits
    assert sum(m for _, m in rows) == -threads * per_thread


def test_reads_are_bigints_with_the_counter_type(session, table, keyspace):
    t = table(COUNTERS)
    session.execute(f"UPDATE {t} SET hits = hits + 2 WHERE k = 1 AND c = 1")
    result = session.execute(f"SELECT hits FROM {t} WHERE k = 1")
    assert result.one().hits == 2
    assert type(result.one().hits) is int
    # The driver decodes by the counter type id (0x0005).
    assert result.column_types[0].typename == "counter"
    types = {r.column_name: r.type for r in session.execute(
        "SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, t))}
    assert types == {"k": "int", "c": "int", "hits": "counter", "misses": "counter"}
    # Aggregates over counters.
    session.execute(f"UPDATE {t} SET hits = hits + 3 WHERE k = 1 AND c = 2")
    assert session.execute(f"SELECT sum(hits), max(hits) FROM {t} WHERE k = 1").one() == (5, 3)


def test_delete_counter_cell_row_and_partition(session, table):
    t = table(COUNTERS)
    for c in range(3):
        session.execute(f"UPDATE {t} SET hits = hits + 1, misses = misses + 1 WHERE k = 1 AND c = {c}")
    for k in (2, 3):
        session.execute(f"UPDATE {t} SET hits = hits + 1 WHERE k = {k} AND c = 0")
    session.execute(f"DELETE hits FROM {t} WHERE k = 1 AND c = 0")
    session.execute(f"DELETE FROM {t} WHERE k = 1 AND c = 1")
    session.execute(f"DELETE FROM {t} WHERE k = 2")
    assert counts(session, t, 1) == {0: (None, 1), 2: (1, 1)}
    assert counts(session, t, 2) == {}
    assert counts(session, t, 3) == {0: (1, None)}


@pytest.mark.parametrize("ddl, message", [
    ("(k int PRIMARY KEY, c counter, v int)", "Cannot mix counter and non counter columns in the same table"),
    ("(k counter PRIMARY KEY, c counter)", "counter type is not supported for PRIMARY KEY column 'k'"),
    ("(k int PRIMARY KEY, l list<counter>)", "Counters are not allowed inside collections"),
])
def test_invalid_counter_tables(session, tname, ddl, message):
    with pytest.raises(InvalidRequest, match=message):
        session.execute(f"CREATE TABLE {tname} {ddl}")


def test_counter_table_options_and_alter(session, table):
    t = table("(k int PRIMARY KEY, c counter)")
    with pytest.raises(InvalidRequest, match="Cannot set default_time_to_live on a table with counters"):
        session.execute(f"ALTER TABLE {t} WITH default_time_to_live = 10")
    with pytest.raises(InvalidRequest, match=r"Cannot add a non counter column \(v\) in a counter column family"):
        session.execute(f"ALTER TABLE {t} ADD v int")
    session.execute(f"ALTER TABLE {t} ADD d counter")
    plain = table("(k int PRIMARY KEY, v int)")
    with pytest.raises(InvalidRequest, match=r"Cannot add a counter column \(c\) in a non counter column family"):
        session.execute(f"ALTER TABLE {plain} ADD c counter")


@pytest.mark.parametrize("statement, message", [
    ("INSERT INTO {t} (k, c, hits) VALUES (1, 1, 1)",
     "INSERT statements are not allowed on counter tables, use UPDATE instead"),
    ("UPDATE {t} SET hits = 5 WHERE k = 1 AND c = 1", "Cannot set the value of counter column hits"),
    ("UPDATE {t} USING TTL 10 SET hits = hits + 1 WHERE k = 1 AND c = 1",
     "Cannot provide custom TTL for counter updates"),
    ("UPDATE {t} USING TIMESTAMP 10 SET hits = hits + 1 WHERE k = 1 AND c = 1",
     "Cannot provide custom timestamp for counter updates"),
    ("UPDATE {t} SET hits = hits + 'a' WHERE k = 1 AND c = 1", "hits"),
    ("UPDATE {t} SET hits = hits + 1 WHERE k = 1 AND c = 1 IF EXISTS",
     "Conditional updates are not supported on counter tables"),
    ("UPDATE {t} SET hits = hits + 1 WHERE k = 1 AND c = 1 IF hits = 1",
     "Conditional updates are not supported on counter tables"),
])
def test_invalid_counter_writes(session, table, statement, message):
    t = table(COUNTERS)
    with pytest.raises(InvalidRequest, match=message):
        session.execute(statement.format(t=t))


def test_increment_of_a_non_counter_column_is_invalid(session, table):
    t = table("(k int PRIMARY KEY, v int)")
    # The operation is shown with its operand, as ScyllaDB shows it (cqlpy's
    # update_test.py::testAdderNonCounter); a bind marker shows as `?`.
    with pytest.raises(InvalidRequest, match=r"Invalid operation \(v = v \+ 1\) for non counter column v"):
        session.execute(f"UPDATE {t} SET v = v + 1 WHERE k = 1")
    with pytest.raises(InvalidRequest, match=r"Invalid operation \(v = v - 2\) for non counter column v"):
        session.execute(f"UPDATE {t} SET v = v - 2 WHERE k = 1")
    with pytest.raises(InvalidRequest, match=r"Invalid operation \(v = v \+ \?\) for non counter column v"):
        session.execute(session.prepare(f"UPDATE {t} SET v = v + ? WHERE k = ?"), [1, 1])


def test_counter_batch(session, table):
    t = table(COUNTERS)
    plain = table("(k int PRIMARY KEY, v int)")
    session.execute(f"BEGIN COUNTER BATCH UPDATE {t} SET hits = hits + 1 WHERE k = 1 AND c = 1; "
                    f"UPDATE {t} SET hits = hits + 2 WHERE k = 1 AND c = 1; "
                    f"UPDATE {t} SET misses = misses - 1 WHERE k = 2 AND c = 1 APPLY BATCH")
    assert counts(session, t, 1) == {1: (3, None)}
    assert counts(session, t, 2) == {1: (None, -1)}
    # The protocol's BATCH message, with prepared statements.
    update = session.prepare(f"UPDATE {t} SET hits = hits + ? WHERE k = ? AND c = ?")
    batch = BatchStatement(batch_type=BatchType.COUNTER)
    for _ in range(3):
        batch.add(update, (10, 1, 1))
    session.execute(batch)
    assert counts(session, t, 1) == {1: (33, None)}

    with pytest.raises(InvalidRequest, match="Cannot include a counter statement in a logged batch"):
        session.execute(f"BEGIN BATCH UPDATE {t} SET hits = hits + 1 WHERE k = 1 AND c = 1 APPLY BATCH")
    with pytest.raises(InvalidRequest, match="Cannot include non-counter statement in a counter batch"):
        session.execute(f"BEGIN COUNTER BATCH INSERT INTO {plain} (k, v) VALUES (1, 1) APPLY BATCH")
    logged = BatchStatement(batch_type=BatchType.LOGGED)
    logged.add(update, (1, 1, 1))
    with pytest.raises(InvalidRequest, match="Cannot include a counter statement in a logged batch"):
        session.execute(logged)
    with pytest.raises(InvalidRequest, match="Counter and non-counter mutations cannot exist in the same batch"):
        session.execute(f"BEGIN UNLOGGED BATCH UPDATE {t} SET hits = hits + 1 WHERE k = 1 AND c = 1; "
                        f"INSERT INTO {plain} (k, v) VALUES (1, 1) APPLY BATCH")
    assert counts(session, t, 1) == {1: (33, None)}
    # An UNLOGGED batch of counter updates only is one, as in ScyllaDB.
    session.execute(f"BEGIN UNLOGGED BATCH UPDATE {t} SET hits = hits + 1 WHERE k = 1 AND c = 1; "
                    f"UPDATE {t} SET hits = hits + 2 WHERE k = 1 AND c = 1 APPLY BATCH")
    assert counts(session, t, 1) == {1: (36, None)}


@pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "")
def test_sums_survive_flush_compaction_and_kill_9():
    """Deltas spread over SSTables and the commitlog add up exactly; replay
    skips what was flushed, so nothing is counted twice after kill -9."""
    with temp_node("shoal-counters-", args=("--commitlog-sync", "batch")) as node:
        cluster, session = node.session()
        try:
            session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
                            "'replication_factor': 1}")
            session.execute(f"CREATE TABLE ks.t {COUNTERS}")
            update = session.prepare("UPDATE ks.t SET hits = hits + ?, misses = misses - 1 WHERE k = ? AND c = ?")
            expected = {}

            def add(rounds, amount, keys=range(10)):
                for r in range(rounds):
                    for k in keys:
                        session.execute(update, (amount, k, r % 2))
                        hits, misses = expected.get((k, r % 2), (0, 0))
                        expected[(k, r % 2)] = (hits + amount, misses - 1)

            def check():
                rows = {(r.k, r.c): (r.hits, r.misses) for r in session.execute("SELECT k, c, hits, misses FROM ks.t")}
                assert rows == expected

            add(3, 1)
            node.nodetool("flush", "ks", "t")
            add(3, 10)
            node.nodetool("flush", "ks", "t")
            check()
            assert "compacted" in node.nodetool("compact", "ks", "t")
            check()
            add(2, 100)
            node.nodetool("flush", "ks", "t")
            add(2, 1000)  # only in the commitlog
            session.execute("DELETE FROM ks.t WHERE k = 9")
            for c in (0, 1):
                del expected[(9, c)]
            check()
        finally:
            cluster.shutdown()
        node.kill()
        node.start()
        cluster, session = node.session()
        try:
            check()
            # The restarted node goes on adding (to counters never deleted:
            # a deleted counter must not be reused, as in Cassandra).
            update = session.prepare(
                "UPDATE ks.t SET hits = hits + ?, misses = misses - 1 WHERE k = ? AND c = ?")
            add(3, 5, keys=range(9))
            check()
        finally:
            cluster.shutdown()

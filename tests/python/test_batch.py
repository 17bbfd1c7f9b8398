"""Logged/unlogged batches: BatchStatement (prepared + simple) and CQL text batches."""

from cassandra.query import BatchStatement, BatchType, SimpleStatement

from conftest import make_cluster


def kcv(table):
    return table("(k int, c int, v text, PRIMARY KEY (k, c))")


def all_rows(session, t):
    return sorted((r.k, r.c, r.v) for r in session.execute("SELECT k, c, v FROM %s" % t))


def test_logged_batch_statement_mixed(session, table):
    t = kcv(table)
    ins = session.prepare("INSERT INTO %s (k, c, v) VALUES (?, ?, ?)" % t)
    batch = BatchStatement(batch_type=BatchType.LOGGED)
    batch.add(ins, (1, 1, "a"))
    batch.add(ins, (2, 1, "b"))  # another partition
    batch.add(SimpleStatement("INSERT INTO %s (k, c, v) VALUES (%%s, %%s, %%s)" % t), (1, 2, "c"))
    batch.add("INSERT INTO %s (k, c, v) VALUES (3, 3, 'd')" % t)
    session.execute(batch)
    assert all_rows(session, t) == [(1, 1, "a"), (1, 2, "c"), (2, 1, "b"), (3, 3, "d")]


def test_unlogged_batch_statement(session, table):
    t = kcv(table)
    ins = session.prepare("INSERT INTO %s (k, c, v) VALUES (?, ?, ?)" % t)
    upd = session.prepare("UPDATE %s SET v = ? WHERE k = ? AND c = ?" % t)
    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
    for c in range(10):
        batch.add(ins, (5, c, "x"))
    batch.add(upd, ("y", 6, 0))
    session.execute(batch)
    assert all_rows(session, t) == [(5, c, "x") for c in range(10)] + [(6, 0, "y")]


def test_batch_with_deletes_and_updates(session, table):
    t = kcv(table)
    session.execute("INSERT INTO %s (k, c, v) VALUES (1, 1, 'old')" % t)
    session.execute("INSERT INTO %s (k, c, v) VALUES (1, 2, 'gone')" % t)
    batch = BatchStatement()
    batch.add(SimpleStatement("UPDATE %s SET v = 'new' WHERE k = 1 AND c = 1" % t))
    batch.add(SimpleStatement("DELETE FROM %s WHERE k = 1 AND c = 2" % t))
    batch.add(SimpleStatement("INSERT INTO %s (k, c, v) VALUES (1, 3, 'added')" % t))
    session.execute(batch)
    assert all_rows(session, t) == [(1, 1, "new"), (1, 3, "added")]


def test_cql_text_batches(session, table):
    t = kcv(table)
    session.execute("""
        BEGIN BATCH
          INSERT INTO %(t)s (k, c, v) VALUES (1, 1, 'one');
          INSERT INTO %(t)s (k, c, v) VALUES (2, 2, 'two');
          UPDATE %(t)s SET v = 'three' WHERE k = 3 AND c = 3;
        APPLY BATCH
    """ % {"t": t})
    assert all_rows(session, t) == [(1, 1, "one"), (2, 2, "two"), (3, 3, "three")]

    session.execute(
        "BEGIN UNLOGGED BATCH "
        "INSERT INTO %(t)s (k, c, v) VALUES (4, 4, 'four') "
        "DELETE FROM %(t)s WHERE k = 1 AND c = 1 "
        "APPLY BATCH;" % {"t": t})
    assert all_rows(session, t) == [(2, 2, "two"), (3, 3, "three"), (4, 4, "four")]

    # Parameters in a text batch (client-side interpolation by the driver).
    session.execute("BEGIN BATCH INSERT INTO %s (k, c, v) VALUES (%%s, %%s, %%s) APPLY BATCH" % t,
                    (6, 6, "six"))
    assert (6, 6, "six") in all_rows(session, t)


def test_prepared_text_batch(session, table):
    t = kcv(table)
    p = session.prepare(
        "BEGIN BATCH INSERT INTO %(t)s (k, c, v) VALUES (?, ?, ?); "
        "INSERT INTO %(t)s (k, c, v) VALUES (?, ?, ?); APPLY BATCH" % {"t": t})
    session.execute(p, (1, 1, "a", 1, 2, "b"))
    assert all_rows(session, t) == [(1, 1, "a"), (1, 2, "b")]


def test_empty_batch(session):
    session.execute("BEGIN BATCH APPLY BATCH")
    session.execute("BEGIN UNLOGGED BATCH APPLY BATCH")
    session.execute("BEGIN BATCH APPLY BATCH;")


def test_batch_using_timestamp(session, table):
    t = kcv(table)
    session.execute(
        "BEGIN BATCH USING TIMESTAMP 1000 "
        "INSERT INTO %(t)s (k, c, v) VALUES (1, 1, 'a'); "
        "INSERT INTO %(t)s (k, c, v) VALUES (2, 1, 'b'); "
        "APPLY BATCH" % {"t": t})
    rows = session.execute("SELECT k, writetime(v) AS wt FROM %s" % t)
    assert sorted((r.k, r.wt) for r in rows) == [(1, 1000), (2, 1000)]

    # An older batch timestamp loses against the existing cells.
    session.execute(
        "BEGIN BATCH USING TIMESTAMP 500 UPDATE %s SET v = 'stale' WHERE k = 1 AND c = 1; APPLY BATCH" % t)
    assert session.execute("SELECT v FROM %s WHERE k = 1 AND c = 1" % t).one().v == "a"

    # Per-statement timestamps inside a batch.
    session.execute(
        "BEGIN BATCH "
        "INSERT INTO %(t)s (k, c, v) VALUES (3, 1, 'x') USING TIMESTAMP 42; "
        "INSERT INTO %(t)s (k, c, v) VALUES (4, 1, 'y') USING TIMESTAMP 43; "
        "APPLY BATCH" % {"t": t})
    rows = session.execute("SELECT k, writetime(v) AS wt FROM %s WHERE k IN (3, 4)" % t)
    assert sorted((r.k, r.wt) for r in rows) == [(3, 42), (4, 43)]


def test_client_timestamp_in_query_and_batch_frames(keyspace, table):
    """The driver sends its timestamp in the QUERY/EXECUTE/BATCH frame; the server must use it."""
    t = kcv(table)
    c = make_cluster(timestamp_generator=lambda: 777)
    try:
        s = c.connect(keyspace)
        ins = s.prepare("INSERT INTO %s (k, c, v) VALUES (?, ?, ?)" % t)
        batch = BatchStatement()
        batch.add(ins, (5, 1, "z"))
        batch.add(SimpleStatement("INSERT INTO %s (k, c, v) VALUES (6, 1, 'w')" % t))
        s.execute(batch)
        s.execute(ins, (7, 1, "p"))
        s.execute("INSERT INTO %s (k, c, v) VALUES (8, 1, 'q')" % t)
        rows = s.execute("SELECT k, writetime(v) AS wt FROM %s WHERE k IN (5, 6, 7, 8)" % t)
        assert sorted((r.k, r.wt) for r in rows) == [(5, 777), (6, 777), (7, 777), (8, 777)]
    finally:
        c.shutdown()

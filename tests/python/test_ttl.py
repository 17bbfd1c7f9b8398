"""TTL expiry, table default_time_to_live, and ttl() counting down."""

import time

from conftest import wait_until


def test_row_with_ttl_expires(session, table):
    t = table("(k int, c int, v text, PRIMARY KEY (k, c))")
    session.execute("INSERT INTO %s (k, c, v) VALUES (1, 1, 'short') USING TTL 2" % t)
    session.execute("INSERT INTO %s (k, c, v) VALUES (1, 2, 'forever')" % t)
    p = session.prepare("INSERT INTO %s (k, c, v) VALUES (?, ?, ?) USING TTL ?" % t)
    session.execute(p, (2, 1, "short too", 2))
    assert len(list(session.execute("SELECT * FROM %s" % t))) == 3
    start = time.monotonic()

    def expired():
        return [(r.k, r.c) for r in session.execute("SELECT k, c FROM %s" % t)] == [(1, 2)]

    assert wait_until(expired, timeout=6, interval=0.25), "TTL 2 rows still visible after 6 s"
    assert time.monotonic() - start >= 0.5, "rows expired too early"
    assert session.execute("SELECT * FROM %s WHERE k = 2" % t).one() is None
    assert session.execute("SELECT count(*) FROM %s" % t).one()[0] == 1


def test_cell_ttl_expires_but_row_stays(session, table):
    t = table("(k int PRIMARY KEY, a text, b text)")
    session.execute("INSERT INTO %s (k, a) VALUES (1, 'a')" % t)
    session.execute("UPDATE %s USING TTL 2 SET b = 'b' WHERE k = 1" % t)
    assert session.execute("SELECT b FROM %s WHERE k = 1" % t).one().b == "b"
    assert wait_until(lambda: session.execute("SELECT b FROM %s WHERE k = 1" % t).one().b is None,
                      timeout=5, interval=0.25)
    row = session.execute("SELECT a, b FROM %s WHERE k = 1" % t).one()
    assert (row.a, row.b) == ("a", None)


def test_table_default_time_to_live(session, table):
    t = table("(k int PRIMARY KEY, v int)", options="default_time_to_live = 100")
    session.execute("INSERT INTO %s (k, v) VALUES (1, 1)" % t)
    assert 95 <= session.execute("SELECT ttl(v) AS t FROM %s WHERE k = 1" % t).one().t <= 100
    # An explicit TTL overrides the default.
    session.execute("INSERT INTO %s (k, v) VALUES (2, 2) USING TTL 1000" % t)
    assert 990 <= session.execute("SELECT ttl(v) AS t FROM %s WHERE k = 2" % t).one().t <= 1000
    # TTL 0 means "no TTL", even with a table default.
    session.execute("INSERT INTO %s (k, v) VALUES (3, 3) USING TTL 0" % t)
    assert session.execute("SELECT ttl(v) AS t FROM %s WHERE k = 3" % t).one().t is None


def test_table_default_ttl_expires(session, table):
    t = table("(k int PRIMARY KEY, v int)", options="default_time_to_live = 1")
    session.execute("INSERT INTO %s (k, v) VALUES (1, 1)" % t)
    assert wait_until(lambda: session.execute("SELECT * FROM %s WHERE k = 1" % t).one() is None,
                      timeout=5, interval=0.25), "default_time_to_live = 1 row still visible"


def test_ttl_decreases(session, table):
    t = table("(k int PRIMARY KEY, v int)")
    session.execute("INSERT INTO %s (k, v) VALUES (1, 1) USING TTL 100" % t)
    first = session.execute("SELECT ttl(v) AS t FROM %s WHERE k = 1" % t).one().t
    assert 98 <= first <= 100
    started = time.monotonic()
    time.sleep(2.1)
    second = session.execute("SELECT ttl(v) AS t FROM %s WHERE k = 1" % t).one().t
    # A stalled machine may sleep longer than asked: the TTL falls by the
    # time that really passed, give or take the whole seconds it counts in.
    passed_s = time.monotonic() - started
    assert second < first
    assert first - second <= passed_s + 2

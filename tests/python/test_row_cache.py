"""The row cache, seen from outside: reads of flushed data are served from it
(hits and misses in /metrics), it stays right through writes, flushes,
deletes and TRUNCATE, remembers absent partitions, honours `BYPASS CACHE`
and `caching = {'enabled': 'false'}`, and under a small `--memory` evicts
instead of growing while every item stays readable. Shoal only: each test
runs its own one-shard node so the counters are its own.
"""
import re
import socket
import time

import pytest
from cassandra.query import SimpleStatement

from node import skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)


def metric(node, name, keyspace=None, **labels):
    """The sum of `name`'s samples (of `keyspace`, and with `labels`)."""
    total = 0.0
    for line in node.metrics().splitlines():
        m = re.match(r"^%s\{([^}]*)\} (\S+)$" % re.escape(name), line)
        if not m:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if keyspace is not None and got.get("keyspace") != keyspace:
            continue
        if any(got.get(k) != v for k, v in labels.items()):
            continue
        total += float(m.group(2))
    return total


def wait_until_cached(node, table, partitions, what, timeout_s=20):
    """Waits until ks.`table` has `partitions` in the row cache."""
    deadline = time.monotonic() + timeout_s
    while metric(node, "shoal_cache_partitions", "ks", table=table) < partitions:
        assert time.monotonic() < deadline, "%s within %d s" % (what, timeout_s)
        time.sleep(0.2)


def cache_counts(node, keyspace="ks"):
    return (metric(node, "shoal_cache_hits_total", keyspace), metric(node, "shoal_cache_misses_total", keyspace))


@pytest.fixture(scope="module")
def node():
    with temp_node("shoal-cache-", smp=1) as n:
        yield n


@pytest.fixture(scope="module")
def session(node):
    cluster, session = node.session()
    session.execute("CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    yield session
    cluster.shutdown()


def flushed_table(node, name, rows, extra=""):
    """ks.`name` on a fresh node with `rows` rows (k -> "<name>k"), flushed."""
    cluster, s = node.session()
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    fresh_table(s, name, extra)
    insert = s.prepare("INSERT INTO ks.%s (k, v) VALUES (?, ?)" % name)
    for k in range(rows):
        s.execute(insert, (k, "%s%d" % (name, k)))
    node.nodetool("flush", "ks", name)
    cluster.shutdown()


def fresh_table(session, name, extra=""):
    session.execute("DROP TABLE IF EXISTS ks.%s" % name)
    session.execute("CREATE TABLE ks.%s (k int PRIMARY KEY, v text)%s" % (name, extra))
    return session.prepare("SELECT v FROM ks.%s WHERE k = ?" % name)


def test_flushed_rows_are_served_from_the_cache_and_stay_right(node, session):
    read = fresh_table(session, "hot")
    insert = session.prepare("INSERT INTO ks.hot (k, v) VALUES (?, ?)")
    for k in range(200):
        session.execute(insert, (k, "v%d" % k))
    node.nodetool("flush", "ks", "hot")
    hits0, misses0 = cache_counts(node)
    for _ in range(3):
        for k in range(200):
            assert session.execute(read, (k,)).one().v == "v%d" % k
    hits, misses = cache_counts(node)
    # The flush put the rows in the cache: every read is a hit.
    assert (hits - hits0, misses - misses0) == (600, 0)
    # Writes over cached rows are seen at once, and after the next flush,
    # which updates the cached rows rather than dropping them.
    session.execute(insert, (7, "new"))
    session.execute("DELETE FROM ks.hot WHERE k = 8")
    assert session.execute(read, (7,)).one().v == "new"
    assert session.execute(read, (8,)).one() is None
    node.nodetool("flush", "ks", "hot")
    hits0, misses0 = cache_counts(node)
    assert session.execute(read, (7,)).one().v == "new"
    assert session.execute(read, (8,)).one() is None
    assert session.execute(read, (9,)).one().v == "v9"
    assert cache_counts(node) == (hits0 + 3, misses0)


def test_one_clustered_row_per_partition_reads_the_same_from_every_source(node, session):
    """A partition of one clustered row is held in the compact layout by
    the memtable and the cache and read into result rows from its bytes:
    every column, write time, TTL, paging, DISTINCT, a dropped column, a
    second row joining it and expiry read as from the general form."""
    session.execute("DROP TABLE IF EXISTS ks.one_row")
    session.execute("CREATE TABLE ks.one_row (k int, c int, v text, n bigint, b blob, PRIMARY KEY (k, c))")
    insert = session.prepare("INSERT INTO ks.one_row (k, c, v, n, b) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?")
    for k in range(10):
        session.execute(insert, (k, 10 * k, "v%d" % k, k - 5, b"x" * (k * 300), 1000 + k))
    session.execute("INSERT INTO ks.one_row (k, c, v) VALUES (10, 100, 'ttl') USING TTL 1000")
    select = session.prepare("SELECT k, c, v, n, b, WRITETIME(v), TTL(v) FROM ks.one_row WHERE k = ?")

    def rows():
        return [tuple(r) for k in range(11) for r in session.execute(select, (k,))]

    expected = [(k, 10 * k, "v%d" % k, k - 5, b"x" * (k * 300), 1000 + k, None) for k in range(10)]
    memtable = rows()
    assert memtable[:10] == expected
    assert memtable[10][:5] == (10, 100, "ttl", None, None) and 990 <= memtable[10][6] <= 1000
    node.nodetool("flush", "ks", "one_row")
    hits0, _ = cache_counts(node)
    for _ in range(2):
        assert rows()[:10] == expected
    assert cache_counts(node)[0] - hits0 == 22, "read from the cache"
    bypass = session.execute("SELECT k, c, v FROM ks.one_row WHERE k = 3 BYPASS CACHE").one()
    assert tuple(bypass) == (3, 30, "v3")
    # Paged one row at a time across the partitions of an IN.
    paged = session.execute(
        SimpleStatement("SELECT k, c FROM ks.one_row WHERE k IN (0, 1, 2, 3, 4, 5)", fetch_size=1))
    assert [tuple(r) for r in paged] == [(k, 10 * k) for k in range(6)]
    distinct = session.execute("SELECT DISTINCT k FROM ks.one_row WHERE k IN (1, 2, 99)")
    assert sorted(r.k for r in distinct) == [1, 2]
    # A second row joins the partition (memtable over the cached row).
    session.execute("INSERT INTO ks.one_row (k, c, v) VALUES (3, 31, 'second')")
    assert [(r.c, r.v) for r in session.execute(select, (3,))] == [(30, "v3"), (31, "second")]
    node.nodetool("flush", "ks", "one_row")
    assert [(r.c, r.v) for r in session.execute(select, (3,))] == [(30, "v3"), (31, "second")]
    # A dropped column's cells stay dropped when a column of its name is
    # added back.
    session.execute("ALTER TABLE ks.one_row DROP n")
    session.execute("ALTER TABLE ks.one_row ADD n bigint")
    assert [tuple(r) for r in session.execute("SELECT c, v, n FROM ks.one_row WHERE k = 4")] == [(40, "v4", None)]
    # An expired row is gone, from the memtable and flushed.
    session.execute("INSERT INTO ks.one_row (k, c, v) VALUES (11, 110, 'brief') USING TTL 1")
    time.sleep(2.1)
    assert session.execute(select, (11,)).one() is None
    node.nodetool("flush", "ks", "one_row")
    assert session.execute(select, (11,)).one() is None


def test_reads_after_a_restart_fill_the_cache():
    with temp_node("shoal-cache-restart-", smp=1) as node:
        flushed_table(node, "cold", 100)
        node.kill()
        node.start()
        cluster, s = node.session()
        try:
            read = s.prepare("SELECT v FROM ks.cold WHERE k = ?")
            for k in range(100):
                assert s.execute(read, (k,)).one().v == "cold%d" % k
            assert cache_counts(node) == (0, 100)
            for k in range(100):
                assert s.execute(read, (k,)).one().v == "cold%d" % k
            assert cache_counts(node) == (100, 100)
        finally:
            cluster.shutdown()


def test_deletions_and_rewrites_are_flushed_into_the_cache(node, session):
    read = fresh_table(session, "absent")
    session.execute("INSERT INTO ks.absent (k, v) VALUES (42, 'x')")
    node.nodetool("flush", "ks", "absent")
    session.execute("DELETE FROM ks.absent WHERE k = 42")
    node.nodetool("flush", "ks", "absent")
    hits0, misses0 = cache_counts(node)
    assert session.execute(read, (42,)).one() is None
    assert session.execute(read, (42,)).one() is None
    # Both flushes went into the cached partition: the deletion is a hit.
    assert cache_counts(node) == (hits0 + 2, misses0)
    session.execute("INSERT INTO ks.absent (k, v) VALUES (42, 'now')")
    assert session.execute(read, (42,)).one().v == "now"
    node.nodetool("flush", "ks", "absent")
    assert session.execute(read, (42,)).one().v == "now"
    assert cache_counts(node) == (hits0 + 4, misses0)


def test_truncate_empties_the_cache(node, session):
    read = fresh_table(session, "trunc")
    session.execute("INSERT INTO ks.trunc (k, v) VALUES (1, 'x')")
    node.nodetool("flush", "ks", "trunc")
    assert session.execute(read, (1,)).one().v == "x"
    session.execute("TRUNCATE ks.trunc")
    assert session.execute(read, (1,)).one() is None


def test_bypass_cache_neither_reads_nor_fills_it(node, session):
    fresh_table(session, "bypass")
    session.execute("INSERT INTO ks.bypass (k, v) VALUES (1, 'x')")
    node.nodetool("flush", "ks", "bypass")
    before = cache_counts(node)
    for _ in range(3):
        assert session.execute("SELECT v FROM ks.bypass WHERE k = 1 BYPASS CACHE").one().v == "x"
        assert session.execute("SELECT v FROM ks.bypass WHERE k = 2 BYPASS CACHE").one() is None
    assert cache_counts(node) == before


def test_caching_disabled_turns_the_cache_off_and_shows(node, session):
    read = fresh_table(session, "nocache", " WITH caching = {'enabled': 'false'}")
    session.execute("INSERT INTO ks.nocache (k, v) VALUES (1, 'x')")
    node.nodetool("flush", "ks", "nocache")
    before = cache_counts(node)
    for _ in range(3):
        assert session.execute(read, (1,)).one().v == "x"
    assert cache_counts(node) == before
    assert metric(node, "shoal_cache_partitions", "ks", table="nocache") == 0
    caching = session.execute(
        "SELECT caching FROM system_schema.tables WHERE keyspace_name = 'ks' AND table_name = 'nocache'").one().caching
    assert caching.get("enabled") == "false"
    # Turned back on, reads fill it again.
    session.execute("ALTER TABLE ks.nocache WITH caching = {'enabled': 'true'}")
    hits0, misses0 = cache_counts(node)
    assert session.execute(read, (1,)).one().v == "x"
    assert session.execute(read, (1,)).one().v == "x"
    assert cache_counts(node) == (hits0 + 1, misses0 + 1)


def pipelined(sock, payload, replies_end, count):
    """Sends `payload` and reads until `count` replies ending in `replies_end`."""
    sock.sendall(payload)
    data = b""
    while data.count(replies_end) < count:
        chunk = sock.recv(1 << 20)
        assert chunk, "connection closed"
        data += chunk
    return data


def test_a_small_memory_budget_evicts_and_loses_nothing():
    # 48 MiB for one shard: 60,000 items of 1000 bytes do not fit in it.
    # The row cache is under test, not memcached's eviction of items past
    # --memcache-max-size (which defaults to --memory): that is off.
    with temp_node("shoal-cache-small-", args=["--memory", "48M", "--memcache-max-size", "0"], smp=1) as node:
        value = b"x" * 1000
        items = 60_000
        with socket.create_connection(("127.0.0.1", node.memcache_port), timeout=60) as s:
            for start in range(0, items, 500):
                batch = b"".join(b"set key%06d 0 0 1000\r\n%s\r\n" % (i, value) for i in range(start, start + 500))
                assert pipelined(s, batch, b"STORED\r\n", 500).count(b"STORED\r\n") == 500
            node.nodetool("flush")
            for start in range(0, items, 500):
                batch = b"".join(b"mg key%06d v\r\n" % i for i in range(start, start + 500))
                got = pipelined(s, batch, b"\r\n" + value + b"\r\n", 500)
                assert got.count(b"VA 1000") == 500, "an item is missing between %d and %d" % (start, start + 500)
        evictions = metric(node, "shoal_cache_evictions_total", "memcache")
        assert evictions > 0
        budget = metric(node, "shoal_memory_budget_bytes")
        used = sum(metric(node, "shoal_memory_used_bytes", kind=k) for k in ("memtables", "cache", "index_cache"))
        assert budget == 48 << 20
        assert used <= budget, "%d bytes used of a %d budget" % (used, budget)
        cached = metric(node, "shoal_cache_partitions", "memcache")
        assert 20_000 < cached < items, cached
        info = node.nodetool("info")
        assert "Row Cache" in info and "Memory (shard 0)" in info


def test_a_restarted_node_reads_its_saved_hot_keys_back():
    with temp_node("shoal-cache-warm-", args=["--row-cache-save-period", "1"], smp=1) as node:
        flushed_table(node, "warm", 300)
        # The flush cached all 300; wait for a save, then crash.
        time.sleep(2.5)
        node.kill()
        node.start()
        wait_until_cached(node, "warm", 300, "the saved keys were not read back")
        misses = metric(node, "shoal_cache_misses_total", "ks")
        cluster, s = node.session()
        try:
            read = s.prepare("SELECT v FROM ks.warm WHERE k = ?")
            for k in range(300):
                assert s.execute(read, (k,)).one().v == "warm%d" % k
            assert metric(node, "shoal_cache_misses_total", "ks") == misses
        finally:
            cluster.shutdown()


def test_in_memory_tables_are_loaded_at_start_and_bounded():
    from cassandra import InvalidRequest

    with temp_node("shoal-cache-inmem-", args=["--in-memory-storage-size-mb", "2"], smp=1) as node:
        flushed_table(node, "mem", 200, " WITH in_memory = true")
        node.kill()
        node.start()
        # Loaded whole at start, without a read.
        wait_until_cached(node, "mem", 200, "the in-memory table was not loaded")
        cluster, s = node.session()
        try:
            misses = metric(node, "shoal_cache_misses_total", "ks")
            read = s.prepare("SELECT v FROM ks.mem WHERE k = ?")
            for k in range(200):
                assert s.execute(read, (k,)).one().v == "mem%d" % k
            assert metric(node, "shoal_cache_misses_total", "ks") == misses
            # 2 MiB for in-memory tables: writes past it fail, and say why.
            insert = s.prepare("INSERT INTO ks.mem (k, v) VALUES (?, ?)")
            with pytest.raises(InvalidRequest, match="in_memory_storage_size_mb"):
                for k in range(200, 5000):
                    s.execute(insert, (k, "x" * 1000))
            # Other tables are not bounded by it.
            fresh_table(s, "plain")
            s.execute("INSERT INTO ks.plain (k, v) VALUES (1, %s)", ("x" * 1000,))
        finally:
            cluster.shutdown()

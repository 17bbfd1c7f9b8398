"""Paging: 10,000 rows across partitions and 5,000 in one partition, read 100 at a time."""

import pytest

from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement

PARTITIONS = 2000
ROWS_PER_PARTITION = 5
TOTAL = PARTITIONS * ROWS_PER_PARTITION  # 10,000
WIDE_ROWS = 5000
PAGE = 100


def load(session, prepared, args):
    results = execute_concurrent_with_args(session, prepared, args, concurrency=64,
                                           raise_on_first_error=True)
    assert all(ok for ok, _ in results)


@pytest.fixture(scope="module")
def multi(session):
    """10,000 rows: 2,000 partitions x 5 clustering rows."""
    session.execute("CREATE TABLE paging_multi (k int, c int, v text, PRIMARY KEY (k, c))")
    ins = session.prepare("INSERT INTO paging_multi (k, c, v) VALUES (?, ?, ?)")
    load(session, ins, [(k, c, "v%d.%d" % (k, c))
                        for k in range(PARTITIONS) for c in range(ROWS_PER_PARTITION)])
    return "paging_multi"


@pytest.fixture(scope="module")
def wide(session):
    """5,000 clustering rows in partition 7 (plus a neighbour partition)."""
    session.execute("CREATE TABLE paging_wide (k int, c int, v int, PRIMARY KEY (k, c))")
    ins = session.prepare("INSERT INTO paging_wide (k, c, v) VALUES (?, ?, ?)")
    load(session, ins, [(7, c, c) for c in range(WIDE_ROWS)] + [(8, c, c) for c in range(10)])
    return "paging_wide"


def read_pages(session, stmt, params=None):
    """Fetch page by page; returns (rows, page_sizes)."""
    rs = session.execute(stmt, params)
    rows, sizes = [], []
    while True:
        sizes.append(len(rs.current_rows))
        rows.extend(rs.current_rows)
        if not rs.has_more_pages:
            break
        rs.fetch_next_page()
    return rows, sizes


def test_full_scan_every_row_once_in_token_order(session, multi):
    stmt = SimpleStatement("SELECT k, c, token(k) AS tk FROM %s" % multi, fetch_size=PAGE)
    rows, sizes = read_pages(session, stmt)
    assert len(rows) == TOTAL
    assert all(s <= PAGE for s in sizes)
    assert len(sizes) >= TOTAL // PAGE, "the server must page (fetch_size=%d)" % PAGE
    keys = [(r.k, r.c) for r in rows]
    assert len(set(keys)) == TOTAL, "a row was returned twice"
    assert set(keys) == {(k, c) for k in range(PARTITIONS) for c in range(ROWS_PER_PARTITION)}

    tokens = [r.tk for r in rows]
    assert all(a <= b for a, b in zip(tokens, tokens[1:])), "full scan must be in token order"
    # Each partition is contiguous and in clustering order.
    prev = None
    seen_partitions = set()
    for r in rows:
        if prev is not None and r.k == prev.k:
            assert r.c == prev.c + 1
        else:
            assert r.k not in seen_partitions, "partition %d split across the scan" % r.k
            seen_partitions.add(r.k)
            assert r.c == 0
        prev = r


def test_auto_paging_iteration_with_prepared(session, multi):
    p = session.prepare("SELECT k, c, v FROM %s" % multi)
    p.fetch_size = PAGE
    rs = session.execute(p)
    n = 0
    seen = set()
    for r in rs:  # the driver fetches further pages transparently
        assert r.v == "v%d.%d" % (r.k, r.c)
        seen.add((r.k, r.c))
        n += 1
    assert n == TOTAL and len(seen) == TOTAL


def test_count_star(session, multi):
    assert session.execute("SELECT count(*) FROM %s" % multi).one()[0] == TOTAL
    stmt = SimpleStatement("SELECT count(*) FROM %s" % multi, fetch_size=PAGE)
    assert session.execute(stmt).one()[0] == TOTAL


def test_single_partition_paging_in_clustering_order(session, wide):
    stmt = SimpleStatement("SELECT c FROM %s WHERE k = 7" % wide, fetch_size=PAGE)
    rows, sizes = read_pages(session, stmt)
    assert [r.c for r in rows] == list(range(WIDE_ROWS))
    assert len(sizes) >= WIDE_ROWS // PAGE
    assert all(s <= PAGE for s in sizes)

    stmt = SimpleStatement("SELECT c FROM %s WHERE k = 7 ORDER BY c DESC" % wide, fetch_size=PAGE)
    rows, _ = read_pages(session, stmt)
    assert [r.c for r in rows] == list(range(WIDE_ROWS - 1, -1, -1))

    p = session.prepare("SELECT c FROM %s WHERE k = ? AND c >= ? AND c < ?" % wide)
    p.fetch_size = 7
    rows, sizes = read_pages(session, p, (7, 1000, 1100))
    assert [r.c for r in rows] == list(range(1000, 1100))
    assert len(sizes) >= 100 // 7


def test_paging_with_limit(session, wide):
    stmt = SimpleStatement("SELECT c FROM %s WHERE k = 7 LIMIT 250" % wide, fetch_size=PAGE)
    rows, _ = read_pages(session, stmt)
    assert [r.c for r in rows] == list(range(250))
    stmt = SimpleStatement("SELECT k, c FROM %s LIMIT 5003" % wide, fetch_size=PAGE)
    rows, _ = read_pages(session, stmt)
    assert len(rows) == 5003


def test_per_partition_limit_holds_across_pages(session, wide):
    """A page boundary inside a partition does not restart its count."""
    for fetch_size in (1, 7, PAGE):
        stmt = SimpleStatement("SELECT k, c FROM %s PER PARTITION LIMIT 250" % wide, fetch_size=fetch_size)
        rows, _ = read_pages(session, stmt)
        assert sorted((r.k, r.c) for r in rows) == [(7, c) for c in range(250)] + [(8, c) for c in range(10)]


def test_manual_paging_state_resume(session, wide):
    stmt = SimpleStatement("SELECT c FROM %s WHERE k = 7" % wide, fetch_size=PAGE)
    first = session.execute(stmt)
    page1 = [r.c for r in first.current_rows]
    assert page1 == list(range(PAGE))
    state = first.paging_state
    assert state is not None
    # A new request carrying the opaque paging state continues where page 1 ended.
    second = session.execute(stmt, paging_state=state)
    assert [r.c for r in second.current_rows] == list(range(PAGE, 2 * PAGE))
    # The same state can be replayed.
    again = session.execute(stmt, paging_state=state)
    assert [r.c for r in again.current_rows] == list(range(PAGE, 2 * PAGE))


def test_a_page_ends_past_a_mebibyte_of_row_data(session):
    """ScyllaDB ends a page at about 1 MiB whatever the page size; an
    unpaged read (fetch_size 0) is not cut."""
    session.execute("CREATE TABLE paging_big (p int, c int, s text, PRIMARY KEY (p, c))")
    ins = session.prepare("INSERT INTO paging_big (p, c, s) VALUES (0, ?, ?)")
    load(session, ins, [(c, "x" * 100_000) for c in range(15)])
    first = session.execute(SimpleStatement("SELECT * FROM paging_big WHERE p = 0", fetch_size=1000))
    assert 10 <= len(first.current_rows) < 15 and first.has_more_pages
    assert [r.c for r in first] == list(range(15))  # the later page resumes after the cut
    limited = session.execute(SimpleStatement("SELECT * FROM paging_big WHERE p = 0 LIMIT 13", fetch_size=1000))
    assert [r.c for r in limited] == list(range(13))
    unpaged = session.execute(SimpleStatement("SELECT * FROM paging_big WHERE p = 0", fetch_size=0))
    assert len(unpaged.current_rows) == 15

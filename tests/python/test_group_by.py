"""GROUP BY over a prefix of the primary key: aggregates per group, other
selectors from the group's first row, Cassandra's errors, LIMIT and PER
PARTITION LIMIT counting groups, and paging that never splits or repeats a
group."""
import pytest
from cassandra import InvalidRequest
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement

WIDE = "(a int, b int, c int, d int, e int, PRIMARY KEY (a, b, c, d))"


def load(session, table, columns, rows):
    insert = session.prepare(f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * len(rows[0]))})")
    results = execute_concurrent_with_args(session, insert, rows, concurrency=64, raise_on_first_error=True)
    assert all(ok for ok, _ in results)


def rows_of(session, query, fetch_size=None):
    """Every row, fetched page by page; also the number of pages."""
    result = session.execute(SimpleStatement(query, fetch_size=fetch_size))
    rows, pages = list(result.current_rows), 1
    while result.has_more_pages:
        result.fetch_next_page()
        rows.extend(result.current_rows)
        pages += 1
    return [tuple(r) for r in rows], pages


@pytest.fixture
def wide(session, table):
    """Cassandra's own GROUP BY example data (SelectTest.testGroupByWithoutPaging)."""
    t = table(WIDE)
    load(session, t, "a, b, c, d, e", [
        (1, 2, 1, 3, 6), (1, 2, 2, 6, 12), (1, 3, 2, 12, 24), (1, 4, 2, 12, 24), (1, 4, 2, 6, 12),
        (2, 2, 3, 3, 6), (2, 4, 3, 6, 12), (4, 8, 2, 12, 24),
    ])
    session.execute(f"DELETE FROM {t} WHERE a = 3")  # a partition tombstone
    return t


def test_groups_by_partition_and_clustering_prefix(session, wide):
    one = f"SELECT a, b, e, count(b), max(e) FROM {wide} WHERE a = 1"
    assert rows_of(session, one + " GROUP BY a, b")[0] == [(1, 2, 6, 2, 12), (1, 3, 24, 1, 24), (1, 4, 12, 2, 24)]
    assert rows_of(session, one + " GROUP BY a, b, c")[0] == [
        (1, 2, 6, 1, 6), (1, 2, 12, 1, 12), (1, 3, 24, 1, 24), (1, 4, 12, 2, 24)]
    # The partition key pinned by `=` may be left out.
    assert rows_of(session, one + " GROUP BY b")[0] == rows_of(session, one + " GROUP BY a, b")[0]
    # By partition, across partitions (in token order, like any scan).
    by_partition = rows_of(session, f"SELECT a, count(*), sum(e), min(d) FROM {wide} GROUP BY a")[0]
    assert sorted(by_partition) == [(1, 5, 78, 3), (2, 2, 18, 3), (4, 1, 24, 12)]
    # Without aggregates: the first row of each group.
    assert rows_of(session, f"SELECT a, b, d FROM {wide} WHERE a = 1 GROUP BY a, b")[0] == [
        (1, 2, 3), (1, 3, 12), (1, 4, 6)]
    assert rows_of(session, f"SELECT * FROM {wide} WHERE a = 2 GROUP BY a")[0] == [(2, 2, 3, 3, 6)]
    # Reversed clustering order: groups and their first rows come reversed.
    assert rows_of(session, one + " GROUP BY a, b ORDER BY b DESC")[0] == [
        (1, 4, 24, 2, 24), (1, 3, 24, 1, 24), (1, 2, 12, 2, 12)]
    # Nothing matches: no groups.
    assert rows_of(session, f"SELECT a, count(*) FROM {wide} WHERE a = 3 GROUP BY a")[0] == []


def test_aggregates_without_group_by_take_other_columns_from_the_first_row(session, wide):
    assert session.execute(f"SELECT a, b, count(*), max(e) FROM {wide} WHERE a = 1").one() == (1, 2, 5, 24)
    assert tuple(session.execute(f"SELECT a, count(*) FROM {wide} WHERE a = 3").one()) == (None, 0)


def test_composite_partition_key(session, table):
    t = table("(a int, b int, c int, d int, PRIMARY KEY ((a, b), c))")
    load(session, t, "a, b, c, d", [(1, 1, 1, 3), (1, 1, 2, 12), (1, 2, 1, 12), (1, 2, 2, 6)])
    assert sorted(rows_of(session, f"SELECT a, b, max(d) FROM {t} GROUP BY a, b")[0]) == [(1, 1, 12), (1, 2, 12)]
    assert rows_of(session, f"SELECT a, b, max(d) FROM {t} WHERE a = 1 AND b = 2 GROUP BY b")[0] == [(1, 2, 12)]
    with pytest.raises(InvalidRequest, match="Group by is not supported on only a part of the partition key"):
        session.execute(f"SELECT a, b, max(d) FROM {t} GROUP BY a")


ORDER = "Group by currently only support groups of columns following their declared order in the PRIMARY KEY"


@pytest.mark.parametrize("clause, message", [
    ("WHERE a = 1 GROUP BY a, e", "Group by is currently only supported on the columns of the PRIMARY KEY, got e"),
    ("WHERE a = 1 GROUP BY c", ORDER),
    ("WHERE a = 1 GROUP BY a, c, b", ORDER),
    ("WHERE a = 1 GROUP BY a, a", ORDER),
    ("WHERE a IN (1, 2) GROUP BY b", ORDER),
    ("WHERE token(a) = token(1) GROUP BY b, c", ORDER),
    ("WHERE a = 1 GROUP BY a, b, z", "Undefined column name z"),
])
def test_invalid_groupings(session, wide, clause, message):
    with pytest.raises(InvalidRequest, match=message):
        session.execute(f"SELECT a, b, d, count(b), max(c) FROM {wide} {clause}")


def test_distinct_groups_only_by_partition(session, wide):
    assert sorted(rows_of(session, f"SELECT DISTINCT a FROM {wide} GROUP BY a")[0]) == [(1,), (2,), (4,)]
    with pytest.raises(InvalidRequest, match="Grouping on clustering columns is not allowed for SELECT DISTINCT"):
        session.execute(f"SELECT DISTINCT a FROM {wide} GROUP BY a, b")


def test_limits_count_groups(session, table):
    t = table("(a int, b int, c int, d int, PRIMARY KEY (a, b, c))")
    load(session, t, "a, b, c, d", [(a, b, c, a + b) for a in range(1, 5) for b in range(1, 5) for c in range(1, 5)])
    query = f"SELECT a, b, d, count(b), max(d) FROM {t} WHERE a IN (1, 2) GROUP BY a, b"
    unpaged = rows_of(session, query)[0]
    partitions = [r[0] for r in unpaged[::4]]  # in token order
    assert sorted(partitions) == [1, 2]
    every = [(a, b, a + b, 4, a + b) for a in partitions for b in range(1, 5)]
    assert unpaged == every
    assert rows_of(session, query + " LIMIT 3")[0] == every[:3]
    assert rows_of(session, query + " PER PARTITION LIMIT 1")[0] == [every[0], every[4]]
    assert rows_of(session, query + " PER PARTITION LIMIT 3 LIMIT 5")[0] == every[:3] + every[4:6]
    # Paged one group at a time, the partition's count carries over pages.
    for fetch_size in (1, 2, 3):
        assert rows_of(session, query + " PER PARTITION LIMIT 3", fetch_size)[0] == every[:3] + every[4:7]
        assert rows_of(session, query + " LIMIT 5", fetch_size)[0] == every[:5]
    # Over a token range, with filtering.
    scan = f"SELECT a, b, count(*) FROM {t} WHERE b = 1 AND c IN (1, 2) GROUP BY a PER PARTITION LIMIT 1 ALLOW FILTERING"
    assert sorted(rows_of(session, scan, 1)[0]) == [(a, 1, 2) for a in range(1, 5)]


def test_paging_never_splits_or_repeats_a_group(session, table):
    """Groups far larger than a page, and one spanning the server's internal
    read chunks of 10,000 rows."""
    t = table("(k int, g int, c int, v int, PRIMARY KEY (k, g, c))")
    sizes = {(0, 0): 10_500, (0, 1): 7, (1, 0): 1, (1, 1): 50, (2, 5): 3}
    load(session, t, "k, g, c, v", [(k, g, c, c) for (k, g), n in sizes.items() for c in range(n)])
    expected = sorted((k, g, n, n * (n - 1) // 2, 0) for (k, g), n in sizes.items())
    query = f"SELECT k, g, count(*), sum(v), min(c) FROM {t} GROUP BY k, g"
    unpaged, _ = rows_of(session, query)
    assert sorted(unpaged) == expected
    for fetch_size in (1, 2, 4):
        rows, pages = rows_of(session, query, fetch_size)
        assert rows == unpaged, f"fetch_size {fetch_size}"
        assert pages >= len(expected) // fetch_size


def test_counters_group_by(session, table):
    t = table("(k int, c int, hits counter, PRIMARY KEY (k, c))")
    for k, c, n in [(1, 1, 2), (1, 2, 3), (2, 1, 4), (1, 1, 5)]:
        session.execute(f"UPDATE {t} SET hits = hits + {n} WHERE k = {k} AND c = {c}")
    assert sorted(rows_of(session, f"SELECT k, sum(hits), count(*) FROM {t} GROUP BY k")[0]) == [(1, 10, 2), (2, 4, 1)]

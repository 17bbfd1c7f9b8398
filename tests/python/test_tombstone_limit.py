"""`query_tombstone_page_limit`: a paged read stops a page early once its
replica has passed that many tombstones (partition tombstones, deleted or
emptied rows, both bounds of each range tombstone), returning fewer rows,
maybe none, and a paging state that resumes where it stopped, as in
ScyllaDB (its test/cqlpy/test_tombstone_limit.py, whose cases are here).
Unpaged reads are not cut.

The last test compares seeded random paged reads (random page sizes,
random small limits, forward and reversed, whole partitions, slices and
scans) with a model of the data through deletes of every kind, a flush
and more deletes over the flushed data: no row may be lost or repeated.
SHOAL_TOMBSTONE_SEED replays a run (the seed is printed on failure).
"""
import os
import random

import pytest
from cassandra.query import SimpleStatement

from conftest import IS_CASSANDRA
from node import skip_reason, temp_node
from test_live_config import config as config_value

pytestmark = pytest.mark.skipif(IS_CASSANDRA, reason="query_tombstone_page_limit is ScyllaDB's")

LIMIT = "query_tombstone_page_limit"


@pytest.fixture(scope="module")
def lowered(admin):
    with config_value(admin, LIMIT, "10"):
        yield


@pytest.fixture(scope="module")
def t(session):
    session.execute("CREATE TABLE tl (pk int, ck int, v int, PRIMARY KEY (pk, ck))")
    return "tl"


_next_key = [0]


def unique_key():
    _next_key[0] += 1
    return _next_key[0]


def pages_of(session, query, column, fetch_size=10):
    results = session.execute(SimpleStatement(query, fetch_size=fetch_size))
    pages = []
    while True:
        pages.append([getattr(r, column) for r in results.current_rows])
        if not results.has_more_pages:
            return pages
        results.fetch_next_page()


def check_both(session, t, pk, expected, where_extra=""):
    """The pages of the partition, read plain and with a filter every row passes."""
    assert pages_of(session, f"SELECT * FROM {t} WHERE pk = {pk}{where_extra}", "ck") == expected
    query = f"SELECT * FROM {t} WHERE pk = {pk} AND v = 0{where_extra} ALLOW FILTERING"
    assert pages_of(session, query, "ck") == expected


def test_config_entry_defaults_and_updates(admin):
    row = admin.execute(f"SELECT source, type, value FROM system.config WHERE name = '{LIMIT}'").one()
    assert (row.source, row.type, row.value) == ("default", "integer", "10000")
    with config_value(admin, LIMIT, "7"):
        assert admin.execute(f"SELECT value FROM system.config WHERE name = '{LIMIT}'").one().value == "7"
    with pytest.raises(Exception, match="Invalid value 'x' for query_tombstone_page_limit"):
        admin.execute(f"UPDATE system.config SET value = 'x' WHERE name = '{LIMIT}'")


def with_deletions(session, t, live, deleted, where="ck = ?"):
    """A new partition holding rows `live` and the deletions `deleted`
    (argument tuples of `DELETE ... WHERE pk = ? AND <where>`); the two
    touch different rows, so their order does not matter."""
    insert = session.prepare(f"INSERT INTO {t} (pk, ck, v) VALUES (?, ?, 0)")
    delete = session.prepare(f"DELETE FROM {t} WHERE pk = ? AND {where}")
    pk = unique_key()
    for ck in live:
        session.execute(insert, (pk, ck))
    for args in deleted:
        session.execute(delete, (pk, *args))
    return pk


RANGE = "ck > ? AND ck < ?"


def test_row_tombstone_prefix(session, t, lowered):
    pk = with_deletions(session, t, [31], [(ck,) for ck in range(30)])
    check_both(session, t, pk, [[], [], [], [31]])


def test_row_tombstone_span(session, t, lowered):
    pk = with_deletions(session, t, [*range(11), 51], [(ck,) for ck in range(30, 50)])
    check_both(session, t, pk, [list(range(10)), [10], [], [51]])


def test_range_tombstone_prefix(session, t, lowered):
    # 12 range tombstones: 24 bounds.
    pk = with_deletions(session, t, [2000], [(ck, ck + 3) for ck in range(0, 12 * 4, 4)], RANGE)
    check_both(session, t, pk, [[], [], [2000]])


def test_range_tombstone_span(session, t, lowered):
    pk = with_deletions(session, t, [*range(12), 2000], [(ck, ck + 3) for ck in range(32, 32 + 10 * 4, 4)], RANGE)
    check_both(session, t, pk, [list(range(10)), [10, 11], [], [2000]])


def test_range_tombstone_bounds_resume_mid_partition(session, t, lowered):
    """Inclusive bounds, and live rows written inside deleted ranges after
    the deletion: a page cut on a bound resumes exactly there."""
    delete = session.prepare(f"DELETE FROM {t} USING TIMESTAMP 10 WHERE pk = ? AND ck >= ? AND ck <= ?")
    insert = session.prepare(f"INSERT INTO {t} (pk, ck, v) VALUES (?, ?, ?) USING TIMESTAMP 20")
    pk = unique_key()
    for ck in range(0, 40, 4):
        session.execute(delete, (pk, ck, ck + 2))
    live = [0, 2, 5, 18, 38, 39]
    for ck in live:
        session.execute(insert, (pk, ck, 0))
    for fetch_size in (1, 2, 3, 10):
        for order, want in (("", live), (" ORDER BY ck DESC", live[::-1])):
            pages = pages_of(session, f"SELECT * FROM {t} WHERE pk = {pk}{order}", "ck", fetch_size)
            assert [ck for page in pages for ck in page] == want, (fetch_size, order, pages)
            assert all(len(page) <= fetch_size for page in pages)
            assert len(pages) >= 2


def emptied_rows(session, t, rows, emptied):
    """A new partition of `rows` rows written by UPDATE (no row marker),
    the `emptied` ones then left empty by deleting their only cell."""
    upsert = session.prepare(f"UPDATE {t} SET v = ? WHERE pk = ? AND ck = ?")
    delete = session.prepare(f"DELETE v FROM {t} WHERE pk = ? AND ck = ?")
    pk = unique_key()
    for ck in rows:
        session.execute(upsert, (0, pk, ck))
    for ck in emptied:
        session.execute(delete, (pk, ck))
    return pk


def test_empty_row_prefix(session, t, lowered):
    pk = emptied_rows(session, t, range(20), range(16))
    check_both(session, t, pk, [[], list(range(16, 20))])


def test_empty_row_span(session, t, lowered):
    pk = emptied_rows(session, t, range(30), range(5, 28))
    check_both(session, t, pk, [list(range(5)), [], list(range(28, 30))])


def test_reversed_row_tombstones(session, t, lowered):
    pk = with_deletions(session, t, [3, 100], [(ck,) for ck in range(30, 55)])
    # 100, then 54..45 (10 tombstones), 44..35, 34..30 and 3.
    check_both(session, t, pk, [[100], [], [3]], " ORDER BY ck DESC")


def check_pages_many_partitions(pages, expected):
    """The non-empty pages at the given indexes (negative from the end),
    and at least one empty page."""
    expected_pages = {(i if i >= 0 else len(pages) + i): [pk] for i, pk in expected.items()}
    assert len(pages) >= len(expected_pages) + 1
    for i, page in enumerate(pages):
        assert page == expected_pages.get(i, [])


@pytest.mark.parametrize("columns,write,filtered", [
    ("pk int, ck int, v int, PRIMARY KEY (pk, ck)", "INSERT INTO {t} (pk, ck, v) VALUES (?, 0, 0)", "v = 0"),
    ("pk int, ck int, v int, s int static, PRIMARY KEY (pk, ck)", "UPDATE {t} SET s = 0 WHERE pk = ?", "s = 0"),
])
@pytest.mark.parametrize("span", [False, True])
def test_partition_tombstones(session, table, lowered, columns, write, filtered, span):
    tbl = table(f"({columns})")
    upsert = session.prepare(write.format(t=tbl))
    for pk in range(400):
        session.execute(upsert, (pk,))
    all_pks = [r.pk for r in session.execute(f"SELECT DISTINCT pk FROM {tbl}")]
    delete = session.prepare(f"DELETE FROM {tbl} WHERE pk = ?")
    kept = {0: all_pks[0], -1: all_pks[-1]} if span else {-1: all_pks[-1]}
    for pk in (all_pks[1:-1] if span else all_pks[:-1]):
        session.execute(delete, (pk,))
    check_pages_many_partitions(pages_of(session, f"SELECT * FROM {tbl}", "pk"), kept)
    query = f"SELECT * FROM {tbl} WHERE {filtered} ALLOW FILTERING"
    check_pages_many_partitions(pages_of(session, query, "pk"), kept)


def test_empty_table(session, table, lowered):
    tbl = table("(pk int, ck int, v int, PRIMARY KEY (pk, ck))")
    assert list(session.execute(f"SELECT * FROM {tbl}")) == []
    assert list(session.execute(f"SELECT * FROM {tbl} WHERE pk = 0")) == []
    assert list(session.execute(f"SELECT * FROM {tbl} WHERE v = 0 ALLOW FILTERING")) == []


def test_unpaged_query(session, t, lowered):
    pk = emptied_rows(session, t, range(20), range(16))
    rows = list(session.execute(SimpleStatement(f"SELECT * FROM {t} WHERE pk = {pk}", fetch_size=None)))
    assert len(rows) == 4


def test_filtering_query_tombstone_suffix_last_position(session, table, lowered):
    """A short page ends after its run of tombstones; the next page does not
    read them again."""
    tbl = table("(pk int, ck int, v int, PRIMARY KEY (pk, ck))")
    insert = session.prepare(f"INSERT INTO {tbl} (pk, ck, v) VALUES (?, ?, ?)")
    delete = session.prepare(f"DELETE FROM {tbl} WHERE pk = ? AND ck = ?")
    for ck in range(10):
        session.execute(insert, (0, ck, ck % 2))
    for ck in range(10, 25):
        session.execute(delete, (0, ck))
    for ck in range(25, 30):
        session.execute(insert, (0, ck, ck % 2))
    query = SimpleStatement(f"SELECT * FROM {tbl} WHERE pk = 0 AND v = 0 ALLOW FILTERING", fetch_size=20)
    res = session.execute(query)
    assert [r.ck for r in res.current_rows] == [0, 2, 4, 6, 8]
    assert res.has_more_pages
    res.fetch_next_page()
    assert [r.ck for r in res.current_rows] == [26, 28]
    assert not res.has_more_pages


def test_in_query_stops_on_tombstones(session, t, lowered):
    a = with_deletions(session, t, [20], [(ck,) for ck in range(15)])
    b = with_deletions(session, t, [1], [])
    pages = pages_of(session, f"SELECT * FROM {t} WHERE pk IN ({a}, {b})", "ck")
    assert [ck for page in pages for ck in page] == [20, 1]
    assert pages[0] == []


# ---------------------------------------------------------------------------
# Randomized: paged reads against a model.

SEED = int(os.environ.get("SHOAL_TOMBSTONE_SEED", str(random.randrange(1 << 30))))
PARTITIONS = 6
CKS = 40


class Model:
    """Rows by partition: ck -> [has a row marker, v]; statics by partition.
    Every write has a timestamp above all before it, so the last one wins."""

    def __init__(self):
        self.rows = {pk: {} for pk in range(PARTITIONS)}
        self.statics = {}

    def live(self, pk):
        return {ck: row[1] for ck, row in sorted(self.rows[pk].items()) if row[0] or row[1] is not None}

    def expected(self, pk, lo=None, hi=None, reverse=False):
        rows = [(pk, ck, v, self.statics.get(pk)) for ck, v in self.live(pk).items()
                if (lo is None or ck > lo) and (hi is None or ck <= hi)]
        if not rows and lo is None and hi is None and self.statics.get(pk) is not None:
            return [(pk, None, None, self.statics[pk])]
        return rows[::-1] if reverse else rows


def random_writes(rng, model, stamp, n):
    statements = []
    for _ in range(n):
        pk = rng.randrange(PARTITIONS)
        rows = model.rows[pk]
        ts = next(stamp)
        kind = rng.random()
        if kind < 0.3:
            ck, v = rng.randrange(CKS), rng.randrange(3)
            statements.append(f"INSERT INTO t (pk, ck, v) VALUES ({pk}, {ck}, {v}) USING TIMESTAMP {ts}")
            rows[ck] = [True, v]
        elif kind < 0.45:
            ck, v = rng.randrange(CKS), rng.randrange(3)
            statements.append(f"UPDATE t USING TIMESTAMP {ts} SET v = {v} WHERE pk = {pk} AND ck = {ck}")
            rows.setdefault(ck, [False, None])[1] = v
        elif kind < 0.5:
            statements.append(f"UPDATE t USING TIMESTAMP {ts} SET s = {ts} WHERE pk = {pk}")
            model.statics[pk] = ts
        elif kind < 0.65:
            ck = rng.randrange(CKS)
            statements.append(f"DELETE FROM t USING TIMESTAMP {ts} WHERE pk = {pk} AND ck = {ck}")
            rows[ck] = [False, None]
        elif kind < 0.75:
            ck = rng.randrange(CKS)
            statements.append(f"DELETE v FROM t USING TIMESTAMP {ts} WHERE pk = {pk} AND ck = {ck}")
            if ck in rows:
                rows[ck][1] = None
        elif kind < 0.97:
            lo = rng.randrange(-1, CKS)
            hi = lo + rng.randrange(1, 12)
            lo_op, hi_op = rng.choice([">", ">="]), rng.choice(["<", "<="])
            statements.append(f"DELETE FROM t USING TIMESTAMP {ts} WHERE pk = {pk} "
                              f"AND ck {lo_op} {lo} AND ck {hi_op} {hi}")
            for ck in list(rows):
                above = ck > lo if lo_op == ">" else ck >= lo
                below = ck < hi if hi_op == "<" else ck <= hi
                if above and below:
                    rows[ck] = [False, None]
        else:
            statements.append(f"DELETE FROM t USING TIMESTAMP {ts} WHERE pk = {pk}")
            model.rows[pk] = {}
            model.statics.pop(pk, None)
    return statements


def paged(session, query, fetch_size):
    results = session.execute(SimpleStatement(query, fetch_size=fetch_size))
    rows, pages = [], 0
    while True:
        pages += 1
        assert len(results.current_rows) <= fetch_size
        rows.extend((r.pk, r.ck, r.v, r.s) for r in results.current_rows)
        if not results.has_more_pages:
            return rows
        assert pages < 10_000, "paging does not end"
        results.fetch_next_page()


def check_reads(session, rng, model, stage, reads=40):
    failures = []
    for _ in range(reads):
        limit, fetch_size = rng.randrange(1, 9), rng.randrange(1, 8)
        session.execute(f"UPDATE system.config SET value = '{limit}' WHERE name = '{LIMIT}'")
        pk, shape = rng.randrange(PARTITIONS), rng.random()
        if shape < 0.2:
            query = "SELECT pk, ck, v, s FROM t"
            want = sorted(r for p in range(PARTITIONS) for r in model.expected(p))
            got = paged(session, query, fetch_size)
            # Ring order across partitions; the rows of each stay in order.
            got_sorted = sorted(got, key=lambda r: (r[0], -1 if r[1] is None else r[1]))
            if got_sorted != sorted(want, key=lambda r: (r[0], -1 if r[1] is None else r[1])):
                failures.append((query, limit, fetch_size, got, want))
            continue
        if shape < 0.6:
            order = rng.random() < 0.5
            query = f"SELECT pk, ck, v, s FROM t WHERE pk = {pk}" + (" ORDER BY ck DESC" if order else "")
            want = model.expected(pk, reverse=order)
        else:
            lo = rng.randrange(-1, CKS)
            hi = lo + rng.randrange(1, 20)
            order = rng.random() < 0.5
            query = (f"SELECT pk, ck, v, s FROM t WHERE pk = {pk} AND ck > {lo} AND ck <= {hi}"
                     + (" ORDER BY ck DESC" if order else ""))
            want = model.expected(pk, lo, hi, reverse=order)
        got = paged(session, query, fetch_size)
        if got != want:
            failures.append((query, limit, fetch_size, got, want))
    assert not failures, "seed %d, %s: %d reads differ from the model, first: %s" % (
        SEED, stage, len(failures), failures[0])


@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_random_paged_reads_match_the_model():
    print("SHOAL_TOMBSTONE_SEED=%d" % SEED)
    rng = random.Random(SEED)
    model = Model()
    stamp = iter(range(1, 1 << 40))
    with temp_node("shoal-tombstones-") as node:
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.set_keyspace("ks")
        session.execute("CREATE TABLE t (pk int, ck int, v int, s int static, PRIMARY KEY (pk, ck))")
        for stage in ("memtable", "flushed", "memtable over sstables", "flushed twice"):
            for statement in random_writes(rng, model, stamp, 150):
                session.execute(statement)
            if stage.startswith("flushed"):
                node.nodetool("flush")
            check_reads(session, rng, model, stage)
        cluster.shutdown()

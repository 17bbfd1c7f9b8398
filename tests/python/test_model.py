"""Randomized differential test of CQL writes and reads against a model.

Each case is one partition with its own seeded random statements: INSERTs
and UPDATEs (atomic, static, map and set columns, several assignments of
one cell in a statement), row, column, element, static, partition and
range DELETEs (ranges empty, inverted, open, on a prefix), TTLs and client
timestamps drawn from a narrow range so that ties are common. The model
applies them by the rules Shoal reconciles versions with (docs/
write-path.md): the higher timestamp wins; at one timestamp a deletion
beats a value, an expiring value beats one that never expires, the later
expiry beats the earlier, then the greater value (ScyllaDB's order); a deletion at T shadows
what was written at or before T; setting a collection writes a tombstone
one microsecond below it, deleting one writes it at T.

The node runs with `--commitlog-sync batch`. Every case's partition is read
back (the whole partition, paged; a random slice; reversed; bypassing the
cache) and compared with the model at each step: from memtables, after a
flush (SSTables, row cache), after more writes over flushed data, after a
major compaction, and after a kill -9 and restart (commitlog replay).

Writes carry their own timestamps, so the model is independent of the order
the server applies them in, and they run concurrently. A TTL is either
1 s, expired before any read (the model treats the cell as an expired one:
dead, shadowing older versions), or long and never reached; long-TTL writes
get timestamps of their own, above the narrow range, since two of them at
one timestamp would be ordered by wall-clock expiry, which the model cannot
know.

Secondary indexes on v, s (static), c2 (a clustering column), the map's
keys and values and the set's elements are created after the first
writes (so they are built from existing data while later writes race the
build), and every check also queries each index for every value and
compares the rows with the model's rows holding that value, across all
partitions. So do two materialized views, created and built alongside: one
keyed by the regular column v (rows move between view partitions as v
changes), one by the clustering column c2 (a view row lives as long as
its base row); each view partition is read for every value and compared
with the model's rows, collections included.

SHOAL_MODEL_SEED replays a run (the seed is printed on failure);
SHOAL_MODEL_CASES sets the number of partitions (CI: 1500).
"""
import os
import random
import time

import pytest
from cassandra.concurrent import execute_concurrent
from cassandra.query import SimpleStatement

from node import skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

CASES = int(os.environ.get("SHOAL_MODEL_CASES", "1500"))
SEED = int(os.environ.get("SHOAL_MODEL_SEED", str(random.randrange(1 << 30))))
OPS_PER_PHASE = 8
KEYS = range(4)  # c1, c2, map keys and set elements, values
TS_MAX = 40
SHORT_TTL_S = 1
LONG_TTL_S = 1_000_000
NEVER = -(1 << 62)

TABLE = ("CREATE TABLE ks.t (p int, c1 int, c2 int, s int static, v int, w int, "
         "mp map<int, int>, st set<int>, PRIMARY KEY (p, c1, c2)) "
         "WITH CLUSTERING ORDER BY (c1 ASC, c2 DESC)")

# Ranks of a live version at one timestamp, by its TTL (None: no TTL): an
# expiring value over one that never expires, then the later expiry.
EXPIRY_RANK = {"long": 3, "short": 2, None: 1}


class Cell:
    __slots__ = ("ts", "dead", "value", "ttl")

    def __init__(self, ts, dead, value=None, ttl=None):
        self.ts, self.dead, self.value, self.ttl = ts, dead, value, ttl

    def beats(self, other):
        if self.ts != other.ts:
            return self.ts > other.ts
        if self.dead or other.dead:
            return self.dead and not other.dead
        return (EXPIRY_RANK[self.ttl], self.value) > (EXPIRY_RANK[other.ttl], other.value)

    def live(self, shadow_ts):
        return not self.dead and self.ttl != "short" and self.ts > shadow_ts


def put(cells, key, cell):
    current = cells.get(key)
    if current is None or cell.beats(current):
        cells[key] = cell


class Row:
    def __init__(self):
        self.marker = None  # (ts, ttl)
        self.deleted_ts = NEVER
        self.cells = {}  # "v", "w" -> Cell
        self.tombs = {"mp": NEVER, "st": NEVER}
        self.elements = {"mp": {}, "st": {}}


class Partition:
    def __init__(self):
        self.deleted_ts = NEVER
        self.static = {}  # "s" -> Cell
        self.rows = {}  # (c1, c2) -> Row
        self.ranges = []  # (predicate, ts)

    def row(self, key):
        return self.rows.setdefault(key, Row())

    def visible(self):
        """(static value, [(c1, c2, v, w, mp, st)]) in clustering order."""
        s = self.static.get("s")
        static = s.value if s is not None and s.live(self.deleted_ts) else None
        rows = []
        for (c1, c2) in sorted(self.rows, key=lambda k: (k[0], -k[1])):
            row = self.rows[(c1, c2)]
            shadow = max([self.deleted_ts, row.deleted_ts] + [ts for pred, ts in self.ranges if pred(c1, c2)])
            marker = row.marker is not None and row.marker[1] != "short" and row.marker[0] > shadow
            values = {name: (cell.value if cell.live(shadow) else None) for name, cell in row.cells.items()}
            collections = {}
            for name in ("mp", "st"):
                at = max(shadow, row.tombs[name])
                live = {k: c.value for k, c in row.elements[name].items() if c.live(at)}
                collections[name] = (live if name == "mp" else set(live)) or None
            if marker or any(x is not None for x in values.values()) or any(collections.values()):
                rows.append((c1, c2, values.get("v"), values.get("w"), collections["mp"], collections["st"]))
        return static, rows


class Writer:
    """Random statements for one partition, applied to its model as made."""

    def __init__(self, p, rng):
        self.p, self.rng, self.model = p, rng, Partition()
        self.long_ts = 1000

    def using(self):
        rng = self.rng
        ttl = rng.choices([None, "short", "long"], [80, 15, 5])[0]
        if ttl == "long":
            self.long_ts += 1
            ts = self.long_ts
        else:
            ts = rng.randint(1, TS_MAX)
        clause = "USING TIMESTAMP %d" % ts
        if ttl is not None:
            clause += " AND TTL %d" % (SHORT_TTL_S if ttl == "short" else LONG_TTL_S)
        return ts, ttl, clause

    def k(self):
        return self.rng.choice(KEYS)

    def statement(self):
        kind = self.rng.choices(
            ["insert", "update", "update_static", "delete_row", "delete_columns", "delete_static",
             "delete_range", "delete_partition"],
            [22, 30, 5, 8, 10, 3, 20, 2])[0]
        return getattr(self, kind)()

    def key(self):
        return self.k(), self.k()

    def where_key(self, key):
        return "p = %d AND c1 = %d AND c2 = %d" % (self.p, key[0], key[1])

    def insert(self):
        ts, ttl, using = self.using()
        rng, m = self.rng, self.model
        if rng.random() < 0.1:  # only the static column: no row
            value = self.k()
            put(m.static, "s", Cell(ts, False, value, ttl))
            return "INSERT INTO ks.t (p, s) VALUES (%d, %d) %s" % (self.p, value, using)
        key = self.key()
        row = m.row(key)
        marker = (ts, ttl)
        if row.marker is None or (marker[0], EXPIRY_RANK[ttl]) > (row.marker[0], EXPIRY_RANK[row.marker[1]]):
            row.marker = marker
        names, values = ["p", "c1", "c2"], [str(self.p), str(key[0]), str(key[1])]
        for name in ("v", "w"):
            if rng.random() < 0.6:
                value = self.k() if rng.random() < 0.85 else None
                names.append(name)
                values.append("null" if value is None else str(value))
                put(row.cells, name, Cell(ts, value is None, value, ttl))
        if rng.random() < 0.2:
            value = self.k()
            names.append("s")
            values.append(str(value))
            put(m.static, "s", Cell(ts, False, value, ttl))
        for name in ("mp", "st"):
            if rng.random() < 0.3:
                names.append(name)
                values.append(self.set_collection(row, name, ts, ttl))
        return "INSERT INTO ks.t (%s) VALUES (%s) %s" % (", ".join(names), ", ".join(values), using)

    def set_collection(self, row, name, ts, ttl):
        """A whole new value (or null) for a collection: its CQL literal."""
        rng = self.rng
        if rng.random() < 0.15:
            row.tombs[name] = max(row.tombs[name], ts)
            return "null"
        row.tombs[name] = max(row.tombs[name], ts - 1)
        items = sorted(set(rng.sample(KEYS, rng.randint(0, 3))))
        if name == "mp":
            pairs = [(key, self.k()) for key in items]
            for key, value in pairs:
                put(row.elements["mp"], key, Cell(ts, False, value, ttl))
            return "{%s}" % ", ".join("%d: %d" % pair for pair in pairs)
        for item in items:
            put(row.elements["st"], item, Cell(ts, False, b"", ttl))
        return "{%s}" % ", ".join(map(str, items))

    def assignment(self, row, ts, ttl):
        rng = self.rng
        kind = rng.choice(["atomic", "map_element", "map_add", "set_add", "set_remove", "whole"])
        if kind == "atomic":
            name = rng.choice(["v", "w"])
            value = self.k() if rng.random() < 0.85 else None
            put(row.cells, name, Cell(ts, value is None, value, ttl))
            return "%s = %s" % (name, "null" if value is None else value)
        if kind == "map_element":
            key, value = self.k(), self.k()
            put(row.elements["mp"], key, Cell(ts, False, value, ttl))
            return "mp[%d] = %d" % (key, value)
        if kind == "map_add":
            pairs = {self.k(): self.k() for _ in range(rng.randint(1, 2))}
            for key, value in pairs.items():
                put(row.elements["mp"], key, Cell(ts, False, value, ttl))
            return "mp = mp + {%s}" % ", ".join("%d: %d" % kv for kv in pairs.items())
        if kind in ("set_add", "set_remove"):
            items = sorted({self.k() for _ in range(rng.randint(1, 2))})
            for item in items:
                put(row.elements["st"], item, Cell(ts, kind == "set_remove", b"", ttl))
            return "st = st %s {%s}" % ("+" if kind == "set_add" else "-", ", ".join(map(str, items)))
        name = rng.choice(["mp", "st"])
        return "%s = %s" % (name, self.set_collection(row, name, ts, ttl))

    def update(self):
        ts, ttl, using = self.using()
        rng = self.rng
        c2s = sorted({self.k() for _ in range(rng.randint(1, 2))})
        c1 = self.k()
        # One statement's assignments, applied to every row it names; the
        # same random choices for each row (replayed from one state).
        state = rng.getstate()
        assignments = None
        for c2 in c2s:
            rng.setstate(state)
            row = self.model.row((c1, c2))
            made = [self.assignment(row, ts, ttl) for _ in range(rng.randint(1, 3))]
            assignments = assignments or made
        if rng.random() < 0.15:
            value = self.k()
            put(self.model.static, "s", Cell(ts, False, value, ttl))
            assignments.append("s = %d" % value)
        where = "c2 = %d" % c2s[0] if len(c2s) == 1 else "c2 IN (%s)" % ", ".join(map(str, c2s))
        return "UPDATE ks.t %s SET %s WHERE p = %d AND c1 = %d AND %s" % (
            using, ", ".join(assignments), self.p, c1, where)

    def update_static(self):
        ts, ttl, using = self.using()
        value = self.k() if self.rng.random() < 0.9 else None
        put(self.model.static, "s", Cell(ts, value is None, value, ttl))
        return "UPDATE ks.t %s SET s = %s WHERE p = %d" % (using, "null" if value is None else value, self.p)

    def deletion_ts(self):
        return self.rng.randint(1, TS_MAX)

    def delete_row(self):
        ts, key = self.deletion_ts(), self.key()
        row = self.model.row(key)
        row.deleted_ts = max(row.deleted_ts, ts)
        return "DELETE FROM ks.t USING TIMESTAMP %d WHERE %s" % (ts, self.where_key(key))

    def delete_columns(self):
        ts, key, rng = self.deletion_ts(), self.key(), self.rng
        row = self.model.row(key)
        targets = []
        for _ in range(rng.randint(1, 2)):
            kind = rng.choice(["v", "w", "mp", "st", "mp_key", "st_element"])
            if kind in ("v", "w"):
                put(row.cells, kind, Cell(ts, True))
                targets.append(kind)
            elif kind in ("mp", "st"):
                row.tombs[kind] = max(row.tombs[kind], ts)
                targets.append(kind)
            else:
                name, key_ = kind.split("_")[0], self.k()
                put(row.elements[name], key_, Cell(ts, True))
                targets.append("%s[%d]" % (name, key_))
        return "DELETE %s FROM ks.t USING TIMESTAMP %d WHERE %s" % (", ".join(targets), ts, self.where_key(key))

    def delete_static(self):
        ts = self.deletion_ts()
        put(self.model.static, "s", Cell(ts, True))
        return "DELETE s FROM ks.t USING TIMESTAMP %d WHERE p = %d" % (ts, self.p)

    def delete_partition(self):
        ts = self.deletion_ts()
        self.model.deleted_ts = max(self.model.deleted_ts, ts)
        return "DELETE FROM ks.t USING TIMESTAMP %d WHERE p = %d" % (ts, self.p)

    def delete_range(self):
        ts = self.deletion_ts()
        text, pred = random_slice(self.rng)
        self.model.ranges.append((pred, ts))
        return "DELETE FROM ks.t USING TIMESTAMP %d WHERE p = %d AND %s" % (ts, self.p, text)


OPS = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}


def bounds(rng, column):
    """One lower bound, one upper bound or both on `column` (often an empty
    or inverted range), as (CQL, predicate on its value)."""
    parts = []
    if rng.random() < 0.7:
        parts.append((rng.choice([">", ">="]), rng.randint(-1, 4)))
    if rng.random() < 0.7 or not parts:
        parts.append((rng.choice(["<", "<="]), rng.randint(-1, 4)))
    text = " AND ".join("%s %s %d" % (column, op, value) for op, value in parts)
    return text, lambda x: all(OPS[op](x, value) for op, value in parts)


def random_slice(rng):
    """A clustering slice, as (CQL, predicate on (c1, c2))."""
    shape = rng.choice(["c1_range", "prefix", "prefix_and_c2_range"])
    if shape == "c1_range":
        text, on_c1 = bounds(rng, "c1")
        return text, lambda c1, c2: on_c1(c1)
    c1 = rng.randint(0, 3)
    if shape == "prefix":
        return "c1 = %d" % c1, lambda a, b: a == c1
    text, on_c2 = bounds(rng, "c2")
    return "c1 = %d AND %s" % (c1, text), lambda a, b: a == c1 and on_c2(b)


# Index queries: (restriction, the model's test of a row tuple
# (c1, c2, s, v, w, mp, st) for value x).
INDEXES = ["v", "s", "c2", "keys(mp)", "mp", "st"]
INDEX_QUERIES = [
    ("v = %d", lambda r, x: r[3] == x),
    ("s = %d", lambda r, x: r[2] == x),
    ("c2 = %d", lambda r, x: r[1] == x),
    ("mp CONTAINS KEY %d", lambda r, x: r[5] is not None and x in r[5]),
    ("mp CONTAINS %d", lambda r, x: r[5] is not None and x in r[5].values()),
    ("st CONTAINS %d", lambda r, x: r[6] is not None and x in r[6]),
]

VIEW_COLUMNS = "p, c1, c2, v, w, mp, st"
# (name, key, restriction, test on (p, c1, c2, v, w, mp, st), x)
VIEWS = [
    ("mv_v", "v, p, c1, c2", "v = %d", lambda r, x: r[3] == x),
    ("mv_c2", "c2, p, c1", "c2 = %d", lambda r, x: r[2] == x),
]


def normalize(row):
    mp = dict(row.mp) if row.mp else None
    st = set(row.st) if row.st else None
    return (row.c1, row.c2, row.s, row.v, row.w, mp, st)


class Checker:
    def __init__(self, session, writers, seed):
        self.session, self.writers, self.seed = session, writers, seed
        self.checks = 0
        self.indexed = False

    def check_indexes(self):
        """Every index queried for every value, against the model's rows
        (of every partition) holding that value."""
        expected = [(w.p,) + row for w in self.writers for row in self.expected(w)]
        queries = [(restriction, test, x) for restriction, test in INDEX_QUERIES for x in KEYS]
        statements = [(SimpleStatement("SELECT * FROM ks.t WHERE " + restriction % x, fetch_size=500), ())
                      for restriction, _, x in queries]
        results = execute_concurrent(self.session, statements, concurrency=8, raise_on_first_error=True)
        failures = []
        for (restriction, test, x), (ok, result) in zip(queries, results):
            got = sorted((r.p,) + normalize(r) for r in result)
            want = sorted(r for r in expected if test(r[1:], x))
            self.checks += 1
            if got != want:
                extra = [r for r in got if r not in want][:3]
                missing = [r for r in want if r not in got][:3]
                failures.append("WHERE %s: %d rows, model %d; extra %s, missing %s" % (
                    restriction % x, len(got), len(want), extra, missing))
        return failures

    def check_views(self):
        """Every view partition read for every value, against the model's
        rows (of every partition) that the view holds there."""
        expected = [(w.p, c1, c2, v, w_, mp, st) for w in self.writers
                    for (c1, c2, _, v, w_, mp, st) in self.expected(w) if c1 is not None]
        queries = [(name, restriction, test, x) for name, _, restriction, test in VIEWS for x in KEYS]
        statements = [(SimpleStatement("SELECT %s FROM ks.%s WHERE %s" % (VIEW_COLUMNS, name, restriction % x),
                                       fetch_size=500), ()) for name, restriction, _, x in queries]
        results = execute_concurrent(self.session, statements, concurrency=8, raise_on_first_error=True)
        failures = []
        for (name, restriction, test, x), (ok, result) in zip(queries, results):
            got = sorted((r.p, r.c1, r.c2, r.v, r.w, dict(r.mp) if r.mp else None, set(r.st) if r.st else None)
                         for r in result)
            want = sorted(r for r in expected if test(r, x))
            self.checks += 1
            if got != want:
                extra = [r for r in got if r not in want][:3]
                missing = [r for r in want if r not in got][:3]
                failures.append("%s WHERE %s: %d rows, model %d; extra %s, missing %s" % (
                    name, restriction % x, len(got), len(want), extra, missing))
        return failures

    def expected(self, writer):
        static, rows = writer.model.visible()
        if not rows:
            return [(None, None, static, None, None, None, None)] if static is not None else []
        return [(c1, c2, static, v, w, mp, st) for (c1, c2, v, w, mp, st) in rows]

    def check(self, stage):
        """Reads every case four ways and compares with the model."""
        statements = []
        slices = []
        for writer in self.writers:
            p = writer.p
            rng = random.Random("%d-%s-%d" % (self.seed, stage, p))
            text, pred = random_slice(rng)
            slices.append(pred)
            statements += [
                (SimpleStatement("SELECT * FROM ks.t WHERE p = %d" % p, fetch_size=2), ()),
                (SimpleStatement("SELECT * FROM ks.t WHERE p = %d BYPASS CACHE" % p), ()),
                (SimpleStatement("SELECT * FROM ks.t WHERE p = %d AND %s" % (p, text)), ()),
                (SimpleStatement("SELECT * FROM ks.t WHERE p = %d ORDER BY c1 DESC" % p), ()),
            ]
        results = execute_concurrent(self.session, statements, concurrency=64, raise_on_first_error=True)
        failures = self.check_indexes() + self.check_views() if self.indexed else []
        for i, writer in enumerate(self.writers):
            expected = self.expected(writer)
            sliced = [r for r in expected if r[0] is not None and slices[i](r[0], r[1])]
            reversed_ = list(reversed(expected)) if expected and expected[0][0] is not None else expected
            for (ok, result), want, how in zip(results[4 * i:4 * i + 4],
                                               [expected, expected, sliced, reversed_],
                                               ["paged", "bypass cache", statements[4 * i + 2][0].query_string,
                                                "ORDER BY c1 DESC"]):
                got = [normalize(r) for r in result]
                self.checks += 1
                if got != want:
                    failures.append("p=%d (%s): got %s, model %s" % (writer.p, how, got, want))
        assert not failures, "seed %d, %s: %d reads differ from the model (first 5):\n%s" % (
            self.seed, stage, len(failures), "\n".join(failures[:5]))


def write_phase(session, writers):
    statements = [(SimpleStatement(w.statement()), ()) for w in writers for _ in range(OPS_PER_PHASE)]
    results = execute_concurrent(session, statements, concurrency=64, raise_on_first_error=False)
    errors = [(s[0].query_string, r) for s, (ok, r) in zip(statements, results) if not ok]
    assert not errors, "seed %d: %d statements failed, e.g. %s" % (SEED, len(errors), errors[:3])
    # Every 1 s TTL written so far has expired before the next read.
    time.sleep(SHORT_TTL_S + 1.1)


def wait_for_index_builds(session, timeout_s=120):
    deadline = time.time() + timeout_s
    while (list(session.execute("SELECT * FROM system.index_builds_in_progress"))
           or list(session.execute("SELECT * FROM system.views_builds_in_progress"))):
        assert time.time() < deadline, "index or view builds still in progress after %d s" % timeout_s
        time.sleep(0.2)


def test_writes_and_reads_match_the_model():
    print("SHOAL_MODEL_SEED=%d SHOAL_MODEL_CASES=%d" % (SEED, CASES))
    writers = [Writer(p, random.Random("%d-%d" % (SEED, p))) for p in range(CASES)]
    with temp_node("shoal-model-", args=["--commitlog-sync", "batch"]) as node:
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute(TABLE)
        checker = Checker(session, writers, SEED)
        write_phase(session, writers)
        for target in INDEXES:
            session.execute("CREATE INDEX ON ks.t (%s)" % target)
        for name, key, _, _ in VIEWS:
            not_null = " AND ".join("%s IS NOT NULL" % c for c in key.split(", "))
            session.execute("CREATE MATERIALIZED VIEW ks.%s AS SELECT %s FROM ks.t WHERE %s PRIMARY KEY (%s)"
                            % (name, VIEW_COLUMNS, not_null, key))
        write_phase(session, writers)
        wait_for_index_builds(session)
        checker.indexed = True
        checker.check("memtable")
        node.nodetool("flush")
        checker.check("flushed")
        write_phase(session, writers)
        checker.check("memtable over sstables")
        node.nodetool("flush")
        write_phase(session, writers)
        node.nodetool("compact")
        checker.check("after major compaction")
        write_phase(session, writers)
        cluster.shutdown()
        node.kill()
        node.start()
        cluster, session = node.session()
        checker.session = session
        checker.check("after kill -9 and restart")
        cluster.shutdown()
        print("%d cases, %d reads compared" % (CASES, checker.checks))

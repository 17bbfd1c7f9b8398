"""Acknowledged writes survive kill -9, under either commitlog sync mode.

With `--commitlog-sync batch` a write is acknowledged only once it is on disk,
so no crash may lose it. With `periodic` (the default) a write is acknowledged
once its entry is written to the segment file (direct I/O: out of the
process), so kill -9 may not lose it either; only a machine crash may lose up
to the sync period. The test runs once per mode. It runs its own node (from SHOAL_BIN, fresh
ports and workdir, see node.py) and, CYCLES times on the same workdir:

1. several writer threads keep up to IN_FLIGHT prepared writes in flight with
   execute_async: INSERTs, UPDATEs, row, range and partition DELETEs and
   single-partition batches into crash.kv (k int, c int, v text, PRIMARY KEY
   (k, c)), and INSERTs, UPDATEs, DELETEs and cell DELETEs into crash.blobs
   (k bigint PRIMARY KEY, seq int, data blob); values up to 64 KiB;
2. the node is killed with SIGKILL 0.2-2 s after the writes start, with
   writes in flight; connection errors after the kill are expected;
3. the node restarts on the same workdir and a full scan of both tables must
   equal the model: every acknowledged write present with its exact value,
   every acknowledged delete still deleted, no key that was never written,
   and count(*) and single-partition reads agree with the scan.

The model is exact: a partition has at most one write in flight, so its state
is the result of its last acknowledged write, and a write whose outcome is
unknown (no answer before the kill) leaves exactly two allowed states: before
it or after it (a single-partition write is atomic, batches included). The
restart tells which; whatever it shows must still be there after every later
restart, so data accumulates across cycles and each restart checks all of it.

    SHOAL_CRASH_CYCLES (5)        kill/restart cycles (scripts/crash-test.sh: 100)
    SHOAL_CRASH_SYNC (batch,periodic) the commitlog sync modes to run, one run each
    SHOAL_CRASH_SEED (time)       printed at the start; replays every cycle's kill
                                  delay and its writers' random choices (not the
                                  thread timing, so not the exact writes)
    SHOAL_CRASH_IN_FLIGHT (64)    most writes in flight at once
    SHOAL_CRASH_MEMORY (1G)       --memory of the node
    SHOAL_CRASH_LIVE_ROWS (150000) past this, new partitions give way to deletes
    SHOAL_CRASH_EXTRA_ARGS        more server flags, e.g. a smaller segment size
    SHOAL_CRASH_SUMMARY           a file to keep a JSON summary in, per cycle
    SHOAL_CRASH_KEEP_WORKDIR=1    keep the node's workdir after a failure
"""
import collections
import hashlib
import json
import os
import random
import shlex
import threading
import time

import pytest
from cassandra import RequestValidationException
from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.policies import ConstantReconnectionPolicy, FallthroughRetryPolicy, RoundRobinPolicy
from cassandra.query import BatchStatement, BatchType

from node import skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

CYCLES = int(os.environ.get("SHOAL_CRASH_CYCLES", "5"))
SEED = int(os.environ.get("SHOAL_CRASH_SEED") or time.time_ns() % 10**9)
IN_FLIGHT = int(os.environ.get("SHOAL_CRASH_IN_FLIGHT", "64"))
MEMORY = os.environ.get("SHOAL_CRASH_MEMORY", "1G")
EXTRA_ARGS = shlex.split(os.environ.get("SHOAL_CRASH_EXTRA_ARGS", ""))
SYNC_MODES = os.environ.get("SHOAL_CRASH_SYNC", "batch,periodic").split(",")
SUMMARY = os.environ.get("SHOAL_CRASH_SUMMARY")
KEEP_WORKDIR = bool(os.environ.get("SHOAL_CRASH_KEEP_WORKDIR"))

# Small segments and memtables, so a few seconds of writes roll segments,
# flush memtables and compact SSTables between the kills.
def server_args(sync):
    return [
        "--commitlog-sync", sync, "--memory", MEMORY,
        "--commitlog-segment-size-in-mb", "1", "--memtable-space-in-mb", "4",
    ] + EXTRA_ARGS
SMP = 2
WRITERS = 4
KILL_DELAY = (0.2, 2.0)  # seconds after the writers start
WRITE_TIMEOUT = 10.0  # driver request timeout for writes
READ_TIMEOUT = 60.0  # for the verification's scans and counts
START_TIMEOUT = 30.0  # for a (re)start, commitlog replay included
MAX_ROWS_PER_PARTITION = 48
# Past this many live rows, writes that would start a new partition delete one
# instead, so that the verification's full scans stay fast over 100 cycles.
LIVE_ROWS_BUDGET = int(os.environ.get("SHOAL_CRASH_LIVE_ROWS", "150000"))
POINT_READS = 600  # single-partition reads per cycle, besides the scan
MAX_PROBLEMS = 20  # mismatches listed in a failure

KS = "crash"

IDLE, IN_FLIGHT_STATE, UNKNOWN = "idle", "in flight", "unknown"


# --- values ------------------------------------------------------------------------
#
# The model keeps a value in a comparable form: short texts as they are, long
# texts and blobs as (length, digest), so 100 cycles of data stay small here.

def _digest(b):
    return hashlib.blake2b(b, digest_size=10).hexdigest()


def text_key(v):
    if v is None or len(v) <= 48:
        return v
    return "%s...(%d chars, blake2b %s)" % (v[:16], len(v), _digest(v.encode()))


def blob_key(b):
    return None if b is None else "(%d bytes, blake2b %s)" % (len(b), _digest(b))


def random_size(rng):
    r = rng.random()
    if r < 0.90:
        return rng.randint(1, 100)
    if r < 0.995:
        return rng.randint(100, 2000)
    return rng.randint(16 << 10, 64 << 10)


def random_text(rng, op_id):
    n = random_size(rng)
    # Unique (the write's id first), and cheap even when long.
    return ("%d:" % op_id) + rng.randbytes((n + 1) // 2).hex()[:n]


# --- the model -----------------------------------------------------------------------

class Partition:
    __slots__ = ("table", "key", "rows", "state", "op", "used", "last")

    def __init__(self, table, key):
        self.table = table
        self.key = key
        self.rows = {}  # clustering key (0 for blobs) -> comparable value: the acknowledged state
        self.state = IDLE
        self.op = None  # the write in flight, or the one whose outcome is unknown
        # (its `after` is the partition's state if it was applied)
        self.used = set()  # every clustering key ever written (kv)
        self.last = None  # the last acknowledged write: (cycle, op id, kind)


class Op:
    __slots__ = ("id", "cycle", "kind", "part", "stmt", "params", "after")

    def __init__(self, op_id, cycle, kind, part, stmt, params, after):
        self.id, self.cycle, self.kind, self.part = op_id, cycle, kind, part
        self.stmt, self.params, self.after = stmt, params, after

    def __repr__(self):
        return "write #%d (cycle %d, %s)" % (self.id, self.cycle, self.kind)


class Model:
    """Every partition ever written, with its acknowledged state; thread-safe."""

    def __init__(self):
        self.lock = threading.Lock()
        self.parts = {"kv": {}, "blobs": {}}
        self.keys = {"kv": [], "blobs": []}  # the same keys, to sample from
        self.next_id = 0
        self.cycle = 0
        self.in_flight = 0
        self.live_rows = 0  # in the acknowledged states
        self.kill_time = float("inf")
        self.reset_cycle_stats()

    def reset_cycle_stats(self):
        self.acked = 0
        self.acked_after_kill = 0
        self.acked_kinds = {}
        self.failed = 0
        self.errors = {}  # exception class name -> count
        self.early_errors = []  # (op, exception): failed before the kill, or rejected as invalid
        self.touched = {"kv": set(), "blobs": set()}

    # Choosing a write (under the lock, from the writer threads).

    def _new_partition(self, rng, table):
        parts = self.parts[table]
        bits = 32 if table == "kv" else 64
        while True:
            key = rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
            if key not in parts:
                break
        p = parts[key] = Partition(table, key)
        self.keys[table].append(key)
        return p

    def _idle_partition(self, rng, table, want=lambda p: True):
        keys = self.keys[table]
        if keys:
            for _ in range(8):
                p = self.parts[table][rng.choice(keys)]
                if p.state == IDLE and want(p):
                    return p
        return None

    def _fresh_c(self, rng, p):
        while True:
            c = rng.randint(-(1 << 31), (1 << 31) - 1)
            if c not in p.used:
                p.used.add(c)
                return c

    def choose(self, rng, stmts):
        with self.lock:
            self.next_id += 1
            op_id = self.next_id
            if rng.random() < 0.75:
                op = self._choose_kv(rng, stmts, op_id)
            else:
                op = self._choose_blob(rng, stmts, op_id)
            op.part.state = IN_FLIGHT_STATE
            op.part.op = op
            self.in_flight += 1
            self.touched[op.part.table].add(op.part.key)
            return op

    def _choose_kv(self, rng, s, op_id):
        r = rng.random()
        has_rows = lambda p: bool(p.rows)  # noqa: E731
        p = None
        if r < 0.30:
            kind = "insert"
            if self.live_rows > LIVE_ROWS_BUDGET:
                kind = "delete partition"
                p = self._idle_partition(rng, "kv", has_rows)
        elif r < 0.55:
            kind = "insert"
            p = self._idle_partition(rng, "kv", lambda p: len(p.used) < MAX_ROWS_PER_PARTITION)
        elif r < 0.70:
            kind = "update"
            p = self._idle_partition(rng, "kv", lambda p: bool(p.used))
        elif r < 0.78:
            kind = "delete row"
            p = self._idle_partition(rng, "kv", has_rows)
        elif r < 0.82:
            kind = "delete range"
            p = self._idle_partition(rng, "kv", lambda p: len(p.rows) >= 2)
        elif r < 0.85:
            kind = "delete partition"
            p = self._idle_partition(rng, "kv", has_rows)
        else:
            kind = "batch"
            p = self._idle_partition(rng, "kv", lambda p: len(p.used) < MAX_ROWS_PER_PARTITION)
        if p is None:
            kind = "insert" if kind != "batch" else kind
            p = self._new_partition(rng, "kv")
        k, after = p.key, dict(p.rows)

        if kind == "insert":
            c, v = self._fresh_c(rng, p), random_text(rng, op_id)
            after[c] = text_key(v)
            return Op(op_id, self.cycle, kind, p, s["kv_insert"], (k, c, v), after)
        if kind == "update":
            # Mostly a live row; sometimes any row ever written, which revives a deleted one.
            c = rng.choice(list(p.rows) if p.rows and rng.random() < 0.8 else list(p.used))
            v = random_text(rng, op_id)
            after[c] = text_key(v)
            return Op(op_id, self.cycle, kind, p, s["kv_update"], (v, k, c), after)
        if kind == "delete row":
            c = rng.choice(list(p.rows))
            del after[c]
            return Op(op_id, self.cycle, kind, p, s["kv_delete_row"], (k, c), after)
        if kind == "delete range":
            lo, hi = sorted(rng.sample(sorted(p.rows), 2))
            for c in [c for c in after if lo <= c < hi]:
                del after[c]
            return Op(op_id, self.cycle, kind, p, s["kv_delete_range"], (k, lo, hi), after)
        if kind == "delete partition":
            return Op(op_id, self.cycle, kind, p, s["kv_delete_partition"], (k,), {})
        # A single-partition batch: fresh rows, maybe an update and a delete of live rows.
        batch = BatchStatement(batch_type=BatchType.UNLOGGED)
        for _ in range(rng.randint(2, 5)):
            c, v = self._fresh_c(rng, p), random_text(rng, op_id)
            batch.add(s["kv_insert"], (k, c, v))
            after[c] = text_key(v)
        live = list(p.rows)
        rng.shuffle(live)
        if live and rng.random() < 0.5:
            c, v = live.pop(), random_text(rng, op_id)
            batch.add(s["kv_update"], (v, k, c))
            after[c] = text_key(v)
        if live and rng.random() < 0.5:
            c = live.pop()
            batch.add(s["kv_delete_row"], (k, c))
            del after[c]
        return Op(op_id, self.cycle, kind, p, batch, None, after)

    def _choose_blob(self, rng, s, op_id):
        r = rng.random()
        p = None
        if r < 0.50:
            kind = "insert"
            if self.live_rows > LIVE_ROWS_BUDGET:
                kind = "delete"
                p = self._idle_partition(rng, "blobs", lambda p: bool(p.rows))
        elif r < 0.75:
            kind = "update"  # of any key ever written: revives a deleted one
            p = self._idle_partition(rng, "blobs")
        elif r < 0.90:
            kind = "delete"
            p = self._idle_partition(rng, "blobs", lambda p: bool(p.rows))
        else:
            kind = "delete data"
            p = self._idle_partition(rng, "blobs", lambda p: bool(p.rows) and p.rows[0][1] is not None)
        if p is None:
            kind, p = "insert", self._new_partition(rng, "blobs")
        k = p.key
        if kind in ("insert", "update"):
            seq, data = op_id, rng.randbytes(random_size(rng))
            after = {0: (seq, blob_key(data))}
            if kind == "insert":
                return Op(op_id, self.cycle, kind, p, s["blob_insert"], (k, seq, data), after)
            return Op(op_id, self.cycle, kind, p, s["blob_update"], (seq, data, k), after)
        if kind == "delete":
            return Op(op_id, self.cycle, kind, p, s["blob_delete"], (k,), {})
        # The row stays: seq is still set.
        return Op(op_id, self.cycle, kind, p, s["blob_delete_data"], (k,), {0: (p.rows[0][0], None)})

    # Outcomes (from the driver's event loop thread).

    def acknowledged(self, op):
        with self.lock:
            p = op.part
            self.live_rows += len(op.after) - len(p.rows)
            p.rows, p.state, p.op = op.after, IDLE, None
            p.last = (op.cycle, op.id, op.kind)
            self.in_flight -= 1
            self.acked += 1
            self.acked_kinds[op.kind] = self.acked_kinds.get(op.kind, 0) + 1
            if time.monotonic() >= self.kill_time:
                self.acked_after_kill += 1

    def failed_op(self, op, exc):
        with self.lock:
            # The write may or may not have been applied: its partition keeps
            # it as the one unknown write until the restart tells.
            op.part.state = UNKNOWN
            self.in_flight -= 1
            self.failed += 1
            name = type(exc).__name__
            self.errors[name] = self.errors.get(name, 0) + 1
            if time.monotonic() < self.kill_time or isinstance(exc, RequestValidationException):
                self.early_errors.append((op, exc))

    def stats(self):
        rows = sum(len(p.rows) for parts in self.parts.values() for p in parts.values())
        return {"kv_partitions": len(self.parts["kv"]), "blob_keys": len(self.parts["blobs"]), "rows": rows}


# --- talking to the node -------------------------------------------------------------

def connect(node):
    profile = ExecutionProfile(
        request_timeout=WRITE_TIMEOUT,
        # Exactly one attempt per write: an acknowledgement is that attempt's.
        retry_policy=FallthroughRetryPolicy(),
        load_balancing_policy=RoundRobinPolicy(),
    )
    cluster = node.cluster(
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=10,
        control_connection_timeout=10,
        max_schema_agreement_wait=10,
        reconnection_policy=ConstantReconnectionPolicy(0.5, max_attempts=None),
    )
    try:
        return cluster, cluster.connect()
    except Exception:
        cluster.shutdown()
        raise


def prepare(session):
    q = {
        "kv_insert": "INSERT INTO %s.kv (k, c, v) VALUES (?, ?, ?)",
        "kv_update": "UPDATE %s.kv SET v = ? WHERE k = ? AND c = ?",
        "kv_delete_row": "DELETE FROM %s.kv WHERE k = ? AND c = ?",
        "kv_delete_range": "DELETE FROM %s.kv WHERE k = ? AND c >= ? AND c < ?",
        "kv_delete_partition": "DELETE FROM %s.kv WHERE k = ?",
        "kv_select": "SELECT c, v FROM %s.kv WHERE k = ?",
        "blob_insert": "INSERT INTO %s.blobs (k, seq, data) VALUES (?, ?, ?)",
        "blob_update": "UPDATE %s.blobs SET seq = ?, data = ? WHERE k = ?",
        "blob_delete": "DELETE FROM %s.blobs WHERE k = ?",
        "blob_delete_data": "DELETE data FROM %s.blobs WHERE k = ?",
        "blob_select": "SELECT seq, data FROM %s.blobs WHERE k = ?",
    }
    return {name: session.prepare(cql % KS) for name, cql in q.items()}


def create_schema(session):
    session.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
                    % KS)
    session.execute("CREATE TABLE %s.kv (k int, c int, v text, PRIMARY KEY (k, c))" % KS)
    session.execute("CREATE TABLE %s.blobs (k bigint PRIMARY KEY, seq int, data blob)" % KS)


# --- one cycle -------------------------------------------------------------------------

def write_and_kill(node, session, model, stmts, rng):
    """Writes until a kill -9 at a random moment; returns (kill delay, writes in flight at the kill)."""
    slots = threading.Semaphore(IN_FLIGHT)
    stop = threading.Event()

    def on_ok(_result, op):
        try:
            model.acknowledged(op)
        finally:
            slots.release()

    def on_error(exc, op):
        try:
            model.failed_op(op, exc)
        finally:
            slots.release()

    def writer(wrng):
        while not stop.is_set():
            if not slots.acquire(timeout=0.05):
                continue
            if stop.is_set():
                slots.release()
                return
            op = model.choose(wrng, stmts)
            try:
                future = session.execute_async(op.stmt, op.params)
            except Exception as e:  # the driver reports most failures through the future
                on_error(e, op)
                continue
            future.add_callbacks(on_ok, on_error, callback_args=(op,), errback_args=(op,))

    delay = rng.uniform(*KILL_DELAY)
    writers = [threading.Thread(target=writer, args=(random.Random(rng.getrandbits(64)),), daemon=True)
               for _ in range(WRITERS)]
    for t in writers:
        t.start()
    time.sleep(delay)
    with model.lock:
        in_flight = model.in_flight
        model.kill_time = time.monotonic()
    node.kill()
    stop.set()
    for t in writers:
        t.join(timeout=5)
        assert not t.is_alive(), "a writer thread did not stop"
    # Every write in flight ends: acknowledged (its answer was on its way),
    # or failed as its connection closes or times out.
    deadline = time.monotonic() + WRITE_TIMEOUT + 10
    while model.in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    assert model.in_flight == 0, "the driver did not end %d writes after the kill" % model.in_flight
    return delay, in_flight


def scan(session, cql, row_to_kv):
    observed = {}
    rows = 0
    for r in session.execute(cql, timeout=READ_TIMEOUT):
        k, c, value = row_to_kv(r)
        part = observed.setdefault(k, {})
        assert c not in part, "the scan returned %s twice" % ((k, c),)
        part[c] = value
        rows += 1
    return observed, rows


def kv_row(r):
    return r.k, r.c, text_key(r.v)


def blob_row(r):
    return r.k, 0, (r.seq, blob_key(r.data))


def describe(table, key, expected, got, p, tally):
    """One line on how a partition differs from its expected state; counts the rows by kind in tally."""
    diffs = []
    for c in sorted(set(expected) | set(got), key=repr):
        e, g = expected.get(c, "<absent>"), got.get(c, "<absent>")
        if e != g:
            if c not in got:
                tally["acknowledged row missing"] += 1
            elif c not in expected:
                tally["deleted or never written row present"] += 1
            else:
                tally["row with a wrong value"] += 1
            diffs.append("%s: expected %r, got %r" % ("c=%d" % c if table == "kv" else "row", e, g))
    more = " ... %d more" % (len(diffs) - 4) if len(diffs) > 4 else ""
    last = "; last acknowledged write #%d (cycle %d, %s)" % (p.last[1], p.last[0], p.last[2]) if p.last else ""
    return "%s k=%d: %s%s%s" % (table, key, "; ".join(diffs[:4]), more, last)


def verify(session, model, stmts, rng):
    """Compares the restarted node with the model; returns (problems, facts)."""
    problems = []
    tally = collections.Counter()
    facts = {"unknown_applied": 0, "unknown_not_applied": 0, "tally": tally}
    kv, kv_rows = scan(session, "SELECT k, c, v FROM %s.kv" % KS, kv_row)
    blobs, blob_rows = scan(session, "SELECT k, seq, data FROM %s.blobs" % KS, blob_row)
    for table, observed in (("kv", kv), ("blobs", blobs)):
        for key, p in model.parts[table].items():
            got = observed.pop(key, {})
            assert p.state != IN_FLIGHT_STATE
            if p.state == UNKNOWN:
                op = p.op
                if got == op.after:
                    facts["unknown_applied"] += 1
                    model.live_rows += len(op.after) - len(p.rows)
                    p.rows, p.last = op.after, (op.cycle, op.id, op.kind + ", unacknowledged but applied")
                elif got == p.rows:
                    facts["unknown_not_applied"] += 1
                else:
                    problems.append(describe(table, key, p.rows, got, p, tally)
                                    + " (or, with the unacknowledged %r: %r)" % (op, op.after))
                p.state, p.op = IDLE, None
            elif got != p.rows:
                problems.append(describe(table, key, p.rows, got, p, tally))
        for key, rows in observed.items():
            tally["partition never written present"] += 1
            problems.append("%s k=%d was never written, yet the scan returned %d row(s): %r"
                            % (table, key, len(rows), dict(list(rows.items())[:3])))

    for table, rows in (("kv", kv_rows), ("blobs", blob_rows)):
        count = session.execute("SELECT count(*) FROM %s.%s" % (KS, table), timeout=READ_TIMEOUT).one()[0]
        if count != rows:
            tally["count(*) differs from the scan"] += 1
            problems.append("SELECT count(*) FROM %s says %d rows, the full scan returned %d" % (table, count, rows))

    # Single-partition reads (another read path than the scan): the partitions
    # written in this cycle, some older ones, and a few keys never written.
    for table, select, to_row in (("kv", "kv_select", lambda r: (r.c, text_key(r.v))),
                                  ("blobs", "blob_select", lambda r: (0, (r.seq, blob_key(r.data))))):
        parts = model.parts[table]
        keys = list(model.touched[table])
        rng.shuffle(keys)
        keys = keys[:POINT_READS // 2]
        keys += rng.sample(model.keys[table], min(len(model.keys[table]), POINT_READS // 2))
        bits = 32 if table == "kv" else 64
        absent = [rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1) for _ in range(20)]
        keys += [k for k in absent if k not in parts]
        results = execute_concurrent_with_args(session, stmts[select], [(k,) for k in keys], concurrency=32,
                                               raise_on_first_error=True)
        for key, (ok, result) in zip(keys, results):
            got = dict(to_row(r) for r in result)
            expected = parts[key].rows if key in parts else {}
            if got != expected:
                tally["single-partition read differs"] += 1
                if key in parts:
                    problems.append("single-partition read of "
                                    + describe(table, key, expected, got, parts[key], collections.Counter()))
                else:
                    problems.append("single-partition read of %s k=%d, never written, returned %r"
                                    % (table, key, got))
        facts["point_reads"] = facts.get("point_reads", 0) + len(keys)
    facts["kv_rows"], facts["blob_rows"] = kv_rows, blob_rows
    return problems, facts


# --- the test ------------------------------------------------------------------------

def fail(message):
    # The message says it all: no need for pytest to print this long function.
    pytest.fail(message, pytrace=False)


def write_summary(summary):
    if SUMMARY:
        tmp = SUMMARY + ".tmp"
        with open(tmp, "w") as f:
            json.dump(summary, f)
        os.replace(tmp, SUMMARY)


@pytest.mark.parametrize("sync", SYNC_MODES)
def test_acknowledged_writes_survive_kill_9(sync):
    args = server_args(sync)
    print("crash test: seed %d (replay with SHOAL_CRASH_SEED=%d), %d cycles, server flags %s"
          % (SEED, SEED, CYCLES, " ".join(args)), flush=True)
    model = Model()
    summary = {"seed": SEED, "cycles": CYCLES, "cycles_passed": 0, "acked_writes_verified": 0,
               "status": "running"}
    write_summary(summary)
    with temp_node("shoal-crash-", args=args, smp=SMP) as node:
        cluster, session = connect(node)
        try:
            create_schema(session)
            for cycle in range(1, CYCLES + 1):
                t0 = time.monotonic()
                model.cycle = cycle
                model.reset_cycle_stats()
                model.kill_time = float("inf")
                # Per cycle, so that a cycle's kill delay does not depend on the earlier cycles' timing.
                rng = random.Random("%d/%d" % (SEED, cycle))
                stmts = prepare(session)

                delay, in_flight = write_and_kill(node, session, model, stmts, rng)
                cluster.shutdown()
                cluster = None
                early = model.early_errors
                if early:
                    fail("seed %d, cycle %d: %d write(s) failed before the kill (or were rejected), e.g. %r: %r"
                         % (SEED, cycle, len(early), early[0][0], early[0][1]))
                if not model.acked:
                    fail("seed %d, cycle %d: no write was acknowledged in %.2f s" % (SEED, cycle, delay))

                t1 = time.monotonic()
                node.start(timeout=START_TIMEOUT)
                t2 = time.monotonic()
                cluster, session = connect(node)
                stmts = prepare(session)
                problems, facts = verify(session, model, stmts, rng)
                t3 = time.monotonic()

                line = ("cycle %d/%d: kill -9 after %.2f s with %d in flight; %d acknowledged (%d after the kill), "
                        "%d failed %s; unacknowledged applied %d, not applied %d; restart %.1f s; "
                        "%d kv rows, %d blob rows, %d point reads; %.1f s"
                        % (cycle, CYCLES, delay, in_flight, model.acked, model.acked_after_kill, model.failed,
                           model.errors, facts["unknown_applied"], facts["unknown_not_applied"], t2 - t1,
                           facts["kv_rows"], facts["blob_rows"], facts["point_reads"], t3 - t0))
                print(line, flush=True)
                if problems:
                    summary.update(status="failed", failed_cycle=cycle, problems=len(problems))
                    write_summary(summary)
                    fail(
                        "seed %d (replay with SHOAL_CRASH_SEED=%d), cycle %d: %d problem(s) after kill -9 "
                        "and restart: %s; acknowledged writes this cycle by kind: %s; the first %d:\n  %s"
                        % (SEED, SEED, cycle, len(problems),
                           ", ".join("%s: %d" % kv for kv in facts["tally"].most_common()),
                           ", ".join("%s: %d" % kv for kv in sorted(model.acked_kinds.items())),
                           min(len(problems), MAX_PROBLEMS), "\n  ".join(problems[:MAX_PROBLEMS])))
                summary["cycles_passed"] = cycle
                summary["acked_writes_verified"] += model.acked
                summary.update(model.stats())
                write_summary(summary)
            summary["status"] = "passed"
            write_summary(summary)
            print("crash test: %d cycles passed, %d acknowledged writes verified (seed %d)"
                  % (CYCLES, summary["acked_writes_verified"], SEED), flush=True)
        except BaseException:
            if summary["status"] == "running":
                summary["status"] = "failed"
                write_summary(summary)
            node.keep_workdir = KEEP_WORKDIR
            raise
        finally:
            if cluster is not None:
                cluster.shutdown()

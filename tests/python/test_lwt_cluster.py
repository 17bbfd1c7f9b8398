"""Conditional writes across three real nodes (127.0.0.2-4) at RF=3 are
linearizable (Paxos), checked on the history of concurrent clients, one node
killed with -9 midway; Paxos state survives every node's kill -9; and rounds
beside range tombstones find replicas that agree in line (no copy written
back).

Four clients, each with its own token-aware driver session over all three
nodes, run for a few seconds against one register (`v` of one row):
compare-and-set `UPDATE ... SET v = new IF v = expected` (new values unique
per client) and reads at SERIAL. Every operation is recorded with when it
was sent and when it was answered. A CAS that failed (timeout, lost
connection) may or may not have taken effect: it is indeterminate. With two
of three replicas up, no request may be refused as Unavailable, and writes
must go on taking effect after the kill, whichever node died. A checker in the style of Wing and Gong (depth-first search
over the orders the history allows, memoized on the set of operations
placed and the register's value) then looks for one sequential order,
consistent with real time, in which every read returns the value last
written and every CAS's answer matches the value it found.
"""
import contextlib
import random
import threading
import time

import cassandra
import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import Unavailable
from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
from cassandra.policies import RetryPolicy
from cassandra.query import SimpleStatement

from node import skip_reason, start_cluster

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

CLIENTS = 4
RUN_S = 6
KILL_AT_S = 2
INF = float("inf")


class Op:
    def __init__(self, index, kind, call, ret, expected=None, new=None, applied=None, value=None):
        self.index, self.kind, self.call, self.ret = index, kind, call, ret
        self.expected, self.new, self.applied, self.value = expected, new, applied, value

    def __repr__(self):
        return "%s(call=%.4f ret=%.4f exp=%s new=%s applied=%s value=%s)" % (
            self.kind, self.call, self.ret, self.expected, self.new, self.applied, self.value)

    @property
    def indeterminate(self):
        return self.ret == INF


def step(op, state):
    """The register's value after `op` runs on `state`, or None if `op`
    cannot run there with the answer it got."""
    if op.kind == "read":
        return state if op.value == state else None
    holds = state == op.expected
    if op.indeterminate:
        # Placed only where it took effect; it may also never have.
        return op.new if holds else None
    if op.applied != holds:
        return None
    return op.new if holds else state


def linearizable(ops, initial):
    """Whether some order of `ops`, respecting real time, is a sequential
    history of a register starting at `initial`. Indeterminate operations
    may be left out."""
    ops = sorted(ops, key=lambda o: o.call)
    for i, op in enumerate(ops):
        op.index = i
    determinate = 0
    for op in ops:
        if not op.indeterminate:
            determinate |= 1 << op.index
    seen = set()
    stack = [(0, initial)]
    while stack:
        done, state = stack.pop()
        if done & determinate == determinate:
            return True
        # Only operations called before every pending one returned may go
        # next: the earliest answer not yet placed bounds them.
        earliest = min(op.ret for op in ops if not done >> op.index & 1 and not op.indeterminate)
        for op in ops:
            if op.call > earliest:
                break
            if done >> op.index & 1:
                continue
            after = step(op, state)
            if after is None:
                continue
            key = (done | 1 << op.index, after)
            if key not in seen:
                seen.add(key)
                stack.append(key)
    return False


def test_the_checker_finds_a_stale_read_and_accepts_an_overlap():
    ok = [Op(0, "cas", 0, 2, expected=0, new=1, applied=True), Op(0, "read", 1, 3, value=0)]
    assert linearizable(ok, 0), "the read may come before the overlapping write"
    stale = [Op(0, "cas", 0, 1, expected=0, new=1, applied=True), Op(0, "read", 2, 3, value=0)]
    assert not linearizable(stale, 0), "a read after the write returned must see it"
    lost = [Op(0, "cas", 0, INF, expected=0, new=1), Op(0, "read", 2, 3, value=1), Op(0, "read", 4, 5, value=1)]
    assert linearizable(lost, 0), "an indeterminate write may have taken effect"
    both = [Op(0, "cas", 0, 1, expected=0, new=1, applied=True), Op(0, "cas", 2, 3, expected=0, new=2, applied=True)]
    assert not linearizable(both, 0), "two CAS from one value cannot both apply"


class NoResendAfterConnectionLoss(RetryPolicy):
    """The driver's default sends a request again to the next node when its
    connection drops (its coordinator killed): a CAS that was applied
    would then answer 'not applied' from the next node, and be recorded as
    refused. Here it fails instead, and is recorded as indeterminate."""

    def on_request_error(self, *args, **kwargs):
        return self.RETHROW, None


def client(nodes, seed, history, lock, stop, unavailable):
    rng = random.Random(seed)
    profile = ExecutionProfile(request_timeout=5, retry_policy=NoResendAfterConnectionLoss())
    # Given the first node, the driver finds the others in system.peers_v2.
    cluster = Cluster([nodes[0].address], port=nodes[0].cql_port, protocol_version=4,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    try:
        session = cluster.connect()
        read = SimpleStatement("SELECT v FROM lwt.reg WHERE k = 0", consistency_level=CL.SERIAL)
        update = session.prepare("UPDATE lwt.reg SET v = ? WHERE k = 0 IF v = ?")
        update.consistency_level = CL.QUORUM
        update.serial_consistency_level = CL.SERIAL
        last, n = 0, 0
        while not stop.is_set():
            started = time.monotonic()
            if rng.random() < 0.4:
                try:
                    row = session.execute(read).one()
                except Exception:  # noqa: BLE001 - a failed read shows nothing
                    continue
                op = Op(0, "read", started, time.monotonic(), value=row.v)
                last = row.v
            else:
                n += 1
                new = seed * 100000 + n
                expected = last if rng.random() < 0.8 else rng.choice([0, last, new - 1])
                try:
                    applied = session.execute(update, (new, expected)).one()[0]
                    op = Op(0, "cas", started, time.monotonic(), expected=expected, new=new, applied=applied)
                    if applied:
                        last = new
                except Unavailable:
                    unavailable.append(time.monotonic())
                    continue
                except Exception:  # noqa: BLE001 - it may or may not have applied
                    op = Op(0, "cas", started, INF, expected=expected, new=new)
            with lock:
                history.append(op)
            time.sleep(rng.uniform(0, 0.01))
    finally:
        cluster.shutdown()


def cluster_with_table(stack, prefix, table, args=()):
    """Three nodes, a session through the first, keyspace `lwt` at RF=3 and
    `table` (`name (columns)`) in it."""
    nodes = start_cluster(stack, prefix, args=args)
    cluster = Cluster([nodes[0].address], port=nodes[0].cql_port, protocol_version=4)
    stack.callback(cluster.shutdown)
    session = cluster.connect()
    session.execute("CREATE KEYSPACE lwt WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
    session.execute("CREATE TABLE lwt." + table)
    return nodes, cluster, session


def test_compare_and_set_is_linearizable_across_three_nodes_with_one_killed():
    with contextlib.ExitStack() as stack:
        nodes, _, session = cluster_with_table(stack, "shoal-lwt-", "reg (k int PRIMARY KEY, v int)")
        deadline = time.monotonic() + 20
        while True:
            try:
                session.execute(SimpleStatement("INSERT INTO lwt.reg (k, v) VALUES (0, 0)", consistency_level=CL.ALL))
                break
            except Exception:  # noqa: BLE001 - until every node sees the others
                assert time.monotonic() < deadline
                time.sleep(0.2)

        history, lock, stop, unavailable = [], threading.Lock(), threading.Event(), []
        threads = [threading.Thread(target=client, args=(nodes, i + 1, history, lock, stop, unavailable))
                   for i in range(CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(KILL_AT_S)
        killed_at = time.monotonic()
        nodes[1].kill()
        time.sleep(RUN_S - KILL_AT_S)
        stop.set()
        for t in threads:
            t.join(timeout=30)

        cas = [op for op in history if op.kind == "cas"]
        applied = [op for op in cas if op.applied]
        assert len(applied) >= 10, "too few writes took effect to say anything: %d of %d" % (len(applied), len(cas))
        assert sum(op.kind == "read" for op in history) >= 10
        assert not unavailable, "%d requests refused as Unavailable with 2 of 3 replicas up" % len(unavailable)
        after = [op for op in applied if op.call > killed_at + 1]
        assert len(after) >= 5, "only %d writes took effect after the kill" % len(after)
        assert linearizable(history, 0), "no linearization of %d operations (%d indeterminate)" % (
            len(history), sum(op.indeterminate for op in history))


def test_paxos_state_and_writes_survive_every_node_killed():
    """Conditional writes at QUORUM with `commitlog_sync: batch`, then all
    three nodes killed with -9 and restarted: a serial read sees the last
    write, a stale condition fails, the right one applies."""
    with contextlib.ExitStack() as stack:
        nodes, cluster, session = cluster_with_table(stack, "shoal-lwt-crash-", "reg (k int PRIMARY KEY, v int)",
                                                     args=("--commitlog-sync", "batch"))
        update = session.prepare("UPDATE lwt.reg SET v = ? WHERE k = ? IF v = ?")
        update.consistency_level = CL.QUORUM
        insert = SimpleStatement("INSERT INTO lwt.reg (k, v) VALUES (%s, 0) IF NOT EXISTS", consistency_level=CL.QUORUM)
        keys = range(20)
        for k in keys:
            assert session.execute(insert, (k,)).one()[0]
            for v in range(1, 4):
                assert session.execute(update, (v, k, v - 1)).one()[0]
        cluster.shutdown()

        for node in nodes:
            node.kill()
        for node in nodes:
            node.start()
        cluster = Cluster([nodes[0].address], port=nodes[0].cql_port, protocol_version=4)
        stack.callback(cluster.shutdown)
        session = cluster.connect()
        update = session.prepare("UPDATE lwt.reg SET v = ? WHERE k = ? IF v = ?")
        read = session.prepare("SELECT v FROM lwt.reg WHERE k = ?")
        read.consistency_level = CL.SERIAL
        deadline = time.monotonic() + 20
        for k in keys:
            while True:
                try:
                    assert session.execute(read, (k,)).one().v == 3
                    stale = session.execute(update, (9, k, 2)).one()
                    break
                except (Unavailable, cassandra.OperationTimedOut, cassandra.ReadTimeout, cassandra.WriteTimeout):
                    # Until every node sees the others up again.
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
            assert (stale[0], stale[1]) == (False, 3)
            assert session.execute(update, (4, k, 3)).one()[0]


def reconcile_writes(nodes):
    """Copies the nodes wrote to bring replicas in line, summed."""
    total = 0.0
    for node in nodes:
        total += sum(float(line.split()[-1]) for line in node.metrics().splitlines()
                     if line.startswith("shoal_reconcile_writes_total"))
    return total


def test_conditional_writes_beside_range_tombstones_find_the_replicas_in_line():
    """Every Paxos round merges its promisers' copies and writes the merge
    where a copy differs. Copies holding the same range tombstones must
    compare equal: a merge that listed them twice made every round write
    to every replica, and the lists grow without end."""
    with contextlib.ExitStack() as stack:
        nodes, _, session = cluster_with_table(stack, "shoal-lwt-rt-", "wide (k int, c int, v int, PRIMARY KEY (k, c))")
        for c in range(10):
            session.execute(SimpleStatement("INSERT INTO lwt.wide (k, c, v) VALUES (1, %s, 0)",
                                            consistency_level=CL.ALL), (c,))
        for where in ("c > 5", "c < 2"):
            session.execute(SimpleStatement("DELETE FROM lwt.wide WHERE k = 1 AND " + where,
                                            consistency_level=CL.ALL))
        before = reconcile_writes(nodes)
        update = session.prepare("UPDATE lwt.wide SET v = ? WHERE k = 1 AND c = 3 IF v = ?")
        for v in range(1, 21):
            assert session.execute(update, (v, v - 1)).one()[0]
        rows = session.execute(SimpleStatement("SELECT c, v FROM lwt.wide WHERE k = 1", consistency_level=CL.ALL))
        assert [(r.c, r.v) for r in rows] == [(2, 0), (3, 20), (4, 0), (5, 0)]
        assert reconcile_writes(nodes) == before, "the replicas agreed, yet Paxos rounds wrote copies back"

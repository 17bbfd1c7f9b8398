"""Node operations on real nodes, under QUORUM write load, hints off (so
only streaming and pending-replica writes can give a node its data):

- bootstrap: a fourth node joins three at RF=3 while a client writes (then
  `nodetool cleanup` leaves an old node exactly the keys it replicates); its
  CQL port opens once it has streamed its ranges; nodetool status shows it
  UN and every node replicates three quarters of the ring for the
  keyspace (its tokens chosen for RF=3); every row written
  before or during the join is on it (read at ONE through it, which reads
  its own copy where it is a replica), and no acknowledged write is lost;
- decommission: a node streams its ranges to their next replicas and
  leaves (restarted on its old workdir, it refuses to start); the other
  three hold every row (each one, at ONE, on its own);
- replace: a node killed for good is replaced by a new node started with
  `--replace-node-first-boot <its host id>`, under load; the new node
  takes its tokens, streams its ranges from the other replicas and holds
  every row; the dead one is no longer a member;
- removenode: a node killed for good is removed from another node; its
  ranges come from the surviving replicas, and both survivors hold every
  row; restarted on its old workdir, the removed node learns from them
  that it left and stops before it serves;
- counters: increments at QUORUM through a bootstrap and a decommission
  count exactly once on every node (an increment arrives at a gaining node
  both streamed and as a pending replica's write: the same version of its
  leader's counter shard, merged once); an increment that failed (not
  retried: an answer cut off as a node stops) may count once or not;
  through a kill -9 of one of three nodes the same holds on the other two,
  and on the killed one once it is back and repaired;
- repair (row-level): a node that missed inserts, updates, row and partition deletes
  and counter increments while it was down has every row as the others
  do after `nodetool repair`, checked row by row at ONE on each node; a
  second repair finds nothing that differs.
"""
import contextlib
import json
import threading
import struct
import time
import urllib.request

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.policies import (DCAwareRoundRobinPolicy, FallthroughRetryPolicy, TokenAwarePolicy,
                                WhiteListRoundRobinPolicy)
from cassandra.query import SimpleStatement

from node import skip_reason, start_cluster, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

NO_HINTS = ["--max-hint-window-in-ms", "0"]
PRELOADED = 2000


def group0(node):
    url = "http://%s:%d/raft/group0" % (node.address, node.ports[2])
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def only(node):
    """A session whose requests go to `node` alone (it coordinates them)."""
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([node.address]),
                               retry_policy=FallthroughRetryPolicy(), request_timeout=20)
    cluster = Cluster([node.address], port=node.cql_port, protocol_version=4,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    return cluster, cluster.connect()


class Load:
    """Runs `step` on a thread, key after key (`next_key`), through a
    token-aware driver given `node`, until stopped; counts failures."""

    def __init__(self, node, profile=None):
        profiles = {EXEC_PROFILE_DEFAULT: profile} if profile else None
        self.cluster = Cluster([node.address], port=node.cql_port, protocol_version=4,
                               execution_profiles=profiles)
        self.session = self.cluster.connect()
        self.failed = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self):
        while not self.stop.is_set():
            key = self.next_key()
            try:
                self.step(key)
            except Exception as e:  # noqa: BLE001 - counted and reported
                self.failed.append((key, repr(e)))

    def end(self):
        self.stop.set()
        self.thread.join()
        self.cluster.shutdown()


class Writer(Load):
    """Writes new rows at QUORUM until stopped; remembers the keys
    acknowledged and counts failures."""

    def __init__(self, node, first_key):
        super().__init__(node)
        self.insert = self.session.prepare("INSERT INTO ops.t (k, v) VALUES (?, ?)")
        self.insert.consistency_level = CL.QUORUM
        self.key = first_key
        self.acked = []
        self.thread.start()

    def next_key(self):
        self.key += 1
        return self.key - 1

    def step(self, key):
        self.session.execute(self.insert, (key, "v%d" % key))
        self.acked.append(key)

    def finish(self):
        self.end()
        return self.acked


class CounterWriter(Load):
    """Increments `KEYS` counters in turn at QUORUM until stopped; counts
    the increments acknowledged per key and the failed ones. A counter
    increment is not idempotent, so the driver does not retry it: one
    whose answer was lost (a connection cut as a node stops) may or may not
    have counted, as with Cassandra."""

    KEYS = 40
    # Failed increments tolerated: a node's exit can cut off an answer.
    FAILED_MAX = 5

    def __init__(self, node):
        super().__init__(node, ExecutionProfile(load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
                                                retry_policy=FallthroughRetryPolicy(), request_timeout=20))
        self.increment = self.session.prepare("UPDATE cops.t SET n = n + 1 WHERE k = ?")
        self.increment.consistency_level = CL.QUORUM
        self.acked = {k: 0 for k in range(self.KEYS)}
        self.sent = 0
        self.thread.start()

    def next_key(self):
        self.sent += 1
        return (self.sent - 1) % self.KEYS

    def step(self, key):
        self.session.execute(self.increment, (key,))
        self.acked[key] += 1

    def finish(self):
        """{key: (acknowledged, failed)} increments."""
        self.end()
        assert len(self.failed) <= self.FAILED_MAX, self.failed[:5]
        return {k: (n, sum(1 for key, _ in self.failed if key == k)) for k, n in self.acked.items()}


def counts_on(node, keys, table="cops.t"):
    """{k: n} of counters `keys` of `table` as `node` alone reads them (ONE)."""
    cluster, session = only(node)
    try:
        select = session.prepare("SELECT k, n FROM %s WHERE k = ?" % table)
        select.consistency_level = CL.ONE
        results = execute_concurrent_with_args(session, select, [(k,) for k in keys], concurrency=32)
        counts = {}
        for ok, answer in results:
            assert ok, answer
            counts.update({r.k: r.n for r in answer})
        return counts
    finally:
        cluster.shutdown()


def wait_for_counts(nodes, expected):
    """Until every node, reading at ONE, counts what `expected` ({key:
    (acknowledged, failed)}) allows: every acknowledged increment, plus at
    most the failed ones (the replica a QUORUM write did not wait for may
    trail by a moment)."""
    deadline = time.monotonic() + 20

    def right(count, k):
        acked, failed = expected[k]
        return count is not None and acked <= count <= acked + failed
    while True:
        counts = {n.address: counts_on(n, list(expected)) for n in nodes}
        if all(right(c.get(k), k) for c in counts.values() for k in expected):
            return
        wrong = {a: {k: (c.get(k), expected[k]) for k in expected if not right(c.get(k), k)}
                 for a, c in counts.items()}
        assert time.monotonic() < deadline, "counts (got, expected) differ: %s" % wrong
        time.sleep(0.5)


def missing_on(node, keys):
    """The keys that `node`, reading at ONE, does not find."""
    cluster, session = only(node)
    try:
        select = session.prepare("SELECT v FROM ops.t WHERE k = ?")
        select.consistency_level = CL.ONE
        results = execute_concurrent_with_args(session, select, [(k,) for k in keys], concurrency=64)
        return [k for k, (ok, rows) in zip(keys, results) if not ok or rows.one() is None]
    finally:
        cluster.shutdown()


def kill_for_good(node, members, observer):
    """Kills `node` (-9) and waits until `observer` sees it down; its host id."""
    host_id = next(m["host_id"] for m in members if m["address"].startswith(node.address + ":"))
    node.kill()
    deadline = time.monotonic() + 20
    while "DN " not in observer.nodetool("status"):
        assert time.monotonic() < deadline, "the dead node is not seen down"
        time.sleep(0.5)
    return host_id


def cluster_with_table(stack, prefix, keyspace, columns):
    """Three nodes, hints off, a session on the first, and `keyspace.t`
    (RF=3) with `columns`."""
    nodes = start_cluster(stack, prefix, NO_HINTS)
    cluster, session = only(nodes[0])
    stack.callback(cluster.shutdown)
    session.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}"
                    % keyspace)
    session.execute("CREATE TABLE %s.t (%s)" % (keyspace, columns))
    return nodes, session


def join_a_fourth(stack, prefix, nodes):
    """Starts a fourth node (127.0.0.5, hints off) seeded by `nodes`, on
    `stack`; it returns once the node serves (it has streamed its ranges)."""
    joiner = stack.enter_context(temp_node(prefix, start=False, address="127.0.0.5"))
    seeds = ",".join("%s:%d" % (n.address, n.storage_port) for n in nodes)
    joiner.args = ["--seeds", seeds, "--memory", "512M", "--failure-detector-timeout-in-ms", "2000", *NO_HINTS]
    joiner.start(timeout=60)
    return joiner


def stored_partitions(node):
    """Partitions in the node's SSTables, all tables and shards."""
    lines = node.metrics().splitlines()
    return sum(float(line.split()[-1]) for line in lines if line.startswith("shoal_sstable_partitions"))


def test_nodes_join_leave_are_replaced_and_removed_under_load_without_losing_a_write():
    with contextlib.ExitStack() as stack:
        nodes, session = cluster_with_table(stack, "shoal-node-ops-", "ops", "k int PRIMARY KEY, v text")
        insert = session.prepare("INSERT INTO ops.t (k, v) VALUES (?, ?)")
        insert.consistency_level = CL.QUORUM
        for k in range(PRELOADED):
            session.execute(insert, (k, "v%d" % k))
        # Some of it in SSTables, some in memtables: streaming reads both.
        nodes[0].nodetool("flush")
        nodes[1].nodetool("flush")

        # Bootstrap a fourth node under load.
        writer = Writer(nodes[0], PRELOADED)
        time.sleep(1)
        joiner = join_a_fourth(stack, "shoal-node-ops-", nodes)
        time.sleep(1)
        written = writer.finish()
        assert not writer.failed, writer.failed[:5]
        assert len(written) > 100, "the load ran through the join"
        status = joiner.nodetool("status")
        assert status.count("UN ") == 4, status
        # Every node's load, peers' as their ping answers tell it.
        assert all(line.split()[2] != "?" for line in status.splitlines() if line.startswith("UN")), status
        # Tokens balance what each node replicates at RF=3: three quarters
        # of the ring each ("Owns (effective)"), where tokens that only
        # evened out first-owned ranges gave 50% to 91%.
        status = joiner.nodetool("status", "ops")
        assert "Owns (effective)" in status, status
        effective = [float(next(w for w in line.split() if w.endswith("%")).rstrip("%"))
                     for line in status.splitlines() if line.startswith("UN")]
        assert len(effective) == 4 and all(73 < o < 77 for o in effective), status
        assert "streamed in" in open(joiner.log_path).read()
        everything = list(range(PRELOADED)) + written
        assert missing_on(joiner, everything) == []
        nodes.append(joiner)

        # Cleanup: an old replica still holds the ranges the joiner took.
        # Afterwards it holds exactly the keys the driver's token map
        # (four nodes, RF=3) says it replicates.
        nodes[0].nodetool("flush")
        before = stored_partitions(nodes[0])
        assert "cleaned up" in nodes[0].nodetool("cleanup", "ops")
        session.cluster.refresh_nodes(force_token_rebuild=True)
        assert len(session.cluster.metadata.all_hosts()) == 4
        replicated = [k for k in everything if nodes[0].address in
                      {h.address for h in session.cluster.metadata.get_replicas("ops", struct.pack(">i", k))}]
        assert stored_partitions(nodes[0]) == len(replicated) < before, (before, len(replicated))

        # Decommission the second node under load.
        writer = Writer(nodes[0], written[-1] + 1 if written else PRELOADED)
        leaving = nodes[1]
        host_id = json.loads(urllib.request.urlopen(
            "http://%s:%d/storage_service/hostid/local" % (leaving.address, leaving.ports[2])).read())
        assert "decommissioned" in leaving.nodetool("decommission")
        leaving.proc.wait(timeout=20)
        written = writer.finish()
        assert not writer.failed, writer.failed[:5]
        members = group0(nodes[0])["members"]
        assert len(members) == 3 and host_id not in [m["host_id"] for m in members], members
        # Restarted on its old workdir, it refuses to serve as a member.
        with pytest.raises(AssertionError, match="left the cluster"):
            leaving.start()
        everything += written
        rest = [n for n in nodes if n is not leaving]
        for n in rest:
            assert missing_on(n, everything) == [], n.address

        # Kill one for good and replace it, under load.
        dead = rest[1]
        dead_id = kill_for_good(dead, members, rest[0])
        writer = Writer(rest[0], written[-1] + 1)
        replacement = stack.enter_context(temp_node("shoal-node-ops-", start=False, address="127.0.0.6"))
        seeds = "%s:%d" % (rest[0].address, rest[0].storage_port)
        replacement.args = ["--seeds", seeds, "--memory", "512M", "--failure-detector-timeout-in-ms", "2000",
                            "--replace-node-first-boot", dead_id, *NO_HINTS]
        replacement.start(timeout=60)
        time.sleep(1)
        written = writer.finish()
        assert not writer.failed, writer.failed[:5]
        members = group0(rest[0])["members"]
        ids = [m["host_id"] for m in members]
        assert len(members) == 3 and dead_id not in ids, members
        assert replacement.nodetool("status").count("UN ") == 3
        everything += written
        rest = [rest[0], replacement, rest[2]]
        for n in rest:
            assert missing_on(n, everything) == [], n.address

        # Kill another for good and remove it from the first.
        dead = rest[2]
        dead_id = kill_for_good(dead, members, rest[0])
        survivors = rest[:2]
        assert "removed" in survivors[0].nodetool("removenode", dead_id)
        members = group0(survivors[1])["members"]
        assert sorted(m["host_id"] for m in members) == sorted(
            m["host_id"] for m in group0(survivors[0])["members"]) and len(members) == 2, members
        for n in survivors:
            assert missing_on(n, everything) == [], n.address
        # Back on its old workdir, the removed node still thinks it is a
        # member; the survivors tell it it left, and it stops unserved.
        with pytest.raises(AssertionError, match="left the cluster"):
            dead.start(timeout=30)


def test_counters_count_once_through_a_bootstrap_and_a_decommission():
    with contextlib.ExitStack() as stack:
        nodes, session = cluster_with_table(stack, "shoal-counter-ops-", "cops", "k int PRIMARY KEY, n counter")
        writer = CounterWriter(nodes[0])
        time.sleep(1)
        joiner = join_a_fourth(stack, "shoal-counter-ops-", nodes)
        time.sleep(1)
        expected = writer.finish()
        assert sum(acked for acked, _ in expected.values()) > 100, "the load ran through the join"
        assert "streamed in" in open(joiner.log_path).read()
        nodes.append(joiner)
        wait_for_counts(nodes, expected)

        writer = CounterWriter(nodes[0])
        time.sleep(0.5)
        leaving = nodes[1]
        assert "decommissioned" in leaving.nodetool("decommission")
        leaving.proc.wait(timeout=20)
        time.sleep(0.5)
        more = writer.finish()
        expected = {k: (expected[k][0] + more[k][0], expected[k][1] + more[k][1]) for k in expected}
        wait_for_counts([n for n in nodes if n is not leaving], expected)


def test_counters_survive_a_kill_9_under_load_and_repair_brings_the_killed_node_back():
    with contextlib.ExitStack() as stack:
        nodes, session = cluster_with_table(stack, "shoal-counter-kill-", "cops", "k int PRIMARY KEY, n counter")
        writer = CounterWriter(nodes[0])
        time.sleep(1)
        nodes[2].kill()
        # QUORUM goes on with two replicas, led by whichever coordinates.
        time.sleep(3)
        expected = writer.finish()
        assert sum(acked for acked, _ in expected.values()) > 100, "the load ran through the kill"
        wait_for_counts(nodes[:2], expected)
        # Back with hints off, it lacks what it missed until repair.
        nodes[2].start()
        deadline = time.monotonic() + 20
        while nodes[0].nodetool("status").count("UN ") < 3:
            assert time.monotonic() < deadline, "the restarted node is not seen up"
            time.sleep(0.5)
        held = counts_on(nodes[2], list(expected))
        assert any(held.get(k, 0) < acked for k, (acked, _) in expected.items()), "it missed increments"
        assert " differed" in nodes[0].nodetool("repair", "cops")
        wait_for_counts(nodes, expected)


def rows_of(node, keys):
    """{(k, c): v} of partitions `keys` as `node` alone has them (ONE)."""
    cluster, session = only(node)
    try:
        select = session.prepare("SELECT k, c, v FROM rep.t WHERE k = ?")
        select.consistency_level = CL.ONE
        results = execute_concurrent_with_args(session, select, [(k,) for k in keys], concurrency=32)
        rows = {}
        for ok, answer in results:
            assert ok, answer
            rows.update({(r.k, r.c): r.v for r in answer})
        return rows
    finally:
        cluster.shutdown()


def test_repair_converges_a_replica_that_missed_writes_row_by_row():
    with contextlib.ExitStack() as stack:
        nodes, session = cluster_with_table(stack, "shoal-repair-", "rep", "k int, c int, v text, PRIMARY KEY (k, c)")
        session.execute("CREATE TABLE rep.c (k int PRIMARY KEY, n counter)")
        increment = session.prepare("UPDATE rep.c SET n = n + ? WHERE k = ?")
        increment.consistency_level = CL.ALL
        for k in range(5):
            session.execute(increment, (1, k))
        insert = session.prepare("INSERT INTO rep.t (k, c, v) VALUES (?, ?, ?)")
        # Every replica holds the first writes before one is killed: at a
        # lower level the last of them may still be in flight to it, and
        # repair would then find one more row to copy.
        insert.consistency_level = CL.ALL
        expected = {}
        for k in range(30):
            for c in range(10):
                session.execute(insert.bind((k, c, "a")), timeout=10)
                expected[(k, c)] = "a"
        nodes[2].kill()
        wait_down = time.monotonic() + 20
        while "DN " not in nodes[0].nodetool("status"):
            assert time.monotonic() < wait_down, "the killed node is not seen down"
            time.sleep(0.5)
        insert.consistency_level = CL.QUORUM
        for k in range(30, 50):
            for c in range(10):
                session.execute(insert, (k, c, "new"))
                expected[(k, c)] = "new"
        for k in range(0, 10):
            session.execute(insert, (k, 0, "updated"))
            expected[(k, 0)] = "updated"
        delete_row = session.prepare("DELETE FROM rep.t WHERE k = ? AND c = ?")
        delete_row.consistency_level = CL.QUORUM
        for k in range(10, 20):
            session.execute(delete_row, (k, 5))
            del expected[(k, 5)]
        delete_partition = session.prepare("DELETE FROM rep.t WHERE k = ?")
        delete_partition.consistency_level = CL.QUORUM
        session.execute(delete_partition, (25,))
        expected = {key: v for key, v in expected.items() if key[0] != 25}
        # Counters: five it holds grow, five new ones it lacks.
        increment.consistency_level = CL.QUORUM
        for k in range(10):
            session.execute(increment, (2, k))
        counts = {k: 3 if k < 5 else 2 for k in range(10)}

        nodes[2].start()
        wait_up = time.monotonic() + 20
        while nodes[0].nodetool("status").count("UN ") < 3:
            assert time.monotonic() < wait_up, "the restarted node is not seen up"
            time.sleep(0.5)
        keys = range(50)
        assert rows_of(nodes[2], keys) != expected, "the restarted node missed the writes"
        assert counts_on(nodes[2], list(counts), "rep.c") != counts, "the restarted node missed the increments"
        out = nodes[0].nodetool("repair", "rep")
        # Row-level: of the 41 partitions of rep.t that differ, the 20 the
        # node lacks and the one deleted whole are reconciled whole; in the
        # other 20, only the updated or deleted row, not their 10. Of the
        # 10 counters, the 5 it lacks are whole, the 5 it holds a row each.
        assert "51 differed (26 whole, 25 row(s) in the others)" in out, out
        for n in nodes:
            assert rows_of(n, keys) == expected, n.address
            assert counts_on(n, list(counts), "rep.c") == counts, n.address
        again = nodes[1].nodetool("repair", "rep")
        assert " 0 differed" in again, again

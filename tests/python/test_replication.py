"""Replication across three real nodes (127.0.0.2-4), through the Python
cassandra-driver, one session per node so each node coordinates in turn.

- Schema changes go through group 0: DDL on one node is on every node when
  it is answered (same schema version everywhere), and drivers connected to
  the other nodes hear of it (SCHEMA_CHANGE).
- RF=3: writes at every consistency level from every node; each node then
  holds every row (a read at ONE is served by the coordinator itself);
  counter increments count once on each replica. At RF=1 a counter write
  coordinated by a node that does not hold it is led by the one that does.
- RF=1: a row lives on one node, and every node reads it there; a scan
  pages across the nodes in token order.
- One node killed: QUORUM still writes and reads; ALL and THREE are
  Unavailable with the protocol's counts.
- Writes, a delete and counter increments the dead node missed, with
  hints off: after it returns it does not have them at ONE; a read at ALL
  repairs it, for a partition and for a range, row by row, and a counter
  (its replicas' shards merged: nothing counted twice). TRUNCATE empties every node, and
  is Unavailable while one is down.
- With hints on: the coordinators keep what the dead node missed and send
  it when it returns; at ANY a write whose only replica is down succeeds
  as a hint and is there once the replica is back. Hints are on disk: a
  coordinator killed with -9 and restarted still delivers them.
- A driver given one node finds the others (system.peers_v2, NEW_NODE),
  routes token-aware, and rides out a node killed under QUORUM load.
- A logged batch whose coordinator could not finish it is applied whole
  from another node's batchlog, also after that node's kill -9 and restart.
- A replica killed with -9 replays from its commitlog the writes other
  coordinators sent it (logged as their encodings came).
"""
import contextlib
import time

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import Unavailable
from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
from cassandra.policies import WhiteListRoundRobinPolicy, FallthroughRetryPolicy
from cassandra.query import SimpleStatement

from node import CLUSTER_ADDRESSES as ADDRESSES, skip_reason, start_cluster, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

WRITE_LEVELS = (CL.ANY, CL.ONE, CL.TWO, CL.THREE, CL.QUORUM, CL.ALL, CL.LOCAL_QUORUM, CL.EACH_QUORUM, CL.LOCAL_ONE)
READ_LEVELS = (CL.ONE, CL.TWO, CL.THREE, CL.QUORUM, CL.ALL, CL.LOCAL_QUORUM, CL.LOCAL_ONE)


def wait_for(what, check, timeout=20):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "%s: not within %d s" % (what, timeout)
        time.sleep(0.2)


class Sessions:
    """One driver session per node, each sending only to its node."""

    def __init__(self):
        self.clusters = {}

    def connect(self, node):
        profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([node.address]),
                                   retry_policy=FallthroughRetryPolicy(), request_timeout=10)
        cluster = Cluster([node.address], port=node.cql_port, protocol_version=4,
                          execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        self.clusters[node.address] = cluster
        return cluster.connect()

    def close(self):
        for cluster in self.clusters.values():
            cluster.shutdown()


def succeeds(request):
    try:
        request()
        return True
    except Exception:  # noqa: BLE001 - Unavailable, or a replica not yet known dead
        return False


def unavailable(request):
    try:
        request()
        return False
    except Unavailable:
        return True
    except Exception:  # noqa: BLE001 - a replica not yet known dead
        return False


def q(session, text, level, params=None):
    return list(session.execute(SimpleStatement(text, consistency_level=level), params))


def test_three_nodes_replicate_at_every_level_and_repair_a_node_that_missed_writes():
    with contextlib.ExitStack() as stack:
        # No hints: what the dead node misses stays missed until repair.
        nodes = start_cluster(stack, "shoal-replication-", ["--max-hint-window-in-ms", "0"])
        sessions = Sessions()
        stack.callback(sessions.close)
        s = [sessions.connect(n) for n in nodes]
        wait_for("three members, all up", lambda: all(n.nodetool("status").count("UN ") == 3 for n in nodes))

        # Schema through group 0: made on one node, there on all at once.
        s[0].execute("CREATE KEYSPACE rf3 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        s[1].execute("CREATE TABLE rf3.t (k int, c int, v text, PRIMARY KEY (k, c))")
        s[2].execute("CREATE KEYSPACE rf1 WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 1}")
        s[0].execute("CREATE TABLE rf1.t (k int PRIMARY KEY, v text)")
        versions = {q(x, "SELECT schema_version FROM system.local", CL.ONE)[0].schema_version for x in s}
        assert len(versions) == 1, versions
        for x in s:
            tables = {r.table_name for r in q(x, "SELECT table_name FROM system_schema.tables "
                                                 "WHERE keyspace_name IN ('rf3', 'rf1')", CL.ONE)}
            assert tables == {"t"}
        wait_for("SCHEMA_CHANGE reaches a driver on another node",
                 lambda: "rf1" in sessions.clusters[nodes[2].address].metadata.keyspaces)
        # Every shard of every node learns the others are up a moment after
        # its failure detector does (shard 0 sends the news).
        wait_for("every coordinator sees three live replicas", lambda: all(
            succeeds(lambda: q(x, "INSERT INTO rf3.t (k, c, v) VALUES (-1, 0, 'probe')", CL.ALL)) for x in s))
        q(s[0], "DELETE FROM rf3.t WHERE k = -1", CL.ALL)

        # RF=3 at every level, every node coordinating.
        for i, level in enumerate(WRITE_LEVELS):
            for j, x in enumerate(s):
                q(x, "INSERT INTO rf3.t (k, c, v) VALUES (%s, %s, %s)", level, (i, j, "%d-%d" % (i, j)))
        expected = sorted((i, j, "%d-%d" % (i, j)) for i in range(len(WRITE_LEVELS)) for j in range(3))
        # At ONE the coordinator reads its own copy: every node has all (the
        # writes at ONE reach the third replica a moment after their answer).
        wait_for("every node holds every row", lambda: all(
            sorted(tuple(r) for r in q(x, "SELECT k, c, v FROM rf3.t", CL.ONE)) == expected for x in s))
        for x in s:
            for level in READ_LEVELS:
                rows = q(x, "SELECT c, v FROM rf3.t WHERE k = %s", level, (3,))
                assert [(r.c, r.v) for r in rows] == [(0, "3-0"), (1, "3-1"), (2, "3-2")], level
        with pytest.raises(Exception, match="EACH_QUORUM"):
            q(s[0], "SELECT * FROM rf3.t WHERE k = 1", CL.EACH_QUORUM)

        # Counters: each replica applies each increment once.
        s[0].execute("CREATE TABLE rf3.c (k int PRIMARY KEY, n counter)")
        for i in range(30):
            q(s[i % 3], "UPDATE rf3.c SET n = n + 1 WHERE k = 1", CL.QUORUM)
        assert q(s[1], "SELECT n FROM rf3.c WHERE k = 1", CL.ALL)[0].n == 30
        # The third replica's copy may trail the QUORUM answers by a moment.
        wait_for("every replica counts 30", lambda: all(
            q(x, "SELECT n FROM rf3.c WHERE k = 1", CL.ONE)[0].n == 30 for x in s))
        # RF=1: most increments are coordinated by a node that is not the
        # counter's replica, and led by the one that is.
        s[0].execute("CREATE TABLE rf1.c (k int PRIMARY KEY, n counter)")
        for i in range(60):
            q(s[i % 3], "UPDATE rf1.c SET n = n + %s WHERE k = %s", CL.ONE, (i % 4, i % 5))
        for x in s:
            counts = {r.k: r.n for r in q(x, "SELECT k, n FROM rf1.c", CL.ONE)}
            assert counts == {k: sum(i % 4 for i in range(60) if i % 5 == k) for k in range(5)}
        with pytest.raises(Exception, match="ANY is not yet supported for counter"):
            q(s[0], "UPDATE rf3.c SET n = n + 1 WHERE k = 1", CL.ANY)

        # RF=1: one node holds each row; every node finds it.
        for k in range(60):
            q(s[k % 3], "INSERT INTO rf1.t (k, v) VALUES (%s, %s)", CL.ONE, (k, "v%d" % k))
        for x in s:
            assert len(q(x, "SELECT * FROM rf1.t", CL.ONE)) == 60
            assert q(x, "SELECT v FROM rf1.t WHERE k = 17", CL.ONE)[0].v == "v17"
            # Paging across nodes: small pages, every row once, in token order.
            paged = list(x.execute(SimpleStatement("SELECT token(k), k FROM rf1.t", fetch_size=7)))
            assert sorted(r.k for r in paged) == list(range(60))
            tokens = [r[0] for r in paged]
            assert tokens == sorted(tokens)
            assert len(q(x, "SELECT * FROM rf1.t LIMIT 25", CL.ONE)) == 25
            assert q(x, "SELECT count(*) FROM rf1.t", CL.ONE)[0].count == 60

        # One node down: QUORUM goes on, ALL and THREE cannot.
        nodes[2].kill()
        wait_for("the dead node is seen DOWN", lambda: "DN" in nodes[0].nodetool("status"))
        for level in (CL.ALL, CL.THREE):
            with pytest.raises(Unavailable) as failed:
                q(s[0], "INSERT INTO rf3.t (k, c, v) VALUES (100, 0, 'x')", level)
            assert (failed.value.required_replicas, failed.value.alive_replicas) == (3, 2)
        for k in range(100, 140):
            q(s[k % 2], "INSERT INTO rf3.t (k, c, v) VALUES (%s, 0, 'missed')", CL.QUORUM, (k,))
        q(s[0], "DELETE FROM rf3.t WHERE k = 0", CL.QUORUM)
        assert len(q(s[1], "SELECT * FROM rf3.t WHERE k = 120", CL.QUORUM)) == 1
        for i in range(12):
            q(s[i % 2], "UPDATE rf3.c SET n = n + 1 WHERE k = 1", CL.QUORUM)

        # Back, it lacks what it missed until a read at ALL repairs it.
        nodes[2].start()
        s[2] = sessions.connect(nodes[2])
        # Every node, not one: the TRUNCATE at ALL below is coordinated by
        # the second, and each node sees the restarted one at its own ping.
        wait_for("the node is seen UP again by every node",
                 lambda: all("DN" not in n.nodetool("status") for n in nodes))
        assert q(s[2], "SELECT * FROM rf3.t WHERE k = 120", CL.ONE) == []
        assert len(q(s[2], "SELECT * FROM rf3.t WHERE k = 0", CL.ONE)) == 3
        assert [r.v for r in q(s[2], "SELECT v FROM rf3.t WHERE k = 120", CL.ALL)] == ["missed"]
        assert [r.v for r in q(s[2], "SELECT v FROM rf3.t WHERE k = 120", CL.ONE)] == ["missed"]
        everything = q(s[2], "SELECT k, c, v FROM rf3.t", CL.ALL)
        assert len(everything) == len(expected) - 3 + 40
        assert sorted(tuple(r) for r in q(s[2], "SELECT k, c, v FROM rf3.t", CL.ONE)) == sorted(
            tuple(r) for r in everything)
        assert q(s[2], "SELECT * FROM rf3.t WHERE k = 0", CL.ONE) == []
        assert q(s[2], "SELECT n FROM rf3.c WHERE k = 1", CL.ONE)[0].n == 30
        assert q(s[2], "SELECT n FROM rf3.c WHERE k = 1", CL.ALL)[0].n == 42
        for x in s:
            assert q(x, "SELECT n FROM rf3.c WHERE k = 1", CL.ONE)[0].n == 42

        # TRUNCATE empties every node.
        s[1].execute("TRUNCATE rf3.t")
        for x in s:
            assert q(x, "SELECT * FROM rf3.t", CL.ONE) == []


def test_a_token_aware_driver_finds_every_node_hears_events_and_rides_out_a_death():
    """The driver is given one node: it finds the others in system.peers_v2
    (and hears NEW_NODE as they join), routes token-aware to them, sees one
    killed with -9 and back (STATUS_CHANGE UP), and under QUORUM load
    across the death no request fails and no acknowledged write is lost."""
    with contextlib.ExitStack() as stack:
        nodes = [stack.enter_context(temp_node("shoal-drivers-", start=False, address=a)) for a in ADDRESSES]
        first = "%s:%d" % (nodes[0].address, nodes[0].storage_port)
        for n in nodes:
            n.args = ["--seeds", first, "--memory", "512M", "--failure-detector-timeout-in-ms", "2000"]
        nodes[0].start()
        profile = ExecutionProfile(request_timeout=10)
        cluster = Cluster([nodes[0].address], port=nodes[0].cql_port, protocol_version=4,
                          execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        stack.callback(cluster.shutdown)
        session = cluster.connect()
        for n in nodes[1:]:
            n.start()

        def hosts_up():
            return sorted(h.address for h in cluster.metadata.all_hosts() if h.is_up)
        wait_for("the driver finds both joiners (NEW_NODE)", lambda: hosts_up() == list(ADDRESSES), timeout=30)
        ports = {h.address: h.endpoint.port for h in cluster.metadata.all_hosts()}
        assert ports == {n.address: n.cql_port for n in nodes}, "native ports from system.peers_v2"

        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'NetworkTopologyStrategy', "
                        "'replication_factor': 3}")
        session.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int)")
        insert = session.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
        insert.consistency_level = CL.QUORUM
        select = session.prepare("SELECT v FROM ks.t WHERE k = ?")
        select.consistency_level = CL.QUORUM
        # Both may be retried on another node when one dies mid-request.
        insert.is_idempotent = select.is_idempotent = True
        coordinators = {session.execute(insert, (k, k)).response_future.coordinator_host for k in range(60)}
        assert len(coordinators) == 3, "token-aware routing uses every node: %s" % coordinators

        acknowledged, failures = [], []
        deadline = time.monotonic() + 8
        killed_at = time.monotonic() + 2
        k = 1000
        while time.monotonic() < deadline:
            if nodes[2].alive() and time.monotonic() > killed_at:
                nodes[2].kill()
            try:
                session.execute(insert, (k, k))
                acknowledged.append(k)
                assert session.execute(select, (k,)).one().v == k
            except Exception as e:  # noqa: BLE001 - every failure counts
                failures.append(repr(e))
            k += 1
        assert not nodes[2].alive()
        assert failures == [], failures[:5]
        assert len(acknowledged) > 50
        for k in acknowledged:
            assert session.execute(select, (k,)).one().v == k

        nodes[2].start()
        wait_for("the driver sees the node UP again", lambda: hosts_up() == list(ADDRESSES), timeout=30)


def metric(node, name):
    """The sum of a metric over the node's shards."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in node.metrics().splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def test_hints_bring_back_what_a_dead_node_missed_and_any_succeeds_through_them():
    with contextlib.ExitStack() as stack:
        nodes = start_cluster(stack, "shoal-hints-")
        sessions = Sessions()
        stack.callback(sessions.close)
        s = [sessions.connect(n) for n in nodes]
        s[0].execute("CREATE KEYSPACE rf3 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        s[0].execute("CREATE TABLE rf3.t (k int PRIMARY KEY, v text)")
        s[0].execute("CREATE KEYSPACE rf1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s[0].execute("CREATE TABLE rf1.t (k int PRIMARY KEY, v text)")
        wait_for("every coordinator sees three live replicas", lambda: all(
            succeeds(lambda: q(x, "INSERT INTO rf3.t (k, v) VALUES (-1, 'probe')", CL.ALL)) for x in s))

        nodes[2].kill()
        wait_for("the dead node is seen DOWN", lambda: all(
            unavailable(lambda: q(x, "INSERT INTO rf3.t (k, v) VALUES (-1, 'probe')", CL.ALL)) for x in s[:2]))
        for k in range(40):
            q(s[k % 2], "INSERT INTO rf3.t (k, v) VALUES (%s, 'hinted')", CL.QUORUM, (k,))
        # ANY: kept as a hint where the one replica is the dead node.
        unavailable_at_one = 0
        for k in range(40):
            q(s[0], "INSERT INTO rf1.t (k, v) VALUES (%s, 'any')", CL.ANY, (k,))
            unavailable_at_one += not succeeds(lambda: q(s[0], "INSERT INTO rf1.t (k, v) VALUES (%s, 'any')",
                                                         CL.ONE, (k,)))
        assert unavailable_at_one > 0, "some rf1 keys live on the dead node"
        assert metric(nodes[0], "shoal_hints_stored_total") > 0
        with pytest.raises(Unavailable):
            s[0].execute("TRUNCATE rf1.t")

        nodes[2].start()
        s[2] = sessions.connect(nodes[2])
        # The node reads its own copy at ONE: the hints reached it.
        wait_for("the hints are replayed", lambda: len(q(s[2], "SELECT * FROM rf3.t", CL.ONE)) == 41)
        assert {r.v for r in q(s[2], "SELECT v FROM rf3.t WHERE k IN (0, 1, 39)", CL.ONE)} == {"hinted"}
        wait_for("ANY writes arrive", lambda: len(q(s[2], "SELECT * FROM rf1.t", CL.ONE)) == 40)
        assert metric(nodes[0], "shoal_hints_replayed_total") + metric(nodes[1], "shoal_hints_replayed_total") > 0


def three_nodes(stack, prefix, rf, args=()):
    """Three nodes, a session to each, and table rf<rf>.t (k int, v text)
    at that replication factor, once every coordinator sees all three."""
    nodes = start_cluster(stack, prefix, args)
    sessions = Sessions()
    stack.callback(sessions.close)
    s = [sessions.connect(n) for n in nodes]
    s[0].execute("CREATE KEYSPACE rf%d WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}"
                 % (rf, rf))
    s[0].execute("CREATE TABLE rf%d.t (k int PRIMARY KEY, v text)" % rf)
    wait_for("every coordinator sees three live nodes", lambda: all(
        succeeds(lambda: q(x, "SELECT * FROM rf%d.t" % rf, CL.ALL)) for x in s))
    return nodes, sessions, s


def test_hints_survive_their_coordinators_restart():
    with contextlib.ExitStack() as stack:
        nodes, sessions, s = three_nodes(stack, "shoal-hints-disk-", 3)
        q(s[0], "INSERT INTO rf3.t (k, v) VALUES (-1, 'probe')", CL.ALL)

        nodes[2].kill()
        wait_for("the dead node is seen DOWN", lambda: unavailable(
            lambda: q(s[0], "INSERT INTO rf3.t (k, v) VALUES (-1, 'probe')", CL.ALL)))
        for k in range(40):
            q(s[0], "INSERT INTO rf3.t (k, v) VALUES (%s, 'hinted')", CL.QUORUM, (k,))
        assert metric(nodes[0], "shoal_hints_stored_total") >= 40
        # The hint log's writer puts appended hints in the file at once
        # (its fdatasync is periodic: a kill -9 of the process loses nothing
        # written, a power cut up to 10 s).
        time.sleep(0.5)
        nodes[0].kill()
        nodes[0].start()
        s[0] = sessions.connect(nodes[0])
        nodes[2].start()
        s[2] = sessions.connect(nodes[2])
        wait_for("the restarted coordinator's hints are replayed",
                 lambda: len(q(s[2], "SELECT * FROM rf3.t", CL.ONE)) == 41, timeout=30)
        assert {r.v for r in q(s[2], "SELECT v FROM rf3.t WHERE k IN (0, 1, 39)", CL.ONE)} == {"hinted"}
        assert metric(nodes[0], "shoal_hints_replayed_total") >= 40


def test_a_replica_replays_the_writes_other_nodes_sent_it_after_a_kill():
    """Writes coordinated by the first node reach the third as messages,
    which it logs as their partitions' encodings came: killed with -9
    before any flush and restarted, it reads them all back from its
    commitlog at ONE (rows, clustering, statics, TTLs, collections,
    deletions)."""
    with contextlib.ExitStack() as stack:
        nodes, sessions, s = three_nodes(stack, "shoal-replica-replay-", 3)
        s[0].execute("CREATE TABLE rf3.c (k int, c int, st text STATIC, v text, m map<text, int>, "
                     "PRIMARY KEY (k, c))")
        wait_for("every coordinator sees the table", lambda: all(
            succeeds(lambda: q(x, "SELECT * FROM rf3.c", CL.ALL)) for x in s))
        for k in range(30):
            q(s[0], "INSERT INTO rf3.t (k, v) VALUES (%s, %s)", CL.ALL, (k, "v%d" % k))
        q(s[0], "INSERT INTO rf3.t (k, v) VALUES (100, 'lives') USING TTL 3600", CL.ALL)
        q(s[0], "DELETE FROM rf3.t WHERE k = 7", CL.ALL)
        for c in range(5):
            q(s[0], "INSERT INTO rf3.c (k, c, v, m) VALUES (1, %s, 'row', {'a': %s})", CL.ALL, (c, c))
        q(s[0], "UPDATE rf3.c SET st = 'static' WHERE k = 1", CL.ALL)
        q(s[0], "DELETE FROM rf3.c WHERE k = 1 AND c >= 3", CL.ALL)
        time.sleep(0.5)
        nodes[2].kill()
        nodes[2].start()
        s[2] = sessions.connect(nodes[2])
        rows = {r.k: r.v for r in q(s[2], "SELECT k, v FROM rf3.t", CL.ONE)}
        assert rows == {**{k: "v%d" % k for k in range(30) if k != 7}, 100: "lives"}
        assert q(s[2], "SELECT ttl(v) FROM rf3.t WHERE k = 100", CL.ONE)[0][0] > 3000
        clustered = q(s[2], "SELECT c, st, v, m FROM rf3.c WHERE k = 1", CL.ONE)
        assert [(r.c, r.st, r.v, dict(r.m)) for r in clustered] == [
            (c, "static", "row", {"a": c}) for c in range(3)]


def failed_batch(stack, prefix):
    """Three nodes, hints off; a logged batch over RF=1 partitions sent
    through the first node the moment the third dies (before anyone knows):
    it fails to the client, and the second node holds its copy. The three
    nodes and a session to each."""
    nodes, sessions, s = three_nodes(stack, prefix, 1, ["--max-hint-window-in-ms", "0"])
    batch = "BEGIN BATCH " + " ".join(
        "INSERT INTO rf1.t (k, v) VALUES (%d, 'batched');" % k for k in range(20)) + " APPLY BATCH"
    nodes[2].kill()
    with pytest.raises(Exception):
        s[0].execute(SimpleStatement(batch, consistency_level=CL.ONE))
    return nodes, sessions, s


def replayed_whole(nodes, sessions, s):
    nodes[2].start()
    s[2] = sessions.connect(nodes[2])
    wait_for("the batch is replayed whole", lambda: succeeds(
        lambda: len(q(s[0], "SELECT * FROM rf1.t", CL.ONE)) == 20 or 1 / 0), timeout=40)
    assert {r.v for r in q(s[1], "SELECT v FROM rf1.t", CL.ONE)} == {"batched"}


def test_a_logged_batch_whose_coordinator_could_not_finish_is_applied_whole_by_its_batchlog():
    """Nothing of the failed batch need have applied. Its copy in another
    node's batchlog is replayed until every partition took, once the dead
    node is back (hints are off, so only the batchlog can bring the batch
    in)."""
    with contextlib.ExitStack() as stack:
        replayed_whole(*failed_batch(stack, "shoal-batchlog-"))


def test_a_held_batch_survives_its_holders_restart():
    """The node holding the failed batch's copy is killed with -9 and
    restarted before the replay: its batch log brings the copy back."""
    with contextlib.ExitStack() as stack:
        nodes, sessions, s = failed_batch(stack, "shoal-batchlog-disk-")
        time.sleep(0.5)  # the batch log's writer puts the copy in its file at once
        nodes[1].kill()
        nodes[1].start()
        s[1] = sessions.connect(nodes[1])
        replayed_whole(nodes, sessions, s)

"""Group 0: membership agreed through Raft. Three real nodes on 127.0.0.2-4,
each given all three as seeds: the first seed forms the cluster, the others
ask to be added (the leader chooses their tokens: a third of the ring each),
and every node ends up with the same three members and the same leader. The leader killed with -9, the other two elect a new one and
keep the membership; restarted, the old leader comes back from its own log
(it does not ask to join again) and follows the new leader.

Read through `GET /raft/group0` and `GET /raft/leader_host`.

Racks: in a data center of as many racks as the replication factor, a
joiner's tokens split its rack's copy evenly with the rack's other nodes.

Snapshots: with one every 8 entries, the log stays short however many
schema changes are made; a node down through them, a node joining after
them and a node restarted all come up to date from a snapshot.
"""
import contextlib
import json
import os
import time
import urllib.request

import pytest
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy

from node import skip_reason, start_cluster, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
WAIT_S = 20


def group0(node):
    url = "http://%s:%d/raft/group0" % (node.address, node.ports[2])
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read().decode())


def wait_for(what, check, timeout=WAIT_S):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, "%s: not within %d s" % (what, timeout)
        time.sleep(0.2)


def agreed(nodes, size):
    """Every node in `nodes` sees the same leader and `size` members."""
    views = [group0(n) for n in nodes]
    leaders = {v["leader"] for v in views}
    return (len(leaders) == 1 and None not in leaders
            and all(len(v["members"]) == size for v in views))


def log_of(node):
    with open(node.log_path, errors="replace") as f:
        return f.read()


def test_three_nodes_agree_on_membership_and_survive_the_leader():
    with contextlib.ExitStack() as stack:
        nodes = [stack.enter_context(temp_node("shoal-group0-", start=False, address=a)) for a in ADDRESSES]
        seeds = ",".join("%s:%d" % (n.address, n.storage_port) for n in nodes)
        for n in nodes:
            n.args = ["--seeds", seeds, "--memory", "512M"]
            n.start()
        wait_for("three members and one leader everywhere", lambda: agreed(nodes, 3))
        view = group0(nodes[0])
        assert sorted(m["address"] for m in view["members"]) == sorted(
            "%s:%d" % (n.address, n.storage_port) for n in nodes)
        assert all(m["tokens"] == 256 for m in view["members"])
        # The joiners' tokens were chosen by the leader against the ring:
        # a third each, though the two joined at once.
        for m in view["members"]:
            assert abs(m["owns"] - 1 / 3) < 0.01, "unbalanced ownership: %s" % view["members"]
        assert "bootstrapping a new cluster" in log_of(nodes[0])
        for n in nodes[1:]:
            assert "joined through" in log_of(n)

        ids = {}
        for n in nodes:
            with urllib.request.urlopen("http://%s:%d/storage_service/hostid/local" % (n.address, n.ports[2])) as r:
                ids[json.loads(r.read().decode())] = n
        leader = ids[view["leader"]]
        term = view["term"]
        leader.kill()
        rest = [n for n in nodes if n is not leader]
        wait_for("a new leader among the other two",
                 lambda: agreed(rest, 3) and group0(rest[0])["leader"] != view["leader"])
        assert group0(rest[0])["term"] > term

        asked_before = log_of(leader).count("asking")
        leader.start()
        wait_for("the old leader follows the new one", lambda: agreed(nodes, 3))
        assert log_of(leader).count("asking") == asked_before, "a member asked to join again"


def tables_on(node, keyspace):
    """The tables `node` itself knows in `keyspace` (system_schema is local)."""
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([node.address]), request_timeout=20)
    cluster = Cluster([node.address], port=node.cql_port, protocol_version=4,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    try:
        rows = cluster.connect().execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))
        return {r.table_name for r in rows}
    finally:
        cluster.shutdown()


def raft_log_bytes(node):
    return os.path.getsize(os.path.join(node.workdir, "data", "raft", "raft.log"))


def test_snapshots_bound_the_log_and_bring_nodes_up_to_date():
    tables = {"t%d" % i for i in range(40)}
    with contextlib.ExitStack() as stack:
        nodes = start_cluster(stack, "shoal-group0-snap-", ["--group0-snapshot-threshold", "8"])
        wait_for("three members and one leader everywhere", lambda: agreed(nodes, 3))
        cluster = nodes[0].cluster(request_timeout=30)
        stack.callback(cluster.shutdown)
        session = cluster.connect()
        session.execute("CREATE KEYSPACE snap WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        down = nodes[2]
        down.kill()
        wait_for("the node seen down", lambda: "DN " in nodes[0].nodetool("status"))
        for name in sorted(tables):
            session.execute("CREATE TABLE snap.%s (k int PRIMARY KEY, v int)" % name)
        for n in nodes[:2]:
            assert "snapshot at entry" in log_of(n)
            # Each entry carries the whole schema: 40 of them without
            # snapshots would be far larger.
            assert raft_log_bytes(n) < 64 * 1024, raft_log_bytes(n)

        # Down through it all: the leader no longer has the entries it
        # missed, and sends it a snapshot.
        down.start()
        wait_for("the restarted node has every table", lambda: tables_on(down, "snap") == tables)
        assert "restored from a snapshot" in log_of(down)

        # Joining after the snapshots were taken: its state comes whole.
        joiner = stack.enter_context(temp_node("shoal-group0-snap-", start=False, address="127.0.0.5"))
        joiner.args = list(nodes[0].args)
        joiner.start(timeout=60)
        wait_for("four members everywhere", lambda: agreed(nodes + [joiner], 4))
        assert tables_on(joiner, "snap") == tables
        assert "restored from a snapshot" in log_of(joiner)

        # Restarted on its own snapshot and the few entries after it.
        nodes[0].kill()
        nodes[0].start()
        wait_for("the restarted node agrees", lambda: agreed(nodes + [joiner], 4))
        assert tables_on(nodes[0], "snap") == tables
        session.execute("INSERT INTO snap.t7 (k, v) VALUES (1, 2)")
        assert tables_on(nodes[1], "snap") == tables


def ownership(node, keyspace):
    url = "http://%s:%d/storage_service/ownership/%s" % (node.address, node.ports[2], keyspace)
    with urllib.request.urlopen(url, timeout=10) as r:
        return {e["key"]: e["value"] for e in json.loads(r.read().decode())}


def test_a_joiner_splits_its_racks_copy_evenly_when_racks_match_the_replication_factor():
    racks = ("r1", "r2", "r3", "r1")
    with contextlib.ExitStack() as stack:
        nodes = [stack.enter_context(temp_node("shoal-group0-racks-", start=False, address=a))
                 for a in ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")]
        seeds = ",".join("%s:%d" % (n.address, n.storage_port) for n in nodes[:3])
        for n, rack in zip(nodes, racks):
            n.args = ["--seeds", seeds, "--memory", "512M", "--dc", "dc1", "--rack", rack]
            n.start(timeout=60)
        wait_for("four members everywhere", lambda: agreed(nodes, 4))
        cluster = nodes[0].cluster(request_timeout=30)
        stack.callback(cluster.shutdown)
        cluster.connect().execute(
            "CREATE KEYSPACE racks WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 3}")
        # Each rack holds one whole copy: r2's and r3's nodes replicate
        # everything, r1's two split it, each within 2% of half.
        wait_for("the fourth node replicating", lambda: len(ownership(nodes[0], "racks")) == 4)
        shares = ownership(nodes[0], "racks")
        for n, rack in zip(nodes, racks):
            fair = 0.5 if rack == "r1" else 1.0
            assert abs(shares[n.address] - fair) < 0.01, shares

"""A network partition between real nodes, made with Linux network
namespaces: each of three nodes runs in its own namespace, joined to the
test's namespace by a bridge (10.77.0.0/24; nodes at .11, .12, .13), and
the partition is a blackhole route each way between the third node and the
other two, while clients still reach all three.

While partitioned, the isolated node answers every QUORUM request (read,
write, conditional write) with Unavailable or a timeout, never a wrong
answer, and the majority side serves QUORUM as usual. After the partition
heals, the hints the majority kept bring the isolated node up to date, and
what no hint covers (one majority node keeps none: its hint window is 0)
is brought in line by `nodetool repair`, checked row by row at ONE on the
isolated node.

Needs root and iproute2 (`ip netns`); skipped otherwise.
"""
import contextlib
import os
import shutil
import subprocess
import tempfile
import time

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import OperationTimedOut, ReadTimeout, Unavailable, WriteTimeout
from cassandra.query import SimpleStatement

from netns import NamespacedNode, ip, netns_reason, pinned_session, wait_status

SUBNET = "10.77.0"
BRIDGE_ADDRESS = SUBNET + ".1"
NODE_ADDRESSES = tuple("%s.%d" % (SUBNET, 11 + i) for i in range(3))
# What the protocol allows a QUORUM request to answer when its coordinator
# cannot reach a quorum (the driver's own timeout is a timeout too).
REFUSALS = (Unavailable, ReadTimeout, WriteTimeout, OperationTimedOut)


if netns_reason():
    pytest.skip(netns_reason(), allow_module_level=True)


class Network:
    """The bridge and one namespace per node; removed on close."""

    def __init__(self):
        tag = os.getpid() % 100000
        self.bridge = "shbr%d" % tag
        self.namespaces = ["shns%d-%d" % (tag, i) for i in range(3)]
        self.links = ["shv%d-%d" % (tag, i) for i in range(3)]
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", BRIDGE_ADDRESS + "/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for ns, link, address in zip(self.namespaces, self.links, NODE_ADDRESSES):
            ip("netns", "add", ns)
            ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("link", "set", link, "master", self.bridge, "up")
            ip("-n", ns, "addr", "add", address + "/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")

    def close(self):
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=30)

    def cut(self, i, action="add"):
        """Isolates node `i` from the other nodes (not from clients):
        blackhole routes both ways; `action="del"` heals."""
        for j, address in enumerate(NODE_ADDRESSES):
            if j != i:
                ip("-n", self.namespaces[i], "route", action, "blackhole", address + "/32")
                ip("-n", self.namespaces[j], "route", action, "blackhole", NODE_ADDRESSES[i] + "/32")


def values_at_one(session, keys):
    select = session.prepare("SELECT v FROM part.t WHERE k = ?")
    select.consistency_level = CL.ONE
    values = {}
    for k in keys:
        row = session.execute(select, (k,)).one()
        values[k] = row.v if row else None
    return values


def test_a_partitioned_node_refuses_quorum_and_converges_by_hints_and_repair():
    with contextlib.ExitStack() as stack:
        network = Network()
        stack.callback(network.close)
        root = tempfile.mkdtemp(prefix="shoal-partition-")
        stack.callback(shutil.rmtree, root, True)
        nodes = []
        for i, (ns, address) in enumerate(zip(network.namespaces, NODE_ADDRESSES)):
            node = NamespacedNode(os.path.join(root, str(i)), ns, address, args=())
            os.makedirs(node.workdir)
            nodes.append(node)
            stack.callback(node.kill)
        seeds = ",".join("%s:%d" % (n.address, n.storage_port) for n in nodes)
        for i, node in enumerate(nodes):
            node.args = ["--seeds", seeds, "--memory", "512M", "--failure-detector-timeout-in-ms", "2000"]
            if i == 0:
                node.args += ["--max-hint-window-in-ms", "0"]
            node.start()
        a, b, isolated = nodes
        wait_status(a, lambda s: s.count("UN ") == 3, "three nodes are not up")

        setup = pinned_session(stack, a, CL.ALL)
        setup.execute("CREATE KEYSPACE part WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        setup.execute("CREATE TABLE part.t (k int PRIMARY KEY, v int)")
        insert = setup.prepare("INSERT INTO part.t (k, v) VALUES (?, ?)")
        keys = range(40)
        for k in keys:
            setup.execute(insert, (k, 0))

        network.cut(2)
        wait_status(a, lambda s: s.count("DN ") == 1, "the majority does not see the isolated node down")
        wait_status(isolated, lambda s: s.count("DN ") == 2, "the isolated node does not see the others down")

        # The isolated side: every QUORUM request refused as the protocol
        # says, nothing answered from its own copy.
        lonely = pinned_session(stack, isolated, CL.QUORUM)
        refused = {"write": 0, "read": 0, "cas": 0}
        for k in keys[:5]:
            with pytest.raises(REFUSALS):
                lonely.execute(SimpleStatement("INSERT INTO part.t (k, v) VALUES (%s, 99)", consistency_level=CL.QUORUM),
                               (k,))
            refused["write"] += 1
            with pytest.raises(REFUSALS):
                lonely.execute(SimpleStatement("SELECT v FROM part.t WHERE k = %s", consistency_level=CL.QUORUM), (k,))
            refused["read"] += 1
            with pytest.raises(REFUSALS):
                lonely.execute(SimpleStatement("UPDATE part.t SET v = 98 WHERE k = %s IF v = 0",
                                               consistency_level=CL.QUORUM, serial_consistency_level=CL.SERIAL), (k,))
            refused["cas"] += 1
        assert refused == {"write": 5, "read": 5, "cas": 5}

        # The majority side serves QUORUM: half the writes through b (its
        # hints for the isolated node will be replayed), half through a
        # (which keeps no hints).
        via_b = pinned_session(stack, b, CL.QUORUM)
        via_a = pinned_session(stack, a, CL.QUORUM)
        hinted, lost = keys[:20], keys[20:]
        for session, part in ((via_b, hinted), (via_a, lost)):
            update = session.prepare("UPDATE part.t SET v = ? WHERE k = ?")
            for k in part:
                session.execute(update, (k + 1, k))
        select = via_a.prepare("SELECT v FROM part.t WHERE k = ?")
        assert all(via_a.execute(select, (k,)).one().v == k + 1 for k in keys)
        cas = via_b.execute(SimpleStatement("UPDATE part.t SET v = 100 WHERE k = 0 IF v = 1",
                                            consistency_level=CL.QUORUM, serial_consistency_level=CL.SERIAL))
        assert cas.one()[0], "a conditional write on the majority side"
        expected = {k: k + 1 for k in keys}
        expected[0] = 100

        network.cut(2, "del")
        wait_status(a, lambda s: s.count("UN ") == 3, "the partition does not heal")
        wait_status(isolated, lambda s: s.count("UN ") == 3, "the isolated node does not see the others again")

        # b's hints arrive; nothing brings a's writes but repair.
        mine = pinned_session(stack, isolated, CL.ONE)
        deadline = time.monotonic() + 30
        while any(v != expected[k] for k, v in values_at_one(mine, hinted).items()):
            assert time.monotonic() < deadline, "b's hints did not reach the healed node: %s" % values_at_one(
                mine, hinted)
            time.sleep(0.5)
        stale = values_at_one(mine, lost)
        assert all(v == 0 for v in stale.values()), "writes no hint carried are already there: %s" % stale

        report = a.nodetool("repair", "part")
        assert ", 0 differed" not in report, report
        assert values_at_one(mine, keys) == expected
        again = a.nodetool("repair", "part")
        assert ", 0 differed" in again, again

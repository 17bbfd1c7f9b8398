"""Two data centers of three nodes each, in network namespaces joined by
one link (netns.TwoDataCenters), a keyspace at NetworkTopologyStrategy
{dc1: 3, dc2: 3}, clients on the python driver's DCAwareRoundRobinPolicy.

- the driver sees every node's `data_center` and `rack` as configured
  (system.local and system.peers);
- LOCAL_ONE, LOCAL_QUORUM, EACH_QUORUM, QUORUM, SERIAL and LOCAL_SERIAL
  behave as in Cassandra, EACH_QUORUM refused for reads;
- a write crosses the DC link once: one replica of the other data center
  forwards it to the other two, which answer the coordinator themselves
  (the link carries less than two copies of a write's value; the
  coordinator's and forwarder's counters show it);
- the link cut, each data center serves LOCAL_QUORUM and LOCAL_SERIAL,
  and refuses EACH_QUORUM, QUORUM and SERIAL as unavailable;
- healed, the hints dc1 kept bring dc2 up to date, and `nodetool repair`
  brings dc1 the writes a dc2 node kept no hint of (its hint window is 0).

Needs root and iproute2 (`ip netns`); skipped otherwise.
"""
import contextlib
import os
import re
import time

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import InvalidRequest, OperationTimedOut, Unavailable, WriteTimeout
from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile
from cassandra.policies import DCAwareRoundRobinPolicy, FallthroughRetryPolicy
from cassandra.query import SimpleStatement

from netns import TwoDataCenters, netns_reason, pinned_session, wait_status

if netns_reason():
    pytest.skip(netns_reason(), allow_module_level=True)

# Every node in its own namespace: all on the same ports, as the driver
# expects of a cluster.
PORTS = [23000, 23001, 23002, 23003, 23004]
VALUE_BYTES = 8192
REFUSED = (Unavailable, WriteTimeout, OperationTimedOut)


def dc_session(stack, node, dc, level):
    """A session preferring `dc`'s nodes (DCAwareRoundRobinPolicy), at `level`."""
    profile = ExecutionProfile(load_balancing_policy=DCAwareRoundRobinPolicy(local_dc=dc),
                               retry_policy=FallthroughRetryPolicy(), consistency_level=level, request_timeout=10)
    cluster = node.cluster(execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    stack.callback(cluster.shutdown)
    return cluster, cluster.connect()


def metric(node, name):
    found = re.findall(r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(name), node.metrics(), re.M)
    return sum(float(v) for v in found)


def run(session, query, level, *args, serial=None):
    statement = SimpleStatement(query, consistency_level=level, serial_consistency_level=serial)
    return session.execute(statement, args)


def local_values(sessions, keys):
    """Each node's own copy of `keys` (every node replicates every key),
    read at LOCAL_ONE through the node itself (`sessions`: pinned to it)."""
    query = "SELECT k, v FROM dcs.t WHERE k IN (%s)" % ",".join(map(str, keys))
    return [{row.k: row.v for row in session.execute(query)} for session in sessions]


def test_two_data_centers():
    with contextlib.ExitStack() as stack:
        network = TwoDataCenters()
        stack.callback(network.close)
        # The last node keeps no hints: only repair brings what it coordinates.
        nodes = network.start_nodes(stack, PORTS, lambda i: ["--memory", "256M"] + (
            ["--max-hint-window-in-ms", "0"] if i == 5 else []))
        dc1, dc2 = nodes[:3], nodes[3:]

        # The driver's view of data centers and racks.
        cluster, one = dc_session(stack, dc1[0], "dc1", CL.LOCAL_QUORUM)
        expected = {n.address: (n.dc, n.rack) for n in nodes}
        # The last node to join may reach the first one's peers a moment
        # after the driver first read them.
        deadline = time.monotonic() + 20
        while True:
            hosts = {h.address: (h.datacenter, h.rack) for h in cluster.metadata.all_hosts()}
            if hosts == expected or time.monotonic() > deadline:
                break
            time.sleep(0.2)
            cluster.refresh_nodes()
        assert hosts == expected
        local = one.execute("SELECT data_center, rack FROM system.local").one()
        assert (local.data_center, local.rack) in {(n.dc, n.rack) for n in dc1}

        one.execute("CREATE KEYSPACE dcs WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 3}")
        one.execute("CREATE TABLE dcs.t (k int PRIMARY KEY, v int, blob blob)")
        _, two = dc_session(stack, dc2[0], "dc2", CL.LOCAL_QUORUM)

        # Consistency levels, all nodes up.
        for k, level in enumerate((CL.LOCAL_ONE, CL.LOCAL_QUORUM, CL.EACH_QUORUM, CL.QUORUM, CL.ALL)):
            run(one, "INSERT INTO dcs.t (k, v) VALUES (%s, 0)", level, k)
        for level in (CL.LOCAL_ONE, CL.LOCAL_QUORUM, CL.QUORUM, CL.ALL):
            assert run(two, "SELECT v FROM dcs.t WHERE k = 2", level).one().v == 0
        with pytest.raises(InvalidRequest, match="EACH_QUORUM ConsistencyLevel is only supported for writes"):
            run(one, "SELECT v FROM dcs.t WHERE k = 0", CL.EACH_QUORUM)
        for serial in (CL.SERIAL, CL.LOCAL_SERIAL):
            applied = run(two, "UPDATE dcs.t SET v = 0 WHERE k = 1 IF v = 0", CL.LOCAL_QUORUM, serial=serial)
            assert applied.one()[0]

        # A write crosses the link once: one dc2 replica forwards it.
        forwarded = sum(metric(n, "shoal_cross_dc_forwarded_writes_total") for n in dc1)
        relayed = sum(metric(n, "shoal_cross_dc_relayed_writes_total") for n in dc2)
        insert = one.prepare("INSERT INTO dcs.t (k, blob) VALUES (?, ?)")
        insert.consistency_level = CL.EACH_QUORUM
        writes = 40
        before = network.link_bytes()
        for k in range(100, 100 + writes):
            one.execute(insert, (k, os.urandom(VALUE_BYTES)))
        per_write = (network.link_bytes() - before) / writes
        assert per_write < 1.6 * VALUE_BYTES, "%d bytes on the DC link per write of %d" % (per_write, VALUE_BYTES)
        assert sum(metric(n, "shoal_cross_dc_forwarded_writes_total") for n in dc1) - forwarded == writes
        assert sum(metric(n, "shoal_cross_dc_relayed_writes_total") for n in dc2) - relayed == 2 * writes
        print("DC link bytes per write of %d bytes: %d" % (VALUE_BYTES, per_write))

        # The link cut: each side serves its local levels only.
        network.link(False)
        for side in (dc1, dc2):
            wait_status(side[0], lambda s: s.count("DN ") == 3, "the other data center is not seen down")
        during = range(200, 220)
        update = one.prepare("UPDATE dcs.t SET v = ? WHERE k = ?")
        for k in during:
            one.execute(update, (k, k))
        for level in (CL.EACH_QUORUM, CL.QUORUM):
            with pytest.raises(REFUSED):
                run(one, "UPDATE dcs.t SET v = 1 WHERE k = 0", level)
        with pytest.raises(REFUSED):
            run(one, "UPDATE dcs.t SET v = 1 WHERE k = 0 IF v = 0", CL.LOCAL_QUORUM, serial=CL.SERIAL)
        assert run(one, "UPDATE dcs.t SET v = 1 WHERE k = 1 IF v = 0", CL.LOCAL_QUORUM, serial=CL.LOCAL_SERIAL).one()[0]
        # dc2, through the node that keeps no hints: only repair brings these to dc1.
        unhinted = range(300, 310)
        lonely = pinned_session(stack, dc2[2], CL.LOCAL_QUORUM)
        for k in unhinted:
            run(lonely, "UPDATE dcs.t SET v = %s WHERE k = %s", CL.LOCAL_QUORUM, k, k)

        network.link(True)
        pinned = {n.address: pinned_session(stack, n, CL.LOCAL_ONE) for n in nodes}
        at_dc1, at_dc2 = [pinned[n.address] for n in dc1], [pinned[n.address] for n in dc2]
        wait_status(dc1[0], lambda s: s.count("UN ") == 6, "the link does not heal")
        wait_status(dc2[0], lambda s: s.count("UN ") == 6, "dc2 does not see dc1 again")
        # dc1's hints reach every dc2 replica.
        want = {k: k for k in during}
        deadline = time.monotonic() + 30
        while any(seen != want for seen in local_values(at_dc2, during)):
            assert time.monotonic() < deadline, "dc1's hints did not reach dc2: %s" % local_values(at_dc2, during)
            time.sleep(0.5)
        assert all(not seen for seen in local_values(at_dc1, unhinted)), "no hint carried these"
        report = dc2[2].nodetool("repair", "dcs")
        assert ", 0 differed" not in report, report
        assert all(seen == {k: k for k in unhinted} for seen in local_values(at_dc1, unhinted))

"""Bytes on the link between two data centers per write, with Cassandra's
write forwarding and without it.

    sudo SHOAL_BIN=target/release/shoal .venv/bin/python bench/two_dc.py [--writes 2000] [--sizes 64,4096]

Six nodes (`--smp 1`), three per data center, in network namespaces whose
only path between the data centers is one router namespace
(`tests/python/netns.py`, `TwoDataCenters`): its interface's byte
counters are the DC link's traffic, both ways, IP headers included. A
keyspace at NetworkTopologyStrategy {dc1: 3, dc2: 3}; one client in dc1
(DCAwareRoundRobinPolicy) writes `--writes` rows of each value size at
LOCAL_QUORUM, 64 at a time; the link's bytes over the writes, less what
it carries idle over as long (pings), divided by the writes. Run once
with `--cross-dc-forwarding on` (the default: one copy to one dc2
replica, which relays it) and once `off` (each dc2 replica its own copy).
Needs root (`ip netns`).
"""
import argparse
import contextlib
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from cassandra import ConsistencyLevel as CL  # noqa: E402
from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile  # noqa: E402
from cassandra.concurrent import execute_concurrent_with_args  # noqa: E402
from cassandra.policies import DCAwareRoundRobinPolicy  # noqa: E402

from netns import TwoDataCenters, netns_reason  # noqa: E402

PORTS = [23000, 23001, 23002, 23003, 23004]


def measure(forwarding, writes, sizes):
    """{size: link bytes per write} for one cluster."""
    with contextlib.ExitStack() as stack:
        network = TwoDataCenters()
        stack.callback(network.close)
        nodes = network.start_nodes(stack, PORTS, lambda i: ["--memory", "512M", "--cross-dc-forwarding", forwarding])
        profile = ExecutionProfile(load_balancing_policy=DCAwareRoundRobinPolicy(local_dc="dc1"),
                                   consistency_level=CL.LOCAL_QUORUM, request_timeout=30)
        cluster = nodes[0].cluster(execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        stack.callback(cluster.shutdown)
        session = cluster.connect()
        session.execute("CREATE KEYSPACE b WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 3}")
        session.execute("CREATE TABLE b.t (k int PRIMARY KEY, v blob)")
        insert = session.prepare("INSERT INTO b.t (k, v) VALUES (?, ?)")
        figures = {}
        for size in sizes:
            value = os.urandom(size)
            start, before = time.monotonic(), network.link_bytes()
            execute_concurrent_with_args(session, insert, [(k, value) for k in range(writes)], concurrency=64)
            time.sleep(0.5)  # the other data center's last answers
            busy, elapsed = network.link_bytes() - before, time.monotonic() - start
            idle_before = network.link_bytes()
            time.sleep(elapsed)
            idle = network.link_bytes() - idle_before
            figures[size] = ((busy - idle) / writes, writes / elapsed)
        return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--sizes", default="64,4096")
    args = parser.parse_args()
    if netns_reason():
        sys.exit(netns_reason())
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {mode: measure(mode, args.writes, sizes) for mode in ("on", "off")}
    print("| value bytes | DC link bytes per write, forwarding on | off | on/off | writes/s on | off |")
    print("|---|---|---|---|---|---|")
    for size in sizes:
        (on, on_rate), (off, off_rate) = results["on"][size], results["off"][size]
        print("| %d | %.0f | %.0f | %.2f | %.0f | %.0f |" % (size, on, off, on / off, on_rate, off_rate))


if __name__ == "__main__":
    main()

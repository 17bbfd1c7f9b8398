"""How fast group 0 forms and recovers: three nodes on 127.0.0.2-4 (each
`--smp 1`, fresh workdirs, free ports), all three as seeds.

    python3 bench/group0_failover.py [--shoal target/release/shoal] [--rounds 5]

Reports the time from starting the three processes until every node lists
three members and the same leader (`GET /raft/group0`), then, `--rounds`
times: kill -9 the leader, time until the other two agree on a new leader,
restart the old one, time until all three agree again. Polls every 20 ms.
Raft ticks every 100 ms and elections start after 10 ticks without a
leader (pre-vote on), so a failover takes about 1-2 s by design.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness.node import free_ports  # noqa: E402

ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
POLL_S = 0.02
LIMIT_S = 30


class Node:
    def __init__(self, binary, root, address):
        self.binary, self.address = binary, address
        self.workdir = tempfile.mkdtemp(dir=root)
        self.cql, self.aware, self.api, self.memcache, self.storage = free_ports(5)
        self.proc = None

    def start(self, seeds):
        self.proc = subprocess.Popen(
            [self.binary, "--smp", "1", "--memory", "256M", "--workdir", self.workdir, "--listen-address", self.address,
             "--api-address", self.address,
             "--native-transport-port", str(self.cql), "--native-shard-aware-transport-port", str(self.aware),
             "--api-port", str(self.api), "--memcache-port", str(self.memcache), "--storage-port", str(self.storage),
             "--seeds", seeds],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def kill(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def group0(self):
        try:
            with urllib.request.urlopen("http://%s:%d/raft/group0" % (self.address, self.api), timeout=1) as r:
                return json.loads(r.read().decode())
        except (OSError, ValueError):
            return None


def agreed(nodes, members):
    views = [n.group0() for n in nodes]
    if any(v is None or v["leader"] is None or len(v["members"]) != members for v in views):
        return None
    leaders = {v["leader"] for v in views}
    return leaders.pop() if len(leaders) == 1 else None


def wait(nodes, members, not_leader=None):
    t0 = time.monotonic()
    while time.monotonic() - t0 < LIMIT_S:
        leader = agreed(nodes, members)
        if leader and leader != not_leader:
            return time.monotonic() - t0, leader
        time.sleep(POLL_S)
    raise RuntimeError("no agreement within %d s" % LIMIT_S)


def host_id(node):
    with urllib.request.urlopen("http://%s:%d/storage_service/hostid/local" % (node.address, node.api)) as r:
        return json.loads(r.read().decode())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shoal", default="target/release/shoal")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="shoal-group0-bench-")
    nodes = [Node(os.path.abspath(args.shoal), root, a) for a in ADDRESSES]
    seeds = ",".join("%s:%d" % (n.address, n.storage) for n in nodes)
    try:
        t0 = time.monotonic()
        for n in nodes:
            n.start(seeds)
        formed_s, leader = wait(nodes, 3)
        print("formed: 3 members, one leader, %.2f s after starting the processes" % (time.monotonic() - t0))
        failovers, rejoins = [], []
        for _ in range(args.rounds):
            by_id = {host_id(n): n for n in nodes}
            old = by_id[leader]
            old.kill()
            rest = [n for n in nodes if n is not old]
            elapsed, leader = wait(rest, 3, not_leader=leader)
            failovers.append(elapsed)
            old.start(seeds)
            elapsed, leader = wait(nodes, 3)
            rejoins.append(elapsed)
        print("leader killed -> new leader agreed by the other two: median %.2f s, max %.2f s (%d rounds)"
              % (statistics.median(failovers), max(failovers), len(failovers)))
        print("old leader restarted -> all three agree again: median %.2f s, max %.2f s"
              % (statistics.median(rejoins), max(rejoins)))
        return 0
    finally:
        for n in nodes:
            n.kill()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

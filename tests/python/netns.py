"""Nodes in Linux network namespaces, for tests that cut links between
real nodes (test_partition.py, test_two_dc.py): `ip`, why namespaces
cannot be made here (`netns_reason`), a Node whose process runs in a
namespace, a session pinned to one node, and waiting on `nodetool status`.
"""
import os
import shutil
import subprocess
import tempfile
import time

from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile
from cassandra.policies import FallthroughRetryPolicy, WhiteListRoundRobinPolicy

from node import Node, skip_reason


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def netns_reason():
    if skip_reason():
        return skip_reason()
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    probe = "shoal-probe-%d" % os.getpid()
    try:
        ip("netns", "add", probe)
        ip("netns", "del", probe)
    except (subprocess.CalledProcessError, OSError) as e:
        return "cannot create a network namespace here: %s" % getattr(e, "stderr", e)
    return None


class NamespacedNode(Node):
    """A node whose process runs in a network namespace."""

    def __init__(self, workdir, namespace, address, args):
        super().__init__(workdir, args=args, address=address)
        self.namespace = namespace

    def command(self):
        return ["ip", "netns", "exec", self.namespace] + super().command()


def pinned_session(stack, node, level):
    """A session whose requests all go to `node`, at `level`."""
    # Errors as the server sent them, not retried elsewhere.
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([node.address]),
                               retry_policy=FallthroughRetryPolicy(), consistency_level=level, request_timeout=10)
    cluster = node.cluster(execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    stack.callback(cluster.shutdown)
    return cluster.connect()


def wait_status(node, want, what, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while True:
        status = node.nodetool("status")
        if want(status):
            return
        assert time.monotonic() < deadline, "%s; status:\n%s" % (what, status)
        time.sleep(0.5)


class TwoDataCenters:
    """Two data centers of `per_dc` namespaced hosts each, joined by one
    link: each data center's hosts share a bridge (10.79.<dc>.0/24, hosts
    at .11 up), and a router namespace between the two bridges carries
    every packet from one data center to the other, so its interface
    counters are the bytes on the DC link and taking its interface down
    cuts the link. The test's own namespace sits on both bridges: clients
    reach every host either way. Removed on close."""

    SUBNET = "10.79"

    def __init__(self, per_dc=3):
        tag = os.getpid() % 10000
        self.router = "shrt%d" % tag
        self.bridges = ["shdc%d-%d" % (tag, dc) for dc in (1, 2)]
        self.router_links = ["shrl%d-%d" % (tag, dc) for dc in (1, 2)]
        self.hosts = []  # (namespace, address, data center name)
        ip("netns", "add", self.router)
        subprocess.run(["ip", "netns", "exec", self.router, "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True,
                       capture_output=True, timeout=30)
        for dc, bridge in zip((1, 2), self.bridges):
            subnet = "%s.%d" % (self.SUBNET, dc)
            other = "%s.%d.0/24" % (self.SUBNET, 3 - dc)
            ip("link", "add", bridge, "type", "bridge")
            ip("addr", "add", subnet + ".1/24", "dev", bridge)
            ip("link", "set", bridge, "up")
            link = self.router_links[dc - 1]
            ip("link", "add", link, "type", "veth", "peer", "name", "dc%d" % dc, "netns", self.router)
            ip("link", "set", link, "master", bridge, "up")
            ip("-n", self.router, "addr", "add", subnet + ".254/24", "dev", "dc%d" % dc)
            ip("-n", self.router, "link", "set", "dc%d" % dc, "up")
            for i in range(per_dc):
                ns, address = "shdc%d-%d-%d" % (tag, dc, i), "%s.%d" % (subnet, 11 + i)
                ip("netns", "add", ns)
                veth = "shdv%d-%d-%d" % (tag, dc, i)
                ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                ip("link", "set", veth, "master", bridge, "up")
                ip("-n", ns, "addr", "add", address + "/24", "dev", "eth0")
                ip("-n", ns, "link", "set", "eth0", "up")
                ip("-n", ns, "link", "set", "lo", "up")
                ip("-n", ns, "route", "add", other, "via", subnet + ".254")
                self.hosts.append((ns, address, "dc%d" % dc))

    def close(self):
        for ns, _, _ in self.hosts:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", self.router], capture_output=True, timeout=30)
        for bridge in self.bridges:
            subprocess.run(["ip", "link", "del", bridge], capture_output=True, timeout=30)

    def start_nodes(self, stack, ports, args):
        """A node on each host, all on `ports` (each in its own namespace,
        as a driver expects of a cluster), each in its data center and on
        rack `rack<1..per_dc>`, seeded by the first host of each data
        center, given `args(i)` too; started in order, killed and removed
        by `stack` (a contextlib.ExitStack). Waits until all are up."""
        root = tempfile.mkdtemp(prefix="shoal-two-dc-")
        stack.callback(shutil.rmtree, root, True)
        nodes = []
        per_dc = len(self.hosts) // 2
        for i, (ns, address, dc) in enumerate(self.hosts):
            node = NamespacedNode(os.path.join(root, str(i)), ns, address, args=())
            node.ports, node.smp = list(ports), 1
            node.dc, node.rack = dc, "rack%d" % (i % per_dc + 1)
            os.makedirs(node.workdir)
            stack.callback(node.kill)
            nodes.append(node)
        seeds = ",".join("%s:%d" % (n.address, n.storage_port) for n in (nodes[0], nodes[per_dc]))
        for i, node in enumerate(nodes):
            node.args = ["--seeds", seeds, "--failure-detector-timeout-in-ms", "2000", "--dc", node.dc,
                         "--rack", node.rack, *args(i)]
            node.start()
        wait_status(nodes[0], lambda s: s.count("UN ") == len(nodes), "the nodes are not all up", timeout_s=60)
        return nodes

    def link(self, up):
        """Cuts (`up=False`) or heals the link between the data centers."""
        ip("-n", self.router, "link", "set", "dc2", "up" if up else "down")

    def link_bytes(self):
        """Bytes the DC link carried so far, both ways."""
        counts = 0
        for direction in ("rx_bytes", "tx_bytes"):
            out = subprocess.run(["ip", "netns", "exec", self.router, "cat",
                                  "/sys/class/net/dc1/statistics/" + direction],
                                 check=True, capture_output=True, text=True, timeout=30)
            counts += int(out.stdout)
        return counts

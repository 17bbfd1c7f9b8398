"""Nodes find each other over the storage port: two real nodes on their own
loopback addresses (127.0.0.2 and 127.0.0.3), each given the other as a seed,
say hello over internode messaging and mark each other up; a node killed
with -9 is marked down within the failure detector's timeout and up again
when it returns. A node of another cluster is refused with a log line naming
the mismatch, and bytes that are not internode frames close their connection
with a log line while the node goes on.

`GET /gossiper/endpoint/live` and `/gossiper/endpoint/down` (ScyllaDB's REST
paths) report what the failure detector sees.
"""
import json
import os
import socket
import time
import urllib.request

import pytest

from node import skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

DETECTOR_TIMEOUT_MS = 1500
HANDSHAKE_TIMEOUT_S = 5  # cluster::verb: Verb::Hello's timeout
WAIT_S = 15


def endpoints(node, which):
    url = "http://%s:%d/gossiper/endpoint/%s" % (node.address, node.ports[2], which)
    with urllib.request.urlopen(url, timeout=5) as r:
        return set(json.loads(r.read().decode()))


def wait_for(what, check, timeout=WAIT_S):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "%s: not within %d s" % (what, timeout)
        time.sleep(0.1)


def log_of(node):
    with open(node.log_path, errors="replace") as f:
        return f.read()


def status_lines(node):
    """`nodetool status` of a node: its node lines by address."""
    lines = [line for line in node.nodetool("status").splitlines() if line[:2] in ("UN", "DN")]
    return {line.split()[1]: line for line in lines}


def pair(storage_ports, extra=(), addresses=("127.0.0.2", "127.0.0.3")):
    """Node arguments for two nodes that seed each other, the first seed first."""
    seeds = "%s:%d,%s:%d" % (addresses[0], storage_ports[0], addresses[1], storage_ports[1])
    return ["--seeds", seeds, "--failure-detector-timeout-in-ms", str(DETECTOR_TIMEOUT_MS), "--memory", "512M",
            *extra]


def test_two_nodes_see_each_other_come_and_go():
    with temp_node("shoal-cluster-a-", start=False, address="127.0.0.2") as a, \
            temp_node("shoal-cluster-b-", start=False, address="127.0.0.3") as b:
        args = pair((a.storage_port, b.storage_port))
        a.args, b.args = args + ["--dc", "dc1", "--rack", "r2"], list(args)
        a.start()
        b.start()
        wait_for("a sees b up", lambda: endpoints(a, "live") == {"127.0.0.2", "127.0.0.3"})
        wait_for("b sees a up", lambda: endpoints(b, "live") == {"127.0.0.2", "127.0.0.3"})
        assert "node 127.0.0.3:%d is UP" % b.storage_port in log_of(a)
        b_id = b.nodetool("info").split("ID", 1)[1].split(":", 1)[1].split()[0]
        status = status_lines(a)
        assert status["127.0.0.2"].startswith("UN") and " 256 " in status["127.0.0.2"], status
        assert status["127.0.0.2"].split()[-1] == "r2", "--rack shown: %s" % status
        assert status["127.0.0.3"].startswith("UN") and b_id in status["127.0.0.3"], status

        b.kill()
        started = time.monotonic()
        wait_for("a sees b down", lambda: endpoints(a, "down") == {"127.0.0.3"})
        # Down after the timeout, not long after it (pings every 0.5 s).
        assert time.monotonic() - started < DETECTOR_TIMEOUT_MS / 1000 + 3
        assert endpoints(a, "live") == {"127.0.0.2"}
        assert status_lines(a)["127.0.0.3"].startswith("DN")

        b.start()
        wait_for("a sees b up again", lambda: endpoints(a, "live") == {"127.0.0.2", "127.0.0.3"})
        assert endpoints(a, "down") == set()


def test_another_cluster_is_refused_and_garbage_closes_only_its_connection():
    with temp_node("shoal-cluster-a-", start=False, address="127.0.0.2") as a, \
            temp_node("shoal-cluster-b-", start=False, address="127.0.0.3") as b:
        args = pair((a.storage_port, b.storage_port))
        a.args = list(args)
        other = os.path.join(b.workdir, "other.yaml")
        with open(other, "w") as f:
            f.write("cluster_name: Other Cluster\n")
        # b lists itself first: it forms its own cluster rather than wait
        # (forever) to be let into a's.
        b.args = pair((b.storage_port, a.storage_port), addresses=("127.0.0.3", "127.0.0.2")) + [
            "--options-file", other]
        a.start()
        b.start()
        wait_for("a logs the refusal", lambda: "cluster name 'Other Cluster' is not this node's" in log_of(a))
        time.sleep(DETECTOR_TIMEOUT_MS / 1000)
        assert endpoints(a, "live") == {"127.0.0.2"} and endpoints(a, "down") == {"127.0.0.3"}

        # Not internode frames: an HTTP request, a frame too large, random bytes.
        # Random bytes may start with a length within the limit: the node
        # then waits for the rest until the handshake's timeout (5 s) before
        # it closes, so the read waits longer than that.
        for junk in (b"GET / HTTP/1.0\r\n\r\n", b"\xff\xff\xff\x7f" + b"\0" * 12, os.urandom(4096)):
            with socket.create_connection((a.address, a.storage_port), timeout=5) as s:
                s.sendall(junk)
                s.settimeout(HANDSHAKE_TIMEOUT_S + 5)
                try:
                    assert s.recv(100) == b"", "the node answered garbage"
                except ConnectionResetError:
                    pass
        closed = lambda: [line for line in log_of(a).splitlines()
                          if "internode connection from" in line and "cluster name" not in line]
        wait_for("a logs the closed connections", lambda: len(closed()) >= 3)
        assert a.alive(), "the node died of garbage on its storage port:\n%s" % a.log_tail()
        assert endpoints(a, "live") == {"127.0.0.2"}

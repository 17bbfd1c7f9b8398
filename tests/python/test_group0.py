"""Group 0: membership agreed through Raft. Three real nodes on 127.0.0.2-4,
each given all three as seeds: the first seed forms the cluster, the others
ask to be added (the leader chooses their tokens: a third of the ring each),
and every node ends up with the same three members and the same leader. The leader killed with -9, the other two elect a new one and
keep the membership; restarted, the old leader comes back from its own log
(it does not ask to join again) and follows the new leader.

Read through `GET /raft/group0` and `GET /raft/leader_host`.
"""
import contextlib
import json
import time
import urllib.request

import pytest

from node import skip_reason, temp_node

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

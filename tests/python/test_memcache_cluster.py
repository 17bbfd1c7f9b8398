"""memcached items over the ring: three real nodes (127.0.0.2-4), pymemcache
clients, one per node.

- Any node answers any key: items set through one node are found through
  every other (each key's operations are led by its first live replica),
  `incr` through different nodes counts every increment, and after
  `nodetool cleanup` on every node every item is still there (each lives
  on the nodes the ring gives it, not where its client connected).
- A fourth node that joins streams its share of the items; after
  `nodetool cleanup` on every node each item is still found.
- At RF 3 (`ALTER KEYSPACE memcache`) with `memcache_write_consistency`
  and `memcache_read_consistency` QUORUM, a node killed with -9 under a
  set load loses no item whose set was answered STORED; the node, back,
  gets what it missed as hints (it holds every item itself).
- At RF 3 past `--memcache-max-size`, the leaders' evictions delete the
  items on every replica: each node holds the same items, and a read at
  ALL (read repair) brings none back.
"""
import contextlib
import threading
import time

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy
from pymemcache.client.base import Client

from node import skip_reason, start_cluster, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)


def client(node, timeout=5):
    """A client of `node` whose writes wait for their answers (pymemcache's
    default, noreply, would let a read on another connection overtake them)."""
    return Client((node.address, node.memcache_port), connect_timeout=timeout, timeout=timeout,
                  default_noreply=False)


def wait_for(what, check, timeout=30):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "%s: not within %d s" % (what, timeout)
        time.sleep(0.2)


def all_answer(clients):
    """Whether every node's client gets a key every node's client set."""
    try:
        for i, c in enumerate(clients):
            c.set("probe-%d" % i, b"x")
        return all(c.get("probe-%d" % i) == b"x" for c in clients for i in range(len(clients)))
    except Exception:  # noqa: BLE001 - a node still finding its peers
        return False


def cluster(stack, prefix, args=()):
    nodes = start_cluster(stack, prefix, args)
    clients = [client(n) for n in nodes]
    stack.callback(lambda: [c.close() for c in clients])
    # Every node's ring holds all three as normal members, so each places
    # a key where the others look for it.
    wait_for("every node sees three normal members",
             lambda: all(n.nodetool("status").count("\nUN ") == 3 for n in nodes))
    wait_for("every node answers every key", lambda: all_answer(clients))
    return nodes, clients


def test_any_node_answers_any_key_and_cleanup_keeps_every_item():
    with contextlib.ExitStack() as stack:
        nodes, clients = cluster(stack, "shoal-mc-ring-")
        keys = ["item-%d" % i for i in range(1000)]
        for start in range(0, len(keys), 100):
            failed = clients[0].set_many({k: k.encode() for k in keys[start:start + 100]})
            assert failed == [], failed
        # A client of node 3 finds every item a client of node 1 set.
        found = clients[2].get_many(keys)
        assert len(found) == len(keys)
        assert all(found[k] == k.encode() for k in keys)
        # And a client of node 1 reads what a client of node 3 wrote.
        clients[2].set("from-three", b"3", expire=0)
        assert clients[0].get("from-three") == b"3"
        # Read-modify-writes through different nodes: each counts once.
        clients[0].set("counter", b"0")
        for i in range(30):
            clients[i % 3].incr("counter", 1)
        assert clients[1].get("counter") == b"30"
        assert clients[2].delete("from-three")
        assert clients[0].get("from-three") is None
        for n in nodes:
            assert "cleaned up" in n.nodetool("cleanup", "memcache")
        found = clients[1].get_many(keys)
        assert len(found) == len(keys), "cleanup kept %d of %d items" % (len(found), len(keys))


def count_on(stack, node, level):
    """memcache.items' rows counted by `node` as coordinator at `level`
    (at ONE, of a table every node holds whole: its own copy)."""
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([node.address]),
                               consistency_level=level, request_timeout=60)
    cql = node.cluster(execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    stack.callback(cql.shutdown)
    return cql.connect().execute("SELECT count(*) FROM memcache.items").one()[0]


def test_rf3_evictions_delete_every_replicas_copy():
    with contextlib.ExitStack() as stack:
        nodes, clients = cluster(stack, "shoal-mc-evict-", ["--memcache-max-size", "1M"])
        cql, session = nodes[0].session()
        stack.callback(cql.shutdown)
        session.execute("ALTER KEYSPACE memcache WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        value = b"v" * 1000
        for start in range(0, 6000, 200):
            assert clients[0].set_many({"big-%d" % i: value for i in range(start, start + 200)}) == []
        evictions = sum(int(c.stats().get(b"evictions", 0)) for c in clients)
        assert evictions > 1000, evictions
        wait_for("every replica holds the same items", lambda: len({count_on(stack, n, CL.ONE) for n in nodes}) == 1)
        held = count_on(stack, nodes[0], CL.ONE)
        assert held < 6000 - 1000, held
        assert count_on(stack, nodes[1], CL.ALL) == held
        assert count_on(stack, nodes[2], CL.ONE) == held


def test_a_joining_node_streams_items_and_cleanup_keeps_them():
    with contextlib.ExitStack() as stack:
        nodes, clients = cluster(stack, "shoal-mc-join-")
        keys = ["joined-%d" % i for i in range(1000)]
        for start in range(0, len(keys), 100):
            assert clients[1].set_many({k: k.encode() for k in keys[start:start + 100]}) == []
        fourth = stack.enter_context(temp_node("shoal-mc-join-", start=False, address="127.0.0.5"))
        seeds = ",".join("%s:%d" % (n.address, n.storage_port) for n in nodes)
        fourth.args = ["--seeds", seeds, "--memory", "512M", "--failure-detector-timeout-in-ms", "2000"]
        fourth.start(timeout=60)
        nodes.append(fourth)
        wait_for("every node sees four normal members",
                 lambda: all(n.nodetool("status").count("\nUN ") == 4 for n in nodes))

        def cleaned(node):
            try:
                return "cleaned up" in node.nodetool("cleanup", "memcache")
            except AssertionError:  # refused while a node still sees the join in progress
                return False
        for n in nodes:
            wait_for("cleanup on %s" % n.address, lambda: cleaned(n))
        joined = client(fourth)
        stack.callback(joined.close)
        found = joined.get_many(keys)
        # The keys the joiner gained were dropped by cleanup on the others:
        # found only if it streamed them.
        assert len(found) == len(keys), "%d of %d items after the join and cleanup" % (len(found), len(keys))


def set_load(clients, stop, acked, errors):
    """Sets distinct keys through `clients` until `stop`; the keys answered
    STORED go to `acked`."""
    def run(c, name):
        i = 0
        while not stop.is_set():
            key = "%s-%d" % (name, i)
            i += 1
            try:
                if c.set(key, key.encode()):
                    acked.append(key)
            except Exception as e:  # noqa: BLE001 - a timeout or SERVER_ERROR: not acknowledged
                errors.append(repr(e))
                time.sleep(0.05)
    threads = [threading.Thread(target=run, args=(c, "load%d" % i), daemon=True) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    return threads


def test_rf3_kill_under_set_load_loses_no_acknowledged_item():
    levels = ["--memcache-write-consistency", "QUORUM", "--memcache-read-consistency", "QUORUM"]
    with contextlib.ExitStack() as stack:
        nodes, clients = cluster(stack, "shoal-mc-rf3-", levels)
        cql, session = nodes[0].session()
        stack.callback(cql.shutdown)
        session.execute("ALTER KEYSPACE memcache WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        stop = threading.Event()
        acked, errors = [], []
        # Loaders on nodes 1 and 2; node 3 leads a third of the keys.
        load_clients = [client(nodes[0]), client(nodes[1])]
        threads = set_load(load_clients, stop, acked, errors)
        time.sleep(2)
        before_kill = len(acked)
        nodes[2].kill()
        time.sleep(6)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        for c in load_clients:
            c.close()
        assert before_kill > 100, "the load ran before the kill (%d sets)" % before_kill
        assert len(acked) > before_kill, "sets went on after the kill: %s" % errors[-3:]
        # Every acknowledged item, from each live node.
        for c in (client(nodes[0]), client(nodes[1])):
            for start in range(0, len(acked), 200):
                chunk = acked[start:start + 200]
                found = c.get_many(chunk)
                missing = [k for k in chunk if found.get(k) != k.encode()]
                assert missing == [], "%d acknowledged items lost, e.g. %s" % (len(missing), missing[:5])
            c.close()
        # Back, node 3 gets what it missed as hints, and holds every item
        # itself (a count at ONE coordinated by node 3 reads its own copy).
        nodes[2].start()
        wait_for("node 3 answers", lambda: all_answer(clients))
        wait_for("the hints reach node 3", lambda: count_on(stack, nodes[2], CL.ONE) >= len(acked), timeout=60)

"""The items table behaves as memcached's cache: past `memcache_max_size`
(memcached's -m) the least recently used items are evicted, counted in
`stats` `evictions`, instead of writes failing.

Each test runs against its own Shoal node (`--memcache-max-size 2M`, two
shards: 1 MiB each) and, where Debian's memcached is installed, against
`memcached -m 2` too, so the behaviour asserted is memcached's. The figures
differ (memcached's slabs hold fewer 1 KB items in 2 MB than Shoal charges
for), so the assertions are about what a cache client sees: a write never
fails, what was fetched lately stays, what was written long ago and never
read goes, and the counters say so. Shoal alone also shows that evicted
items are gone for CQL too and that the LRU order survives a restart.
"""
import contextlib
import os
import pwd
import shutil
import subprocess
import time

import pytest

from memcache_support import IS_CASSANDRA, cql_blob, wait_memcache
from node import free_port, skip_reason, temp_node

if IS_CASSANDRA:
    pytest.skip("SHOAL_PEER=cassandra: no memcached protocol", allow_module_level=True)

MAX_SIZE = "2M"
MEMCACHED_MB = "2"
VALUE = b"x" * 1000
WRITES = 8000  # about four times what 2 MiB holds
HOT = 50  # keys fetched all along
HOT_EVERY = 200  # writes between fetches of the hot keys
BATCH = 100


def key(i):
    return "k%06d" % i


@contextlib.contextmanager
def shoal_node(max_size=MAX_SIZE):
    if skip_reason():
        pytest.skip(skip_reason())
    with temp_node("shoal-memcache-evict-",
                   args=("--commitlog-sync", "batch", "--memcache-max-size", max_size)) as node:
        yield node


def _user_exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


@contextlib.contextmanager
def memcached():
    binary = shutil.which("memcached")
    if not binary:
        pytest.skip("Debian's memcached is not installed (tests/run.sh installs it where it can)")
    port = free_port()
    user = []
    if os.geteuid() == 0:  # memcached refuses to run as root without -u
        user = ["-u", "memcache" if _user_exists("memcache") else "root"]
    proc = subprocess.Popen([binary, "-U", "0", "-t", "1", "-m", MEMCACHED_MB, "-l", "127.0.0.1", "-p", str(port),
                             *user], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield port
    finally:
        proc.kill()
        proc.wait()


def set_many(c, first, count, value=VALUE):
    req = b"".join(b"set %s 0 0 %d noreply\r\n%s\r\n" % (key(i).encode(), len(value), value)
                   for i in range(first, first + count))
    # A closing `mn` waits until every set before it was handled.
    assert c.call(req + b"mn\r\n") == b"MN\r\n"


def present(c, keys):
    """The keys among `keys` a multi-get finds, with their values."""
    found = {}
    for start in range(0, len(keys), BATCH):
        r = c.call(("get %s\r\n" % " ".join(keys[start:start + BATCH])).encode())
        while r.startswith(b"VALUE "):
            head, rest = r.split(b"\r\n", 1)
            _, k, _, n = head.split()
            found[k.decode()] = rest[:int(n)]
            r = rest[int(n) + 2:]
        assert r == b"END\r\n", r[:200]
    return found


def fill_with_hot_keys(c):
    """Writes HOT keys, then WRITES more, fetching the hot ones every
    HOT_EVERY writes; every write is acknowledged."""
    set_many(c, 0, HOT)
    for start in range(HOT, HOT + WRITES, HOT_EVERY):
        for b in range(start, start + HOT_EVERY, BATCH):
            set_many(c, b, BATCH)
        assert len(present(c, [key(i) for i in range(HOT)])) == HOT, "a hot key was evicted"


def check_cache_behaviour(c, limit_bytes):
    stats = c.stats()
    evictions, items, used = int(stats["evictions"]), int(stats["curr_items"]), int(stats["bytes"])
    assert evictions > 0, stats
    assert used <= limit_bytes, "bytes %d over the limit %d" % (used, limit_bytes)
    assert 0 < items < HOT + WRITES, stats
    hot = present(c, [key(i) for i in range(HOT)])
    assert hot == {key(i): VALUE for i in range(HOT)}, "hot keys lost: %d of %d left" % (len(hot), HOT)
    oldest = present(c, [key(i) for i in range(HOT, HOT + 500)])
    assert not oldest, "%d of the 500 oldest unread items are still there" % len(oldest)
    newest = present(c, [key(i) for i in range(HOT + WRITES - 100, HOT + WRITES)])
    assert len(newest) == 100, "only %d of the 100 newest items are there" % len(newest)
    return stats


def test_memcached_evicts_least_recently_used():
    """The reference: the same sequence against memcached -m 2."""
    with memcached() as port:
        c = wait_memcache(port)
        fill_with_hot_keys(c)
        check_cache_behaviour(c, int(MEMCACHED_MB) << 20)
        c.close()


def test_shoal_evicts_least_recently_used_and_persists_it():
    with shoal_node() as node:
        c = wait_memcache(node.memcache_port)
        assert c.stats()["limit_maxbytes"] == str(2 << 20)
        fill_with_hot_keys(c)
        stats = check_cache_behaviour(c, 2 << 20)
        print("shoal: %s items, %s bytes, %s evictions" % (stats["curr_items"], stats["bytes"], stats["evictions"]))
        assert int(stats["bytes"]) > (2 << 20) * 3 // 4, "under 3/4 of the limit holds items: %s" % stats
        assert c.stats("items")["items:1:evicted"] == stats["evictions"]

        # Evicted items are deleted, not only forgotten: CQL does not see them.
        cluster, session = node.session()
        try:
            for i in (HOT, HOT + 1, HOT + 499):
                row = session.execute("SELECT key FROM memcache.items WHERE key = %s" % cql_blob(key(i))).one()
                assert row is None, "evicted item %s is still in memcache.items" % key(i)
            assert session.execute("SELECT value FROM memcache.items WHERE key = %s"
                                   % cql_blob(key(0))).one().value == VALUE
        finally:
            cluster.shutdown()

        # flush_all empties the list: nothing is counted any more.
        assert c.call(b"flush_all\r\n") == b"OK\r\n"
        assert c.stats()["curr_items"] == "0"
        c.close()


def test_shoal_lru_order_survives_a_restart():
    """After kill -9 the list is rebuilt from the table, oldest write last:
    the items written last before the kill outlive those written first."""
    with shoal_node() as node:
        c = wait_memcache(node.memcache_port)
        set_many(c, 0, 1500)  # about 3/4 of the limit, nothing evicted yet
        before = c.stats()
        assert before["evictions"] == "0" and before["curr_items"] == "1500", before
        c.close()
        node.kill()
        node.start()
        c = wait_memcache(node.memcache_port)
        deadline = time.monotonic() + 10  # the list is rebuilt in the background
        while c.stats()["curr_items"] != "1500":
            assert time.monotonic() < deadline, "the items were not listed again: %s" % c.stats()
            time.sleep(0.1)
        assert c.stats()["bytes"] == before["bytes"]
        present(c, [key(i) for i in range(1400, 1450)])  # fetched: most recent now
        set_many(c, 100_000, 1000)  # past the limit by about half of the old items
        after = c.stats()
        assert int(after["evictions"]) > 0, after
        assert int(after["bytes"]) <= 2 << 20, after
        assert len(present(c, [key(i) for i in range(1400, 1450)])) == 50, "fetched items were evicted"
        assert len(present(c, [key(i) for i in range(1450, 1500)])) == 50, "the newest items were evicted"
        assert not present(c, [key(i) for i in range(0, 100)]), "the oldest items outlived newer ones"
        c.close()


def test_unbounded_when_max_size_is_zero():
    with shoal_node(max_size="0") as node:
        c = wait_memcache(node.memcache_port)
        set_many(c, 0, 3000)  # 1.5 times what 2M would hold
        stats = c.stats()
        assert stats["evictions"] == "0" and stats["curr_items"] == "3000", stats
        assert stats["limit_maxbytes"] == "0", stats
        c.close()

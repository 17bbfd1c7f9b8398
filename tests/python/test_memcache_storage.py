"""Items written over memcached's protocols live in the CQL table memcache.items
(key blob PRIMARY KEY, value blob, flags bigint, cas bigint; expiry as TTL):
CQL reads what memcached clients wrote, items survive kill -9 (with
`--commitlog-sync batch`), and TTL'd items expire. Shoal only.
"""
import os
import time
import uuid

import pytest

from memcache_support import IS_CASSANDRA, SHOAL_HOST, SHOAL_MEMCACHE_PORT, Conn, cql_blob, wait_memcache
from node import skip_reason, temp_node

if IS_CASSANDRA:
    pytest.skip("SHOAL_PEER=cassandra: no memcached protocol", allow_module_level=True)

ITEMS_TABLE = "memcache.items"


@pytest.fixture
def mc():
    if not SHOAL_MEMCACHE_PORT:
        pytest.skip("SHOAL_MEMCACHE_PORT is not set (tests/run.sh sets it)")
    c = Conn(SHOAL_HOST, int(SHOAL_MEMCACHE_PORT))
    yield c
    c.close()


def row(sess, k):
    return sess.execute("SELECT key, value, flags, cas FROM %s WHERE key = %s" % (ITEMS_TABLE, cql_blob(k))).one()


def key_of(prefix="s"):
    return "%s%s" % (prefix, uuid.uuid4().hex[:16])


def test_cql_reads_memcache_items(admin, mc):
    k = key_of()
    mc.set(k, "hello", flags=42)
    r = row(admin, k)
    assert r is not None, "an item set over memcached is not in %s" % ITEMS_TABLE
    assert (bytes(r.key), bytes(r.value), r.flags) == (k.encode(), b"hello", 42)
    cas = mc.gets(k)[2]
    assert r.cas == cas
    # binary values, the meta protocol, and read-modify-writes
    binary = bytes(range(256)) * 4
    assert mc.call(b"ms %s_b %d F7\r\n%s\r\n" % (k.encode(), len(binary), binary)) == b"HD\r\n"
    r = row(admin, k + "_b")
    assert (bytes(r.value), r.flags) == (binary, 7)
    mc.set(k + "_n", "10")
    assert mc.call("incr %s_n 32\r\n" % k) == b"42\r\n"
    assert bytes(row(admin, k + "_n").value).rstrip() == b"42"
    assert mc.call("append %s 0 0 6\r\n world\r\n" % k) == b"STORED\r\n"
    assert bytes(row(admin, k).value) == b"hello world"
    # a delete removes the row
    assert mc.call("delete %s\r\n" % k) == b"DELETED\r\n"
    assert row(admin, k) is None


def test_cql_sees_exptime_as_ttl(admin, mc):
    k = key_of()
    assert mc.call("set %s 1 100 1\r\nx\r\n" % k) == b"STORED\r\n"
    r = admin.execute("SELECT TTL(value) AS t FROM %s WHERE key = %s" % (ITEMS_TABLE, cql_blob(k))).one()
    assert r is not None and r.t is not None and 95 <= r.t <= 100, r
    assert mc.call("set %s_0 1 0 1\r\nx\r\n" % k) == b"STORED\r\n"
    r = admin.execute("SELECT TTL(value) AS t FROM %s WHERE key = %s" % (ITEMS_TABLE, cql_blob(k + "_0"))).one()
    assert r is not None and r.t is None


def test_ttl_items_expire(admin, mc):
    k = key_of()
    assert mc.call("set %s 0 2 3\r\nttl\r\n" % k) == b"STORED\r\n"
    assert mc.call("ms %s_m 3 T2\r\nttl\r\n" % k) == b"HD\r\n"
    assert mc.call("set %s_keep 0 0 4\r\nkeep\r\n" % k) == b"STORED\r\n"
    assert mc.get(k) == b"ttl" and row(admin, k) is not None
    deadline = time.monotonic() + 8
    while mc.get(k) is not None or mc.get(k + "_m") is not None:
        assert time.monotonic() < deadline, "items with exptime 2 still there after 8 s"
        time.sleep(0.25)
    assert row(admin, k) is None and row(admin, k + "_m") is None
    assert mc.get(k + "_keep") == b"keep"


# --- kill -9 with --commitlog-sync batch ------------------------------------------------

N_ITEMS = int(os.environ.get("SHOAL_MEMCACHE_CRASH_ITEMS", "2000"))
BATCH = 100


def value_of(i):
    return (b"v%d-" % i) * (1 + i % 37)


@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_items_survive_kill_9():
    with temp_node("shoal-memcache-crash-", args=("--commitlog-sync", "batch", "--memory", "1G")) as node:
        c = wait_memcache(node.memcache_port)
        prefix = key_of("crash")
        acked = {}
        # acknowledged sets, in pipelined batches
        for start in range(0, N_ITEMS, BATCH):
            req = b"".join(b"set %s_%d %d 0 %d\r\n%s\r\n" % (prefix.encode(), i, i, len(value_of(i)), value_of(i))
                           for i in range(start, start + BATCH))
            replies = c.calls(req, BATCH)
            assert replies == [b"STORED\r\n"] * BATCH
            acked.update({i: value_of(i) for i in range(start, start + BATCH)})
        # read-modify-writes and deletes, acknowledged
        assert c.call(b"set %s_ctr 0 0 1\r\n0\r\n" % prefix.encode()) == b"STORED\r\n"
        for _ in range(20):
            c.call(b"incr %s_ctr 5\r\n" % prefix.encode())
        assert c.call(b"append %s_0 0 0 4\r\n_app\r\n" % prefix.encode()) == b"STORED\r\n"
        acked[0] = value_of(0) + b"_app"
        assert c.call(b"delete %s_1\r\n" % prefix.encode()) == b"DELETED\r\n"
        del acked[1]
        assert c.call(b"ms %s_meta 4 F9 T0\r\nmeta\r\n" % prefix.encode()) == b"HD\r\n"
        # items with a TTL: they must come back and then expire
        assert c.call(b"set %s_ttl 0 4 3\r\nttl\r\n" % prefix.encode()) == b"STORED\r\n"
        # writes in flight at the kill: either there, whole, or not at all
        inflight = {N_ITEMS + i: value_of(N_ITEMS + i) for i in range(BATCH)}
        c.send(b"".join(b"set %s_%d 3 0 %d\r\n%s\r\n" % (prefix.encode(), i, len(v), v) for i, v in inflight.items()))
        node.kill()
        c.close()

        node.start()
        c = wait_memcache(node.memcache_port)
        keys = ["%s_%d" % (prefix, i) for i in range(N_ITEMS + BATCH)]
        got = {}
        for start in range(0, len(keys), 100):
            r = c.call(("get %s\r\n" % " ".join(keys[start:start + 100])).encode())
            while r.startswith(b"VALUE "):
                head, rest = r.split(b"\r\n", 1)
                _, k, flags, n = head.split()
                got[int(k.rsplit(b"_", 1)[1])] = (int(flags), rest[:int(n)])
                r = rest[int(n) + 2:]
            assert r == b"END\r\n"
        lost = [i for i in acked if i not in got]
        assert not lost, "%d acknowledged items lost after kill -9 (e.g. %s)" % (len(lost), lost[:10])
        wrong = [i for i, v in acked.items() if got[i] != (i, v)]
        assert not wrong, "wrong values after restart: %s" % [(i, got[i]) for i in wrong[:5]]
        assert 1 not in got, "a deleted item came back"
        for i, v in inflight.items():
            assert i not in got or got[i] == (3, v), (i, got[i])
        assert c.call(b"get %s_ctr\r\n" % prefix.encode()) == b"VALUE %s_ctr 0 3\r\n100\r\nEND\r\n" % prefix.encode()
        assert c.call(b"mg %s_meta v f\r\n" % prefix.encode()) == b"VA 4 f9\r\nmeta\r\n"

        cluster, sess = node.session()
        try:
            for i in list(acked)[::97] + [0]:
                r = row(sess, "%s_%d" % (prefix, i))
                assert r is not None and (bytes(r.value), r.flags) == (acked[i], i), (i, r)
            assert row(sess, "%s_1" % prefix) is None
            count = 0
            for i in acked:
                count += row(sess, "%s_%d" % (prefix, i)) is not None
            assert count == len(acked)
            # the TTL'd item expires (it may already have, if the restart was slow)
            deadline = time.monotonic() + 10
            while c.get(prefix + "_ttl") is not None or row(sess, prefix + "_ttl") is not None:
                assert time.monotonic() < deadline, "an item with exptime 4 still there 10 s after the restart"
                time.sleep(0.25)
        finally:
            cluster.shutdown()
        c.close()


FILL = b"f" * 1000


def store(c, key):
    """`set key` of FILL, one round trip: its answer line."""
    return c.call(b"set %s 0 0 %d\r\n%s\r\n" % (key, len(FILL), FILL))


@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_each_pipelined_operation_is_answered_for_itself():
    # An in-memory items table over in_memory_storage_size_mb refuses writes
    # (the write that crosses the limit is taken, the next refused): a
    # failure in the middle of a pipeline, each operation with its own answer.
    args = ("--in-memory-storage-size-mb", "1", "--commitlog-sync", "batch")
    with temp_node("shoal-memcache-pipeline-", args=args, smp=1) as node:
        c = wait_memcache(node.memcache_port)
        cluster, sess = node.session()
        try:
            sess.execute("ALTER TABLE %s WITH in_memory = true" % ITEMS_TABLE)
        finally:
            cluster.shutdown()
        # How many items the limit takes: the first refused write says.
        assert c.call(b"set ctr 0 0 1\r\n0\r\n") == b"STORED\r\n"
        taken = 0
        while (answer := store(c, b"p%d" % taken)) == b"STORED\r\n":
            taken += 1
            assert taken < 5000, "an in-memory table of 1 MiB took 5000 items of 1 KB"
        assert answer.startswith(b"SERVER_ERROR ") and b"in_memory_storage_size_mb" in answer, answer
        assert taken > 8, taken
        assert c.call(b"flush_all\r\n") == b"OK\r\n"
        # Again, a few items short of the limit.
        assert c.call(b"set ctr 0 0 1\r\n0\r\n") == b"STORED\r\n"
        for i in range(taken - 4):
            assert store(c, b"p%d" % i) == b"STORED\r\n"

        sets = 12
        pipeline = [b"incr ctr 1\r\n"]
        pipeline += [b"set q%d 0 0 %d\r\n%s\r\n" % (i, len(FILL), FILL) for i in range(sets)]
        pipeline += [b"gat 0 ctr q0\r\n", b"get ctr\r\n", b"mg ctr v\r\n", b"incr ctr 1\r\n"]
        answers = c.calls(b"".join(pipeline), len(pipeline))
        # Applied before the failures: answered as applied.
        assert answers[0] == b"1\r\n", answers[0]
        stored = answers[1:1 + sets]
        k = stored.count(b"STORED\r\n")
        assert 0 < k < sets and stored[:k] == [b"STORED\r\n"] * k, stored
        refused = stored[k:] + [answers[1 + sets], answers[-1]]
        for answer in refused:
            assert answer.startswith(b"SERVER_ERROR ") and b"in_memory_storage_size_mb" in answer, answer
        # Reads after the failures still run and answer.
        assert answers[2 + sets:4 + sets] == [b"VALUE ctr 0 1\r\n1\r\nEND\r\n", b"VA 1\r\n1\r\n"]
        # And the effects are exactly what the answers said.
        assert c.call(b"get ctr\r\n") == b"VALUE ctr 0 1\r\n1\r\nEND\r\n"
        for i in range(sets):
            expected = b"VALUE q%d 0 %d\r\n%s\r\nEND\r\n" % (i, len(FILL), FILL) if i < k else b"END\r\n"
            assert c.call(b"get q%d\r\n" % i) == expected, i
        assert c.call(b"version\r\n").startswith(b"VERSION ")
        c.close()


def hit_answers(c, key):
    """(get, gets, mg with value, flags and CAS) of `key`, as answered."""
    return (c.call(b"get %s\r\n" % key), c.call(b"gets %s\r\n" % key), c.call(b"mg %s v f c s\r\n" % key))


@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_hits_from_a_memtable_the_row_cache_and_both_answer_alike():
    """A hit is read straight from where the item lies (a memtable's or the
    row cache's compact bytes): its value, flags, CAS unique and expiry
    answer the same from a memtable, from the row cache after a flush, and
    merged from both once a newer write lands over a cached item; expired
    items miss in each; pipelined gets of one large cached item all get
    all of it."""
    with temp_node("shoal-memcache-hits-", smp=1) as node:
        c = Conn("127.0.0.1", node.memcache_port)
        large = os.urandom(100 * 1024)
        assert c.call(b"set k1 5 0 5\r\nhello\r\n") == b"STORED\r\n"
        assert c.call(b"set k2 7 2 6\r\nbrief!\r\n") == b"STORED\r\n"
        assert c.call(b"set eight 0 0 8\r\n12345678\r\n") == b"STORED\r\n"
        assert c.call(b"set big 3 0 %d\r\n%s\r\n" % (len(large), large)) == b"STORED\r\n"
        from_memtable = {k: hit_answers(c, k) for k in (b"k1", b"k2", b"eight", b"big")}
        assert from_memtable[b"k1"][0] == b"VALUE k1 5 5\r\nhello\r\nEND\r\n"
        assert from_memtable[b"eight"][0] == b"VALUE eight 0 8\r\n12345678\r\nEND\r\n"
        assert from_memtable[b"big"][0] == b"VALUE big 3 %d\r\n%s\r\nEND\r\n" % (len(large), large)
        assert from_memtable[b"k1"][2].startswith(b"VA 5 f5 c")

        node.api("POST", "/storage_service/keyspace_flush/memcache?cf=items")
        for k, answers in from_memtable.items():
            assert hit_answers(c, k) == answers, k

        # A newer write over the cached item: the memtable's and the cache's
        # versions merged, the newer winning.
        assert c.call(b"set k1 6 0 5\r\nnewer\r\n") == b"STORED\r\n"
        assert c.call(b"get k1\r\n") == b"VALUE k1 6 5\r\nnewer\r\nEND\r\n"
        # Many gets of the large cached item in one pipeline share one copy
        # and each answers all of it.
        answers = c.calls(b"get big\r\n" * 64, 64)
        assert answers == [from_memtable[b"big"][0]] * 64

        # k2 expires (in the cache), and an item set to expire at once
        # (in the memtable) is never seen.
        assert c.call(b"set gone 0 -1 1\r\nx\r\n") == b"STORED\r\n"
        time.sleep(2.2)
        assert c.call(b"get k2\r\n") == b"END\r\n"
        assert c.call(b"mg k2 v\r\n") == b"EN\r\n"
        assert c.call(b"get gone\r\n") == b"END\r\n"
        c.close()


@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_deletes_and_increments_of_items_only_in_sstables():
    """An item only in an SSTable (flushed, then a restart: no memtable, no
    row cache entry) is found by delete, md, incr and ma, which answer as
    memcached does; a delete of a key the Bloom filters rule out misses at
    once; a deleted item stays deleted from the memtable, after a flush and
    after restarts, and a set brings it back; counters count on."""
    args = ("--commitlog-sync", "batch", "--row-cache-save-period", "0", "--memory", "1G")
    with temp_node("shoal-memcache-sstable-ops-", args=args, smp=1) as node:
        c = wait_memcache(node.memcache_port)
        for k in (b"a", b"b", b"c", b"m"):
            assert c.call(b"set %s 3 0 %d\r\n%s\r\n" % (k, len(FILL), FILL)) == b"STORED\r\n"
        assert c.call(b"set ctr 0 0 2\r\n41\r\n") == b"STORED\r\n"
        assert c.call(b"set mctr 0 0 1\r\n7\r\n") == b"STORED\r\n"
        node.api("POST", "/storage_service/keyspace_flush/memcache?cf=items")
        c.close()
        node.kill()
        node.start()
        c = wait_memcache(node.memcache_port)

        # Each found where it lies, in an SSTable alone.
        assert c.call(b"delete a\r\n") == b"DELETED\r\n"
        assert c.call(b"md b\r\n") == b"HD\r\n"
        assert c.call(b"incr ctr 1\r\n") == b"42\r\n"
        assert c.call(b"ma mctr v\r\n") == b"VA 1\r\n8\r\n"
        # Then from the memtable (over the SSTable's copy).
        assert c.call(b"delete a\r\n") == b"NOT_FOUND\r\n"
        assert c.call(b"md b q\r\nmn\r\n", 2) == b"NF\r\nMN\r\n"
        assert c.call(b"get a b\r\n") == b"END\r\n"
        assert c.call(b"incr ctr 1\r\n") == b"43\r\n"
        assert c.call(b"decr mctr 10\r\n") == b"0\r\n"
        # Keys never written: the Bloom filters rule them out.
        assert c.calls(b"delete nothing%d\r\n" * 3 % (1, 2, 3), 3) == [b"NOT_FOUND\r\n"] * 3
        assert c.call(b"incr nothing 1\r\n") == b"NOT_FOUND\r\n"
        # A set over a deleted item brings it back; a delete of a memtable
        # item over its SSTable copy deletes both.
        assert c.call(b"set b 5 0 3\r\nnew\r\n") == b"STORED\r\n"
        assert c.call(b"get b\r\n") == b"VALUE b 5 3\r\nnew\r\nEND\r\n"
        assert c.call(b"set c 6 0 3\r\nnew\r\n") == b"STORED\r\n"
        assert c.call(b"delete c\r\n") == b"DELETED\r\n"
        assert c.call(b"get c\r\n") == b"END\r\n"

        def after_restart():
            assert c.call(b"get a c\r\n") == b"END\r\n"
            assert c.call(b"delete a\r\n") == b"NOT_FOUND\r\n"
            assert c.call(b"get b m\r\n") == b"VALUE b 5 3\r\nnew\r\nVALUE m 3 %d\r\n%s\r\nEND\r\n" % (len(FILL), FILL)
            assert c.call(b"get ctr mctr\r\n") == b"VALUE ctr 0 2\r\n43\r\nVALUE mctr 0 1\r\n0\r\nEND\r\n"

        # The deletes and increments come back from the commitlog, then
        # from SSTables.
        c.close()
        node.kill()
        node.start()
        c = wait_memcache(node.memcache_port)
        after_restart()
        node.api("POST", "/storage_service/keyspace_flush/memcache?cf=items")
        c.close()
        node.kill()
        node.start()
        c = wait_memcache(node.memcache_port)
        after_restart()
        assert c.call(b"delete m\r\n") == b"DELETED\r\n"
        assert c.call(b"delete m\r\n") == b"NOT_FOUND\r\n"
        c.close()


@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_hits_read_from_disk_answer_as_from_memory():
    """After a flush and a restart with a cold row cache, a hit is read
    from the SSTable (its stored row written straight into the compact
    layout, then cached as it is): value, flags, CAS unique and TTL answer
    as they did from the memtable, from disk and again from the row cache;
    an item deleted before the flush stays deleted."""
    with temp_node("shoal-memcache-disk-", smp=1, args=("--row-cache-save-period", "0")) as node:
        c = Conn("127.0.0.1", node.memcache_port)
        large = os.urandom(100 * 1024)
        items = {b"k1": b"set k1 5 0 5\r\nhello\r\n", b"eight": b"set eight 9 0 8\r\n12345678\r\n",
                 b"ttl": b"set ttl 3 3600 3\r\nttl\r\n", b"empty": b"set empty 0 0 0\r\n\r\n",
                 b"big": b"set big 3 0 %d\r\n%s\r\n" % (len(large), large)}
        for request in items.values():
            assert c.call(request) == b"STORED\r\n"
        assert c.call(b"set gone 0 0 1\r\nx\r\n") == b"STORED\r\n"
        assert c.call(b"delete gone\r\n") == b"DELETED\r\n"
        from_memtable = {k: hit_answers(c, k) for k in items}
        assert from_memtable[b"eight"][0] == b"VALUE eight 9 8\r\n12345678\r\nEND\r\n"
        ttl_left = lambda: int(c.call(b"mg ttl t\r\n").split()[1][1:])
        assert 3590 <= ttl_left() <= 3600
        node.api("POST", "/storage_service/keyspace_flush/memcache?cf=items")
        c.close()
        node.kill()
        node.start()
        c = Conn("127.0.0.1", node.memcache_port)
        for source in ("disk", "row cache"):
            for k, answers in from_memtable.items():
                assert hit_answers(c, k) == answers, (source, k)
            assert 3590 <= ttl_left() <= 3600, source
            assert c.call(b"get gone\r\n") == b"END\r\n", source
        c.close()

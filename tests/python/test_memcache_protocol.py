"""memcached's text and meta protocols over raw sockets, byte for byte.

Every test runs against two targets (memcache_support.py): "shoal" (Shoal's
--memcache-port) and "memcached" (Debian's memcached 1.6.18, started by
tests/run.sh; skipped when MEMCACHED_PORT is unset), so each expected answer
is checked against the real thing. The expectations follow memcached's
doc/protocol.txt; where 1.6.18 answers differently or lacks a flag, a comment
says so and the test follows 1.6.18 (or skips the reference).

Meta return flags are compared as a set: memcached echoes them in request
order, which protocol.txt does not promise and no client relies on.

Keys are unique per test (the `key` fixture), since both servers are shared;
the flush_all tests come last in this file and wait out their delays.
A test of a meta flag Shoal does not implement yet may call
xfail_on_shoal(request, target, "<flag>") (a non-strict xfail on Shoal only).
"""
import time

import pytest

from memcache_support import (  # noqa: F401  (fixtures)
    b64, conn, key, meta_flags, memcached_lacks, target,
)

MAX_KEY = 250
ITEM_SIZE_MAX = 1 << 20


def kv(conn, k, value, flags=0, exptime=0):
    return conn.set(k, value, flags=flags, exptime=exptime)


# --- text protocol: storage and retrieval --------------------------------------------

def test_version(conn):
    r = conn.call(b"version\r\n")
    assert r.startswith(b"VERSION ") and r.endswith(b"\r\n") and len(r) > 10, r


def test_set_get(conn, key):
    assert conn.call("set %s 123 0 3\r\nabc\r\n" % key) == b"STORED\r\n"
    assert conn.call("get %s\r\n" % key) == b"VALUE %s 123 3\r\nabc\r\nEND\r\n" % key.encode()
    # an empty value, and one holding \r\n and arbitrary bytes
    assert conn.call("set %s_e 0 0 0\r\n\r\n" % key) == b"STORED\r\n"
    assert conn.call("get %s_e\r\n" % key) == b"VALUE %s_e 0 0\r\n\r\nEND\r\n" % key.encode()
    binary = bytes(range(256)) + b"\r\nEND\r\n"
    assert conn.call(b"set %s_b 4294967295 0 %d\r\n%s\r\n" % (key.encode(), len(binary), binary)) == b"STORED\r\n"
    assert conn.call("get %s_b\r\n" % key) == b"VALUE %s_b 4294967295 %d\r\n%s\r\nEND\r\n" % (
        key.encode(), len(binary), binary)
    # set overwrites value and flags
    assert conn.call("set %s 7 0 2\r\nxy\r\n" % key) == b"STORED\r\n"
    assert conn.call("get %s\r\n" % key) == b"VALUE %s 7 2\r\nxy\r\nEND\r\n" % key.encode()


def test_get_miss_and_multi(conn, key):
    assert conn.call("get %s\r\n" % key) == b"END\r\n"
    kv(conn, key + "a", "1", flags=1)
    kv(conn, key + "c", "333", flags=3)
    # hits in request order, misses left out; a key asked twice is answered twice
    r = conn.call("get %sa %sb %sc %sa\r\n" % (key, key, key, key))
    k = key.encode()
    assert r == (b"VALUE %sa 1 1\r\n1\r\nVALUE %sc 3 3\r\n333\r\nVALUE %sa 1 1\r\n1\r\nEND\r\n" % (k, k, k))


def test_gets_cas_unique(conn, key):
    kv(conn, key, "v1")
    flags, value, cas1 = conn.gets(key)
    assert (flags, value) == (0, b"v1")
    assert conn.gets(key)[2] == cas1  # reads do not change it
    kv(conn, key, "v2")
    cas2 = conn.gets(key)[2]
    assert cas2 != cas1
    kv(conn, key + "o", "x")
    assert conn.gets(key + "o")[2] not in (cas1, cas2)
    r = conn.call("gets %s %s\r\n" % (key, key + "o"))
    assert r.count(b"VALUE ") == 2 and r.endswith(b"END\r\n")


def test_add(conn, key):
    assert conn.call("add %s 5 0 1\r\na\r\n" % key) == b"STORED\r\n"
    assert conn.call("add %s 6 0 1\r\nb\r\n" % key) == b"NOT_STORED\r\n"
    assert conn.gets(key)[:2] == (5, b"a")


def test_replace(conn, key):
    assert conn.call("replace %s 5 0 1\r\na\r\n" % key) == b"NOT_STORED\r\n"
    assert conn.get(key) is None
    kv(conn, key, "x")
    assert conn.call("replace %s 6 0 1\r\nb\r\n" % key) == b"STORED\r\n"
    assert conn.gets(key)[:2] == (6, b"b")


def test_append_prepend(conn, key):
    assert conn.call("append %s 0 0 1\r\na\r\n" % key) == b"NOT_STORED\r\n"
    assert conn.call("prepend %s 0 0 1\r\na\r\n" % key) == b"NOT_STORED\r\n"
    assert conn.get(key) is None
    kv(conn, key, "mid", flags=42)
    cas = conn.gets(key)[2]
    # new flags and exptime are ignored
    assert conn.call("append %s 9 0 4\r\n_end\r\n" % key) == b"STORED\r\n"
    assert conn.call("prepend %s 9 -1 6\r\nstart_\r\n" % key) == b"STORED\r\n"
    flags, value, cas2 = conn.gets(key)
    assert (flags, value) == (42, b"start_mid_end")
    assert cas2 != cas


def test_cas(conn, key):
    assert conn.call("cas %s 0 0 1 12345\r\na\r\n" % key) == b"NOT_FOUND\r\n"
    kv(conn, key, "a")
    cas = conn.gets(key)[2]
    assert conn.call("cas %s 0 0 1 %d\r\nb\r\n" % (key, cas + 1)) == b"EXISTS\r\n"
    assert conn.get(key) == b"a"
    assert conn.call("cas %s 3 0 1 %d\r\nc\r\n" % (key, cas)) == b"STORED\r\n"
    assert conn.gets(key)[:2] == (3, b"c")
    # the old unique is stale now
    assert conn.call("cas %s 0 0 1 %d\r\nd\r\n" % (key, cas)) == b"EXISTS\r\n"
    conn.send("cas %s 0 0 1 %d noreply\r\nd\r\n" % (key, conn.gets(key)[2]))
    assert conn.call("get %s\r\n" % key) == b"VALUE %s 0 1\r\nd\r\nEND\r\n" % key.encode()
    # bad cas unique
    assert conn.call("cas %s 0 0 1 abc\r\nd\r\n" % key).startswith(b"CLIENT_ERROR bad command line format")


def test_incr_decr(conn, key):
    assert conn.call("incr %s 1\r\n" % key) == b"NOT_FOUND\r\n"
    assert conn.call("decr %s 1\r\n" % key) == b"NOT_FOUND\r\n"
    kv(conn, key, "10", flags=5)
    assert conn.call("incr %s 5\r\n" % key) == b"15\r\n"
    assert conn.call("decr %s 3\r\n" % key) == b"12\r\n"
    # decr does not go below 0
    assert conn.call("decr %s 100\r\n" % key) == b"0\r\n"
    assert conn.call("incr %s 18446744073709551615\r\n" % key) == b"18446744073709551615\r\n"
    # incr wraps around at 2^64
    assert conn.call("incr %s 2\r\n" % key) == b"1\r\n"
    # flags are kept; a value that lost digits MAY be space-padded (protocol.txt):
    # memcached 1.6.18 pads in place, so compare the number only
    flags, value, _ = conn.gets(key)
    assert flags == 5 and int(value) == 1
    assert conn.call("incr %s abc\r\n" % key) == b"CLIENT_ERROR invalid numeric delta argument\r\n"
    assert conn.call("incr %s -1\r\n" % key) == b"CLIENT_ERROR invalid numeric delta argument\r\n"
    assert conn.call("decr %s 18446744073709551616\r\n" % key) == b"CLIENT_ERROR invalid numeric delta argument\r\n"
    kv(conn, key + "s", "x1")
    assert conn.call("incr %ss 1\r\n" % key) == b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    # the connection stays usable
    assert conn.call("incr %s 1\r\n" % key) == b"2\r\n"


def test_delete(conn, key):
    assert conn.call("delete %s\r\n" % key) == b"NOT_FOUND\r\n"
    kv(conn, key, "x")
    assert conn.call("delete %s\r\n" % key) == b"DELETED\r\n"
    assert conn.call("get %s\r\n" % key) == b"END\r\n"
    kv(conn, key, "x")
    # a legacy time of 0 is accepted, any other is refused
    assert conn.call("delete %s 0\r\n" % key) == b"DELETED\r\n"
    assert conn.call("delete %s 5\r\n" % key) == (
        b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n")


def test_touch(conn, key):
    assert conn.call("touch %s 100\r\n" % key) == b"NOT_FOUND\r\n"
    kv(conn, key, "x", exptime=100)
    assert conn.call("touch %s 0\r\n" % key) == b"TOUCHED\r\n"
    assert conn.get(key) == b"x"
    assert conn.call("touch %s -1\r\n" % key) == b"TOUCHED\r\n"
    assert conn.call("get %s\r\n" % key) == b"END\r\n"
    assert conn.call("touch %s abc\r\n" % key) == b"CLIENT_ERROR invalid exptime argument\r\n"


def test_gat_gats(conn, key):
    k = key.encode()
    assert conn.call("gat 100 %s\r\n" % key) == b"END\r\n"
    kv(conn, key, "abc", flags=9)
    kv(conn, key + "2", "de", flags=1)
    cas = conn.gets(key)[2]
    assert conn.call("gat 100 %s %s2 %s3\r\n" % (key, key, key)) == (
        b"VALUE %s 9 3\r\nabc\r\nVALUE %s2 1 2\r\nde\r\nEND\r\n" % (k, k))
    assert conn.call("gats 100 %s\r\n" % key) == b"VALUE %s 9 3 %d\r\nabc\r\nEND\r\n" % (k, cas)
    # the new exptime applies: -1 expires the item after this read
    assert conn.call("gat -1 %s\r\n" % key) == b"VALUE %s 9 3\r\nabc\r\nEND\r\n" % k
    assert conn.call("get %s\r\n" % key) == b"END\r\n"
    assert conn.call("gat abc %s2\r\n" % key) == b"CLIENT_ERROR invalid exptime argument\r\n"
    # memcached 1.6.18 answers a gat without keys with an empty result (get: ERROR)
    assert conn.call("gat 10\r\n") == b"END\r\n"


def test_expiry(conn, key):
    # negative: expired at once
    assert conn.call("set %s 0 -1 1\r\nx\r\n" % key) == b"STORED\r\n"
    assert conn.call("get %s\r\n" % key) == b"END\r\n"
    # more than 30 days: an absolute Unix time, in the past or the future
    now = int(time.time())
    assert conn.call("set %s 0 %d 1\r\nx\r\n" % (key, now - 100)) == b"STORED\r\n"
    assert conn.call("get %s\r\n" % key) == b"END\r\n"
    assert conn.call("set %s 0 %d 1\r\ny\r\n" % (key, now + 3600)) == b"STORED\r\n"
    assert conn.get(key) == b"y"
    # relative seconds
    assert conn.call("set %s_r 0 2 1\r\nz\r\n" % key) == b"STORED\r\n"
    assert conn.get(key + "_r") == b"z"
    deadline = time.monotonic() + 5
    while conn.get(key + "_r") is not None:
        assert time.monotonic() < deadline, "an item with exptime 2 still there after 5 s"
        time.sleep(0.25)


def test_noreply(conn, key):
    k = key.encode()
    conn.send(b"set %s 1 0 2 noreply\r\n10\r\n" % k)
    conn.send(b"add %s 1 0 1 noreply\r\nx\r\n" % k)  # NOT_STORED, silently
    conn.send(b"add %s_a 2 0 1 noreply\r\na\r\n" % k)
    conn.send(b"replace %s_a 3 0 1 noreply\r\nb\r\n" % k)
    conn.send(b"append %s_a 0 0 1 noreply\r\nc\r\n" % k)
    conn.send(b"prepend %s_a 0 0 1 noreply\r\nd\r\n" % k)
    conn.send(b"incr %s 5 noreply\r\n" % k)
    conn.send(b"decr %s 2 noreply\r\n" % k)
    conn.send(b"set %s_d 0 0 1 noreply\r\nx\r\n" % k)
    conn.send(b"delete %s_d noreply\r\n" % k)
    conn.send(b"delete %s_missing noreply\r\n" % k)
    conn.send(b"touch %s_a 100 noreply\r\n" % k)
    conn.send(b"cas %s_a 0 0 1 1 noreply\r\nz\r\n" % k)  # EXISTS, silently
    assert conn.call(b"get %s %s_a %s_d\r\n" % (k, k, k)) == (
        b"VALUE %s 1 2\r\n13\r\nVALUE %s_a 3 3\r\ndbc\r\nEND\r\n" % (k, k))
    _, _, cas = conn.gets(key + "_a")
    conn.send(b"cas %s_a 4 0 1 %d noreply\r\ny\r\n" % (k, cas))
    conn.send(b"verbosity 0 noreply\r\n")
    assert conn.call(b"get %s_a\r\n" % k) == b"VALUE %s_a 4 1\r\ny\r\nEND\r\n" % k


def test_verbosity(conn):
    assert conn.call(b"verbosity 1\r\n") == b"OK\r\n"
    assert conn.call(b"verbosity 0\r\n") == b"OK\r\n"
    assert conn.call(b"verbosity\r\n") == b"ERROR\r\n"


def test_quit(target, key):
    c = target.connect()
    try:
        c.send("set %s 0 0 1\r\nq\r\nquit\r\nget %s\r\n" % (key, key))
        assert c.line() == b"STORED\r\n"
        assert c.closed_by_peer(), "quit did not close the connection"
        assert c.buf == b"", "answered after quit: %r" % c.buf
    finally:
        c.close()
    c = target.connect()
    try:
        assert c.get(key) == b"q"
    finally:
        c.close()


# --- stats ---------------------------------------------------------------------------

GENERAL_STATS = ["pid", "uptime", "time", "version", "curr_items", "total_items", "bytes",
                 "curr_connections", "total_connections", "cmd_get", "cmd_set", "cmd_flush",
                 "cmd_touch", "get_hits", "get_misses", "delete_hits", "delete_misses",
                 "incr_hits", "incr_misses", "decr_hits", "decr_misses", "cas_hits", "cas_misses",
                 "cas_badval", "touch_hits", "touch_misses", "evictions", "limit_maxbytes", "threads",
                 "bytes_read", "bytes_written", "max_connections", "rusage_user", "rusage_system"]


def test_stats_general(target, conn, key):
    s = conn.stats()
    missing = [f for f in GENERAL_STATS if f not in s]
    assert not missing, "stats lacks %s" % missing
    for f in GENERAL_STATS:
        if f not in ("version", "rusage_user", "rusage_system"):
            assert s[f].isdigit(), (f, s[f])
    assert int(s["pid"]) > 0 and int(s["threads"]) >= 1 and int(s["limit_maxbytes"]) > 0
    assert int(s["curr_connections"]) >= 1
    assert abs(int(s["time"]) - time.time()) < 5
    # counters move (>=: the servers are shared)
    other = target.connect()
    other.call("version\r\n")
    kv(conn, key, "x")
    conn.call("get %s %s_miss\r\n" % (key, key))
    s2 = conn.stats()
    assert int(s2["total_connections"]) >= int(s["total_connections"]) + 1
    assert int(s2["curr_connections"]) >= 2
    assert int(s2["cmd_set"]) >= int(s["cmd_set"]) + 1
    assert int(s2["cmd_get"]) >= int(s["cmd_get"]) + 2
    assert int(s2["get_hits"]) >= int(s["get_hits"]) + 1
    assert int(s2["get_misses"]) >= int(s["get_misses"]) + 1
    assert int(s2["total_items"]) >= int(s["total_items"]) + 1
    assert int(s2["curr_items"]) >= 1 and int(s2["bytes"]) > 0
    other.close()


def test_stats_settings(target, conn):
    s = conn.stats("settings")
    for f in ["maxbytes", "maxconns", "tcpport", "item_size_max", "num_threads", "evictions", "cas_enabled"]:
        assert f in s, "stats settings lacks %s" % f
    assert int(s["tcpport"]) == target.port
    assert int(s["item_size_max"]) == ITEM_SIZE_MAX
    assert s["evictions"] == "on" and s["cas_enabled"] == "yes"


def test_stats_items_slabs(conn, key):
    kv(conn, key, "x" * 100)
    items = conn.stats("items")
    assert any(k.startswith("items:") and k.endswith(":number") for k in items), items
    slabs = conn.stats("slabs")
    assert "active_slabs" in slabs and "total_malloced" in slabs, slabs
    assert any(k.endswith(":chunk_size") for k in slabs), slabs


def test_cachedump_and_cache_memlimit(conn):
    # clients call these (pymemcache's integration suite: stats("cachedump", "1",
    # "1") and cache_memlimit(50)); cachedump lists ITEM lines (maybe none), then END
    r = conn.call(b"stats cachedump 1 1\r\n")
    assert r.endswith(b"END\r\n") and all(
        ln.startswith(b"ITEM ") for ln in r.split(b"\r\n")[:-2]), r
    assert conn.call(b"cache_memlimit 64\r\n") == b"OK\r\n"
    conn.send(b"cache_memlimit 64 noreply\r\n")
    assert conn.call(b"mn\r\n") == b"MN\r\n"


# --- bad input -----------------------------------------------------------------------

def test_unknown_command(conn):
    assert conn.call(b"bogus\r\n") == b"ERROR\r\n"
    assert conn.call(b"GET x\r\n") == b"ERROR\r\n"  # command names are case-sensitive
    assert conn.call(b"\r\n") == b"ERROR\r\n"
    for cmd in (b"get", b"gets", b"delete", b"incr x", b"touch x"):  # too few arguments
        assert conn.call(cmd + b"\r\n") == b"ERROR\r\n", cmd
    assert conn.call(b"version\r\n").startswith(b"VERSION ")


def test_bad_data_chunk(conn, key):
    # 4 bytes where 3 were announced: the chunk is refused, and memcached 1.6.18
    # then reads the rest of the line as a command (ERROR)
    assert conn.call("set %s 0 0 3\r\nabcd\r\n" % key, n=2) == b"CLIENT_ERROR bad data chunk\r\nERROR\r\n"
    assert conn.call("get %s\r\n" % key) == b"END\r\n"
    kv(conn, key, "ok")
    assert conn.get(key) == b"ok"


def test_key_length(conn, key):
    long_key = (key + "x" * 300)[:MAX_KEY + 1]
    ok_key = long_key[:MAX_KEY]
    err = b"CLIENT_ERROR bad command line format\r\n"
    assert conn.call("get %s\r\n" % long_key) == err
    assert conn.call("get %s %s\r\n" % (ok_key, long_key)) == err
    # the data block of a refused set is read as a command by memcached 1.6.18
    assert conn.call("set %s 0 0 1\r\na\r\n" % long_key, n=2) == err + b"ERROR\r\n"
    assert conn.call("delete %s\r\n" % long_key) == err
    assert conn.call("incr %s 1\r\n" % long_key) == err
    assert conn.call("touch %s 1\r\n" % long_key) == err
    assert conn.call("mg %s v\r\n" % long_key) == err
    kv(conn, ok_key, "250")
    assert conn.call("get %s\r\n" % ok_key) == b"VALUE %s 0 3\r\n250\r\nEND\r\n" % ok_key.encode()


def test_key_control_characters(conn, key):
    # protocol.txt: keys must not include control characters; memcached 1.6.18
    # does not check (it splits lines on spaces only) and stores such a key
    k = key.encode() + b"\x01x"
    assert conn.call(b"set %s 0 0 1\r\nc\r\n" % k) == b"STORED\r\n"
    assert conn.call(b"get %s\r\n" % k) == b"VALUE %s 0 1\r\nc\r\nEND\r\n" % k


def test_line_too_long(target):
    # protocol.txt / the issue: an error, then close. memcached 1.6.18 closes a
    # connection whose line passes 2048 bytes without a newline, without a message
    c = target.connect()
    try:
        c.send(b"x" * 3000)
        assert c.closed_by_peer(), "a 3000-byte line without newline did not close the connection"
        assert c.buf in (b"", b"CLIENT_ERROR line too long\r\n"), c.buf
    finally:
        c.close()


@pytest.mark.parametrize("line", [b"GET / HTTP/1.0\r\n", b"PUT /items HTTP/1.1\r\nHost: x\r\n\r\n",
                                  b"HEAD / HTTP/2.0\r\n", b"foo a b c d e f g h i j HTTP/1.1\r\n"])
def test_http_request_line_hangs_up(target, line):
    # memcached closes a connection whose command line is an HTTP request
    # (an unknown command of two bytes or more whose last word starts with
    # HTTP/), so that a web page cannot make a browser talk to the cache port.
    c = target.connect()
    try:
        c.send(line)
        assert c.closed_by_peer(), "%r did not close the connection" % line
        assert c.buf == b"", c.buf
    finally:
        c.close()


def test_http_version_words_in_commands_are_words(conn, key):
    # Only unknown commands of two bytes or more ending with HTTP/... count.
    assert conn.call(b"GET / HTTP/1.0 x\r\n") == b"ERROR\r\n"
    assert conn.call(b"x HTTP/1.1\r\n") == b"ERROR\r\n"
    assert conn.call(b"delete HTTP/1.1\r\n") in (b"DELETED\r\n", b"NOT_FOUND\r\n")
    assert conn.call(b"get HTTP/1.1\r\n") == b"END\r\n"


def test_long_get_line(conn, key):
    # ... but a get with many keys may be longer than 2048 bytes
    keys = ["%s_%03d" % (key, i) for i in range(150)]
    kv(conn, keys[-1], "last")
    line = ("get %s\r\n" % " ".join(keys)).encode()
    assert len(line) > 3000
    assert conn.call(line) == b"VALUE %s 0 4\r\nlast\r\nEND\r\n" % keys[-1].encode()


def test_value_too_large(conn, key):
    k = key.encode()
    big = b"x" * (ITEM_SIZE_MAX + 1)
    r = conn.call(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(big), big))
    assert r == b"SERVER_ERROR object too large for cache\r\n"
    # the data was swallowed: the connection stays usable
    assert conn.call(b"get %s\r\n" % k) == b"END\r\n"
    huge = b"y" * (2 * ITEM_SIZE_MAX)
    assert conn.call(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(huge), huge)) == (
        b"SERVER_ERROR object too large for cache\r\n")
    # an item just under the limit is stored (memcached counts its own item
    # header in item_size_max, so exactly 1 MiB of value is refused there)
    ok = b"z" * (ITEM_SIZE_MAX - 4096)
    assert conn.call(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(ok), ok)) == b"STORED\r\n"
    assert conn.get(key) == ok
    # with noreply: no answer, still swallowed
    conn.send(b"set %s_n 0 0 %d noreply\r\n%s\r\n" % (k, len(big), big))
    assert conn.call(b"get %s_n\r\n" % k) == b"END\r\n"
    assert conn.call(b"ms %s_m %d\r\n%s\r\n" % (k, len(big), big)) == b"SERVER_ERROR object too large for cache\r\n"
    assert conn.call(b"mn\r\n") == b"MN\r\n"


def test_bad_flags_exptime_length(conn, key):
    err = b"CLIENT_ERROR bad command line format\r\n"
    # after a refused line memcached 1.6.18 reads the data block as a command
    for line in ["set %s abc 0 1", "set %s -1 0 1", "set %s 0 abc 1", "set %s 0 0 abc",
                 "add %s 1.5 0 1"]:
        assert conn.call((line % key) + "\r\na\r\n", n=2) == err + b"ERROR\r\n", line
    assert conn.call("set %s 0 0 -1\r\n" % key) == err
    assert conn.call("set %s 0 0\r\n" % key) == b"ERROR\r\n"  # too few tokens
    assert conn.call("get %s\r\n" % key) == b"END\r\n"
    assert conn.call("flush_all abc\r\n") == b"CLIENT_ERROR invalid exptime argument\r\n"


def test_flags_wider_than_32_bits(conn, key):
    # protocol.txt: flags are 32 bits. memcached 1.6.18 parses them as an unsigned
    # long and keeps the low 32 bits, so 2^32 is stored as 0 and 2^64-1 as 2^32-1
    k = key.encode()
    assert conn.call(b"set %s 4294967296 0 1\r\na\r\n" % k) == b"STORED\r\n"
    assert conn.call(b"get %s\r\n" % k) == b"VALUE %s 0 1\r\na\r\nEND\r\n" % k
    assert conn.call(b"set %s 18446744073709551615 0 1\r\nb\r\n" % k) == b"STORED\r\n"
    assert conn.call(b"get %s\r\n" % k) == b"VALUE %s 4294967295 1\r\nb\r\nEND\r\n" % k


# --- pipelining ------------------------------------------------------------------------

def test_pipelined_text(conn, key):
    n = 200
    req = b"".join(b"set %s_%d %d 0 %d\r\n%d\r\n" % (key.encode(), i, i, len(str(i)), i) for i in range(n))
    req += b"".join(b"get %s_%d\r\n" % (key.encode(), i) for i in range(n))
    req += b"incr %s_7 3\r\ndelete %s_8\r\nget %s_8\r\nversion\r\n" % ((key.encode(),) * 3)
    replies = conn.calls(req, 2 * n + 4)
    assert replies[:n] == [b"STORED\r\n"] * n
    for i in range(n):
        assert replies[n + i] == b"VALUE %s_%d %d %d\r\n%d\r\nEND\r\n" % (key.encode(), i, i, len(str(i)), i)
    assert replies[2 * n:2 * n + 3] == [b"10\r\n", b"DELETED\r\n", b"END\r\n"]
    assert replies[-1].startswith(b"VERSION ")


def test_pipelined_writes_keep_their_keys_after_the_buffer_is_read_into_again(conn, key):
    # A batch's keys are cut from the connection's read buffer, which the
    # next batch is read into: items written (new, overwritten, deleted,
    # set again) keep their keys and values, and counters their digits as
    # they grow (9 -> 10, 99 -> 100) and wrap past 2^64 - 1.
    k = key.encode()
    n = 64
    first = b"".join(b"set %s_%d 0 0 3\r\nv%02d\r\n" % (k, i, i) for i in range(n))
    first += b"set %s_c1 0 0 1\r\n9\r\nset %s_c2 0 0 2\r\n99\r\n" % (k, k)
    first += b"set %s_max 0 0 20\r\n18446744073709551615\r\n" % k
    first += b"".join(b"set %s_%d 0 0 3\r\nw%02d\r\n" % (k, i, i) for i in range(0, n, 2))
    first += b"".join(b"delete %s_%d\r\n" % (k, i) for i in range(0, n, 4))
    first += b"incr %s_c1 1\r\nincr %s_c2 1\r\nincr %s_max 1\r\n" % (k, k, k)
    replies = conn.calls(first, n + 3 + n // 2 + n // 4 + 3)
    assert replies[-3:] == [b"10\r\n", b"100\r\n", b"0\r\n"]
    assert set(replies[n + 3 + n // 2:-3]) == {b"DELETED\r\n"}
    # Other keys and lengths in the next batches, over the same buffer.
    second = b"".join(b"set %s_x%d 0 0 4\r\nx%03d\r\n" % (k, i, i) for i in range(n))
    second += b"".join(b"set %s_%d 0 0 5\r\nagain\r\n" % (k, i) for i in range(0, n, 8))
    assert set(conn.calls(second, n + n // 8)) == {b"STORED\r\n"}
    for i in range(n):
        name = b"%s_%d" % (k, i)
        if i % 8 == 0:
            want = b"again"
        elif i % 4 == 0:
            want = None
        else:
            want = b"w%02d" % i if i % 2 == 0 else b"v%02d" % i
        got = conn.call(b"get %s\r\n" % name)
        assert got == (b"VALUE %s 0 %d\r\n%s\r\nEND\r\n" % (name, len(want), want) if want else b"END\r\n"), name
        assert conn.call(b"get %s_x%d\r\n" % (k, i)) == b"VALUE %s_x%d 0 4\r\nx%03d\r\nEND\r\n" % (k, i, i)
    got = conn.call(b"get %s_c1 %s_c2\r\n" % (k, k))
    assert got == b"VALUE %s_c1 0 2\r\n10\r\nVALUE %s_c2 0 3\r\n100\r\nEND\r\n" % (k, k)
    # A value that lost digits MAY be space-padded (memcached pads in place).
    header, value, end = conn.call(b"get %s_max\r\n" % k).split(b"\r\n", 2)
    assert header.startswith(b"VALUE %s_max 0 " % k) and value.rstrip(b" ") == b"0" and end == b"END\r\n"


def test_deletes_of_counters_compare_their_cas_and_leave_them_gone(conn, key):
    # An 8-byte value (a counter's digits) is held as a word: a delete
    # reads no value, yet compares the item's CAS unique as before; the
    # deleted item stays gone until set again, in one pipeline or apart.
    k = key.encode()
    assert conn.call(b"ms %s 8\r\n12345678\r\n" % k) == b"HD\r\n"
    cas = int(conn.call(b"mg %s c\r\n" % k).split()[1][1:])
    assert conn.call(b"md %s C%d\r\n" % (k, cas + 1)) == b"EX\r\n"
    assert conn.call(b"incr %s 1\r\n" % k) == b"12345679\r\n"
    cas = int(conn.call(b"mg %s c\r\n" % k).split()[1][1:])
    assert conn.call(b"md %s C%d\r\n" % (k, cas)) == b"HD\r\n"
    assert conn.call(b"md %s\r\n" % k) == b"NF\r\n"
    assert conn.call(b"incr %s 1\r\n" % k) == b"NOT_FOUND\r\n"
    pipeline = b"set %s 0 0 8\r\n87654321\r\ndelete %s\r\nget %s\r\ndelete %s\r\n" % (k, k, k, k)
    pipeline += b"set %s 0 0 2\r\n10\r\nincr %s 5\r\n" % (k, k)
    assert conn.calls(pipeline, 6) == [b"STORED\r\n", b"DELETED\r\n", b"END\r\n", b"NOT_FOUND\r\n",
                                       b"STORED\r\n", b"15\r\n"]


def test_counters_and_8_byte_values_read_in_place(conn, key):
    # A read-modify-write looks at the item where the memtable holds it:
    # an 8-byte value (kept as its word, its top bits set by any byte from
    # 0x80) reads back, appends and counts as it was written; many
    # counters in one pipeline each answer their own digits (cut one
    # after another from a shard's chunk), and read back so afterwards.
    k = key.encode()
    high = bytes([0xff, 0x80, 0x7f, 0x00, 0x01, 0xfe, 0x30, 0x39])
    assert conn.call(b"set %s 0 0 8\r\n%s\r\n" % (k, high)) == b"STORED\r\n"
    assert conn.call(b"get %s\r\n" % k) == b"VALUE %s 0 8\r\n%s\r\nEND\r\n" % (k, high)
    assert conn.call(b"incr %s 1\r\n" % k).startswith(b"CLIENT_ERROR")
    assert conn.call(b"append %s 0 0 1\r\n!\r\n" % k) == b"STORED\r\n"
    assert conn.call(b"get %s\r\n" % k) == b"VALUE %s 0 9\r\n%s!\r\nEND\r\n" % (k, high)
    assert conn.call(b"set %s 0 0 8\r\n99999999\r\n" % k) == b"STORED\r\n"
    assert conn.call(b"incr %s 1\r\n" % k) == b"100000000\r\n"
    keys = [b"%s_%d" % (k, i) for i in range(600)]
    # Eight digits before and after, so that memcached keeps the length.
    counted = [10_000_000 + i * 1001 for i in range(len(keys))]
    conn.calls(b"".join(b"set %s 0 0 8\r\n%d\r\n" % (c, 10_000_000 + i * 1000) for i, c in enumerate(keys)), len(keys))
    answers = conn.calls(b"".join(b"incr %s %d\r\n" % (c, i) for i, c in enumerate(keys)), len(keys))
    assert answers == [b"%d\r\n" % n for n in counted]
    for c, n in list(zip(keys, counted))[::37]:
        assert conn.call(b"get %s\r\n" % c) == b"VALUE %s 0 8\r\n%d\r\nEND\r\n" % (c, n)


def test_pipelined_byte_by_byte(conn, key):
    # requests split at every byte are still parsed
    req = b"set %s 3 0 5\r\nhello\r\nget %s\r\n" % (key.encode(), key.encode())
    for i in range(len(req)):
        conn.send(req[i:i + 1])
        time.sleep(0.001)
    assert conn.response() == b"STORED\r\n"
    assert conn.response() == b"VALUE %s 3 5\r\nhello\r\nEND\r\n" % key.encode()


# --- meta protocol ---------------------------------------------------------------------

def test_mn(conn):
    assert conn.call(b"mn\r\n") == b"MN\r\n"


def test_ms_mg_basic(conn, key):
    k = key.encode()
    assert conn.call(b"ms %s 3\r\nabc\r\n" % k) == b"HD\r\n"
    assert conn.call(b"mg %s\r\n" % k) == b"HD\r\n"  # a hit without flags
    assert conn.call(b"mg %s v\r\n" % k) == b"VA 3\r\nabc\r\n"
    assert conn.call(b"mg %s_miss v\r\n" % k) == b"EN\r\n"
    # visible to the text protocol, and back
    assert conn.call(b"get %s\r\n" % k) == b"VALUE %s 0 3\r\nabc\r\nEND\r\n" % k
    kv(conn, key + "t", "text", flags=77)
    assert conn.call(b"mg %st v f\r\n" % k) == b"VA 4 f77\r\ntext\r\n"


def test_mg_flags(conn, key):
    k = key.encode()
    assert conn.call(b"ms %s 5 F31 T0\r\nhello\r\n" % k) == b"HD\r\n"
    cas = conn.gets(key)[2]
    head = conn.call(b"mg %s s v t f c k O123abc\r\n" % k)
    line, data = head.split(b"\r\n", 1)
    assert line.startswith(b"VA 5 ") and data == b"hello\r\n"
    assert meta_flags(line) == {"s": "5", "t": "-1", "f": "31", "c": str(cas), "k": key, "O": "123abc"}
    # without v: HD with the flags
    r = conn.call(b"mg %s f s k\r\n" % k)
    assert r.startswith(b"HD ") and meta_flags(r) == {"f": "31", "s": "5", "k": key}
    # a remaining TTL
    assert conn.call(b"ms %s_t 1 T100\r\nx\r\n" % k) == b"HD\r\n"
    t = int(meta_flags(conn.call(b"mg %s_t t\r\n" % k))["t"])
    assert 95 <= t <= 100, t


def test_mg_miss_with_key_and_opaque(conn, key):
    # memcached 1.6.18 returns O and k on EN as on hits
    r = conn.call(b"mg %s v k O77\r\n" % key.encode())
    assert r.startswith(b"EN") and meta_flags(r) == {"k": key, "O": "77"}, r


def test_mg_T_updates_ttl(conn, key):
    k = key.encode()
    assert conn.call(b"ms %s 1\r\nx\r\n" % k) == b"HD\r\n"
    assert meta_flags(conn.call(b"mg %s t\r\n" % k)) == {"t": "-1"}
    r = conn.call(b"mg %s T200 t v\r\n" % k)
    assert r.startswith(b"VA 1 ") and r.endswith(b"\r\nx\r\n")
    t = int(meta_flags(r.split(b"\r\n")[0])["t"])
    assert 195 <= t <= 200, r
    t = int(meta_flags(conn.call(b"mg %s t\r\n" % k))["t"])
    assert 195 <= t <= 200
    assert conn.call(b"mg %s T-1\r\n" % k) == b"HD\r\n"
    assert conn.call(b"mg %s v\r\n" % k) == b"EN\r\n"


def test_mg_quiet(conn, key):
    k = key.encode()
    assert conn.call(b"ms %s_1 1\r\na\r\n" % k) == b"HD\r\n"
    assert conn.call(b"ms %s_3 1\r\nc\r\n" % k) == b"HD\r\n"
    # q: misses (EN) are not answered, hits are
    req = b"".join(b"mg %s_%d v q k\r\n" % (k, i) for i in range(1, 5)) + b"mn\r\n"
    assert conn.call(req, n=3) == b"VA 1 k%s_1\r\na\r\nVA 1 k%s_3\r\nc\r\nMN\r\n" % (k, k)
    # nothing else pending
    assert conn.nothing_pending()


def test_base64_keys(conn, key):
    raw = key.encode() + b" \x00\xff\r\nbinary"
    bk = b64(raw).encode()
    r = conn.call(b"ms %s 3 b k c\r\nabc\r\n" % bk)
    assert r.startswith(b"HD ") and meta_flags(r)["k"] == bk.decode() and "b" in meta_flags(r)
    r = conn.call(b"mg %s b v k\r\n" % bk)
    assert r.split(b"\r\n")[1] == b"abc"
    f = meta_flags(r.split(b"\r\n")[0])
    assert f["k"] == bk.decode() and "b" in f
    assert conn.call(b"ma %s b N0 J5 v\r\n" % b64(key + "_n").encode()) == b"VA 1\r\n5\r\n"
    assert conn.call(b"md %s b q\r\nmg %s b v\r\nmn\r\n" % (bk, bk), n=2) == b"EN\r\nMN\r\n"
    # not base64: refused, and the data block swallowed
    assert conn.call(b"ms %s 3 b\r\nabc\r\nmn\r\n" % (b"!" + key.encode()), n=2) == (
        b"CLIENT_ERROR error decoding key\r\nMN\r\n")


def test_ms_flags(conn, key):
    k = key.encode()
    r = conn.call(b"ms %s 3 F99 T0 c k O5\r\nabc\r\n" % k)
    f = meta_flags(r)
    assert r.startswith(b"HD ") and f["k"] == key and f["O"] == "5" and set(f) == {"k", "O", "c"}
    assert int(f["c"]) == conn.gets(key)[2]
    assert conn.gets(key)[:2] == (99, b"abc")
    assert conn.call(b"ms %s 1 T100\r\nx\r\n" % k) == b"HD\r\n"
    assert 95 <= int(meta_flags(conn.call(b"mg %s t\r\n" % k))["t"]) <= 100
    # quiet: HD not answered
    assert conn.call(b"ms %s 1 q\r\ny\r\nmn\r\n" % k) == b"MN\r\n"
    assert conn.get(key) == b"y"


def test_ms_modes(conn, key):
    k = key.encode()
    # E: add
    assert conn.call(b"ms %s 2 ME\r\nab\r\n" % k) == b"HD\r\n"
    assert conn.call(b"ms %s 2 ME\r\nzz\r\n" % k) == b"NS\r\n"
    # A: append, P: prepend
    assert conn.call(b"ms %s 2 MA\r\ncd\r\n" % k) == b"HD\r\n"
    assert conn.call(b"ms %s 2 MP\r\n__\r\n" % k) == b"HD\r\n"
    assert conn.call(b"mg %s v\r\n" % k) == b"VA 6\r\n__abcd\r\n"
    assert conn.call(b"ms %s_no 2 MA\r\nab\r\n" % k) == b"NS\r\n"
    assert conn.call(b"ms %s_no 2 MP\r\nab\r\n" % k) == b"NS\r\n"
    # R: replace
    assert conn.call(b"ms %s_no 2 MR\r\nab\r\n" % k) == b"NS\r\n"
    assert conn.call(b"ms %s 1 MR\r\nr\r\n" % k) == b"HD\r\n"
    # S: set
    assert conn.call(b"ms %s 1 MS\r\ns\r\n" % k) == b"HD\r\n"
    assert conn.call(b"ms %s_s 1 MS\r\ns\r\n" % k) == b"HD\r\n"
    assert conn.call(b"mg %s v\r\nmg %s_no v\r\nmg %s_s v\r\n" % (k, k, k), n=3) == (
        b"VA 1\r\ns\r\nEN\r\nVA 1\r\ns\r\n")
    # an unknown mode; its data block is swallowed
    assert conn.call(b"ms %s 2 MZ\r\nab\r\nmn\r\n" % k, n=2) == (
        b"CLIENT_ERROR invalid mode for ms M token\r\nMN\r\n")


def test_ms_compare_cas(conn, key):
    k = key.encode()
    assert conn.call(b"ms %s 1 C123\r\na\r\n" % k) == b"NF\r\n"
    assert conn.call(b"ms %s 1\r\na\r\n" % k) == b"HD\r\n"
    cas = conn.gets(key)[2]
    assert conn.call(b"ms %s 1 C%d\r\nb\r\n" % (k, cas + 1)) == b"EX\r\n"
    r = conn.call(b"ms %s 1 C%d c\r\nc\r\n" % (k, cas))
    assert r.startswith(b"HD ") and int(meta_flags(r)["c"]) not in (cas, 0)
    assert conn.get(key) == b"c"
    # quiet: EX is still answered
    assert conn.call(b"ms %s 1 q C%d\r\nd\r\nmn\r\n" % (k, cas), n=2) == b"EX\r\nMN\r\n"


def test_ms_explicit_cas(target, conn, key):
    memcached_lacks(target, "the E flag (explicit CAS; added in 1.6.21)")
    k = key.encode()
    assert conn.call(b"ms %s 2 E777\r\nab\r\n" % k) == b"HD\r\n"
    assert conn.call(b"mg %s c\r\n" % k) == b"HD c777\r\n"
    assert conn.gets(key)[2] == 777
    assert conn.call(b"ms %s 2 C776 E900\r\ncd\r\n" % k) == b"EX\r\n"
    assert conn.call(b"ms %s 2 C777 E999\r\ncd\r\n" % k) == b"HD\r\n"
    assert conn.call(b"mg %s c v\r\n" % k) == b"VA 2 c999\r\ncd\r\n"
    assert conn.call(b"md %s C999 E1000 q\r\nmg %s\r\nmn\r\n" % (k, k), n=2) == b"EN\r\nMN\r\n"
    assert conn.call(b"ma %s_n N0 J1 E42 c v\r\n" % k) == b"VA 1 c42\r\n1\r\n"


def test_ms_invalid(conn, key):
    k = key.encode()
    # memcached 1.6.18 cannot read the size, so the data line is read as a command
    assert conn.call(b"ms %s abc\r\nxx\r\n" % k, n=2) == b"CLIENT_ERROR bad command line format\r\nERROR\r\n"
    assert conn.call(b"ms %s 2\r\nabc\r\n" % k, n=2) == b"CLIENT_ERROR bad data chunk\r\nERROR\r\n"
    # unknown and duplicate flags, a too long opaque
    assert conn.call(b"mg %s zz\r\n" % k) == b"CLIENT_ERROR invalid flag\r\n"
    assert conn.call(b"mg %s v v\r\n" % k) == b"CLIENT_ERROR duplicate flag\r\n"
    assert conn.call(b"mg %s O%s\r\n" % (k, b"1" * 33)) == b"CLIENT_ERROR opaque token too long\r\n"
    assert conn.call(b"mg\r\n") == b"ERROR\r\n"  # no key: memcached 1.6.18 answers ERROR
    assert conn.call(b"mn\r\n") == b"MN\r\n"


def test_md(conn, key):
    k = key.encode()
    assert conn.call(b"md %s\r\n" % k) == b"NF\r\n"
    r = conn.call(b"md %s k O9\r\n" % k)
    assert r.startswith(b"NF ") and meta_flags(r) == {"k": key, "O": "9"}
    assert conn.call(b"ms %s 1\r\nx\r\n" % k) == b"HD\r\n"
    cas = conn.gets(key)[2]
    assert conn.call(b"md %s C%d\r\n" % (k, cas + 1)) == b"EX\r\n"
    r = conn.call(b"md %s C%d k O1\r\n" % (k, cas))
    assert r.startswith(b"HD ") and meta_flags(r) == {"k": key, "O": "1"}
    assert conn.call(b"mg %s v\r\n" % k) == b"EN\r\n"
    # quiet: HD is not answered; memcached 1.6.18 still answers NF
    assert conn.call(b"ms %s 1\r\nx\r\n" % k) == b"HD\r\n"
    assert conn.call(b"md %s q\r\nmd %s q\r\nmn\r\n" % (k, k), n=2) == b"NF\r\nMN\r\n"
    assert conn.call(b"mg %s v\r\n" % k) == b"EN\r\n"


def test_ma(conn, key, target):
    k = key.encode()
    assert conn.call(b"ma %s\r\n" % k) == b"NF\r\n"
    assert conn.call(b"ma %s v\r\n" % k) == b"NF\r\n"
    # N autovivifies with J (default 0) and TTL N's seconds
    assert conn.call(b"ma %s N0 J13 v\r\n" % k) == b"VA 2\r\n13\r\n"
    assert conn.call(b"ma %s v\r\n" % k) == b"VA 2\r\n14\r\n"
    assert conn.call(b"ma %s\r\n" % k) == b"HD\r\n"
    assert conn.call(b"ma %s D10 v\r\n" % k) == b"VA 2\r\n25\r\n"
    # modes: I, +: incr; D, -: decr (not below 0)
    assert conn.call(b"ma %s MI D5 v\r\n" % k) == b"VA 2\r\n30\r\n"
    assert conn.call(b"ma %s M+ v\r\n" % k) == b"VA 2\r\n31\r\n"
    assert conn.call(b"ma %s MD D20 v\r\n" % k) == b"VA 2\r\n11\r\n"
    assert conn.call(b"ma %s M- D100 v\r\n" % k) == b"VA 1\r\n0\r\n"
    assert conn.call(b"ma %s MD v\r\n" % k) == b"VA 1\r\n0\r\n"
    # wraps at 2^64
    assert conn.call(b"ma %s D18446744073709551615 v\r\n" % k) == b"VA 20\r\n18446744073709551615\r\n"
    wrapped = conn.call(b"ma %s D2 v\r\n" % k)
    if not target.is_shoal and wrapped.startswith(b"CLIENT_ERROR cannot increment or decrement non-numeric value"):
        # memcached 1.6.18's own bug: after its value grew to 20 digits it
        # refuses the next increment about 1 time in 260 (77 of 20,000 tries
        # of this sequence). Shoal must always wrap.
        assert conn.call(b"ms %s 1\r\n1\r\n" % k) == b"HD\r\n"
    else:
        assert wrapped == b"VA 1\r\n1\r\n"
    # t, c, k, O
    cas = conn.gets(key)[2]
    r = conn.call(b"ma %s t c k O4 v\r\n" % k)
    line = r.split(b"\r\n")[0]
    f = meta_flags(line)
    assert r.endswith(b"\r\n2\r\n") and f["t"] == "-1" and f["k"] == key and f["O"] == "4"
    assert int(f["c"]) not in (cas, 0) and int(f["c"]) == conn.gets(key)[2]
    # N on an existing item does not reset it; J without N does not create
    assert conn.call(b"ma %s N0 J100 v\r\n" % k) == b"VA 1\r\n3\r\n"
    assert conn.call(b"ma %s_j J100 v\r\n" % k) == b"NF\r\n"
    # TTL of the autovivified item
    assert conn.call(b"ma %s_t N100 v\r\n" % k) == b"VA 1\r\n0\r\n"
    assert 95 <= int(meta_flags(conn.call(b"mg %s_t t\r\n" % k))["t"]) <= 100


def test_ma_compare_cas_and_errors(conn, key):
    k = key.encode()
    assert conn.call(b"ms %s 1\r\n5\r\n" % k) == b"HD\r\n"
    cas = conn.gets(key)[2]
    assert conn.call(b"ma %s C%d v\r\n" % (k, cas + 1)) == b"EX\r\n"
    assert conn.call(b"ma %s C%d v\r\n" % (k, cas)) == b"VA 1\r\n6\r\n"
    assert conn.call(b"ms %s_s 2\r\nxy\r\n" % k) == b"HD\r\n"
    assert conn.call(b"ma %s_s v\r\n" % k) == b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    assert conn.call(b"ma %s Mx v\r\n" % k) == b"CLIENT_ERROR invalid mode for ma M token\r\n"
    # memcached 1.6.18's answer to a delta that is not a number
    assert conn.call(b"ma %s D-1 v\r\n" % k) == b"CLIENT_ERROR invalid or duplicate flag\r\n"
    assert conn.call(b"mn\r\n") == b"MN\r\n"


def test_ma_quiet(conn, key):
    k = key.encode()
    # q: NF is answered (memcached 1.6.18), HD is not, and 1.6.18 does not answer
    # a quiet ma's VA either (protocol.txt: "noreply semantics for return codes")
    assert conn.call(b"ma %s q\r\nmn\r\n" % k, n=2) == b"NF\r\nMN\r\n"
    assert conn.call(b"ma %s N0 J7 v\r\n" % k) == b"VA 1\r\n7\r\n"
    assert conn.call(b"ma %s q\r\nma %s q v\r\nmn\r\n" % (k, k)) == b"MN\r\n"
    assert conn.call(b"mg %s v\r\n" % k) == b"VA 1\r\n9\r\n"


def test_me(conn, key):
    k = key.encode()
    assert conn.call(b"me %s\r\n" % k) == b"EN\r\n"
    assert conn.call(b"ms %s 3 T100\r\nabc\r\n" % k) == b"HD\r\n"
    assert conn.call(b"mg %s v\r\n" % k) == b"VA 3\r\nabc\r\n"
    r = conn.call(b"me %s\r\n" % k)
    assert r.startswith(b"ME %s " % k) and r.endswith(b"\r\n"), r
    fields = dict(t.split("=", 1) for t in r.decode().split()[2:])
    for f in ("exp", "la", "cas", "fetch", "cls", "size"):
        assert f in fields, (f, r)
    # memcached 1.6.18 prints the remaining TTL negated (exp=-100)
    assert 95 <= abs(int(fields["exp"])) <= 100
    assert int(fields["cas"]) == conn.gets(key)[2]
    assert fields["fetch"] == "yes"  # the mg above fetched it
    assert conn.call(b"me\r\n") == b"CLIENT_ERROR bad command line format\r\n"


def test_meta_pipelined(conn, key):
    k = key.encode()
    n = 100
    req = b"".join(b"ms %s_%d %d T0 F%d O%d\r\n%d\r\n" % (k, i, len(str(i)), i, i, i) for i in range(n))
    req += b"".join(b"mg %s_%d v f O%d\r\n" % (k, i, i) for i in range(n))
    req += b"md %s_1 O1\r\nma %s_2 v D3\r\nmg %s_1 v\r\nmn\r\n" % (k, k, k)
    replies = conn.calls(req, 2 * n + 4)
    for i in range(n):
        assert replies[i] == b"HD O%d\r\n" % i
    for i in range(n):
        r = replies[n + i]
        line, data = r.split(b"\r\n", 1)
        assert meta_flags(line) == {"f": str(i), "O": str(i)} and data == b"%d\r\n" % i
    assert replies[2 * n:] == [b"HD O1\r\n", b"VA 1\r\n5\r\n", b"EN\r\n", b"MN\r\n"]


def test_meta_quiet_sequence(conn, key):
    # a client's typical quiet batch: only failures and hits answered, mn ends it
    k = key.encode()
    req = b"".join(b"ms %s_%d 1 q\r\n%d\r\n" % (k, i, i % 10) for i in range(50))
    req += b"ms %s_0 1 q ME\r\nx\r\n" % k                      # NS: answered
    req += b"".join(b"mg %s_%d v q k\r\n" % (k, i) for i in (3, 77, 5))  # 77 misses
    req += b"md %s_9 q\r\nmd %s_99 q O99\r\n" % (k, k)     # HD: quiet; NF: answered (1.6.18)
    req += b"mn\r\n"
    assert conn.call(req, n=5) == (b"NS\r\nVA 1 k%s_3\r\n3\r\nVA 1 k%s_5\r\n5\r\nNF O99\r\nMN\r\n" % (k, k))
    assert conn.nothing_pending()
    assert conn.call(b"mg %s_9 v\r\nmg %s_49 v\r\n" % (k, k), n=2) == b"EN\r\nVA 1\r\n9\r\n"


def test_text_and_meta_interleaved(conn, key):
    k = key.encode()
    req = (b"set %s 1 0 1\r\na\r\nmg %s v f\r\nappend %s 0 0 1\r\nb\r\nms %s 1 MA\r\nc\r\n"
           b"get %s\r\nincr %s 1\r\nmn\r\n" % (k, k, k, k, k, k))
    assert conn.calls(req, 7) == [
        b"STORED\r\n", b"VA 1 f1\r\na\r\n", b"STORED\r\n", b"HD\r\n",
        b"VALUE %s 1 3\r\nabc\r\nEND\r\n" % k,
        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n", b"MN\r\n"]


# --- hints and stale items: mg h l N R, md/ms I, W X Z --------------------------------

def test_mg_hit_and_last_access(conn, key):
    k = key.encode()
    assert conn.call(b"ms %s 2 T100\r\n10\r\n" % k) == b"HD\r\n"
    r = conn.call(b"mg %s h l t v\r\n" % k)
    f = meta_flags(r.split(b"\r\n")[0])
    assert r.startswith(b"VA 2 ") and f["h"] == "0" and int(f["l"]) <= 1 and r.endswith(b"\r\n10\r\n")
    f = meta_flags(conn.call(b"mg %s h l\r\n" % k))
    assert f["h"] == "1" and int(f["l"]) <= 1


def test_mg_vivify(conn, key):
    k = key.encode()
    # the first miss creates an empty item and wins (W); later ones see Z
    r = conn.call(b"mg %s N30 v c t\r\n" % k)
    f = meta_flags(r.split(b"\r\n")[0])
    assert r.startswith(b"VA 0 ") and r.endswith(b"\r\n\r\n") and "W" in f and f["t"] == "30"
    r = conn.call(b"mg %s N30 v c t\r\n" % k)
    f = meta_flags(r.split(b"\r\n")[0])
    assert r.startswith(b"VA 0 ") and "Z" in f and "W" not in f
    # the winner fills it in
    assert conn.call(b"ms %s 3 T0\r\nnew\r\n" % k) == b"HD\r\n"
    assert conn.call(b"mg %s N30 v\r\n" % k) == b"VA 3\r\nnew\r\n"


def test_mg_recache(conn, key):
    k = key.encode()
    assert conn.call(b"ms %s 1 T10\r\nx\r\n" % k) == b"HD\r\n"
    # TTL above R's: a plain hit
    assert conn.call(b"mg %s R5 v\r\n" % k) == b"VA 1\r\nx\r\n"
    # TTL below R's: the first asker wins the recache (W), later ones see Z
    r = conn.call(b"mg %s R30 v\r\n" % k)
    assert r.startswith(b"VA 1 ") and "W" in meta_flags(r.split(b"\r\n")[0]), r
    r = conn.call(b"mg %s R30 v\r\n" % k)
    assert r.startswith(b"VA 1 ") and "Z" in meta_flags(r.split(b"\r\n")[0]), r


def test_md_invalidate_stale(conn, key):
    k = key.encode()
    assert conn.call(b"ms %s 2\r\nab\r\n" % k) == b"HD\r\n"
    cas = conn.gets(key)[2]
    # md I marks the item stale (X) and sets its TTL; the next fetch wins (W)
    assert conn.call(b"md %s I T30\r\n" % k) == b"HD\r\n"
    r = conn.call(b"mg %s v c t\r\n" % k)
    f = meta_flags(r.split(b"\r\n")[0])
    assert r.endswith(b"\r\nab\r\n") and "X" in f and "W" in f and f["t"] == "30", r
    r = conn.call(b"mg %s v c\r\n" % k)
    f = meta_flags(r.split(b"\r\n")[0])
    assert "X" in f and "Z" in f and "W" not in f, r
    new_cas = int(f["c"])
    assert new_cas != cas
    # ms I with a CAS older than the item's: stored, but still stale
    assert conn.call(b"ms %s 2 I C%d\r\nzz\r\n" % (k, new_cas - 1 if new_cas > 1 else 0)) == b"HD\r\n"
    # a plain set clears the stale state
    assert conn.call(b"ms %s 2\r\nok\r\n" % k) == b"HD\r\n"
    assert conn.call(b"mg %s v\r\n" % k) == b"VA 2\r\nok\r\n"


# --- flush_all: last in this file (it empties the shared servers) ---------------------

def test_zz_flush_all(conn, key):
    kv(conn, key, "x")
    assert conn.call(b"flush_all\r\n") == b"OK\r\n"
    assert conn.call("get %s\r\n" % key) == b"END\r\n"
    kv(conn, key, "y")  # items stored after the flush live
    assert conn.get(key) == b"y"
    conn.send(b"flush_all noreply\r\n")
    assert conn.call("get %s\r\n" % key) == b"END\r\n"
    assert conn.call(b"flush_all 0\r\n") == b"OK\r\n"


def test_zz_flush_all_delay(conn, key):
    kv(conn, key, "x")
    assert conn.call(b"flush_all 2\r\n") == b"OK\r\n"
    assert conn.get(key) == b"x"  # not yet
    deadline = time.monotonic() + 6
    while conn.get(key) is not None:
        assert time.monotonic() < deadline, "flush_all 2 did not take effect within 6 s"
        time.sleep(0.2)
    time.sleep(1.1)  # past the flush's second
    kv(conn, key, "after")
    time.sleep(1.1)
    assert conn.get(key) == b"after"

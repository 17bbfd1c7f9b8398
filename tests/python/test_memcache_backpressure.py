"""A memcached client that sends requests without reading its replies is
throttled, not buffered: the server stops reading the connection while its
answers cannot leave, so what the client manages to send stays bounded (the
kernel's socket buffers and one batch), and so does the server's memory.
Shoal only, on a node of the test's own (its memory is measured).
"""
import socket
import time

import pytest

from memcache_support import Conn, IS_CASSANDRA
from node import skip_reason, temp_node

if IS_CASSANDRA:
    pytest.skip("SHOAL_PEER=cassandra: no memcached protocol", allow_module_level=True)

VALUE_BYTES = 512 * 1024
# What the client may get into the connection before it blocks: socket
# buffers on both sides (a few MiB at most on Linux) and a batch's requests.
SENT_BYTES_MAX = 32 * 1024 * 1024
RSS_GROWTH_BYTES_MAX = 64 * 1024 * 1024


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for pid %d" % pid)


def pipeline_gets_unread(port, value_bytes, pid, rss_growth_max):
    """Pipelines `get big` without reading a reply until the server stops
    taking requests; its memory must grow by at most `rss_growth_max`."""
    before = rss_bytes(pid)
    # Each 9-byte request asks for the whole item: send until the server
    # stops taking them, never reading a reply.
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    request = b"get big\r\n" * 4096
    sent = 0
    stalled_since = None
    while True:
        try:
            sent += s.send(request)
            stalled_since = None
        except BlockingIOError:
            stalled_since = stalled_since or time.monotonic()
            if time.monotonic() - stalled_since > 2:
                break
            time.sleep(0.05)
        assert sent <= SENT_BYTES_MAX, "the server kept reading: %d bytes of requests taken" % sent
    grown = rss_bytes(pid) - before
    assert grown <= rss_growth_max, "the server buffered %d MiB of answers" % (grown >> 20)

    # It still serves others, and the throttled connection resumes when read.
    other = Conn("127.0.0.1", port)
    assert other.call(b"version\r\n").startswith(b"VERSION ")
    other.close()
    s.setblocking(True)
    s.settimeout(10)
    got = s.recv(1 << 20)
    assert got.startswith(b"VALUE big 0 %d\r\n" % value_bytes), got[:40]
    s.close()


@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_a_client_that_does_not_read_is_throttled():
    with temp_node("shoal-memcache-backpressure-", smp=1) as node:
        c = Conn("127.0.0.1", node.memcache_port)
        assert c.call(b"set big 0 0 %d\r\n%s\r\n" % (VALUE_BYTES, b"x" * VALUE_BYTES)) == b"STORED\r\n"
        c.close()
        pipeline_gets_unread(node.memcache_port, VALUE_BYTES, node.proc.pid, RSS_GROWTH_BYTES_MAX)


# Below the row cache's largest entry (a quarter of its 1 MiB segment).
CACHED_VALUE_BYTES = 200 * 1024
# A run of gets answers up to 256 at once: one copy each would be 50 MiB.
CACHED_RSS_GROWTH_BYTES_MAX = 24 * 1024 * 1024


@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_gets_of_a_large_cached_item_share_one_copy():
    """A large item in the row cache (flushed, so no memtable holds it) is
    copied out of the cache's segments once, and the pipelined gets after
    share that copy instead of each holding its own until answered."""
    with temp_node("shoal-memcache-backpressure-", smp=1) as node:
        c = Conn("127.0.0.1", node.memcache_port)
        value = b"y" * CACHED_VALUE_BYTES
        assert c.call(b"set big 0 0 %d\r\n%s\r\n" % (CACHED_VALUE_BYTES, value)) == b"STORED\r\n"
        node.api("POST", "/storage_service/keyspace_flush/memcache?cf=items")
        assert c.call(b"get big\r\n") == b"VALUE big 0 %d\r\n%s\r\nEND\r\n" % (CACHED_VALUE_BYTES, value)
        c.close()
        pipeline_gets_unread(node.memcache_port, CACHED_VALUE_BYTES, node.proc.pid, CACHED_RSS_GROWTH_BYTES_MAX)

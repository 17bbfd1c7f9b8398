"""Helpers for the memcached-protocol tests (test_memcache_*.py).

Two targets speak memcached's protocols:

    shoal       Shoal's memcache listener at SHOAL_HOST:SHOAL_MEMCACHE_PORT
                (tests/run.sh passes --memcache-port and exports it)
    memcached   the reference, Debian's memcached 1.6.18, at
                127.0.0.1:MEMCACHED_PORT (tests/run.sh starts it with
                `-U 0 -t 1 -m 64`); its tests skip when MEMCACHED_PORT is unset

`target` (a fixture, parametrized over both) gives a test its (name, host,
port); `conn(target)` opens a raw socket with a small reply parser (`Conn`).
Every test runs against both, so each expected answer is checked against the
real memcached too.
"""
import base64
import os
import socket
import time
import uuid

import pytest

SHOAL_HOST = os.environ.get("SHOAL_HOST", "127.0.0.1")
SHOAL_MEMCACHE_PORT = os.environ.get("SHOAL_MEMCACHE_PORT")
MEMCACHED_HOST = os.environ.get("MEMCACHED_HOST", "127.0.0.1")
MEMCACHED_PORT = os.environ.get("MEMCACHED_PORT")
IS_CASSANDRA = os.environ.get("SHOAL_PEER", "shoal").lower() == "cassandra"

TARGETS = ("shoal", "memcached")

TIMEOUT = float(os.environ.get("SHOAL_MEMCACHE_TIMEOUT", "10"))


def address(name):
    """(host, port) of a target, or pytest.skip when it is not available."""
    if name == "shoal":
        if IS_CASSANDRA:
            pytest.skip("SHOAL_PEER=cassandra: no memcached protocol")
        if not SHOAL_MEMCACHE_PORT:
            pytest.skip("SHOAL_MEMCACHE_PORT is not set (tests/run.sh sets it)")
        return SHOAL_HOST, int(SHOAL_MEMCACHE_PORT)
    if name == "memcached":
        if not MEMCACHED_PORT:
            pytest.skip("MEMCACHED_PORT is not set: no reference memcached "
                        "(tests/run.sh starts Debian's memcached when it can install it)")
        return MEMCACHED_HOST, int(MEMCACHED_PORT)
    raise ValueError(name)


class Target:
    def __init__(self, name):
        self.name = name
        self.host, self.port = address(name)

    @property
    def is_shoal(self):
        return self.name == "shoal"

    def connect(self, timeout=TIMEOUT):
        return Conn(self.host, self.port, timeout=timeout)

    def __repr__(self):
        return "%s(%s:%d)" % (self.name, self.host, self.port)


@pytest.fixture(params=TARGETS)
def target(request):
    return Target(request.param)


@pytest.fixture
def conn(target):
    c = target.connect()
    yield c
    c.close()


@pytest.fixture
def key(request):
    """A key prefix unique to this test run (both servers are shared by all tests)."""
    return "t%s" % uuid.uuid4().hex[:16]


def xfail_on_shoal(request, target, what):
    """Marks the running test an expected, non-strict failure on Shoal only (a
    meta flag Shoal does not implement yet): it passes once Shoal does."""
    if target.is_shoal:
        request.node.add_marker(pytest.mark.xfail(strict=False, reason="not yet implemented: " + what))


def memcached_lacks(target, what):
    """Skips on the reference when memcached 1.6.18 lacks a newer feature."""
    if target.name == "memcached":
        pytest.skip("memcached 1.6.18 lacks " + what)


def b64(s):
    if isinstance(s, str):
        s = s.encode()
    return base64.b64encode(s).decode()


class Closed(Exception):
    pass


class Conn:
    """A raw memcached-protocol connection with a buffered reader."""

    def __init__(self, host, port, timeout=TIMEOUT):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise Closed("connection closed; unread: %r" % self.buf)
        self.buf += chunk

    def line(self):
        """One line, with its \\r\\n."""
        while b"\r\n" not in self.buf:
            self._fill()
        i = self.buf.index(b"\r\n") + 2
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def response(self):
        """One complete response (bytes): a line, with its data blocks and up to
        END for get/gets/gat/gats/stats."""
        first = self.line()
        out = first
        if first.startswith(b"VA "):
            return out + self.exact(int(first.split()[1]) + 2)
        if first.startswith(b"VALUE ") or first.startswith(b"STAT ") or first.startswith(b"ITEM "):
            ln = first
            while True:
                if ln.startswith(b"VALUE "):
                    out += self.exact(int(ln.split()[3]) + 2)
                ln = self.line()
                out += ln
                if ln == b"END\r\n":
                    return out
        return out

    def call(self, data, n=1):
        """Sends data, returns the next n responses joined."""
        self.send(data)
        return b"".join(self.response() for _ in range(n))

    def calls(self, data, n):
        """Sends data, returns the next n responses as a list."""
        self.send(data)
        return [self.response() for _ in range(n)]

    def nothing_pending(self, wait=0.2):
        """True when no byte arrives within `wait` seconds."""
        if self.buf:
            return False
        self.sock.settimeout(wait)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            return True
        finally:
            self.sock.settimeout(TIMEOUT)
        self.buf += chunk
        return False

    def closed_by_peer(self, wait=TIMEOUT):
        """Reads until EOF (True) or `wait` seconds without it (False); what was
        read is kept in self.buf."""
        self.sock.settimeout(wait)
        deadline = time.monotonic() + wait
        try:
            while time.monotonic() < deadline:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True
        finally:
            self.sock.settimeout(TIMEOUT)
        return False

    # --- conveniences -----------------------------------------------------------

    def set(self, key, value, flags=0, exptime=0):
        if isinstance(value, str):
            value = value.encode()
        r = self.call(b"set %s %d %d %d\r\n%s\r\n" % (key.encode(), flags, exptime, len(value), value))
        assert r == b"STORED\r\n", r
        return r

    def gets(self, key):
        """(flags, value, cas) of a key, or None."""
        r = self.call("gets %s\r\n" % key)
        if r == b"END\r\n":
            return None
        head, rest = r.split(b"\r\n", 1)
        _, k, flags, n, cas = head.split()
        assert k.decode() == key
        return int(flags), rest[:int(n)], int(cas)

    def get(self, key):
        r = self.gets(key)
        return None if r is None else r[1]

    def stats(self, arg=""):
        r = self.call(("stats %s\r\n" % arg) if arg else "stats\r\n")
        out = {}
        for ln in r.split(b"\r\n"):
            if ln.startswith(b"STAT "):
                parts = ln.decode().split(" ", 2)
                out[parts[1]] = parts[2] if len(parts) > 2 else ""
        return out


def meta_flags(line):
    """The return flags of a meta response line: {'c': '123', 'k': 'foo', ...}
    (the first token, HD/VA/..., and VA's size excluded)."""
    toks = line.rstrip(b"\r\n").decode().split()
    if toks and toks[0] == "VA":
        toks = toks[2:]
    else:
        toks = toks[1:]
    return {t[0]: t[1:] for t in toks}


def cql_blob(key):
    if isinstance(key, str):
        key = key.encode()
    return "0x" + key.hex()


def wait_memcache(port, timeout=30):
    """A connection to the memcached protocol on 127.0.0.1:port once it answers
    `version` (a node or memcached just started)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            c = Conn("127.0.0.1", port, timeout=10)
            if c.call(b"version\r\n").startswith(b"VERSION "):
                return c
        except (OSError, Closed):
            pass
        assert time.monotonic() < deadline, "memcache port %d not answering" % port
        time.sleep(0.1)

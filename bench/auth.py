#!/usr/bin/env python3
"""CQL authentication and authorization costs, side by side in one run.

    SHOAL_BIN=target/release/shoal .venv/bin/python bench/auth.py [--rounds 3]

Two nodes run at once, each one shard (`--smp 1`, pinned to CPU 0 with its
hasher threads; the client runs on the others): node A with
`PasswordAuthenticator` and `CassandraAuthorizer`, node B with neither (the
defaults). Rounds alternate the nodes, so drift on a shared machine hits
both alike.

- Logins per second (node A): `--login-clients` threads each open
  connections and log in (STARTUP, AUTHENTICATE, AUTH_RESPONSE with a
  SASL PLAIN token, AUTH_SUCCESS) as fast as they are answered, for
  `--login-seconds`. bcrypt at cost 10 sets the pace, by design.
- Point reads per server-core-second: batches of 100 QUERY frames `SELECT v
  FROM ks.t WHERE k = <n>` over 1,000 rows, as bench/tls.py sends them; on
  A as a role that holds SELECT on the table through a granted role (so
  every read resolves the permission through the per-shard cache), on B
  with no login. The ratio A/B is the permission check's cost.
"""
import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tls import cpu_s, frame, read_frames, start  # noqa: E402


def read_one(sock):
    data = b""
    while len(data) < 9:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise SystemExit("connection closed")
        data += chunk
    _, _, _, opcode, length = struct.unpack(">BBhBI", data[:9])
    while len(data) < 9 + length:
        data += sock.recv(1 << 16)
    return opcode, data[9:9 + length]


def startup(sock):
    options = {b"CQL_VERSION": b"3.0.0"}
    body = struct.pack(">H", len(options)) + b"".join(
        struct.pack(">H", len(k)) + k + struct.pack(">H", len(v)) + v for k, v in options.items())
    sock.sendall(frame(0, 0x01, body))
    return read_one(sock)[0]


def login(port, user, password):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if startup(sock) == 0x03:
        token = b"\0" + user.encode() + b"\0" + password.encode()
        sock.sendall(frame(0, 0x0F, struct.pack(">i", len(token)) + token))
        opcode, body = read_one(sock)
        assert opcode == 0x10, body
    return sock


def query(sock, text):
    sock.sendall(frame(1, 0x07, struct.pack(">I", len(text)) + text.encode() + struct.pack(">HB", 1, 0)))
    opcode, body = read_one(sock)
    assert opcode != 0x00, body


def setup(port, user, password, roles):
    sock = login(port, user, password)
    query(sock, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    query(sock, "CREATE TABLE ks.t (k int PRIMARY KEY, v blob)")
    for k in range(1000):
        query(sock, "INSERT INTO ks.t (k, v) VALUES (%d, 0x%s)" % (k, "76" * 32))
    if roles:
        query(sock, "CREATE ROLE readers")
        query(sock, "GRANT SELECT ON KEYSPACE ks TO readers")
        query(sock, "CREATE ROLE reader WITH PASSWORD = 'r' AND LOGIN = true")
        query(sock, "GRANT readers TO reader")
    sock.close()


def reads(sock, batches, pid):
    """Batches of 100 point-read QUERY frames, written at once."""
    queries = []
    for i in range(100):
        text = b"SELECT v FROM ks.t WHERE k = %d" % ((i * 7919) % 1000)
        queries.append(frame(i, 0x07, struct.pack(">I", len(text)) + text + struct.pack(">HB", 1, 0)))
    batch = b"".join(queries)
    before = cpu_s(pid)
    for _ in range(batches):
        sock.sendall(batch)
        read_frames(sock, 100)
    return 100 * batches / max(cpu_s(pid) - before, 1e-9)


def logins(port, clients, seconds):
    done = [0] * clients
    deadline = time.monotonic() + seconds

    def client(n):
        while time.monotonic() < deadline:
            login(port, "reader", "r").close()
            done[n] += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.monotonic() - started)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--login-clients", type=int, default=8)
    parser.add_argument("--login-seconds", type=float, default=5)
    args = parser.parse_args()
    binary = os.environ.get("SHOAL_BIN", "target/release/shoal")
    with tempfile.TemporaryDirectory(prefix="shoal-bench-auth-") as dir:
        secured, a_port, _ = start(binary, dir, "a", [
            "--authenticator", "PasswordAuthenticator", "--authorizer", "CassandraAuthorizer"])
        open_node, b_port, _ = start(binary, dir, "b", [])
        try:
            setup(a_port, "cassandra", "cassandra", roles=True)
            setup(b_port, "", "", roles=False)
            a_sock = login(a_port, "reader", "r")
            b_sock = login(b_port, "", "")
            reads(a_sock, 20, secured.pid)
            reads(b_sock, 20, open_node.pid)
            on, off = [], []
            for _ in range(args.rounds):
                on.append(reads(a_sock, args.batches, secured.pid))
                off.append(reads(b_sock, args.batches, open_node.pid))
            rate = logins(a_port, args.login_clients, args.login_seconds)
        finally:
            secured.kill()
            open_node.kill()
    print("point reads / server-core-second: CassandraAuthorizer %.0f, AllowAll %.0f (median of %d rounds)"
          % (statistics.median(on), statistics.median(off), args.rounds))
    print("ratio authorizer/allow-all: %.3f (per round: %s)" % (
        statistics.median(on) / statistics.median(off),
        ", ".join("%.3f" % (a / b) for a, b in zip(on, off))))
    print("logins per second, one shard (%d clients, %.0f s): %.1f" % (args.login_clients, args.login_seconds, rate))


if __name__ == "__main__":
    main()

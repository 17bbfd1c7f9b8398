#!/usr/bin/env python3
"""TLS against plaintext, side by side: CQL point reads and memcached `mg`
pipelined, per server-core-second.

    SHOAL_BIN=target/release/shoal .venv/bin/python bench/tls.py [--rounds 3]

Two nodes run at once, each one shard (`--smp 1`, pinned to CPU 0; the
client runs on the others): node A serves CQL on a plaintext port and, with
`client_encryption_options`, on a TLS port of its own
(`native_transport_port_ssl`), and memcached in plaintext; node B serves
memcached over TLS (`--memcache-ssl`). Rounds alternate plaintext and TLS,
so drift on a shared machine hits both alike.

- CQL: batches of 100 QUERY frames `SELECT v FROM ks.t WHERE k = <n>`
  (consistency ONE) over 1,000 rows (memtable-resident), written at once
  on one connection and their answers read, `--cql-batches` per round.
  (The Python driver is not the client: over TLS it hands the server one
  request per read and write where in plaintext it batches them, so the
  server's cost per read tripled from wake-ups alone, crypto being under
  1% of its profile; a client that writes alike in both modes measures
  what TLS costs.)
- memcached: batches of 100 `mg <key> v` on one connection (one write of
  the batch, then its answers read), over 1,000 items of 32 bytes,
  `--mg-batches` per round.

A figure is requests served per second of the server's CPU (utime + stime
of its process, /proc/<pid>/stat), so it does not depend on how fast the
Python client is; the TLS/plain ratio is the point (goal >= 0.85). The
handshake is outside the timed window: connections are opened first. TLS
is 1.3 with AES-256-GCM (rustls's first choice; openssl would pick the
same), certificates ECDSA P-256 made by the openssl CLI.
"""
import argparse
import os
import shutil
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from node import free_ports  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
VALUE = b"v" * 32


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def certificates(dir):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
            "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=bench-ca", cwd=dir)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "node.key",
            "-out", "node.csr", "-subj", "/CN=127.0.0.1", cwd=dir)
    with open(os.path.join(dir, "ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
            "node.pem", "-days", "2", "-extfile", "ext", cwd=dir)
    return [os.path.join(dir, name) for name in ("ca.pem", "node.pem", "node.key")]


def start(binary, dir, name, args):
    ports = free_ports(5)
    cql, aware, api, memcache, storage = ports
    log = open(os.path.join(dir, name + ".log"), "w")
    proc = subprocess.Popen(
        ["taskset", "-c", "0", binary, "--smp", "1", "--memory", "1G", "--workdir", os.path.join(dir, name),
         "--native-transport-port", str(cql), "--native-shard-aware-transport-port", str(aware),
         "--api-port", str(api), "--memcache-port", str(memcache), "--storage-port", str(storage), *args],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log.name) as f:
            if "ready" in f.read():
                return proc, cql, memcache
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("%s did not start: see %s" % (name, log.name))


def frame(stream, opcode, body):
    return struct.pack(">BBhBI", 4, 0, stream, opcode, len(body)) + body


def read_frames(sock, count):
    """Reads `count` response frames; fails on an ERROR."""
    data = b""
    for _ in range(count):
        while len(data) < 9:
            data += sock.recv(1 << 20)
        _, _, _, opcode, length = struct.unpack(">BBhBI", data[:9])
        while len(data) < 9 + length:
            data += sock.recv(1 << 20)
        assert opcode != 0x00, data[9:9 + length]
        data = data[9 + length:]


def cql_connect(sock):
    options = {b"CQL_VERSION": b"3.0.0"}
    body = struct.pack(">H", len(options)) + b"".join(
        struct.pack(">H", len(k)) + k + struct.pack(">H", len(v)) + v for k, v in options.items())
    sock.sendall(frame(0, 0x01, body))
    read_frames(sock, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def cql_round(sock, batches, pid):
    """Batches of 100 QUERY frames (point reads, ONE), written at once."""
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


def mg_round(sock, batches, pid):
    batch = b"".join(b"mg k%d v\r\n" % ((i * 7919) % 1000) for i in range(100))
    answer_bytes = 100 * len(b"VA 32\r\n" + VALUE + b"\r\n")
    before = cpu_s(pid)
    for _ in range(batches):
        sock.sendall(batch)
        got = 0
        while got < answer_bytes:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise SystemExit("the memcached connection closed")
            got += len(chunk)
        assert got == answer_bytes
    return 100 * batches / max(cpu_s(pid) - before, 1e-9)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cql-batches", type=int, default=1500)
    parser.add_argument("--mg-batches", type=int, default=6000)
    opts = parser.parse_args()
    binary = os.environ.get("SHOAL_BIN", "target/release/shoal")
    dir = tempfile.mkdtemp(prefix="shoal-bench-tls-")
    procs = []
    try:
        ca, cert, key = certificates(dir)
        ssl_port, aware_ssl_port = free_ports(2)
        yaml = os.path.join(dir, "a.yaml")
        with open(yaml, "w") as f:
            f.write("client_encryption_options:\n  enabled: true\n  certificate: %s\n  keyfile: %s\n"
                    "native_transport_port_ssl: %d\nnative_shard_aware_transport_port_ssl: %d\n"
                    % (cert, key, ssl_port, aware_ssl_port))
        a, a_cql, a_memcache = start(binary, dir, "a", ["--options-file", yaml])
        procs.append(a)
        b, _, b_memcache = start(binary, dir, "b", ["--memcache-ssl", "--memcache-ssl-chain-cert", cert,
                                                    "--memcache-ssl-key", key])
        procs.append(b)
        context = ssl.create_default_context(cafile=ca)

        from cassandra.cluster import Cluster
        cluster = Cluster(["127.0.0.1"], port=a_cql, protocol_version=4)
        s = cluster.connect()
        s.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
        insert = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
        for k in range(1000):
            s.execute(insert, (k, VALUE.decode()))
        cluster.shutdown()
        cql = {"plain": cql_connect(socket.create_connection(("127.0.0.1", a_cql))),
               "tls": cql_connect(context.wrap_socket(socket.create_connection(("127.0.0.1", ssl_port)),
                                                      server_hostname="127.0.0.1"))}

        sockets = {"plain": socket.create_connection(("127.0.0.1", a_memcache)),
                   "tls": context.wrap_socket(socket.create_connection(("127.0.0.1", b_memcache)),
                                              server_hostname="127.0.0.1")}
        for name, sock in sockets.items():
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(b"".join(b"ms k%d 32 q\r\n%s\r\n" % (i, VALUE) for i in range(1000)) + b"mn\r\n")
            data = b""
            while not data.endswith(b"MN\r\n"):
                data += sock.recv(65536)
        pids = {"plain": a.pid, "tls": b.pid}

        figures = {("cql", "plain"): [], ("cql", "tls"): [], ("mg", "plain"): [], ("mg", "tls"): []}
        # A warm-up round of each, not counted.
        for name in ("plain", "tls"):
            cql_round(cql[name], opts.cql_batches // 4, a.pid)
            mg_round(sockets[name], opts.mg_batches // 4, pids[name])
        for _ in range(opts.rounds):
            for name in ("plain", "tls"):
                figures[("cql", name)].append(cql_round(cql[name], opts.cql_batches, a.pid))
                figures[("mg", name)].append(mg_round(sockets[name], opts.mg_batches, pids[name]))
        print("| workload | plaintext /server-core-s | TLS /server-core-s | TLS / plaintext |")
        print("| --- | ---: | ---: | ---: |")
        for workload, label in (("cql", "CQL point reads, 100 QUERY frames per batch"),
                                ("mg", "memcached mg, 100 per batch")):
            plain = statistics.median(figures[(workload, "plain")])
            tls = statistics.median(figures[(workload, "tls")])
            print("| %s | %.0f | %.0f | %.2f |" % (label, plain, tls, tls / plain))
        print("\nrounds (each figure a median of %d): %s" % (
            opts.rounds, {"%s/%s" % k: [round(x) for x in v] for k, v in figures.items()}))
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        shutil.rmtree(dir, ignore_errors=True)


if __name__ == "__main__":
    main()

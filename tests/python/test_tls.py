"""TLS on every port and memcached's ASCII authentication, with real clients.

Certificates are made at test time with the `openssl` CLI (tests/run.sh
installs it when missing): a CA, and leaves it signs naming the loopback
addresses. Each test runs nodes of its own (node.py) with the options in a
YAML file, as a user would write them (docs/security.md):

- CQL: `client_encryption_options` on ports of their own
  (`native_transport_port_ssl`), the native ports staying plaintext: the
  Python driver with an `ssl_context`, cqlsh `--ssl`, `openssl s_client`
  against both TLS ports; on the native port itself with
  `require_client_auth`: a client certificate of the trusted CA gets in, a
  client without one or of another CA does not; with
  `PasswordAuthenticator` too, the driver's PlainTextAuthProvider over its
  ssl_context and cqlsh `--ssl -u -p`.
- Bad input: a client that stalls in the handshake is cut off after
  `tls_handshake_timeout_in_ms`; garbage, a plaintext CQL client and a
  truncated ClientHello on a TLS port are refused and the node serves on.
- Reload: new certificate files are in use a moment later, no restart.
- memcached: pymemcache over TLS (`tls_context`) logging in with ASCII
  authentication, `openssl s_client` doing the same; ASCII
  authentication (`--memcache-auth-file`) with pymemcache and raw sockets,
  its refusal texts compared byte for byte with Debian's `memcached -Y`
  when it is installed.
- Internode: three nodes with `internode_encryption: all` and one killed
  with -9 while QUORUM writes (16 in flight) go on: none fails, every
  acknowledged row is read back at QUORUM; the plain storage port is closed.
"""
import contextlib
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster, NoHostAvailable
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement

from node import SHOAL_BIN, free_ports, skip_reason, start_cluster, temp_node

pytestmark = pytest.mark.skipif(
    skip_reason() is not None or shutil.which("openssl") is None,
    reason=skip_reason() or "needs the openssl CLI (tests/run.sh installs it)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


class Pki:
    """A CA in `dir` and the leaves it signs."""

    def __init__(self, dir, name="ca"):
        self.dir = dir
        self.name = name
        self.ca = os.path.join(dir, name + ".pem")
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/CN=%s" % name, cwd=dir)

    def leaf(self, name, ips=("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4")):
        """(certificate, key) paths of a leaf for `ips`, CN `name`."""
        with open(os.path.join(self.dir, name + ".ext"), "w") as f:
            f.write("subjectAltName=" + ",".join("IP:" + ip for ip in ips) + "\n")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=%s" % name, cwd=self.dir)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", self.name + ".pem", "-CAkey", self.name + ".key",
                "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext", cwd=self.dir)
        return os.path.join(self.dir, name + ".pem"), os.path.join(self.dir, name + ".key")


@pytest.fixture
def pki():
    dir = tempfile.mkdtemp(prefix="shoal-tls-")
    try:
        yield Pki(dir)
    finally:
        shutil.rmtree(dir, ignore_errors=True)


def options_file(dir, text):
    path = os.path.join(dir, "shoal-%d.yaml" % time.monotonic_ns())
    with open(path, "w") as f:
        f.write(text)
    return path


def client_context(pki, cert=None):
    context = ssl.create_default_context(cafile=pki.ca)
    context.check_hostname = False
    if cert:
        context.load_cert_chain(*cert)
    return context


def s_client(port, pki, host="127.0.0.1", send=b"", cert=None):
    """`openssl s_client` to a port: (exit code, what it printed)."""
    args = ["openssl", "s_client", "-connect", "%s:%d" % (host, port), "-CAfile", pki.ca, "-verify_return_error"]
    if send:
        # Wait for the server to answer and hang up (the requests end with quit).
        args.append("-ign_eof")
    if cert:
        args += ["-cert", cert[0], "-key", cert[1]]
    out = subprocess.run(args, input=send, capture_output=True, timeout=30)
    return out.returncode, (out.stdout + out.stderr).decode(errors="replace")


def wait_for(what, check, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


def closed_within(port, send, seconds):
    """Sends `send` to a port and returns how long until the server hung up."""
    with socket.create_connection(("127.0.0.1", port), timeout=seconds + 5) as s:
        started = time.monotonic()
        if send:
            s.sendall(send)
        try:
            while s.recv(65536):
                pass
        except OSError:
            pass
        return time.monotonic() - started


def no_panic(node):
    with open(node.log_path, errors="replace") as f:
        log = f.read()
    assert "panicked" not in log, log[-3000:]


def test_cql_over_tls_on_its_own_ports_with_the_driver_cqlsh_and_s_client(pki):
    cert = pki.leaf("node")
    ssl_port, aware_ssl_port = free_ports(2)
    yaml = options_file(pki.dir, """
client_encryption_options:
  enabled: true
  certificate: %s
  keyfile: %s
native_transport_port_ssl: %d
native_shard_aware_transport_port_ssl: %d
""" % (cert[0], cert[1], ssl_port, aware_ssl_port))
    with temp_node("shoal-tls-cql-", args=["--options-file", yaml]) as node:
        # The native port stays plaintext.
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
        session.execute("INSERT INTO ks.t (k, v) VALUES (1, 'clear')")
        cluster.shutdown()
        # The driver over TLS.
        cluster = Cluster(["127.0.0.1"], port=ssl_port, protocol_version=4, ssl_context=client_context(pki))
        session = cluster.connect()
        session.execute("INSERT INTO ks.t (k, v) VALUES (2, 'secret')")
        rows = sorted(session.execute("SELECT k, v FROM ks.t"))
        assert [(r.k, r.v) for r in rows] == [(1, "clear"), (2, "secret")]
        cluster.shutdown()
        # openssl s_client checks the chain against the CA on both TLS ports.
        for port in (ssl_port, aware_ssl_port):
            code, out = s_client(port, pki)
            assert code == 0 and "Verify return code: 0 (ok)" in out, out
        # cqlsh --ssl, validating against the CA.
        cqlsh = os.path.join(ROOT, ".venv", "bin", "cqlsh")
        if os.path.exists(cqlsh):
            env = dict(os.environ, SSL_CERTFILE=pki.ca, SSL_VALIDATE="true", HOME=pki.dir)
            out = subprocess.run([cqlsh, "127.0.0.1", str(ssl_port), "--ssl", "-e", "SELECT v FROM ks.t WHERE k = 2"],
                                 capture_output=True, text=True, timeout=60, env=env)
            assert out.returncode == 0 and "secret" in out.stdout, out.stdout + out.stderr
        no_panic(node)


def test_cql_tls_on_the_native_port_requires_a_client_certificate_of_the_trusted_ca(pki):
    cert = pki.leaf("node")
    client = pki.leaf("client")
    stranger = Pki(pki.dir, "stranger").leaf("intruder")
    yaml = options_file(pki.dir, """
client_encryption_options:
  enabled: true
  certificate: %s
  keyfile: %s
  truststore: %s
  require_client_auth: true
""" % (cert[0], cert[1], pki.ca))
    with temp_node("shoal-tls-mtls-", args=["--options-file", yaml], start=False) as node:
        start_tls_node(node)
        cluster = Cluster(["127.0.0.1"], port=node.cql_port, protocol_version=4,
                          ssl_context=client_context(pki, cert=client))
        assert cluster.connect().execute("SELECT release_version FROM system.local").one()
        cluster.shutdown()
        for who in (None, stranger):
            cluster = Cluster(["127.0.0.1"], port=node.cql_port, protocol_version=4,
                              ssl_context=client_context(pki, cert=who), connect_timeout=3)
            with pytest.raises(Exception):
                cluster.connect()
            cluster.shutdown()
        # Both the native port and the shard-aware one speak TLS.
        code, out = s_client(node.ports[1], pki, cert=client)
        assert code == 0, out
        no_panic(node)


def test_cql_logins_over_tls_with_the_driver_and_cqlsh(pki):
    """PasswordAuthenticator behind TLS on the native port: the driver with
    PlainTextAuthProvider and an ssl_context, cqlsh with -u/-p and --ssl."""
    cert = pki.leaf("node")
    yaml = options_file(pki.dir, """
authenticator: PasswordAuthenticator
client_encryption_options:
  enabled: true
  certificate: %s
  keyfile: %s
""" % cert)
    with temp_node("shoal-tls-auth-", args=["--options-file", yaml], start=False) as node:
        start_tls_node(node)
        login = PlainTextAuthProvider(username="cassandra", password="cassandra")
        cluster = Cluster(["127.0.0.1"], port=node.cql_port, protocol_version=4, ssl_context=client_context(pki),
                          auth_provider=login)
        session = cluster.connect()
        session.execute("CREATE ROLE alice WITH PASSWORD = 'a' AND LOGIN = true")
        assert session.execute("SELECT release_version FROM system.local").one()
        cluster.shutdown()
        # system.clients shows each connection's TLS version, suite and role
        # (ScyllaDB's test_system_clients_stores_tls_info, TLS 1.2 forced).
        tls12 = client_context(pki)
        tls12.minimum_version = tls12.maximum_version = ssl.TLSVersion.TLSv1_2
        cluster = Cluster(["127.0.0.1"], port=node.cql_port, protocol_version=4, ssl_context=tls12,
                          auth_provider=login)
        tls12_session = cluster.connect()
        expected = {normalize_cipher(c["name"]) for c in ssl.create_default_context().get_ciphers()}

        def listed_as_tls12():
            # The first cluster's connections (TLS 1.3) may take a moment to go.
            rows = list(tls12_session.execute("SELECT * FROM system.clients"))
            return rows and all(r.ssl_enabled and r.ssl_protocol == "TLS1.2"
                                and normalize_cipher(r.ssl_cipher_suite) in expected
                                and r.username == "cassandra" and r.connection_stage == "READY" for r in rows)
        deadline = time.monotonic() + 10
        while not listed_as_tls12():
            assert time.monotonic() < deadline, list(tls12_session.execute("SELECT * FROM system.clients"))
            time.sleep(0.1)
        cluster.shutdown()
        wrong = Cluster(["127.0.0.1"], port=node.cql_port, protocol_version=4, ssl_context=client_context(pki),
                        auth_provider=PlainTextAuthProvider(username="alice", password="wrong"), connect_timeout=5)
        with pytest.raises(NoHostAvailable, match="Provided username alice and/or password are incorrect"):
            wrong.connect()
        wrong.shutdown()
        cqlsh = os.path.join(ROOT, ".venv", "bin", "cqlsh")
        if os.path.exists(cqlsh):
            env = dict(os.environ, SSL_CERTFILE=pki.ca, SSL_VALIDATE="true", HOME=pki.dir)
            out = subprocess.run([cqlsh, "127.0.0.1", str(node.cql_port), "--ssl", "-u", "alice", "-p", "a",
                                  "-e", "SELECT role FROM system_auth.roles"],
                                 capture_output=True, text=True, timeout=60, env=env)
            assert out.returncode == 0 and "alice" in out.stdout, out.stdout + out.stderr
        no_panic(node)


def normalize_cipher(name):
    """A suite's name as OpenSSL (Python) and IANA (rustls) both come to:
    `TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384` and `ECDHE-RSA-AES256-GCM-SHA384`
    alike become the latter."""
    name = name[len("TLS_"):] if name.startswith("TLS_") else name
    name = name.replace("_WITH_", "-").replace("_", "-")
    return re.sub(r"([A-Z]+)-(\d+)", r"\1\2", name)


def start_tls_node(node, timeout=30):
    """Starts a node whose CQL port speaks TLS: ready once it accepts TCP."""
    node.starts += 1
    node.log = open(node.log_path, "ab")
    node.proc = subprocess.Popen(node.command(), stdout=node.log, stderr=subprocess.STDOUT)
    wait_for("the node's CQL port", lambda: port_open(node.address, node.cql_port), timeout)


def port_open(host, port):
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def test_stalled_handshakes_and_garbage_are_cut_off_and_certificates_reload(pki):
    cert = pki.leaf("first")
    yaml = options_file(pki.dir, """
client_encryption_options:
  enabled: true
  certificate: %s
  keyfile: %s
tls_handshake_timeout_in_ms: 1000
memcache_ssl: true
memcache_ssl_chain_cert: %s
memcache_ssl_key: %s
""" % (cert[0], cert[1], cert[0], cert[1]))
    with temp_node("shoal-tls-bad-", args=["--options-file", yaml], start=False) as node:
        start_tls_node(node)
        for port in (node.cql_port, node.memcache_port):
            # Silent, and a ClientHello cut short: cut off after ~1 s.
            assert 0.8 < closed_within(port, b"", 10) < 5
            assert 0.8 < closed_within(port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 10) < 5
            # Garbage, and a plaintext client: refused at once.
            assert closed_within(port, bytes(range(256)) * 300, 10) < 1
            assert closed_within(port, b"\x04\x00\x00\x00\x05\x00\x00\x00\x00", 10) < 1
            assert closed_within(port, b"get k\r\n", 10) < 1
        code, out = s_client(node.cql_port, pki)
        assert code == 0 and "CN = first" in out, out
        # New files in place: in use within a few seconds, no restart.
        new_cert, new_key = pki.leaf("second")
        shutil.copy(new_key, cert[1])
        shutil.copy(new_cert, cert[0])
        wait_for("the new certificate", lambda: "CN = second" in s_client(node.cql_port, pki)[1], 15)
        wait_for("the new memcached certificate", lambda: "CN = second" in s_client(node.memcache_port, pki)[1], 15)
        # A broken file keeps the certificate in use.
        with open(cert[0], "w") as f:
            f.write("not a certificate")
        time.sleep(2.5)
        code, out = s_client(node.cql_port, pki)
        assert code == 0 and "CN = second" in out, out
        assert node.alive()
        no_panic(node)


def test_memcached_over_tls_with_pymemcache_and_s_client(pki):
    """TLS and ASCII authentication together, as a deployment runs them
    (the password would otherwise cross the network in clear)."""
    from pymemcache.client.base import Client
    from pymemcache.exceptions import MemcacheClientError
    cert = pki.leaf("node")
    users = os.path.join(pki.dir, "users")
    with open(users, "w") as f:
        f.write("alice:secret\n")
    args = ["--memcache-ssl", "--memcache-ssl-chain-cert", cert[0], "--memcache-ssl-key", cert[1],
            "--memcache-auth-file", users]
    with temp_node("shoal-tls-mc-", args=args) as node:
        client = Client(("127.0.0.1", node.memcache_port), tls_context=client_context(pki), timeout=10)
        with pytest.raises(MemcacheClientError, match="unauthenticated"):
            client.get("tls-key")
        client.close()
        client = Client(("127.0.0.1", node.memcache_port), tls_context=client_context(pki), timeout=10)
        with pytest.raises(MemcacheClientError, match="authentication failure"):
            client.set("auth", b"alice wrong", noreply=False)
        assert client.set("auth", b"alice secret", noreply=False)
        assert client.set("tls-key", b"over tls")
        assert client.get("tls-key") == b"over tls"
        # Pipelined meta gets over one TLS connection.
        many = {"k%d" % i: b"v%d" % i for i in range(200)}
        client.set_many(many)
        assert client.get_many(list(many)) == many
        client.close()
        code, out = s_client(node.memcache_port, pki,
                             send=b"set auth 0 0 12\r\nalice secret\r\nget tls-key\r\nquit\r\n")
        assert code == 0 and "VALUE tls-key 0 8" in out and "over tls" in out, out
        # The same item through CQL, which speaks plaintext here.
        cluster, session = node.session()
        row = session.execute("SELECT value FROM memcache.items WHERE key = textAsBlob('tls-key')").one()
        assert row is not None
        cluster.shutdown()
        no_panic(node)


# What a connection sends before and while authenticating, and what
# memcached 1.6 answers (checked against `memcached -Y` below when present).
AUTH_TRANSCRIPT = [
    (b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"version\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"set auth 0 0 11\r\nalice wrong\r\n", b"CLIENT_ERROR authentication failure\r\n"),
    (b"set auth 0 0 5\r\nalice\r\n", b"CLIENT_ERROR bad authentication token format\r\n"),
    (b"set auth 0 0 12\r\nalice secret\r\n", b"STORED\r\n"),
    (b"set k 0 0 1\r\nv\r\n", b"STORED\r\n"),
    (b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n"),
]


def run_transcript(port, transcript, pipelined):
    """What a server answers to `transcript`, sent at once or one request at a time."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        if pipelined:
            s.sendall(b"".join(request for request, _ in transcript))
        data, expected = b"", 0
        for request, answer in transcript:
            if not pipelined:
                s.sendall(request)
            expected += len(answer)
            while len(data) < expected:
                chunk = s.recv(65536)
                if not chunk:
                    return data
                data += chunk
        return data


@contextlib.contextmanager
def reference_memcached(auth_file):
    """Debian's memcached with `-Y auth_file`, or None when not installed."""
    binary = shutil.which("memcached")
    if binary is None:
        yield None
        return
    port = free_ports(1)[0]
    user = ["-u", "root"] if os.geteuid() == 0 else []
    proc = subprocess.Popen([binary, "-p", str(port), "-U", "0", "-l", "127.0.0.1", "-Y", auth_file, *user],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("memcached -Y", lambda: port_open("127.0.0.1", port), 10)
        yield port
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_memcached_ascii_authentication_answers_as_memcached(pki):
    from pymemcache.client.base import Client
    from pymemcache.exceptions import MemcacheClientError
    users = os.path.join(pki.dir, "users")
    with open(users, "w") as f:
        f.write("alice:secret\nbob:b:o:b\n")
    expected = b"".join(answer for _, answer in AUTH_TRANSCRIPT)
    with temp_node("shoal-mc-auth-", args=["--memcache-auth-file", users]) as node, \
            reference_memcached(users) as memcached:
        for pipelined in (False, True):
            assert run_transcript(node.memcache_port, AUTH_TRANSCRIPT, pipelined) == expected
        # memcached 1.6.18 drops the answers before the login when they come
        # in one packet with it (it answers only `STORED` and `END` here), so
        # the reference is asked one request at a time.
        if memcached is not None:
            assert run_transcript(memcached, AUTH_TRANSCRIPT, False) == expected
        # pymemcache authenticates with the `set` memcached documents (the
        # answer comes even with noreply, as from memcached: wait for it).
        client = Client(("127.0.0.1", node.memcache_port), timeout=10)
        with pytest.raises(MemcacheClientError, match="unauthenticated"):
            client.get("k")
        client.close()
        client = Client(("127.0.0.1", node.memcache_port), timeout=10)
        assert client.set("auth", b"bob b:o:b", noreply=False)
        assert client.get("k") == b"v"
        client.close()
        # The file is read again when it changes: a new user, no restart.
        with open(users, "a") as f:
            f.write("carol:c\n")

        def carol_gets_in():
            c = Client(("127.0.0.1", node.memcache_port), timeout=10)
            try:
                return c.set("auth", b"carol c", noreply=False)
            except MemcacheClientError:
                return False
            finally:
                c.close()
        wait_for("carol's login", carol_gets_in, 15)
        no_panic(node)


def test_three_nodes_with_internode_tls_ride_out_a_kill_under_quorum_writes(pki):
    cert = pki.leaf("node")
    ssl_storage_port = free_ports(1)[0]
    yaml = options_file(pki.dir, """
server_encryption_options:
  internode_encryption: all
  certificate: %s
  keyfile: %s
  truststore: %s
  require_client_auth: true
""" % (cert[0], cert[1], pki.ca))
    with contextlib.ExitStack() as stack:
        nodes = start_cluster(stack, "shoal-tls-cluster-",
                              args=["--options-file", yaml, "--ssl-storage-port", str(ssl_storage_port)])
        for n in nodes:
            # `all`: the plain storage port is not open; the TLS one is.
            assert not port_open(n.address, n.storage_port)
            code, out = s_client(ssl_storage_port, pki, host=n.address, cert=pki.leaf("probe-" + n.address))
            assert code == 0, out
        # Nodes 1 and 2 coordinate; node 3 is a replica of every write and dies mid-load.
        cluster = Cluster([nodes[0].address], port=nodes[0].cql_port, protocol_version=4,
                          load_balancing_policy=WhiteListRoundRobinPolicy([n.address for n in nodes[:2]]))
        session = cluster.connect()
        session.execute("CREATE KEYSPACE rf3 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        session.execute("CREATE TABLE rf3.t (k int PRIMARY KEY, v int)")
        insert = session.prepare("INSERT INTO rf3.t (k, v) VALUES (?, ?)")
        insert.consistency_level = CL.QUORUM
        written, failures, stop = [], [], threading.Event()

        def load():
            # 16 writes in flight at a time, until told to stop.
            k = 0
            while not stop.is_set():
                futures = [(k + i, session.execute_async(insert, (k + i, k + i))) for i in range(16)]
                for key, future in futures:
                    try:
                        future.result()
                        written.append(key)
                    except Exception as e:
                        failures.append(repr(e))
                k += 16
        writer = threading.Thread(target=load)
        writer.start()
        try:
            wait_for("writes before the kill", lambda: len(written) >= 500, 60)
            nodes[2].kill()
            killed_at = len(written)
            wait_for("writes after the kill", lambda: len(written) >= killed_at + 1000, 60)
        finally:
            stop.set()
            writer.join(timeout=60)
        assert failures == [], failures[:5]
        select = SimpleStatement("SELECT count(*) FROM rf3.t", consistency_level=CL.QUORUM)
        assert session.execute(select).one()[0] == len(written)
        cluster.shutdown()
        for n in nodes:
            with open(n.log_path, errors="replace") as f:
                log = f.read()
            assert "internode messaging (TLS, internode_encryption All)" in log
            assert "panicked" not in log

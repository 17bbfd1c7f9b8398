"""A Shoal node of a test's own: started from SHOAL_BIN, killed with SIGKILL, restarted.

Tests that must kill and restart a server (test_restart.py, test_crash.py) run
their own node on fresh loopback ports with a fresh workdir, so they never
disturb the server tests/run.sh shares between the other tests. A Node keeps
its ports and its workdir across restarts; every start appends to one
server.log in that workdir. A node listens on `address` (127.0.0.1 unless
given: a test of several nodes gives each its own loopback address), every
port its own, the storage port included; its HTTP API (which binds
127.0.0.1 unless told) listens on that address too.
"""
import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile

SHOAL_BIN = os.environ.get("SHOAL_BIN")


def skip_reason():
    """Why a test that needs its own node cannot run here, or None when it can."""
    if not SHOAL_BIN or os.environ.get("SHOAL_PEER") == "cassandra":
        return "needs SHOAL_BIN (a shoal binary to start and kill)"
    return None


def free_port():
    return free_ports(1)[0]


def free_ports(n):
    """n distinct free loopback ports: all bound at once, so no two are the
    same (ports taken one at a time may repeat)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Node:
    """One server process at a time on fixed ports, data in WORKDIR/data.

    `args` are extra server flags (e.g. ["--commitlog-sync", "batch"]), passed
    on every start.
    """

    def __init__(self, workdir, args=(), smp=2, address="127.0.0.1"):
        self.workdir = workdir
        self.args = list(args)
        self.smp = smp
        self.address = address
        self.ports = free_ports(5)
        self.proc = None
        self.log = None
        self.starts = 0

    @property
    def cql_port(self):
        return self.ports[0]

    @property
    def memcache_port(self):
        return self.ports[3]

    @property
    def storage_port(self):
        return self.ports[4]

    @property
    def log_path(self):
        return os.path.join(self.workdir, "server.log")

    def command(self):
        cql, aware, api, memcache, storage = self.ports
        return [SHOAL_BIN, "--workdir", os.path.join(self.workdir, "data"), "--smp", str(self.smp),
                "--native-transport-port", str(cql), "--native-shard-aware-transport-port", str(aware),
                "--api-port", str(api), "--memcache-port", str(memcache), "--storage-port", str(storage),
                "--listen-address", self.address, "--api-address", self.address] + self.args

    def start(self, timeout=30):
        """Starts the server; returns once it answers a CQL OPTIONS request."""
        assert not self.alive(), "the node is already running"
        self.starts += 1
        cmd = self.command()
        self.log = open(self.log_path, "ab")
        self.log.write(("\n=== start %d: %s\n" % (self.starts, " ".join(cmd))).encode())
        self.log.flush()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # A real OPTIONS round trip: right after a kill -9 the old
            # process's listener may still accept for a few milliseconds.
            try:
                with socket.create_connection((self.address, self.cql_port), timeout=1) as s:
                    s.settimeout(1)
                    s.sendall(struct.pack(">BBhBI", 4, 0, 0, 0x05, 0))
                    if len(s.recv(9)) == 9:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                self.log.close()
                raise AssertionError("server exited during startup (status %s); server.log ends with:\n%s"
                                     % (self.proc.returncode, self.log_tail()))
            time.sleep(0.1)
        self.kill()
        raise AssertionError("server did not start within %g s; server.log ends with:\n%s"
                             % (timeout, self.log_tail()))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    @property
    def api_port(self):
        return self.ports[2]

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Sends `sig` (SIGTERM or SIGINT: a clean stop) and waits for the
        process to end; returns its exit status."""
        assert self.alive(), "the node is not running"
        self.proc.send_signal(sig)
        status = self.proc.wait(timeout=timeout)
        self.log.close()
        return status

    def last_start_log(self):
        """server.log from the latest start on."""
        text = open(self.log_path, errors="replace").read()
        return text[text.rfind("\n=== start "):]

    def api(self, method, path):
        """One request to the node's HTTP API; the body of its 200 answer."""
        import urllib.request
        request = urllib.request.Request("http://%s:%d%s" % (self.address, self.api_port, path), method=method)
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.read().decode()

    def kill(self):
        """kill -9, and wait for the process to be gone."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        if self.log is not None:
            self.log.close()

    def log_tail(self, lines=40):
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")
        except OSError as e:
            return "(no server.log: %s)" % e

    def cluster(self, request_timeout=None, **kwargs):
        """A Cluster for this node (protocol v4); request_timeout sets the default profile's."""
        if request_timeout is not None:
            profile = ExecutionProfile(request_timeout=request_timeout)
            kwargs.setdefault("execution_profiles", {EXEC_PROFILE_DEFAULT: profile})
        # Without TCP_NODELAY the driver's requests over 4 KiB wait on
        # delayed ACKs (~40 ms each).
        kwargs.setdefault("sockopts", [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        return Cluster([self.address], port=self.cql_port, protocol_version=4, **kwargs)

    def session(self):
        cluster = self.cluster()
        return cluster, cluster.connect()

    def nodetool(self, *args):
        """Runs `shoal nodetool` against this node; its stdout (asserts exit 0)."""
        out = subprocess.run([SHOAL_BIN, "nodetool", "--host", self.address, "--api-port", str(self.ports[2]), *args],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def metrics(self):
        """The node's /metrics text."""
        import urllib.request
        with urllib.request.urlopen("http://%s:%d/metrics" % (self.address, self.ports[2]), timeout=10) as r:
            return r.read().decode()


@contextlib.contextmanager
def temp_node(prefix, args=(), smp=2, start=True, address="127.0.0.1"):
    """A Node in a fresh temporary workdir; killed and removed afterwards.

    Set `node.keep_workdir = True` to keep the workdir (data and server.log),
    e.g. after a failure; SHOAL_KEEP_RESTART_LOG=1 prints server.log at the end.
    """
    workdir = tempfile.mkdtemp(prefix=prefix)
    node = Node(workdir, args=args, smp=smp, address=address)
    node.keep_workdir = False
    try:
        if start:
            node.start()
        yield node
    finally:
        node.kill()
        if os.environ.get("SHOAL_KEEP_RESTART_LOG"):
            print(open(node.log_path, errors="replace").read())
        if node.keep_workdir:
            print("kept the node's workdir (data and server.log): %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


CLUSTER_ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")


def start_cluster(stack, prefix, args=(), addresses=CLUSTER_ADDRESSES):
    """Nodes on `addresses`, each seeding all, started in order on `stack`
    (a contextlib.ExitStack that kills and removes them); the failure
    detector's timeout is 2 s so deaths are seen quickly."""
    nodes = [stack.enter_context(temp_node(prefix, start=False, address=a)) for a in addresses]
    seeds = ",".join("%s:%d" % (n.address, n.storage_port) for n in nodes)
    for n in nodes:
        n.args = ["--seeds", seeds, "--memory", "512M", "--failure-detector-timeout-in-ms", "2000", *args]
        n.start()
    return nodes

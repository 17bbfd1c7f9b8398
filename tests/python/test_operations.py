"""Operating a node as operators operate ScyllaDB (issue 30): clean stops,
logs, log levels, --help and --version.

- SIGTERM (and SIGINT) drain the node and exit 0 with a log line; what was
  written before is there after the restart, which replays no commitlog
  (the drain flushed everything and left the commitlog empty).
- `nodetool drain`: the node stops serving clients, flushes, says DRAINED,
  and keeps running until stopped; a SIGTERM then exits at once.
- Logs written to a pipe or a file carry no ANSI escape codes;
  `--log-format json` writes one JSON object per line;
  `--logger-log-level` sets a module's level at start and
  `nodetool setlogginglevel` while the node runs.
- On three nodes: a node stopped with SIGTERM is DOWN for the others (and
  for a driver connected to another node, by STATUS_CHANGE) within a
  fraction of the failure detector's 20 s, while it still serves; a
  rolling restart of the three under QUORUM load fails no request.

Every node here is the test's own (fresh ports and workdir); nothing is
left running.
"""
import contextlib
import json
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
from cassandra.policies import DCAwareRoundRobinPolicy, HostStateListener, TokenAwarePolicy

from node import CLUSTER_ADDRESSES, SHOAL_BIN, skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

ROWS = 300
NO_REPLAY = re.compile(r"replayed 0 commitlog segment\(s\), 0 entries")


def wait_for(what, check, timeout=30, step=0.05):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "%s: not within %g s" % (what, timeout)
        time.sleep(step)


def fill(node):
    """Writes ROWS rows (acknowledged at once: periodic commitlog, not yet
    synced) and a memcached item."""
    cluster, session = node.session()
    try:
        session.execute("CREATE KEYSPACE ops WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE ops.t (k int PRIMARY KEY, v text)")
        insert = session.prepare("INSERT INTO ops.t (k, v) VALUES (?, ?)")
        for k in range(ROWS):
            session.execute(insert, (k, "v%d" % k))
    finally:
        cluster.shutdown()
    with socket.create_connection((node.address, node.memcache_port), timeout=5) as s:
        s.sendall(b"set kept 0 0 5\r\nhello\r\n")
        assert s.recv(100) == b"STORED\r\n"


def check_filled(node):
    cluster, session = node.session()
    try:
        rows = {r.k: r.v for r in session.execute("SELECT k, v FROM ops.t")}
        assert rows == {k: "v%d" % k for k in range(ROWS)}
    finally:
        cluster.shutdown()
    with socket.create_connection((node.address, node.memcache_port), timeout=5) as s:
        s.sendall(b"get kept\r\n")
        assert s.recv(100) == b"VALUE kept 0 5\r\nhello\r\nEND\r\n"


def commitlog_files(node):
    directory = os.path.join(node.workdir, "data", "commitlog")
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def assert_no_replay(node):
    log = node.last_start_log()
    assert len(NO_REPLAY.findall(log)) == node.smp, "a shard replayed its commitlog:\n%s" % log


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_drains_and_exits_0_and_the_restart_replays_nothing(sig):
    with temp_node("shoal-ops-signal-") as node:
        fill(node)
        started = time.monotonic()
        assert node.stop(sig) == 0, node.log_tail()
        took = time.monotonic() - started
        log = node.last_start_log()
        assert "stopping (%s received)" % signal.Signals(sig).name in log
        assert re.search(r"stopped cleanly in \d+ ms", log), log
        # A node alone tells nobody and waits out only its grace (2 s).
        assert took < 15, "the stop took %.1f s" % took
        assert commitlog_files(node) == [], "the drain leaves the commitlog empty"
        node.start()
        assert_no_replay(node)
        check_filled(node)


def test_nodetool_drain_stops_clients_flushes_and_a_sigterm_then_exits_at_once():
    with temp_node("shoal-ops-drain-") as node:
        fill(node)
        cluster, session = node.session()
        out = node.nodetool("drain")
        assert out.strip() == "drained"
        assert node.api("GET", "/storage_service/operation_mode").strip() == '"DRAINED"'
        assert node.alive(), "a drained node keeps running until it is stopped"
        # The open connection was closed and the port refuses new ones.
        with pytest.raises(OSError):
            socket.create_connection((node.address, node.cql_port), timeout=2).close()
        with pytest.raises(OSError):
            socket.create_connection((node.address, node.memcache_port), timeout=2).close()
        cluster.shutdown()
        assert commitlog_files(node) == []
        # The API still answers: nodetool works on a drained node.
        assert "shoal_" in node.metrics()
        started = time.monotonic()
        assert node.stop() == 0
        assert time.monotonic() - started < 3, "already drained: the stop is immediate"
        node.start()
        assert_no_replay(node)
        check_filled(node)


def test_logs_to_a_pipe_are_plain_text_and_json_logs_parse():
    with temp_node("shoal-ops-logs-") as node:
        # server.log is a file (tests/python/node.py): not a terminal.
        with node.cluster() as cluster:
            cluster.connect().execute("SELECT * FROM system.local")
        log = open(node.log_path, "rb").read()
        assert b"\x1b[" not in log, "escape codes in a log written to a file"
        assert b"ready" in log
    args = ["--log-format", "json", "--logger-log-level", "shoal_runtime::net=debug"]
    with temp_node("shoal-ops-json-", args=args) as node:
        with node.cluster() as cluster:
            cluster.connect().execute("SELECT * FROM system.local")
        node.stop()
        lines = [line for line in open(node.log_path).read().splitlines()
                 if line and not line.startswith("=== start")]
        events = [json.loads(line) for line in lines]
        assert all({"timestamp", "level", "message", "target"} <= set(e) for e in events), events[:3]
        assert any(e["message"] == "ready" and e["level"] == "INFO" for e in events)
        assert any(e["message"].startswith("stopped cleanly") for e in events)
        # --logger-log-level: the debug lines of that module, and no other's.
        debug = [e for e in events if e["level"] == "DEBUG"]
        assert debug and all(e["target"].startswith("shoal_runtime::net") for e in debug), debug[:3]


def placement_lines(node):
    """The debug lines runtime::net writes for each connection it places."""
    return len(re.findall(r"connection from .* placed on shard", open(node.log_path, errors="replace").read()))


def connect_and_close(node):
    with socket.create_connection((node.address, node.cql_port), timeout=5) as s:
        s.sendall(b"\x04\x00\x00\x00\x05\x00\x00\x00\x00")  # OPTIONS
        s.recv(100)


def test_setlogginglevel_changes_a_modules_level_while_the_node_runs():
    with temp_node("shoal-ops-levels-") as node:
        connect_and_close(node)
        assert placement_lines(node) == 0, "debug is off by default"
        assert node.nodetool("setlogginglevel", "shoal_runtime::net", "debug").strip() == "logging level set"
        levels = json.loads(node.nodetool("getlogginglevels"))
        assert levels == {"default": "info", "modules": {"shoal_runtime::net": "debug"}}
        connect_and_close(node)
        wait_for("the debug line", lambda: placement_lines(node) == 1, timeout=5)
        node.nodetool("setlogginglevel")
        assert json.loads(node.nodetool("getlogginglevels"))["modules"] == {}
        connect_and_close(node)
        time.sleep(0.3)
        assert placement_lines(node) == 1, "back to info"
        bad = subprocess.run([SHOAL_BIN, "nodetool", "--host", node.address, "--api-port", str(node.api_port),
                              "setlogginglevel", "shoal_runtime", "loud"], capture_output=True, text=True)
        assert bad.returncode != 0 and "invalid log level 'loud'" in bad.stderr


def test_help_is_grouped_and_narrow_and_version_names_the_commit():
    help_text = subprocess.run([SHOAL_BIN, "--help"], capture_output=True, text=True, check=True).stdout
    for heading in ("Network:", "Cluster:", "Storage:", "Shards and memory:", "memcached:", "Logging:"):
        assert "\n%s\n" % heading in help_text
    assert max(len(line) for line in help_text.splitlines()) <= 100
    version = subprocess.run([SHOAL_BIN, "--version"], capture_output=True, text=True, check=True).stdout
    assert re.fullmatch(r"shoal \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}|unknown)\)\n", version), version


class Downs(HostStateListener):
    """When the driver marked each host down."""

    def __init__(self):
        self.at = {}

    def on_down(self, host):
        self.at.setdefault(host.address, time.monotonic())

    def on_up(self, host):
        pass

    def on_add(self, host):
        pass

    def on_remove(self, host):
        pass


class EventListener:
    """A bare CQL v4 connection REGISTERed for STATUS_CHANGE: what a
    driver's control connection hears, with no driver policy between."""

    def __init__(self, node):
        self.sock = socket.create_connection((node.address, node.cql_port), timeout=10)
        self.request(0x01, self.string_map({"CQL_VERSION": "3.0.0"}))
        assert self.read_frame()[0] == 0x02, "READY"
        self.request(0x0B, struct.pack(">H", 1) + self.string("STATUS_CHANGE"))
        assert self.read_frame()[0] == 0x02, "READY"

    @staticmethod
    def string(text):
        return struct.pack(">H", len(text)) + text.encode()

    def string_map(self, entries):
        return struct.pack(">H", len(entries)) + b"".join(self.string(k) + self.string(v) for k, v in entries.items())

    def request(self, opcode, body):
        self.sock.sendall(struct.pack(">BBhBI", 4, 0, 1, opcode, len(body)) + body)

    def read_exactly(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the connection closed"
            data += chunk
        return data

    def read_frame(self):
        _, _, _, opcode, length = struct.unpack(">BBhBI", self.read_exactly(9))
        return opcode, self.read_exactly(length)

    def next_status(self, timeout):
        """The next STATUS_CHANGE: (change, address)."""
        self.sock.settimeout(timeout)
        while True:
            opcode, body = self.read_frame()
            if opcode != 0x0C:
                continue
            strings, at = [], 0
            for _ in range(2):
                (n,) = struct.unpack_from(">H", body, at)
                strings.append(body[at + 2:at + 2 + n].decode())
                at += 2 + n
            if strings[0] != "STATUS_CHANGE":
                continue
            size = body[at]
            return strings[1], socket.inet_ntop(socket.AF_INET if size == 4 else socket.AF_INET6,
                                                body[at + 1:at + 1 + size])

    def close(self):
        self.sock.close()


def start_three(stack, grace_ms):
    """Three nodes with the failure detector's default timeout (20 s)."""
    nodes = [stack.enter_context(temp_node("shoal-ops-cluster-", start=False, address=a)) for a in CLUSTER_ADDRESSES]
    seeds = ",".join("%s:%d" % (n.address, n.storage_port) for n in nodes)
    for n in nodes:
        n.args = ["--seeds", seeds, "--memory", "512M", "--shutdown-announce-in-ms", str(grace_ms)]
        n.start()
    return nodes


def live(node):
    try:
        return sorted(json.loads(node.api("GET", "/gossiper/endpoint/live")))
    except OSError:
        return []


class Load:
    """QUORUM writes and reads of RF=3 data from a thread, every failure kept."""

    def __init__(self, session):
        self.insert = session.prepare("INSERT INTO ops.rf3 (k, v) VALUES (?, ?)")
        self.select = session.prepare("SELECT v FROM ops.rf3 WHERE k = ?")
        for statement in (self.insert, self.select):
            statement.consistency_level = CL.QUORUM
            statement.is_idempotent = True
        self.session = session
        self.acknowledged, self.failures, self.wrong = [], [], []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        k = 0
        while not self.stopping.is_set():
            try:
                self.session.execute(self.insert, (k, k))
                self.acknowledged.append(k)
                row = self.session.execute(self.select, (k,)).one()
                if row is None or row.v != k:
                    self.wrong.append((k, row))
            except Exception as e:  # noqa: BLE001 - every failure counts
                self.failures.append((time.monotonic(), repr(e)))
            k += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join(timeout=30)


def test_sigterm_is_seen_down_at_once_and_a_rolling_restart_under_quorum_load_fails_nothing():
    grace_ms = 2000
    with contextlib.ExitStack() as stack:
        nodes = start_three(stack, grace_ms)
        addresses = sorted(n.address for n in nodes)
        wait_for("every node sees the others", lambda: all(live(n) == addresses for n in nodes))

        session = nodes[0].cluster().connect()
        session.execute("CREATE KEYSPACE ops WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        session.execute("CREATE TABLE ops.rf3 (k int PRIMARY KEY, v int)")
        session.cluster.shutdown()
        # What a driver's control connection on the first node hears, on
        # the wire; and a driver with connections to every node.
        events = EventListener(nodes[0])
        stack.callback(events.close)
        downs = Downs()
        observer = nodes[0].cluster()
        stack.callback(observer.shutdown)
        observer.register_listener(downs)
        observer.connect()
        wait_for("the driver is connected to every node",
                 lambda: sorted(h.address for h in observer.metadata.all_hosts() if h.is_up) == addresses)

        stopped = nodes[2]
        sent = time.monotonic()
        stopped.proc.send_signal(signal.SIGTERM)
        wait_for("the peers see it down", lambda: stopped.address not in live(nodes[0]), timeout=10, step=0.01)
        peers_saw = time.monotonic() - sent
        assert events.next_status(timeout=10) == ("DOWN", stopped.address)
        event_at = time.monotonic() - sent
        assert stopped.alive(), "seen down while it still serves (its grace), not by its death"
        wait_for("the driver marks it down", lambda: stopped.address in downs.at, timeout=10, step=0.01)
        driver_saw = downs.at[stopped.address] - sent
        assert stopped.proc.wait(timeout=30) == 0
        exited = time.monotonic() - sent
        print("\nSIGTERM -> peers mark it down %.0f ms, STATUS_CHANGE DOWN on another node %.0f ms, the Python "
              "driver marks it down %.0f ms, the process exits %.0f ms"
              % (peers_saw * 1000, event_at * 1000, driver_saw * 1000, exited * 1000))
        assert peers_saw < 1.0 and event_at < 1.0, "much less than the failure detector's 20 s"
        # The Python driver ignores DOWN for a host it holds connections
        # to; it lets go when the node closes them, after the grace.
        assert driver_saw < grace_ms / 1000 + 3
        stopped.log.close()
        stopped.start()
        assert_no_replay(stopped)
        wait_for("every node sees the others again", lambda: all(live(n) == addresses for n in nodes))

        # The rolling restart, under QUORUM load from a token-aware driver
        # with its default retry policy.
        driver = Cluster([nodes[0].address], port=nodes[0].cql_port, protocol_version=4,
                         execution_profiles={EXEC_PROFILE_DEFAULT: ExecutionProfile(
                             load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
                             request_timeout=10)})
        # Every node has its own CQL port: the driver finds the others (and
        # their ports) in system.peers_v2.
        stack.callback(driver.shutdown)
        load_session = driver.connect()

        def driver_sees_all_up():
            return sorted(h.address for h in driver.metadata.all_hosts() if h.is_up) == addresses

        wait_for("the driver sees every node up", driver_sees_all_up)
        with Load(load_session) as load:
            time.sleep(1)
            for node in nodes:
                before = len(load.acknowledged)
                assert node.stop() == 0, node.log_tail()
                node.start()
                assert_no_replay(node)
                wait_for("every node sees %s up" % node.address, lambda: all(live(n) == addresses for n in nodes))
                wait_for("the driver sees %s up" % node.address, driver_sees_all_up)
                assert len(load.acknowledged) > before, "the load went on"
            time.sleep(1)
        print("rolling restart: %d writes and reads acknowledged, %d failed"
              % (len(load.acknowledged), len(load.failures)))
        assert load.failures == [], load.failures[:5]
        assert load.wrong == [], load.wrong[:5]
        assert len(load.acknowledged) > 100

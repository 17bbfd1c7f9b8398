"""The systems under test: Shoal and its peers, memcached and Apache Cassandra.

Each system knows how to install itself (or say why it cannot), report its
version, start one server pinned to the server CPU with one thread/shard, and
stop it again. Every server is started in its own session (so a Ctrl-C aimed
at the harness does not kill it behind our back) and compare.py stops it in a
`finally`.

Which protocols a system speaks is the `protocols` set of its class. A
workload runs on a system only when the system speaks the workload's protocol;
otherwise its column reads "—". Shoal serves CQL and, on `--memcache-port`,
memcached's text and meta protocols.

Ports are deliberately not the defaults, so that a run does not collide with
another node on the machine; only one server runs at a time.
"""
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

from .node import port_open, tail, taskset

CQL_PORT = 9242
SHARD_AWARE_PORT = 19242
API_PORT = 10300
STORAGE_PORT = 7300
MEMCACHE_PORT = 11411
CASSANDRA_STORAGE_PORT = 7300
CASSANDRA_JMX_PORT = 7399

SHOAL_MEMORY = "2G"
MEMCACHED_MB = 1024
CASSANDRA_HEAP = os.environ.get("CASSANDRA_HEAP", "1G")
CASSANDRA_VERSION = os.environ.get("CASSANDRA_VERSION", "5.0.9")

START_TIMEOUT_S = 60


class Unavailable(Exception):
    """A system cannot be installed or started; str(e) is the reason for the report."""


@dataclass
class Context:
    """What the systems need from the run: paths, pinning, dry-run and logging."""
    root: str                 # repository root
    shoal_bin: str            # the shoal server binary
    stress_bin: str           # the binary whose `stress` subcommand is the load generator
    tmp: str                  # scratch dir of this run: data dirs and server logs
    server_cpu: str | None    # CPU list for taskset -c, None: no pinning
    loader_cpu: str | None
    dry_run: bool = False
    cassandra_install_timeout: int = 300
    log: callable = print
    started: list = field(default_factory=list)   # systems with a live server


def _first_line(text):
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


class System:
    """One server kind. Subclasses fill in the commands."""
    name = ""          # key in the workload table and in file names
    label = ""         # as printed in the report
    protocols = frozenset()

    def __init__(self, ctx):
        self.ctx = ctx
        self.proc = None
        self.populated = set()   # populations loaded into the running server

    def port(self, protocol):
        raise NotImplementedError

    def install(self):
        """Returns None when usable, else the reason it is not (for the report)."""
        return None

    def version(self):
        return "?"

    def describe(self):
        """The start command or settings, for the report."""
        return ""

    def start(self):
        raise NotImplementedError

    def stop(self):
        raise NotImplementedError

    def pid(self):
        """The running server's process id (for CPU accounting), None when not known."""
        return self.proc.pid if self.proc is not None else None

    # Shared by the systems started as a direct child process.
    def _spawn(self, cmd, ports):
        for p in ports:
            if port_open(p):
                raise Unavailable(f"port {p} is already in use")
        log_path = os.path.join(self.ctx.tmp, f"{self.name}.log")
        self.ctx.log(f"[{self.name}] start: {' '.join(cmd)}")
        if self.ctx.dry_run:
            self.ctx.started.append(self)
            return
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.ctx.started.append(self)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.proc = None
                raise Unavailable(f"exited during startup (see {log_path}): "
                                  + tail(log_path, 3).strip().replace("\n", " | "))
            if all(port_open(p) for p in ports):
                self.ctx.log(f"[{self.name}] up (pid {self.proc.pid})")
                return
            time.sleep(0.1)
        self.stop()
        raise Unavailable(f"not listening after {START_TIMEOUT_S}s (see {log_path})")

    def _kill(self):
        self.populated = set()
        if self in self.ctx.started:
            self.ctx.started.remove(self)
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                self.ctx.log(f"[{self.name}] still alive after SIGTERM; SIGKILL")
                proc.kill()
                proc.wait(10)
        self.ctx.log(f"[{self.name}] stopped (exit {proc.returncode})")


class Shoal(System):
    name = "shoal"
    label = "Shoal"
    protocols = frozenset({"cql", "memcache"})

    def port(self, protocol):
        return {"cql": CQL_PORT, "memcache": MEMCACHE_PORT}[protocol]

    def install(self):
        if self.ctx.dry_run or os.access(self.ctx.shoal_bin, os.X_OK):
            return None
        return f"{self.ctx.shoal_bin} missing (cargo build --release -p shoal)"

    def version(self):
        def git(*args):
            r = subprocess.run(["git", *args], cwd=self.ctx.root, capture_output=True, text=True)
            return r.stdout.strip()
        rev = git("rev-parse", "--short", "HEAD") or "?"
        dirty = git("status", "--porcelain", "--untracked-files=no")
        return f"git {rev}{' + uncommitted changes' if dirty else ''}"

    def _workdir(self):
        return os.path.join(self.ctx.tmp, "shoal-data")

    def _cmd(self):
        return [*taskset(self.ctx.server_cpu), self.ctx.shoal_bin, "--smp", "1",
                "--workdir", self._workdir(), "--memory", SHOAL_MEMORY,
                "--native-transport-port", str(CQL_PORT),
                "--native-shard-aware-transport-port", str(SHARD_AWARE_PORT),
                "--api-port", str(API_PORT), "--memcache-port", str(MEMCACHE_PORT),
                "--storage-port", str(STORAGE_PORT),
                # The default, spelled out: acknowledged at once, fdatasync every 10 s.
                "--commitlog-sync", "periodic"]

    def describe(self):
        return " ".join(self._cmd()).replace(self.ctx.tmp, "<tmp>").replace(self.ctx.root + "/", "")

    def start(self):
        shutil.rmtree(self._workdir(), ignore_errors=True)
        self._spawn(self._cmd(), [self.port(p) for p in sorted(self.protocols)])

    def stop(self):
        self._kill()
        shutil.rmtree(self._workdir(), ignore_errors=True)


class Memcached(System):
    name = "memcached"
    label = "memcached"
    protocols = frozenset({"memcache"})

    def port(self, protocol):
        return MEMCACHE_PORT

    def _bin(self):
        return shutil.which("memcached") or "/usr/bin/memcached"

    def install(self):
        if self.ctx.dry_run or os.access(self._bin(), os.X_OK):
            return None
        self.ctx.log("[memcached] not found; apt-get install -y memcached")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for cmds in ([["apt-get", "install", "-y", "memcached"]],
                     [["apt-get", "update"], ["apt-get", "install", "-y", "memcached"]]):
            try:
                if all(subprocess.run(c, env=env, capture_output=True, timeout=600).returncode == 0
                       for c in cmds) and os.access(self._bin(), os.X_OK):
                    return None
            except (OSError, subprocess.TimeoutExpired):
                pass
        return "not installed: apt-get install memcached failed"

    def version(self):
        try:
            r = subprocess.run([self._bin(), "-V"], capture_output=True, text=True, timeout=10)
            return _first_line(r.stdout) or "?"
        except OSError:
            return "?"

    def _cmd(self):
        cmd = [*taskset(self.ctx.server_cpu), self._bin(), "-t", "1", "-U", "0",
               "-m", str(MEMCACHED_MB), "-p", str(MEMCACHE_PORT), "-l", "127.0.0.1"]
        if os.geteuid() == 0:
            cmd += ["-u", "root"]    # memcached refuses to run as root without -u
        return cmd

    def describe(self):
        return " ".join(self._cmd())

    def start(self):
        self._spawn(self._cmd(), [MEMCACHE_PORT])

    def stop(self):
        self._kill()


class Cassandra(System):
    """Apache Cassandra through scripts/cassandra.sh (install|start|stop), which
    pins the JVM with `taskset -c $CASSANDRA_TASKSET`."""
    name = "cassandra"
    label = "Cassandra"
    protocols = frozenset({"cql"})

    def port(self, protocol):
        return CQL_PORT

    def _script(self, *args, timeout):
        env = dict(os.environ, CASSANDRA_VERSION=CASSANDRA_VERSION, CASSANDRA_HEAP=CASSANDRA_HEAP,
                   CASSANDRA_STORAGE_PORT=str(CASSANDRA_STORAGE_PORT),
                   CASSANDRA_JMX_PORT=str(CASSANDRA_JMX_PORT),
                   CASSANDRA_START_TIMEOUT=os.environ.get("CASSANDRA_START_TIMEOUT", "180"))
        if self.ctx.server_cpu is not None:
            env["CASSANDRA_TASKSET"] = self.ctx.server_cpu
        cmd = ["bash", os.path.join(self.ctx.root, "scripts", "cassandra.sh"), *args]
        self.ctx.log(f"[cassandra] {' '.join(cmd[1:])}")
        if self.ctx.dry_run:
            return subprocess.CompletedProcess(cmd, 0, "", "")
        log_path = os.path.join(self.ctx.tmp, "cassandra.log")
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            r = subprocess.CompletedProcess(cmd, 124, e.stdout or "", (e.stderr or "")
                                            + f"\ntimed out after {timeout}s")
            r.stdout = r.stdout.decode(errors="replace") if isinstance(r.stdout, bytes) else r.stdout
            r.stderr = r.stderr.decode(errors="replace") if isinstance(r.stderr, bytes) else r.stderr
        with open(log_path, "a") as log:
            log.write(f"$ {' '.join(cmd)}\n{r.stdout}{r.stderr}\n(exit {r.returncode})\n")
        return r

    def install(self):
        r = self._script("install", timeout=self.ctx.cassandra_install_timeout)
        if r.returncode == 0:
            return None
        err = r.stderr or ""
        if "Maven Central" in err and "cannot be resolved" in err or "mvn could not fetch" in err:
            return "not installed: Maven Central unreachable (scripts/cassandra.sh install)"
        if "timed out" in err:
            return f"not installed: scripts/cassandra.sh install timed out after " \
                   f"{self.ctx.cassandra_install_timeout}s"
        last = [line for line in err.splitlines() if line.strip()]
        return "not installed: " + (last[-1].replace("cassandra.sh: ", "") if last else "install failed")

    def version(self):
        return f"Apache Cassandra {CASSANDRA_VERSION} (heap {CASSANDRA_HEAP})"

    def _dir(self):
        return os.path.join(self.ctx.tmp, "cassandra-data")

    def pid(self):
        # scripts/cassandra.sh start records the JVM's pid (the `exec`ed subshell's).
        try:
            with open(os.path.join(self._dir(), "cassandra.pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def describe(self):
        pin = f"CASSANDRA_TASKSET={self.ctx.server_cpu} " if self.ctx.server_cpu is not None else ""
        return (f"{pin}CASSANDRA_HEAP={CASSANDRA_HEAP} scripts/cassandra.sh start {CQL_PORT} <tmp> "
                f"(storage port {CASSANDRA_STORAGE_PORT}, JMX {CASSANDRA_JMX_PORT})")

    def start(self):
        for p in (CQL_PORT, CASSANDRA_STORAGE_PORT, CASSANDRA_JMX_PORT):
            if not self.ctx.dry_run and port_open(p):
                raise Unavailable(f"port {p} is already in use")
        shutil.rmtree(self._dir(), ignore_errors=True)
        self.ctx.started.append(self)
        r = self._script("start", str(CQL_PORT), self._dir(), timeout=240)
        if r.returncode != 0:
            self.stop()
            raise Unavailable("did not start: " + " | ".join(
                line for line in (r.stderr or "").splitlines()[-3:] if line.strip()))

    def stop(self):
        self.populated = set()
        if self in self.ctx.started:
            self.ctx.started.remove(self)
            self._script("stop", self._dir(), timeout=90)
        shutil.rmtree(self._dir(), ignore_errors=True)


# Report order: Shoal first, then the peers.
SYSTEM_CLASSES = (Shoal, Memcached, Cassandra)


def make_systems(ctx):
    return {cls.name: cls(ctx) for cls in SYSTEM_CLASSES}

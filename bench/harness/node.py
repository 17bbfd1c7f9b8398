"""Servers started on free loopback ports, and what is read from them while they run.

Used by bench/density.py and bench/cache_paths.py (bench/compare.py keeps its
fixed ports in systems.py). Every server binds 127.0.0.1 only, runs in its own
session pinned with `taskset -c CPU`, and is stopped by the caller (the classes
are context managers; stop() is idempotent). Nothing here deletes a directory
it was not given.

  free_ports(n)         n distinct free loopback ports
  Metrics / scrape()    Shoal's Prometheus text at /metrics, parsed
  memcache_stats()      the memcached `stats` command (works on Shoal's memcache port too)
  ShoalNode             `shoal --smp N ...` on a workdir, restartable on the same workdir
  MemcachedNode         Debian's memcached (installed with apt-get when missing)
  proc_cpu_s/rss/io     /proc readings of a server process
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from .cpu import TICK_S, process_ticks

START_TIMEOUT_S = 120     # a restart replays the commitlog before it listens


def _err(msg):
    print(msg, file=sys.stderr, flush=True)


class ServerError(Exception):
    """A server could not be started, or died."""


def free_ports(n):
    """n distinct free loopback ports (all bound at once, so they differ)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_open(port, host="127.0.0.1"):
    try:
        socket.create_connection((host, port), timeout=0.5).close()
        return True
    except OSError:
        return False


def taskset(cpu):
    return ["taskset", "-c", str(cpu)] if cpu is not None else []


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# ---- /proc ----

def proc_cpu_s(pid):
    """utime + stime of a process (all threads) in seconds; None if unreadable."""
    t = process_ticks(pid)
    return t * TICK_S if t is not None else None


def proc_rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def proc_io(pid):
    """/proc/<pid>/io as a dict (read_bytes: bytes the process made the block layer fetch,
    i.e. page-cache misses; syscr: read syscalls). {} if unreadable."""
    try:
        with open(f"/proc/{pid}/io") as f:
            return {k: int(v) for k, v in (line.split(":") for line in f if ":" in line)}
    except (OSError, ValueError):
        return {}


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


# ---- Prometheus text ----

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Metrics:
    """One scrape: samples [(name, {label: value}, float)] and the families declared."""

    def __init__(self, text):
        self.samples, self.families = [], set()
        for line in text.splitlines():
            if line.startswith("# TYPE ") or line.startswith("# HELP "):
                parts = line.split()
                if len(parts) >= 3:
                    self.families.add(parts[2])
                continue
            if not line or line.startswith("#"):
                continue
            m = _SAMPLE.match(line)
            if not m:
                continue
            name, labels, value = m.groups()
            try:
                v = float(value)
            except ValueError:
                continue
            self.samples.append((name, dict(_LABEL.findall(labels or "")), v))
            self.families.add(name)

    def has(self, name):
        """Whether the family is exposed at all (declared, or has a sample)."""
        return name in self.families

    def sum(self, name, **want):
        """Sum of the samples of `name` whose labels include `want`; None when the family is
        not exposed, 0.0 when it is but no sample matches (e.g. a counter not yet touched)."""
        if not self.has(name):
            return None
        return sum(v for n, labels, v in self.samples
                   if n == name and all(labels.get(k) == str(x) for k, x in want.items()))

    def by_label(self, name, label, **want):
        """{value of `label`: summed sample} of `name` (e.g. shoal_memory_used_bytes by kind)."""
        out = {}
        for n, labels, v in self.samples:
            if n == name and all(labels.get(k) == str(x) for k, x in want.items()):
                out[labels.get(label, "")] = out.get(labels.get(label, ""), 0.0) + v
        return out


def scrape(api_port, timeout=10):
    with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/metrics", timeout=timeout) as r:
        return Metrics(r.read().decode(errors="replace"))


# ---- memcached protocol ----

def memcache_stats(sock_or_port, timeout=10):
    """`stats` as {name: str}; takes an open socket (reused) or a port (one-off connection)."""
    own = not isinstance(sock_or_port, socket.socket)
    s = socket.create_connection(("127.0.0.1", sock_or_port), timeout=timeout) if own else sock_or_port
    try:
        s.sendall(b"stats\r\n")
        buf = b""
        while not (buf.endswith(b"END\r\n") or buf.startswith(b"ERROR")):
            chunk = s.recv(65536)
            if not chunk:
                raise ServerError("connection closed during `stats`")
            buf += chunk
        out = {}
        for line in buf.decode(errors="replace").splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[0] == "STAT":
                out[parts[1]] = parts[2]
        return out
    finally:
        if own:
            s.close()


# ---- servers ----

class _Server:
    name = "server"

    def __init__(self, log_path, cpu):
        self.log_path, self.cpu, self.proc = log_path, cpu, None

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def _spawn(self, cmd, ports, log):
        busy = [p for p in ports if port_open(p)]
        if busy:
            raise ServerError(f"{self.name}: port(s) {busy} already in use")
        log(f"[{self.name}] start: {' '.join(cmd)}")
        with open(self.log_path, "ab") as f:
            self.proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        t0 = time.monotonic()
        while time.monotonic() - t0 < START_TIMEOUT_S:
            if self.proc.poll() is not None:
                rc, self.proc = self.proc.returncode, None
                raise ServerError(f"{self.name} exited ({rc}) during startup: "
                                  + tail(self.log_path, 5).strip().replace("\n", " | "))
            if all(port_open(p) for p in ports):
                log(f"[{self.name}] up (pid {self.proc.pid}) in {time.monotonic() - t0:.1f} s")
                return
            time.sleep(0.05)
        self.stop(log)
        raise ServerError(f"{self.name} not listening after {START_TIMEOUT_S} s (see {self.log_path})")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, log=_err, grace_s=60):
        """SIGTERM, then SIGKILL after grace_s. Returns the exit code (None if not running)."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                log(f"[{self.name}] still alive {grace_s} s after SIGTERM: SIGKILL")
                proc.kill()
                proc.wait(10)
        log(f"[{self.name}] stopped (exit {proc.returncode})")
        return proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


class ShoalNode(_Server):
    """`shoal --smp N --memory M --workdir W` on free ports; start() again after stop() reuses the
    workdir and ports (a restart). The workdir is the caller's to remove."""
    name = "shoal"

    def __init__(self, binary, workdir, memory, cpu, log_path, smp=1, extra=()):
        super().__init__(log_path, cpu)
        self.binary, self.workdir, self.memory, self.smp = binary, workdir, memory, smp
        self.cql_port, self.aware_port, self.api_port, self.memcache_port, self.storage_port = free_ports(5)
        self.extra = list(extra)

    def cmd(self):
        return [*taskset(self.cpu), self.binary, "--smp", str(self.smp), "--memory", self.memory,
                "--workdir", self.workdir, "--listen-address", "127.0.0.1",
                "--native-transport-port", str(self.cql_port),
                "--native-shard-aware-transport-port", str(self.aware_port),
                "--api-port", str(self.api_port), "--memcache-port", str(self.memcache_port),
                "--storage-port", str(self.storage_port),
                "--commitlog-sync", "periodic", *self.extra]

    def start(self, log=_err):
        self._spawn(self.cmd(), [self.cql_port, self.api_port, self.memcache_port], log)

    def metrics(self):
        return scrape(self.api_port)

    def nodetool(self, *args, timeout=600, log=_err):
        cmd = [self.binary, "nodetool", "--api-port", str(self.api_port), *args]
        log(f"[shoal] $ {' '.join(cmd)}")
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise ServerError(f"`{' '.join(cmd[1:])}` exited {r.returncode}: "
                              f"{(r.stderr or r.stdout).strip()[-300:]}")
        return time.monotonic() - t0


class MemcachedNode(_Server):
    name = "memcached"

    def __init__(self, binary, memory_mb, cpu, log_path, threads=1, extra=()):
        super().__init__(log_path, cpu)
        self.binary, self.memory_mb, self.threads = binary, memory_mb, threads
        self.port = free_ports(1)[0]
        self.extra = list(extra)

    def cmd(self):
        cmd = [*taskset(self.cpu), self.binary, "-t", str(self.threads), "-U", "0",
               "-m", str(self.memory_mb), "-p", str(self.port), "-l", "127.0.0.1", *self.extra]
        if os.geteuid() == 0:
            cmd += ["-u", "root"]     # memcached refuses to run as root without -u
        return cmd

    def start(self, log=_err):
        self._spawn(self.cmd(), [self.port], log)

    @staticmethod
    def find_or_install(binary, log=_err):
        """The memcached binary to use, installing Debian's package when it is missing."""
        path = shutil.which(binary) or (binary if os.access(binary, os.X_OK) else None)
        if path:
            return path
        log("[memcached] not found; apt-get install -y memcached")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for cmds in ([["apt-get", "install", "-y", "memcached"]],
                     [["apt-get", "update"], ["apt-get", "install", "-y", "memcached"]]):
            try:
                if all(subprocess.run(c, env=env, capture_output=True, timeout=600).returncode == 0
                       for c in cmds):
                    break
            except (OSError, subprocess.TimeoutExpired):
                pass
        path = shutil.which("memcached")
        if not path:
            raise ServerError("memcached is not installed and `apt-get install -y memcached` failed")
        return path


def version_of(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "?"

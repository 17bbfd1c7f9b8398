"""Disk full: writes fail with an error a client can read, nothing is left
corrupt, and writes succeed again once space returns.

Runs its own node (from SHOAL_BIN, fresh ports, see node.py) whose --workdir is
a small tmpfs mounted for the test (needs root; skipped where mount is not
permitted). With `--commitlog-sync batch`, 1 MiB segments and small memtables:

1. writes ROWS_BEFORE rows of 4 KiB blobs (acknowledged, so durable);
2. takes all but SLACK bytes of the filesystem with a filler file, then writes
   rows until writes keep failing (commitlog appends and memtable flushes
   compete for the slack): the client gets a ServerError naming the space
   problem, the node stays up, reads of every acknowledged row still work, a
   flush over the REST API fails (rather than hanging) and leaves no partial
   SSTable files behind;
3. deletes the filler: within RECOVERY_TIMEOUT writes succeed again, a flush
   succeeds, and more rows are written (some only in the commitlog);
4. kill -9 and restart on the same workdir: every acknowledged row is there with
   its exact value, a write that failed is either absent or exactly what was
   written, no SSTable is quarantined and commitlog replay finds no
   corruption.
"""
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest
from cassandra import WriteFailure
from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile
from cassandra.policies import FallthroughRetryPolicy, RoundRobinPolicy
from cassandra.protocol import ServerError

from node import Node, skip_reason

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

FS_SIZE = "16m"
SLACK = 1536 << 10  # free bytes left beside the filler, for the rows to fill
ROW_BYTES = 4096
ROWS_BEFORE = 300  # written while there is space: ~1.2 MiB, a flush or two
ROWS_AFTER = 300  # written once space is back
MAX_FILL_ROWS = 4000  # bounds on filling the slack with rows
FILL_TIMEOUT = 30.0
FAILURES_WANTED = 20  # consecutive failed writes that show the disk is full
RECOVERY_TIMEOUT = 10.0
WRITE_TIMEOUT = 10.0
START_TIMEOUT = 30.0
SERVER_ARGS = ["--commitlog-sync", "batch", "--commitlog-segment-size-in-mb", "1",
               "--memtable-space-in-mb", "2", "--memory", "1G"]
SPACE_WORDS = ("no space left", "disk full", "enospc", "os error 28")


def _mount_tmpfs(path, size):
    """Mounts a tmpfs of `size` at `path`; returns why it cannot, or None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "mounting a small tmpfs needs root"
    if not shutil.which("mount") or not shutil.which("umount"):
        return "no mount/umount command"
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0755" % size, "tmpfs", path],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "mount -t tmpfs failed: %s" % e
    if r.returncode != 0:
        return "mount -t tmpfs not permitted here: %s" % ((r.stderr.strip().splitlines() or ["status %d" % r.returncode])[0])
    return None


def _umount(path):
    for args in (["umount", path], ["umount", "-l", path]):
        try:
            if subprocess.run(args, capture_output=True, timeout=20).returncode == 0:
                return
        except (OSError, subprocess.TimeoutExpired):
            pass


@pytest.fixture
def full_node():
    workdir = tempfile.mkdtemp(prefix="shoal-diskfull-")
    data = os.path.join(workdir, "data")  # the node's --workdir (node.py)
    os.mkdir(data)
    why = _mount_tmpfs(data, FS_SIZE)
    if why:
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.skip(why)
    node = Node(workdir, args=SERVER_ARGS, smp=2)
    node.data_dir = data
    node.keep_workdir = False
    try:
        node.start(timeout=START_TIMEOUT)
        yield node
    finally:
        node.kill()
        if os.environ.get("SHOAL_KEEP_RESTART_LOG"):
            print(open(node.log_path, errors="replace").read())
        _umount(data)
        if node.keep_workdir:
            print("kept the node's server.log: %s" % node.log_path)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _connect(node):
    profile = ExecutionProfile(request_timeout=WRITE_TIMEOUT, retry_policy=FallthroughRetryPolicy(),
                               load_balancing_policy=RoundRobinPolicy())
    # TCP_NODELAY: the driver sends a request over 4 KiB in two chunks, and
    # without it the second waits for a delayed ACK (~40 ms a write).
    cluster = node.cluster(execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                           sockopts=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    return cluster, cluster.connect()


def _fill(path, leave):
    """A file taking all the filesystem's free space but `leave` bytes."""
    st = os.statvfs(os.path.dirname(path))
    size = max(0, st.f_bavail * st.f_frsize - leave)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError:
            chunk = b"\0" * (1 << 20)
            written = 0
            while written < size:
                written += os.write(fd, chunk[:min(len(chunk), size - written)])
        os.fsync(fd)
    finally:
        os.close(fd)
    return size


def _api_flush(node):
    """POST keyspace_flush on the REST API: (HTTP status, body)."""
    url = "http://127.0.0.1:%d/storage_service/keyspace_flush" % node.ports[2]
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=WRITE_TIMEOUT) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def _partial_sstables(data_dir):
    """SSTable generations (shard, generation) with files but no TOC: half-written."""
    found = {}
    for d, _, files in os.walk(os.path.join(data_dir, "data")):
        for f in files:
            parts = f.split("-", 2)
            if len(parts) == 3 and parts[0].startswith("shard") and parts[1].isdigit():
                key = os.path.join(os.path.relpath(d, data_dir), parts[0] + "-" + parts[1])
                found[key] = found.get(key, False) or parts[2] == "TOC.txt"
    return sorted(k for k, has_toc in found.items() if not has_toc)


def _log_since_last_start(node):
    text = open(node.log_path, errors="replace").read()
    return text[text.rfind("\n=== start "):]


def _check_rows(session, acked, failed):
    """Every acknowledged row with its exact value; a failed write absent or exact."""
    rows = {r.k: bytes(r.data) for r in session.execute("SELECT k, data FROM df.t")}
    problems = []
    for k, v in acked.items():
        if k not in rows:
            problems.append("acknowledged row %d is missing" % k)
        elif rows[k] != v:
            problems.append("acknowledged row %d has a different value (%d bytes)" % (k, len(rows[k])))
    for k, v in rows.items():
        if k not in acked and (k not in failed or failed[k] != v):
            problems.append("row %d was never acknowledged%s" % (k, "" if k in failed else " nor written"))
    assert not problems, "%d problem(s): %s" % (len(problems), "; ".join(problems[:20]))
    return rows


def test_disk_full(full_node):
    node = full_node
    rng = random.Random(7)
    acked, failed = {}, {}
    errors = []
    next_key = iter(range(1, 10**9))
    cluster, session = _connect(node)
    try:
        session.execute("CREATE KEYSPACE df WITH replication = "
                        "{'class': 'NetworkTopologyStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE df.t (k int PRIMARY KEY, data blob)")
        insert = {"stmt": session.prepare("INSERT INTO df.t (k, data) VALUES (?, ?)")}

        def write():
            """One write; True once acknowledged, else the error is kept."""
            k, v = next(next_key), rng.randbytes(ROW_BYTES)
            try:
                session.execute(insert["stmt"], (k, v))
            except (ServerError, WriteFailure) as e:
                failed[k] = v
                errors.append(e)
                return False
            acked[k] = v
            return True

        # 1. Space to spare.
        for _ in range(ROWS_BEFORE):
            assert write(), "a write failed before the disk was full: %s" % errors[-1]

        # 2. Fill the disk: a filler file, then rows until writes fail.
        filler = os.path.join(node.data_dir, "filler")
        _fill(filler, SLACK)
        consecutive = 0
        deadline = time.monotonic() + FILL_TIMEOUT
        for _ in range(MAX_FILL_ROWS):
            if time.monotonic() > deadline:
                break
            if write():
                consecutive = 0
            else:
                consecutive += 1
                if consecutive >= FAILURES_WANTED:
                    break
        assert consecutive >= FAILURES_WANTED, (
            "writes did not keep failing on a full disk (%d acknowledged, %d failed)" % (len(acked), len(failed)))
        messages = {str(e) for e in errors}
        for e in errors:
            assert isinstance(e, ServerError), "expected a ServerError, got %r" % e
            assert any(w in str(e).lower() for w in SPACE_WORDS), "the error does not name the space problem: %s" % e
        print("on a full disk: %d acknowledged, %d failed; errors: %s" % (len(acked), len(failed), sorted(messages)[:3]))

        assert node.alive(), "the server died on a full disk:\n%s" % node.log_tail()
        _check_rows(session, acked, failed)  # reads still work, on every acknowledged row
        status, body = _api_flush(node)
        assert status != 200, "a flush succeeded on a full disk: %s" % body
        assert any(w in body.lower() for w in SPACE_WORDS), "the flush error does not name the space problem: %s" % body
        assert node.alive(), "the server died on a full disk:\n%s" % node.log_tail()
        # A failed flush removes what it wrote (a flush or compaction still
        # running may have files without a TOC for a moment).
        deadline = time.monotonic() + 3
        while _partial_sstables(node.data_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        # Checked at the end, so that the rest of the test still runs.
        leftovers = _partial_sstables(node.data_dir)

        # 3. Space returns: writes succeed again within RECOVERY_TIMEOUT.
        os.unlink(filler)
        deadline = time.monotonic() + RECOVERY_TIMEOUT
        while not write():
            assert time.monotonic() < deadline, (
                "writes still fail %g s after space returned: %s" % (RECOVERY_TIMEOUT, errors[-1]))
            time.sleep(0.1)
        recovered_after = RECOVERY_TIMEOUT - (deadline - time.monotonic())
        print("writes succeed again %.2f s after space returned" % recovered_after)
        for _ in range(ROWS_AFTER):
            assert write(), "a write failed after space returned: %s" % errors[-1]
        status, body = _api_flush(node)
        assert status == 200, "a flush failed after space returned: %s %s" % (status, body)
        for _ in range(ROWS_AFTER // 3):  # these only in the commitlog
            assert write(), "a write failed after space returned: %s" % errors[-1]
        _check_rows(session, acked, failed)
    finally:
        cluster.shutdown()

    # 4. kill -9 and restart: everything acknowledged is there, nothing corrupt.
    node.kill()
    node.start(timeout=START_TIMEOUT)
    log = _log_since_last_start(node)
    for bad in ("quarantin", "checksum mismatch", "bad segment header", "commitlog replay:"):
        assert bad not in log.lower(), "the restart found damage (%r):\n%s" % (bad, log)
    assert "ERROR" not in log, "the restart logged an error:\n%s" % log
    assert not any(os.path.basename(d) == "quarantine" for d, _, _ in os.walk(node.data_dir)), (
        "a quarantine directory exists")
    cluster, session = _connect(node)
    try:
        rows = _check_rows(session, acked, failed)
        print("after the restart: %d rows (%d acknowledged, %d of the failed writes applied)"
              % (len(rows), len(acked), len(set(rows) & set(failed))))
        for k in list(acked)[:: max(1, len(acked) // 50)]:  # point reads too
            assert bytes(session.execute("SELECT data FROM df.t WHERE k = %d" % k).one().data) == acked[k]
        insert["stmt"] = session.prepare("INSERT INTO df.t (k, data) VALUES (?, ?)")
        assert write(), "a write failed after the restart: %s" % errors[-1]
    finally:
        cluster.shutdown()
    assert not leftovers, "a failed flush on the full disk left partial SSTable files (no TOC): %s" % leftovers

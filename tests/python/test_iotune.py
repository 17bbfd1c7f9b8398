"""`shoal iotune` measures the disk and writes ScyllaDB's io_properties.yaml;
a node started with it (`--io-properties-file`) schedules its I/O by it and
shows the scheduler's per-class metrics (issue 29 items 2, 3 and 6).

Runs its own server (SHOAL_BIN) on fresh ports and a fresh workdir.
"""
import os
import re
import subprocess
import tempfile

import pytest

from node import SHOAL_BIN, skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

FIELDS = ("read_iops", "read_bandwidth", "write_iops", "write_bandwidth")


def run_iotune(workdir):
    out = subprocess.run([SHOAL_BIN, "iotune", "--workdir", workdir, "--duration-s", "1", "--file-size-mb", "16"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_iotune_writes_scylla_format_and_a_node_uses_it():
    scratch = tempfile.mkdtemp(prefix="shoal-iotune-")
    stdout = run_iotune(scratch)
    path = os.path.join(scratch, "io_properties.yaml")
    assert "wrote " + path in stdout
    text = open(path).read()
    assert text.startswith("disks:\n  - mountpoint: ")
    values = {name: int(re.search(r"\n    %s: (\d+)\n" % name, text).group(1)) for name in FIELDS}
    assert all(v > 0 for v in values.values()), values
    assert os.listdir(scratch) == ["io_properties.yaml"], "the scratch file is removed"

    with temp_node("shoal-iotune-node-", args=["--io-properties-file", path]) as node:
        assert "run `shoal iotune" not in node.last_start_log()
        cluster, session = node.session()
        try:
            session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            session.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
            for k in range(50):
                session.execute("INSERT INTO ks.t (k, v) VALUES (%s, %s)", (k, "x" * 100))
            node.nodetool("flush")
            assert session.execute("SELECT v FROM ks.t WHERE k = 7").one().v == "x" * 100
        finally:
            cluster.shutdown()
        metrics = node.metrics()
        flushed = [float(v) for v in re.findall(
            r'^shoal_io_queue_dispatched_bytes_total\{[^}]*class="flush"[^}]*\} (\S+)$', metrics, re.M)]
        assert sum(flushed) > 0, "the flush's writes went through the scheduler"
        for name in ("shoal_io_queue_queued_requests", "shoal_io_queue_in_flight_requests",
                     "shoal_io_queue_dispatched_total", "shoal_io_queue_delay_seconds_total"):
            assert name + "{" in metrics, name
        assert re.search(r'^shoal_io_queue_shares\{[^}]*class="streaming"[^}]*\} 200$', metrics, re.M)


def test_without_properties_the_node_says_to_run_iotune():
    with temp_node("shoal-iotune-default-") as node:
        assert "run `shoal iotune" in node.last_start_log()


def test_scheduler_off_is_a_flag():
    with temp_node("shoal-iotune-off-", args=["--io-scheduler", "off"]) as node:
        assert "the I/O scheduler is off" in node.last_start_log()
        assert "shoal_io_queue_dispatched_total{" not in node.metrics()

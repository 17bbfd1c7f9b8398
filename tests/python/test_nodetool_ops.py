"""nodetool's compaction, sampling and tracing commands (issue 30 item 3),
on a node of the test's own, checked against what the node does:

- compactionstats lists the tables whose strategy has work waiting (with
  autocompaction disabled, after five flushes) and a compaction under way
  with its progress, laid out as Cassandra's; `stop COMPACTION` ends it,
  the major compaction that ran fails and its input SSTables stay;
  enableautocompaction lets the strategy compact them;
- toppartitions counts the partitions written and read while it samples,
  most first, as Cassandra prints them;
- settraceprobability 1 traces requests sent without the TRACING flag
  (found in system_traces), 0 stops it; gettraceprobability says which;
- netstats names the node's mode and the streams it sends;
- rebuild runs repair's exchange (nothing differs on one node) and refuses
  a source data center;
- refresh loads the SSTables of a snapshot copied into another table's
  upload/ directory (the rows come back, the directory is emptied).
"""
import glob
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request

import pytest
from cassandra.concurrent import execute_concurrent_with_args

from node import SHOAL_BIN, skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)


@pytest.fixture(scope="module")
def node():
    with temp_node("shoal-nodetool-ops-", smp=2) as n:
        cluster, session = n.session()
        try:
            session.execute("CREATE KEYSPACE ops WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            session.execute("CREATE TABLE ops.t (k int PRIMARY KEY, v text)")
            session.execute("CREATE TABLE ops.big (k int PRIMARY KEY, v blob)")
        finally:
            cluster.shutdown()
        yield n


def get_json(node, path):
    with urllib.request.urlopen("http://%s:%d%s" % (node.address, node.api_port, path), timeout=30) as r:
        return json.loads(r.read().decode())


def sstables_by_shard(node, table):
    """{shard: SSTables of the table on it}."""
    counts = {}
    for line in node.metrics().splitlines():
        if line.startswith("shoal_sstables{") and 'table="%s"' % table in line:
            shard = re.search(r'shard="(\d+)"', line).group(1)
            counts[shard] = counts.get(shard, 0) + int(float(line.split()[-1]))
    return counts


def sstables(node, table):
    return sum(sstables_by_shard(node, table).values())


def write_and_flush(node, session, keys, flushes):
    """Writes `keys` in `flushes` batches, each flushed to SSTables."""
    insert = session.prepare("INSERT INTO ops.big (k, v) VALUES (?, ?)")
    value = os.urandom(512)
    step = len(keys) // flushes
    for flush in range(flushes):
        rows = [(k, value) for k in keys[flush * step:(flush + 1) * step]]
        for ok, answer in execute_concurrent_with_args(session, insert, rows, concurrency=64):
            assert ok, answer
        node.nodetool("flush", "ops", "big")


def compaction_rows(out):
    """The rows of compactionstats' table: dicts by its header's names."""
    lines = out.splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith("id ")]
    if not starts:
        return []
    header = lines[starts[0]]
    names = ["id", "compaction type", "keyspace", "table", "completed", "total", "unit", "progress"]
    assert re.sub(r"\s+", " ", header).strip() == " ".join(names), header
    rows = []
    for line in lines[starts[0] + 1:]:
        if line.startswith("Active compaction remaining time"):
            break
        cells = line.split()
        rows.append(dict(zip(["id", "type", "keyspace", "table", "completed", "total", "unit", "progress"], cells)))
    return rows


def stop_a_major_compaction(node):
    """Starts `nodetool compact ops big`, and once a compaction is under way
    prints compactionstats and stops it: (compactionstats, stop's output,
    compact's stderr), or None when the compaction ended unseen or
    unstopped."""
    compact = subprocess.Popen([SHOAL_BIN, "nodetool", "--host", node.address, "--api-port", str(node.api_port),
                                "compact", "ops", "big"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not get_json(node, "/compaction_manager/compactions"):
        if compact.poll() is not None:
            return None
        time.sleep(0.005)
    out = node.nodetool("compactionstats")
    stopped = node.nodetool("stop", "COMPACTION")
    _, err = compact.communicate(timeout=60)
    if compact.returncode == 0:
        return None
    return out, stopped, err


def test_compactionstats_stop_and_autocompaction(node):
    cluster, session = node.session()
    try:
        node.nodetool("disableautocompaction", "ops", "big")
        write_and_flush(node, session, list(range(100000)), 5)
    finally:
        cluster.shutdown()
    before = sstables(node, "big")
    assert before >= 8, "five flushes on each of two shards"
    out = node.nodetool("compactionstats")
    pending = int(re.search(r"^pending tasks: (\d+)$", out, re.M).group(1))
    assert pending >= 1 and "- ops.big: " in out, out
    assert compaction_rows(out) == [], out

    # A major compaction, stopped while it runs (tried again should one
    # finish before it is seen: a stopped one leaves its inputs as they were).
    for attempt in range(3):
        before = sstables_by_shard(node, "big")
        stopped = stop_a_major_compaction(node)
        if stopped is not None:
            break
    else:
        pytest.fail("three major compactions ended before one was seen under way")
    out, stopped_message, err = stopped
    rows = compaction_rows(out)
    assert rows, out
    assert all(r["type"] == "COMPACTION" and (r["keyspace"], r["table"]) == ("ops", "big") for r in rows), out
    assert all(r["unit"] == "keys" and int(r["completed"]) <= int(r["total"]) and r["progress"].endswith("%")
               for r in rows), out
    assert "Active compaction remaining time :" in out
    assert re.match(r"stopped [1-9]\d* compaction\(s\)", stopped_message), stopped_message
    assert "compaction stopped" in err, err
    assert get_json(node, "/compaction_manager/compactions") == []
    # A shard may have finished before the stop came; the others kept
    # their inputs.
    after = sstables_by_shard(node, "big")
    assert any(after[shard] == count > 1 for shard, count in before.items()), (before, after)

    # The strategy compacts once allowed again: four more SSTables a shard.
    cluster, session = node.session()
    try:
        write_and_flush(node, session, list(range(100000, 104000)), 4)
    finally:
        cluster.shutdown()
    before = sstables(node, "big")
    assert "enabled for 1 table(s)" in node.nodetool("enableautocompaction", "ops", "big")
    deadline = time.monotonic() + 60
    while sstables(node, "big") >= before:
        assert time.monotonic() < deadline, "autocompaction did not compact"
        time.sleep(0.2)

    out = subprocess.run([SHOAL_BIN, "nodetool", "--host", node.address, "--api-port", str(node.api_port),
                          "stop", "VALIDATION"], capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "COMPACTION" in out.stderr


def sampler(out, name):
    """(cardinality, [(partition, count, error)]) of a toppartitions sampler."""
    lines = out.splitlines()
    at = lines.index("%s Sampler:" % name)
    cardinality = int(re.match(r"  Cardinality: ~(\d+) \(256 capacity\)", lines[at + 1]).group(1))
    assert lines[at + 2] == "  Top 10 partitions:"
    if lines[at + 3] == "\tNothing recorded during sampling period...":
        return cardinality, []
    assert lines[at + 3].split() == ["Partition", "Count", "+/-"], lines[at + 3]
    top = []
    for line in lines[at + 4:]:
        if not line.startswith("\t"):
            break
        key, count, error = line.split()
        top.append((key, int(count), int(error)))
    return cardinality, top


def test_toppartitions_counts_what_is_written_and_read(node):
    sampling = subprocess.Popen([SHOAL_BIN, "nodetool", "--host", node.address, "--api-port", str(node.api_port),
                                 "toppartitions", "ops", "t", "3000"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    cluster, session = node.session()
    try:
        for key, times in [(7, 10), (8, 5), (9, 1)]:
            for n in range(times):
                session.execute("INSERT INTO ops.t (k, v) VALUES (%s, %s)", (key, "x%d" % n))
        for _ in range(3):
            session.execute("SELECT * FROM ops.t WHERE k = 7")
        session.execute("INSERT INTO ops.big (k, v) VALUES (1, 0x00)")  # another table: not sampled
    finally:
        cluster.shutdown()
    out, _ = sampling.communicate(timeout=30)
    assert sampling.returncode == 0
    assert out.index("WRITES Sampler:") < out.index("READS Sampler:"), out
    assert sampler(out, "WRITES") == (3, [("7", 10, 0), ("8", 5, 0), ("9", 1, 0)]), out
    assert sampler(out, "READS") == (1, [("7", 3, 0)]), out


def test_trace_probability_traces_requests_that_did_not_ask(node):
    assert node.nodetool("gettraceprobability").strip() == "Current trace probability: 0"
    cluster, session = node.session()
    try:
        def sessions():
            return {r.session_id for r in session.execute("SELECT session_id FROM system_traces.sessions")}
        before = sessions()
        node.nodetool("settraceprobability", "1")
        assert node.nodetool("gettraceprobability").strip() == "Current trace probability: 1"
        for k in range(5):
            session.execute("SELECT * FROM ops.t WHERE k = %s", (k,))
        node.nodetool("settraceprobability", "0")
        traced = sessions() - before
        # The five SELECTs and the settraceprobability's own reads of the
        # sessions (each shard answers for its own).
        assert len(traced) >= 5, traced
        for k in range(5):
            session.execute("SELECT * FROM ops.t WHERE k = %s", (k,))
        assert sessions() - before == traced, "nothing traced at probability 0"
    finally:
        cluster.shutdown()
    bad = subprocess.run([SHOAL_BIN, "nodetool", "--host", node.address, "--api-port", str(node.api_port),
                          "settraceprobability", "1.5"], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "from 0 to 1" in bad.stderr


def test_netstats(node):
    out = node.nodetool("netstats").splitlines()
    assert out[:2] == ["Mode: NORMAL", "Not sending any streams."], out


def test_rebuild_runs_repairs_exchange_and_refuses_a_source_dc(node):
    out = node.nodetool("rebuild")
    assert re.match(r"rebuilt: \d+ range\(s\) of tables, \d+ partition\(s\) compared, 0 differed", out), out
    refused = subprocess.run([SHOAL_BIN, "nodetool", "--host", node.address, "--api-port", str(node.api_port),
                              "rebuild", "dc2"], capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and "no source_dc" in refused.stderr, refused.stderr


def test_refresh_loads_the_sstables_in_upload(node):
    cluster, session = node.session()
    try:
        session.execute("CREATE TABLE ops.src (k int PRIMARY KEY, v text)")
        session.execute("CREATE TABLE ops.dst (k int PRIMARY KEY, v text)")
        for k in range(200):
            session.execute("INSERT INTO ops.src (k, v) VALUES (%s, %s)", (k, "v%d" % k))
        session.execute("DELETE FROM ops.src WHERE k = 3")
        node.nodetool("snapshot", "-t", "mv", "ops")
        data = os.path.join(node.workdir, "data", "data", "ops")
        [snapshot] = glob.glob(os.path.join(data, "src-*", "snapshots", "mv"))
        [dst] = glob.glob(os.path.join(data, "dst-*"))
        upload = os.path.join(dst, "upload")
        shutil.copytree(snapshot, upload)
        out = node.nodetool("refresh", "ops", "dst")
        loaded = re.match(r"loaded (\d+) SSTable\(s\): (\d+) partition\(s\)", out)
        assert loaded and int(loaded.group(1)) >= 2 and int(loaded.group(2)) == 200, out
        assert os.listdir(upload) == []
        rows = {r.k: r.v for r in session.execute("SELECT k, v FROM ops.dst")}
        assert rows == {k: "v%d" % k for k in range(200) if k != 3}
        assert node.nodetool("refresh", "ops", "dst").startswith("loaded 0 SSTable(s)")
    finally:
        cluster.shutdown()

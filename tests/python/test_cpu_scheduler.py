"""The CPU scheduling groups and their controllers show in /metrics under
ScyllaDB's names: requests run in the `statement` group, flushes in
`memtable`, compactions in `compaction`; the controllers keep flush's and
compaction's shares within their bounds, on the CPU and the disk alike
(issue 29 items 4, 5 and 7). `--cpu-scheduler off` is a flag for contrast
runs.

Runs its own server (SHOAL_BIN) on fresh ports and a fresh workdir.
"""
import re
import time

import pytest

from node import skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)


def by_group(metrics, name):
    values = {}
    for group, value in re.findall(r'^%s\{[^}]*group="(\w+)"[^}]*\} (\S+)$' % name, metrics, re.M):
        values[group] = values.get(group, 0.0) + float(value)
    return values


def test_groups_account_requests_flushes_and_compactions():
    with temp_node("shoal-cpu-sched-", smp=1) as node:
        cluster, session = node.session()
        try:
            session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            session.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
            insert = session.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
            for round_ in range(4):
                for k in range(200):
                    session.execute(insert, (k, "x" * 200 + str(round_)))
                node.nodetool("flush")
            node.nodetool("compact")
            assert session.execute("SELECT v FROM ks.t WHERE k = 7").one().v == "x" * 200 + "3"
        finally:
            cluster.shutdown()
        # The controllers run every 250 ms.
        time.sleep(0.6)
        metrics = node.metrics()
        runtime = by_group(metrics, "scylla_scheduler_runtime_ms")
        tasks = by_group(metrics, "scylla_scheduler_tasks_processed")
        for group in ("statement", "memtable", "compaction"):
            assert runtime.get(group, 0) > 0, (group, runtime)
            assert tasks.get(group, 0) > 0, (group, tasks)
        for name in ("scylla_scheduler_queue_length", "scylla_scheduler_waittime_ms"):
            assert set(by_group(metrics, name)) == {"statement", "commitlog", "memtable", "compaction",
                                                    "streaming", "main"}, name
        shares = by_group(metrics, "scylla_scheduler_shares")
        assert shares["statement"] == 1000 and shares["streaming"] == 200
        assert 50 <= shares["compaction"] <= 1000 and 50 <= shares["memtable"] <= 1000, shares
        io_shares = {c: float(v) for c, v in re.findall(
            r'^shoal_io_queue_shares\{[^}]*class="(\w+)"[^}]*\} (\S+)$', metrics, re.M)}
        if io_shares:
            assert io_shares["compaction"] == shares["compaction"], (io_shares, shares)
        assert "scylla_compaction_manager_backlog" in metrics
        assert "shoal_memtable_dirty_ratio_permille" in metrics


def test_cpu_scheduler_off_is_a_flag():
    with temp_node("shoal-cpu-sched-off-", smp=1, args=["--cpu-scheduler", "off"]) as node:
        assert "the CPU scheduler is off" in node.last_start_log()

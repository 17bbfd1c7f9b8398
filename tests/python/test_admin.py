"""What an operator sees: `/metrics` read by Prometheus' own text parser
(prometheus_client), counters that move by exactly the requests made, and
`shoal nodetool status / info / tablestats` built from them.

Runs its own node (from SHOAL_BIN) in a temporary workdir.
"""
import pytest
from prometheus_client.parser import text_string_to_metric_families

from node import skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)


def scrape(node):
    """{name: family} as Prometheus parses the node's /metrics."""
    return {f.name: f for f in text_string_to_metric_families(node.metrics())}


def total(families, name, sample_name=None, **labels):
    """Sum over shards of the samples of `name` with `labels`."""
    sample_name = sample_name or name
    return sum(s.value for s in families[name].samples
               if s.name == sample_name and all(s.labels.get(k) == v for k, v in labels.items()))


def create_ks_t(session):
    """ks.t (k int PRIMARY KEY, v text), in a keyspace of one replica."""
    session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")


def test_metrics_count_requests_and_parse_as_prometheus():
    with temp_node("shoal-admin-") as node:
        cluster, session = node.session()
        try:
            create_ks_t(session)
            before = scrape(node)
            insert = session.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
            select = session.prepare("SELECT v FROM ks.t WHERE k = ?")
            for k in range(200):
                session.execute(insert, (k, "v%d" % k))
            for k in range(50):
                session.execute(select, (k,))
            with pytest.raises(Exception):
                session.execute("SELECT * FROM ks.no_such_table")
            after = scrape(node)
        finally:
            cluster.shutdown()

    # Families every later subsystem relies on, with Prometheus' types
    # (the parser strips _total from counter family names).
    kinds = {
        "shoal_cql_requests": "counter",
        "shoal_cql_request_errors": "counter",
        "shoal_cql_request_latency_seconds": "histogram",
        "shoal_cql_forwarded_requests": "counter",
        "shoal_cql_connections": "gauge",
        "shoal_memtable_bytes": "gauge",
        "shoal_commitlog_appended_bytes": "counter",
        "shoal_commitlog_syncs": "counter",
        "shoal_sstables": "gauge",
        "shoal_compaction_bytes_written": "counter",
        "shoal_table_reads": "counter",
    }
    for name, kind in kinds.items():
        assert name in after, name
        assert after[name].type == kind, (name, after[name].type)
    assert {s.labels["shard"] for s in after["shoal_cql_requests"].samples} == {"0", "1"}

    def delta(name, sample_name=None, **labels):
        return total(after, name, sample_name, **labels) - total(before, name, sample_name, **labels)

    writes = delta("shoal_cql_requests", "shoal_cql_requests_total", op="write")
    assert writes == 200
    assert delta("shoal_cql_request_latency_seconds", "shoal_cql_request_latency_seconds_count", op="write") == 200
    # The driver's own system-table queries are reads too.
    assert delta("shoal_cql_requests", "shoal_cql_requests_total", op="read") >= 51
    assert delta("shoal_cql_request_errors", "shoal_cql_request_errors_total", op="read") == 1
    assert delta("shoal_table_writes", "shoal_table_writes_total", keyspace="ks", table="t") == 200
    assert delta("shoal_table_reads", "shoal_table_reads_total", keyspace="ks", table="t") == 50
    assert total(after, "shoal_memtable_bytes", keyspace="ks", table="t") > 0
    assert delta("shoal_commitlog_appended_bytes", "shoal_commitlog_appended_bytes_total") > 200 * 8

    # Buckets are cumulative and end in +Inf == _count, per series.
    series = {}
    for s in after["shoal_cql_request_latency_seconds"].samples:
        key = (s.labels["shard"], s.labels["op"])
        if s.name.endswith("_bucket"):
            series.setdefault(key, []).append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_count"):
            series.setdefault(key, []).append(("count", s.value))
    for key, values in series.items():
        buckets = [v for le, v in values if le != "count"]
        count = [v for le, v in values if le == "count"][0]
        assert buckets == sorted(buckets), key
        assert buckets[-1] == count, key


def test_commitlog_writes_flush_steps_and_compactions_are_timed():
    """shoal_commitlog_write_seconds times the data log's writes (the wait for the writer, a segment's
    opening, each write); shoal_flush_phase_seconds each flush step; shoal_compaction_seconds each
    compaction: where the background work of a write load goes."""
    with temp_node("shoal-admin-timed-", smp=1) as node:
        cluster, session = node.session()
        try:
            create_ks_t(session)
            before = scrape(node)
            insert = session.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
            for flush in range(2):
                for k in range(100):
                    session.execute(insert, (k, "v%d-%d" % (k, flush)))
                node.nodetool("flush", "ks", "t")
            node.nodetool("compact", "ks", "t")
            after = scrape(node)
        finally:
            cluster.shutdown()

    for name in ("shoal_commitlog_write_seconds", "shoal_flush_phase_seconds", "shoal_compaction_seconds"):
        assert after[name].type == "histogram", name

    def count(families, name, **labels):
        return total(families, name, name + "_count", **labels) if name in families else 0

    def delta(name, **labels):
        return count(after, name, **labels) - count(before, name, **labels)

    # 200 writes, each waited for: write rounds, each timed from its first append and as a write.
    assert delta("shoal_commitlog_write_seconds", stage="write") >= 1
    assert delta("shoal_commitlog_write_seconds", stage="queued") >= 1
    assert count(after, "shoal_commitlog_write_seconds", stage="open") >= 1, "the first segment's opening"
    for phase in ("write", "finish", "open", "cache_merge", "discard_segments"):
        assert delta("shoal_flush_phase_seconds", phase=phase) >= 2, phase
    assert delta("shoal_compaction_seconds") >= 1
    assert total(after, "shoal_flush_phase_seconds", "shoal_flush_phase_seconds_sum", phase="finish") > 0


def test_nodetool_status_info_tablestats():
    with temp_node("shoal-nodetool-") as node:
        cluster, session = node.session()
        try:
            session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            session.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
            session.execute("CREATE TABLE ks.other (k int PRIMARY KEY)")
            insert = session.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
            for k in range(300):
                session.execute(insert, (k, "x" * 100))
            for k in range(10):
                session.execute("SELECT v FROM ks.t WHERE k = %s", (k,))
        finally:
            cluster.shutdown()
        node.nodetool("flush", "ks")

        status = node.nodetool("status")
        assert "Datacenter: datacenter1" in status
        line = [l for l in status.splitlines() if l.startswith("UN")]
        assert len(line) == 1 and "127.0.0.1" in line[0] and "rack1" in line[0], status
        assert "bytes" in line[0] or "KiB" in line[0], status

        info = dict(l.split(":", 1) for l in node.nodetool("info").splitlines())
        info = {k.strip(): v.strip() for k, v in info.items()}
        assert info["Native Transport active"] == "true"
        assert info["Shards"] == "2"
        assert int(info["Uptime (seconds)"]) >= 0
        assert info["ID"] in status

        stats = node.nodetool("tablestats", "ks.t")
        assert "Total number of tables: 1" in stats
        fields = {}
        for l in stats.splitlines():
            if ":" in l:
                k, v = l.split(":", 1)
                fields[k.strip()] = v.strip()
        assert fields["Table"] == "t"
        assert float(fields["Local write count"]) == 300
        assert float(fields["Local read count"]) == 10
        assert float(fields["SSTable count"]) >= 1
        assert float(fields["Number of partitions (estimate)"]) == 300
        assert float(fields["Space used (live)"]) > 0
        assert fields["Local write latency"].endswith(" ms")
        assert "Total number of tables: 2" in node.nodetool("cfstats", "ks")


def test_rest_api_lists_tables_and_switches_a_tables_autocompaction():
    """ScyllaDB's `/column_family/name[/keyspace]`, which test tools (the
    cqlpy suite's nodetool helpers) ask first to learn that the REST API is
    there, and `/column_family/autocompaction/<ks>:<table>`."""
    import json
    with temp_node("shoal-admin-") as node:
        cluster, session = node.session()
        try:
            session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            session.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
            session.execute("CREATE TABLE ks.u (k int PRIMARY KEY, v text)")
        finally:
            cluster.shutdown()
        assert "ks" in json.loads(node.api("GET", "/column_family/name/keyspace"))
        names = json.loads(node.api("GET", "/column_family/name"))
        assert "ks:t" in names and "ks:u" in names
        assert json.loads(node.api("DELETE", "/column_family/autocompaction/ks:t")) == 1
        assert json.loads(node.api("POST", "/column_family/autocompaction/ks:t")) == 1
        node.api("POST", "/storage_service/keyspace_flush/ks?cf=t")

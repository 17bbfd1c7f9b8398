"""Query tracing with the Python driver: the TRACING flag, the trace id in the
response, and system_traces.sessions / system_traces.events."""

import datetime
import random

from cassandra.query import BatchStatement, SimpleStatement


def kv_table(table):
    return table("(k int PRIMARY KEY, v text)")


def test_untraced_request_has_no_trace(session, table):
    t = kv_table(table)
    rs = session.execute("SELECT * FROM %s" % t)
    assert not rs.response_future._query_traces
    assert rs.get_query_trace() is None


def test_traced_query_reads_back_its_trace(session, table):
    t = kv_table(table)
    query = "SELECT * FROM %s WHERE k = 1" % t
    rs = session.execute(SimpleStatement(query), trace=True)
    trace = rs.get_query_trace(max_wait_sec=10)
    assert trace.request_type == "Execute CQL3 query"
    assert trace.duration > datetime.timedelta(0)
    assert trace.coordinator == "127.0.0.1"
    assert trace.client == "127.0.0.1"
    assert trace.started_at is not None
    assert trace.parameters["query"] == query
    assert trace.parameters["consistency_level"] in ("ONE", "LOCAL_ONE")
    activities = [e.description for e in trace.events]
    assert len(activities) >= 2
    assert activities[0].startswith("Executing QUERY on shard")
    assert activities[-1] == "Request complete"
    elapsed = [e.source_elapsed for e in trace.events]
    assert elapsed == sorted(elapsed)
    assert all(e.source == "127.0.0.1" and e.thread_name.startswith("shard ") for e in trace.events)


def test_traced_prepared_and_batch(session, table):
    t = kv_table(table)
    insert = session.prepare("INSERT INTO %s (k, v) VALUES (?, ?)" % t)
    rs = session.execute(insert, (1, "one"), trace=True)
    trace = rs.get_query_trace(max_wait_sec=10)
    assert trace.request_type == "Execute CQL3 prepared query"
    # As Cassandra: the prepared statement's text is the trace's query.
    assert trace.parameters["query"] == "INSERT INTO %s (k, v) VALUES (?, ?)" % t
    batch = BatchStatement()
    batch.add(insert, (2, "two"))
    batch.add(insert, (3, "three"))
    rs = session.execute(batch, trace=True)
    trace = rs.get_query_trace(max_wait_sec=10)
    assert trace.request_type == "Execute batch of CQL3 queries"
    assert session.execute("SELECT count(*) FROM %s" % t).one()[0] == 3


def test_trace_rows_are_readable_with_cql(session, table):
    t = kv_table(table)
    rs = session.execute("SELECT * FROM %s" % t, trace=True)
    trace_id = rs.response_future._query_traces[0].trace_id
    row = session.execute(
        "SELECT command, duration, request FROM system_traces.sessions WHERE session_id = %s",
        (trace_id,)).one()
    assert row.command == "QUERY" and row.duration > 0 and row.request == "Execute CQL3 query"
    events = list(session.execute(
        "SELECT event_id, activity FROM system_traces.events WHERE session_id = %s", (trace_id,)))
    assert [e.activity for e in events][-1] == "Request complete"
    assert len({e.event_id for e in events}) == len(events)


def test_failed_request_is_traced_too(session, table):
    t = kv_table(table)
    # A traced request that fails still records its session; the driver cannot
    # hand the id of an error back, so look it up by its query text.
    query = "SELECT nope FROM %s WHERE k = %d" % (t, random.randrange(1 << 30))
    try:
        session.execute(query, trace=True)
    except Exception:
        pass
    rows = [r for r in session.execute("SELECT session_id, parameters FROM system_traces.sessions")
            if r.parameters and r.parameters.get("query") == query]
    assert len(rows) == 1
    events = [e.activity for e in session.execute(
        "SELECT activity FROM system_traces.events WHERE session_id = %s", (rows[0].session_id,))]
    assert events[-1] == "Request failed"


def test_a_select_served_by_an_index_traces_which(session, table):
    # ScyllaDB's event text, which its tests and tools look for. The index is
    # the first restriction's that one serves; in a restricted partition a
    # local index first.
    t = table("(p int PRIMARY KEY, v1 int, v2 int, v3 int)")
    session.execute("CREATE INDEX %s_v3 ON %s (v3)" % (t.split(".")[-1], t))
    session.execute("CREATE INDEX %s_v1 ON %s (v1)" % (t.split(".")[-1], t))
    session.execute("CREATE INDEX %s_v2 ON %s ((p), v2)" % (t.split(".")[-1], t))
    name = t.split(".")[-1]

    def index_used(where):
        rs = session.execute(SimpleStatement("SELECT * FROM %s WHERE %s" % (t, where)), trace=True)
        events = [e.description for e in rs.get_query_trace(max_wait_sec=10).events]
        used = [e for e in events if e.startswith("Consulting index ")]
        assert len(used) == 1, events
        return used[0].split()[2]

    assert index_used("v3 = 1") == name + "_v3"
    assert index_used("v3 = 1 AND v1 = 2 ALLOW FILTERING") == name + "_v3"
    assert index_used("p = 1 AND v1 = 1 AND v3 = 2 ALLOW FILTERING") == name + "_v1"
    assert index_used("v2 = 1 AND v1 = 2 ALLOW FILTERING") == name + "_v1"
    assert index_used("p = 1 AND v1 = 1 AND v2 = 2 ALLOW FILTERING") == name + "_v2"
    # A SELECT no index serves traces none.
    rs = session.execute(SimpleStatement("SELECT * FROM %s WHERE p = 1" % t), trace=True)
    assert not [e for e in rs.get_query_trace(max_wait_sec=10).events if "index" in e.description]

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
    assert rs.get_query_trace(max_wait_sec=10).request_type == "Execute CQL3 prepared query"
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

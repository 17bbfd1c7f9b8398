"""nodetool and the HTTP API (issue 30 item 3), on a node of the test's own.

- Every GET endpoint answers valid JSON (errors too: {"code", "message"});
  /metrics is Prometheus text.
- A malformed request gets 400, an unknown path 404, a wrong method 405, an
  oversized head 431 — and the server keeps serving; a client that never
  finishes its request is dropped after the API's read timeout (10 s).
- Query parameters and paths are percent-decoded.
- ring, describecluster, gossipinfo, getendpoints, listsnapshots and
  clearsnapshot print what Cassandra's nodetool prints, parsed here.
"""
import json
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from node import SHOAL_BIN, skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

HEAD_READ_TIMEOUT_S = 10


@pytest.fixture(scope="module")
def node():
    with temp_node("shoal-nodetool-") as n:
        cluster, session = n.session()
        try:
            session.execute("CREATE KEYSPACE nt WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            session.execute("CREATE TABLE nt.t (k int PRIMARY KEY, v text)")
            session.execute("CREATE TABLE nt.c (a text, b int, v int, PRIMARY KEY ((a, b)))")
            for k in range(20):
                session.execute("INSERT INTO nt.t (k, v) VALUES (%s, %s)", (k, "v%d" % k))
        finally:
            cluster.shutdown()
        yield n


def raw(node, data, timeout=5):
    """Sends raw bytes to the API; the status code and the body."""
    with socket.create_connection((node.address, node.api_port), timeout=timeout) as s:
        s.sendall(data)
        answer = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body.decode()


def get_json(node, path):
    try:
        with urllib.request.urlopen("http://%s:%d%s" % (node.address, node.api_port, path), timeout=30) as r:
            assert r.headers["Content-Type"] == "application/json"
            return json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        raise AssertionError("GET %s: %d %s" % (path, e.code, e.read().decode())) from None


GET_PATHS = [
    "/storage_service/hostid/local", "/storage_service/cluster_name", "/storage_service/schema_version",
    "/storage_service/partitioner_name", "/storage_service/operation_mode", "/storage_service/tokens",
    "/snitch/datacenter", "/snitch/rack", "/system/uptime_ms", "/raft/leader_host", "/raft/group0",
    "/gossiper/endpoint/live", "/gossiper/endpoint/down", "/storage_service/host_id", "/storage_service/load_map",
    "/storage_service/tokens_endpoint", "/failure_detector/endpoints", "/storage_service/ownership/nt",
    "/storage_service/describe_ring/nt", "/storage_service/natural_endpoints/nt?cf=t&key=1",
    "/storage_service/snapshots", "/system/logger", "/column_family/name/keyspace", "/column_family/name",
]


def test_column_family_names_list_keyspaces_and_tables(node):
    # ScyllaDB's tools, and its cqlpy suite, probe the API with this path
    # before flushing through it.
    assert "nt" in get_json(node, "/column_family/name/keyspace")
    assert {"nt:t", "nt:c"} <= set(get_json(node, "/column_family/name"))


def test_every_endpoint_answers_json(node):
    for path in GET_PATHS:
        get_json(node, path)
    assert get_json(node, "/storage_service/operation_mode") == "NORMAL"
    assert get_json(node, "/gossiper/endpoint/live") == [node.address]
    tokens = get_json(node, "/storage_service/tokens_endpoint")
    assert tokens and all(t["value"] == node.address for t in tokens)
    assert [int(t["key"]) for t in tokens] == sorted(int(t["key"]) for t in tokens)
    ring = get_json(node, "/storage_service/describe_ring/nt")
    assert len(ring) == len(tokens) and all(r["endpoints"] == [node.address] for r in ring)
    assert "# TYPE" in node.metrics()


def test_errors_are_json_and_the_server_keeps_serving(node):
    cases = [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET /metrics HTTP/9\r\n\r\n", 400),
        (b"GET /%zz HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"POST /storage_service/drain HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 400),
        (b"GET /no/such/path HTTP/1.1\r\n\r\n", 404),
        (b"POST /metrics HTTP/1.1\r\n\r\n", 405),
        (b"PUT /storage_service/snapshots HTTP/1.1\r\n\r\n", 405),
        (b"GET /storage_service/drain HTTP/1.1\r\n\r\n", 405),
        (b"GET /storage_service/ownership/nosuchks HTTP/1.1\r\n\r\n", 400),
        (b"GET /storage_service/natural_endpoints/nt?cf=t&key=notanint HTTP/1.1\r\n\r\n", 400),
        (b"POST /storage_service/snapshots HTTP/1.1\r\n\r\n", 400),
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n", 431),
    ]
    for request, status in cases:
        got, body = raw(node, request)
        assert got == status, (request[:60], got, body)
        error = json.loads(body)
        assert error["code"] == status and error["message"], body
    assert get_json(node, "/storage_service/operation_mode") == "NORMAL"


def test_a_client_that_never_finishes_is_dropped(node):
    with socket.create_connection((node.address, node.api_port), timeout=HEAD_READ_TIMEOUT_S + 10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        assert s.recv(100) == b""
        waited = time.monotonic() - started
    assert HEAD_READ_TIMEOUT_S - 1 <= waited <= HEAD_READ_TIMEOUT_S + 5, waited
    # Others were served meanwhile, and still are.
    assert get_json(node, "/storage_service/operation_mode") == "NORMAL"


def test_paths_and_queries_are_percent_decoded(node):
    module = "shoal_cluster::failure_detector"
    status, body = raw(node, b"POST /system/logger/shoal_cluster%3A%3Afailure_detector?level=de%62ug HTTP/1.1\r\n\r\n")
    assert status == 200, body
    assert get_json(node, "/system/logger")["modules"] == {module: "debug"}
    node.nodetool("setlogginglevel")
    assert get_json(node, "/system/logger")["modules"] == {}
    node.nodetool("setlogginglevel", module, "trace")
    assert json.loads(node.nodetool("getlogginglevels"))["modules"] == {module: "trace"}
    node.nodetool("setlogginglevel")


def ring_rows(out):
    """The ring's token rows (split on blanks), after checking its header
    and that the line above the rows names the last token."""
    lines = out.splitlines()
    assert any(l.startswith("Datacenter: ") for l in lines), out
    header = next(i for i, l in enumerate(lines) if l.startswith("Address"))
    assert lines[header].split() == ["Address", "Rack", "Status", "State", "Load", "Owns", "Token"], out
    rows = [l.split() for l in lines[header + 2:] if l.strip()]
    tokens = [int(r[-1]) for r in rows]
    assert tokens == sorted(tokens) and int(lines[header + 1].strip()) == tokens[-1], out
    return rows


def test_ring(node):
    rows = ring_rows(node.nodetool("ring"))
    assert len(rows) == len(get_json(node, "/storage_service/tokens"))
    assert all(r[0] == node.address and r[2] == "Up" and r[3] == "Normal" for r in rows), rows
    assert all(r[-2] == "100.00%" for r in ring_rows(node.nodetool("ring", "nt")))


def test_describecluster(node):
    out = node.nodetool("describecluster")
    assert out.startswith("Cluster Information:\n"), out
    fields = dict(re.findall(r"^\t(\w+): (.*)$", out, re.M))
    assert fields["Partitioner"] == "org.apache.cassandra.dht.Murmur3Partitioner"
    assert fields["Name"] == get_json(node, "/storage_service/cluster_name")
    version = get_json(node, "/storage_service/schema_version")
    assert re.search(r"^\t\t%s: \[%s\]$" % (version, re.escape(node.address)), out, re.M), out


def test_gossipinfo(node):
    out = node.nodetool("gossipinfo")
    lines = out.splitlines()
    assert lines[0] == "/" + node.address, out
    states = dict(l.strip().split(":", 1) for l in lines[1:])
    assert states["STATUS"] == "NORMAL" and states["IS_ALIVE"] == "true"
    assert states["HOST_ID"] == get_json(node, "/storage_service/hostid/local")


def test_getendpoints(node):
    assert node.nodetool("getendpoints", "nt", "t", "7").split() == [node.address]
    assert node.nodetool("getendpoints", "nt", "c", "x y:3").split() == [node.address]
    bad = subprocess.run([SHOAL_BIN, "nodetool", "--host", node.address, "--api-port", str(node.api_port),
                          "getendpoints", "nt", "c", "only-one"], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "2 component(s)" in bad.stderr, bad


def snapshot_rows(out):
    """(tag, keyspace, table) of each row of listsnapshots."""
    lines = out.splitlines()
    if "There are no snapshots" in lines:
        return []
    header = lines.index(next(l for l in lines if l.startswith("Snapshot name")))
    rows = []
    for line in lines[header + 1:]:
        if not line.strip():
            break
        rows.append(tuple(line.split()[:3]))
    return rows


def test_listsnapshots_and_clearsnapshot(node):
    assert snapshot_rows(node.nodetool("listsnapshots")) == []
    node.nodetool("snapshot", "-t", "one", "nt")
    node.nodetool("snapshot", "-t", "two", "nt")
    out = node.nodetool("listsnapshots")
    rows = snapshot_rows(out)
    assert ("one", "nt", "t") in rows and ("two", "nt", "t") in rows, out
    assert "Total TrueDiskSpaceUsed: " in out
    cleared = node.nodetool("clearsnapshot", "-t", "one", "nt")
    assert "with snapshot name [one]" in cleared, cleared
    rows = snapshot_rows(node.nodetool("listsnapshots"))
    assert not [r for r in rows if r[0] == "one"] and ("two", "nt", "t") in rows
    node.nodetool("clearsnapshot")
    assert snapshot_rows(node.nodetool("listsnapshots")) == []

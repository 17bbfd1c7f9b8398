"""The monitoring files in dist/ (issue 30 item 5) query what a node
exports: every metric name the Grafana dashboards and their variables use
is in a running node's /metrics (Prometheus' own `up` aside), and each
dashboard is valid JSON with the panels Grafana needs to load it.
"""
import glob
import json
import os
import re
import socket

import pytest

from node import skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

DIST = os.path.join(os.path.dirname(__file__), "..", "..", "dist")
DASHBOARDS = sorted(glob.glob(os.path.join(DIST, "grafana", "*.json")))
# Made by Prometheus itself, not by a node.
PROMETHEUS_OWN = {"up"}


def queries(dashboard):
    """Every PromQL expression in the dashboard: panel targets and
    template variables."""
    found = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    found += [v["query"] for v in dashboard.get("templating", {}).get("list", []) if v.get("type") == "query"]
    return found


def metric_names(expr):
    return set(re.findall(r"\b(shoal_[a-z0-9_]+|up)\b", expr))


def exported(metrics_text):
    """The sample names a /metrics text carries."""
    names = set()
    for line in metrics_text.splitlines():
        if line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def test_dashboards_are_there_and_load():
    assert DASHBOARDS, "no dashboard in dist/grafana"
    for path in DASHBOARDS:
        dashboard = json.load(open(path))
        assert dashboard["title"] and dashboard["uid"]
        ids = [p["id"] for p in dashboard["panels"]]
        assert len(ids) == len(set(ids)), "panel ids repeat in %s" % path
        for panel in dashboard["panels"]:
            assert panel["targets"] and all(t["expr"] for t in panel["targets"]), panel["title"]
    assert "job_name: shoal" in open(os.path.join(DIST, "prometheus.yml")).read()


def test_every_metric_the_dashboards_query_is_exported():
    with temp_node("shoal-dashboards-") as node:
        # Traffic, so that metrics registered on first use exist.
        cluster, session = node.session()
        try:
            session.execute("CREATE KEYSPACE dash WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            session.execute("CREATE TABLE dash.t (k int PRIMARY KEY, v int)")
            for k in range(10):
                session.execute("INSERT INTO dash.t (k, v) VALUES (%s, %s)", (k, k))
                list(session.execute("SELECT * FROM dash.t WHERE k = %s", (k,)))
        finally:
            cluster.shutdown()
        with socket.create_connection((node.address, node.memcache_port), timeout=5) as s:
            s.sendall(b"set x 0 0 1\r\n1\r\n")
            assert s.recv(100) == b"STORED\r\n"
        node.nodetool("flush")
        names = exported(node.metrics())
    for path in DASHBOARDS:
        for expr in queries(json.load(open(path))):
            for name in metric_names(expr) - PROMETHEUS_OWN:
                assert name in names, "%s queries %s, which /metrics lacks" % (os.path.basename(path), name)

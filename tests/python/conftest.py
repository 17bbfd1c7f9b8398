"""Shared fixtures for Shoal's real-client (Python driver) tests.

The server is never started here: a runner (tests/run.sh) starts it, or point
the tests at any CQL server with

    SHOAL_HOST (default 127.0.0.1)   SHOAL_PORT (default 9042)
    SHOAL_PEER=cassandra             when the server is Apache Cassandra (the
                                     suite is validated against it; the few
                                     Shoal-only checks are skipped)

Every test module gets its own keyspace (SimpleStrategy, RF 1), dropped at the
end of the module; every test that needs a table creates its own (see the
`table` fixture), so no test depends on another's data.
"""

import hashlib
import importlib.util
import os
import re
import time
import uuid

import pytest

from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

HOST = os.environ.get("SHOAL_HOST", "127.0.0.1")
PORT = int(os.environ.get("SHOAL_PORT", "9042"))
PEER = os.environ.get("SHOAL_PEER", "shoal").lower()
IS_CASSANDRA = PEER == "cassandra"

# Both cassandra-driver and scylla-driver install a module named `cassandra`;
# only scylla-driver has cassandra.shard_info.
IS_SCYLLA_DRIVER = importlib.util.find_spec("cassandra.shard_info") is not None

# test_shard_aware.py needs scylla-driver (run from .venv-scylla); the other
# files are written for the DataStax driver in .venv.
collect_ignore = [] if IS_SCYLLA_DRIVER else ["test_shard_aware.py"]

REQUEST_TIMEOUT = float(os.environ.get("SHOAL_TEST_REQUEST_TIMEOUT", "30"))


def make_cluster(**kwargs):
    """A Cluster configured the way the suite promises: protocol v4, token-aware."""
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
        request_timeout=REQUEST_TIMEOUT,
    )
    opts = dict(
        contact_points=[HOST],
        port=PORT,
        protocol_version=4,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=10,
        control_connection_timeout=10,
        max_schema_agreement_wait=20,
    )
    opts.update(kwargs)
    return Cluster(**opts)


@pytest.fixture(scope="session")
def cluster():
    c = make_cluster()
    try:
        c.connect().shutdown()
    except Exception as e:  # make "server is not running" obvious
        c.shutdown()
        pytest.exit("cannot connect to a CQL server at %s:%d: %r" % (HOST, PORT, e), returncode=3)
    yield c
    c.shutdown()


@pytest.fixture(scope="session")
def admin(cluster):
    """A session with no keyspace set (for DDL on keyspaces, system tables)."""
    s = cluster.connect()
    yield s
    s.shutdown()


def _module_keyspace_name(module_name):
    base = re.sub(r"[^a-z0-9_]", "_", module_name.rsplit(".", 1)[-1].lower())
    return ("shoal_%s_%s" % (base, uuid.uuid4().hex[:8]))[:48]


@pytest.fixture(scope="module")
def keyspace(admin, request):
    """A fresh keyspace for the module (SimpleStrategy, RF 1), dropped afterwards."""
    ks = _module_keyspace_name(request.module.__name__)
    admin.execute(
        "CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % ks
    )
    yield ks
    admin.execute("DROP KEYSPACE IF EXISTS %s" % ks)


@pytest.fixture(scope="module")
def session(cluster, keyspace):
    """A session whose current keyspace is the module's keyspace."""
    s = cluster.connect(keyspace)
    yield s
    s.shutdown()


def unique_name(request, prefix="t"):
    """A table name unique to the calling test (<= 48 chars, valid identifier)."""
    node = request.node.nodeid
    short = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")
    short = re.sub(r"^test_", "", short)[:30]
    digest = hashlib.sha1(node.encode()).hexdigest()[:6]
    return "%s_%s_%s" % (prefix, short, digest)


@pytest.fixture
def tname(request):
    return unique_name(request)


@pytest.fixture
def table(session, request):
    """Factory: table("(k int PRIMARY KEY, v int)", options="...") -> created table name.

    The table is unique to the test; it lives until the module's keyspace is dropped.
    """
    created = []

    def create(columns, options=None, name=None):
        n = name or unique_name(request, prefix="t%d" % len(created))
        cql = "CREATE TABLE %s %s" % (n, columns)
        if options:
            cql += " WITH " + options
        session.execute(cql)
        created.append(n)
        return n

    return create


def wait_until(predicate, timeout=10.0, interval=0.1):
    """Poll predicate() until it returns a truthy value; returns it or None on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


def local_row(sess):
    return sess.execute("SELECT * FROM system.local WHERE key = 'local'").one()

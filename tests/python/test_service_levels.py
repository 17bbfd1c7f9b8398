"""ScyllaDB's service levels (docs/security.md), with a real node and driver.

Service levels are named workload options (a timeout, a workload type,
CPU shares) attached to roles:

- CREATE / ALTER / DROP SERVICE LEVEL with ScyllaDB's option checks and
  texts, `SERVICE_LEVEL` spelled either way, and its cap on how many exist;
- ATTACH / DETACH, LIST [ALL] SERVICE LEVEL(S), LIST [ALL] ATTACHED, LIST
  EFFECTIVE SERVICE LEVEL OF a role (merged through granted roles: the
  smaller timeout and shares, a specified workload type), with ScyllaDB's
  result columns;
- the role's timeout bounds its requests that give no USING TIMEOUT;
- levels and attachments survive a restart and show in DESCRIBE SCHEMA
  WITH INTERNALS;
- a role without permission on ALL SERVICE_LEVELS is refused;
- each level runs its roles' requests in a CPU scheduling group of its
  own, with its shares: two roles saturating a one-shard node, at 1000 and
  200 shares, get the core about 5:1 (asserted loosely, > 2:1, on a shared
  machine); the groups show in /metrics as `sl:NAME` and go with the level.
"""
import re
import threading
import time

import pytest
from cassandra import InvalidRequest, ReadTimeout, Unauthorized, WriteTimeout
from cassandra.protocol import SyntaxException
from cassandra.util import Duration

from node import skip_reason
from test_auth import auth_node, connect

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")


def one(session, statement):
    return session.execute(statement).one()


def effective(session, role):
    rows = session.execute(f"LIST EFFECTIVE SERVICE LEVEL OF {role}")
    return {r.service_level_option: (r.effective_service_level, r.value) for r in rows}


def test_service_levels_are_created_listed_attached_and_dropped():
    with auth_node("shoal-sl-", smp=1) as node:
        cluster, s = connect(node, "cassandra", "cassandra")
        try:
            s.execute("CREATE SERVICE LEVEL sl1")
            listed = one(s, "LIST SERVICE LEVEL sl1")
            assert (listed.service_level, listed.timeout, listed.workload_type, listed.shares) == \
                ("sl1", None, None, 1000)
            s.execute("ALTER SERVICE LEVEL sl1 WITH timeout = 575ms")
            assert one(s, "LIST SERVICE LEVEL sl1").timeout == Duration(0, 0, 575000000)
            s.execute("ALTER SERVICE_LEVEL sl1 WITH timeout = 2h AND workload_type = 'batch' AND shares = 500")
            listed = one(s, "LIST SERVICE LEVEL sl1")
            assert (listed.timeout, listed.workload_type, listed.shares) == \
                (Duration(0, 0, 2 * 60 * 60 * 10**9), "batch", 500)
            s.execute("ALTER SERVICE LEVEL sl1 WITH timeout = null")
            assert not one(s, "LIST SERVICE LEVEL sl1").timeout
            assert s.execute("LIST SERVICE LEVEL nosuch").all() == []

            for bad in ["1ns", "-5s", "writetime", "10d", "5y", "7", "0"]:
                with pytest.raises(InvalidRequest):
                    s.execute(f"ALTER SERVICE LEVEL sl1 WITH timeout = {bad}")
            with pytest.raises(InvalidRequest, match="Timeout values must be expressed in millisecond granularity"):
                s.execute("ALTER SERVICE LEVEL sl1 WITH timeout = 1ns")
            with pytest.raises(SyntaxException, match=r"'SHARES' can only take values of 1-1000 \(given 0\)"):
                s.execute("ALTER SERVICE LEVEL sl1 WITH shares = 0")
            with pytest.raises(InvalidRequest, match="Invalid workload type: busy"):
                s.execute("ALTER SERVICE LEVEL sl1 WITH workload_type = 'busy'")
            with pytest.raises(InvalidRequest, match="The service level 'sl1' already exists."):
                s.execute("CREATE SERVICE LEVEL sl1")
            s.execute("CREATE SERVICE LEVEL IF NOT EXISTS sl1")
            with pytest.raises(InvalidRequest, match="The service level 'nosuch' doesn't exist."):
                s.execute("ALTER SERVICE LEVEL nosuch WITH shares = 5")

            s.execute("CREATE SERVICE LEVEL sl2 WITH shares = 200 AND timeout = 10s")
            everything = s.execute("LIST ALL SERVICE LEVELS").all()
            assert [(r.service_level, r.shares, r[4]) for r in everything] == \
                [("sl1", 500, "71.43%"), ("sl2", 200, "28.57%")]

            s.execute("CREATE ROLE r1 WITH LOGIN = true AND PASSWORD = 'p1'")
            s.execute("CREATE ROLE r2")
            with pytest.raises(InvalidRequest, match="Role r1 doesn't have assigned any service level"):
                s.execute("LIST EFFECTIVE SERVICE LEVEL OF r1")
            with pytest.raises(InvalidRequest, match="Service Level nosuch doesn't exists."):
                s.execute("ATTACH SERVICE LEVEL nosuch TO r1")
            s.execute("ATTACH SERVICE LEVEL sl1 TO r1")
            s.execute("ATTACH SERVICE LEVEL sl2 TO r2")
            attached = one(s, "LIST ATTACHED SERVICE LEVEL OF r1")
            assert (attached.role, attached.service_level) == ("r1", "sl1")
            assert [tuple(r) for r in s.execute("LIST ALL ATTACHED SERVICE LEVELS")] == [("r1", "sl1"), ("r2", "sl2")]
            assert effective(s, "r1") == {
                "workload_type": ("sl1", "batch"), "timeout": ("sl1", None), "shares": ("sl1", "500")}
            s.execute("GRANT r2 TO r1")
            assert effective(s, "r1") == {
                "workload_type": ("sl1", "batch"), "timeout": ("sl2", "10s"), "shares": ("sl2", "200")}
            assert effective(s, "r2") == {
                "workload_type": ("sl2", "unspecified"), "timeout": ("sl2", "10s"), "shares": ("sl2", "200")}

            # ScyllaDB's cap (its scheduling groups): four more make six.
            for n in range(4):
                s.execute(f"CREATE SERVICE LEVEL extra{n}")
            with pytest.raises(InvalidRequest, match="Can't create service level - no more scheduling groups exist"):
                s.execute("CREATE SERVICE LEVEL one_too_many")
            for n in range(4):
                s.execute(f"DROP SERVICE LEVEL extra{n}")

            described = [r.create_statement for r in s.execute("DESCRIBE SCHEMA WITH INTERNALS")]
            assert "CREATE SERVICE LEVEL sl1 WITH WORKLOAD_TYPE = 'batch' AND SHARES = 500;" in described
            assert "ATTACH SERVICE LEVEL sl2 TO r2;" in described
        finally:
            cluster.shutdown()

        node.stop()
        node.start()
        cluster, s = connect(node, "cassandra", "cassandra")
        try:
            assert [tuple(r) for r in s.execute("LIST ALL ATTACHED SERVICE LEVELS")] == [("r1", "sl1"), ("r2", "sl2")]
            assert one(s, "LIST SERVICE LEVEL sl2").timeout == Duration(0, 0, 10 * 10**9)
            s.execute("DETACH SERVICE LEVEL FROM r1")
            assert s.execute("LIST ATTACHED SERVICE LEVEL OF r1").all() == []
            assert effective(s, "r1")["shares"] == ("sl2", "200"), "still through r2"
            s.execute("DROP SERVICE LEVEL sl2")
            assert s.execute("LIST ALL ATTACHED SERVICE LEVELS").all() == []
            with pytest.raises(InvalidRequest, match="Service Level sl2 doesn't exists."):
                s.execute("DROP SERVICE LEVEL sl2")
            s.execute("DROP SERVICE LEVEL IF EXISTS sl2")
        finally:
            cluster.shutdown()


def test_a_roles_service_level_timeout_bounds_its_requests():
    with auth_node("shoal-sl-timeout-", smp=1) as node:
        cluster, admin = connect(node, "cassandra", "cassandra")
        try:
            admin.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            admin.execute("CREATE TABLE ks.t (p int PRIMARY KEY, v int)")
            admin.execute("CREATE ROLE hasty WITH LOGIN = true AND PASSWORD = 'h'")
            admin.execute("CREATE SERVICE LEVEL never WITH timeout = 0ms")
            admin.execute("ATTACH SERVICE LEVEL never TO hasty")
            hasty_cluster, hasty = connect(node, "hasty", "h")
            try:
                with pytest.raises(ReadTimeout):
                    hasty.execute("SELECT * FROM ks.t WHERE p = 1")
                with pytest.raises(WriteTimeout):
                    hasty.execute("INSERT INTO ks.t (p, v) VALUES (1, 1)")
                # A statement's own USING TIMEOUT wins.
                hasty.execute("INSERT INTO ks.t (p, v) VALUES (1, 1) USING TIMEOUT 10s")
                assert hasty.execute("SELECT v FROM ks.t WHERE p = 1 USING TIMEOUT 10s").one().v == 1
                # Other roles are not bound by it.
                assert admin.execute("SELECT v FROM ks.t WHERE p = 1").one().v == 1
                admin.execute("DETACH SERVICE LEVEL FROM hasty")
                assert hasty.execute("SELECT v FROM ks.t WHERE p = 1").one().v == 1
            finally:
                hasty_cluster.shutdown()
        finally:
            cluster.shutdown()


def test_service_level_statements_need_permissions():
    with auth_node("shoal-sl-auth-", smp=1, authorizer=True) as node:
        cluster, admin = connect(node, "cassandra", "cassandra")
        try:
            admin.execute("CREATE ROLE operator WITH LOGIN = true AND PASSWORD = 'o'")
            op_cluster, op = connect(node, "operator", "o")
            try:
                with pytest.raises(Unauthorized, match="has no CREATE permission on <all service levels>"):
                    op.execute("CREATE SERVICE LEVEL sl")
                admin.execute("GRANT CREATE ON ALL SERVICE_LEVELS TO operator")
                op.execute("CREATE SERVICE LEVEL sl")
                with pytest.raises(Unauthorized, match="has no DESCRIBE permission on <all service levels>"):
                    op.execute("LIST ALL SERVICE LEVELS")
                assert [r.service_level for r in admin.execute("LIST ALL SERVICE LEVELS")] == ["sl"]
            finally:
                op_cluster.shutdown()
        finally:
            cluster.shutdown()


def by_group(metrics, name):
    """A scheduler metric's value per group label."""
    return {g: float(v) for g, v in re.findall(r'^%s\{[^}]*group="([^"]+)"[^}]*\} (\S+)$' % name, metrics, re.M)}


def prepare_competition(session, rows=8000):
    """A partition whose count(*) costs the server far more than the
    client (milliseconds): the loaders then saturate the server, not
    themselves, even on a busy machine."""
    session.execute("CREATE KEYSPACE IF NOT EXISTS sl WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE IF NOT EXISTS sl.t (p int, c int, v int, PRIMARY KEY (p, c))")
    for first in range(0, rows, 200):
        inserts = " ".join(f"INSERT INTO sl.t (p, c, v) VALUES (0, {c}, {c});" for c in range(first, first + 200))
        session.execute(f"BEGIN UNLOGGED BATCH {inserts} APPLY BATCH")


def compete(node, roles, seconds, threads=8):
    """Each of `roles` ((name, password)) runs `threads` synchronous loaders
    of the count(*) for `seconds`, all at once; their completed requests."""
    sessions = []
    try:
        for role, password in roles:
            sessions.append(connect(node, role, password))
        statements = [s.prepare("SELECT count(*) FROM sl.t WHERE p = 0") for _, s in sessions]
        for (_, s), statement in zip(sessions, statements):
            s.execute(statement)  # warm: connections, the row cache
        done = [0] * len(roles)
        lock = threading.Lock()
        start = threading.Barrier(len(roles) * threads + 1)
        stop = time.monotonic() + seconds + 0.2

        def load(i):
            session, statement = sessions[i][1], statements[i]
            start.wait()
            n = 0
            while time.monotonic() < stop:
                session.execute(statement)
                n += 1
            with lock:
                done[i] += n

        loaders = [threading.Thread(target=load, args=(i,)) for i in range(len(roles)) for _ in range(threads)]
        for t in loaders:
            t.start()
        start.wait()
        for t in loaders:
            t.join()
        return done
    finally:
        for cluster, _ in sessions:
            cluster.shutdown()


def create_competitors(session, shares=(1000, 200)):
    """Roles `high` and `low` attached to levels of `shares`."""
    for name, level_shares in zip(("high", "low"), shares):
        session.execute(f"CREATE SERVICE LEVEL {name} WITH shares = {level_shares}")
        session.execute(f"CREATE ROLE {name} WITH LOGIN = true AND PASSWORD = '{name}'")
        session.execute(f"ATTACH SERVICE LEVEL {name} TO {name}")
    return [("high", "high"), ("low", "low")]


def test_levels_share_a_saturated_shard_by_their_shares():
    with auth_node("shoal-sl-shares-", smp=1) as node:
        cluster, s = connect(node, "cassandra", "cassandra")
        try:
            prepare_competition(s)
            roles = create_competitors(s)
            high, low = compete(node, roles, seconds=5)
            assert high > 2 * low, f"1000:200 shares completed {high}:{low} requests"

            metrics = node.metrics()
            shares = by_group(metrics, "scylla_scheduler_shares")
            assert (shares.get("sl:high"), shares.get("sl:low"), shares.get("statement")) == (1000, 200, 1000)
            runtime = by_group(metrics, "scylla_scheduler_runtime_ms")
            assert runtime["sl:high"] > 2 * runtime["sl:low"] > 0, runtime
            tasks = by_group(metrics, "scylla_scheduler_tasks_processed")
            assert tasks["sl:high"] >= high and tasks["sl:low"] >= low, tasks
            assert by_group(metrics, "scylla_scheduler_waittime_ms")["sl:low"] > 0

            # A level's shares follow ALTER; its group goes with DROP.
            s.execute("ALTER SERVICE LEVEL low WITH shares = 500")
            assert by_group(node.metrics(), "scylla_scheduler_shares")["sl:low"] == 500
            s.execute("DROP SERVICE LEVEL low")
            assert "sl:low" not in by_group(node.metrics(), "scylla_scheduler_shares")
            # Its role's requests now run in the default group.
            before = by_group(node.metrics(), "scylla_scheduler_tasks_processed")["statement"]
            low_cluster, low_session = connect(node, "low", "low")
            try:
                for _ in range(20):
                    low_session.execute("SELECT count(*) FROM sl.t WHERE p = 0")
            finally:
                low_cluster.shutdown()
            assert by_group(node.metrics(), "scylla_scheduler_tasks_processed")["statement"] >= before + 20
        finally:
            cluster.shutdown()

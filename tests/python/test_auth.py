"""CQL authentication and roles (docs/security.md), with real clients.

Each test runs a node of its own (node.py) with `authenticator:
PasswordAuthenticator` in a YAML file, as a user would write it:

- the default superuser cassandra/cassandra, created once, with a warning;
- the Python driver with PlainTextAuthProvider; a wrong password and an
  unknown user get AuthenticationFailed with Cassandra's text; a client
  without credentials is refused; cqlsh -u/-p;
- a client that never logs in is hung up on after the deadline;
- CREATE/ALTER/DROP ROLE and USER, GRANT/REVOKE role, LIST ROLES/USERS
  with Cassandra's columns and error texts, `system_auth` readable, and
  roles kept across a restart;
- `authorizer: CassandraAuthorizer`: a role that may SELECT one table
  and nothing else (Cassandra's Unauthorized texts), prepared statements
  checked at EXECUTE, a REVOKE taking effect on the next statement,
  inheritance through a granted role, the creator's ALL, LIST PERMISSIONS;
  DESCRIBE showing every role the whole schema, as ScyllaDB's does;
  `DESCRIBE SCHEMA WITH INTERNALS AND PASSWORDS` (superusers only) restoring
  roles, their passwords, role grants and permissions on a new node;
- three nodes: a role created on one logs in on another at once, and a
  REVOKE on one node holds at the very next statement on every shard of
  every node (connections of our own on each shard, through the
  shard-aware port), however long permissions are cached, and even on a
  node that lagged (SIGSTOP) while the others agreed on it.
"""
import contextlib
import os
import re
import signal
import socket
import struct
import subprocess
import time

import pytest
from cassandra import AuthenticationFailed, InvalidRequest, Unauthorized
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import NoHostAvailable
from cassandra.protocol import SyntaxException
from cassandra.policies import WhiteListRoundRobinPolicy

from node import free_port, skip_reason, start_cluster, temp_node

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOGIN_TIMEOUT_MS = 1500


@contextlib.contextmanager
def auth_node(prefix="shoal-auth-", smp=2, authorizer=False):
    """A node with password authentication (and the authorizer), configured by YAML."""
    with temp_node(prefix, start=False, smp=smp) as node:
        options = os.path.join(node.workdir, "shoal.yaml")
        with open(options, "w") as f:
            f.write("authenticator: PasswordAuthenticator\n")
            f.write("tls_handshake_timeout_in_ms: %d\n" % LOGIN_TIMEOUT_MS)
            if authorizer:
                f.write("authorizer: CassandraAuthorizer\npermissions_validity_in_ms: 60000\n")
        node.args = ["--options-file", options]
        node.start()
        yield node


def connect(node, user, password):
    cluster = node.cluster(auth_provider=PlainTextAuthProvider(username=user, password=password))
    return cluster, cluster.connect()


def refusal(node, **kwargs):
    """The AuthenticationFailed a connection attempt ends with."""
    cluster = node.cluster(**kwargs)
    try:
        with pytest.raises(NoHostAvailable) as failed:
            cluster.connect()
    finally:
        cluster.shutdown()
    (error,) = failed.value.errors.values()
    return error


def test_login_with_the_default_superuser_and_bad_credentials():
    with auth_node() as node:
        assert "Created default superuser role 'cassandra'" in node.last_start_log()
        cluster, session = connect(node, "cassandra", "cassandra")
        try:
            rows = list(session.execute("LIST ROLES"))
            assert [(r.role, r.super, r.login, r.options) for r in rows] == [("cassandra", True, True, {})]
        finally:
            cluster.shutdown()
        wrong = refusal(node, auth_provider=PlainTextAuthProvider(username="cassandra", password="nope"))
        assert isinstance(wrong, AuthenticationFailed), wrong
        assert "Provided username cassandra and/or password are incorrect" in str(wrong)
        unknown = refusal(node, auth_provider=PlainTextAuthProvider(username="mallory", password="x"))
        assert "Provided username mallory and/or password are incorrect" in str(unknown)
        # No credentials: the driver is asked to authenticate and cannot.
        anonymous = refusal(node)
        assert isinstance(anonymous, AuthenticationFailed), anonymous
        # A restart finds the superuser and creates no other.
        node.stop()
        node.start()
        assert "Created default superuser" not in node.last_start_log()
        cluster, session = connect(node, "cassandra", "cassandra")
        cluster.shutdown()


def frame(opcode, body=b"", stream=0):
    return struct.pack(">BBhBI", 4, 0, stream, opcode, len(body)) + body


def read_frame(sock):
    header = b""
    while len(header) < 9:
        chunk = sock.recv(9 - len(header))
        if not chunk:
            return None
        header += chunk
    _, _, _, opcode, length = struct.unpack(">BBhBI", header)
    body = b""
    while len(body) < length:
        body += sock.recv(length - len(body))
    return opcode, body


def startup_body():
    options = [(b"CQL_VERSION", b"3.0.0")]
    out = struct.pack(">H", len(options))
    for k, v in options:
        out += struct.pack(">H", len(k)) + k + struct.pack(">H", len(v)) + v
    return out


def test_the_login_exchange_on_the_wire():
    with auth_node() as node:
        with socket.create_connection((node.address, node.cql_port), timeout=10) as s:
            # A query before STARTUP is refused (ProtocolError 0x000A).
            s.sendall(frame(0x07, struct.pack(">I", 8) + b"SELECT 1" + struct.pack(">HB", 1, 0)))
            opcode, body = read_frame(s)
            assert opcode == 0x00 and struct.unpack(">i", body[:4])[0] == 0x000A, body
            assert b"expecting STARTUP or OPTIONS" in body
            s.sendall(frame(0x01, startup_body()))
            opcode, body = read_frame(s)
            assert opcode == 0x03, (opcode, body)  # AUTHENTICATE
            assert b"org.apache.cassandra.auth.PasswordAuthenticator" in body
            token = b"\0cassandra\0bad"
            s.sendall(frame(0x0F, struct.pack(">i", len(token)) + token))
            opcode, body = read_frame(s)
            assert opcode == 0x00 and struct.unpack(">i", body[:4])[0] == 0x0100, body  # BadCredentials
            garbage = b"no-nul-here"
            s.sendall(frame(0x0F, struct.pack(">i", len(garbage)) + garbage))
            opcode, body = read_frame(s)
            assert struct.unpack(">i", body[:4])[0] == 0x0100 and b"Authentication ID must not be null" in body
            token = b"\0cassandra\0cassandra"
            s.sendall(frame(0x0F, struct.pack(">i", len(token)) + token))
            opcode, body = read_frame(s)
            assert opcode == 0x10, (opcode, body)  # AUTH_SUCCESS
        # A client that stalls before logging in is hung up on.
        with socket.create_connection((node.address, node.cql_port), timeout=10) as s:
            s.sendall(frame(0x01, startup_body()))
            assert read_frame(s)[0] == 0x03
            started = time.monotonic()
            assert read_frame(s) is None, "the node should hang up"
            waited = time.monotonic() - started
            assert waited < LOGIN_TIMEOUT_MS / 1000 + 5, waited


def test_roles_users_and_their_errors():
    with auth_node() as node:
        cluster, session = connect(node, "cassandra", "cassandra")
        try:
            session.execute("CREATE ROLE admin WITH PASSWORD = 'adm' AND LOGIN = true AND SUPERUSER = true")
            session.execute("CREATE ROLE IF NOT EXISTS admin")
            with pytest.raises(InvalidRequest, match="admin already exists"):
                session.execute("CREATE ROLE admin")
            session.execute("CREATE ROLE reader WITH OPTIONS = {'team': 'data'}")
            session.execute("CREATE USER bob WITH PASSWORD 'pw' NOSUPERUSER")
            session.execute("GRANT reader TO bob")
            with pytest.raises(InvalidRequest, match="bob is a member of reader"):
                session.execute("GRANT reader TO bob")
            with pytest.raises(InvalidRequest, match="nobody doesn't exist"):
                session.execute("GRANT reader TO nobody")
            rows = {r.role: (r.super, r.login, r.options) for r in session.execute("LIST ROLES")}
            assert rows == {
                "admin": (True, True, {}),
                "bob": (False, True, {}),
                "cassandra": (True, True, {}),
                "reader": (False, False, {"team": "data"}),
            }
            assert [r.role for r in session.execute("LIST ROLES OF bob")] == ["bob", "reader"]
            assert sorted((r.name, r.super) for r in session.execute("LIST USERS")) == [
                ("admin", True), ("bob", False), ("cassandra", True)]
            roles = {r.role: r for r in session.execute("SELECT * FROM system_auth.roles")}
            assert roles["bob"].member_of == {"reader"} and roles["bob"].salted_hash.startswith("$2")
            members = [(r.role, r.member) for r in session.execute("SELECT * FROM system_auth.role_members")]
            assert members == [("reader", "bob")]
        finally:
            cluster.shutdown()

        # bob logs in, sees only his roles, and may not make himself a superuser.
        cluster, session = connect(node, "bob", "pw")
        try:
            assert [r.role for r in session.execute("LIST ROLES")] == ["bob", "reader"]
            with pytest.raises(Unauthorized, match="Only superusers can create a role with superuser status"):
                session.execute("CREATE ROLE boss WITH SUPERUSER = true")
            with pytest.raises(Unauthorized, match="Cannot DROP primary role for current login"):
                session.execute("DROP ROLE bob")
            session.execute("ALTER ROLE bob WITH PASSWORD = 'pw2'")
        finally:
            cluster.shutdown()
        assert isinstance(refusal(node, auth_provider=PlainTextAuthProvider("bob", "pw")), AuthenticationFailed)

        cluster, session = connect(node, "bob", "pw2")
        cluster.shutdown()
        # Roles survive a restart (the schema file keeps them).
        node.stop()
        node.start()
        cluster, session = connect(node, "admin", "adm")
        try:
            session.execute("ALTER ROLE bob WITH LOGIN = false")
            session.execute("REVOKE reader FROM bob")
            with pytest.raises(InvalidRequest, match="bob is not a member of reader"):
                session.execute("REVOKE reader FROM bob")
        finally:
            cluster.shutdown()
        refused = refusal(node, auth_provider=PlainTextAuthProvider("bob", "pw2"))
        assert "bob is not permitted to log in" in str(refused)
        cluster, session = connect(node, "admin", "adm")
        try:
            session.execute("DROP USER bob")
            session.execute("DROP ROLE IF EXISTS bob")
            with pytest.raises(InvalidRequest, match="bob doesn't exist"):
                session.execute("DROP ROLE bob")
        finally:
            cluster.shutdown()


def test_cqlsh_with_user_and_password():
    cqlsh = os.path.join(ROOT, ".venv", "bin", "cqlsh")
    if not os.path.exists(cqlsh):
        pytest.skip("cqlsh is not installed in .venv")
    with auth_node() as node:
        base = [cqlsh, node.address, str(node.cql_port)]
        out = subprocess.run(base + ["-u", "cassandra", "-p", "cassandra", "-e", "LIST ROLES"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "cassandra" in out.stdout and "super" in out.stdout
        bad = subprocess.run(base + ["-u", "cassandra", "-p", "wrong", "-e", "LIST ROLES"],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode != 0
        assert "Provided username cassandra and/or password are incorrect" in bad.stdout + bad.stderr


def no_permission(user, permission, resource):
    return "User %s has no %s permission on %s or any of its parents" % (user, permission, resource)


def reader_of_one_table(admin, *others):
    """Keyspace ks with table t (one row) and `others`, and the role alice
    (password a) that may SELECT from ks.t alone."""
    admin.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    for table in ("t",) + others:
        admin.execute("CREATE TABLE ks.%s (k int PRIMARY KEY, v text)" % table)
    admin.execute("INSERT INTO ks.t (k, v) VALUES (1, 'one')")
    admin.execute("CREATE ROLE alice WITH PASSWORD = 'a' AND LOGIN = true")
    admin.execute("GRANT SELECT ON TABLE ks.t TO alice")


def test_a_role_that_may_read_one_table_and_nothing_else():
    with auth_node(authorizer=True) as node:
        admin_cluster, admin = connect(node, "cassandra", "cassandra")
        try:
            reader_of_one_table(admin, "u")
            cluster, alice = connect(node, "alice", "a")
            try:
                assert [r.v for r in alice.execute("SELECT v FROM ks.t WHERE k = 1")] == ["one"]
                assert len(list(alice.execute("SELECT * FROM system.local"))) == 1
                assert list(alice.execute("SELECT * FROM system_schema.keyspaces"))
                with pytest.raises(Unauthorized, match=no_permission("alice", "MODIFY", "<table ks.t>")):
                    alice.execute("INSERT INTO ks.t (k, v) VALUES (2, 'two')")
                with pytest.raises(Unauthorized, match=no_permission("alice", "SELECT", "<table ks.u>")):
                    alice.execute("SELECT * FROM ks.u")
                with pytest.raises(Unauthorized, match=no_permission("alice", "DROP", "<table ks.t>")):
                    alice.execute("DROP TABLE ks.t")
                with pytest.raises(Unauthorized, match=no_permission("alice", "CREATE", "<all keyspaces>")):
                    alice.execute("CREATE KEYSPACE k2 WITH replication = {'class': 'SimpleStrategy'}")
                with pytest.raises(Unauthorized, match=no_permission("alice", "AUTHORIZE", "<table ks.t>")):
                    alice.execute("GRANT SELECT ON ks.t TO alice")
                with pytest.raises(Unauthorized, match="You are not authorized to view everyone's permissions"):
                    alice.execute("LIST ALL PERMISSIONS")
                mine = [tuple(r) for r in alice.execute("LIST ALL PERMISSIONS OF alice")]
                assert mine == [("alice", "alice", "<table ks.t>", "SELECT")]
                listed = [tuple(r) for r in admin.execute("LIST ALL PERMISSIONS OF alice")]
                assert listed == mine
                rows = [(r.role, r.resource, r.permissions) for r in admin.execute(
                    "SELECT * FROM system_auth.role_permissions WHERE role = 'alice'")]
                assert rows == [("alice", "data/ks/t", {"SELECT"})]
                # Prepared, then revoked: refused at the next EXECUTE.
                read = alice.prepare("SELECT v FROM ks.t WHERE k = ?")
                assert [r.v for r in alice.execute(read, [1])] == ["one"]
                admin.execute("REVOKE SELECT ON ks.t FROM alice")
                with pytest.raises(Unauthorized, match=no_permission("alice", "SELECT", "<table ks.t>")):
                    alice.execute(read, [1])
                # Inherited through a granted role, from the keyspace down.
                admin.execute("CREATE ROLE reader")
                admin.execute("GRANT SELECT ON KEYSPACE ks TO reader")
                admin.execute("GRANT reader TO alice")
                assert [r.v for r in alice.execute(read, [1])] == ["one"]
                assert list(alice.execute("SELECT * FROM ks.u")) == []
                listed = sorted(tuple(r) for r in admin.execute("LIST ALL PERMISSIONS OF alice"))
                assert listed == [("reader", "reader", "<keyspace ks>", "SELECT")]
                assert list(admin.execute("LIST ALL PERMISSIONS OF alice NORECURSIVE")) == []
                # The creator gets ALL on what it creates.
                admin.execute("GRANT CREATE ON ALL KEYSPACES TO alice")
                alice.execute("CREATE KEYSPACE k2 WITH replication = {'class': 'SimpleStrategy', "
                              "'replication_factor': 1}")
                alice.execute("CREATE TABLE k2.x (k int PRIMARY KEY)")
                alice.execute("INSERT INTO k2.x (k) VALUES (1)")
                assert len(list(alice.execute("SELECT * FROM k2.x"))) == 1
                alice.execute("DROP KEYSPACE k2")
                left = [r.resource for r in admin.execute("LIST ALL PERMISSIONS OF alice NORECURSIVE")]
                assert left == ["<all keyspaces>"], left
            finally:
                cluster.shutdown()
        finally:
            admin_cluster.shutdown()


def test_calling_a_user_function_needs_execute_on_it():
    """Cassandra's EXECUTE: checked on every execution of a SELECT that
    calls a user function or aggregate (its state function too); the
    creator of a function gets ALL on it; a dropped function's grants go."""
    with auth_node("shoal-auth-udf-", smp=1, authorizer=True) as node:
        admin_cluster, admin = connect(node, "cassandra", "cassandra")
        try:
            reader_of_one_table(admin)
            admin.execute("CREATE FUNCTION ks.shout(s text) RETURNS NULL ON NULL INPUT RETURNS text "
                          "LANGUAGE lua AS 'return string.upper(s)'")
            cluster, alice = connect(node, "alice", "a")
            try:
                function = "<function ks.shout(text)>"
                with pytest.raises(Unauthorized, match=re.escape(no_permission("alice", "EXECUTE", function))):
                    alice.execute("SELECT ks.shout(v) FROM ks.t WHERE k = 1")
                admin.execute("GRANT EXECUTE ON FUNCTION ks.shout(text) TO alice")
                read = alice.prepare("SELECT ks.shout(v) AS v FROM ks.t WHERE k = ?")
                assert [r.v for r in alice.execute(read, [1])] == ["ONE"]
                admin.execute("REVOKE EXECUTE ON FUNCTION ks.shout(text) FROM alice")
                with pytest.raises(Unauthorized, match=re.escape(no_permission("alice", "EXECUTE", function))):
                    alice.execute(read, [1])
                # A call in a term (here a key's value) is checked alike.
                admin.execute("CREATE FUNCTION ks.first(s text) RETURNS NULL ON NULL INPUT RETURNS int "
                              "LANGUAGE lua AS 'return 1'")
                by_call = "SELECT v FROM ks.t WHERE k = ks.first('x')"
                first = "<function ks.first(text)>"
                with pytest.raises(Unauthorized, match=re.escape(no_permission("alice", "EXECUTE", first))):
                    alice.execute(by_call)
                admin.execute("GRANT EXECUTE ON FUNCTION ks.first(text) TO alice")
                assert [r.v for r in alice.execute(by_call)] == ["one"]
                # Inherited from ALL FUNCTIONS IN KEYSPACE.
                admin.execute("GRANT EXECUTE ON ALL FUNCTIONS IN KEYSPACE ks TO alice")
                assert [r.v for r in alice.execute(read, [1])] == ["ONE"]
                admin.execute("REVOKE EXECUTE ON ALL FUNCTIONS IN KEYSPACE ks FROM alice")
                # As in ScyllaDB, the creator gets nothing on its function
                # (Cassandra grants ALL); grants on it go with it.
                admin.execute("GRANT CREATE ON ALL FUNCTIONS IN KEYSPACE ks TO alice")
                alice.execute("CREATE FUNCTION ks.twice(s text) RETURNS NULL ON NULL INPUT RETURNS text "
                              "LANGUAGE lua AS 'return s .. s'")
                twice = "<function ks.twice(text)>"
                with pytest.raises(Unauthorized, match=re.escape(no_permission("alice", "EXECUTE", twice))):
                    alice.execute("SELECT ks.twice(v) AS v FROM ks.t WHERE k = 1")
                admin.execute("GRANT EXECUTE ON FUNCTION ks.twice(text) TO alice")
                assert alice.execute("SELECT ks.twice(v) AS v FROM ks.t WHERE k = 1").one().v == "oneone"
                mine = [r.resource for r in admin.execute("LIST ALL PERMISSIONS OF alice NORECURSIVE")]
                assert twice in mine
                admin.execute("DROP FUNCTION ks.twice")
                mine = [r.resource for r in admin.execute("LIST ALL PERMISSIONS OF alice NORECURSIVE")]
                assert "<function ks.twice(text)>" not in mine
            finally:
                cluster.shutdown()
        finally:
            admin_cluster.shutdown()


def test_function_ddl_needs_scylladbs_permissions():
    """ScyllaDB's checks (cqlpy test_permissions.py): DROP on the function
    a DROP FUNCTION names (none when it names several overloads: that
    fails on its own); CREATE OR REPLACE needs ALTER on the function too;
    a grant on a function that does not exist is refused."""
    with auth_node("shoal-auth-udfddl-", smp=1, authorizer=True) as node:
        admin_cluster, admin = connect(node, "cassandra", "cassandra")
        try:
            reader_of_one_table(admin)
            body = "CALLED ON NULL INPUT RETURNS int LANGUAGE lua AS 'return 42;'"
            admin.execute("CREATE FUNCTION ks.f(i int) " + body)
            admin.execute("CREATE FUNCTION ks.f(i int, j int) " + body)
            with pytest.raises(InvalidRequest, match="Resource <function ks.nope\\(int\\)> doesn't exist"):
                admin.execute("GRANT EXECUTE ON FUNCTION ks.nope(int) TO alice")
            with pytest.raises(InvalidRequest, match="doesn't exist"):
                admin.execute("GRANT EXECUTE ON FUNCTION nosuchks.f(int) TO alice")
            admin.execute("GRANT DROP ON FUNCTION ks.f(int) TO alice")
            # A permission the resource does not take: Cassandra's grammar
            # refuses it, before anything is authorized.
            with pytest.raises(SyntaxException, match="Resource type FunctionResource does not support the "
                               "requested permissions: CREATE"):
                admin.execute("GRANT CREATE ON FUNCTION ks.f(int, int) TO alice")
            cluster, alice = connect(node, "alice", "a")
            try:
                with pytest.raises(InvalidRequest, match="There are multiple functions named ks.f"):
                    alice.execute("DROP FUNCTION ks.f")
                with pytest.raises(SyntaxException, match="does not support the requested permissions: SELECT"):
                    alice.execute("GRANT SELECT ON FUNCTION ks.nope() TO cassandra")
                with pytest.raises(Unauthorized, match=re.escape(
                        no_permission("alice", "DROP", "<function ks.f(int, int)>"))):
                    alice.execute("DROP FUNCTION ks.f(int, int)")
                alice.execute("DROP FUNCTION ks.f(int)")
                admin.execute("GRANT CREATE ON ALL FUNCTIONS IN KEYSPACE ks TO alice")
                replace = "CREATE OR REPLACE FUNCTION ks.f(i int, j int) " + body
                with pytest.raises(Unauthorized, match=re.escape(
                        no_permission("alice", "ALTER", "<function ks.f(int, int)>"))):
                    alice.execute(replace)
                admin.execute("GRANT ALTER ON FUNCTION ks.f(int, int) TO alice")
                alice.execute(replace)
                # One overload left: DROP FUNCTION without arguments names it.
                with pytest.raises(Unauthorized, match=re.escape(
                        no_permission("alice", "DROP", "<function ks.f(int, int)>"))):
                    alice.execute("DROP FUNCTION ks.f")
            finally:
                cluster.shutdown()
        finally:
            admin_cluster.shutdown()


def test_a_conditional_write_needs_select_too():
    """A write with an IF clause answers with the row it read, so Cassandra
    asks SELECT besides MODIFY, in a BATCH too, even after an unconditional
    write to the same table."""
    with auth_node(authorizer=True) as node:
        admin_cluster, admin = connect(node, "cassandra", "cassandra")
        try:
            reader_of_one_table(admin)
            admin.execute("REVOKE SELECT ON ks.t FROM alice")
            admin.execute("GRANT MODIFY ON ks.t TO alice")
            cluster, alice = connect(node, "alice", "a")
            try:
                alice.execute("INSERT INTO ks.t (k, v) VALUES (2, 'two')")
                refused = no_permission("alice", "SELECT", "<table ks.t>")
                for statement in ["INSERT INTO ks.t (k, v) VALUES (3, 'three') IF NOT EXISTS",
                                  "UPDATE ks.t SET v = 'x' WHERE k = 1 IF v = 'one'",
                                  "DELETE FROM ks.t WHERE k = 1 IF EXISTS",
                                  "BEGIN BATCH INSERT INTO ks.t (k, v) VALUES (1, 'a'); "
                                  "UPDATE ks.t SET v = 'b' WHERE k = 1 IF v = 'one'; APPLY BATCH"]:
                    with pytest.raises(Unauthorized, match=refused):
                        alice.execute(statement)
                assert [r.v for r in admin.execute("SELECT v FROM ks.t WHERE k = 1")] == ["one"]
                admin.execute("GRANT SELECT ON ks.t TO alice")
                assert alice.execute("UPDATE ks.t SET v = 'x' WHERE k = 1 IF v = 'one'").one()[0] is True
            finally:
                cluster.shutdown()
        finally:
            admin_cluster.shutdown()


def test_a_view_is_read_with_its_base_tables_permission():
    """As in ScyllaDB (scylladb#25800), a materialized view has no
    permissions of its own: reading it asks SELECT on its base table, and
    a grant on the view itself changes nothing."""
    with auth_node(authorizer=True) as node:
        admin_cluster, admin = connect(node, "cassandra", "cassandra")
        try:
            reader_of_one_table(admin, "u")
            admin.execute("CREATE MATERIALIZED VIEW ks.by_v AS SELECT * FROM ks.u "
                          "WHERE v IS NOT NULL AND k IS NOT NULL PRIMARY KEY (v, k)")
            admin.execute("INSERT INTO ks.u (k, v) VALUES (1, 'one')")
            admin.execute("GRANT SELECT ON ks.by_v TO alice")
            cluster, alice = connect(node, "alice", "a")
            try:
                with pytest.raises(Unauthorized, match=no_permission("alice", "SELECT", "<table ks.u>")):
                    alice.execute("SELECT * FROM ks.by_v")
                admin.execute("GRANT SELECT ON ks.u TO alice")
                assert [(r.v, r.k) for r in alice.execute("SELECT * FROM ks.by_v")] == [("one", 1)]
                with pytest.raises(Unauthorized, match=no_permission("alice", "ALTER", "<table ks.u>")):
                    alice.execute("DROP MATERIALIZED VIEW ks.by_v")
            finally:
                cluster.shutdown()
        finally:
            admin_cluster.shutdown()


def test_the_creator_of_a_cdc_table_may_read_its_log():
    """ScyllaDB's auto-grant (scylladb#19798): the log CREATE TABLE ... WITH
    cdc, or a later ALTER TABLE ... WITH cdc, leaves is its creator's."""
    with auth_node(authorizer=True) as node:
        admin_cluster, admin = connect(node, "cassandra", "cassandra")
        try:
            reader_of_one_table(admin)
            admin.execute("GRANT CREATE ON KEYSPACE ks TO alice")
            cluster, alice = connect(node, "alice", "a")
            try:
                alice.execute("CREATE TABLE ks.c1 (p int PRIMARY KEY) WITH cdc = {'enabled': true}")
                assert list(alice.execute("SELECT * FROM ks.c1_scylla_cdc_log")) == []
                alice.execute("CREATE TABLE ks.c2 (p int PRIMARY KEY)")
                alice.execute("ALTER TABLE ks.c2 WITH cdc = {'enabled': true}")
                assert list(alice.execute("SELECT * FROM ks.c2_scylla_cdc_log")) == []
                alice.execute("DROP TABLE ks.c1")
                mine = [r.resource for r in admin.execute("LIST ALL PERMISSIONS OF alice NORECURSIVE")]
                assert "<table ks.c1_scylla_cdc_log>" not in mine
                assert "<table ks.c2_scylla_cdc_log>" in mine
            finally:
                cluster.shutdown()
        finally:
            admin_cluster.shutdown()


def test_alter_on_all_roles_may_change_a_superusers_password():
    """As in Cassandra and ScyllaDB (scylladb#14277): another role's
    password, a superuser's too, needs ALTER on that role; superuser status
    itself stays a superuser's to change."""
    with auth_node(authorizer=True) as node:
        admin_cluster, admin = connect(node, "cassandra", "cassandra")
        try:
            admin.execute("CREATE ROLE boss WITH PASSWORD = 'b' AND LOGIN = true AND SUPERUSER = true")
            admin.execute("CREATE ROLE alice WITH PASSWORD = 'a' AND LOGIN = true")
            cluster, alice = connect(node, "alice", "a")
            try:
                with pytest.raises(Unauthorized, match=no_permission("alice", "ALTER", "<role boss>")):
                    alice.execute("ALTER ROLE boss WITH PASSWORD = 'x'")
                admin.execute("GRANT ALTER ON ALL ROLES TO alice")
                alice.execute("ALTER ROLE boss WITH PASSWORD = 'x'")
                with pytest.raises(Unauthorized, match="Only superusers are allowed to alter superuser status"):
                    alice.execute("ALTER ROLE boss WITH SUPERUSER = false")
            finally:
                cluster.shutdown()
            boss_cluster, boss = connect(node, "boss", "x")
            boss_cluster.shutdown()
        finally:
            admin_cluster.shutdown()


def test_describe_shows_a_logged_in_role_the_whole_schema_but_not_the_data():
    """As ScyllaDB, whose DESCRIBE asks only for a login (scylladb#12342:
    the schema tables are readable by every role, so hiding it in DESCRIBE
    would lock one door with the window open), and Cassandra 4/5, whose
    DescribeStatement authorizes nothing: a role sees every keyspace and
    table, and reads only what it was granted."""
    with auth_node(authorizer=True) as node:
        admin_cluster, admin = connect(node, "cassandra", "cassandra")
        try:
            reader_of_one_table(admin, "secret")
            admin.execute("CREATE KEYSPACE other WITH replication = {'class': 'SimpleStrategy', "
                          "'replication_factor': 1}")
            cluster, alice = connect(node, "alice", "a")
            try:
                keyspaces = {r.name for r in alice.execute("DESCRIBE KEYSPACES")}
                assert {"ks", "other", "system_schema"} <= keyspaces, keyspaces
                assert keyspaces == {r.name for r in admin.execute("DESCRIBE KEYSPACES")}
                tables = sorted(r.name for r in alice.execute("DESCRIBE TABLES") if r.keyspace_name == "ks")
                assert tables == ["secret", "t"], tables
                (secret,) = [r.create_statement for r in alice.execute("DESCRIBE TABLE ks.secret")]
                assert secret.startswith("CREATE TABLE ks.secret"), secret
                schema = [(r.keyspace_name, r.type, r.name) for r in alice.execute("DESCRIBE SCHEMA")]
                assert schema == [(r.keyspace_name, r.type, r.name) for r in admin.execute("DESCRIBE SCHEMA")]
                assert ("ks", "table", "secret") in schema and ("other", "keyspace", "other") in schema
                assert [r.keyspace_name for r in alice.execute("DESCRIBE KEYSPACE other")] == ["other"]
                # The schema tables say the same, to every role.
                rows = alice.execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'ks'")
                assert sorted(r.table_name for r in rows) == ["secret", "t"]
                with pytest.raises(Unauthorized, match=no_permission("alice", "SELECT", "<table ks.secret>")):
                    alice.execute("SELECT * FROM ks.secret")
            finally:
                cluster.shutdown()
        finally:
            admin_cluster.shutdown()


def test_describe_schema_with_internals_and_passwords_restores_roles_and_grants():
    """ScyllaDB's backup of auth: `DESCRIBE SCHEMA WITH INTERNALS AND
    PASSWORDS` (a superuser's) gives the roles with their salted hashes,
    role grants and permissions after the keyspaces; run in order on a new
    cluster, they bring back roles that log in with their old passwords
    and hold what they held."""
    with auth_node(authorizer=True) as node:
        admin_cluster, admin = connect(node, "cassandra", "cassandra")
        try:
            reader_of_one_table(admin, "u")
            admin.execute("CREATE ROLE reader")
            admin.execute("GRANT SELECT ON KEYSPACE ks TO reader")
            admin.execute("GRANT reader TO alice")
            admin.execute("GRANT ALTER ON ROLE reader TO alice")
            rows = list(admin.execute("DESCRIBE SCHEMA WITH INTERNALS AND PASSWORDS"))
            cluster, alice = connect(node, "alice", "a")
            try:
                with pytest.raises(Unauthorized, match="can only be issued by a superuser"):
                    alice.execute("DESCRIBE SCHEMA WITH INTERNALS AND PASSWORDS")
                hidden = [r.create_statement for r in alice.execute("DESCRIBE SCHEMA WITH INTERNALS")]
                assert "CREATE ROLE alice WITH LOGIN = true AND SUPERUSER = false;" in hidden, hidden
                assert not [s for s in hidden if "HASHED" in s], hidden
            finally:
                cluster.shutdown()
            before = sorted(tuple(r) for r in admin.execute("LIST ALL PERMISSIONS OF alice"))
        finally:
            admin_cluster.shutdown()
    auth_rows = [r for r in rows if r.type in ("role", "grant_role", "grant_permission")]
    assert rows[-len(auth_rows):] == auth_rows, "auth comes after the keyspaces"
    assert all(r.keyspace_name is None for r in auth_rows)
    statements = {(r.type, r.name): r.create_statement for r in auth_rows}
    alice_role = statements[("role", "alice")]
    assert alice_role.startswith("CREATE ROLE alice WITH HASHED PASSWORD = '$2") and \
        alice_role.endswith("' AND LOGIN = true AND SUPERUSER = false;"), alice_role
    assert statements[("role", "cassandra")].startswith("CREATE ROLE IF NOT EXISTS cassandra WITH HASHED PASSWORD")
    assert statements[("grant_role", "reader")] == "GRANT reader TO alice;"
    assert "GRANT SELECT ON ks.t TO alice;" in [r.create_statement for r in auth_rows if r.name == "alice"]
    # A new node, restored by running the statements in order as its superuser.
    with auth_node(authorizer=True) as fresh:
        admin_cluster, admin = connect(fresh, "cassandra", "cassandra")
        try:
            # Every node makes the memcache keyspace at start.
            for r in rows:
                if r.keyspace_name != "memcache":
                    admin.execute(r.create_statement)
            after = sorted(tuple(r) for r in admin.execute("LIST ALL PERMISSIONS OF alice"))
            assert after == before
        finally:
            admin_cluster.shutdown()
        cluster, alice = connect(fresh, "alice", "a")
        try:
            assert list(alice.execute("SELECT * FROM ks.u")) == [], "SELECT on ks through reader"
        finally:
            cluster.shutdown()


def test_a_role_created_on_one_node_logs_in_on_another():
    with contextlib.ExitStack() as stack:
        options = os.path.join(stack.enter_context(temp_dir()), "shoal.yaml")
        with open(options, "w") as f:
            # Cached permissions would outlive the test: only the schema
            # change a REVOKE is can end them.
            f.write("authenticator: PasswordAuthenticator\nauthorizer: CassandraAuthorizer\n"
                    "permissions_validity_in_ms: 600000\n")
        nodes = start_cluster(stack, "shoal-auth-cluster-", args=["--options-file", options])
        cluster, session = connect(nodes[0], "cassandra", "cassandra")
        try:
            session.execute("CREATE ROLE carol WITH PASSWORD = 'c' AND LOGIN = true")
        finally:
            cluster.shutdown()
        # Every node agreed on the role (group 0) before the CREATE answered.
        for node in nodes[1:]:
            WireSession(node, 0, "carol", "c").close()
        cluster, session = connect(nodes[2], "cassandra", "cassandra")
        try:
            session.execute("ALTER ROLE carol WITH LOGIN = false")
        finally:
            cluster.shutdown()
        refused = refusal(nodes[0], auth_provider=PlainTextAuthProvider("carol", "c"))
        assert "carol is not permitted to log in" in str(refused)
        a_revoke_on_one_node_holds_on_every_shard_of_every_node_at_once(nodes)


def a_revoke_on_one_node_holds_on_every_shard_of_every_node_at_once(nodes):
    """GRANT, read on every shard of every node (each caches the
    permission), REVOKE on node 1 while node 3 lags: the very next
    statement on each of them is refused, with no pause between."""
    admin_cluster = nodes[0].cluster(auth_provider=PlainTextAuthProvider("cassandra", "cassandra"),
                                     load_balancing_policy=WhiteListRoundRobinPolicy([nodes[0].address]))
    readers = []
    try:
        admin = admin_cluster.connect()
        admin.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        admin.execute("CREATE TABLE ks.t (k int PRIMARY KEY)")
        admin.execute("CREATE ROLE dave WITH PASSWORD = 'd' AND LOGIN = true")
        admin.execute("GRANT SELECT ON ks.t TO dave")
        readers = [WireSession(node, shard, "dave", "d") for node in nodes for shard in range(node.smp)]
        for reader in readers:
            for _ in range(3):
                assert reader.query("SELECT * FROM ks.t")[0] == 0x08, reader  # RESULT
        # Node 3 lags: stopped while nodes 1 and 2 (a majority) agree on
        # the REVOKE, for less than the failure detector's 2 s, so it still
        # counts as up. Group 0 alone would answer at once; the REVOKE is
        # answered only once node 3 too installed it.
        nodes[2].proc.send_signal(signal.SIGSTOP)
        try:
            revoke = admin.execute_async("REVOKE SELECT ON ks.t FROM dave")
            time.sleep(0.5)
        finally:
            nodes[2].proc.send_signal(signal.SIGCONT)
        revoke.result()
        for reader in reversed(readers):  # node 3's first
            opcode, body = reader.query("SELECT * FROM ks.t")
            assert opcode == 0x00 and struct.unpack(">i", body[:4])[0] == 0x2100, (reader, body)  # Unauthorized
            assert no_permission("dave", "SELECT", "<table ks.t>").encode() in body
        # And a GRANT is there at once too.
        admin.execute("GRANT SELECT ON KEYSPACE ks TO dave")
        for reader in readers:
            assert reader.query("SELECT * FROM ks.t")[0] == 0x08, reader
    finally:
        for reader in readers:
            reader.close()
        admin_cluster.shutdown()


class WireSession:
    """A CQL connection of our own, logged in, on one shard of a node: the
    shard-aware port places a connection by its source port (port modulo
    the node's shards), which the driver does not let a test choose."""

    def __init__(self, node, shard, user, password):
        self.where = "%s shard %d" % (node.address, shard)
        self.sock = socket.socket()
        self.sock.settimeout(10)
        for _ in range(100):
            try:
                self.sock.bind(("127.0.0.1", free_port()))
            except OSError:
                continue
            if self.sock.getsockname()[1] % node.smp == shard:
                break
            self.sock.close()
            self.sock = socket.socket()
            self.sock.settimeout(10)
        assert self.sock.getsockname()[1] % node.smp == shard
        self.sock.connect((node.address, node.ports[1]))
        self.sock.sendall(frame(0x01, startup_body()))
        assert read_frame(self.sock)[0] == 0x03  # AUTHENTICATE
        token = b"\0" + user.encode() + b"\0" + password.encode()
        self.sock.sendall(frame(0x0F, struct.pack(">i", len(token)) + token))
        opcode, body = read_frame(self.sock)
        assert opcode == 0x10, (self.where, body)  # AUTH_SUCCESS

    def query(self, text):
        """(opcode, body) of the answer to `text` at consistency ONE."""
        query = text.encode()
        self.sock.sendall(frame(0x07, struct.pack(">I", len(query)) + query + struct.pack(">HB", 1, 0)))
        return read_frame(self.sock)

    def close(self):
        self.sock.close()

    def __repr__(self):
        return self.where


@contextlib.contextmanager
def temp_dir():
    import shutil
    import tempfile
    path = tempfile.mkdtemp(prefix="shoal-auth-options-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)

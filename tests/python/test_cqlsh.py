"""cqlsh against the server, run the way a person would: `cqlsh HOST PORT -e "..."`.

Two cqlsh builds are exercised when present:
  * .venv/bin/cqlsh         Apache cqlsh (PyPI `cqlsh`, on cassandra-driver). Its DESCRIBE is
                            server-side only, and only against a server whose release_version
                            is 4 or more (Shoal reports 5.0.0; ScyllaDB 3.0.8).
  * .venv-scylla/bin/cqlsh  ScyllaDB's cqlsh (PyPI `scylla-cqlsh`, on scylla-driver). It sends
                            DESCRIBE to the server and, when the server answers with a syntax
                            error, describes from the driver's schema metadata instead.
"""

import os
import subprocess
from pathlib import Path

import pytest

from conftest import HOST, PORT, local_row, unique_name

ROOT = Path(__file__).resolve().parents[2]
CQLSHS = {
    "apache": Path(os.environ.get("SHOAL_CQLSH", ROOT / ".venv" / "bin" / "cqlsh")),
    "scylla": Path(os.environ.get("SHOAL_SCYLLA_CQLSH", ROOT / ".venv-scylla" / "bin" / "cqlsh")),
}


@pytest.fixture(params=sorted(CQLSHS))
def cqlsh(request, tmp_path):
    path = CQLSHS[request.param]
    if not path.exists():
        pytest.skip("%s not installed (run scripts/venv.sh)" % path)
    env = dict(os.environ)
    env["HOME"] = str(tmp_path)  # no user cqlshrc, history goes to a temp dir
    env.pop("PYTHONPATH", None)

    def run(statement, check=True):
        proc = subprocess.run(
            [str(path), HOST, str(PORT), "--protocol-version=4", "--connect-timeout=10",
             "--request-timeout=30", "-e", statement],
            capture_output=True, text=True, timeout=90, env=env, cwd=str(tmp_path))
        if check:
            assert proc.returncode == 0, "cqlsh failed (%d):\nstdout:\n%s\nstderr:\n%s" % (
                proc.returncode, proc.stdout, proc.stderr)
            assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    run.flavour = request.param
    return run


@pytest.fixture
def cq_table(session, keyspace, request):
    name = unique_name(request, prefix="cq")
    session.execute("CREATE TABLE %s (k int, c int, v text, PRIMARY KEY (k, c)) "
                    "WITH CLUSTERING ORDER BY (c DESC) AND comment = 'from cqlsh test'" % name)
    return "%s.%s" % (keyspace, name)


def server_side_describe_only(cqlsh, admin):
    """Apache cqlsh cannot DESCRIBE a server that reports release_version < 4."""
    return cqlsh.flavour == "apache" and local_row(admin).release_version.split(".")[0] < "4"


def test_cqlsh_crud(cqlsh, cq_table):
    cqlsh("INSERT INTO %s (k, c, v) VALUES (1, 1, 'hello from cqlsh');" % cq_table)
    out = cqlsh("SELECT k, c, v FROM %s WHERE k = 1;" % cq_table).stdout
    assert "hello from cqlsh" in out
    assert "(1 rows)" in out
    out = cqlsh("UPDATE %(t)s SET v = 'changed' WHERE k = 1 AND c = 1; "
                "INSERT INTO %(t)s (k, c, v) VALUES (1, 2, 'second'); "
                "SELECT * FROM %(t)s WHERE k = 1;" % {"t": cq_table}).stdout
    assert "changed" in out and "second" in out and "(2 rows)" in out
    # Clustering order DESC: c=2 is printed before c=1.
    assert out.index("second") < out.index("changed")
    out = cqlsh("DELETE FROM %(t)s WHERE k = 1; SELECT * FROM %(t)s;" % {"t": cq_table}).stdout
    assert "(0 rows)" in out


def test_cqlsh_error_exit_status(cqlsh, cq_table):
    # cqlsh's own parser rejects unknown verbs locally; a SELECT it cannot parse goes to the server.
    proc = cqlsh("SELECT * FORM %s;" % cq_table, check=False)
    assert proc.returncode != 0
    assert "SyntaxException" in proc.stderr, proc.stderr
    proc = cqlsh("SELECT * FROM %s_missing;" % cq_table, check=False)
    assert proc.returncode != 0
    assert "InvalidRequest" in proc.stderr, proc.stderr


def test_cqlsh_describe_keyspaces(cqlsh, admin, keyspace):
    if server_side_describe_only(cqlsh, admin):
        proc = cqlsh("DESCRIBE KEYSPACES", check=False)
        assert "DESCRIBE|DESC was moved to server side" in proc.stdout + proc.stderr
        pytest.skip("Apache cqlsh 6.x only does server-side DESCRIBE (server reports %s)"
                    % local_row(admin).release_version)
    out = cqlsh("DESCRIBE KEYSPACES").stdout
    names = out.split()
    assert keyspace in names
    assert "system" in names and "system_schema" in names


def test_cqlsh_describe_table(cqlsh, admin, cq_table):
    if server_side_describe_only(cqlsh, admin):
        pytest.skip("Apache cqlsh 6.x only does server-side DESCRIBE (server reports %s)"
                    % local_row(admin).release_version)
    out = cqlsh("DESCRIBE TABLE %s" % cq_table).stdout
    assert "CREATE TABLE %s (" % cq_table in out
    assert "PRIMARY KEY (k, c)" in out
    assert "CLUSTERING ORDER BY (c DESC)" in out
    assert "comment = 'from cqlsh test'" in out
    for column in ("k int", "c int", "v text"):
        assert column in out


def test_cqlsh_vectors(cqlsh, admin, session, keyspace, request):
    name = "%s.%s" % (keyspace, unique_name(request, prefix="cqv"))
    session.execute("CREATE TABLE %s (k int PRIMARY KEY, f vector<float, 3>, s vector<text, 2>)" % name)
    out = cqlsh("INSERT INTO %(t)s (k, f, s) VALUES (1, [1, 2.5, 3], ['a', 'b']); "
                "SELECT f, s FROM %(t)s;" % {"t": name}).stdout
    assert "[1, 2.5, 3]" in out and "['a', 'b']" in out
    if not server_side_describe_only(cqlsh, admin):
        out = cqlsh("DESCRIBE TABLE %s" % name).stdout
        assert "f vector<float, 3>" in out and "s vector<text, 2>" in out

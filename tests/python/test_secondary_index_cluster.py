"""Secondary indexes and materialized views on three nodes at RF 3: each
base replica sends its view updates to its paired view replica, the index
and the view are built on every node, and after one node is killed -9 under
writes that move indexed values (no hints: what it misses stays missed
until repair), `nodetool repair` brings base, index and view back into
agreement on every node."""
import contextlib
import random

import pytest
from cassandra import ConsistencyLevel as CL

from node import skip_reason, start_cluster
from test_replication import Sessions, q, succeeds, wait_for

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

ROWS = 200
VALUES = 7


def by_value(session, level):
    """{value: sorted (p, c)} through the index."""
    return {x: sorted((r.p, r.c) for r in q(session, "SELECT p, c FROM ks.t WHERE v = %s", level, (x,)))
            for x in range(VALUES)}


def by_view(session, level):
    """{value: sorted (p, c)} from the materialized view's partitions."""
    return {x: sorted((r.p, r.c) for r in q(session, "SELECT p, c FROM ks.mv WHERE v = %s", level, (x,)))
            for x in range(VALUES)}


def test_index_on_three_nodes_agrees_with_the_base_after_a_kill_and_repair():
    rng = random.Random(7)
    with contextlib.ExitStack() as stack:
        nodes = start_cluster(stack, "shoal-index-cluster-", ["--max-hint-window-in-ms", "0"])
        sessions = Sessions()
        stack.callback(sessions.close)
        s = [sessions.connect(n) for n in nodes]
        wait_for("three members, all up", lambda: all(n.nodetool("status").count("UN ") == 3 for n in nodes))
        s[0].execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        s[1].execute("CREATE TABLE ks.t (p int, c int, v int, PRIMARY KEY (p, c))")
        wait_for("every coordinator sees three live replicas", lambda: all(
            succeeds(lambda: q(x, "INSERT INTO ks.t (p, c, v) VALUES (-1, 0, 0)", CL.ALL)) for x in s))
        q(s[0], "DELETE FROM ks.t WHERE p = -1", CL.ALL)
        model = {}
        # Half the rows before the index (built from them), half after.
        for i in range(ROWS // 2):
            model[(i, i % 3)] = rng.randrange(VALUES)
            q(s[i % 3], "INSERT INTO ks.t (p, c, v) VALUES (%s, %s, %s)", CL.QUORUM, (i, i % 3, model[(i, i % 3)]))
        s[2].execute("CREATE INDEX ON ks.t (v)")
        s[1].execute("CREATE MATERIALIZED VIEW ks.mv AS SELECT p, c, v FROM ks.t "
                     "WHERE v IS NOT NULL AND p IS NOT NULL AND c IS NOT NULL PRIMARY KEY (v, p, c)")
        for i in range(ROWS // 2, ROWS):
            model[(i, i % 3)] = rng.randrange(VALUES)
            q(s[i % 3], "INSERT INTO ks.t (p, c, v) VALUES (%s, %s, %s)", CL.QUORUM, (i, i % 3, model[(i, i % 3)]))

        def expected():
            return {x: sorted(k for k, v in model.items() if v == x) for x in range(VALUES)}

        wait_for("the index and the view are built on every node", lambda: all(
            not q(x, "SELECT * FROM system.views_builds_in_progress", CL.ONE) for x in s), timeout=60)
        for x in s:
            assert by_value(x, CL.QUORUM) == expected()
            assert by_view(x, CL.QUORUM) == expected()
        # Conditional writes (Paxos on three nodes) update the index too.
        assert q(s[0], "INSERT INTO ks.t (p, c, v) VALUES (%s, 0, 1) IF NOT EXISTS", CL.QUORUM, (ROWS,))[0][0]
        assert q(s[1], "UPDATE ks.t SET v = 2 WHERE p = %s AND c = 0 IF v = 1", CL.QUORUM, (ROWS,))[0][0]
        model[(ROWS, 0)] = 2
        for x in s:
            assert by_value(x, CL.QUORUM) == expected()
            assert by_view(x, CL.QUORUM) == expected()

        # One node killed -9 under writes that move values and delete rows.
        nodes[2].kill()
        wait_for("the dead node is seen DOWN", lambda: "DN" in nodes[0].nodetool("status"))
        for i in range(0, ROWS, 2):
            key = (i, i % 3)
            if i % 10 == 0:
                del model[key]
                q(s[i % 2], "DELETE FROM ks.t WHERE p = %s AND c = %s", CL.QUORUM, key)
            else:
                model[key] = (model[key] + 1) % VALUES
                q(s[i % 2], "UPDATE ks.t SET v = %s WHERE p = %s AND c = %s", CL.QUORUM, (model[key],) + key)
        assert by_value(s[0], CL.QUORUM) == expected()
        assert by_view(s[0], CL.QUORUM) == expected()

        nodes[2].start()
        s[2] = sessions.connect(nodes[2])
        wait_for("the node is seen UP again", lambda: "DN" not in nodes[0].nodetool("status"))
        # Reading only its own copies, the node that missed the writes
        # answers from its stale base and index.
        assert by_value(s[2], CL.ONE) != expected()
        for n in nodes:
            n.nodetool("repair", "ks")
        # After repair every replica holds the same base and index: each
        # node, reading only its own copies, agrees with the model (before
        # any read at ALL could repair them).
        for x in s:
            assert by_value(x, CL.ONE) == expected()
            assert by_view(x, CL.ONE) == expected()
        for x in s:
            assert by_value(x, CL.ALL) == expected()
            assert by_view(x, CL.ALL) == expected()

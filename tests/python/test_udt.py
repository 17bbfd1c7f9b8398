"""User-defined types: DDL, driver metadata, values (literals, bound, nested),
field selection and field update, ALTER TYPE on stored rows, errors, restart.

Shoal stores a non-frozen UDT column whole, like a frozen one; `SET u.f = v`
is a read-modify-write of the stored value on the shard owning the row.
"""
from collections import namedtuple

import pytest

from cassandra import InvalidRequest

from conftest import IS_CASSANDRA, make_cluster
from node import skip_reason, temp_node
from test_lwt import flush


def one(session, cql, *params):
    return session.execute(cql, params or None).one()


def user_types(cluster, keyspace):
    return cluster.metadata.keyspaces[keyspace].user_types


@pytest.fixture
def addr(session, request):
    """A fresh type `(street text, zip int)` unique to the test; its name."""
    name = "addr_%s" % request.node.name.lower().replace("test_", "")[:30]
    session.execute("CREATE TYPE %s (street text, zip int)" % name)
    return name


def test_ddl_round_trip_and_metadata(cluster, session, keyspace):
    session.execute("CREATE TYPE ddl_addr (street text, zip int)")
    # The SCHEMA_CHANGE (target TYPE) makes the driver refresh its metadata.
    udt = user_types(cluster, keyspace)["ddl_addr"]
    assert udt.field_names == ["street", "zip"]
    assert udt.field_types == ["text", "int"]
    row = one(session, "SELECT * FROM system_schema.types WHERE keyspace_name = %s AND type_name = %s",
              keyspace, "ddl_addr")
    assert (row.field_names, row.field_types) == (["street", "zip"], ["text", "int"])

    session.execute("CREATE TYPE IF NOT EXISTS ddl_addr (other int)")  # no-op
    with pytest.raises(InvalidRequest, match="already exists"):
        session.execute("CREATE TYPE ddl_addr (other int)")

    session.execute("ALTER TYPE %s.ddl_addr ADD city text" % keyspace)
    assert user_types(cluster, keyspace)["ddl_addr"].field_names == ["street", "zip", "city"]
    session.execute("ALTER TYPE ddl_addr RENAME zip TO code AND city TO town")
    udt = user_types(cluster, keyspace)["ddl_addr"]
    assert udt.field_names == ["street", "code", "town"]
    assert udt.field_types == ["text", "int", "text"]

    session.execute("DROP TYPE ddl_addr")
    assert "ddl_addr" not in user_types(cluster, keyspace)
    session.execute("DROP TYPE IF EXISTS ddl_addr")
    with pytest.raises(InvalidRequest, match="ddl_addr"):
        session.execute("DROP TYPE ddl_addr")


def test_schema_version_changes(admin, session):
    before = one(admin, "SELECT schema_version FROM system.local WHERE key = 'local'").schema_version
    session.execute("CREATE TYPE version_t (a int)")
    after = one(admin, "SELECT schema_version FROM system.local WHERE key = 'local'").schema_version
    assert before != after


def test_columns_in_system_schema_and_driver_metadata(cluster, session, keyspace, table, addr):
    t = table("(k frozen<%s> PRIMARY KEY, a %s, l list<frozen<%s>>)" % (addr, addr, addr))
    types = {r.column_name: r.type for r in session.execute(
        "SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, t))}
    assert types == {"k": "frozen<%s>" % addr, "a": addr, "l": "list<frozen<%s>>" % addr}
    meta = cluster.metadata.keyspaces[keyspace].tables[t]
    assert meta.columns["k"].cql_type == "frozen<%s>" % addr
    assert meta.columns["a"].cql_type == addr
    assert "CREATE TYPE %s.%s" % (keyspace, addr) in cluster.metadata.keyspaces[keyspace].export_as_string()


def test_literals_insert_and_select(session, table, addr):
    t = table("(k int PRIMARY KEY, f frozen<%s>, n %s)" % (addr, addr))
    session.execute("INSERT INTO %s (k, f, n) VALUES (1, {street: 'main', zip: 5}, {zip: 7})" % t)
    row = one(session, "SELECT f, n FROM %s WHERE k = 1" % t)
    assert (row.f.street, row.f.zip) == ("main", 5)
    assert (row.n.street, row.n.zip) == (None, 7)  # missing fields are null
    # Quoted field names and null fields.
    session.execute("INSERT INTO %s (k, f) VALUES (2, {\"street\": null, zip: 1})" % t)
    assert one(session, "SELECT f FROM %s WHERE k = 2" % t).f.street is None
    session.execute("INSERT INTO %s (k, f) VALUES (3, null)" % t)
    assert one(session, "SELECT f FROM %s WHERE k = 3" % t).f is None


def test_udt_in_primary_key(session, table, addr):
    t = table("(k frozen<%s>, c frozen<%s>, v int, PRIMARY KEY (k, c))" % (addr, addr))
    for zip_code in (3, 1, 2):
        session.execute("INSERT INTO %s (k, c, v) VALUES ({street: 'a'}, {street: 's', zip: %d}, %d)"
                        % (t, zip_code, zip_code))
    rows = session.execute("SELECT c, v FROM %s WHERE k = {street: 'a'}" % t)
    assert [r.c.zip for r in rows] == [1, 2, 3]  # clustered in field order
    assert one(session, "SELECT v FROM %s WHERE k = {street: 'a'} AND c = {street: 's', zip: 2}" % t).v == 2
    with pytest.raises(InvalidRequest, match="non-frozen"):
        session.execute("CREATE TABLE udt_bad_pk (k %s PRIMARY KEY)" % addr)


def test_prepared_with_namedtuple_and_registered_class(session, keyspace, table, addr):
    t = table("(k int PRIMARY KEY, f frozen<%s>, n %s)" % (addr, addr))
    insert = session.prepare("INSERT INTO %s (k, f, n) VALUES (?, ?, ?)" % t)
    Addr = namedtuple("Addr", ["street", "zip"])
    session.execute(insert, (1, Addr("elm", 10), Addr(None, 11)))
    row = one(session, "SELECT f, n FROM %s WHERE k = 1" % t)
    assert (row.f.street, row.f.zip, row.n.street, row.n.zip) == ("elm", 10, None, 11)
    # Markers inside a literal are typed by their field.
    by_field = session.prepare("INSERT INTO %s (k, f) VALUES (?, {street: ?, zip: ?})" % t)
    assert [(c.name, c.type.typename) for c in by_field.column_metadata] == [
        ("k", "int"), ("f.street", "varchar"), ("f.zip", "int")]
    session.execute(by_field, (3, "ash", 30))
    assert tuple(one(session, "SELECT f FROM %s WHERE k = 3" % t).f) == ("ash", 30)
    select = session.prepare("SELECT f FROM %s WHERE k = ? AND f = ? ALLOW FILTERING" % t)
    assert select.column_metadata[1].type.typename == addr  # UDT option in prepared metadata
    assert session.execute(select, (1, Addr("elm", 10))).one().f.zip == 10

    class Address:
        def __init__(self, street=None, zip=None):
            self.street, self.zip = street, zip

    # A cluster of its own: the driver keeps registrations after the keyspace
    # is dropped and then fails to connect new sessions.
    own = make_cluster()
    try:
        own_session = own.connect(keyspace)
        own.register_user_type(keyspace, addr, Address)
        insert = own_session.prepare("INSERT INTO %s (k, f, n) VALUES (?, ?, ?)" % t)
        own_session.execute(insert, (2, Address("oak", 20), Address(zip=21)))
        row = one(own_session, "SELECT f, n FROM %s WHERE k = 2" % t)
        assert isinstance(row.f, Address)
        assert (row.f.street, row.f.zip, row.n.street, row.n.zip) == ("oak", 20, None, 21)
    finally:
        own.shutdown()


def test_nested_types(session, table):
    session.execute("CREATE TYPE nest_point (x int, y int)")
    session.execute("CREATE TYPE nest_shape (name text, points list<frozen<nest_point>>, "
                    "center frozen<nest_point>, tags map<text, frozen<nest_point>>)")
    # Field types show as declared, collections inside them frozen.
    assert one(session, "SELECT field_types FROM system_schema.types WHERE keyspace_name = %s "
               "AND type_name = 'nest_shape'", session.keyspace).field_types == [
        "text", "list<frozen<nest_point>>", "frozen<nest_point>", "map<text, frozen<nest_point>>"]
    t = table("(k int PRIMARY KEY, s frozen<nest_shape>, l list<frozen<nest_shape>>, "
              "tu tuple<int, frozen<nest_point>>, m map<frozen<nest_point>, text>)")
    session.execute("INSERT INTO %s (k, s, l, tu, m) VALUES (1, {name: 'tri', points: [{x: 1, y: 2}, {x: 3}], "
                    "center: {x: 0, y: 0}, tags: {'a': {y: 9}}}, [{name: 'x'}, {name: 'y'}], "
                    "(5, {x: 6, y: 7}), {{x: 1, y: 1}: 'one'})" % t)
    row = one(session, "SELECT * FROM %s WHERE k = 1" % t)
    assert row.s.name == "tri"
    assert [(p.x, p.y) for p in row.s.points] == [(1, 2), (3, None)]
    assert (row.s.center.x, row.s.tags["a"].y) == (0, 9)
    assert [s.name for s in row.l] == ["x", "y"]
    assert (row.tu[0], row.tu[1].y) == (5, 7)
    assert list(row.m.values()) == ["one"]
    # Prepared, with nested values as tuples.
    insert = session.prepare("INSERT INTO %s (k, s) VALUES (?, ?)" % t)
    session.execute(insert, (2, ("sq", [(1, 1)], (2, 2), {"b": (3, None)})))
    s = one(session, "SELECT s FROM %s WHERE k = 2" % t).s
    assert (s.name, s.points[0].x, s.center.y, s.tags["b"].x) == ("sq", 1, 2, 3)
    with pytest.raises(InvalidRequest, match="[Nn]on-frozen"):
        session.execute("CREATE TABLE nest_bad (k int PRIMARY KEY, l list<nest_point>)")


def test_field_selection(session, table):
    session.execute("CREATE TYPE sel_inner (v int)")
    session.execute("CREATE TYPE sel_outer (name text, inner frozen<sel_inner>)")
    t = table("(k int PRIMARY KEY, o frozen<sel_outer>, n sel_outer)")
    session.execute("INSERT INTO %s (k, o, n) VALUES (1, {name: 'a', inner: {v: 4}}, {name: 'b'})" % t)
    row = one(session, "SELECT o.name, o.inner.v, n.inner, n.name AS nn FROM %s WHERE k = 1" % t)
    assert tuple(row) == ("a", 4, None, "b")
    assert row._fields[0] == "o_name"
    session.execute("INSERT INTO %s (k) VALUES (2)" % t)
    assert tuple(one(session, "SELECT o.name, n.inner.v FROM %s WHERE k = 2" % t)) == (None, None)
    with pytest.raises(InvalidRequest, match="nosuch"):
        session.execute("SELECT o.nosuch FROM %s" % t)
    with pytest.raises(InvalidRequest, match="not a user type"):
        session.execute("SELECT k.x FROM %s" % t)


def test_update_field_of_non_frozen(session, table, addr):
    t = table("(k int, c int, n %s, f frozen<%s>, PRIMARY KEY (k, c))" % (addr, addr))
    q = "SELECT n FROM %s WHERE k = 1 AND c = 1" % t
    session.execute("INSERT INTO %s (k, c, n) VALUES (1, 1, {street: 'a', zip: 1})" % t)
    session.execute("UPDATE %s SET n.zip = 2 WHERE k = 1 AND c = 1" % t)
    assert tuple(one(session, q).n) == ("a", 2)
    update = session.prepare("UPDATE %s SET n.street = ? WHERE k = ? AND c = ?" % t)
    assert update.column_metadata[0].name == "n.street"
    session.execute(update, ("b", 1, 1))
    assert tuple(one(session, q).n) == ("b", 2)
    session.execute("UPDATE %s SET n.street = null, n.zip = 3 WHERE k = 1 AND c = 1" % t)
    assert tuple(one(session, q).n) == (None, 3)
    # On a row without a value, the other fields are null.
    session.execute("UPDATE %s SET n.zip = 9 WHERE k = 1 AND c = 2" % t)
    assert tuple(one(session, "SELECT n FROM %s WHERE k = 1 AND c = 2" % t).n) == (None, 9)
    session.execute("UPDATE %s SET n.street = 'c' WHERE k = 1 AND c = 1" % t)
    session.execute("DELETE n.zip FROM %s WHERE k = 1 AND c = 1" % t)
    assert tuple(one(session, q).n) == ("c", None)
    with pytest.raises(InvalidRequest, match="frozen"):
        session.execute("UPDATE %s SET f.zip = 1 WHERE k = 1 AND c = 1" % t)
    with pytest.raises(InvalidRequest, match="Frozen UDT column f does not support field deletion"):
        session.execute("DELETE f.zip FROM %s WHERE k = 1 AND c = 1" % t)
    with pytest.raises(InvalidRequest, match="nosuch"):
        session.execute("UPDATE %s SET n.nosuch = 1 WHERE k = 1 AND c = 1" % t)


def test_non_frozen_value_with_no_field_left_is_null(session, table, addr):
    """Once every field of a non-frozen user type is null (set or deleted one
    by one or together), the column is null, as in Cassandra, where the
    fields are cells and none is left (UserTypesTest.testUpdateNonFrozenUDT)."""
    t = table("(k int PRIMARY KEY, n %s)" % addr)
    q = "SELECT n FROM %s WHERE k = 0" % t
    session.execute("INSERT INTO %s (k, n) VALUES (0, {street: 'a', zip: 1})" % t)
    session.execute("UPDATE %s SET n.street = null WHERE k = 0" % t)
    assert tuple(one(session, q).n) == (None, 1)
    session.execute("UPDATE %s SET n.zip = null WHERE k = 0" % t)
    assert one(session, q).n is None
    session.execute("UPDATE %s SET n.zip = 2 WHERE k = 0" % t)
    assert tuple(one(session, q).n) == (None, 2)
    for fields in ("n.street, n.zip", "n.zip, n.street"):
        session.execute("INSERT INTO %s (k, n) VALUES (0, {street: 'a', zip: 1})" % t)
        session.execute("DELETE %s FROM %s WHERE k = 0" % (fields, t))
        assert one(session, q).n is None


def test_field_of_static_column(session, table, addr):
    t = table("(k int, c int, s %s static, PRIMARY KEY (k, c))" % addr)
    session.execute("UPDATE %s SET s.zip = 1 WHERE k = 1" % t)
    session.execute("UPDATE %s SET s.street = 'x' WHERE k = 1" % t)
    assert tuple(one(session, "SELECT s FROM %s WHERE k = 1" % t).s) == ("x", 1)
    session.execute("DELETE s.street FROM %s WHERE k = 1" % t)
    assert tuple(one(session, "SELECT s FROM %s WHERE k = 1" % t).s) == (None, 1)


def test_alter_type_add_reads_old_rows(cluster, session, keyspace, table, addr):
    t = table("(k int PRIMARY KEY, f frozen<%s>, l list<frozen<%s>>)" % (addr, addr))
    session.execute("INSERT INTO %s (k, f, l) VALUES (1, {street: 'a', zip: 1}, [{zip: 2}])" % t)
    old_insert = session.prepare("INSERT INTO %s (k, f) VALUES (?, ?)" % t)
    session.execute("ALTER TYPE %s ADD city text" % addr)
    row = one(session, "SELECT f, l FROM %s WHERE k = 1" % t)
    assert tuple(row.f) == ("a", 1, None)
    assert tuple(row.l[0]) == (None, 2, None)
    session.execute("INSERT INTO %s (k, f) VALUES (2, {city: 'c'})" % t)
    assert tuple(one(session, "SELECT f FROM %s WHERE k = 2" % t).f) == (None, None, "c")
    # A value with fewer fields than the type (from a client that prepared
    # before the ALTER, or any client) is accepted.
    session.execute(old_insert, (3, ("s", 3)))
    assert one(session, "SELECT f FROM %s WHERE k = 3" % t).f.city is None
    session.execute("ALTER TYPE %s RENAME city TO town" % addr)
    assert one(session, "SELECT f.town FROM %s WHERE k = 2" % t).f_town == "c"
    assert cluster.metadata.keyspaces[keyspace].tables[t].columns["f"].cql_type == "frozen<%s>" % addr


def test_clustering_key_written_before_and_after_alter_type_add_is_one_row(session, keyspace, table, addr):
    # The key written before ALTER TYPE ... ADD (no bytes for the new field)
    # and the same key written after it (new field null) are one row, found
    # by either, as in ScyllaDB (cassandra_tests
    # tuples_with_nulls_comparison_test). A non-null new field makes another
    # key, after it.
    t = table("(p int, c frozen<%s>, v int, PRIMARY KEY (p, c))" % addr)
    session.execute("INSERT INTO %s (p, c, v) VALUES (0, {street: 'a'}, 0)" % t)
    session.execute("ALTER TYPE %s ADD city text" % addr)
    assert one(session, "SELECT v FROM %s WHERE p = 0 AND c = {street: 'a'}" % t).v == 0
    session.execute("INSERT INTO %s (p, c, v) VALUES (0, fromJson('{\"street\": \"a\"}'), 1)" % t)
    session.execute("INSERT INTO %s (p, c, v) VALUES (0, {street: 'a', zip: null, city: null}, 2)" % t)
    insert = session.prepare("INSERT INTO %s (p, c, v) VALUES (0, ?, ?)" % t)
    session.execute(insert, (("a", None, None), 3))
    flush(keyspace, t)
    assert [r.v for r in session.execute("SELECT v FROM %s WHERE p = 0" % t)] == [3]
    assert one(session, "SELECT v FROM %s WHERE p = 0 AND c = {street: 'a'}" % t).v == 3
    assert tuple(one(session, "SELECT c FROM %s WHERE p = 0" % t).c) == ("a", None, None)
    session.execute("INSERT INTO %s (p, c, v) VALUES (0, {street: 'a', city: 'c'}, 4)" % t)
    assert [r.v for r in session.execute("SELECT v FROM %s WHERE p = 0" % t)] == [3, 4]


def test_drop_type_in_use_and_drop_keyspace(admin, session, table):
    session.execute("CREATE TYPE used_inner (a int)")
    session.execute("CREATE TYPE used_outer (i frozen<used_inner>)")
    with pytest.raises(InvalidRequest, match="used_outer"):
        session.execute("DROP TYPE used_inner")
    t = table("(k int PRIMARY KEY, o frozen<used_outer>)")
    with pytest.raises(InvalidRequest, match=t):
        session.execute("DROP TYPE used_outer")
    session.execute("DROP TABLE %s" % t)
    session.execute("DROP TYPE used_outer")
    session.execute("DROP TYPE used_inner")

    admin.execute("CREATE KEYSPACE udt_gone WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    admin.execute("CREATE TYPE udt_gone.t (a int)")
    admin.execute("DROP KEYSPACE udt_gone")
    assert not list(admin.execute("SELECT * FROM system_schema.types WHERE keyspace_name = 'udt_gone'"))


def test_errors_name_what_is_wrong(session, table, addr):
    with pytest.raises(InvalidRequest, match="nosuchtype"):
        session.execute("CREATE TABLE err_t (k int PRIMARY KEY, v frozen<nosuchtype>)")
    with pytest.raises(InvalidRequest, match="nosuchtype"):
        session.execute("CREATE TYPE err_t2 (a nosuchtype)")
    with pytest.raises(InvalidRequest, match="err_self"):  # not defined yet
        session.execute("CREATE TYPE err_self (a frozen<err_self>)")
    session.execute("CREATE TYPE err_b (a frozen<%s>)" % addr)
    with pytest.raises(InvalidRequest, match="would create a circular reference"):
        session.execute("ALTER TYPE %s ADD b frozen<err_b>" % addr)
    with pytest.raises(InvalidRequest, match="non-frozen"):
        session.execute("CREATE TYPE err_nf (a %s)" % addr)
    with pytest.raises(InvalidRequest, match="counter"):
        session.execute("CREATE TYPE err_c (a counter)")
    with pytest.raises(InvalidRequest, match="Duplicate"):
        session.execute("CREATE TYPE err_dup (a int, a text)")
    with pytest.raises(InvalidRequest, match="nosuch"):
        session.execute("ALTER TYPE %s RENAME nosuch TO other" % addr)
    with pytest.raises(InvalidRequest, match="zip"):
        session.execute("ALTER TYPE %s ADD zip int" % addr)
    t = table("(k int PRIMARY KEY, f frozen<%s>)" % addr)
    with pytest.raises(InvalidRequest, match="nosuchfield"):
        session.execute("INSERT INTO %s (k, f) VALUES (1, {nosuchfield: 1})" % t)
    with pytest.raises(InvalidRequest, match=r"f\.zip.*int"):
        session.execute("INSERT INTO %s (k, f) VALUES (1, {zip: 'x'})" % t)
    with pytest.raises(InvalidRequest):
        session.execute("INSERT INTO %s (k, f) VALUES (1, 5)" % t)


@pytest.mark.skipif(bool(skip_reason()) or IS_CASSANDRA, reason=skip_reason() or "Shoal's own node")
def test_types_survive_restart():
    with temp_node("shoal-udt-") as node:
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TYPE ks.\"Zed\" (a int)")  # sorts before its user
        session.execute("CREATE TYPE ks.b (z frozen<\"Zed\">, t text)")
        session.execute("ALTER TYPE ks.b ADD extra int")
        session.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v b, l list<frozen<b>>)")
        session.execute("INSERT INTO ks.t (k, v, l) VALUES (1, {z: {a: 1}, t: 'x'}, [{extra: 2}])")
        cluster.shutdown()
        node.kill()
        node.start()
        cluster, session = node.session()
        try:
            udt = cluster.metadata.keyspaces["ks"].user_types["b"]
            assert udt.field_names == ["z", "t", "extra"]
            assert udt.field_types == ["frozen<\"Zed\">", "text", "int"]
            row = one(session, "SELECT v, l FROM ks.t WHERE k = 1")
            assert (row.v.z.a, row.v.t, row.l[0].extra) == (1, "x", 2)
            session.execute("UPDATE ks.t SET v.extra = 3 WHERE k = 1")
            assert one(session, "SELECT v.extra FROM ks.t WHERE k = 1").v_extra == 3
        finally:
            cluster.shutdown()

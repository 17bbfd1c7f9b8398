"""System tables drivers read: system.local, system.peers, system_schema.*."""
from collections.abc import Mapping

import ipaddress
import os
import uuid

import pytest

from conftest import IS_CASSANDRA, local_row, make_cluster, wait_until


def test_system_local_columns(admin):
    row = local_row(admin)
    assert row is not None
    assert row.key == "local"
    assert isinstance(row.cluster_name, str) and row.cluster_name
    assert isinstance(row.data_center, str) and row.data_center
    assert isinstance(row.rack, str) and row.rack
    assert row.partitioner == "org.apache.cassandra.dht.Murmur3Partitioner"
    assert isinstance(row.host_id, uuid.UUID)
    assert isinstance(row.schema_version, uuid.UUID)
    rpc = ipaddress.ip_address(row.rpc_address)
    assert not rpc.is_unspecified
    assert row.broadcast_address is not None and row.listen_address is not None
    assert row.tokens, "tokens must be a non-empty set"
    for tok in row.tokens:
        assert -(2 ** 63) <= int(tok) < 2 ** 63
    assert isinstance(row.cql_version, str) and row.cql_version.startswith("3.")
    assert isinstance(row.release_version, str) and row.release_version
    # 4 or later: Apache cqlsh 6 sends DESCRIBE to the server only then.
    assert int(row.release_version.split(".")[0]) >= 4


def test_system_local_by_name_and_prepared(admin):
    rows = list(admin.execute("SELECT cluster_name, release_version, tokens FROM system.local"))
    assert len(rows) == 1
    p = admin.prepare("SELECT host_id FROM system.local WHERE key = ?")
    assert isinstance(admin.execute(p, ["local"]).one().host_id, uuid.UUID)


def test_driver_metadata_matches_system_local(cluster, admin):
    row = local_row(admin)
    hosts = cluster.metadata.all_hosts()
    assert len(hosts) == 1
    host = hosts[0]
    assert host.host_id == row.host_id
    assert host.datacenter == row.data_center
    assert host.rack == row.rack
    assert host.release_version == row.release_version
    assert cluster.metadata.partitioner == row.partitioner
    assert cluster.metadata.cluster_name == row.cluster_name
    assert cluster.metadata.token_map is not None
    assert len(cluster.metadata.token_map.ring) == len(row.tokens)


def test_schema_version_changes_after_ddl(admin, keyspace):
    before = local_row(admin).schema_version
    admin.execute("CREATE TABLE %s.sys_schema_change (k int PRIMARY KEY)" % keyspace)
    after = local_row(admin).schema_version
    assert after != before
    admin.execute("ALTER TABLE %s.sys_schema_change ADD v int" % keyspace)
    assert local_row(admin).schema_version not in (before, after)


def test_system_peers_queryable(admin):
    rows = list(admin.execute("SELECT * FROM system.peers"))
    assert rows == []  # a single node has no peers
    rows = list(admin.execute(
        "SELECT peer, data_center, host_id, rack, release_version, rpc_address, schema_version, tokens "
        "FROM system.peers"))
    assert rows == []


def test_system_schema_keyspaces(admin, keyspace):
    rows = {r.keyspace_name: r for r in admin.execute("SELECT * FROM system_schema.keyspaces")}
    assert keyspace in rows
    assert "system" in rows and "system_schema" in rows
    row = rows[keyspace]
    assert row.durable_writes is True
    assert row.replication == {"class": "org.apache.cassandra.locator.SimpleStrategy",
                               "replication_factor": "1"}


def test_system_schema_tables_and_columns(admin, keyspace):
    admin.execute(
        "CREATE TABLE %s.sys_cols (a int, b text, c timestamp, d uuid, s text static, "
        "v list<int>, m map<text, frozen<list<int>>>, f frozen<set<bigint>>, t tuple<int, text>, "
        "PRIMARY KEY ((a, b), c, d)) WITH CLUSTERING ORDER BY (c ASC, d DESC) AND comment = 'cols'"
        % keyspace)
    tbl = admin.execute(
        "SELECT * FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, "sys_cols")).one()
    assert tbl is not None
    assert tbl.comment == "cols"
    assert set(tbl.flags) == {"compound"}
    assert isinstance(tbl.id, uuid.UUID)
    assert tbl.default_time_to_live == 0
    assert tbl.gc_grace_seconds == 864000
    assert tbl.compaction["class"]
    # Maps decode to the driver's OrderedMap (a Mapping, not a dict).
    assert isinstance(tbl.caching, Mapping) and isinstance(tbl.compression, Mapping)

    cols = {r.column_name: r for r in admin.execute(
        "SELECT * FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, "sys_cols"))}
    got = {name: (r.kind, r.position, r.clustering_order, r.type) for name, r in cols.items()}
    assert got == {
        "a": ("partition_key", 0, "none", "int"),
        "b": ("partition_key", 1, "none", "text"),
        "c": ("clustering", 0, "asc", "timestamp"),
        "d": ("clustering", 1, "desc", "uuid"),
        "s": ("static", -1, "none", "text"),
        "v": ("regular", -1, "none", "list<int>"),
        "m": ("regular", -1, "none", "map<text, frozen<list<int>>>"),
        "f": ("regular", -1, "none", "frozen<set<bigint>>"),
        "t": ("regular", -1, "none", "frozen<tuple<int, text>>"),
    }

    # The narrow forms drivers send after a SCHEMA_CHANGE event.
    row = admin.execute(
        "SELECT kind, type FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s "
        "AND column_name = %s", (keyspace, "sys_cols", "d")).one()
    assert (row.kind, row.type) == ("clustering", "uuid")
    names = [r.table_name for r in admin.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))]
    assert "sys_cols" in names


@pytest.mark.parametrize("schema_table", ["types", "functions", "aggregates", "scylla_aggregates", "indexes", "views", "triggers",
                                          "scylla_tables", "scylla_keyspaces"])
def test_other_system_schema_tables_queryable(admin, keyspace, schema_table):
    rows = list(admin.execute(
        "SELECT * FROM system_schema.%s WHERE keyspace_name = %%s" % schema_table, (keyspace,)))
    assert rows == []


def test_scylla_tables_tell_clients_this_is_scylla(admin):
    # ScyllaDB's tools and test suites (cqlpy's is_scylla) look for a
    # `system` table named with "scylla"; Shoal follows ScyllaDB.
    names = [r.table_name for r in admin.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'system'")]
    assert "scylla_local" in names and "config" in names
    row = admin.execute("SELECT value FROM system.config WHERE name = 'consistent_cluster_management'").one()
    assert row.value == "true"


def test_versions_and_token_ring_as_scylladb_lists_them(admin, keyspace):
    row = admin.execute("SELECT key, build_mode, compatible_version, version FROM system.versions").one()
    assert row.key == "local" and row.build_mode in ("release", "debug") and row.version
    assert row.compatible_version == admin.execute("SELECT release_version FROM system.local").one()[0]
    # One row per vnode range (a single node: its own replica), each range
    # starting where the one before it ends, around the ring.
    num_tokens = int(admin.execute("SELECT value FROM system.config WHERE name = 'num_tokens'").one().value)
    rows = list(admin.execute("SELECT * FROM system.token_ring WHERE keyspace_name = %s", [keyspace]))
    assert len(rows) == num_tokens > 0
    local = admin.execute("SELECT data_center, rack, broadcast_address FROM system.local").one()
    assert {(r.table_name, r.dc, r.rack, str(r.endpoint)) for r in rows} == {
        ("<ALL>", local.data_center, local.rack, str(local.broadcast_address))}
    by_end = sorted((int(r.end_token), int(r.start_token)) for r in rows)
    ends = [end for end, _ in by_end]
    assert [start for _, start in by_end] == ends[-1:] + ends[:-1]
    # System keyspaces are local: not on the ring.
    assert list(admin.execute("SELECT * FROM system.token_ring WHERE keyspace_name = 'system'")) == []


def test_system_clients_lists_each_connection_with_its_driver_and_shard(admin):
    """ScyllaDB's system.clients: a row per CQL connection, with the driver
    it named in STARTUP, the shard serving it, and no TLS; a closed
    connection leaves the table."""
    if IS_CASSANDRA:
        pytest.skip("system.clients is ScyllaDB's")

    def listed():
        return {(r.address, r.port): r for r in admin.execute("SELECT * FROM system.clients")}

    before = listed()
    cluster = make_cluster()
    try:
        session = cluster.connect()
        rows = list(session.execute("SELECT * FROM system.clients"))
        ours = [r for r in rows if (r.address, r.port) not in before]
        assert ours, "the new session's connections are listed"
        for r in ours:
            assert r.client_type == "cql"
            assert ipaddress.ip_address(r.address).is_loopback
            assert 0 < r.port < 65536
            assert r.connection_stage == "READY"
            assert r.protocol_version == 4
            assert r.username == "anonymous"
            assert r.ssl_enabled is False and r.ssl_protocol is None and r.ssl_cipher_suite is None
            assert r.shard_id is not None and r.shard_id >= 0
            assert r.driver_name == "DataStax Python Driver" and r.driver_version
            assert r.client_options["DRIVER_NAME"] == r.driver_name
        # The table's key and filtering work as on any table.
        one = ours[0]
        same = session.execute("SELECT port, shard_id FROM system.clients WHERE address = %s AND port = %s",
                               [one.address, one.port]).one()
        assert (same.port, same.shard_id) == (one.port, one.shard_id)
        assert len({r.shard_id for r in rows}) >= 1
    finally:
        cluster.shutdown()
    closed = {(r.address, r.port) for r in ours}
    assert wait_until(lambda: not (closed & set(listed()))), "closed connections are no longer listed"


@pytest.mark.skipif(IS_CASSANDRA or not os.environ.get("SHOAL_API_PORT"), reason="flushes through Shoal's REST API")
def test_size_estimates_count_flushed_partitions_over_primary_ranges(session, keyspace):
    """system.size_estimates, as Cassandra and ScyllaDB fill it: per table
    and primary token range, the flushed partitions and their mean size.
    On one node the ranges cover the ring once and the counts add up to
    the partitions written."""
    from test_lwt import flush

    session.execute("CREATE TABLE size_est (k int PRIMARY KEY, v text)")
    insert = session.prepare("INSERT INTO size_est (k, v) VALUES (?, ?)")
    for k in range(2000):
        session.execute(insert, (k, "x" * 100))
    query = "SELECT * FROM system.size_estimates WHERE keyspace_name = %s AND table_name = 'size_est'"
    assert all(r.partitions_count == 0 for r in session.execute(query, [keyspace])), "memtables do not count"
    flush(keyspace, "size_est")
    rows = list(session.execute(query, [keyspace]))
    assert rows
    total = sum(r.partitions_count for r in rows)
    assert abs(total - 2000) <= len(rows), total
    assert all(r.mean_partition_size > 100 for r in rows if r.partitions_count), rows[:3]
    ranges = sorted((int(r.range_start), int(r.range_end)) for r in rows)
    minimum = -2 ** 63
    assert all(start < end or end == minimum for start, end in ranges), ranges[:5]
    # The ranges tile the ring: each starts where another ends.
    width = sum(((end if end != minimum else 2 ** 63) - start) for start, end in ranges)
    assert width == 2 ** 64, width


def test_protocol_servers_list_the_cql_listeners(admin):
    from conftest import PORT
    rows = {r.name: r for r in admin.execute("SELECT name, listen_addresses, protocol, protocol_version "
                                             "FROM system.protocol_servers")}
    cql = rows["native transport"]
    assert cql.protocol == "cql" and cql.protocol_version
    assert any(address.endswith(":%d" % PORT) for address in cql.listen_addresses), cql.listen_addresses


def test_one_row_has_one_row(admin):
    """ScyllaDB's `system.one_row`, to select constants from."""
    row = admin.execute("SELECT * FROM system.one_row").one()
    assert row.system_dummy == ""
    assert admin.execute("SELECT count(*) FROM system.one_row").one()[0] == 1


@pytest.mark.skipif(IS_CASSANDRA or not os.environ.get("SHOAL_API_PORT"), reason="flushes through Shoal's REST API")
def test_runtime_info_sums_the_shards_memtables_and_load(session, keyspace):
    """ScyllaDB's `system.runtime_info`: text items in groups; memtable
    entries and memory grow with writes, the load once they are flushed."""
    from test_lwt import flush

    def info():
        out = {}
        for row in session.execute('SELECT "group", item, value FROM system.runtime_info'):
            out.setdefault(row.group, {})[row.item] = row.value
        return out

    session.execute("CREATE TABLE runtime (k int PRIMARY KEY, v text)")
    insert = session.prepare("INSERT INTO runtime (k, v) VALUES (?, ?)")
    for k in range(10):
        session.execute(insert, (k, "x" * 100))
    groups = info()
    assert int(groups["memtable"]["entries"]) >= 10
    assert int(groups["memtable"]["memory_used"]) > 0
    assert int(groups["memtable"]["memory_total"]) > 0
    assert groups["generic"]["uptime"].endswith(" seconds")
    assert set(groups) >= {"generic", "memory", "memtable", "cache"}
    flush(keyspace, "runtime")
    assert int(info()["generic"]["load"]) > 0

"""DDL through the DataStax driver: keyspaces, tables, options, metadata, errors."""

import re
import uuid

import pytest

from cassandra import AlreadyExists, InvalidRequest
from cassandra.protocol import ConfigurationException, SyntaxException

from conftest import local_row


def refreshed_table(cluster, ks, name):
    cluster.refresh_schema_metadata()
    return cluster.metadata.keyspaces[ks].tables[name]


def new_ks_name(prefix="ddl"):
    return "shoal_%s_%s" % (prefix, uuid.uuid4().hex[:10])


# --- keyspaces ---------------------------------------------------------------

def test_create_alter_drop_keyspace_simple_strategy(cluster, admin):
    ks = new_ks_name("simple")
    rs = admin.execute(
        "CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % ks
    )
    try:
        # The driver waits for schema agreement after DDL; it must succeed.
        assert rs.response_future.is_schema_agreed
        cluster.refresh_schema_metadata()
        meta = cluster.metadata.keyspaces[ks]
        assert meta.durable_writes is True
        assert meta.replication_strategy.name == "SimpleStrategy"
        assert meta.replication_strategy.replication_factor == 1

        row = admin.execute(
            "SELECT keyspace_name, durable_writes, replication FROM system_schema.keyspaces "
            "WHERE keyspace_name = %s", (ks,)).one()
        assert row.keyspace_name == ks
        assert row.replication["class"] == "org.apache.cassandra.locator.SimpleStrategy"
        assert row.replication["replication_factor"] == "1"

        admin.execute("ALTER KEYSPACE %s WITH durable_writes = false" % ks)
        cluster.refresh_schema_metadata()
        assert cluster.metadata.keyspaces[ks].durable_writes is False
    finally:
        admin.execute("DROP KEYSPACE %s" % ks)
    cluster.refresh_schema_metadata()
    assert ks not in cluster.metadata.keyspaces
    assert admin.execute(
        "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s", (ks,)).one() is None


def test_network_topology_strategy_keyspace(cluster, admin):
    dc = local_row(admin).data_center
    ks = new_ks_name("nts")
    admin.execute(
        "CREATE KEYSPACE %s WITH replication = {'class': 'NetworkTopologyStrategy', '%s': 1}" % (ks, dc))
    try:
        cluster.refresh_schema_metadata()
        strategy = cluster.metadata.keyspaces[ks].replication_strategy
        assert strategy.name == "NetworkTopologyStrategy"
        assert strategy.dc_replication_factors == {dc: 1}

        row = admin.execute(
            "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (ks,)).one()
        assert row.replication == {
            "class": "org.apache.cassandra.locator.NetworkTopologyStrategy", dc: "1"}

        # ALTER from NTS to SimpleStrategy and back with a plain replication_factor.
        admin.execute(
            "ALTER KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % ks)
        cluster.refresh_schema_metadata()
        assert cluster.metadata.keyspaces[ks].replication_strategy.name == "SimpleStrategy"
        # A table in an NTS keyspace is usable.
        admin.execute("CREATE TABLE %s.t (k int PRIMARY KEY, v int)" % ks)
        admin.execute("INSERT INTO %s.t (k, v) VALUES (1, 2)" % ks)
        assert admin.execute("SELECT v FROM %s.t WHERE k = 1" % ks).one().v == 2
    finally:
        admin.execute("DROP KEYSPACE %s" % ks)


def test_keyspace_if_not_exists_and_if_exists(admin):
    ks = new_ks_name("ifne")
    create = ("CREATE KEYSPACE IF NOT EXISTS %s WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}" % ks)
    admin.execute(create)
    admin.execute(create)  # no error the second time
    admin.execute("DROP KEYSPACE IF EXISTS %s" % ks)
    admin.execute("DROP KEYSPACE IF EXISTS %s" % ks)  # no error when absent


def test_duplicate_keyspace_is_already_exists(admin, keyspace):
    with pytest.raises(AlreadyExists) as ei:
        admin.execute(
            "CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
            % keyspace)
    assert ei.value.keyspace == keyspace
    assert not ei.value.table


def test_unknown_keyspace_errors(admin):
    with pytest.raises(InvalidRequest):
        admin.execute("DROP KEYSPACE shoal_no_such_keyspace")
    with pytest.raises(InvalidRequest):
        admin.execute("CREATE TABLE shoal_no_such_keyspace.t (k int PRIMARY KEY)")
    with pytest.raises(InvalidRequest):
        admin.execute("USE shoal_no_such_keyspace")
    with pytest.raises(InvalidRequest):
        admin.execute("SELECT * FROM shoal_no_such_keyspace.t")


def test_keyspace_replication_defaults_and_names(admin):
    # Without a class, NetworkTopologyStrategy with the factor for this
    # data center; option names are case-sensitive.
    dc = admin.execute("SELECT data_center FROM system.local").one().data_center
    ks = new_ks_name("dflt")
    admin.execute("CREATE KEYSPACE %s WITH replication = {'replication_factor': 1}" % ks)
    try:
        row = admin.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (ks,)).one()
        assert row.replication == {"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", dc: "1"}
    finally:
        admin.execute("DROP KEYSPACE %s" % ks)
    with pytest.raises(ConfigurationException):
        admin.execute("CREATE KEYSPACE %s WITH replication = {'class': 'NetworkTopologyStrategy', "
                      "'Replication_factor': 1}" % new_ks_name("case"))
    # A data center must exist (on CREATE and ALTER).
    with pytest.raises(ConfigurationException, match="Unrecognized strategy option {nosuchdc}"):
        admin.execute("CREATE KEYSPACE %s WITH replication = {'class': 'NetworkTopologyStrategy', "
                      "'nosuchdc': 1}" % new_ks_name("nodc"))
    # An unquoted name starts with a letter; a quoted one may not.
    with pytest.raises(SyntaxException):
        admin.execute("CREATE KEYSPACE _ks WITH replication = {'replication_factor': 1}")
    admin.execute("CREATE KEYSPACE \"_ks\" WITH replication = {'replication_factor': 1}")
    admin.execute("DROP KEYSPACE \"_ks\"")


# --- tables ------------------------------------------------------------------

def test_create_table_simple_primary_key(cluster, session, keyspace, tname):
    session.execute("CREATE TABLE %s (k int PRIMARY KEY, v text)" % tname)
    t = refreshed_table(cluster, keyspace, tname)
    assert [c.name for c in t.partition_key] == ["k"]
    assert t.clustering_key == []
    assert t.columns["k"].cql_type == "int"
    assert t.columns["v"].cql_type == "text"
    session.execute("INSERT INTO %s (k, v) VALUES (1, 'one')" % tname)
    assert session.execute("SELECT v FROM %s WHERE k = 1" % tname).one().v == "one"


def test_create_table_compound_partition_key_and_desc_clustering(cluster, session, keyspace, tname):
    session.execute(
        "CREATE TABLE %s (a int, b text, c int, d bigint, s text static, v int, "
        "PRIMARY KEY ((a, b), c, d)) WITH CLUSTERING ORDER BY (c DESC, d ASC)" % tname)
    t = refreshed_table(cluster, keyspace, tname)
    assert [c.name for c in t.partition_key] == ["a", "b"]
    assert [c.name for c in t.clustering_key] == ["c", "d"]
    assert t.columns["c"].is_reversed is True
    assert t.columns["d"].is_reversed is False
    assert t.columns["s"].is_static is True
    assert t.columns["v"].is_static is False
    # The CQL the driver regenerates from metadata round-trips the definition.
    cql = t.export_as_string()
    assert "PRIMARY KEY ((a, b), c, d)" in cql
    assert "CLUSTERING ORDER BY (c DESC, d ASC)" in cql
    assert "s text static" in cql

    for c in range(3):
        session.execute("INSERT INTO %s (a, b, c, d, v) VALUES (1, 'x', %d, 0, %d)" % (tname, c, c * 10))
    rows = list(session.execute("SELECT c FROM %s WHERE a = 1 AND b = 'x'" % tname))
    assert [r.c for r in rows] == [2, 1, 0]


def test_table_options_visible_in_metadata(cluster, session, keyspace, tname):
    session.execute(
        "CREATE TABLE %s (k int PRIMARY KEY, v int) WITH comment = 'hello shoal' "
        "AND default_time_to_live = 3600 AND gc_grace_seconds = 7200" % tname)
    t = refreshed_table(cluster, keyspace, tname)
    assert t.options["comment"] == "hello shoal"
    assert t.options["default_time_to_live"] == 3600
    assert t.options["gc_grace_seconds"] == 7200
    cql = t.export_as_string()
    assert "comment = 'hello shoal'" in cql
    assert "default_time_to_live = 3600" in cql

    session.execute("ALTER TABLE %s WITH comment = 'changed' AND gc_grace_seconds = 100" % tname)
    t = refreshed_table(cluster, keyspace, tname)
    assert t.options["comment"] == "changed"
    assert t.options["gc_grace_seconds"] == 100
    assert t.options["default_time_to_live"] == 3600

    row = session.execute(
        "SELECT comment, default_time_to_live, gc_grace_seconds FROM system_schema.tables "
        "WHERE keyspace_name = %s AND table_name = %s", (keyspace, tname)).one()
    assert (row.comment, row.default_time_to_live, row.gc_grace_seconds) == ("changed", 3600, 100)


def test_unknown_compression_option_is_refused(session, tname):
    # ScyllaDB's compression_parameters::validate_options; the names it and
    # Cassandra know are accepted.
    with pytest.raises(ConfigurationException, match="Unknown compression option 'sstable_compressor'."):
        session.execute("CREATE TABLE %s (k int PRIMARY KEY) WITH compression = "
                        "{'sstable_compressor': 'DeflateCompressor'}" % tname)
    session.execute("CREATE TABLE %s (k int PRIMARY KEY) WITH compression = "
                    "{'sstable_compression': 'LZ4Compressor', 'chunk_length_in_kb': 16, 'crc_check_chance': 1}" % tname)
    with pytest.raises(ConfigurationException, match="Unknown compression option 'level'."):
        session.execute("ALTER TABLE %s WITH compression = {'class': 'ZstdCompressor', 'level': 3}" % tname)
    session.execute("ALTER TABLE %s WITH compression = {'class': 'ZstdCompressor', 'compression_level': 3}" % tname)


def test_compaction_options_are_checked(session, keyspace, tname):
    # ScyllaDB's per-strategy checks and texts: a bad value or an option
    # the strategy does not take is refused, on tables and views alike, and
    # the table keeps its options.
    session.execute("CREATE TABLE %s (k int PRIMARY KEY, v int) WITH compaction = "
                    "{'class': 'SizeTieredCompactionStrategy', 'min_threshold': 6}" % tname)
    refused = [
        ("{'class': 'SizeTieredCompactionStrategy', 'tombstone_threshold': -0.4}",
         r"tombstone_threshold value \(-0.4\) must be between 0.0 and 1.0"),
        ("{'class': 'SizeTieredCompactionStrategy', 'bucket_high': 0.7}",
         r"bucket_high value \(0.7\) must be greater than 1.0"),
        ("{'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'SECONDS'}",
         "Invalid window unit SECONDS for compaction_window_unit"),
        ("{'class': 'LeveledCompactionStrategy', 'compaction_window_size': 4}",
         r'Invalid compaction strategy options \{"compaction_window_size": "4"\} for chosen strategy type'),
    ]
    for options, message in refused:
        with pytest.raises(ConfigurationException, match=message):
            session.execute("ALTER TABLE %s WITH compaction = %s" % (tname, options))
    with pytest.raises(SyntaxException, match="Invalid integer value 2147483648 for 'sstable_size_in_mb'"):
        session.execute("ALTER TABLE %s WITH compaction = {'class': 'LeveledCompactionStrategy', "
                        "'sstable_size_in_mb': 2147483648}" % tname)
    with pytest.raises(ConfigurationException, match=r"tombstone_threshold value \(5.5\)"):
        session.execute("CREATE MATERIALIZED VIEW %s_by_v AS SELECT * FROM %s WHERE v IS NOT NULL AND "
                        "k IS NOT NULL PRIMARY KEY (v, k) WITH compaction = "
                        "{'class': 'SizeTieredCompactionStrategy', 'tombstone_threshold': 5.5}" % (tname, tname))
    row = session.execute("SELECT compaction FROM system_schema.tables WHERE keyspace_name = %s "
                          "AND table_name = %s", (keyspace, tname)).one()
    assert row.compaction["min_threshold"] == "6"
    session.execute("ALTER TABLE %s WITH compaction = {'class': 'TimeWindowCompactionStrategy', "
                    "'compaction_window_unit': 'HOURS', 'compaction_window_size': 2, 'min_threshold': 2}" % tname)


def test_incremental_compaction_strategy(session, keyspace, tname):
    # ScyllaDB's ICS (cqlpy's test_compaction_strategy_validation.py): its
    # options with ScyllaDB's checks and texts, shown under its short name,
    # and a table using it takes writes and flushes.
    session.execute("CREATE TABLE %s (k int PRIMARY KEY, v int) WITH compaction = "
                    "{'class': 'IncrementalCompactionStrategy', 'sstable_size_in_mb': 1000, "
                    "'space_amplification_goal': 1.5}" % tname)
    row = session.execute("SELECT compaction FROM system_schema.tables WHERE keyspace_name = %s "
                          "AND table_name = %s", (keyspace, tname)).one()
    assert row.compaction["class"] == "IncrementalCompactionStrategy"
    refused = [
        ("'min_sstable_size': -1", r"min_sstable_size value \(-1\) must be non negative"),
        ("'bucket_low': 1.3", r"bucket_low value \(1.3\) must be between 0.0 and 1.0"),
        ("'space_amplification_goal': 2.2",
         r"space_amplification_goal value \(2.2\) must be greater than 1.0 and less than or equal to 2.0"),
        ("'cold_reads_to_omit': 0.5",
         r'Invalid compaction strategy options \{"cold_reads_to_omit": "0.5"\} for chosen strategy type'),
    ]
    for option, message in refused:
        with pytest.raises(ConfigurationException, match=message):
            session.execute("ALTER TABLE %s WITH compaction = {'class': 'IncrementalCompactionStrategy', %s}"
                            % (tname, option))
    for k in range(100):
        session.execute("INSERT INTO %s (k, v) VALUES (%d, %d)" % (tname, k, k))
    assert session.execute("SELECT count(*) FROM %s" % tname).one()[0] == 100


def test_bloom_filter_fp_chance_is_kept_in_range(session, tname):
    for chance in ("1.1", "0.0000001", "0"):
        with pytest.raises(ConfigurationException, match="bloom_filter_fp_chance must be larger than "):
            session.execute("CREATE TABLE %s (k int PRIMARY KEY) WITH bloom_filter_fp_chance = %s" % (tname, chance))
    session.execute("CREATE TABLE %s (k int PRIMARY KEY) WITH bloom_filter_fp_chance = 1.0" % tname)
    session.execute("ALTER TABLE %s WITH bloom_filter_fp_chance = 0.001" % tname)


def test_index_intervals_are_checked_and_at_prepare(session, tname):
    # ScyllaDB's checks and texts (cqlpy test_create_table.py); PREPARE
    # checks CREATE TABLE's options as execution does.
    with pytest.raises(ConfigurationException, match="min_index_interval must be greater than 0"):
        session.prepare("CREATE TABLE %s (k int PRIMARY KEY) WITH compaction = "
                        "{'class': 'LeveledCompactionStrategy'} AND min_index_interval = 0" % tname)
    with pytest.raises(ConfigurationException, match="min_index_interval must be greater than 0"):
        session.execute("CREATE TABLE %s (k int PRIMARY KEY) WITH min_index_interval = -1" % tname)
    with pytest.raises(ConfigurationException, match="max_index_interval must be greater than min_index_interval"):
        session.execute("CREATE TABLE %s (k int PRIMARY KEY) WITH min_index_interval = 100 "
                        "AND max_index_interval = 10" % tname)
    session.execute("CREATE TABLE %s (k int PRIMARY KEY) WITH min_index_interval = 64" % tname)
    with pytest.raises(ConfigurationException, match="max_index_interval must be greater than min_index_interval"):
        session.execute("ALTER TABLE %s WITH max_index_interval = 32" % tname)
    session.execute("ALTER TABLE %s WITH max_index_interval = 64" % tname)


def test_speculative_retry_is_checked(session, tname):
    # ScyllaDB's speculative_retry::from_sstring (cqlpy test_alter_table.py):
    # a percentile in [0, 100], any case, the value named upper-cased.
    session.execute("CREATE TABLE %s (k int PRIMARY KEY)" % tname)
    for good in ["-0", "+0", "0.001", "99.9", "100", "+100"]:
        session.execute("ALTER TABLE %s WITH speculative_retry = '%spercentile'" % (tname, good))
    for good in ["NONE", "always", "50ms", "99PERCENTILE"]:
        session.execute("ALTER TABLE %s WITH speculative_retry = '%s'" % (tname, good))
    for bad in ["-0.1", "100.001", "+101"]:
        with pytest.raises(ConfigurationException, match=re.escape(
                "Invalid value %sPERCENTILE for PERCENTILE option 'speculative_retry': "
                "must be between (0.0 and 100.0)" % bad)):
            session.execute("ALTER TABLE %s WITH speculative_retry = '%spercentile'" % (tname, bad))
    for bad in ["dogPERCENTILE", "fast", "xms"]:
        with pytest.raises(ConfigurationException,
                           match=re.escape("cannot convert %s to speculative_retry" % bad.upper())):
            session.execute("CREATE TABLE %s_2 (k int PRIMARY KEY) WITH speculative_retry = '%s'" % (tname, bad))


def test_a_system_table_takes_only_memtable_flush_period(session):
    # ScyllaDB's (cqlpy test_system_tables.py, its #21223).
    from cassandra import Unauthorized
    for options in ["comment = ''", "memtable_flush_period_in_ms = 80000 AND comment = ''"]:
        with pytest.raises(Unauthorized, match=re.escape("system keyspace is not user-modifiable.")):
            session.execute("ALTER TABLE system.compaction_history WITH " + options)
    with pytest.raises(Unauthorized, match="not user-modifiable"):
        session.execute("ALTER TABLE system.local ADD x int")
    session.execute("ALTER TABLE system.compaction_history WITH memtable_flush_period_in_ms = 80000")


def test_compression_chunk_length_is_checked(session, tname):
    # ScyllaDB's compression_parameters (cqlpy test_sstable_compression.py).
    def create(options):
        session.execute("CREATE TABLE %s (k int PRIMARY KEY) WITH compression = {%s}" % (tname, options))
    lz4 = "'sstable_compression': 'LZ4Compressor', "
    with pytest.raises(ConfigurationException, match=re.escape("chunk_length_in_kb/chunk_length_kb must be a power of 2.")):
        create(lz4 + "'chunk_length_in_kb': 100")
    for bad in ["0", "-1"]:
        with pytest.raises(ConfigurationException,
                           match="Invalid negative or null for chunk_length_in_kb/chunk_length_kb"):
            create(lz4 + "'chunk_length_in_kb': " + bad)
    with pytest.raises(SyntaxException, match="Invalid integer value dog for chunk_length_in_kb"):
        create(lz4 + "'chunk_length_in_kb': 'dog'")
    with pytest.raises(ConfigurationException, match=re.escape("chunk_length_in_kb/chunk_length_kb must be 128 or less.")):
        create(lz4 + "'chunk_length_in_kb': 1048576")
    with pytest.raises(ConfigurationException, match=re.escape("crc_check_chance must be between 0.0 and 1.0.")):
        create(lz4 + "'crc_check_chance': 2")
    create(lz4 + "'chunk_length_in_kb': 128")
    with pytest.raises(ConfigurationException, match="must be 128 or less"):
        session.execute("ALTER TABLE %s WITH compression = {%s'chunk_length_in_kb': 256}" % (tname, lz4))


def test_alter_table_add_and_drop_column(cluster, session, keyspace, tname):
    session.execute("CREATE TABLE %s (k int PRIMARY KEY, v int)" % tname)
    session.execute("INSERT INTO %s (k, v) VALUES (1, 10)" % tname)
    session.execute("ALTER TABLE %s ADD w text" % tname)
    t = refreshed_table(cluster, keyspace, tname)
    assert t.columns["w"].cql_type == "text"
    row = session.execute("SELECT k, v, w FROM %s WHERE k = 1" % tname).one()
    assert (row.k, row.v, row.w) == (1, 10, None)
    session.execute("UPDATE %s SET w = 'x' WHERE k = 1" % tname)
    assert session.execute("SELECT w FROM %s WHERE k = 1" % tname).one().w == "x"

    session.execute("ALTER TABLE %s DROP v" % tname)
    t = refreshed_table(cluster, keyspace, tname)
    assert "v" not in t.columns
    row = session.execute("SELECT * FROM %s WHERE k = 1" % tname).one()
    assert row._fields == ("k", "w")
    with pytest.raises(InvalidRequest):
        session.execute("SELECT v FROM %s" % tname)


def test_drop_table(cluster, session, keyspace, tname):
    session.execute("CREATE TABLE %s (k int PRIMARY KEY)" % tname)
    session.execute("DROP TABLE %s" % tname)
    cluster.refresh_schema_metadata()
    assert tname not in cluster.metadata.keyspaces[keyspace].tables
    with pytest.raises(InvalidRequest):
        session.execute("SELECT * FROM %s" % tname)
    with pytest.raises(InvalidRequest):
        session.execute("DROP TABLE %s" % tname)
    session.execute("DROP TABLE IF EXISTS %s" % tname)
    # The name can be reused, and the new table starts empty.
    session.execute("CREATE TABLE %s (k int PRIMARY KEY, v int)" % tname)
    assert list(session.execute("SELECT * FROM %s" % tname)) == []


def test_table_if_not_exists_and_duplicate(session, keyspace, tname):
    session.execute("CREATE TABLE %s (k int PRIMARY KEY)" % tname)
    session.execute("CREATE TABLE IF NOT EXISTS %s (k int PRIMARY KEY, other text)" % tname)
    with pytest.raises(AlreadyExists) as ei:
        session.execute("CREATE TABLE %s (k int PRIMARY KEY)" % tname)
    assert ei.value.keyspace == keyspace
    assert ei.value.table == tname


def test_truncate(session, tname):
    session.execute("CREATE TABLE %s (k int, c int, v int, PRIMARY KEY (k, c))" % tname)
    for k in range(5):
        for c in range(3):
            session.execute("INSERT INTO %s (k, c, v) VALUES (%d, %d, 1)" % (tname, k, c))
    assert session.execute("SELECT count(*) FROM %s" % tname).one()[0] == 15
    session.execute("TRUNCATE %s" % tname)
    assert list(session.execute("SELECT * FROM %s" % tname)) == []
    session.execute("INSERT INTO %s (k, c, v) VALUES (1, 1, 1)" % tname)
    session.execute("TRUNCATE TABLE %s" % tname)
    assert session.execute("SELECT count(*) FROM %s" % tname).one()[0] == 0


def test_unknown_table_errors(session):
    with pytest.raises(InvalidRequest):
        session.execute("SELECT * FROM no_such_table")
    with pytest.raises(InvalidRequest):
        session.execute("INSERT INTO no_such_table (k) VALUES (1)")
    with pytest.raises(InvalidRequest):
        session.execute("ALTER TABLE no_such_table ADD x int")
    with pytest.raises(InvalidRequest):
        session.execute("TRUNCATE no_such_table")


def test_use_keyspace(cluster, keyspace, tname):
    s = cluster.connect()
    try:
        s.execute("USE %s" % keyspace)
        assert s.keyspace == keyspace
        s.execute("CREATE TABLE %s (k int PRIMARY KEY, v int)" % tname)
        s.execute("INSERT INTO %s (k, v) VALUES (1, 1)" % tname)
        assert s.execute("SELECT v FROM %s.%s WHERE k = 1" % (keyspace, tname)).one().v == 1
        # Quoted form, as drivers send it.
        s.execute('USE "%s"' % keyspace)
        assert s.execute("SELECT v FROM %s WHERE k = 1" % tname).one().v == 1
    finally:
        s.shutdown()


def test_schema_agreement(cluster, session, tname):
    rs = session.execute("CREATE TABLE %s (k int PRIMARY KEY)" % tname)
    assert rs.response_future.is_schema_agreed
    assert cluster.control_connection.wait_for_schema_agreement() is True
    rs = session.execute("ALTER TABLE %s ADD v int" % tname)
    assert rs.response_future.is_schema_agreed
    rs = session.execute("DROP TABLE %s" % tname)
    assert rs.response_future.is_schema_agreed


def test_create_table_skips_empty_column_definitions(session):
    # cqlpy's tuples_with_nulls_comparison and overflow tests: ScyllaDB's
    # grammar takes `(a int, , b int,)`; a leading comma stays an error.
    session.execute("CREATE TABLE commas (k int, , v int, PRIMARY KEY (k), )")
    session.execute("INSERT INTO commas (k, v) VALUES (1, 2)")
    assert tuple(session.execute("SELECT k, v FROM commas").one()) == (1, 2)
    with pytest.raises(SyntaxException):
        session.execute("CREATE TABLE commas2 (, k int PRIMARY KEY)")


def test_drop_function_and_aggregate_find_none(session, keyspace):
    """DROP FUNCTION|AGGREGATE of a function that does not exist, in a
    keyspace that may not either (ScyllaDB's texts); IF EXISTS accepts that."""
    for kind in ("FUNCTION", "AGGREGATE"):
        with pytest.raises(InvalidRequest, match="No function named %s.f found" % keyspace):
            session.execute("DROP %s %s.f" % (kind, keyspace))
        with pytest.raises(InvalidRequest, match=r"User function nosuch_ks.f\(int, text\) doesn't exist"):
            session.execute("DROP %s nosuch_ks.f(int,text)" % kind)
        session.execute("DROP %s IF EXISTS %s.f" % (kind, keyspace))
        session.execute("DROP %s IF EXISTS f(int)" % kind)


# --- ScyllaDB's CREATE TABLE texts --------------------------------------------

def test_clustering_order_directive_texts(session, tname):
    # ScyllaDB's checks in its order: no more columns than the clustering
    # key, then each in key order, a prefix of it.
    base = "CREATE TABLE %s (pk int, ck1 int, ck2 int, v int, PRIMARY KEY (pk, ck1, ck2)) " % tname
    cases = [
        ("WITH CLUSTERING ORDER BY (ck2 ASC)", "^Missing CLUSTERING ORDER for column ck1$"),
        ("WITH CLUSTERING ORDER BY (v ASC)", "^Missing CLUSTERING ORDER for column ck1$"),
        ("WITH CLUSTERING ORDER BY (ck2 ASC, ck1 DESC)",
         r"^The order of columns in the CLUSTERING ORDER directive must be the one of the clustering key "
         r"\(ck1 must appear before ck2\)$"),
        ("WITH CLUSTERING ORDER BY (ck1 ASC, ck2 DESC, v ASC)",
         "^Only clustering key columns can be defined in CLUSTERING ORDER directive$"),
    ]
    for options, message in cases:
        with pytest.raises(InvalidRequest) as ei:
            session.execute(base + options)
        assert re.search(message, server_message(ei.value)), options
    # A prefix of the clustering key is enough; the rest stay ascending.
    session.execute(base + "WITH CLUSTERING ORDER BY (ck1 DESC)")


def server_message(error):
    """The server's own text inside the driver's 'Error from server: ...'."""
    return re.search(r'message="(.*)"$', str(error), re.S).group(1)


NAME_MAX_LENGTH = 207  # ScyllaDB's schema::NAME_LENGTH


def padded(prefix, length):
    name = "%s_%s" % (prefix, uuid.uuid4().hex[:8])
    return name + "x" * (length - len(name))


def test_name_lengths_and_characters_are_scyllas(admin, session, keyspace):
    # Names of 207 characters are kept; 208 are refused naming the name.
    ks = padded("ks", NAME_MAX_LENGTH)
    admin.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % ks)
    admin.execute("DROP KEYSPACE %s" % ks)
    long_ks = padded("ks", NAME_MAX_LENGTH + 1)
    with pytest.raises(InvalidRequest, match=re.escape(
            "Keyspace names shouldn't be more than 207 characters long (got \"%s\")" % long_ks)):
        admin.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % long_ks)
    t = padded("t", NAME_MAX_LENGTH)
    session.execute("CREATE TABLE %s (p int PRIMARY KEY, x int)" % t)
    long_t = padded("t", NAME_MAX_LENGTH + 1)
    with pytest.raises(InvalidRequest, match=re.escape(
            "Table names shouldn't be more than 207 characters long (got \"%s\")" % long_t)):
        session.execute("CREATE TABLE %s (p int PRIMARY KEY, x int)" % long_t)
    session.execute("CREATE INDEX %s ON %s (x)" % (padded("i", NAME_MAX_LENGTH), t))
    long_i = padded("i", NAME_MAX_LENGTH + 1)
    with pytest.raises(InvalidRequest, match=long_i):
        session.execute("CREATE INDEX %s ON %s (x)" % (long_i, t))
    long_v = padded("v", NAME_MAX_LENGTH + 1)
    with pytest.raises(InvalidRequest, match=long_v):
        session.execute("CREATE MATERIALIZED VIEW %s AS SELECT * FROM %s WHERE p IS NOT NULL AND x IS NOT NULL "
                        "PRIMARY KEY (x, p)" % (long_v, t))
    # A quoted name of other characters is refused in ScyllaDB's words.
    with pytest.raises(InvalidRequest, match=re.escape(
            '"table-name-with-dash" is not a valid table name (must be alphanumeric character only: [0-9A-Za-z]+)')):
        session.execute('CREATE TABLE "table-name-with-dash" (p int PRIMARY KEY)')
    with pytest.raises(InvalidRequest, match=re.escape('"keyspace-with-dash" is not a valid keyspace name')):
        admin.execute("CREATE KEYSPACE \"keyspace-with-dash\" WITH replication = "
                      "{'class': 'SimpleStrategy', 'replication_factor': 1}")

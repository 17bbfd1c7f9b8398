"""Storage operations a user sees: `shoal nodetool flush / compact / snapshot`,
SSTable files appearing and going, TRUNCATE and DROP removing files, and data
staying right across them and across restarts.

Runs its own node (from SHOAL_BIN) in a temporary workdir.
"""
import glob
import os
import time

import pytest

from node import skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)


def table_dir(node, keyspace, table):
    dirs = glob.glob(os.path.join(node.workdir, "data", "data", keyspace, table + "-*"))
    assert len(dirs) == 1, dirs
    return dirs[0]


def generations(path):
    """The (shard, generation) of every complete SSTable in `path`."""
    return sorted(os.path.basename(p).rsplit("-", 1)[0] for p in glob.glob(os.path.join(path, "*-TOC.txt")))


def settled_generations(path, ok, timeout_s=5.0):
    """generations(path) once `ok` accepts it: replaced SSTables are deleted
    in the background, just after the operation that replaced them."""
    deadline = time.time() + timeout_s
    while True:
        found = generations(path)
        if ok(found) or time.time() > deadline:
            return found
        time.sleep(0.05)


def data_bytes(path):
    """Bytes in the Data.db files of `path`; compacted-away SSTables are
    deleted in the background, so a file may vanish while we look."""
    total = 0
    for p in glob.glob(os.path.join(path, "*-Data.db")):
        try:
            total += os.path.getsize(p)
        except FileNotFoundError:
            pass
    return total


def fill(session, table, start, count):
    insert = session.prepare(f"INSERT INTO {table} (k, c, v) VALUES (?, ?, ?)")
    for k in range(start, start + count):
        session.execute(insert, (k, k % 7, f"value-{k}"))


def check(session, table, keys):
    rows = {r.k: r.v for r in session.execute(f"SELECT k, v FROM {table}")}
    assert rows == {k: f"value-{k}" for k in keys}


def test_flush_compact_snapshot_truncate_drop():
    with temp_node("shoal-storage-") as node:
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE ks.t (k int, c int, v text, PRIMARY KEY (k, c)) "
                        "WITH compaction = {'class': 'SizeTieredCompactionStrategy', 'min_threshold': 8}")
        fill(session, "ks.t", 0, 500)
        assert "flushed" in node.nodetool("flush", "ks", "t")
        path = table_dir(node, "ks", "t")
        first = generations(path)
        assert len(first) == 2, first  # one SSTable per shard
        fill(session, "ks.t", 500, 500)
        session.execute("DELETE FROM ks.t WHERE k = 3")
        node.nodetool("flush", "ks")
        assert len(generations(path)) == 4
        check(session, "ks.t", [k for k in range(1000) if k != 3])

        assert "compacted" in node.nodetool("compact", "ks", "t")
        compacted = settled_generations(path, lambda g: len(g) == 2)
        assert len(compacted) == 2 and not set(compacted) & set(first), compacted
        check(session, "ks.t", [k for k in range(1000) if k != 3])

        node.nodetool("snapshot", "-t", "before-truncate", "ks")
        snapshot = os.path.join(path, "snapshots", "before-truncate")
        linked = glob.glob(os.path.join(snapshot, "*-Data.db"))
        assert len(linked) == 2 and all(os.stat(p).st_nlink >= 2 for p in linked)

        # Unflushed writes, then a restart: the commitlog brings them back.
        fill(session, "ks.t", 1000, 100)
        cluster.shutdown()
        node.kill()
        node.start()
        cluster, session = node.session()
        check(session, "ks.t", [k for k in range(1100) if k != 3])

        session.execute("TRUNCATE ks.t")
        assert not set(settled_generations(path, lambda g: not set(g) & set(compacted))) & set(compacted)
        assert list(session.execute("SELECT * FROM ks.t")) == []
        # The truncated data must not come back from the commitlog either.
        fill(session, "ks.t", 2000, 10)
        cluster.shutdown()
        node.kill()
        node.start()
        cluster, session = node.session()
        check(session, "ks.t", range(2000, 2010))
        assert glob.glob(os.path.join(snapshot, "*-Data.db")), "snapshots survive TRUNCATE"

        node.nodetool("flush")
        session.execute("DROP TABLE ks.t")
        assert settled_generations(path, lambda g: g == []) == []
        cluster.shutdown()


def test_table_options_pick_compression_and_strategy():
    with temp_node("shoal-storage-opts-") as node:
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        for name, options in [
            ("lz4", "compression = {'class': 'LZ4Compressor'}"),
            ("zstd", "compression = {'class': 'ZstdCompressor'} AND compaction = {'class': 'LeveledCompactionStrategy'}"),
            ("plain", "compression = {'enabled': 'false'} AND compaction = "
                      "{'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'HOURS'}"),
        ]:
            session.execute(f"CREATE TABLE ks.{name} (k int, c int, v text, PRIMARY KEY (k, c)) WITH {options}")
            for round_ in range(3):
                fill(session, f"ks.{name}", round_ * 200, 200)
                node.nodetool("flush", "ks", name)
            node.nodetool("compact", "ks", name)
            check(session, f"ks.{name}", range(600))
        sizes = {name: data_bytes(table_dir(node, "ks", name)) for name in ["lz4", "zstd", "plain"]}
        assert sizes["zstd"] < sizes["plain"] and sizes["lz4"] < sizes["plain"], sizes
        cluster.shutdown()


def test_field_updates_of_flushed_rows_do_not_lose_each_other():
    """`SET u.f = ...` rewrites the stored user-type value: it reads it first
    (from an SSTable here, which awaits I/O), so concurrent updates of
    different fields of one row must not interleave and drop each other."""
    fields = [f"f{i}" for i in range(8)]
    rows = 100
    with temp_node("shoal-field-updates-") as node:
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute(f"CREATE TYPE ks.point ({', '.join(f'{f} int' for f in fields)})")
        session.execute("CREATE TABLE ks.t (k int PRIMARY KEY, u point)")
        zero = "{" + ", ".join(f"{f}: 0" for f in fields) + "}"
        for k in range(rows):
            session.execute(f"INSERT INTO ks.t (k, u) VALUES ({k}, {zero})")
        node.nodetool("flush", "ks", "t")
        updates = {f: session.prepare(f"UPDATE ks.t SET u.{f} = 1 WHERE k = ?") for f in fields}
        futures = [session.execute_async(updates[f], (k,)) for k in range(rows) for f in fields]
        for future in futures:
            future.result()
        lost = [(r.k, r.u) for r in session.execute("SELECT k, u FROM ks.t")
                if any(getattr(r.u, f) != 1 for f in fields)]
        assert lost == [], f"{len(lost)} rows lost field updates, e.g. {lost[:3]}"
        cluster.shutdown()

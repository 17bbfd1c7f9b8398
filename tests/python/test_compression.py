"""LZ4 and Snappy frame compression, negotiated in STARTUP as drivers do."""
import pytest
from cassandra.cluster import Cluster

from conftest import HOST, PORT


@pytest.mark.parametrize("algorithm", ["lz4", "snappy"])
def test_compressed_connection_round_trips_large_results(algorithm, keyspace):
    cluster = Cluster([HOST], port=PORT, protocol_version=4, compression=algorithm)
    try:
        session = cluster.connect(keyspace)
        session.execute("CREATE TABLE IF NOT EXISTS comp_%s (k int, c int, v text, PRIMARY KEY (k, c))" % algorithm)
        insert = session.prepare("INSERT INTO comp_%s (k, c, v) VALUES (?, ?, ?)" % algorithm)
        value = "compressible " * 200
        for c in range(200):
            session.execute(insert, (1, c, value))
        rows = list(session.execute("SELECT v FROM comp_%s WHERE k = 1" % algorithm))
        assert len(rows) == 200 and all(r.v == value for r in rows)
        # The connection really negotiated it.
        assert session.cluster.compression == algorithm
    finally:
        cluster.shutdown()

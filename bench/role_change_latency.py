#!/usr/bin/env python3
"""What waiting for every node costs a GRANT or REVOKE, on three nodes.

    SHOAL_BIN=target/release/shoal .venv/bin/python bench/role_change_latency.py \\
        [--pairs 50] [--compare OTHER_BIN]

Starts three nodes (tests/python/node.py's `start_cluster`, one loopback
address each, `PasswordAuthenticator` and `CassandraAuthorizer`) and times
`--pairs` GRANT/REVOKE pairs sent to node 1 one at a time, as an
administrator's script would. A role or permission statement is answered
once every live node installed it (group 0's barrier); `--compare` runs the
same against another binary (e.g. one built with the plain announce) to
show what the barrier adds. Prints the median and 90th percentile per
statement, in milliseconds.
"""
import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))


def measure(binary, pairs):
    """Per-statement latencies (ms) of `pairs` GRANT/REVOKE pairs on node 1."""
    os.environ["SHOAL_BIN"] = binary
    import node as node_module
    node_module.SHOAL_BIN = binary
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.policies import WhiteListRoundRobinPolicy

    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory(prefix="shoal-bench-roles-") as dir:
        options = os.path.join(dir, "shoal.yaml")
        with open(options, "w") as f:
            f.write("authenticator: PasswordAuthenticator\nauthorizer: CassandraAuthorizer\n")
        nodes = node_module.start_cluster(stack, "shoal-bench-roles-", args=["--options-file", options])
        cluster = nodes[0].cluster(auth_provider=PlainTextAuthProvider("cassandra", "cassandra"),
                                   load_balancing_policy=WhiteListRoundRobinPolicy([nodes[0].address]))
        try:
            session = cluster.connect()
            session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
                            "'replication_factor': 3}")
            session.execute("CREATE TABLE ks.t (k int PRIMARY KEY)")
            session.execute("CREATE ROLE dave WITH PASSWORD = 'd' AND LOGIN = true")
            latencies_ms = []
            for _ in range(pairs):
                for statement in ("GRANT SELECT ON ks.t TO dave", "REVOKE SELECT ON ks.t FROM dave"):
                    started = time.perf_counter()
                    session.execute(statement)
                    latencies_ms.append((time.perf_counter() - started) * 1000)
            return latencies_ms
        finally:
            cluster.shutdown()


def summary(latencies_ms):
    ordered = sorted(latencies_ms)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    return "median %.1f ms, p90 %.1f ms (%d statements)" % (statistics.median(ordered), p90, len(ordered))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--compare", help="another shoal binary to time the same way")
    args = parser.parse_args()
    binary = os.environ.get("SHOAL_BIN")
    if not binary:
        sys.exit("set SHOAL_BIN")
    runs = [(binary, measure(binary, args.pairs))]
    if args.compare:
        runs.append((args.compare, measure(args.compare, args.pairs)))
    for name, latencies_ms in runs:
        print("%s: %s" % (name, summary(latencies_ms)))


if __name__ == "__main__":
    main()

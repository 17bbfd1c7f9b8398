"""Two service levels competing for one shard: the requests each completes
and the CPU each group used, with the CPU scheduler on and off
(issue 27's service levels, issue 29 item 4).

    SHOAL_BIN=target/release/shoal .venv/bin/python bench/service_levels.py
        [--rounds 3] [--seconds 5] [--threads 6] [--shares 1000,200]

For each round and mode (`on`, `off`; the order alternates between rounds)
a fresh `--smp 1` node with password authentication, a partition of --rows
(8,000) rows, and roles `high` and `low` attached to levels of --shares; then each
role runs --threads synchronous loaders of `SELECT count(*)` over that
partition (the server's work far exceeds the client's, so the loaders
saturate the server) for --seconds, all at once. Prints per run the
requests completed per role, their ratio, and per group the CPU ms
(`scylla_scheduler_runtime_ms`) and ms waited; then the median ratio per
mode. `off` is `--cpu-scheduler off`: the groups are still accounted, no
level waits. Uses the driver-test helpers in tests/python.
"""
import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from node import temp_node  # noqa: E402
from test_auth import connect  # noqa: E402
from test_service_levels import by_group, compete, create_competitors, prepare_competition  # noqa: E402


def run(mode, args, shares):
    with temp_node("shoal-bench-sl-", start=False, smp=1) as node:
        options = os.path.join(node.workdir, "shoal.yaml")
        with open(options, "w") as f:
            f.write("authenticator: PasswordAuthenticator\n")
        node.args = ["--options-file", options] + (["--cpu-scheduler", "off"] if mode == "off" else [])
        node.start()
        cluster, session = connect(node, "cassandra", "cassandra")
        try:
            prepare_competition(session, args.rows)
            roles = create_competitors(session, shares)
        finally:
            cluster.shutdown()
        high, low = compete(node, roles, args.seconds, args.threads)
        metrics = node.metrics()
        runtime = by_group(metrics, "scylla_scheduler_runtime_ms")
        waited = by_group(metrics, "scylla_scheduler_waittime_ms")
        return {"high": high, "low": low, "ratio": high / max(low, 1),
                "cpu_ms": {g: round(runtime.get(g, 0)) for g in ("sl:high", "sl:low")},
                "waited_ms": {g: round(waited.get(g, 0)) for g in ("sl:high", "sl:low")}}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--shares", default="1000,200")
    p.add_argument("--rows", type=int, default=8000)
    args = p.parse_args(argv)
    shares = tuple(int(s) for s in args.shares.split(","))
    ratios = {"on": [], "off": []}
    for r in range(args.rounds):
        for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
            result = run(mode, args, shares)
            ratios[mode].append(result["ratio"])
            print(f"round {r} {mode}: {result}", flush=True)
    for mode, values in ratios.items():
        print(f"{mode}: median high:low requests {statistics.median(values):.2f} "
              f"(runs {', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Two builds of Shoal side by side: CPU per request, in one sitting.

    python3 bench/ab.py --a OLD/shoal --b target/release/shoal [--rounds 3]

Answers "does this change make a request cheaper?" on a noisy machine: for
each round, each binary in turn (the order alternates between rounds) is
started as `--smp 1` pinned to the server CPU, loaded with the workload's
population, and driven at full speed by one `shoal stress` (always the
`--b` binary's, so the loader is the same) pinned to the other CPU. Each run
reports ops/s, the server's CPU (% of its core) and their ratio, ops per
server-CPU-second: a figure that holds even when the server is not
saturated, since it divides by what the server really used. The report
gives every run, then the median per binary and the B/A ratio of medians.

Defaults are the cql-read workload of bench/compare.py (prepared point reads
of 1 KiB values, 100,000 keys, everything in the memtable) with more requests
in flight (4 connections x 64) so the server's core saturates.
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness.runner import IdleSpinner, Runner  # noqa: E402
from harness.systems import Context, Shoal  # noqa: E402
from harness.workloads import MODES, WORKLOADS, Mode  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a", required=True, help="the baseline shoal binary")
    p.add_argument("--b", required=True, help="the changed shoal binary (also the loader)")
    p.add_argument("--workload", default="cql-read", help="a workload of harness/workloads.py")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=int, default=8, help="recorded seconds per run")
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--server-cpu", default="1")
    p.add_argument("--loader-cpu", default="0")
    return p.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    workload = next(w for w in WORKLOADS if w.name == args.workload)
    mode = Mode("ab", keys=args.keys, partitions=args.keys // 10, warmup_s=2,
                duration_s=args.duration, fractions=(), concurrency=args.concurrency,
                cql_connections=args.connections, mc_connections=args.connections,
                populate_timeout_s=MODES["quick"].populate_timeout_s)
    tmp = tempfile.mkdtemp(prefix="shoal-ab-")
    runs = {"a": [], "b": []}
    order = ["a", "b"]
    for round_no in range(args.rounds):
        for which in order:
            binary = os.path.abspath(getattr(args, which))
            ctx = Context(root=ROOT, shoal_bin=binary, stress_bin=os.path.abspath(args.b), tmp=tmp,
                          server_cpu=args.server_cpu, loader_cpu=args.loader_cpu,
                          log=lambda m: print(m, file=sys.stderr, flush=True))
            runner = Runner(ctx, mode, os.path.join(tmp, f"raw-{round_no}-{which}"))
            shoal = Shoal(ctx)
            shoal.start()
            try:
                with IdleSpinner(args.loader_cpu, ctx.log) as spinner:
                    runner.spinner_pid = spinner.pid
                    port = shoal.port(workload.protocol)
                    populate = workload.populate_args(mode, port)
                    if populate is not None:
                        runner.stress(populate, "populate", mode.populate_timeout_s, shoal.pid())
                    summary = runner.stress(workload.run_args(mode, port), "max",
                                            runner.run_timeout(), shoal.pid())
            finally:
                shoal.stop()
            ops = summary.get("ops_per_s") or 0.0
            cpu = summary["cpu"]
            server = cpu.get("server_pct") or 0.0
            per_cpu_s = ops / (server / 100) if server else 0.0
            runs[which].append((ops, server, per_cpu_s, cpu.get("loader_pct"), cpu.get("other_pct"),
                                summary["latency_us"]["p99"]))
        order.reverse()
    print(f"# A/B: {args.workload}, {args.rounds} rounds x {args.duration} s, "
          f"{args.connections} connections x {args.concurrency} in flight\n")
    print(f"- A: `{args.a}`\n- B: `{args.b}`\n")
    print("| build | round | ops/s | server CPU % | ops per server-CPU-s | loader CPU % | other % | p99 µs |")
    print("|---|---|---|---|---|---|---|---|")
    for which in ("a", "b"):
        for i, (ops, server, per, loader, other, p99) in enumerate(runs[which]):
            print(f"| {which.upper()} | {i + 1} | {ops:,.0f} | {server:.1f} | {per:,.0f} | {loader} | {other} "
                  f"| {p99:,.0f} |")
    med = {w: statistics.median(r[2] for r in runs[w]) for w in runs}
    med_ops = {w: statistics.median(r[0] for r in runs[w]) for w in runs}
    print(f"\nMedian ops per server-CPU-second: A {med['a']:,.0f}, B {med['b']:,.0f}, "
          f"B/A = {med['b'] / med['a']:.2f}")
    print(f"Median ops/s: A {med_ops['a']:,.0f}, B {med_ops['b']:,.0f}, "
          f"B/A = {med_ops['b'] / med_ops['a']:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])

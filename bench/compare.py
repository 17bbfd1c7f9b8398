"""Shoal against its peers, side by side: `scripts/bench.sh [quick|full] [--only W,...]`.

For each system in turn (Shoal, memcached, Apache Cassandra) this starts one
server pinned to one CPU with one thread/shard, drives each workload that the
system runs with `shoal stress` pinned to another CPU (populate, a
max-throughput run, then a stepped fixed-rate run), stops the server, and
finally writes

  bench/results/<date>-<name>.md        the report (tables, settings, versions)
  bench/results/<date>-<name>/*.png     p90/p99 against offered load, per workload
  bench/results/<date>-<name>/raw/      the JSON summary of every stress run
  bench/results/LATEST.md               a pointer to the report, with its summary

Server and loader logs and data directories go to bench/results/tmp/ (ignored
by git). A system that cannot be installed or started keeps "—" in its
columns with the reason, and the others still run. Every server is stopped at
the end, on error and on Ctrl-C/SIGTERM; every stress run is bounded in time.

The pieces are in bench/harness/ (systems, workloads, runner, report, plots);
the workload and system tables are there. Run it through scripts/bench.sh,
which builds the binary and the venv first; `--dry-run` runs nothing and makes
a report of made-up figures under bench/results/tmp/dry-run/.
"""
import argparse
import dataclasses
import datetime
import os
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import plots, report  # noqa: E402
from harness.runner import IdleSpinner, Outcome, RunFailed, Runner  # noqa: E402
from harness.systems import Context, Unavailable, make_systems  # noqa: E402
from harness.workloads import MODES, select  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", nargs="?", default="quick", choices=sorted(MODES),
                   help="quick (about 5 min) or full (longer runs, more steps); default quick")
    p.add_argument("--only", action="append", default=[], metavar="WORKLOAD,...",
                   help="run only these workloads (comma-separated, repeatable)")
    p.add_argument("--name", help="report name (default: the mode, plus the --only workloads)")
    p.add_argument("--results", default=os.path.join(ROOT, "bench", "results"),
                   help="results directory (default bench/results)")
    p.add_argument("--shoal-bin", default=os.environ.get("SHOAL_BIN",
                                                         os.path.join(ROOT, "target/release/shoal")),
                   help="the shoal binary: server and `shoal stress` (env SHOAL_BIN)")
    p.add_argument("--stress-bin", help="binary run as `BIN stress ...` (default: --shoal-bin); "
                                        "for testing the harness with a stand-in")
    p.add_argument("--server-cpu", default="1", help="CPU of every server (taskset -c); default 1")
    p.add_argument("--loader-cpu", default="0", help="CPU of the load generator; default 0")
    p.add_argument("--no-loader-spin", action="store_true",
                   help="do not keep the loader CPU awake with a SCHED_IDLE busy loop (see "
                        "harness/runner.py IdleSpinner)")
    p.add_argument("--cassandra-install-timeout", type=int, default=300, metavar="S",
                   help="bound on scripts/cassandra.sh install (default 300 s)")
    p.add_argument("--duration", type=int, help="override the mode's recorded seconds per run")
    p.add_argument("--keys", type=int, help="override the mode's population of 1-row workloads")
    p.add_argument("--dry-run", action="store_true",
                   help="start nothing: print the commands and report made-up figures "
                        "(under bench/results/tmp/dry-run/)")
    return p.parse_args(argv)


def pinning(server_cpu, loader_cpu, log):
    """CPU lists for taskset, or None when the machine has too few usable CPUs."""
    usable = os.sched_getaffinity(0)
    wanted = {int(c) for c in (server_cpu, loader_cpu) if c.isdigit()}
    if len(usable) < 2 or not wanted <= usable:
        log(f"pinning off: CPUs {sorted(usable)} usable, wanted {sorted(wanted)}")
        return None, None
    return server_cpu, loader_cpu


def rel(path):
    """path relative to the repository when inside it, else absolute."""
    r = os.path.relpath(path, ROOT)
    return path if r.startswith("..") else r


def on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def run_system(system, workloads, runner, results, log):
    """Start one system, measure each of its workloads, always stop it."""
    todo = [w for w in workloads if system.name in w.systems and w.protocol in system.protocols]
    if not todo:
        return
    log(f"== {system.label}: {', '.join(w.name for w in todo)}")
    try:
        system.start()
    except Unavailable as e:
        for w in todo:
            results[w.name][system.name].reason = f"did not start: {e}"
        log(f"[{system.name}] unavailable: {e}")
        return
    try:
        for w in todo:
            out = results[w.name][system.name]
            try:
                runner.measure(w, system, out)
            except RunFailed as e:
                out.reason = out.reason or str(e)
                log(f"[{system.name}] {w.name}: {e}")
    finally:
        system.stop()


def main(argv):
    args = parse_args(argv)
    t_start = time.monotonic()
    mode = MODES[args.mode]
    if args.duration or args.keys:
        mode = dataclasses.replace(mode, duration_s=args.duration or mode.duration_s,
                                   keys=args.keys or mode.keys)
    workloads = select(args.only)
    date = datetime.date.today().isoformat()
    name = args.name or "-".join([mode.name] + ([w.name for w in workloads] if args.only else []))
    results_dir = os.path.join(args.results, "tmp", "dry-run") if args.dry_run else args.results
    stem = f"{date}-{name}"
    out_dir = os.path.join(results_dir, stem)
    raw_dir = os.path.join(out_dir, "raw")
    tmp = os.path.join(args.results, "tmp", ("dry-run-" if args.dry_run else "") + stem)
    for d, fresh in ((out_dir, raw_dir), (tmp, tmp)):   # a rerun of a name replaces it whole
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(fresh)

    def log(msg):
        print(f"[{time.monotonic() - t_start:6.1f}s] {msg}", flush=True)

    server_cpu, loader_cpu = pinning(args.server_cpu, args.loader_cpu, log)
    ctx = Context(root=ROOT, shoal_bin=os.path.abspath(args.shoal_bin),
                  stress_bin=os.path.abspath(args.stress_bin or args.shoal_bin), tmp=tmp,
                  server_cpu=server_cpu, loader_cpu=loader_cpu, dry_run=args.dry_run,
                  cassandra_install_timeout=args.cassandra_install_timeout, log=log)
    machine = report.machine_info()
    log(f"{stem}: {', '.join(w.name for w in workloads)}; {machine['nproc']} CPUs "
        f"({machine['model']}), load {machine['loadavg']}; logs in {rel(tmp)}")
    systems = make_systems(ctx)
    used = [s for s in systems.values() if any(s.name in w.systems for w in workloads)]
    results = {w.name: {n: Outcome() for n in w.systems} for w in workloads}
    unavailable = {}

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    interrupted = False
    try:
        for s in used:
            reason = s.install()
            if reason:
                unavailable[s.name] = reason
                log(f"[{s.name}] {reason}")
        for w in workloads:
            for n in w.systems:
                s = systems[n]
                if n in unavailable:
                    results[w.name][n].reason = unavailable[n]
                elif w.protocol not in s.protocols:
                    results[w.name][n].reason = (f"{s.label} does not serve the {w.protocol} "
                                                 "protocol yet")
        runner = Runner(ctx, mode, raw_dir)
        with IdleSpinner(None if args.no_loader_spin else loader_cpu, log, args.dry_run) as spin:
            runner.spinner_pid = spin.pid
            for s in used:
                if s.name not in unavailable:
                    run_system(s, workloads, runner, results, log)
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted; stopping the servers and writing a partial report")
    finally:
        for s in list(ctx.started):
            try:
                s.stop()
            except Exception as e:  # keep stopping the others
                log(f"[{s.name}] stop failed: {e}")

    plot_files, plots_note = {}, ""
    if plots.available():
        for w in workloads:
            png = os.path.join(out_dir, f"{w.name}.png")
            if plots.plot_workload(w, results[w.name], systems, png):
                plot_files[w.name] = os.path.relpath(png, results_dir)
    else:
        plots_note = "No plot: matplotlib is not installed (scripts/bench.sh makes .venv-bench)."
    command = "scripts/bench.sh " + " ".join(argv) if argv else "scripts/bench.sh"
    report_path = os.path.join(results_dir, stem + ".md")
    report.write_report(
        report_path, name=name, date=date, mode=mode, workloads=workloads, results=results,
        systems=systems, unavailable=unavailable, machine=machine, load_end=report.loadavg(),
        loader_spin=loader_cpu is not None and not args.no_loader_spin,
        wall_s=time.monotonic() - t_start, plot_files=plot_files, plots_note=plots_note,
        raw_rel=os.path.relpath(raw_dir, results_dir), ctx=ctx, command=command.strip(),
        interrupted=interrupted)
    if not interrupted:
        report.write_latest(results_dir, stem + ".md", name=name, date=date, workloads=workloads,
                            results=results, systems=systems, rev=systems["shoal"].version())
    log(f"report: {rel(report_path)} ({time.monotonic() - t_start:.0f}s)")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

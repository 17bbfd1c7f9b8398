"""The markdown report of a run and the LATEST.md pointer.

Layout: a summary table (one line per workload: Shoal against its peer), the
machine, the versions, the settings (sizes, run lengths, pinning, command
lines), then per workload the max-throughput table, the stepped table, the
reason each stepped run stopped, and the plot. Latencies are in milliseconds
throughout, as measured by `shoal stress` (HDR histograms, from each op's
intended start). "—" marks a system without figures; the reason is printed
under the table.
"""
import os
import platform

from . import cpu
from .runner import lat
from .workloads import KEYSPACE, SHORTFALL, SLO_MS, VALUE_SIZE

DASH = "—"


def fmt_ms(us):
    if us is None:
        return DASH
    ms = us / 1000
    if ms < 1:
        return f"{ms:.3f}"
    if ms < 100:
        return f"{ms:.2f}"
    return f"{ms:,.0f}"


def fmt_ops(x):
    return DASH if x is None else f"{x:,.0f}"


def fmt_errors(s):
    text = f"{s.get('errors', 0):,}"
    extra = [f"{s[k]:,} {k.replace('_', ' ')}" for k in ("misses", "not_started") if s.get(k)]
    return text + (f" ({', '.join(extra)})" if extra else "")


CPU_HEADER = "server CPU % | loader CPU % | other CPU % | steal % |"
CPU_ALIGN = " ---: | ---: | ---: | ---: |"
CPU_NONE = f" {DASH} | {DASH} | {DASH} | {DASH} |"


def fmt_pct(x):
    return DASH if x is None else f"{x:.0f}"


def cpu_cells(s):
    """The four CPU columns of a run (see cpu.py); "other" gets a "!" when it was noisy."""
    c = s.get("cpu") or {}
    other = fmt_pct(c.get("other_pct")) + (" !" if cpu.noisy(c) else "")
    return (f" {fmt_pct(c.get('server_pct'))} | {fmt_pct(c.get('loader_pct'))} | {other} | "
            f"{fmt_pct(c.get('steal_pct'))} |")


def ops_per_server_core(s):
    """ops/s per core of server CPU: throughput over the server's measured CPU use (None: unknown)."""
    srv = ((s or {}).get("cpu") or {}).get("server_pct")
    return s.get("ops_per_s") / (srv / 100) if srv and s.get("ops_per_s") else None


def noise_line(results, systems):
    """One line on how many measured runs competed with other processes."""
    runs = [(w, n, r) for w, outs in results.items() for n, out in outs.items()
            for r in ([out.max] if out.max else []) + out.steps]
    bad = [f"{w}/{systems[n].label}" for w, n, r in runs if cpu.noisy(r.get("cpu"))]
    if not runs:
        return ""
    if not bad:
        return (f"Other processes stayed under {cpu.NOISY_OTHER_PCT:g}% of a core in all "
                f"{len(runs)} measured runs (CPU columns below).")
    return (f"**{len(bad)} of {len(runs)} measured runs competed with other processes** (other "
            f"CPU above {cpu.NOISY_OTHER_PCT:g}% of a core, marked \"!\"): "
            f"{', '.join(sorted(set(bad)))}. Treat those figures as noisy.")


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else DASH


def machine_info():
    """nproc, CPU model, memory, kernel and the load average, read now."""
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {"nproc": os.cpu_count(), "model": model, "memory": mem,
            "kernel": platform.release(), "loadavg": loadavg()}


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def _max_table(workload, outcomes, systems):
    lines = ["| system | max ops/s | p50 ms | p90 ms | p99 ms | p99.9 ms | errors | "
             f"Shoal / {systems[workload.peer].label} ops/s | ops/s per server core | {CPU_HEADER}",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + CPU_ALIGN]
    shoal, peer = (outcomes.get(n) for n in workload.systems[:2])
    for name in workload.systems:
        out = outcomes.get(name)
        s = out.max if out else None
        r = ""
        if name == workload.systems[0]:
            r = ratio(shoal and shoal.max and shoal.max.get("ops_per_s"),
                      peer and peer.max and peer.max.get("ops_per_s"))
        if s is None:
            lines.append(f"| {systems[name].label} | {DASH} | {DASH} | {DASH} | {DASH} | {DASH} "
                         f"| {DASH} | {r} | {DASH} |" + CPU_NONE)
        else:
            lines.append(f"| {systems[name].label} | {fmt_ops(s.get('ops_per_s'))} | "
                         f"{fmt_ms(lat(s, 'p50'))} | {fmt_ms(lat(s, 'p90'))} | "
                         f"{fmt_ms(lat(s, 'p99'))} | {fmt_ms(lat(s, 'p999'))} | {fmt_errors(s)} | {r} | "
                         f"{fmt_ops(ops_per_server_core(s))} |" + cpu_cells(s))
    return lines


def _steps_table(workload, outcomes, systems):
    lines = ["| system | offered ops/s | achieved ops/s | p50 ms | p90 ms | p99 ms | p99.9 ms | errors | "
             + CPU_HEADER,
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + CPU_ALIGN]
    for name in workload.systems:
        out = outcomes.get(name)
        if not out or not out.steps:
            lines.append(f"| {systems[name].label} | {DASH} | {DASH} | {DASH} | {DASH} | {DASH} "
                         f"| {DASH} | {DASH} |" + CPU_NONE)
            continue
        for s in out.steps:
            lines.append(f"| {systems[name].label} | {fmt_ops(s['offered'])} | "
                         f"{fmt_ops(s.get('ops_per_s'))} | {fmt_ms(lat(s, 'p50'))} | "
                         f"{fmt_ms(lat(s, 'p90'))} | {fmt_ms(lat(s, 'p99'))} | "
                         f"{fmt_ms(lat(s, 'p999'))} | {fmt_errors(s)} |" + cpu_cells(s))
    return lines


def summary_table(workloads, results, systems, link_prefix=""):
    lines = ["| workload | Shoal max ops/s | peer | peer max ops/s | Shoal / peer | "
             "Shoal / peer ops/s per server core | server CPU % Shoal, peer | loader CPU % Shoal, peer |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for w in workloads:
        outs = results.get(w.name, {})
        a, b = (outs.get(n) for n in w.systems[:2])
        a = a.max if a and a.max else None
        b = b.max if b and b.max else None

        def pcts(key):
            return ", ".join(fmt_pct(((s or {}).get("cpu") or {}).get(key)) for s in (a, b))
        ops = [s.get("ops_per_s") if s else None for s in (a, b)]
        lines.append(f"| [{w.name}]({link_prefix}#{w.name}) | {fmt_ops(ops[0])} | "
                     f"{systems[w.peer].label} | {fmt_ops(ops[1])} | {ratio(*ops)} | "
                     f"{ratio(ops_per_server_core(a), ops_per_server_core(b))} | "
                     f"{pcts('server_pct')} | {pcts('loader_pct')} |")
    return lines


def write_report(path, *, name, date, mode, workloads, results, systems, unavailable,
                 machine, load_end, loader_spin, wall_s, plot_files, plots_note, raw_rel, ctx,
                 command, interrupted):
    m = mode
    out = [f"# Shoal against its peers: {name} ({date})", ""]
    if ctx.dry_run:
        out += ["> **DRY RUN: every figure below is made up** (no server or load generator ran).", ""]
    if interrupted:
        out += ["> **Interrupted**: the run was stopped before it finished; figures are partial.", ""]
    out += [f"`{command}`, {wall_s / 60:.1f} min wall time. Latencies are in **milliseconds**; "
            "ops/s are operations per second as seen by the load generator. "
            f"{DASH} marks a system without figures (reason below each table).", "",
            "## Summary", "", *summary_table(workloads, results, systems), "",
            noise_line(results, systems), "",
            "## Machine", "",
            f"- {machine['nproc']} CPUs ({machine['model']}), {machine['memory']} RAM, "
            f"Linux {machine['kernel']}",
            f"- load average at start: {machine['loadavg']}; at end: {load_end}"
            + (" (the end figure includes the loader CPU's SCHED_IDLE busy loop)" if loader_spin else ""),
            "", "## Versions", ""]
    used = [n for n in systems if any(n in w.systems for w in workloads)]
    for n in used:
        reason = unavailable.get(n)
        out.append(f"- {systems[n].label}: {systems[n].version() if not reason else DASH + ' ' + reason}")
    pin = (f"every server on CPU {ctx.server_cpu}, the load generator on CPU {ctx.loader_cpu} "
           "(`taskset -c`)" if ctx.server_cpu is not None else
           "no pinning (fewer than 2 CPUs usable)")
    out += ["", "## Settings", "",
            f"- mode `{m.name}`: every measured run is {m.warmup_s} s warmup (not recorded) + "
            f"{m.duration_s} s recorded; the max-throughput run offers as much as it can "
            "(the workload's ops in flight), the stepped run offers "
            f"{', '.join(f'{f:g}' for f in m.fractions)} x the measured max (`--rate`), stopping "
            f"after the first step whose p99 passes {SLO_MS:g} ms or whose achieved rate is "
            f"below {SHORTFALL:.0%} of the offered one",
            f"- populations: {m.keys:,} keys of {VALUE_SIZE} B values (1-row workloads, "
            f"memcache); {m.partitions:,} partitions x 16 rows for cql-partition-read; loaded "
            "first by one seq write run over every row (not in the tables; its JSON is kept with "
            "the raw data); cql-read and cql-mixed share one table, the memcache workloads one "
            "key set; cql-write starts from an empty table",
            f"- {pin}; one server thread/shard each"
            + ("; the loader CPU is kept from idling by a busy loop at SCHED_IDLE priority "
               "(`chrt --idle`), so that waking a halted vCPU does not add to the latencies"
               if loader_spin else ""),
            f"- load generator: `shoal stress --threads 1`; CQL: {m.concurrency} ops in flight on "
            f"{m.cql_connections} connection, keyspace `{KEYSPACE}` (SimpleStrategy RF 1), "
            "prepared statements, protocol v4; memcache: "
            + "; ".join(f"{w.name} {w.dialect} protocol, {w.connections} connections x "
                        f"{w.pipeline} in flight" for w in workloads if w.protocol == "memcache"),
            "- CPU columns, in % of one core over each whole stress invocation (connect, warmup, "
            "run): the server process (all threads), the loader (`shoal stress`), other "
            "(every other process and the kernel: all CPUs' busy time in /proc/stat minus the "
            "server, the loader and the SCHED_IDLE busy loop) and steal (vCPU time the "
            f"hypervisor gave elsewhere); \"!\" marks other above {cpu.NOISY_OTHER_PCT:g}%: "
            "something else competed for the machine and that run is not comparable. ops/s per "
            "server core = ops/s / (server CPU % / 100)",
            "- errors column: failed ops; in brackets, reads of missing keys (misses) and, at a "
            "fixed rate, ops not started before the run's end because the server fell behind "
            "(not started)",
            "- servers, started fresh for each system and stopped after its workloads "
            "(workloads in the order below share the server):"]
    for n in used:
        if n not in unavailable:
            out.append(f"  - {systems[n].label}: `{systems[n].describe()}`")
    out += ["", "## Workloads", ""]
    for w in workloads:
        outs = results.get(w.name, {})
        out += [f"### {w.name}", "", f"{w.what}. Shoal against {systems[w.peer].label}.", "",
                "Max throughput (no `--rate`):", "", *_max_table(w, outs, systems), ""]
        notes = [f"- {systems[n].label}: {outs[n].reason}" for n in w.systems
                 if n in outs and outs[n].reason]
        out += notes + ([""] if notes else [])
        out += ["Stepped offered load (`--rate`):", "", *_steps_table(w, outs, systems), ""]
        stops = [f"- {systems[n].label} stopped: {outs[n].stop}" for n in w.systems
                 if n in outs and outs[n].stop]
        out += stops + ([""] if stops else [])
        if w.name in plot_files:
            out += [f"![{w.name}: p90/p99 against offered load]({plot_files[w.name]})", ""]
        elif plots_note:
            out += [f"_{plots_note}_", ""]
        else:
            out += ["_No plot: no system has stepped figures._", ""]
    out += ["## Raw data", "",
            f"The JSON summary of every `shoal stress` run (populate, max and each step) is under "
            f"[`{raw_rel}/`]({raw_rel}/), one folder per workload, named "
            "`<system>-populate|max|rate-<offered>.json`.", ""]
    with open(path, "w") as f:
        f.write("\n".join(out))


def write_latest(results_dir, report_rel, *, name, date, workloads, results, systems, rev):
    lines = ["# Latest comparison", "",
             f"[{report_rel}]({report_rel}): `{name}` run of {date}, Shoal {rev}. "
             "Max throughput in ops/s; Shoal / peer > 1 means Shoal is faster. "
             "See bench/README.md for how to read it and how to run it.", "",
             *summary_table(workloads, results, systems, link_prefix=report_rel), ""]
    with open(os.path.join(results_dir, "LATEST.md"), "w") as f:
        f.write("\n".join(lines))

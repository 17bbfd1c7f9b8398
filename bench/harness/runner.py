"""Runs `shoal stress` against one started system: populate, max, then steps.

`shoal stress` (contract: docs of crates/stress; `--json PATH` writes the
summary) is the only load generator, for every system, pinned to the loader
CPU with one tokio thread. Every run is bounded: the process is killed
`RUN_SLACK_S` after its warmup + duration (the populate run after the mode's
populate_timeout_s), and on Ctrl-C.

The stepped run offers fixed rates (`--rate`, latency measured from each op's
intended start, so no coordinated omission) at the mode's fractions of the
measured max, and stops after the first step whose p99 passes SLO_MS or whose
achieved rate falls short of SHORTFALL x offered.

With dry_run nothing is executed: the command lines are printed and a made-up
summary (a simple queueing curve, tagged "fake") stands in for the JSON, so
the rest of the pipeline (report, plots) can be exercised anywhere.
"""
import json
import os
import random
import subprocess
import time
from dataclasses import dataclass, field

from . import cpu
from .systems import taskset
from .workloads import SHORTFALL, SLO_MS

RUN_SLACK_S = 30


class IdleSpinner:
    """Keeps the loader's CPU from going idle, at the lowest priority (SCHED_IDLE).

    On a virtual machine an idle vCPU is halted, and waking it again (the
    loader sleeping until an op's intended start under --rate) can take
    milliseconds when the host is busy: those wake-ups then show up as
    latency of whatever server is measured. A busy loop under SCHED_IDLE only
    runs when nothing else wants the CPU, so the loader preempts it at once
    and the vCPU never halts. Used as a context manager; off with cpu=None.
    """

    def __init__(self, cpu, log, dry_run=False):
        self.cmd = ([*taskset(cpu), "chrt", "--idle", "0", "sh", "-c", "while :; do :; done"]
                    if cpu is not None else None)
        self.log, self.dry_run, self.proc = log, dry_run, None

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def __enter__(self):
        if self.cmd:
            self.log(f"loader CPU kept awake: {' '.join(self.cmd)}")
            if not self.dry_run:
                self.proc = subprocess.Popen(self.cmd, start_new_session=True,
                                             stdin=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        return False


class RunFailed(Exception):
    """A stress run exited non-zero, timed out or wrote no JSON."""


@dataclass
class Outcome:
    """What one (workload, system) pair produced."""
    reason: str | None = None        # why there are no figures ("—" in the tables)
    populate: dict | None = None
    max: dict | None = None
    steps: list = field(default_factory=list)   # summaries, in offered-rate order
    stop: str = ""                   # why the stepped run stopped


class Runner:
    def __init__(self, ctx, mode, raw_dir):
        self.ctx = ctx
        self.mode = mode
        self.raw_dir = raw_dir
        self.fake_max = {}
        self.current = None      # system being measured (labels the dry-run figures)
        self.spinner_pid = None  # the IdleSpinner's busy loop, kept apart in the CPU figures

    def stress(self, args, tag, timeout, server_pid):
        """One `shoal stress` run; returns its JSON summary, with its CPU accounting
        (cpu.Window) under "cpu"."""
        os.makedirs(os.path.dirname(os.path.join(self.raw_dir, tag)), exist_ok=True)
        json_path = os.path.join(self.raw_dir, tag + ".json")
        log_path = os.path.join(self.ctx.tmp, "stress", tag + ".log")
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        cmd = [*taskset(self.ctx.loader_cpu), self.ctx.stress_bin, "stress", "--threads", "1",
               "--quiet", "--json", json_path, *args]
        shown = " ".join(cmd).replace(self.ctx.root + "/", "")
        self.ctx.log(f"  $ {shown}")
        if self.ctx.dry_run:
            summary = self._fake(args)
            with open(json_path, "w") as f:
                json.dump(summary, f, indent=1)
            return summary
        if os.path.exists(json_path):
            os.remove(json_path)
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            log.write((shown + "\n").encode())
            log.flush()
            window = cpu.Window(server_pid, self.spinner_pid)
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
            try:
                rc, rusage = wait_with_rusage(proc, timeout)
            finally:
                if proc.returncode is None:     # timeout, Ctrl-C or another exception
                    proc.kill()
                    proc.wait()
            if rc is None:
                raise RunFailed(f"{tag}: killed after {timeout}s (see {log_path})")
            accounting = window.stop(rusage)
        if rc != 0:
            raise RunFailed(f"`shoal stress` exited {rc}: {last_line(log_path)}")
        try:
            with open(json_path) as f:
                summary = json.load(f)
        except (OSError, ValueError) as e:
            raise RunFailed(f"{tag}: no JSON summary ({e}); see {log_path}")
        summary["cpu"] = accounting
        with open(json_path, "w") as f:     # the raw data keeps the accounting too
            json.dump(summary, f, indent=1)
        self.ctx.log(f"    {fmt_summary(summary)}  [{time.monotonic() - t0:.1f}s]")
        return summary

    def run_timeout(self):
        return self.mode.warmup_s + self.mode.duration_s + RUN_SLACK_S

    def measure(self, workload, system, out):
        """Populate (once per population and server), max run, stepped run -> out."""
        self.current = system.name
        port = system.port(workload.protocol)
        base = f"{workload.name}/{system.name}"
        pid = system.pid()
        pop = workload.population(self.mode)
        args = workload.populate_args(self.mode, port)
        if args is not None and pop not in system.populated:
            self.ctx.log(f"[{system.name}] {workload.name}: populate")
            out.populate = self.stress(args, f"{base}-populate", self.mode.populate_timeout_s, pid)
            system.populated.add(pop)
        self.ctx.log(f"[{system.name}] {workload.name}: max throughput")
        out.max = self.stress(workload.run_args(self.mode, port), f"{base}-max", self.run_timeout(),
                               pid)
        top = out.max.get("ops_per_s") or 0
        if top <= 0:
            out.stop = "max run did no ops"
            return
        self.ctx.log(f"[{system.name}] {workload.name}: stepped, max {top:,.0f} ops/s")
        for frac in self.mode.fractions:
            rate = max(1, int(round(top * frac)))
            try:
                s = self.stress(workload.run_args(self.mode, port, rate),
                                f"{base}-rate-{rate}", self.run_timeout(), pid)
            except RunFailed as e:
                out.stop = f"run at {rate} ops/s failed: {e}"
                return
            s["offered"] = rate
            out.steps.append(s)
            p99_ms = lat(s, "p99") / 1000
            if p99_ms > SLO_MS:
                out.stop = f"p99 {p99_ms:,.1f} ms > {SLO_MS:g} ms at {rate:,} ops/s offered"
                return
            if s.get("ops_per_s", 0) < SHORTFALL * rate:
                out.stop = (f"achieved {s.get('ops_per_s', 0):,.0f} < {SHORTFALL:.0%} of "
                            f"{rate:,} ops/s offered")
                return
        out.stop = f"last step ({self.mode.fractions[-1]:g} x max) within the SLO"

    def _fake(self, args):
        """A made-up summary for --dry-run: an M/M/1-ish latency curve."""
        opt = dict(zip(args[::2], args[1::2]))
        key = (self.current, opt.get("--protocol"), opt.get("--table"), opt.get("--workload"),
               opt.get("--pipeline"))
        cap = self.fake_max.setdefault(key, random.uniform(20_000, 120_000))
        rate = float(opt["--rate"]) if "--rate" in opt else None
        if "--count" in opt:
            ops, dur = int(opt["--count"]), int(opt["--count"]) / cap
            rate, load = None, 0.5
        else:
            dur = float(opt.get("--duration", 10))
            load = min(rate / cap, 1.3) if rate else 0.97
            ops = int((min(rate, cap) if rate else cap) * dur)
        base = 60 + 2000 * 64 / cap if rate is None else 60.0
        wait = base / max(0.02, 1 - load) + (1e6 * dur * (load - 1) if load > 1 else 0)
        pct = {"p50": base + wait * 0.7, "p90": base + wait * 2.3, "p99": base + wait * 4.6,
               "p999": base + wait * 6.9}
        pct.update(max=pct["p999"] * 1.5, mean=base + wait)
        server = round(100 * min(load, 1.0), 1)
        fake_cpu = {"wall_s": dur, "server_pct": server, "loader_pct": round(0.6 * server, 1),
                    "spinner_pct": round(100 - 0.6 * server, 1), "other_pct": 1.0,
                    "steal_pct": 0.0, "machine_busy_pct": 201.0}
        return {"fake": True, "protocol": opt.get("--protocol"), "workload": opt.get("--workload"),
                "rate": rate, "duration_s": dur, "ops": ops, "ops_per_s": ops / dur,
                "errors": 0, "misses": 0, "latency_us": pct, "config": opt, "cpu": fake_cpu}


def wait_with_rusage(proc, timeout_s):
    """Waits for proc like Popen.wait, but with wait4 so that its CPU use (rusage) comes
    back too. Returns (exit code, rusage), or (None, None) once timeout_s has passed."""
    deadline = time.monotonic() + timeout_s
    delay_s = 0.001
    while True:
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, rusage
        if time.monotonic() >= deadline:
            return None, None
        time.sleep(delay_s)
        delay_s = min(0.05, delay_s * 2)


def lat(summary, p):
    return float((summary.get("latency_us") or {}).get(p) or 0)


def fmt_summary(s):
    return (f"{s.get('ops_per_s', 0):,.0f} ops/s  p50 {lat(s, 'p50'):,.0f}  p99 {lat(s, 'p99'):,.0f}  "
            f"p99.9 {lat(s, 'p999'):,.0f} us  errors {s.get('errors', 0)}")


def last_line(path):
    try:
        with open(path, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
        return lines[-1] if len(lines) > 1 else "(no output)"
    except OSError:
        return "(no log)"

"""CPU accounting of one stress run: server, loader and everything else.

On a small shared machine a slow run can mean a slow server or a busy
neighbour. Each run therefore records where the machine's CPU time went
while it lasted, in % of one core (100 = one core busy the whole run):

  server   the server process, all its threads (/proc/<pid>/stat utime+stime)
  loader   the `shoal stress` process (its rusage, from wait4)
  spinner  the loader CPU's SCHED_IDLE busy loop (runner.IdleSpinner), which
           soaks up whatever the loader leaves idle; known, so kept apart
  other    every other process and the kernel's own work (busy time of all
           CPUs in /proc/stat minus the three above): a noisy neighbour
           shows up here
  steal    time the hypervisor gave the vCPUs to someone else

The window is the whole stress invocation (connect, warmup, recorded run),
so it is a little longer than the recorded seconds. /proc times are in clock
ticks (10 ms), fine for runs of seconds. Readings that fail (no /proc, a
process gone) give None, shown as "—".
"""
import os
import time

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
NOISY_OTHER_PCT = 10.0     # "other" above this: the run competed with something


def machine_ticks():
    """(busy, steal) clock ticks of all CPUs since boot, from /proc/stat's "cpu" line."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return user + nice + system + irq + softirq, steal


def process_ticks(pid):
    """utime + stime of a process (all its threads), in clock ticks; None if unreadable."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    rest = stat[stat.rfind(")") + 2:].split()
    try:
        return int(rest[11]) + int(rest[12])    # fields 14 and 15 of stat(5)
    except (IndexError, ValueError):
        return None


class Window:
    """CPU use between start() and stop(); the loader's CPU seconds come from its rusage."""

    def __init__(self, server_pid, spinner_pid):
        self.server_pid, self.spinner_pid = server_pid, spinner_pid
        self.t0 = time.monotonic()
        self.machine0 = machine_ticks()
        self.server0 = process_ticks(server_pid)
        self.spinner0 = process_ticks(spinner_pid)

    def stop(self, loader_rusage):
        """The run's accounting as a dict of % of one core (None where unknown)."""
        wall_s = time.monotonic() - self.t0
        machine1 = machine_ticks()
        server1, spinner1 = process_ticks(self.server_pid), process_ticks(self.spinner_pid)

        def delta_s(a, b):
            return (b - a) * TICK_S if a is not None and b is not None else None

        server_s = delta_s(self.server0, server1)
        spinner_s = delta_s(self.spinner0, spinner1) if self.spinner_pid is not None else 0.0
        loader_s = (loader_rusage.ru_utime + loader_rusage.ru_stime) if loader_rusage else None
        busy_s = steal_s = other_s = None
        if self.machine0 and machine1:
            busy_s = delta_s(self.machine0[0], machine1[0])
            steal_s = delta_s(self.machine0[1], machine1[1])
            known = [server_s, loader_s, spinner_s]
            if None not in known:
                # Tick rounding can take a few ms below zero on an idle machine.
                other_s = max(0.0, busy_s - sum(known))

        def pct(s):
            return round(100 * s / wall_s, 1) if s is not None and wall_s > 0 else None

        return {"wall_s": round(wall_s, 3), "server_pct": pct(server_s), "loader_pct": pct(loader_s),
                "spinner_pct": pct(spinner_s), "other_pct": pct(other_s),
                "steal_pct": pct(steal_s), "machine_busy_pct": pct(busy_s)}


def noisy(cpu):
    """True when other processes used more than NOISY_OTHER_PCT of a core during the run."""
    return bool(cpu) and (cpu.get("other_pct") or 0) > NOISY_OTHER_PCT

"""Disk-bound point reads against fio's 4 KiB random-read IOPS on the same
directory (issue 29, "disk-bound reads").

    python3 bench/disk_reads.py [--shoal target/release/shoal] [--keys 1200000]
        [--memory 256M] [--duration 20] [--concurrency 256] [--io-scheduler on,off]
        [--baseline OTHER_BUILD] [--json PATH]

One `--smp 1` server pinned to --server-cpu with --memory (the row cache
and index cache live inside it) loads --keys rows of 1 KiB into a table
without compression (the default makes 1.2 GiB on disk, almost five times
--memory), flushes, compacts to one SSTable and restarts, so nothing read
is in memory (SSTables are read with O_DIRECT: no page cache either). Then
`shoal stress` pinned to --loader-cpu reads uniformly at random at full
speed for --warmup s (the index and row caches fill), then --duration s measured, once per --io-scheduler mode (a restart between
them; with --baseline, that build reads the same data first in each
mode). Meanwhile the script samples the server's CPU time
and the disk's completed reads from /proc. Last, fio reads 4 KiB blocks at
random from a file as large as the data set in the same directory, with
O_DIRECT and io_uring at --fio-iodepth, pinned to the server's core.
Reports the bytes on disk, Shoal's reads/s, the server core's busy share,
disk reads per Shoal read and their size, fio's IOPS (at 4 KiB, and at
16 KiB, a table's chunk: what a compressed table reads) and the ratio to
the first.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from io_scheduler import ROOT, Server, finish, io_properties, stress  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Nothing read back into the cache at start: every run begins cold.
EXTRA = ("--row-cache-save-period", "0")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shoal", default=os.path.join(ROOT, "target/release/shoal"))
    p.add_argument("--keys", type=int, default=1_200_000)
    p.add_argument("--memory", default="256M")
    p.add_argument("--memtable-mb", type=int, default=32)
    p.add_argument("--duration", type=int, default=20)
    p.add_argument("--warmup", type=int, default=10, help="seconds of reads before the measured ones")
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--io-scheduler", default="on", help="comma-separated modes to read with: on, off")
    p.add_argument("--fio-iodepth", type=int, default=64)
    p.add_argument("--server-cpu", default="1")
    p.add_argument("--loader-cpu", default="0")
    p.add_argument("--json")
    p.add_argument("--io-properties", help="use this io_properties.yaml instead of running iotune")
    p.add_argument("--baseline", help="another build of shoal that reads the same data first, in the same modes "
                                      "(before and after a change, on one data set)")
    return p.parse_args(argv)


def cpu_seconds(pid):
    """User plus system CPU time of a process, in seconds."""
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def block_device(path):
    """The /proc/diskstats name of the whole disk holding `path`."""
    dev = os.stat(path).st_dev
    sys_dir = os.path.realpath("/sys/dev/block/%d:%d" % (os.major(dev), os.minor(dev)))
    if os.path.exists(os.path.join(sys_dir, "partition")):
        sys_dir = os.path.dirname(sys_dir)
    return os.path.basename(sys_dir)


def disk_reads(device):
    """Reads completed and sectors read by `device` since boot."""
    for line in open("/proc/diskstats"):
        f = line.split()
        if f[2] == device:
            return int(f[3]), int(f[5])
    raise SystemExit("no %s in /proc/diskstats" % device)


def fio_iops(args, directory, size_bytes, block):
    job = ["taskset", "-c", args.server_cpu, "fio", "--name=randread", "--filename=%s" % os.path.join(directory, "fio.dat"),
           "--size=%d" % size_bytes, "--rw=randread", "--bs=%s" % block, "--ioengine=io_uring", "--direct=1",
           "--iodepth=%d" % args.fio_iodepth, "--runtime=%d" % args.duration, "--time_based", "--output-format=json"]
    out = json.loads(subprocess.run(job, check=True, capture_output=True, text=True, timeout=900).stdout)
    return round(out["jobs"][0]["read"]["iops"])


def read_phase(args, workdir, properties, scheduler, json_path):
    """A restarted server (cold: nothing in memory) read at full speed;
    what it served and what it cost, measured from /proc."""
    server = Server(args, workdir, scheduler, properties, extra=EXTRA)
    device = block_device(workdir)
    try:
        reader = stress(args, server, ["--workload", "read", "--pop", "uniform", "--warmup", str(args.warmup),
                                       "--duration", str(args.duration), "--no-schema",
                                       "--connections", "4", "--concurrency", str(args.concurrency)], json_path)
        time.sleep(args.warmup)
        cpu0, (reads0, sectors0), t0 = cpu_seconds(server.proc.pid), disk_reads(device), time.time()
        time.sleep(args.duration - 1)
        cpu1, (reads1, sectors1), t1 = cpu_seconds(server.proc.pid), disk_reads(device), time.time()
        read = finish(reader, json_path)
    finally:
        server.stop()
    disk_reads_per_s = (reads1 - reads0) / (t1 - t0)
    return {
        "shoal_reads_per_s": round(read["ops_per_s"]), "read_latency_us": read["latency_us"],
        "errors": read["errors"], "misses": read.get("misses"),
        "server_cpu_busy": round((cpu1 - cpu0) / (t1 - t0), 3), "disk_reads_per_s": round(disk_reads_per_s),
        "disk_kib_per_read": round((sectors1 - sectors0) * 512 / 1024 / max(1, reads1 - reads0), 1),
        "disk_reads_per_shoal_read": round(disk_reads_per_s / max(1, read["ops_per_s"]), 2),
    }


def main(argv):
    args = parse_args(argv)
    if shutil.which("fio") is None:
        raise SystemExit("fio is not installed (Debian: apt-get install fio)")
    tmp = tempfile.mkdtemp(prefix="shoal-disk-reads-", dir=os.environ.get("SHOAL_BENCH_DIR"))
    workdir = os.path.join(tmp, "node")
    j = lambda name: os.path.join(tmp, name + ".json")
    try:
        properties, _ = io_properties(args, tmp)
        server = Server(args, workdir, "on", properties, extra=EXTRA)
        try:
            loaded = finish(stress(args, server, ["--workload", "write", "--pop", "seq", "--count", str(args.keys),
                                                  "--concurrency", "128", "--uncompressed"], j("load")), j("load"))
            server.nodetool("flush")
            server.nodetool("compact")
        finally:
            server.stop()
        data_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(workdir) for f in fs)
        result = {"args": vars(args), "io_properties": open(properties).read(), "data_bytes": data_bytes,
                  "load_ops_per_s": round(loaded["ops_per_s"])}
        for scheduler in args.io_scheduler.split(","):
            if args.baseline:
                baseline = argparse.Namespace(**{**vars(args), "shoal": args.baseline})
                result["baseline_io_scheduler_" + scheduler] = read_phase(
                    baseline, workdir, properties, scheduler, j("baseline-" + scheduler))
            result["io_scheduler_" + scheduler] = read_phase(args, workdir, properties, scheduler, j(scheduler))
        result["fio_iops"] = fio = fio_iops(args, tmp, data_bytes, "4k")
        # A compressed table reads whole 16 KiB chunks (chunk_length_in_kb;
        # an uncompressed one only the 4 KiB blocks a row lies in): what the
        # disk does at that size too.
        result["fio_iops_16k"] = fio_iops(args, tmp, data_bytes, "16k")
        for phase in (v for k, v in result.items() if k.startswith(("io_scheduler_", "baseline_io_scheduler_"))):
            phase["shoal_vs_fio"] = round(phase["shoal_reads_per_s"] / fio, 3)
        print(json.dumps({k: v for k, v in result.items() if k != "args"}, indent=2))
        if args.json:
            json.dump(result, open(args.json, "w"), indent=2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])

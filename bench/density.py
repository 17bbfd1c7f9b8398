"""Density: how many 1000-byte items a server holds in a fixed memory budget.

    python3 bench/density.py [--shoal target/release/shoal] [--only shoal,memcached]
                             [--memory-mb 512] [--max-items 2000000] [--max-seconds 300]
                             [--json PATH]

Each server in turn, one core each (pinned with `taskset -c 1`; this script,
the loader, pins itself to CPU 0):

  Shoal      shoal --smp 1 --memory 512M --commitlog-sync periodic --memcache-max-size 0 --workdir <fresh /tmp dir>
  memcached  memcached -t 1 -m 512 -U 0 -l 127.0.0.1

On a fresh server, 1000-byte values are written under increasing keys
(key_0000000001, key_0000000002, ...) through the memcached text protocol,
`--batch` `set`s written back to back on one connection and their replies read
(every reply must be STORED), and after each batch the server is asked whether
it has evicted anything yet:

  memcached  `stats`: first eviction = `evictions` > 0; items held = `curr_items` then.
  Shoal      /metrics on its --api-port: first eviction = the sum of
             shoal_cache_evictions_total{keyspace="memcache"} > 0; items held =
             shoal_cache_partitions + shoal_memtable_partitions of memcache.items then.
             A partition can be in both the cache and a memtable (right after a flush
             the flushed memtable's partitions may also be cached), so that sum is an
             upper bound. As every key is written once and nothing is read, a cached
             partition was flushed, so at most memtable + SSTable partitions - items
             written are counted twice (shoal_sstable_partitions): the lower bound.
             Both are shown (one figure when they agree), and neither exceeds the items
             written less those Shoal's `stats` says it evicted.
             Shoal's `stats` (curr_items, evictions) is recorded alongside.

Writing stops at the first eviction, or at --max-items / --max-seconds per server
(then the table says "no eviction" and the figures are lower bounds). After the
first eviction it writes --after-eviction more items (100,000; 0: none) and reads
again: how much a server holds while it evicts, which for Shoal depends less on
where its memtable stood at the first eviction. The report
gives items written, items held at the first eviction and memory bytes per item
(the budget, --memory-mb MiB for both, divided by the items held), the server's
RSS then, and Shoal / memcached of items held. The figures are for one shard /
one thread; the loader's write rate (Python, one connection) is shown but is not
a benchmark.

Until a Shoal build exposes the row cache's metrics (shoal_cache_evictions_total,
shoal_cache_partitions, shoal_memtable_partitions) its row reads "—" with the
reason, the memcached row is still measured, and the script exits 3.
Every server binds 127.0.0.1 on free ports; Shoal's workdir is removed at the end.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness.node import (MemcachedNode, ServerError, ShoalNode, memcache_stats,  # noqa: E402
                          proc_rss_bytes, version_of)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYSPACE, TABLE = "memcache", "items"
REQUIRED_SHOAL_METRICS = ("shoal_cache_evictions_total", "shoal_cache_partitions",
                          "shoal_memtable_partitions")


class MetricMissing(Exception):
    pass


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Loader:
    """One memcached-protocol connection writing increasing keys in pipelined batches."""

    def __init__(self, port, value_size):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.suffix = b" 0 0 %d\r\n" % value_size + os.urandom(value_size) + b"\r\n"
        self.next_key = 1
        self.written = 0

    def batch(self, n):
        """Writes keys next_key .. next_key+n-1; raises on any reply other than STORED."""
        first = self.next_key
        payload = b"".join([b"set key_%010d" % i + self.suffix for i in range(first, first + n)])
        self.sock.sendall(payload)
        buf, lines = b"", 0
        while lines < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ServerError("server closed the connection")
            buf += chunk
            lines = buf.count(b"\r\n")
        if buf != b"STORED\r\n" * n:
            bad = [line for line in buf.split(b"\r\n") if line and line != b"STORED"]
            raise ServerError(f"{len(bad)} of {n} sets not STORED (first: {bad[0][:200]!r}), "
                              f"keys {first}..{first + n - 1}")
        self.next_key += n
        self.written += n

    def stats(self):
        return memcache_stats(self.sock)

    def close(self):
        self.sock.close()


def shoal_reading(node, loader):
    """What Shoal holds now: metrics (None where a family is missing) and its `stats`."""
    m = node.metrics()
    want = dict(keyspace=KEYSPACE)
    tbl = dict(keyspace=KEYSPACE, table=TABLE)
    r = {
        "evictions": m.sum("shoal_cache_evictions_total", **want),
        "cache_partitions": m.sum("shoal_cache_partitions", **tbl),
        "memtable_partitions": m.sum("shoal_memtable_partitions", **tbl),
        "cache_bytes": m.sum("shoal_cache_bytes", **tbl),
        "memtable_bytes": m.sum("shoal_memtable_bytes", **tbl),
        "sstable_partitions": m.sum("shoal_sstable_partitions", **tbl),
        "memory_budget_bytes": m.sum("shoal_memory_budget_bytes"),
        "memory_used_bytes": m.by_label("shoal_memory_used_bytes", "kind") or None,
        "missing": [f for f in REQUIRED_SHOAL_METRICS if not m.has(f)],
    }
    st = loader.stats()
    r["stats_evictions"] = int(st.get("evictions", 0))
    r["stats_curr_items"] = int(st.get("curr_items", 0))
    r["stats_bytes"] = int(st.get("bytes", 0))
    return r


def read_state(kind, node, loader, args):
    """The server's reading now, with held (upper bound) and held_low (lower bound)."""
    if kind == "memcached":
        st = loader.stats()
        n = int(st["curr_items"])
        return {"evictions": int(st["evictions"]), "curr_items": n, "bytes": int(st["bytes"]),
                "held": n, "held_low": n}
    r = shoal_reading(node, loader)
    if r["missing"]:
        raise MetricMissing(
            f"{args.shoal} does not expose {', '.join(r['missing'])} on /metrics: this build "
            f"has no row cache metrics, so its first eviction cannot be seen (needs "
            f"shoal_cache_evictions_total, shoal_cache_partitions, shoal_memtable_partitions "
            f"per keyspace/table)")
    c, mt = r["cache_partitions"], r["memtable_partitions"]
    # Every key is written once and nothing is read, so a cached partition came from a flush
    # (it is in an SSTable) and one counted twice is in a memtable and an SSTable: at most
    # memtable + SSTable partitions - items written of them. Without the SSTable figure, the
    # smaller of the two may be counted twice.
    sst = r["sstable_partitions"]
    both = max(0.0, mt + sst - loader.written) if sst is not None else min(c, mt)
    r["overlap_max"] = int(min(both, c, mt))
    # Right after a flush the flushed memtable's partitions are in the cache while the
    # SSTable figure does not count them yet, so the overlap above misses them: no more
    # items are held than were written and not evicted.
    existing = loader.written - r["stats_evictions"]
    r["held"] = int(min(c + mt, existing))
    r["held_low"] = int(min(c + mt - r["overlap_max"], existing))
    return r


def run_one(kind, args, tmp):
    """Fills one server until its first eviction (or the cap). Returns the result dict."""
    budget = args.memory_mb * 2**20
    res = {"server": kind, "budget_bytes": budget, "value_size": args.value_size}
    log_path = os.path.join(tmp, f"{kind}.log")
    if kind == "shoal":
        workdir = os.path.join(tmp, "shoal-data")
        # Items leaving memory (the row cache) is what is measured; deleting
        # them past --memcache-max-size (default --memory) is turned off.
        node = ShoalNode(args.shoal, workdir, f"{args.memory_mb}M", args.server_cpu, log_path,
                         extra=["--memcache-max-size", "0"])
        res["version"] = version_of([args.shoal, "--version"])
    else:
        binary = MemcachedNode.find_or_install(args.memcached, log)
        node = MemcachedNode(binary, args.memory_mb, args.server_cpu, log_path)
        res["version"] = version_of([binary, "-V"])
    res["command"] = " ".join(node.cmd()).replace(tmp, "<tmp>")
    with node:
        node.start(log)
        port = node.memcache_port if kind == "shoal" else node.port
        loader = Loader(port, args.value_size)
        t0 = time.monotonic()
        last_log = t0
        reading = None
        try:
            while True:
                loader.batch(args.batch)
                reading = read_state(kind, node, loader, args)
                elapsed = time.monotonic() - t0
                if time.monotonic() - last_log >= 5:
                    last_log = time.monotonic()
                    log(f"[{kind}] {loader.written:,} written in {elapsed:.0f} s, "
                        f"{reading['held']:,.0f} held, evictions {reading['evictions']:,.0f}, "
                        f"RSS {(proc_rss_bytes(node.pid) or 0) / 2**20:,.0f} MiB")
                if reading["evictions"] > 0:
                    res["stop"] = "first eviction"
                    break
                if loader.written >= args.max_items:
                    res["stop"] = f"no eviction within {args.max_items:,} items"
                    break
                if elapsed >= args.max_seconds:
                    res["stop"] = f"no eviction within {args.max_seconds:g} s"
                    break
                if not node.alive():
                    raise ServerError(f"{kind} died; see {log_path}")
            elapsed = time.monotonic() - t0
            res.update(evicted=res["stop"] == "first eviction", items_written=loader.written,
                       seconds=round(elapsed, 1), sets_per_s=round(loader.written / elapsed),
                       rss_bytes=proc_rss_bytes(node.pid), reading=reading,
                       items_held=reading["held"], items_held_low=reading["held_low"],
                       overlap_max=reading.get("overlap_max"))
            log(f"[{kind}] stop ({res['stop']}): {loader.written:,} items written in {elapsed:.1f} s; "
                f"held {reading['held_low']:,}..{reading['held']:,}")
            # Then, optionally, keep writing: what the server holds once evicting is its routine.
            if res["evicted"] and args.after_eviction > 0:
                target = loader.written + args.after_eviction
                lows, after = [], None
                while loader.written < target and time.monotonic() - t0 < args.max_seconds:
                    loader.batch(min(args.batch, target - loader.written))
                    after = read_state(kind, node, loader, args)
                    lows.append(after["held_low"])
                if after is None:
                    raise ServerError("no time left for --after-eviction (see --max-seconds)")
                res["after"] = {"items_written": loader.written, "held": after["held"],
                                "held_low": after["held_low"], "min_held_low": min(lows),
                                "evictions": after["evictions"],
                                "rss_bytes": proc_rss_bytes(node.pid), "reading": after}
                log(f"[{kind}] {args.after_eviction:,} more written: held "
                    f"{after['held_low']:,}..{after['held']:,} (lowest {min(lows):,}), "
                    f"evictions {after['evictions']:,.0f}")
        finally:
            loader.close()
        res["bytes_per_item"] = round(budget / res["items_held"], 1) if res["items_held"] else None
        res["bytes_per_item_high"] = (round(budget / res["items_held_low"], 1)
                                      if res["items_held_low"] else None)
    return res


def mib_by_kind(used):
    if not used:
        return "—"
    return ", ".join(f"{k} {v / 2**20:,.1f} MiB" for k, v in used.items())


def fmt_int(x):
    return f"{x:,.0f}" if isinstance(x, (int, float)) else "—"


def report(results, args):
    mib = args.memory_mb
    out = [f"# Density: {args.value_size}-byte values, {mib} MiB budget, one core each\n",
           f"Load average at start {args.load_start}, at end "
           f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}.\n",
           "Writes under increasing keys through the memcached text protocol until the server's "
           "first eviction; *held* is what the server holds in memory then, *bytes/item* the "
           f"budget ({mib} MiB) over the items held.\n",
           "| server | stop | items written | items held at first eviction | bytes/item | "
           "RSS then (MiB) | RSS bytes/item | write s | sets/s (Python loader) |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for kind in ("shoal", "memcached"):
        r = results.get(kind)
        if r is None:
            continue
        label = "Shoal" if kind == "shoal" else "memcached"
        if "error" in r:
            out.append(f"| {label} | — (failed: see below) | — | — | — | — | — | — | — |")
            continue
        held = fmt_int(r["items_held"])
        per = f"{r['bytes_per_item']:,.0f}" if r["bytes_per_item"] else "—"
        if kind == "shoal" and r["items_held_low"] != r["items_held"]:
            held = f"{fmt_int(r['items_held_low'])}–{held}"
            per = f"{r['bytes_per_item']:,.0f}–{r['bytes_per_item_high']:,.0f}"
        if not r["evicted"] and r["items_held"]:
            held = "≥ " + held
            per = "≤ " + per
        rss_per = (r["rss_bytes"] / r["items_held"]) if r["rss_bytes"] and r["items_held"] else None
        out.append(f"| {label} | {r['stop']} | {fmt_int(r['items_written'])} | {held} | {per} | "
                   f"{fmt_int((r['rss_bytes'] or 0) / 2**20)} | {fmt_int(rss_per)} | {r['seconds']} | "
                   f"{fmt_int(r['sets_per_s'])} |")
    s, m = results.get("shoal", {}), results.get("memcached", {})
    if s.get("items_held") and m.get("items_held"):
        ratio = s["items_held"] / m["items_held"]
        low = s["items_held_low"] / m["items_held"]
        qual = "" if s["evicted"] and m["evicted"] else " (a server did not evict: a bound, not a ratio)"
        span = f"{low:.2f}–{ratio:.2f}" if low != ratio else f"{ratio:.2f}"
        out.append(f"\nShoal / memcached, items held: **{span}**{qual}")
    else:
        out.append("\nShoal / memcached, items held: — (both figures are needed)")
    if any("after" in r for r in results.values()):
        out.append(f"\nWritten on for {args.after_eviction:,} items after the first eviction "
                   "(what a server holds while evicting):\n")
        out.append("| server | items written | items held then | lowest during | bytes/item | "
                   "evictions | RSS (MiB) |")
        out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for kind in ("shoal", "memcached"):
            a = results.get(kind, {}).get("after")
            if not a:
                continue
            held = (fmt_int(a["held"]) if a["held_low"] == a["held"]
                    else f"{fmt_int(a['held_low'])}–{fmt_int(a['held'])}")
            out.append(f"| {'Shoal' if kind == 'shoal' else 'memcached'} | "
                       f"{fmt_int(a['items_written'])} | {held} | {fmt_int(a['min_held_low'])} | "
                       f"{fmt_int(args.memory_mb * 2**20 / a['held'])} | {fmt_int(a['evictions'])} | "
                       f"{fmt_int((a['rss_bytes'] or 0) / 2**20)} |")
        sa, ma = results.get("shoal", {}).get("after"), results.get("memcached", {}).get("after")
        if sa and ma:
            out.append(f"\nShoal / memcached, items held then: **{sa['held_low'] / ma['held']:.2f}"
                       + (f"–{sa['held'] / ma['held']:.2f}" if sa['held'] != sa['held_low'] else "")
                       + "**")
    if s and "error" not in s:
        rd = s["reading"]
        out.append(f"\nShoal at the stop: cache {fmt_int(rd['cache_partitions'])} partitions "
                   f"({fmt_int(rd['cache_bytes'])} B), memtables {fmt_int(rd['memtable_partitions'])} "
                   f"partitions ({fmt_int(rd['memtable_bytes'])} B), SSTables "
                   f"{fmt_int(rd['sstable_partitions'])} partitions; memory budget "
                   f"{fmt_int(rd['memory_budget_bytes'])} B, used by kind "
                   f"{mib_by_kind(rd['memory_used_bytes'])}; its `stats`: curr_items "
                   f"{fmt_int(rd['stats_curr_items'])}, evictions {fmt_int(rd['stats_evictions'])}. "
                   "A partition right after a flush can be both cached and in the flushed "
                   "memtable: *held* runs from cache + memtable less the most that can be "
                   f"counted twice ({fmt_int(s.get('overlap_max'))}: those both in a memtable and "
                   "an SSTable, as every key is written once and none is read, so a cached one "
                   "was flushed) to cache + memtable. Negative (known-absent) cache entries would "
                   "count in shoal_cache_partitions too; none are made here (no reads).")
    for kind in ("shoal", "memcached"):
        if "error" in results.get(kind, {}):
            out.append(f"\n**{kind} failed:** {results[kind]['error']}")
    for kind in ("shoal", "memcached"):
        if kind in results and "command" in results[kind]:
            out.append(f"\n- {kind}: {results[kind].get('version', '?')}: `{results[kind]['command']}`")
    return "\n".join(out)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shoal", default=os.path.join(ROOT, "target/release/shoal"),
                   help="the shoal binary (default target/release/shoal)")
    p.add_argument("--memcached", default="memcached", help="memcached binary (apt-get installs it)")
    p.add_argument("--only", default="shoal,memcached", help="servers to run, comma-separated")
    p.add_argument("--memory-mb", type=int, default=512, help="budget of both servers, MiB")
    p.add_argument("--value-size", type=int, default=1000)
    p.add_argument("--batch", type=int, default=1000, help="sets per pipelined batch (eviction checked after each)")
    p.add_argument("--max-items", type=int, default=2_000_000, help="stop without eviction after this many")
    p.add_argument("--max-seconds", type=float, default=300, help="... or after this long, per server")
    p.add_argument("--after-eviction", type=int, default=100_000,
                   help="items written on after the first eviction, then held is read again "
                        "(0: stop at the first eviction)")
    p.add_argument("--server-cpu", default="1")
    p.add_argument("--loader-cpu", default="0")
    p.add_argument("--json", help="also write the results as JSON here")
    return p.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    args.shoal = os.path.abspath(args.shoal)
    args.load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))    # run the finally blocks
    if args.loader_cpu is not None:
        os.sched_setaffinity(0, {int(c) for c in args.loader_cpu.split(",")})
    tmp = tempfile.mkdtemp(prefix="shoal-density-", dir="/tmp")
    results, failed = {}, False
    try:
        for kind in [k.strip() for k in args.only.split(",") if k.strip()]:
            if kind not in ("shoal", "memcached"):
                sys.exit(f"density.py: unknown server {kind!r}")
            try:
                results[kind] = run_one(kind, args, tmp)
            except (MetricMissing, ServerError, OSError, subprocess.SubprocessError) as e:
                failed = True
                log(f"[{kind}] FAILED: {e}")
                results[kind] = {"server": kind, "error": str(e)}
            finally:
                shutil.rmtree(os.path.join(tmp, "shoal-data"), ignore_errors=True)
        text = report(results, args)
        print(text)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"args": vars(args), "results": results}, f, indent=1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 3 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env bash
# Instructions and allocations per request of one Shoal build, counted by
# callgrind: repeatable to the instruction whatever else the machine does,
# so two builds compare exactly where timings on a noisy machine cannot.
#
#   bench/callgrind_reads.sh BIN [READS] [WORKLOAD] [PROTOCOL]
#
# Starts BIN (--smp 1) under `valgrind --tool=callgrind`, loads 10,000 keys
# of 1 KiB with `shoal stress` (BIN's own), zeroes the counters, runs READS
# (default 20,000) requests of WORKLOAD (default read: point reads from the
# memtable, 16 in flight on one connection), dumps the counters and prints Ir
# (instructions) and malloc calls per request, counted over every thread of
# the server. PROTOCOL: cql (default; prepared statements), memcache-text
# (`get`) or memcache-meta (`mg`), the memcache ones as one batch of 16
# requests written at once (`--pipeline 16`). FLUSH=1 flushes after the
# load, so reads are row-cache hits instead of memtable reads. TOP=N also prints the N
# functions of highest inclusive and self cost. Needs valgrind (Debian:
# apt-get install valgrind).
set -euo pipefail

bin=$(realpath "$1")
reads=${2:-20000}
workload=${3:-read}
protocol=${4:-cql}
keys=10000
cql_port=9342
memcache_port=11412
tmp=$(mktemp -d /tmp/shoal-callgrind-XXXXXX)
server=""
cleanup() {
    # The server dies of the SIGTERM: its status is not this script's.
    [[ -n "$server" ]] && kill "$server" 2>/dev/null && { wait "$server" 2>/dev/null || true; }
    rm -rf "$tmp/data"; [[ -n "${KEEP_DUMP:-}" ]] || rm -rf "$tmp"
}
trap cleanup EXIT

valgrind --tool=callgrind --callgrind-out-file="$tmp/callgrind.out" \
    "$bin" --smp 1 --workdir "$tmp/data" --memory 1G --native-transport-port "$cql_port" \
    --native-shard-aware-transport-port 19342 --api-port 10400 --memcache-port "$memcache_port" --storage-port 7400 \
    >"$tmp/server.log" 2>&1 &
server=$!
case "$protocol" in
    cql) port=$cql_port; via=(--protocol cql --keyspace shoal_bench --table kv1k --concurrency 16) ;;
    memcache-text|memcache-meta)
        port=$memcache_port
        via=(--protocol memcache --memcache-protocol "${protocol#memcache-}" --pipeline 16) ;;
    *) echo "PROTOCOL must be cql, memcache-text or memcache-meta, not $protocol" >&2; exit 2 ;;
esac
for _ in $(seq 1 600); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done

stress() {
    "$bin" stress --threads 1 --quiet --port "$port" --keys "$keys" --value-size 1024 --connections 1 \
        "${via[@]}" "$@" >/dev/null
}
stress --workload write --pop seq --count "$keys"
# FLUSH=1: reads come from the row cache (the flush puts the rows in it)
# instead of the memtable.
[[ -n "${FLUSH:-}" ]] && "$bin" nodetool --api-port 10400 flush >/dev/null
stress --workload read --pop uniform --count 2000          # warm-up: prepare, caches
callgrind_control -z "$server" >/dev/null
stress --workload "$workload" --pop uniform --count "$reads"
callgrind_control -d "$server" >/dev/null
sleep 1

# The dump taken after zeroing holds only the measured requests.
dump=$(ls -t "$tmp"/callgrind.out* | head -1)
total_ir=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
# Allocator entry points called (the Rust global allocator is mimalloc; its
# aligned entry points are where every Rust allocation and reallocation lands).
calls=$(python3 - "$dump" <<'PY'
import re, sys
ALLOC = {"mi_malloc_aligned", "mi_zalloc_aligned", "mi_realloc_aligned", "mi_malloc", "mi_zalloc", "mi_realloc"}
names, target, calls = {}, None, 0
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", line)
    if m:
        kind, fid, name = m.groups()
        if name:
            names[fid] = name.strip()
        target = names.get(fid, "") if kind == "cfn" else None
    elif line.startswith("calls=") and target is not None:
        if target in ALLOC:
            calls += int(line.split("=")[1].split()[0])
        target = None
print(calls)
PY
)
echo "build: $bin"
echo "requests: $reads ($workload, $protocol)"
echo "Ir per request: $((total_ir / reads))"
echo "allocation calls per request: $(python3 -c "print(round($calls / $reads, 1))")"
if [[ -n "${TOP:-}" ]]; then
    echo "top $TOP by inclusive cost (Ir, % of total, function):"
    # awk reads to the end: `head` would kill callgrind_annotate with SIGPIPE (pipefail).
    top() { awk -v n="$TOP" '/^ *[0-9,]+ \(/ && c++ < n'; }
    callgrind_annotate --threshold=100 --inclusive=yes "$dump" 2>/dev/null | top
    echo "top $TOP by self cost:"
    callgrind_annotate --threshold=100 "$dump" 2>/dev/null | top
fi

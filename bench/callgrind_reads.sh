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
# load, so reads are row-cache hits instead of memtable reads. DISK=1
# loads an uncompressed table, flushes it and turns its row cache off
# (`caching = {'enabled': 'false'}`, through PYTHON), so every read is a
# disk read of the SSTable (O_DIRECT where the workdir's filesystem takes
# it; the index pages cached after the warm-up): the CPU of a disk-bound
# read, less the row cache's fill. TOP=N also prints the N
# functions of highest inclusive and self cost; INCLUSIVE=REGEX the
# inclusive Ir per request of the functions whose names match. AUTH=password
# runs the node with PasswordAuthenticator and the measured requests log in
# as a role; AUTH=authorizer adds CassandraAuthorizer, the role holding
# SELECT through a granted role, so every request's permission check
# resolves through the shard's cache (setting up the roles needs PYTHON,
# default .venv/bin/python, with cassandra-driver). A login's bcrypt hash
# runs on threads of its own (shoal-bcrypt-*), whose instructions are left
# out of the counts. Needs valgrind (Debian: apt-get install valgrind).
# PEER=memcached measures Debian's memcached (`-t 1 -m 1024`) instead of
# BIN's server, with BIN's stress as the same loader (memcache protocols
# only). MEMCACHE_WRITE=incr|delete (memcache protocols, WORKLOAD write):
# the measured writes are `incr k 1` / `ma k` or `delete k` / `md k`, over
# 8-digit numbers loaded instead of 1 KiB values (as bench/harness does);
# POP=seq measures each key once (every delete finds its item) instead of
# uniform draws (default; after the first pass a delete mostly misses).
# MISS=1 (WORKLOAD read): the measured reads draw from 1,000,000 keys, of
# which the 10,000 loaded are 1%, so 99% of them miss. GET_KEYS=N (text
# protocol): each `get` asks for N keys (a request is one such `get`).
# Under valgrind memcached cannot raise its open-file limit and
# refuses to start, so a two-line shim (built with cc) makes setrlimit a
# no-op for it. Its counts are every thread's: its worker, listener and LRU
# threads; no syscall is counted on either side.
set -euo pipefail

bin=$(realpath "$1")
reads=${2:-20000}
workload=${3:-read}
protocol=${4:-cql}
keys=10000
# PORT_BASE=P: the server's five ports are P..P+4 (default 9342, 19342,
# 10400, 11412, 7400), so runs beside each other do not collide.
if [[ -n "${PORT_BASE:-}" ]]; then
    cql_port=$PORT_BASE aware_port=$((PORT_BASE + 1)) api_port=$((PORT_BASE + 2))
    memcache_port=$((PORT_BASE + 3)) storage_port=$((PORT_BASE + 4))
else
    cql_port=9342 aware_port=19342 api_port=10400 memcache_port=11412 storage_port=7400
fi
tmp=$(mktemp -d /tmp/shoal-callgrind-XXXXXX)
server=""
cleanup() {
    # The server dies of the SIGTERM: its status is not this script's.
    [[ -n "$server" ]] && kill "$server" 2>/dev/null && { wait "$server" 2>/dev/null || true; }
    rm -rf "$tmp/data"; [[ -n "${KEEP_DUMP:-}" ]] || rm -rf "$tmp"
}
trap cleanup EXIT

auth=${AUTH:-}
server_auth=()
case "$auth" in
    "") ;;
    password) server_auth=(--authenticator PasswordAuthenticator) ;;
    authorizer) server_auth=(--authenticator PasswordAuthenticator --authorizer CassandraAuthorizer) ;;
    *) echo "AUTH must be password or authorizer, not $auth" >&2; exit 2 ;;
esac
[[ -n "$auth" && "$protocol" != cql ]] && { echo "AUTH needs PROTOCOL cql" >&2; exit 2; }

# One output file per thread, so the bcrypt threads' can be left out.
peer=${PEER:-}
case "$peer" in
    "")
        valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$tmp/callgrind.out" \
            "$bin" --smp 1 --workdir "$tmp/data" --memory 1G --native-transport-port "$cql_port" \
            --native-shard-aware-transport-port "$aware_port" --api-port "$api_port" --memcache-port "$memcache_port" \
            --storage-port "$storage_port" "${server_auth[@]}" >"$tmp/server.log" 2>&1 &
        ;;
    memcached)
        [[ "$protocol" == memcache-* ]] || { echo "PEER=memcached needs a memcache PROTOCOL" >&2; exit 2; }
        printf '#include <sys/resource.h>\nint setrlimit(int r, const struct rlimit *l) { (void)r; (void)l; return 0; }\n' \
            >"$tmp/setrlimit.c"
        cc -shared -fPIC -o "$tmp/setrlimit.so" "$tmp/setrlimit.c"
        LD_PRELOAD="$tmp/setrlimit.so" valgrind --tool=callgrind --separate-threads=yes \
            --callgrind-out-file="$tmp/callgrind.out" memcached -u root -t 1 -m 1024 -c 64 -U 0 -l 127.0.0.1 \
            -p "$memcache_port" >"$tmp/server.log" 2>&1 &
        ;;
    *) echo "PEER must be memcached, not $peer" >&2; exit 2 ;;
esac
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

value=(--value-size 1024)
measured=()
case "${MEMCACHE_WRITE:-}" in
    "") ;;
    incr|delete)
        [[ "$protocol" == memcache-* ]] || { echo "MEMCACHE_WRITE needs a memcache PROTOCOL" >&2; exit 2; }
        value=(--value-size 8 --numeric-values) measured=(--memcache-write "$MEMCACHE_WRITE") ;;
    *) echo "MEMCACHE_WRITE must be incr or delete, not $MEMCACHE_WRITE" >&2; exit 2 ;;
esac
stress() {
    "$bin" stress --threads 1 --quiet --port "$port" --keys "${population:-$keys}" "${value[@]}" --connections 1 \
        "${via[@]}" "$@" >/dev/null
}
login=()
if [[ -n "$auth" ]]; then
    stress --workload write --pop seq --count "$keys" --user cassandra --password cassandra
    # The measured role reads through a granted one (GRANT needs the authorizer).
    "${PYTHON:-.venv/bin/python}" - "$cql_port" "$auth" <<'PY'
import sys
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster
cluster = Cluster(["127.0.0.1"], port=int(sys.argv[1]), connect_timeout=60, control_connection_timeout=60,
                  auth_provider=PlainTextAuthProvider("cassandra", "cassandra"))
session = cluster.connect()
session.default_timeout = 60
session.execute("CREATE ROLE reader")
session.execute("CREATE ROLE bench WITH PASSWORD = 'bench' AND LOGIN = true")
session.execute("GRANT reader TO bench")
if sys.argv[2] == "authorizer":
    session.execute("GRANT SELECT ON KEYSPACE shoal_bench TO reader")
cluster.shutdown()
PY
    login=(--user bench --password bench --no-schema)
else
    stress --workload write --pop seq --count "$keys" ${DISK:+--uncompressed}
fi
# FLUSH=1: reads come from the row cache (the flush puts the rows in it)
# instead of the memtable.
[[ -n "${FLUSH:-}${DISK:-}" ]] && "$bin" nodetool --api-port "$api_port" flush >/dev/null
if [[ -n "${DISK:-}" ]]; then
    [[ "$protocol" == cql ]] || { echo "DISK needs PROTOCOL cql" >&2; exit 2; }
    "${PYTHON:-.venv/bin/python}" - "$cql_port" <<'PY'
import sys
from cassandra.cluster import Cluster
cluster = Cluster(["127.0.0.1"], port=int(sys.argv[1]), connect_timeout=60, control_connection_timeout=60)
session = cluster.connect()
session.default_timeout = 60
session.execute("ALTER TABLE shoal_bench.kv1k WITH caching = {'enabled': 'false'}")
cluster.shutdown()
PY
fi
stress --workload read --pop uniform --count 2000 "${login[@]}"     # warm-up: prepare, caches
callgrind_control -z "$server" >/dev/null
[[ -n "${GET_KEYS:-}" ]] && measured+=(--keys-per-get "$GET_KEYS")
population=${MISS:+1000000} stress --workload "$workload" --pop "${POP:-uniform}" --count "$reads" "${measured[@]}" "${login[@]}"
callgrind_control -d "$server" >/dev/null
sleep 1

# The dump taken after zeroing (its files, one per thread, are the newest
# of their threads) holds only the measured requests; the bcrypt threads'
# files are left out.
mapfile -t dumps < <(python3 - "$tmp" <<'PY'
import glob, os, re, sys
newest = {}
for path in glob.glob(os.path.join(sys.argv[1], "callgrind.out*")):
    m = re.search(r"-(\d+)$", path)
    thread = m.group(1) if m else ""
    if thread not in newest or os.path.getmtime(path) > os.path.getmtime(newest[thread]):
        newest[thread] = path
for path in sorted(newest.values()):
    if "bcrypt" not in open(path, errors="replace").read():
        print(path)
PY
)
# Per file: Ir, allocator entry points called (the Rust global allocator is
# mimalloc; its aligned entry points are where every Rust allocation and
# reallocation lands); then the file of the most Ir (the shard's).
read -r total_ir calls busiest < <(python3 "$(dirname "$0")/callgrind_counts.py" \
    mi_malloc_aligned,mi_zalloc_aligned,mi_realloc_aligned,mi_malloc,mi_zalloc,mi_realloc "${dumps[@]}")
echo "build: ${peer:-$bin}${auth:+ (AUTH=$auth)}"
echo "requests: $reads ($workload, $protocol)"
echo "Ir per request: $((total_ir / reads))"
echo "allocation calls per request: $(python3 -c "print(round($calls / $reads, 1))")"
if [[ -n "${INCLUSIVE:-}" ]]; then
    echo "inclusive Ir per request of functions matching $INCLUSIVE:"
    callgrind_annotate --threshold=100 --inclusive=yes "$busiest" 2>/dev/null \
        | awk -v re="$INCLUSIVE" -v n="$reads" '/^ *[0-9,]+ \(/ && $0 ~ re {
            ir = $1; gsub(",", "", ir); printf "  %d  %s\n", ir / n, $0 }'
fi
if [[ -n "${TOP:-}" ]]; then
    echo "top $TOP by inclusive cost (Ir, % of total, function), on the busiest thread:"
    # awk reads to the end: `head` would kill callgrind_annotate with SIGPIPE (pipefail).
    top() { awk -v n="$TOP" '/^ *[0-9,]+ \(/ && c++ < n'; }
    callgrind_annotate --threshold=100 --inclusive=yes "$busiest" 2>/dev/null | top
    echo "top $TOP by self cost:"
    callgrind_annotate --threshold=100 "$busiest" 2>/dev/null | top
fi

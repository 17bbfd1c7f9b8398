#!/usr/bin/env bash
# Cross-check `shoal stress` against latte (https://crates.io/crates/latte-cli) on one
# workload: CQL reads of 1 KiB values, uniform keys (bench/latte/kv.rn is the latte twin of
# `shoal stress --workload read`).
#
#   scripts/latte-crosscheck.sh              start a Shoal node (--smp 1, pinned to SERVER_CPU,
#                                            ports 9342/19342/10400), run, stop it
#   scripts/latte-crosscheck.sh HOST:PORT    use a running node (Shoal or Cassandra), start nothing
#
# Loads KEYS rows with `latte load`, then runs the same read workload REPEATS times with each
# tool, alternating (latte, shoal, latte, shoal, ...): same key count, concurrency, connections,
# threads, warm-up and duration, the loader pinned to LOADER_CPU with taskset. Prints ops/s,
# p50 and p99 of every run, the means per tool and the ratio shoal/latte; exits 1 when a run
# failed, 3 when the throughput ratio is outside 1 +- TOLERANCE. Each run also shows the CPU
# used (in % of one core, over the whole invocation) by the loader, by the node (only when
# started here) and by everything else on the machine; "other" above 10% means another
# process competed for the cores and the run is flagged as not comparable.
#
# Env (defaults in brackets):
#   KEYS [100000]  DURATION s [10]  WARMUP s [2]  CONCURRENCY [64]  CONNECTIONS [1]  THREADS [1]
#   REPEATS [2]  TOLERANCE [0.15]  LOADER_CPU [0]  SERVER_CPU [1]  SERVER_MEMORY [2G]
#   SKIP_LOAD [0] (1: the rows are already there)  CONSISTENCY [ONE] (latte --consistency; shoal stress always uses ONE)
#   LATTE [bench/peers/latte/bin/latte]  SHOAL [target/release/shoal]
#   OUT_DIR [a temporary directory, removed at the end]: set it to keep the JSON reports/logs.
# latte is installed with:
#   cargo install latte-cli --locked --root bench/peers/latte
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

KEYS="${KEYS:-100000}"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-2}"
CONCURRENCY="${CONCURRENCY:-64}"
CONNECTIONS="${CONNECTIONS:-1}"
THREADS="${THREADS:-1}"
REPEATS="${REPEATS:-2}"
TOLERANCE="${TOLERANCE:-0.15}"
LOADER_CPU="${LOADER_CPU:-0}"
SERVER_CPU="${SERVER_CPU:-1}"
SERVER_MEMORY="${SERVER_MEMORY:-2G}"
SKIP_LOAD="${SKIP_LOAD:-0}"
CONSISTENCY="${CONSISTENCY:-ONE}"
LATTE="${LATTE:-$ROOT/bench/peers/latte/bin/latte}"
SHOAL="${SHOAL:-$ROOT/target/release/shoal}"
WORKLOAD="$ROOT/bench/latte/kv.rn"
CQL_PORT=9342 AWARE_PORT=19342 API_PORT=10400 MEMCACHE_PORT=11342 STORAGE_PORT=7342

log() { echo "latte-crosscheck: $*" >&2; }
die() { log "$*"; exit 1; }

[[ $# -le 1 ]] || die "usage: $0 [HOST:PORT]"
[[ -x "$LATTE" ]] || die "latte not found at $LATTE (cargo install latte-cli --locked --root bench/peers/latte)"
[[ -x "$SHOAL" ]] || die "shoal not found at $SHOAL (cargo build --release -p shoal)"
"$SHOAL" stress --help >/dev/null 2>&1 || die "$SHOAL has no working 'stress' subcommand"

if [[ -n "${OUT_DIR:-}" ]]; then
    mkdir -p "$OUT_DIR"; WORK="$(cd "$OUT_DIR" && pwd)"; KEEP=1
else
    WORK="$(mktemp -d -t latte-crosscheck.XXXXXX)"; KEEP=0
fi
SERVER_PID=""

cleanup() {
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        log "stopping the node (pid $SERVER_PID)"
        kill -TERM "$SERVER_PID" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$SERVER_PID" 2>/dev/null && kill -KILL "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
    fi
    if [[ $KEEP -eq 0 ]]; then rm -rf "$WORK"; else log "reports kept in $WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A CQL OPTIONS round trip (not just a TCP connect).
cql_ready() {
    python3 - "$1" "$2" <<'PY' 2>/dev/null
import socket, struct, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1) as s:
    s.settimeout(1)
    s.sendall(struct.pack(">BBhBI", 4, 0, 0, 0x05, 0))
    sys.exit(0 if len(s.recv(9)) == 9 else 1)
PY
}

if [[ $# -eq 1 ]]; then
    [[ "$1" == *:* ]] || die "expected HOST:PORT, got '$1'"
    HOST="${1%:*}" PORT="${1##*:}"
    cql_ready "$HOST" "$PORT" || die "no CQL node answers on $HOST:$PORT"
    log "using the node at $HOST:$PORT (not started here; not pinned)"
else
    HOST=127.0.0.1 PORT=$CQL_PORT
    for p in $CQL_PORT $AWARE_PORT $API_PORT $MEMCACHE_PORT $STORAGE_PORT; do
        ss -Hltn "sport = :$p" | grep -q . && die "port $p is in use"
    done
    log "starting shoal --smp 1 on CPU $SERVER_CPU, CQL port $PORT (workdir $WORK/node)"
    taskset -c "$SERVER_CPU" "$SHOAL" --workdir "$WORK/node" --smp 1 --memory "$SERVER_MEMORY" \
        --listen-address 127.0.0.1 --native-transport-port $CQL_PORT \
        --native-shard-aware-transport-port $AWARE_PORT --api-port $API_PORT \
        --memcache-port $MEMCACHE_PORT --storage-port $STORAGE_PORT >"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 300); do
        cql_ready "$HOST" "$PORT" && break
        kill -0 "$SERVER_PID" 2>/dev/null || { tail -20 "$WORK/server.log" >&2; die "the node exited during startup"; }
        sleep 0.1
    done
    cql_ready "$HOST" "$PORT" || die "the node did not start within 30 s"
fi

LOADER=(taskset -c "$LOADER_CPU")
LATTE_COMMON=(-P "keys=$KEYS" -P value_size=1024 --consistency "$CONSISTENCY" -c "$CONNECTIONS" "$HOST:$PORT")

log "latte schema"
timeout 60 "${LOADER[@]}" "$LATTE" --log-dir "$WORK" schema "$WORKLOAD" -P "keys=$KEYS" \
    --consistency "$CONSISTENCY" "$HOST:$PORT" >"$WORK/schema.out" 2>&1 \
    || { cat "$WORK/schema.out" >&2; die "latte schema failed"; }
if [[ "$SKIP_LOAD" != 1 ]]; then
    log "latte load: $KEYS rows of 1024 bytes"
    t0=$(date +%s)
    timeout 300 "${LOADER[@]}" "$LATTE" --log-dir "$WORK" load -q "$WORKLOAD" -t 1 \
        --concurrency "$CONCURRENCY" "${LATTE_COMMON[@]}" >"$WORK/load.out" 2>&1 \
        || { tail -20 "$WORK/load.out" >&2; die "latte load failed"; }
    log "loaded in $(( $(date +%s) - t0 )) s"
fi

# Each run writes $WORK/<tool>-<n>.json; summarize() reads them.
run_latte() {
    local n=$1
    # -p is latte's concurrency PER THREAD: total in flight = THREADS * per-thread value.
    local per_thread=$(( (CONCURRENCY + THREADS - 1) / THREADS ))
    timeout $(( DURATION + WARMUP + 60 )) "${LOADER[@]}" "$LATTE" --log-dir "$WORK" run -q "$WORKLOAD" \
        -f read -t "$THREADS" -p "$per_thread" -w "${WARMUP}s" -d "${DURATION}s" \
        -o "$WORK/latte-$n.json" "${LATTE_COMMON[@]}" >"$WORK/latte-$n.out" 2>&1
}
run_shoal() {
    local n=$1
    timeout $(( DURATION + WARMUP + 60 )) "${LOADER[@]}" "$SHOAL" stress --protocol cql \
        --host "$HOST" --port "$PORT" --workload read --pop uniform --keys "$KEYS" --value-size 1024 \
        --threads "$THREADS" --concurrency "$CONCURRENCY" --connections "$CONNECTIONS" \
        --warmup "$WARMUP" --duration "$DURATION" --no-schema --quiet \
        --json "$WORK/shoal-$n.json" >"$WORK/shoal-$n.out" 2>&1
}

# CPU accounting per run, in clock ticks: the whole machine (busy time in /proc/stat), the
# loader (its children's times) and the node when it was started here. What is left over is
# other processes: a noisy neighbour shows up as "other" CPU, not just as a slower run.
TICK=$(getconf CLK_TCK)
machine_busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9; exit}' /proc/stat; }
server_ticks() {
    [[ -n "$SERVER_PID" ]] && awk '{print $14+$15}' "/proc/$SERVER_PID/stat" 2>/dev/null || echo 0
}
# `times` must run in this shell (not in a $(...) subshell) to see the loaders it waited for.
children_ticks() { awk -v tick="$TICK" 'NR==2{for(i=1;i<=2;i++){split($i,a,"m");t+=a[1]*60+a[2]} print int(t*tick+0.5)}' "$WORK/.times"; }

failed=0
for n in $(seq "$REPEATS"); do
    for tool in latte shoal; do
        log "run $n/$REPEATS: $tool (${DURATION}s + ${WARMUP}s warm-up, concurrency $CONCURRENCY, threads $THREADS, connections $CONNECTIONS)"
        times >"$WORK/.times"; m0=$(machine_busy) s0=$(server_ticks) c0=$(children_ticks) t0=$(date +%s.%N)
        if ! "run_$tool" "$n"; then
            log "$tool run $n failed:"; tail -20 "$WORK/$tool-$n.out" >&2; failed=1
        fi
        times >"$WORK/.times"; m1=$(machine_busy) s1=$(server_ticks) c1=$(children_ticks) t1=$(date +%s.%N)
        # wall seconds, then CPU seconds: loader, server, everything else
        echo "$t0 $t1 $(( c1 - c0 )) $(( s1 - s0 )) $(( m1 - m0 ))" | awk -v tick="$TICK" -v srv="$SERVER_PID" \
            '{w=$2-$1; l=$3/tick; s=$4/tick; o=$5/tick-l-(srv!=""?s:0); if(o<0)o=0;
              printf "{\"wall_s\": %.3f, \"loader_cpu_s\": %.3f, \"server_cpu_s\": %s, \"other_cpu_s\": %.3f}\n",
                     w, l, (srv!=""?sprintf("%.3f",s):"null"), o}' >"$WORK/$tool-$n.cpu.json"
    done
done

python3 - "$WORK" "$REPEATS" "$TOLERANCE" "$failed" <<'PY'
import json, os, sys
work, repeats, tol, failed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])

def latte(path):
    r = json.load(open(path))["result"]
    pct = r["cycle_latency"]["percentiles"]      # Min,1,2,5,10,25,50,75,90,95,98,99,99.9,99.99,Max; ms
    return dict(ops=r["cycle_throughput"]["value"], p50=pct[6]["value"] * 1e3,
                p99=pct[11]["value"] * 1e3, errors=r["error_count"])

def shoal(path):
    r = json.load(open(path))
    return dict(ops=r["ops_per_s"], p50=r["latency_us"]["p50"], p99=r["latency_us"]["p99"],
                errors=r["errors"])

def cpu(tool, n):
    # CPU use over the whole invocation (connect + warm-up + run), in % of one core.
    try:
        c = json.load(open(os.path.join(work, "%s-%d.cpu.json" % (tool, n))))
    except (OSError, ValueError):
        return "", None
    pct = lambda v: "%5.0f%%" % (100 * v / c["wall_s"]) if v is not None else "     -"
    return "%s %s %s" % (pct(c["loader_cpu_s"]), pct(c["server_cpu_s"]), pct(c["other_cpu_s"])), \
        c["other_cpu_s"] / c["wall_s"]

rows = {"latte": [], "shoal": []}
noisy = []
print("%-6s %3s %12s %10s %10s %7s   %6s %6s %6s" % ("tool", "run", "ops/s", "p50 us", "p99 us", "errors",
                                                     "loader", "server", "other"))
for n in range(1, repeats + 1):
    for tool, parse in (("latte", latte), ("shoal", shoal)):
        path = os.path.join(work, "%s-%d.json" % (tool, n))
        try:
            m = parse(path)
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            print("%-6s %3d  (no result: %s)" % (tool, n, e)); failed = 1; continue
        rows[tool].append(m)
        text, other = cpu(tool, n)
        if other is not None and other > 0.10:
            noisy.append("%s %d" % (tool, n))
        print("%-6s %3d %12.0f %10.0f %10.0f %7d   %s" % (tool, n, m["ops"], m["p50"], m["p99"], m["errors"], text))
if not rows["latte"] or not rows["shoal"]:
    sys.exit(1)
mean = lambda tool, k: sum(m[k] for m in rows[tool]) / len(rows[tool])
print()
for tool in ("latte", "shoal"):
    print("%-6s mean %12.0f %10.0f %10.0f" % (tool, mean(tool, "ops"), mean(tool, "p50"), mean(tool, "p99")))
ratio = {k: mean("shoal", k) / mean("latte", k) for k in ("ops", "p50", "p99")}
print("ratio shoal/latte: ops/s %.3f  p50 %.3f  p99 %.3f" % (ratio["ops"], ratio["p50"], ratio["p99"]))
if noisy:
    print("WARNING: other processes used more than 10%% of a core during: %s; those figures are not"
          " comparable (run again on a quiet machine)" % ", ".join(noisy))
ok = abs(ratio["ops"] - 1) <= tol
print("throughput %s within +-%d%%" % ("AGREES" if ok else "DISAGREES", round(tol * 100)))
sys.exit(1 if failed else (0 if ok else 3))
PY

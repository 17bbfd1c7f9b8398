#!/usr/bin/env bash
# Runs the integration tests that ship with the `scylla` crate (ScyllaDB's Rust
# driver, tests/integration/) against a Shoal server, and reports what passes.
# A compatibility report, not part of scripts/test.sh.
#
#   scripts/scylla-rust-suite.sh [NAME_FILTER]
#
# 1. copies the crate source (version pinned in tests/rust-driver/Cargo.toml,
#    fetched by `cargo fetch`) to target/scylla-rust-suite/src, minus the `ccm`
#    tests (they drive ScyllaDB clusters through ccm, via a dev-dependency
#    that is not published), and builds the `integration` test binary there
#    (own workspace and CARGO_TARGET_DIR under target/scylla-rust-suite);
# 2. starts "$SHOAL_BIN" (default target/release/shoal) with --smp 2 on free
#    loopback ports and points the tests at it (SCYLLA_URI); with
#    INCLUDE_3_NODE=1, only or all, also a 3-node Shoal cluster on
#    CLUSTER_ADDRESSES (default 127.0.0.2 127.0.0.3 127.0.0.4), every node on
#    CQL port 9042 and shard-aware port 19042, as test_with_3_node_cluster
#    expects: the driver pairs the IPs in system.local/peers with the port it
#    dialled (the proxy's 9042) and the proxy's translation map knows
#    REAL_IP:9042 and :19042 only; the cluster is named TestCluster, as the
#    suite expects (metadata::contents). Each server is started when the first
#    test that needs it comes up;
# 3. runs every test (or those whose name contains NAME_FILTER) in its own
#    process with a time limit, one at a time, restarting the server if it
#    died, or the whole cluster (on fresh data) if a node died or is not UN.
#    Tests that need a 3-node cluster (scylla-proxy in front of SCYLLA_URI,
#    SCYLLA_URI2, SCYLLA_URI3) run against the cluster (SCYLLA_URI* = its
#    nodes) with INCLUDE_3_NODE=1, only or all, and are skipped otherwise;
#    INCLUDE_3_NODE=only skips all the other tests, INCLUDE_3_NODE=all runs
#    them against the cluster too (as the suite's own CI does);
# 4. prints passed/failed/timed-out/ignored/skipped counts per test module and
#    each failure's panic message, tagging tests that are ScyllaDB-only (marked
#    `#[cfg_attr(cassandra_tests, ignore)]` upstream) and those that need 3
#    nodes; stops the servers.
#
# Results: target/scylla-rust-suite/results.tsv (test, outcome, tags, message),
# one log per test under target/scylla-rust-suite/logs/, the single server's
# log in target/scylla-rust-suite/server*.log, the cluster nodes' logs in
# target/scylla-rust-suite/cluster<start>-<address>.log.
#
# Env: SHOAL_BIN, SCYLLA_CRATE_VERSION (default: the pin), SUITE_FEATURES
# (default full-serialization,metrics), CASSANDRA_TESTS=1 (build with
# --cfg cassandra_tests: ScyllaDB-only tests become ignored), INCLUDE_3_NODE
# (0, the default: skip the 3-node tests; 1: run them against a 3-node
# cluster; only: run just them; all: run every test against the cluster),
# CLUSTER_ADDRESSES (three loopback addresses; ports 9042 and 19042 must be
# free on each), SHOAL_SMP (default 2, for the single server and each cluster
# node), TEST_TIMEOUT (seconds per test, default 60), SUITE_TIMEOUT (seconds
# for all tests, default 3600), BUILD_TIMEOUT (default 3600).
# Exit status: 0 if no test failed or timed out, 1 otherwise, 2 on set-up errors.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

FILTER="${1:-}"
SHOAL_BIN="${SHOAL_BIN:-target/release/shoal}"
SMP="${SHOAL_SMP:-2}"
TEST_TIMEOUT="${TEST_TIMEOUT:-60}"
SUITE_TIMEOUT="${SUITE_TIMEOUT:-3600}"
BUILD_TIMEOUT="${BUILD_TIMEOUT:-3600}"
FEATURES="${SUITE_FEATURES:-full-serialization,metrics}"
WORK="$ROOT/target/scylla-rust-suite"
INCLUDE_3_NODE="${INCLUDE_3_NODE:-0}"
read -r -a CLUSTER_ADDRESSES <<<"${CLUSTER_ADDRESSES:-127.0.0.2 127.0.0.3 127.0.0.4}"
CLUSTER_CQL_PORT=9042
CLUSTER_SA_PORT=19042
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"

log() { echo "scylla-rust-suite: $*" >&2; }
die() { log "$*"; exit 2; }

[[ "$INCLUDE_3_NODE" =~ ^(0|1|only|all)$ ]] || die "INCLUDE_3_NODE must be 0, 1, only or all"
[[ ${#CLUSTER_ADDRESSES[@]} -eq 3 ]] || die "CLUSTER_ADDRESSES must name three addresses"

[[ -x "$SHOAL_BIN" ]] || die "$SHOAL_BIN is not an executable (cargo build --release -p shoal, or set SHOAL_BIN)"
SHOAL_BIN="$(cd "$(dirname "$SHOAL_BIN")" && pwd)/$(basename "$SHOAL_BIN")"

# --- 1. the crate's source and test binary ---------------------------------
VERSION="${SCYLLA_CRATE_VERSION:-$(sed -n 's/^scylla *= *\(.*version *= *\)\{0,1\}"=\([0-9.]*\)".*/\2/p' tests/rust-driver/Cargo.toml)}"
[[ -n "$VERSION" ]] || die "cannot read the scylla version pinned in tests/rust-driver/Cargo.toml"
CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}"
find_source() { compgen -G "$CARGO_HOME/registry/src/*/scylla-$VERSION" | head -n 1; }
SRC="$(find_source)"
if [[ -z "$SRC" ]]; then
    log "fetching scylla $VERSION (cargo fetch)"
    cargo fetch >&2 || die "cargo fetch failed"
    SRC="$(find_source)"
fi
[[ -n "$SRC" && -d "$SRC/tests/integration" ]] || die "no scylla-$VERSION source with tests/integration under $CARGO_HOME/registry/src"

mkdir -p "$WORK"
COPY="$WORK/src"
if [[ ! -f "$COPY/.copied-from" || "$(cat "$COPY/.copied-from")" != "$SRC" ]]; then
    log "copying $SRC to $COPY"
    rm -rf "$COPY"
    cp -a "$SRC" "$COPY" && chmod -R u+w "$COPY" || die "copy failed"
    # ccm tests need the unpublished scylla-ccm-bridge dev-dependency.
    rm -rf "$COPY/tests/integration/ccm"
    sed -i 's/^pub(crate) mod ccm;$//' "$COPY/tests/integration/main.rs"
    # Its own workspace, not a stray member of Shoal's.
    printf '\n[workspace]\n' >>"$COPY/Cargo.toml"
    echo "$SRC" >"$COPY/.copied-from"
fi

RUSTFLAGS_SUITE="--cfg scylla_unstable"
[[ "${CASSANDRA_TESTS:-0}" == 1 ]] && RUSTFLAGS_SUITE+=" --cfg cassandra_tests"
log "building scylla $VERSION integration tests (features $FEATURES; RUSTFLAGS $RUSTFLAGS_SUITE)"
(cd "$COPY" && CARGO_TARGET_DIR="$WORK/target" RUSTFLAGS="$RUSTFLAGS_SUITE" \
    timeout "$BUILD_TIMEOUT" cargo test --features "$FEATURES" --test integration --no-run \
    --message-format=json-render-diagnostics >"$WORK/build.json") || die "build failed"
EXE="$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "integration" and m.get("executable"):
        print(m["executable"])' "$WORK/build.json" | tail -n 1)"
[[ -x "$EXE" ]] || die "no integration test executable in the build output"

# Tags per test from the source: "3nodes" (the test, or a helper in its file,
# uses test_with_3_node_cluster or SCYLLA_URI2/3) and "scylla_only".
cat >"$WORK/classify.py" <<'PY'
import os, re, sys
root = sys.argv[1]
MARK = re.compile(r"test_with_3_node_cluster|SCYLLA_URI2|SCYLLA_URI3")

def blank(src):
    """Comments, strings and char literals blanked out, so braces can be counted."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("//", i):
            j = src.find("\n", i); j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2); j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j])); i = j
        elif (m := re.match(r'r(#*)"', src[i:i + 10])) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0))); j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[{}]", " ", src[i:j])); i = j
        elif src[i] == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(re.sub(r"[{}]", " ", src[i:j + 1])); i = j + 1
        elif m := re.match(r"'(\\.|[^\\'])'", src[i:i + 4]):
            out.append(" " * len(m.group(0))); i += len(m.group(0))
        else:
            out.append(src[i]); i += 1
    return "".join(out)

def functions(src):
    s = blank(src)
    for m in re.finditer(r"\bfn\s+([A-Za-z_]\w*)", s):
        i, semi = s.find("{", m.end()), s.find(";", m.end())
        if i < 0 or 0 <= semi < i:
            continue
        depth, j = 0, i
        while j < len(s):
            depth += {"{": 1, "}": -1}.get(s[j], 0)
            if depth == 0:
                break
            j += 1
        attrs = s[max(s.rfind("}", 0, m.start()), s.rfind(";", 0, m.start()), 0):m.start()]
        yield m.group(1), s[i:j + 1], attrs

for dirpath, _, files in os.walk(root):
    for f in sorted(files):
        if not f.endswith(".rs"):
            continue
        rel = os.path.relpath(os.path.join(dirpath, f), root)[:-3]
        module = "::".join(p for p in rel.split(os.sep) if p not in ("mod", "main"))
        fns = list(functions(open(os.path.join(dirpath, f)).read()))
        bodies = {name: body for name, body, _ in fns}
        needs3 = {name for name, body in bodies.items() if MARK.search(body)}
        grown = True
        while grown:
            grown = False
            for name, body in bodies.items():
                if name not in needs3 and any(re.search(r"\b%s\s*[(:<]" % re.escape(h), body) for h in needs3):
                    needs3.add(name); grown = True
        for name, _, attrs in fns:
            if re.search(r"#\[(tokio::)?test\b", attrs):
                tags = (["3nodes"] if name in needs3 else []) + \
                       (["scylla_only"] if re.search(r"cfg_attr\(\s*cassandra_tests\s*,\s*ignore", attrs) else [])
                print("%s::%s\t%s" % (module, name, ",".join(tags) or "-"))
PY
python3 "$WORK/classify.py" "$COPY/tests/integration" >"$WORK/tags.tsv" || die "classify.py failed"

mapfile -t TESTS < <("$EXE" --list --format terse | sed -n 's/: test$//p')
[[ ${#TESTS[@]} -gt 0 ]] || die "the test binary lists no tests"

# --- 2. the servers -----------------------------------------------------------
# N ports free on address $1 (default 127.0.0.1).
free_ports() {
    python3 - "${1:-127.0.0.1}" "${2:-5}" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[2]))]
for s in socks:
    s.bind((sys.argv[1], 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}
# Whether port $2 can be bound on every address in $1 (space separated).
bindable() {
    python3 - "$1" "$2" <<'PY'
import socket, sys
for address in sys.argv[1].split():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((address, int(sys.argv[2])))
    except OSError as e:
        sys.exit("%s:%s: %s" % (address, sys.argv[2], e))
    finally:
        s.close()
PY
}
port_open() { (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null; }

# Stops the processes whose pids are the arguments: TERM, up to 5 s, then KILL.
stop_pids() {
    local pid alive
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null; done
    for _ in $(seq 1 50); do
        alive=0
        for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        (( alive )) || break
        sleep 0.1
    done
    for pid in "$@"; do kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
}

server_pid=""
server_starts=0
server_tmp="$(mktemp -d -t shoal-scylla-suite.XXXXXX)"
stop_server() {
    [[ -n "$server_pid" ]] && stop_pids "$server_pid"
    server_pid=""
}
cluster_pids=()
cluster_starts=0
stop_cluster() {
    [[ ${#cluster_pids[@]} -gt 0 ]] && stop_pids "${cluster_pids[@]}"
    cluster_pids=()
}
cleanup() {
    local rc=$?
    stop_server
    stop_cluster
    rm -rf "$server_tmp"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SCYLLA_URI=""
start_server() {
    server_starts=$((server_starts + 1))
    local attempt
    for attempt in 1 2 3; do
        read -r CQL_PORT SA_PORT API_PORT MEMCACHE_PORT STORAGE_PORT < <(free_ports)
        local slog="$WORK/server$server_starts.log"
        rm -rf "$server_tmp/work"; mkdir -p "$server_tmp/work"
        "$SHOAL_BIN" --workdir "$server_tmp/work" --smp "$SMP" \
            --native-transport-port "$CQL_PORT" --native-shard-aware-transport-port "$SA_PORT" \
            --api-port "$API_PORT" --memcache-port "$MEMCACHE_PORT" --storage-port "$STORAGE_PORT" \
            --listen-address 127.0.0.1 >"$slog" 2>&1 &
        server_pid=$!
        local deadline=$((SECONDS + 30))
        while (( SECONDS < deadline )) && kill -0 "$server_pid" 2>/dev/null; do
            if port_open "$CQL_PORT" && port_open "$SA_PORT" && port_open "$API_PORT"; then
                SCYLLA_URI="127.0.0.1:$CQL_PORT"
                log "server up: $SHOAL_BIN --smp $SMP, SCYLLA_URI=$SCYLLA_URI (log $slog)"
                return 0
            fi
            sleep 0.2
        done
        log "server start attempt $attempt failed; log tail:"; tail -n 20 "$slog" >&2
        stop_server
    done
    die "cannot start $SHOAL_BIN"
}
server_alive() { [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; }

# The 3-node cluster: fresh workdirs, every node seeding all three, the
# failure detector's timeout 2 s (as tests/python/node.py start_cluster); up
# once every node serves CQL and the first one's nodetool status shows 3 UN.
cluster_api=()
start_cluster() {
    cluster_starts=$((cluster_starts + 1))
    local attempt i a deadline seeds ports storage=() memcache=() up why
    for attempt in 1 2 3; do
        why="$(bindable "${CLUSTER_ADDRESSES[*]}" "$CLUSTER_CQL_PORT" 2>&1 && bindable "${CLUSTER_ADDRESSES[*]}" "$CLUSTER_SA_PORT" 2>&1)" ||
            die "the 3-node tests need ports $CLUSTER_CQL_PORT and $CLUSTER_SA_PORT free on ${CLUSTER_ADDRESSES[*]}: $why"
        cluster_api=(); storage=(); memcache=(); seeds=""
        for i in 0 1 2; do
            read -r -a ports < <(free_ports "${CLUSTER_ADDRESSES[$i]}" 3)
            cluster_api+=("${ports[0]}"); storage+=("${ports[1]}"); memcache+=("${ports[2]}")
            seeds+="${seeds:+,}${CLUSTER_ADDRESSES[$i]}:${ports[1]}"
        done
        # The suite expects its cluster to be named TestCluster (metadata::contents).
        printf 'cluster_name: TestCluster\n' >"$server_tmp/cluster.yaml"
        cluster_pids=()
        for i in 0 1 2; do
            a="${CLUSTER_ADDRESSES[$i]}"
            rm -rf "$server_tmp/node$i"; mkdir -p "$server_tmp/node$i"
            "$SHOAL_BIN" --workdir "$server_tmp/node$i" --smp "$SMP" --listen-address "$a" --api-address "$a" \
                --native-transport-port "$CLUSTER_CQL_PORT" --native-shard-aware-transport-port "$CLUSTER_SA_PORT" \
                --api-port "${cluster_api[$i]}" --memcache-port "${memcache[$i]}" --storage-port "${storage[$i]}" \
                --seeds "$seeds" --memory 512M --failure-detector-timeout-in-ms 2000 \
                --options-file "$server_tmp/cluster.yaml" \
                >"$WORK/cluster$cluster_starts-$a.log" 2>&1 &
            cluster_pids+=($!)
        done
        deadline=$((SECONDS + 90))
        while (( SECONDS < deadline )) && cluster_alive; do
            up=0
            for i in 0 1 2; do port_open "$CLUSTER_CQL_PORT" "${CLUSTER_ADDRESSES[$i]}" && up=$((up + 1)); done
            if (( up == 3 )) && cluster_healthy; then
                log "cluster up: ${CLUSTER_ADDRESSES[*]}, CQL port $CLUSTER_CQL_PORT, --smp $SMP (logs $WORK/cluster$cluster_starts-*.log)"
                return 0
            fi
            sleep 0.5
        done
        log "cluster start attempt $attempt failed; log tails:"
        for a in "${CLUSTER_ADDRESSES[@]}"; do log "== $a"; tail -n 10 "$WORK/cluster$cluster_starts-$a.log" >&2; done
        stop_cluster
    done
    die "cannot start a 3-node cluster of $SHOAL_BIN"
}
cluster_alive() {
    [[ ${#cluster_pids[@]} -eq 3 ]] || return 1
    local pid
    for pid in "${cluster_pids[@]}"; do kill -0 "$pid" 2>/dev/null || return 1; done
}
# Alive, and the first node sees all three Up and Normal.
cluster_healthy() {
    cluster_alive && [[ "$("$SHOAL_BIN" nodetool --host "${CLUSTER_ADDRESSES[0]}" --api-port "${cluster_api[0]}" status 2>/dev/null |
                           grep -c '^UN ')" == 3 ]]
}

# --- 3. the tests -------------------------------------------------------------
rm -rf "$WORK/logs"; mkdir -p "$WORK/logs"
RESULTS="$WORK/results.tsv"
: >"$RESULTS"
suite_deadline=$((SECONDS + SUITE_TIMEOUT))
log "running ${#TESTS[@]} listed tests (INCLUDE_3_NODE=$INCLUDE_3_NODE), one process each, ${TEST_TIMEOUT}s each"
for t in "${TESTS[@]}"; do
    [[ -n "$FILTER" && "$t" != *"$FILTER"* ]] && continue
    tags="$(awk -F'\t' -v t="$t" '$1 == t { print $2 }' "$WORK/tags.tsv")"
    tags="${tags:--}"
    if [[ "$tags" == *3nodes* && "$INCLUDE_3_NODE" == 0 ]]; then
        printf '%s\tskipped\t%s\tneeds a 3-node cluster\n' "$t" "$tags" >>"$RESULTS"; continue
    fi
    if [[ "$tags" != *3nodes* && "$INCLUDE_3_NODE" == only ]]; then
        printf '%s\tskipped\t%s\tINCLUDE_3_NODE=only\n' "$t" "$tags" >>"$RESULTS"; continue
    fi
    if (( SECONDS >= suite_deadline )); then
        printf '%s\tnot_run\t%s\tSUITE_TIMEOUT reached\n' "$t" "$tags" >>"$RESULTS"; continue
    fi
    if [[ "$tags" == *3nodes* || "$INCLUDE_3_NODE" == all ]]; then
        if ! cluster_healthy; then
            if [[ ${#cluster_pids[@]} -gt 0 ]]; then
                log "a cluster node died or is not UN (see $WORK/cluster$cluster_starts-*.log); restarting the cluster"
                stop_cluster
            fi
            start_cluster
        fi
        uris=(SCYLLA_URI="${CLUSTER_ADDRESSES[0]}:$CLUSTER_CQL_PORT"
              SCYLLA_URI2="${CLUSTER_ADDRESSES[1]}:$CLUSTER_CQL_PORT"
              SCYLLA_URI3="${CLUSTER_ADDRESSES[2]}:$CLUSTER_CQL_PORT")
    else
        if ! server_alive; then
            [[ -n "$server_pid" ]] && { log "the server died (see $WORK/server$server_starts.log); restarting"; stop_server; }
            start_server
        fi
        uris=(SCYLLA_URI="$SCYLLA_URI")
    fi
    tlog="$WORK/logs/${t//::/.}.log"
    env "${uris[@]}" timeout -k 5 "$TEST_TIMEOUT" "$EXE" --exact "$t" --test-threads=1 >"$tlog" 2>&1
    rc=$?
    python3 - "$t" "$rc" "$tags" "$tlog" >>"$RESULTS" <<'PY'
import re, sys
name, rc, tags, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
text = open(path, errors="replace").read()
m = re.search(r"^test %s \.\.\. (ok|FAILED|ignored)" % re.escape(name), text, re.M)
outcome = {"ok": "passed", "FAILED": "failed", "ignored": "ignored"}.get(m.group(1)) if m else None
if rc in (124, 137):
    outcome = "timeout"
elif outcome is None:
    outcome = "failed"
message = ""
if outcome in ("failed", "timeout"):
    p = re.search(r"panicked at ([^\n]*):\n(.*?)(?:\nnote: |\nstack backtrace:|\n\n|\Z)", text, re.S)
    if p:
        message = "%s (at %s)" % (p.group(2), p.group(1))
    elif outcome == "timeout":
        message = "no result within the per-test time limit"
    else:
        message = "exit %d: %s" % (rc, text.strip().splitlines()[-1] if text.strip() else "")
    message = re.sub(r"\s+", " ", message).strip()[:600]
print("%s\t%s\t%s\t%s" % (name, outcome, tags, message))
PY
    outcome="$(tail -n 1 "$RESULTS" | cut -f2)"
    printf '%-8s %s\n' "$outcome" "$t" >&2
done

# --- 4. the report ------------------------------------------------------------
python3 - "$RESULTS" "$server_starts" "$cluster_starts" <<'PY'
import collections, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
kinds = ["passed", "failed", "timeout", "ignored", "skipped", "not_run"]
per = collections.OrderedDict()
for name, outcome, tags, msg in rows:
    module = "::".join(name.split("::")[:2])
    per.setdefault(module, collections.Counter())[outcome] += 1
total = collections.Counter(o for _, o, _, _ in rows)
print("\n%-42s %s" % ("module", " ".join("%7s" % k for k in kinds)))
for module, c in per.items():
    print("%-42s %s" % (module, " ".join("%7d" % c[k] for k in kinds)))
print("%-42s %s" % ("TOTAL (%d)" % len(rows), " ".join("%7d" % total[k] for k in kinds)))
print("(skipped: %s; single server started %s time(s), 3-node cluster %s time(s))" % (
    "; ".join("%s: %d" % kv for kv in collections.Counter(m for _, o, _, m in rows if o == "skipped").items()) or "none",
    sys.argv[2], sys.argv[3]))
bad = [r for r in rows if r[1] in ("failed", "timeout")]
if bad:
    print("\nfailures (tags: scylla_only = ignored upstream under --cfg cassandra_tests; 3nodes = run against the 3-node cluster):")
    for name, outcome, tags, msg in bad:
        print("- %s [%s%s]\n    %s" % (name, outcome, "" if tags == "-" else ", " + tags, msg))
PY
failed="$(awk -F'\t' '$2 == "failed" || $2 == "timeout"' "$RESULTS" | wc -l)"
log "results in $RESULTS, logs in $WORK/logs"
[[ "$failed" -eq 0 ]]

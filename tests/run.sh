#!/usr/bin/env bash
# Real-client test runner.
#
#   SHOAL_BIN=target/release/shoal tests/run.sh [extra pytest args]
#
# 1. installs the Python venvs (scripts/venv.sh, idempotent), and iproute2
#    for the partition test and openssl for the TLS tests when missing (as
#    root, with apt-get);
# 2. starts "$SHOAL_BIN" on free loopback ports in a temp workdir, waits (<= 30 s)
#    until its CQL port accepts connections; starts the reference memcached for
#    test_memcache_*.py (Debian's `memcached`, installed with apt-get when
#    missing) on a free port and exports MEMCACHED_PORT (without it, those
#    tests check Shoal only; MEMCACHED_PORT set by the caller: used as it is);
# 3. runs tests/python with .venv (cassandra-driver), then test_shard_aware.py with
#    .venv-scylla (scylla-driver);
# 4. stops the servers (trap on EXIT) and exits non-zero if anything failed.
#
# Without SHOAL_BIN, the tests run against an already running server at
# SHOAL_HOST:SHOAL_PORT (e.g. SHOAL_PEER=cassandra for Apache Cassandra).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SMP="${SHOAL_SMP:-2}"
# A bound on a hung run, per pytest invocation, not a speed target: the
# cassandra-driver suite takes ~10 min on a busy 2-core machine.
PYTEST_TIMEOUT="${SHOAL_PYTEST_TIMEOUT:-900}"
START_TIMEOUT="${SHOAL_START_TIMEOUT:-30}"

log() { echo "run.sh: $*" >&2; }

timeout 900 scripts/venv.sh || { log "venv setup failed"; exit 1; }

# test_partition.py cuts links between nodes in network namespaces (`ip
# netns`, root only): install iproute2 where it is missing and we are root.
if ! command -v ip >/dev/null 2>&1 && [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    log "installing iproute2 (apt-get install -y iproute2) for the partition test"
    DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q iproute2 >/dev/null 2>&1 \
        || { timeout 300 apt-get update -q >/dev/null 2>&1; \
             DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q iproute2 >/dev/null 2>&1; } \
        || log "apt-get install iproute2 failed: the partition test skips"
fi

# test_tls.py makes its certificates and checks each TLS port with the
# openssl CLI: install it where it is missing and we are root.
if ! command -v openssl >/dev/null 2>&1 && [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    log "installing openssl (apt-get install -y openssl) for the TLS tests"
    DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q openssl >/dev/null 2>&1 \
        || { timeout 300 apt-get update -q >/dev/null 2>&1; \
             DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q openssl >/dev/null 2>&1; } \
        || log "apt-get install openssl failed: the TLS tests skip"
fi

free_ports() { # N -> N distinct free loopback ports on one line
    .venv/bin/python - "$1" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

server_pid=""
tmp=""
memcached_pid=""
memcached_log=""
cleanup() {
    local rc=$?
    if [[ -n "$memcached_pid" ]] && kill -0 "$memcached_pid" 2>/dev/null; then
        kill -TERM "$memcached_pid" 2>/dev/null || true
        wait "$memcached_pid" 2>/dev/null || true
    fi
    [[ -n "$memcached_log" ]] && rm -f "$memcached_log"
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    if [[ -n "$tmp" ]]; then
        if [[ $rc -ne 0 && -f "$tmp/server.log" ]]; then
            log "server log (last 40 lines):"
            tail -n 40 "$tmp/server.log" >&2 || true
        fi
        rm -rf "$tmp"
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the reference memcached (test_memcache_*.py check every answer against it) ---
install_memcached() {
    local sudo=()
    if [[ $EUID -ne 0 ]]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo -n); else
            log "memcached is not installed and this is not root (no sudo): the reference tests skip"; return 1
        fi
    fi
    command -v apt-get >/dev/null 2>&1 || { log "memcached is not installed and there is no apt-get"; return 1; }
    local before
    before="$(pgrep -x memcached | sort || true)"
    log "installing Debian's memcached (apt-get install -y memcached)"
    export DEBIAN_FRONTEND=noninteractive
    if ! timeout 300 "${sudo[@]}" apt-get install -y -q memcached >/dev/null 2>&1; then
        timeout 300 "${sudo[@]}" apt-get update -q >/dev/null 2>&1 || true
        timeout 300 "${sudo[@]}" apt-get install -y -q memcached >/dev/null 2>&1 \
            || { log "apt-get install memcached failed: the reference tests skip"; return 1; }
    fi
    # the package may start the system service (port 11211): stop it if it did
    if [[ "$(pgrep -x memcached | sort || true)" != "$before" ]]; then
        log "stopping the memcached service the package started"
        timeout 30 "${sudo[@]}" service memcached stop >/dev/null 2>&1 \
            || timeout 30 "${sudo[@]}" invoke-rc.d memcached stop >/dev/null 2>&1 || true
    fi
}

start_memcached() {
    if [[ -n "${MEMCACHED_PORT:-}" ]]; then
        log "reference memcached: the one at MEMCACHED_PORT=$MEMCACHED_PORT"; return 0
    fi
    local bin="${MEMCACHED_BIN:-memcached}"
    if ! command -v "$bin" >/dev/null 2>&1; then
        install_memcached || return 0
        command -v "$bin" >/dev/null 2>&1 || { log "no memcached after the install: the reference tests skip"; return 0; }
    fi
    local port user=()
    read -r port < <(free_ports 1)
    if [[ $EUID -eq 0 ]]; then # memcached refuses to run as root without -u
        if id memcache >/dev/null 2>&1; then user=(-u memcache); else user=(-u root); fi
    fi
    memcached_log="$(mktemp -t shoal-memcached.XXXXXX)"
    "$bin" -p "$port" -U 0 -t 1 -m 64 -l 127.0.0.1 "${user[@]}" >"$memcached_log" 2>&1 &
    memcached_pid=$!
    local deadline=$((SECONDS + 10))
    until port_open 127.0.0.1 "$port"; do
        if ! kill -0 "$memcached_pid" 2>/dev/null || (( SECONDS >= deadline )); then
            log "the reference memcached did not start (the reference tests skip):"
            cat "$memcached_log" >&2
            kill -TERM "$memcached_pid" 2>/dev/null || true
            memcached_pid=""
            return 0
        fi
        sleep 0.1
    done
    export MEMCACHED_PORT="$port"
    log "reference $("$bin" -V 2>/dev/null) on 127.0.0.1:$port (pid $memcached_pid)"
}
start_memcached

if [[ -n "${SHOAL_BIN:-}" ]]; then
    [[ -x "$SHOAL_BIN" ]] || { log "SHOAL_BIN=$SHOAL_BIN is not an executable"; exit 1; }
    tmp="$(mktemp -d -t shoal-tests.XXXXXX)"
    export SHOAL_HOST=127.0.0.1
    read -r SHOAL_PORT SHOAL_SHARD_AWARE_PORT SHOAL_API_PORT SHOAL_MEMCACHE_PORT SHOAL_STORAGE_PORT < <(free_ports 5)
    export SHOAL_PORT SHOAL_SHARD_AWARE_PORT SHOAL_API_PORT SHOAL_MEMCACHE_PORT
    export SHOAL_SMP="$SMP"
    unset SHOAL_PEER
    mkdir -p "$tmp/work"
    log "starting $SHOAL_BIN (cql $SHOAL_PORT, shard-aware $SHOAL_SHARD_AWARE_PORT, api $SHOAL_API_PORT, memcache $SHOAL_MEMCACHE_PORT)"
    "$SHOAL_BIN" --workdir "$tmp/work" --smp "$SMP" \
        --native-transport-port "$SHOAL_PORT" \
        --native-shard-aware-transport-port "$SHOAL_SHARD_AWARE_PORT" \
        --api-port "$SHOAL_API_PORT" \
        --memcache-port "$SHOAL_MEMCACHE_PORT" \
        --storage-port "$SHOAL_STORAGE_PORT" \
        --listen-address 127.0.0.1 >"$tmp/server.log" 2>&1 &
    server_pid=$!
    deadline=$((SECONDS + START_TIMEOUT))
    until port_open 127.0.0.1 "$SHOAL_PORT"; do
        if ! kill -0 "$server_pid" 2>/dev/null; then
            log "server exited during startup"; exit 1
        fi
        if (( SECONDS >= deadline )); then
            log "server did not accept connections on $SHOAL_PORT within ${START_TIMEOUT}s"; exit 1
        fi
        sleep 0.2
    done
    log "server is up (pid $server_pid)"
else
    export SHOAL_HOST="${SHOAL_HOST:-127.0.0.1}"
    export SHOAL_PORT="${SHOAL_PORT:-9042}"
    log "SHOAL_BIN not set: testing the server already at $SHOAL_HOST:$SHOAL_PORT (peer: ${SHOAL_PEER:-shoal})"
fi

status=0
run_pytest() { # PYTHON ARGS... ; exit 5 (nothing selected, e.g. by -k) is not a failure
    local rc=0
    timeout -k 10 "$PYTEST_TIMEOUT" "$@" || rc=$?
    if [[ $rc -eq 5 ]]; then log "no tests selected"; rc=0; fi
    [[ $rc -eq 124 ]] && log "pytest timed out after ${PYTEST_TIMEOUT}s"
    [[ $rc -eq 0 ]] || status=1
}

log "pytest (cassandra-driver): tests/python"
run_pytest .venv/bin/python -m pytest -p no:cacheprovider tests/python \
    --ignore=tests/python/test_shard_aware.py "$@"

if [[ "${SHOAL_PEER:-}" == "cassandra" ]]; then
    log "SHOAL_PEER=cassandra: skipping the shard-aware tests"
else
    log "pytest (scylla-driver): tests/python/test_shard_aware.py"
    run_pytest .venv-scylla/bin/python -m pytest -p no:cacheprovider \
        tests/python/test_shard_aware.py "$@"
fi

if [[ $status -ne 0 ]]; then
    log "FAILED"
else
    log "all driver tests passed"
fi
exit $status

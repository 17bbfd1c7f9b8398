#!/usr/bin/env bash
# Shoal against its peers (memcached, Apache Cassandra), one command:
#
#   scripts/bench.sh [quick|full] [--only WORKLOAD,...] [other bench/compare.py options]
#
# 1. builds the release binary (cargo build --release -p shoal): the server and
#    the load generator `shoal stress` that drives every system;
# 2. makes/refreshes the harness venv .venv-bench from bench/requirements.txt
#    (matplotlib, pinned), the same way scripts/venv.sh makes the driver venvs;
# 3. runs bench/compare.py, which installs the peers itself (memcached from
#    Debian, Cassandra through scripts/cassandra.sh), runs every workload and
#    writes bench/results/<date>-<mode>.md, its plots and raw JSON, and
#    bench/results/LATEST.md. See bench/README.md.
#
# Env: PYTHON (python3), PIP_TIMEOUT (600 s), SHOAL_BENCH_NO_BUILD=1 skips step 1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
PIP_TIMEOUT="${PIP_TIMEOUT:-600}"
VENV=.venv-bench
REQ=bench/requirements.txt

log() { echo "bench.sh: $*" >&2; }

# As scripts/venv.sh: rebuilt only when the requirements file or the Python
# version changed (stamp = sha256 of the file + version) or the venv is broken.
ensure_venv() {
    local venv="$ROOT/$VENV" req="$ROOT/$REQ" check='import matplotlib'
    local want stamp="$venv/.shoal-requirements.sha256"
    want="$(sha256sum "$req" | cut -d' ' -f1) $("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
        && "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
        log "$VENV up to date ($REQ)"
        return 0
    fi
    if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
        log "$VENV out of date; reinstalling from $REQ"
    else
        log "creating $VENV"
        rm -rf "$venv"
        "$PYTHON" -m venv "$venv"
    fi
    rm -f "$stamp"
    timeout "$PIP_TIMEOUT" "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
    "$venv/bin/python" -c "$check"
    echo "$want" >"$stamp"
    log "$VENV ready: $("$venv/bin/python" -m pip freeze 2>/dev/null | grep -i '^matplotlib==' || true)"
}

if [[ "${SHOAL_BENCH_NO_BUILD:-}" != 1 ]]; then
    log "cargo build --release -p shoal"
    cargo build --release -p shoal
fi
py="$ROOT/$VENV/bin/python"
if ! ensure_venv; then
    # The figures do not need matplotlib: carry on without plots rather than not at all.
    log "could not make $VENV; running without plots"
    py="$PYTHON"
fi
exec "$py" bench/compare.py "$@"

#!/usr/bin/env bash
# Create/refresh the project's Python venvs (idempotent).
#   scripts/venv.sh [tests]   the driver tests':
#     .venv         <- tests/requirements.txt          (cassandra-driver, cqlsh, pytest)
#     .venv-scylla  <- tests/requirements-scylla.txt   (scylla-driver, scylla-cqlsh, pytest)
#   scripts/venv.sh bench     the benchmark harness's:
#     .venv-bench   <- bench/requirements.txt          (matplotlib)
# A venv is rebuilt only when its requirements file changed (stamp = sha256 of
# the file + python version) or the venv is broken.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
PIP_TIMEOUT="${PIP_TIMEOUT:-600}"

ensure_venv() { # VENV_DIR REQUIREMENTS CHECK_IMPORT
    local venv="$ROOT/$1" req="$ROOT/$2" check="$3"
    local want stamp="$venv/.shoal-requirements.sha256"
    want="$(sha256sum "$req" | cut -d' ' -f1) $("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
        && "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
        echo "venv.sh: $1 up to date ($2)"
        return 0
    fi
    if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
        echo "venv.sh: $1 out of date; reinstalling from $2"
    else
        echo "venv.sh: creating $1"
        rm -rf "$venv"
        "$PYTHON" -m venv "$venv"
    fi
    rm -f "$stamp"
    # A venv holds exactly one `cassandra` module: start the driver fresh so a
    # change between cassandra-driver and scylla-driver never mixes files.
    "$venv/bin/python" -m pip uninstall -q -y cassandra-driver scylla-driver >/dev/null 2>&1 || true
    timeout "$PIP_TIMEOUT" "$venv/bin/python" -m pip install -q --disable-pip-version-check \
        -r "$req"
    "$venv/bin/python" -c "$check"
    echo "$want" >"$stamp"
    echo "venv.sh: $1 ready: $("$venv/bin/python" -m pip freeze 2>/dev/null | grep -iE '^(cassandra-driver|scylla-driver|cqlsh|scylla-cqlsh|pytest|matplotlib)==' | tr '\n' ' ')"
}

case "${1:-tests}" in
tests)
    ensure_venv .venv tests/requirements.txt \
        'import cassandra, pytest, cqlshlib, importlib.util as u; assert u.find_spec("cassandra.shard_info") is None'
    ensure_venv .venv-scylla tests/requirements-scylla.txt \
        'import cassandra, pytest, cassandra.shard_info'
    ;;
bench)
    ensure_venv .venv-bench bench/requirements.txt 'import matplotlib'
    ;;
*)
    echo "usage: scripts/venv.sh [tests|bench]" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Shoal against its peers (memcached, Apache Cassandra), one command:
#
#   scripts/bench.sh [quick|full] [--only WORKLOAD,...] [other bench/compare.py options]
#
# 1. builds the release binary (cargo build --release -p shoal): the server and
#    the load generator `shoal stress` that drives every system;
# 2. makes/refreshes the harness venv .venv-bench from bench/requirements.txt
#    (matplotlib, pinned) with `scripts/venv.sh bench`;
# 3. runs bench/compare.py, which installs the peers itself (memcached from
#    Debian, Cassandra through scripts/cassandra.sh), runs every workload and
#    writes bench/results/<date>-<mode>.md, its plots and raw JSON, and
#    bench/results/LATEST.md. See bench/README.md.
#
# Env: PYTHON (python3), PIP_TIMEOUT (600 s, for venv.sh), SHOAL_BENCH_NO_BUILD=1 skips step 1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV=.venv-bench

log() { echo "bench.sh: $*" >&2; }

if [[ "${SHOAL_BENCH_NO_BUILD:-}" != 1 ]]; then
    log "cargo build --release -p shoal"
    cargo build --release -p shoal
fi
py="$ROOT/$VENV/bin/python"
if ! timeout 900 scripts/venv.sh bench >&2; then
    # The figures do not need matplotlib: carry on without plots rather than not at all.
    log "could not make $VENV; running without plots"
    py="$PYTHON"
fi
exec "$py" bench/compare.py "$@"

#!/usr/bin/env bash
# Crash test, long form: tests/python/test_crash.py with 100 kill -9 / restart
# cycles (CI runs 5) against a fresh release build.
#
#   scripts/crash-test.sh [CYCLES]        (default 100; SHOAL_CRASH_SEED=... replays a run)
#
# Every cycle runs concurrent writes against a node started with
# --commitlog-sync batch, kills it with SIGKILL mid-write, restarts it on the
# same workdir and checks that every acknowledged write (and delete) is there,
# data of all earlier cycles included. The other SHOAL_CRASH_* knobs are listed
# in the test's docstring. After a failure the node's workdir (data and
# server.log) is kept and its path printed. Ends with a one-line summary;
# exits non-zero if any cycle failed.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CYCLES="${1:-${SHOAL_CRASH_CYCLES:-100}}"
[[ "$CYCLES" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [CYCLES]" >&2; exit 2; }

log() { echo "crash-test: $*" >&2; }

log "cargo build --release -p shoal"
cargo build --release -p shoal || { log "build failed"; exit 1; }
timeout 900 scripts/venv.sh || { log "venv setup failed"; exit 1; }

summary="$(mktemp -t shoal-crash-summary.XXXXXX)"
trap 'rm -f "$summary" "$summary.tmp"' EXIT

export SHOAL_BIN="$ROOT/target/release/shoal"
export SHOAL_CRASH_CYCLES="$CYCLES"
export SHOAL_CRASH_SUMMARY="$summary"
export SHOAL_CRASH_KEEP_WORKDIR="${SHOAL_CRASH_KEEP_WORKDIR:-1}"
unset SHOAL_PEER

# A cycle takes a few seconds; 60 s each is a generous bound on the whole run.
rc=0
timeout -k 10 $((CYCLES * 60 + 300)) .venv/bin/python -m pytest -p no:cacheprovider -s -q \
    tests/python/test_crash.py || rc=$?
[[ $rc -eq 124 ]] && log "timed out"

.venv/bin/python - "$summary" "$rc" "$CYCLES" <<'PY'
import json, sys
path, rc, cycles = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    s = json.load(open(path))
except (OSError, ValueError):
    s = {}
passed, acked = s.get("cycles_passed", 0), s.get("acked_writes_verified", 0)
ok = rc == 0 and s.get("status") == "passed" and passed == cycles
seed = " (seed %d)" % s["seed"] if "seed" in s else ""
print("crash-test: %s: %d/%d cycles passed, %d acknowledged writes verified%s"
      % ("PASSED" if ok else "FAILED", passed, cycles, acked, seed))
sys.exit(0 if ok else 1)
PY
[[ $? -ne 0 && $rc -eq 0 ]] && rc=1
exit $rc

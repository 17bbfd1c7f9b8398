#!/usr/bin/env bash
# Instructions per disk-bound point read of the SSTable read path alone,
# counted by callgrind (repeatable whatever else the machine does): the
# storage engine benchmark's stage [7] (crates/storage/benches/engine.rs),
# one uncompressed SSTable read with O_DIRECT, index cache off unless
# INDEX_CACHE_MB is set, only `counted_reads` counted.
#
#   bench/callgrind_sstable_reads.sh [ROWS] [READS]
#
# Builds the benchmark (release) into $CARGO_TARGET_DIR (default target;
# BIN=path runs that build of it instead)
# and prints Ir and allocation calls per read (TOP=N: the N costliest
# functions, inclusive and self). Needs valgrind. The scratch
# directory is under SHOAL_BENCH_DIR (default /var/tmp: a real disk, as
# tmpfs refuses O_DIRECT).
set -euo pipefail
rows=${1:-20000}
reads=${2:-2000}
cd "$(dirname "$0")/.."
bin=${BIN:-$(cargo bench -p shoal-storage --bench engine --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "engine" and m.get("executable"):
        print(m["executable"])')}
out=$(mktemp /tmp/callgrind-sstable-XXXXXX)
SHOAL_BENCH_STAGES=7 SHOAL_BENCH_CHUNK_ROWS=$rows SHOAL_BENCH_READS=$reads \
    SHOAL_BENCH_INDEX_CACHE_MB=${INDEX_CACHE_MB:-0} SHOAL_BENCH_DIR=${SHOAL_BENCH_DIR:-/var/tmp} \
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect='*counted_reads*' "$bin" | grep '^\[7\]'
# Ir, and calls of the allocator's entry points (the benchmark uses the
# system allocator), over the counted reads.
read -r total calls _ < <(python3 bench/callgrind_counts.py malloc,calloc,realloc,posix_memalign,aligned_alloc "$out")
echo "Ir per read: $((total / reads)); allocation calls per read: $(python3 -c "print(round($calls / $reads, 1))")"
if [[ -n "${TOP:-}" ]]; then
    callgrind_annotate --threshold=100 --inclusive=yes "$out" 2>/dev/null | awk -v n="$TOP" 'NR <= n + 25'
    callgrind_annotate --threshold=100 "$out" 2>/dev/null | awk -v n="$TOP" 'NR <= n + 25'
fi
[[ -n "${KEEP:-}" ]] || rm -f "$out"

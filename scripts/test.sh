#!/usr/bin/env bash
# Builds Shoal and runs every test: formatting and lints, unit tests, then the
# real-client tests (Python cassandra-driver, scylla-driver, cqlsh, pymemcache,
# meta-memcache) against the release binary on free loopback ports. Installs
# what it needs (Python venvs from PyPI via scripts/venv.sh; Debian's memcached,
# the memcached tests' reference, via tests/run.sh). Exits non-zero on any
# failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

if cargo clippy --version >/dev/null 2>&1; then
    echo "== cargo clippy (warnings are errors)"
    cargo clippy --workspace --all-targets --locked -- -D warnings
else
    echo "== clippy is not installed with this toolchain: lint step skipped"
fi

echo "== cargo check of the fuzz targets (their own workspace, so nothing else builds them)"
cargo check --manifest-path fuzz/Cargo.toml --all-targets --locked

echo "== cargo test (unit and crate tests)"
cargo test --workspace --locked

echo "== cargo build --release"
cargo build --release --locked -p shoal

echo "== driver tests against target/release/shoal"
SHOAL_BIN=target/release/shoal tests/run.sh

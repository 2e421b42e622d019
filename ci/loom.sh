#!/usr/bin/env bash
# loom models of the scheduler's wake protocol. Separate target dir: --cfg loom
# rebuilds every dependency.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/loom"
cargo test -p rnfs-sched --lib --release -- loom_tests "$@"
cargo test -p rnfs-client --lib --release -- loom_ "$@"

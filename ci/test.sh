#!/usr/bin/env bash
# Everything CI checks, runnable locally: `ci/test.sh`. The README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# Tests and scripts that would skip for want of something CI provides (root, a
# free port 111, rpcbind, FUSE) fail instead when this is set (Rust tests say so
# through tests/support/cannot_run.rs).
export RNFS_CI=1

step() { printf '\n==> %s\n' "$*"; }

step "format"
cargo fmt --all -- --check

step "test dependencies (Debian packages: QEMU, libnfs, nfs-ganesha, chromium, ...)"
ci/deps.sh

step "clippy (all targets and features, warnings are errors)"
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings

step "unit, integration, RFC wire and fuzz-corpus replay tests"
cargo test --workspace --locked
# The client's lock-count test needs the instrumentation feature.
cargo test --locked -p rnfs-client --all-features

step "scheduler stress: millions of items, random resizes (release)"
cargo test --release --locked -p rnfs-sched --test stress

step "loom models of the wake protocol"
ci/loom.sh

step "integration: the Linux kernel client (QEMU) and libnfs against rnfs"
tests/integration/run-all.sh --server rnfs --quick
tests/integration/plainmount.sh
# The host's rpcbind and rpcinfo against our rpcbind client and port mapper
# (root, port 111 free: as for plainmount.sh; they start and stop their own rpcbind).
# --workspace: the features the workspace test step built, so nothing recompiles.
cargo test --workspace --locked --test portmap -- --ignored

step "the client library's test suite against nfs-ganesha"
tests/integration/run-all.sh --server ganesha --quick --only client

step "docs build without warnings"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

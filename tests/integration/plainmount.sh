#!/usr/bin/env bash
# plainmount.sh: a plain `mount -t nfs host:/dir /mnt` (no port options) from the
# Linux kernel client finds rnfs through the port mapper, two ways:
#   1. rnfs --portmap: rnfs itself answers portmap/rpcbind on TCP port 111;
#   2. rnfs --register: rnfs registers with the host's rpcbind (started here)
#      and unregisters at shutdown.
# Needs root (port 111) and a free port 111; skips (exit 0, with a message) if
# not root or 111 is taken by something else, except under CI (RNFS_CI=1, set
# by ci/test.sh, or CI=1/true), where that fails (exit 1): CI provides both.
# Usage: plainmount.sh [RNFS_BINARY]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
rnfs=${1:-${CARGO_TARGET_DIR:-$repo/target}/release/rnfs}
runner="$here/linux-client/run"
say() { printf 'plainmount: %s\n' "$*" >&2; }
[ -x "$rnfs" ] || { say "error: no rnfs binary at $rnfs (cargo build --release --bin rnfs)"; exit 2; }
ci=0
case "${RNFS_CI:-}/${CI:-}" in 1/*|*/1|*/true) ci=1 ;; esac
skip() { # REASON: exit 0 with a loud message, or fail under CI
  if [ $ci = 1 ]; then say "FAIL (under CI, not skipping): $*"; exit 1; fi
  say "SKIPPED, nothing tested: $*"; exit 0
}
[ "$(id -u)" = 0 ] || skip "needs root for port 111"
if ss -ltn 'sport = :111' | grep -q LISTEN; then
  skip "port 111 is already in use ($(ss -ltnpH 'sport = :111' | head -n 1))"
fi
work=$(mktemp -d /tmp/rnfs-plainmount.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/export"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fail=0

run_case() { # name, rnfs flags...
  local name=$1; shift
  "$rnfs" serve "$work/export" --listen "127.0.0.1:$port" --squash none \
    --state-dir "$work/state" "$@" >"$work/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 50); do grep -q "serving on" "$work/$name.log" && break; sleep 0.1; done
  if ! grep -q "serving on" "$work/$name.log"; then
    say "FAIL $name: server did not start: $(tail -n 3 "$work/$name.log")"; fail=1; kill $pid; return
  fi
  if "$runner" --server-port "$port" --mount-port "$port" --export "$work/export" \
       "$here/linux-client/workloads/plainmount.sh"; then
    say "PASS $name"
  else
    say "FAIL $name (server log: $(tail -n 3 "$work/$name.log"))"; fail=1
  fi
  kill -TERM $pid; wait $pid
  local rc=$?
  if [ $rc != 0 ]; then
    say "FAIL $name: the server exited $rc after SIGTERM (log: $(tail -n 3 "$work/$name.log"))"; fail=1
  fi
}

run_case portmap --portmap

if command -v rpcbind >/dev/null; then
  rpcbind -f -w >"$work/rpcbind.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
  run_case register --register
  # An rpcinfo that fails (rpcbind gone) lists no NFS either: require a listing
  # that has the port mapper itself before reading NFS's absence from it.
  if ! list=$(rpcinfo -p 127.0.0.1 2>&1) || ! grep -qE '^ *100000 ' <<<"$list"; then
    say "FAIL register: rpcinfo -p after shutdown: $list"; fail=1
  elif grep -qE '^ *100003 ' <<<"$list"; then
    say "FAIL register: NFS still registered after shutdown"; fail=1
  fi
else
  [ $ci = 1 ] && { say "FAIL (under CI): no rpcbind for the --register case"; fail=1; }
  say "skipped the --register case: no rpcbind"
fi
exit $fail

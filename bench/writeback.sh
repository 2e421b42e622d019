#!/usr/bin/env bash
# bench/writeback.sh: seed 003 reproduced through the FUSE mount. An rnfs
# server exports a fresh directory on this machine's disk; `rnfs mount` mounts
# it with write-behind flow control on (wb_max_outstanding=16, the default) and
# off (0: the legacy behaviour, dirty data buffered until close or stat);
# `rnfs bench writeback` then runs WRITERS parallel sequential writers of SIZE
# each beside a stat / ls -l loop. Runs alternate on/off; prints a markdown
# table of medians (min..max).
#
#   bench/writeback.sh [--runs N] [--writers 6] [--size 1G] [--server-args "..."]
#                      [--mount-opts "..."] [--keep-logs DIR]
#
# --keep-logs DIR copies each run's server and mount logs into DIR (the mount
# logs are named mount-RUN-CAP.log).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$repo/tests/integration/lib.sh"

runs=3 writers=6 size=1G server_args="" mount_opts="" keep_logs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --writers) writers=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --server-args) server_args=$2; shift 2 ;;
    --mount-opts) mount_opts=",$2"; shift 2 ;;
    --keep-logs) keep_logs=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "writeback: unknown argument $1" >&2; exit 2 ;;
  esac
done

(cd "$repo" && cargo build --release --quiet --bin rnfs)
rnfs=$(rnfs_release_bin "$repo")

work=$(mktemp -d /var/tmp/rnfs-wb.XXXXXX)
mkdir -p "$work/export" "$work/mnt"
server_pid="" mount_pid=""
unmount() {
  [ -n "$mount_pid" ] || return 0
  kill -TERM "$mount_pid" 2>/dev/null || true
  wait "$mount_pid" 2>/dev/null || true
  mount_pid=""
  mountpoint -q "$work/mnt" && umount -l "$work/mnt"
  return 0
}
cleanup() {
  unmount
  if [ -n "$keep_logs" ] && [ -f "$work/server.log" ]; then
    mkdir -p "$keep_logs" && cp "$work/server.log" "$keep_logs/server.log"
  fi
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

port=$(free_port)
"$rnfs" serve "$work/export" --listen "127.0.0.1:$port" --squash none \
  --state-dir "$work/state" $server_args >"$work/server.log" 2>&1 &
server_pid=$!
wait_port "$port" 30 || { echo "rnfs serve did not start:"; tail "$work/server.log"; exit 1; }

results="$work/results.txt"
: >"$results"
for run in $(seq "$runs"); do
  order="16 0"; [ $((run % 2)) = 0 ] && order="0 16"
  for cap in $order; do
    "$rnfs" mount -o "wb_max_outstanding=$cap$mount_opts" "nfs://127.0.0.1:$port$work/export" \
      "$work/mnt" >"$work/mount-$cap.log" 2>&1 &
    mount_pid=$!
    for _ in $(seq 100); do mountpoint -q "$work/mnt" && break; sleep 0.1; done
    mountpoint -q "$work/mnt" || { echo "rnfs mount failed:"; cat "$work/mount-$cap.log"; exit 1; }
    "$rnfs" bench writeback --dir "$work/mnt" --writers "$writers" --size "$size" \
      --json "$work/r.json" >&2
    unmount
    if [ -n "$keep_logs" ]; then
      mkdir -p "$keep_logs"
      cp "$work/mount-$cap.log" "$keep_logs/mount-$run-$cap.log"
    fi
    python3 - "$work/r.json" "$cap" >>"$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(sys.argv[2], r["write_mb_per_sec"], r["stat"]["p50"] / 1e6, r["stat"]["p99"] / 1e6,
      r["stat"]["max"] / 1e6, r["ls_l"]["p99"] / 1e6, r["ls_l"]["max"] / 1e6)
PY
  done
  echo "run $run/$runs done" >&2
done

python3 - "$results" "$runs" "$writers" "$size" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {}
for cap, *vals in rows:
    by.setdefault(cap, []).append([float(v) for v in vals])
print(f"{sys.argv[3]} writers x {sys.argv[4]}, {sys.argv[2]} runs alternating; medians (min..max).\n")
print("| write-behind | write MB/s | stat p50 ms | stat p99 ms | stat max ms | ls -l p99 ms | ls -l max ms |")
print("|---|---:|---:|---:|---:|---:|---:|")
for cap, label in (("16", "on (16 outstanding)"), ("0", "off (legacy)")):
    v = by.get(cap)
    if not v:
        continue
    cell = lambda i: f"{statistics.median(x[i] for x in v):.1f} ({min(x[i] for x in v):.1f}..{max(x[i] for x in v):.1f})"
    print(f"| {label} | " + " | ".join(cell(i) for i in range(6)) + " |")
PY

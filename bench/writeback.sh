#!/usr/bin/env bash
# bench/writeback.sh: seed 003 reproduced through the FUSE mount. An rnfs
# server exports a fresh directory on this machine's disk; `rnfs mount` mounts
# it with write-behind flow control on (wb_max_outstanding=16, the default) and
# off (0: the legacy behaviour, dirty data buffered until close or stat);
# `rnfs bench writeback` then runs WRITERS parallel sequential writers of SIZE
# each beside a stat / ls -l loop. Runs alternate between the mount
# configurations (on/off unless --configs says otherwise, the order rotating
# each run); prints a markdown table of medians (min..max).
#
#   bench/writeback.sh [--runs N] [--writers 6] [--size 1G] [--server rnfs|ganesha]
#                      [--server-args "..."] [--mount-opts "..."]
#                      [--configs "NAME=OPTS ..."] [--keep-logs DIR]
#
# --server ganesha mounts an nfs-ganesha (VFS backend, the same kind of
# export) instead of `rnfs serve`: the same client against another server, to
# tell the client's share of the stat latency from the server's and the
# machine's. --server-args applies to rnfs only.
# --mount-opts adds options to every configuration. --configs replaces the
# default "on=wb_max_outstanding=16 off=wb_max_outstanding=0" with named
# option sets, e.g. "on=wb_max_outstanding=16 nc4=wb_max_outstanding=16,nconnect=4".
# --keep-logs DIR copies each run's server and mount logs into DIR (the mount
# logs are named mount-RUN-NAME.log).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$repo/tests/integration/lib.sh"

runs=3 writers=6 size=1G server=rnfs server_args="" mount_opts="" keep_logs=""
configs="on=wb_max_outstanding=16 off=wb_max_outstanding=0"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --writers) writers=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --server) server=$2; shift 2 ;;
    --server-args) server_args=$2; shift 2 ;;
    --mount-opts) mount_opts=",$2"; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --keep-logs) keep_logs=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
    *) echo "writeback: unknown argument $1" >&2; exit 2 ;;
  esac
done

(cd "$repo" && cargo build --release --quiet --bin rnfs)
rnfs=$(rnfs_release_bin "$repo")

work=$(mktemp -d /var/tmp/rnfs-wb.XXXXXX)
mkdir -p "$work/export" "$work/mnt"
case "$server" in rnfs|ganesha) ;; *) echo "writeback: --server is rnfs or ganesha" >&2; exit 2 ;; esac
[ "$server" = ganesha ] && "$repo/ci/deps.sh" >/dev/null
server_pid="" mount_pid="" rpcbind_pid=""
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
  [ -n "$rpcbind_pid" ] && kill "$rpcbind_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

port=$(free_port)
if [ "$server" = rnfs ]; then
  "$rnfs" serve "$work/export" --listen "127.0.0.1:$port" --squash none \
    --state-dir "$work/state" $server_args >"$work/server.log" 2>&1 &
  server_pid=$!
  wait_port "$port" 30 || { echo "rnfs serve did not start:"; tail "$work/server.log"; exit 1; }
  url="nfs://127.0.0.1:$port$work/export"
else
  mport=$(free_port)
  start_ganesha "$work" "$work/export" "$port" "$mport" "$work/server.log" || exit 1
  url="nfs://127.0.0.1:$port$work/export?mountport=$mport"
fi

results="$work/results.txt"
: >"$results"
read -r -a config_list <<<"$configs"
for c in "${config_list[@]}"; do
  case "$c" in *=*) ;; *) echo "writeback: --configs entry '$c' is not NAME=OPTS" >&2; exit 2 ;; esac
done
n_configs=${#config_list[@]}
for run in $(seq "$runs"); do
  for k in $(seq 0 $((n_configs - 1))); do
    c=${config_list[$(((k + run - 1) % n_configs))]}
    name=${c%%=*} opts=${c#*=}
    "$rnfs" mount -o "$opts$mount_opts" "$url" \
      "$work/mnt" >"$work/mount-$name.log" 2>&1 &
    mount_pid=$!
    for _ in $(seq 100); do mountpoint -q "$work/mnt" && break; sleep 0.1; done
    mountpoint -q "$work/mnt" || { echo "rnfs mount failed:"; cat "$work/mount-$name.log"; exit 1; }
    "$rnfs" bench writeback --dir "$work/mnt" --writers "$writers" --size "$size" \
      --json "$work/r.json" >&2
    unmount
    if [ -n "$keep_logs" ]; then
      mkdir -p "$keep_logs"
      cp "$work/mount-$name.log" "$keep_logs/mount-$run-$name.log"
    fi
    python3 - "$work/r.json" "$name" >>"$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(sys.argv[2], r["write_mb_per_sec"], r["stat"]["p50"] / 1e6, r["stat"]["p99"] / 1e6,
      r["stat"]["max"] / 1e6, r["ls_l"]["p99"] / 1e6, r["ls_l"]["max"] / 1e6)
PY
  done
  echo "run $run/$runs done" >&2
done

python3 - "$results" "$runs" "$writers" "$size" "$mount_opts" "$server" "${config_list[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {}
for name, *vals in rows:
    by.setdefault(name, []).append([float(v) for v in vals])
print(f"{sys.argv[3]} writers x {sys.argv[4]}, server {sys.argv[6]}, {sys.argv[2]} runs alternating; medians (min..max).\n")
print("| mount options | write MB/s | stat p50 ms | stat p99 ms | stat max ms | ls -l p99 ms | ls -l max ms |")
print("|---|---:|---:|---:|---:|---:|---:|")
for c in sys.argv[7:]:
    name, opts = c.split("=", 1)
    label = f"{name}: `{opts}{sys.argv[5]}`"
    v = by.get(name)
    if not v:
        continue
    cell = lambda i: f"{statistics.median(x[i] for x in v):.1f} ({min(x[i] for x in v):.1f}..{max(x[i] for x in v):.1f})"
    print(f"| {label} | " + " | ".join(cell(i) for i in range(6)) + " |")
PY

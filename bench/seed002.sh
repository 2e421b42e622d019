#!/usr/bin/env bash
# bench/seed002.sh: seed 002 reproduced. 32 KiB READs at random offsets of a
# 256 MiB file, DEPTH at a time over one TCP connection, against `rnfs serve`
# (local backend, release build) on loopback: rnfs's client as DEPTH threads
# making blocking calls, as DEPTH tasks awaiting the async API on a one-worker
# tokio runtime, and libnfs (bench/tools/libnfs-load.c, one thread, DEPTH in
# flight) for reference, runs alternating. Prints medians (min..max) of
# calls/s, the client's CPU per call and, for rnfs, lock acquisitions per call
# (the client is built with the `lock-stats` feature). With --base BIN, the
# rnfs client of another build (e.g. an earlier commit's, built the same way)
# runs in the same alternation against the same server, and a second table
# gives this build's calls/s and CPU per call over that one's.
#
# --dir puts the export under DIR (default /var/tmp; /dev/shm keeps the file
# in memory whatever the page cache's reclaim does, for client-side A/Bs).
#
#   bench/seed002.sh [--runs N] [--depths 8,16,64] [--duration S] [--base BIN]
#                    [--dir DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$repo/tests/integration/lib.sh"

runs=3 depths=8,16,64 duration=3 base="" dir=/var/tmp
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --depths) depths=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "seed002: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -n "$base" ] && [ ! -x "$base" ]; then
  echo "seed002: --base $base is not an executable" >&2
  exit 2
fi

"$repo/ci/deps.sh" >/dev/null
work=$(mktemp -d "$dir/rnfs-seed002.XXXXXX")
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$repo" && cargo build --release --quiet --features lock-stats --bin rnfs)
rnfs=$(rnfs_release_bin "$repo")
gcc -O2 -Wall -o "$work/libnfs-load" "$here/tools/libnfs-load.c" -lnfs

mkdir -p "$work/export"
port=$(free_port)
"$rnfs" serve "$work/export" --listen "127.0.0.1:$port" --squash none >"$work/server.log" 2>&1 &
server_pid=$!
wait_port "$port" 30 || { echo "rnfs serve did not start:"; cat "$work/server.log"; exit 1; }
url="nfs://127.0.0.1:$port$work/export"
file_url="nfs://127.0.0.1$work/export/rnfs-bench-client.dat?nfsport=$port&mountport=$port"
# Creates the 256 MiB test file.
"$rnfs" bench client --url "$url" --op read --size 32K --threads 1 --duration 0.1 --warmup 0 \
  --repeat 1 --file-size 256M >/dev/null

results="$work/results.txt"
: >"$results"
for run in $(seq "$runs"); do
  for d in ${depths//,/ }; do
    order="libnfs threads async"
    [ -n "$base" ] && order="libnfs threads-base threads async-base async"
    [ $((run % 2)) = 0 ] && order=$(tr ' ' '\n' <<<"$order" | tac | tr '\n' ' ')
    for who in $order; do
      if [ "$who" = libnfs ]; then
        line=$("$work/libnfs-load" -o read -s 32768 -d "$d" -t "$duration" -w 1 "$file_url")
        echo "libnfs $d $(sed -E 's/.*calls_per_sec=([0-9.]+).*p99_us=([0-9.]+).*cpu_us_per_call=([0-9.]+).*/\1 \2 \3/' <<<"$line") -1" >>"$results"
      else
        client=$rnfs
        [ "${who%-base}" != "$who" ] && client=$base
        "$client" bench client --url "$url" --op read --size 32K --threads "$d" --mode "${who%-base}" \
          --file-size 256M --duration "$duration" --warmup 1 --repeat 1 --json "$work/r.json" >/dev/null
        python3 - "$work/r.json" "$d" "$who" >>"$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
locks = r.get("locks_per_call")
print(sys.argv[3], sys.argv[2], r["calls_per_sec"], r["latency"]["p99"] / 1e3,
      r["cpu_us_per_call"], -1 if locks is None else locks)
PY
      fi
    done
  done
  echo "run $run/$runs done" >&2
done

python3 - "$results" "$runs" "$duration" <<'PY'
import statistics, sys
data = {}
for who, d, cps, p99, cpu, locks in (l.split() for l in open(sys.argv[1]) if l.strip()):
    data.setdefault((int(d), who), []).append((float(cps), float(p99), float(cpu), float(locks)))
print(f"Runs: {sys.argv[2]} alternating, {sys.argv[3]} s each; medians (min..max).\n")
print("| depth | rnfs threads calls/s | CPU us/call | locks/call | rnfs async calls/s | CPU us/call | locks/call | libnfs calls/s | CPU us/call | threads / libnfs | async / libnfs |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
med = lambda v, i: statistics.median(x[i] for x in v)
span = lambda v: f"{min(x[0] for x in v):.0f}..{max(x[0] for x in v):.0f}"
for d in sorted({k[0] for k in data}):
    t, a, l = (data.get((d, w), []) for w in ("threads", "async", "libnfs"))
    if not t or not a or not l:
        continue
    print(f"| {d} | {med(t,0):.0f} ({span(t)}) | {med(t,2):.1f} | {med(t,3):.2f} | "
          f"{med(a,0):.0f} ({span(a)}) | {med(a,2):.1f} | {med(a,3):.2f} | "
          f"{med(l,0):.0f} ({span(l)}) | {med(l,2):.1f} | {med(t,0)/med(l,0):.2f} | {med(a,0)/med(l,0):.2f} |")
if any(k[1].endswith("-base") for k in data):
    print("\nThis build over --base, same runs: calls/s and CPU per call (medians).\n")
    print("| depth | threads calls/s | base calls/s | ratio | CPU us/call | base | ratio | async calls/s | base calls/s | ratio | CPU us/call | base | ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for d in sorted({k[0] for k in data}):
        cells = []
        for w in ("threads", "async"):
            n, b = data.get((d, w), []), data.get((d, w + "-base"), [])
            if not n or not b:
                break
            cells += [f"{med(n,0):.0f} ({span(n)})", f"{med(b,0):.0f} ({span(b)})",
                      f"{med(n,0)/med(b,0):.2f}", f"{med(n,2):.1f}", f"{med(b,2):.1f}",
                      f"{med(n,2)/med(b,2):.2f}"]
        else:
            print(f"| {d} | " + " | ".join(cells) + " |")
PY

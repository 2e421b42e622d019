#!/usr/bin/env bash
# bench/client-vs-libnfs.sh: the rnfs client library against libnfs, both
# driving the same nfs-ganesha (VFS backend, loopback) with the same calls and
# the same concurrency, runs alternating A/B. Prints a markdown table of
# medians (with min..max over runs) and the ratio rnfs/libnfs.
#
#   bench/client-vs-libnfs.sh [--runs N] [--ops getattr,read,write]
#                             [--depths 1,16] [--size BYTES] [--duration S]
#                             [--clients libnfs,rnfs-threads,rnfs-async]
#                             [--with-reader-thread]
#
# rnfs: `rnfs bench client` twice: DEPTH threads making blocking calls over
# one connection (rnfs-threads), and DEPTH tasks on one tokio thread awaiting
# the async API (rnfs-async, libnfs's shape). libnfs: bench/tools/libnfs-load.c, one thread with DEPTH
# calls in flight through libnfs's async raw API (libnfs 4 has no threads).
# --with-reader-thread adds rnfs-async-thread: the async API with its replies
# handed over by the connection's reader thread (`--mode async-reader-thread`,
# the path before the client read on the runtime), side by side.
# Both report their own CPU time per call. /dev/cpu_dma_latency is held at 0
# during the runs (the VM's idle states add tens of µs per wake-up otherwise).
# --clients picks which run (libnfs always does). Besides the medians, each
# rnfs client's calls/s is divided by libnfs's of the same run and cell
# (paired: the two ran back to back, in an order that alternates), and the
# geometric mean of those ratios is given with a 95% bootstrap interval.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$repo/tests/integration/lib.sh"

runs=5 ops=getattr,read,write depths=1,16 size=4096 duration=3 with_thread=0
clients=libnfs,rnfs-threads,rnfs-async
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --depths) depths=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --with-reader-thread) with_thread=1; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "client-vs-libnfs: unknown argument $1" >&2; exit 2 ;;
  esac
done

"$repo/ci/deps.sh" >/dev/null
work=$(mktemp -d /tmp/rnfs-bench.XXXXXX)
server_pid="" rpcbind_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  [ -n "$rpcbind_pid" ] && kill "$rpcbind_pid" 2>/dev/null
  exec 3>&- 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$repo" && cargo build --release --quiet --bin rnfs)
rnfs=$(rnfs_release_bin "$repo")
gcc -O2 -Wall -o "$work/libnfs-load" "$here/tools/libnfs-load.c" -lnfs

mkdir -p "$work/export"
port=$(free_port); mport=$(free_port)
start_ganesha "$work" "$work/export" "$port" "$mport" "$work/ganesha.out" || exit 1

url="nfs://127.0.0.1:$port$work/export?mountport=$mport"
file_url="nfs://127.0.0.1$work/export/rnfs-bench-client.dat?nfsport=$port&mountport=$mport"
# Creates the 64 MiB test file both clients use.
"$rnfs" bench client --url "$url" --op getattr --threads 1 --duration 0.1 --warmup 0 \
  --repeat 1 --file-size 64M >/dev/null

if [ -w /dev/cpu_dma_latency ]; then
  exec 3>/dev/cpu_dma_latency
  printf '\x00\x00\x00\x00' >&3
fi

results="$work/results.txt"
: >"$results"
for run in $(seq "$runs"); do
  for op in ${ops//,/ }; do
    for d in ${depths//,/ }; do
      order="libnfs $(tr ',' '\n' <<<"$clients" | grep -vx libnfs | tr '\n' ' ')"
      [ "$with_thread" = 1 ] && order="$order rnfs-async-thread"
      [ $((run % 2)) = 0 ] && order=$(tr ' ' '\n' <<<"$order" | tac | tr '\n' ' ')
      for who in $order; do
        if [ "$who" = libnfs ]; then
          line=$("$work/libnfs-load" -o "$op" -s "$size" -d "$d" -t "$duration" -w 1 "$file_url")
          echo "libnfs $op $d $(sed -E 's/.*calls_per_sec=([0-9.]+).*p50_us=([0-9.]+).*p99_us=([0-9.]+).*cpu_us_per_call=([0-9.]+).*/\1 \2 \3 \4/' <<<"$line") $run" >>"$results"
        else
          "$rnfs" bench client --url "$url" --op "$op" --threads "$d" --size "$size" \
            --mode "$(sed 's/^rnfs-//; s/^async-thread$/async-reader-thread/' <<<"$who")" --file-size 64M --duration "$duration" --warmup 1 --repeat 1 \
            --json "$work/r.json" >/dev/null
          python3 - "$work/r.json" "$op" "$d" "$who" "$run" >>"$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
print(sys.argv[4], sys.argv[2], sys.argv[3], r["calls_per_sec"], r["latency"]["p50"] / 1e3,
      r["latency"]["p99"] / 1e3, r["cpu_us_per_call"], sys.argv[5])
PY
        fi
      done
    done
  done
  echo "run $run/$runs done" >&2
done

python3 - "$results" "$runs" "$size" "$duration" <<'PY'
import math, random, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
data, by_run = {}, {}
for who, op, d, cps, p50, p99, cpu, run in rows:
    data.setdefault((op, int(d), who), []).append((float(cps), float(p50), float(p99), float(cpu)))
    by_run[(op, int(d), who, run)] = float(cps)
print(f"Runs: {sys.argv[2]} alternating, {sys.argv[4]} s each, size {sys.argv[3]} B; medians (min..max).\n")
print("| op | depth | libnfs calls/s | rnfs threads calls/s | ratio | rnfs async calls/s | ratio | p99 us libnfs / threads / async | CPU us/call libnfs / threads / async |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
med = lambda v, i: statistics.median(x[i] for x in v)
span = lambda v, i: f"{min(x[i] for x in v):.0f}..{max(x[i] for x in v):.0f}"
cell = lambda v: f"{med(v,0):.0f} ({span(v,0)})" if v else "-"
ratio = lambda v, l: f"{med(v,0)/med(l,0):.2f}" if v else "-"
fig = lambda v, i, f: format(med(v, i), f) if v else "-"
for (op, d) in sorted({(k[0], k[1]) for k in data}):
    l, t, a = (data.get((op, d, w), []) for w in ("libnfs", "rnfs-threads", "rnfs-async"))
    if not l:
        continue
    print(f"| {op} | {d} | {cell(l)} | {cell(t)} | {ratio(t, l)} | {cell(a)} | {ratio(a, l)} | "
          f"{fig(l,2,'.0f')} / {fig(t,2,'.0f')} / {fig(a,2,'.0f')} | {fig(l,3,'.1f')} / {fig(t,3,'.1f')} / {fig(a,3,'.1f')} |")
at = {k[:2]: v for k, v in data.items() if k[2] == "rnfs-async-thread"}
if at:
    print("\nThe async API with replies handed over by the reader thread (rnfs-async-thread), same runs:\n")
    print("| op | depth | async-thread calls/s | ratio to libnfs | async / async-thread | p99 us | CPU us/call |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (op, d), v in sorted(at.items()):
        l, a = data.get((op, d, "libnfs"), []), data.get((op, d, "rnfs-async"), [])
        if not l or not a:
            continue
        print(f"| {op} | {d} | {med(v,0):.0f} ({span(v,0)}) | {med(v,0)/med(l,0):.2f} | "
              f"{med(a,0)/med(v,0):.2f} | {med(v,2):.0f} | {med(v,3):.1f} |")
# Paired: each run's rnfs calls/s over libnfs's in the same cell.
rng = random.Random(1)
def interval(logs):
    means = sorted(statistics.fmean(rng.choices(logs, k=len(logs))) for _ in range(2000))
    return math.exp(means[50]), math.exp(means[1949])
print("\nPaired ratios to libnfs (calls/s of the same run and cell): geometric mean [95% bootstrap interval], runs at or above 1.\n")
print("| op | depth | client | ratio | interval | runs >= 1 |")
print("|---|---:|---|---:|---|---:|")
for (op, d, who) in sorted({k[:3] for k in by_run if k[2] != "libnfs"}):
    logs = [math.log(v / by_run[(op, d, "libnfs", run)]) for (o, dd, w, run), v in by_run.items()
            if (o, dd, w) == (op, d, who) and (op, d, "libnfs", run) in by_run]
    if not logs:
        continue
    lo, hi = interval(logs)
    print(f"| {op} | {d} | {who} | {math.exp(statistics.fmean(logs)):.3f} | {lo:.3f}..{hi:.3f} | "
          f"{sum(x >= 0 for x in logs)}/{len(logs)} |")
PY

#!/usr/bin/env bash
# run-all.sh --server ganesha|rnfs [--quick] [--only a,b,...] [--keep]
#
# Starts the chosen NFSv3 server on free 127.0.0.1 ports with a fresh temp
# export, runs libnfs.sh and every Linux-client workload against it, then the
# crash test (the runner owns the server there: kill -9 + restart), and the
# rnfs client library's test suite (`client`) against the same server; prints a
# summary table and exits 1 if anything failed. See README.md.
#
#   --server ganesha   nfs-ganesha, VFS backend (the reference server)
#   --server rnfs      cargo build --release --bin rnfs; rnfs serve EXPORT --listen 127.0.0.1:PORT
#                      --squash none --state-dir WORK/rnfs-state $RNFS_ARGS
#                      (NFS and MOUNT on the same port; mount path = EXPORT, or $RNFS_MOUNT_PATH)
#   --quick            smaller sizes (CI on 2 cores: whole run well under 10 minutes under TCG)
#   --only LIST        comma-separated subset of: libnfs,client,smoke,integrity,bigdir,untar,reload,restart
#                      (reload: rnfs only, SIGHUP reloads of --config under a live mount)
#   --keep             keep the work dir (export, logs, server log) even when all passed
# Env: RUNNER_ARGS (extra runner options, e.g. "--accel kvm"), RNFS_ARGS (extra
#      `rnfs serve` options, e.g. "--backend memory"), LINUX_CLIENT_CACHE,
#      CARGO_TARGET_DIR (rnfs build), BIGDIR_N, INTEGRITY_OPS, INTEGRITY_SEED.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
runner="$here/linux-client/run"
wl="$here/linux-client/workloads"
. "$here/lib.sh"

server="" quick=0 only="" keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --server) server=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --only) only=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "run-all: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$server" in ganesha|rnfs) ;; *) echo "run-all: --server ganesha|rnfs is required" >&2; exit 2 ;; esac

say() { printf '\n==> %s\n' "$*"; }
die() { echo "run-all: error: $*" >&2; exit 2; }
want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

"$repo/ci/deps.sh" || die "dependencies missing (ci/deps.sh failed)"

work=$(mktemp -d /tmp/rnfs-it.XXXXXX)
export_dir="$work/export"
logs="$work/logs"
mkdir -p "$export_dir" "$logs" "$work/guest"
server_pid="" rpcbind_pid=""

cleanup() {
  stop_server
  if [ -n "$rpcbind_pid" ]; then kill "$rpcbind_pid" 2>/dev/null; wait "$rpcbind_pid" 2>/dev/null; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- helpers: nfsit (static, for the guest), nfs-stat (libnfs), source tree
say "building helpers in $work"
gcc -O2 -static -Wall -Wextra -o "$work/guest/nfsit" "$here/tools/nfsit.c" || die "cannot build nfsit (gcc, libc6-dev)"
gcc -O2 -Wall -o "$work/nfs-stat" "$here/tools/nfs-stat.c" -lnfs || die "cannot build nfs-stat (libnfs-dev)"
if want untar; then
  # A real source tree, made offline: this repository at HEAD, plus (not with
  # --quick) the libc crate's sources from the cargo registry when present.
  stage="$work/src-tree"
  mkdir -p "$stage"
  git -C "$repo" archive --format=tar --prefix=rnfs/ HEAD | tar -x -C "$stage" || die "git archive of $repo failed"
  if [ $quick = 0 ]; then
    crate=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/libc-0.2.* 2>/dev/null | tail -n 1)
    [ -n "$crate" ] && cp -a "$crate" "$stage/"
  fi
  tar -cf "$work/guest/src.tar" -C "$stage" .
  (cd "$stage" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) > "$work/guest/src.sha256"
  (cd "$stage" && find . -type f -printf '%m %p\n' | LC_ALL=C sort) > "$work/guest/src.modes"
  rm -rf "$stage"
fi

# ---- the server
port=$(free_port); mport=$port
case "$server" in
  ganesha)
    mport=$(free_port)
    while [ "$mport" = "$port" ]; do mport=$(free_port); done
    mount_path="$export_dir"
    ganesha_config "$work" "$export_dir" "$port" "$mport"
    ensure_rpcbind "$logs/rpcbind.log" || die "rpcbind did not start"
    server_cmd=$(ganesha_cmd "$work")
    ;;
  rnfs)
    say "cargo build --release --bin rnfs"
    (cd "$repo" && cargo build --release --bin rnfs) || die "cargo build --release --bin rnfs failed"
    mount_path=${RNFS_MOUNT_PATH:-$export_dir}
    # No root squashing (the guest runs as root, like ganesha's No_Root_Squash);
    # the handle key lives in the work dir so handles survive the restart test.
    server_cmd="exec $(rnfs_release_bin "$repo") serve $export_dir --listen 127.0.0.1:$port --squash none --state-dir $work/rnfs-state ${RNFS_ARGS:-}"
    ;;
esac

start_server() {
  bash -c "$server_cmd" >>"$logs/server.log" 2>&1 &
  server_pid=$!
  "$runner" --probe --server-port "$port" --mount-port "$mport" --server-ready-timeout 60 \
    || { echo "run-all: the server did not answer NULL calls; its log:"; tail -n 20 "$logs/server.log"; return 1; }
}
stop_server() {
  [ -n "$server_pid" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=""
}

# ---- sizes
if [ $quick = 1 ]; then
  smoke_n=100 int_ops=${INTEGRITY_OPS:-2400} big_n=${BIGDIR_N:-10000} restart_cycles=2 big_mib=20
else
  smoke_n=300 int_ops=${INTEGRITY_OPS:-5000} big_n=${BIGDIR_N:-100000} restart_cycles=3 big_mib=20
fi

# ---- run
names=() results=() secs=()
record() { names+=("$1"); results+=("$2"); secs+=("$3"); }
run_step() {  # NAME CMD...: runs CMD, logs to $logs/NAME.log, records the result
  local name=$1; shift
  say "$name: $*"
  local t0=$SECONDS rc
  "$@" 2>&1 | tee "$logs/$name.log"
  rc=${PIPESTATUS[0]}
  local r=PASS
  [ "$rc" -eq 0 ] || r="FAIL ($rc)"
  record "$name" "$r" $((SECONDS - t0))
}
guest() {  # guest NAME TIMEOUT WORKLOAD [ARGS]: a Linux-client workload against the running server
  local name=$1 timeout=$2; shift 2
  run_step "$name" "$runner" --server-port "$port" --mount-port "$mport" --export "$mount_path" \
    --timeout "$timeout" --watch-pid "$server_pid" --console-log "$logs/$name.console" \
    --copy-file "$work/guest:/opt/rnfs-it" --copy-binary "$(command -v ls):/opt/gnu/ls" \
    ${RUNNER_ARGS:-} "$@"
}

say "server: $server on 127.0.0.1 NFS port $port, MOUNT port $mport, export $export_dir (mount path $mount_path)"
if want libnfs || want client || want smoke || want integrity || want bigdir || want untar; then
  if start_server; then
    want libnfs && run_step libnfs "$here/libnfs.sh" --server-port "$port" --mount-port "$mport" \
      --export "$mount_path" --export-dir "$export_dir" --nfs-stat "$work/nfs-stat" --big-mib "$big_mib" \
      $([ "$server" = rnfs ] && echo --host-changes)
    # The client library's own suite (crates/client/tests), pointed at this server.
    want client && run_step client env \
      RNFS_TEST_SERVER_URL="nfs://127.0.0.1:$port$mount_path?mountport=$mport" \
      bash -c "cd '$repo' && cargo test -p rnfs-client --test session --test file --test fsx"
    want smoke && guest smoke 600 "$wl/smoke.sh" "$smoke_n"
    want integrity && guest integrity 900 "$wl/integrity.sh" "$int_ops"
    want bigdir && guest bigdir 3000 "$wl/bigdir.sh" "$big_n"
    want untar && guest untar 900 "$wl/untar.sh"
  else
    for w in libnfs client smoke integrity bigdir untar; do want $w && record $w "FAIL (server)" 0; done
  fi
  stop_server
fi
if want reload && [ "$server" = rnfs ]; then
  # rnfs with a config file; the guest asks the host (lc-ctl run NAME) to swap
  # the file and SIGHUP the server, and checks its mount survives each reload.
  second="$work/export2" conf="$work/rnfs.toml"
  mkdir -p "$second"
  export_table() { printf '\n[[export]]\npath = "%s"\naccess = "rw"\nsquash = "none"\n' "$1"; }
  { printf '[server]\nstate_dir = "%s"\n' "$work/rnfs-state"; export_table "$export_dir"; } >"$work/conf.one"
  { cat "$work/conf.one"; export_table "$second"; } >"$work/conf.two"
  { cat "$work/conf.one"; echo '[[export]] path = '; } >"$work/conf.bad"
  cp "$work/conf.one" "$conf"
  plain_cmd=$server_cmd
  server_cmd="exec $(rnfs_release_bin "$repo") serve --config $conf --listen 127.0.0.1:$port"
  # hup VARIANT: install conf.VARIANT, SIGHUP, wait for the server to log the reload.
  cat >"$work/hup.sh" <<HUP
#!/usr/bin/env bash
before=\$(grep -c SIGHUP "$logs/server.log")
cp "$work/conf.\$1" "$conf" && kill -HUP \$(cat "$work/server.pid") || exit 1
for _ in \$(seq 100); do
  [ "\$(grep -c SIGHUP "$logs/server.log")" -gt "\$before" ] && exit 0
  sleep 0.1
done
echo "the server logged no reload within 10 s" >&2; exit 1
HUP
  chmod +x "$work/hup.sh"
  if start_server; then
    echo "$server_pid" >"$work/server.pid"
    guest reload 600 --env "RELOAD_SECOND=$second" \
      --host-cmd "add=$work/hup.sh two" --host-cmd "bad=$work/hup.sh bad; rc=\$?; cp $work/conf.one $conf; exit \$rc" \
      --host-cmd "remove=$work/hup.sh one" "$wl/reload.sh"
    if [ "${results[-1]}" = PASS ] && [ "$(cat "$second/from-guest" 2>/dev/null)" != hello ]; then
      echo "run-all: reload: the guest's write to the added export is not in $second"
      results[-1]="FAIL (host check)"
    fi
  else
    record reload "FAIL (server)" 0
  fi
  stop_server
  server_cmd=$plain_cmd
fi
if want restart; then
  # The runner starts the server itself so that it can kill -9 and restart it.
  run_step restart "$runner" --server-port "$port" --mount-port "$mport" --export "$mount_path" \
    --timeout 900 --server-cmd "$server_cmd" --server-log "$logs/server-restart.log" \
    --console-log "$logs/restart.console" --copy-file "$work/guest:/opt/rnfs-it" \
    ${RUNNER_ARGS:-} "$wl/restart.sh" "$restart_cycles"
fi

# ---- summary
failed=0
echo
printf '%-12s %-10s %8s\n' workload result seconds
printf '%-12s %-10s %8s\n' -------- ------ -------
for i in "${!names[@]}"; do
  printf '%-12s %-10s %8s\n' "${names[$i]}" "${results[$i]}" "${secs[$i]}"
  [ "${results[$i]}" = PASS ] || failed=$((failed + 1))
done
echo "server $server, $([ $quick = 1 ] && echo quick || echo full) sizes, total ${SECONDS}s"
if [ $failed -gt 0 ] || [ $keep = 1 ]; then
  echo "logs, export and server logs kept in $work"
else
  rm -rf "$work"
fi
[ $failed -eq 0 ]

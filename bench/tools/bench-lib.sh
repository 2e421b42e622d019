# shellcheck shell=bash
# Shared by bench/compare and bench/sweeps (source it after
# tests/integration/lib.sh; it sets nothing until a function is called).
# The scripts set $repo (the repository root) and $bench_name (for say).

# say TEXT: a time-stamped progress line on stderr, prefixed by $bench_name.
say() { printf '[%s %s] %s\n' "${bench_name:-bench}" "$(date +%H:%M:%S)" "$*" >&2; }

# install_missing PKG=PROBE...: apt-get installs each package whose probe file
# is missing, when running as root on Debian; otherwise only says what is
# missing. RNFS_BENCH_NO_INSTALL=1 never installs (a machine with no network,
# where apt-get would only wait).
install_missing() {
  local missing=() pair
  for pair in "$@"; do [ -e "${pair#*=}" ] || missing+=("${pair%%=*}"); done
  [ ${#missing[@]} = 0 ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || [ "${RNFS_BENCH_NO_INSTALL:-0}" = 1 ]; then
    say "missing ${missing[*]}; install them as root (apt-get install ${missing[*]})"
    return 0
  fi
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/rnfs-bench-apt.log 2>&1 || {
    apt-get update >>/tmp/rnfs-bench-apt.log 2>&1
    apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/rnfs-bench-apt.log 2>&1 ||
      say "apt-get install ${missing[*]} failed (see /tmp/rnfs-bench-apt.log)"
  }
}

# build_rnfs REPO BUILD: builds rnfs in release when BUILD is 1 (honouring
# CARGO_TARGET_DIR) and sets $rnfs to the binary ($RNFS_BIN when set); fails
# without `bench load`.
build_rnfs() {
  rnfs=${RNFS_BIN:-$(rnfs_release_bin "$1")}
  if [ "$2" = 1 ]; then
    say "building rnfs (cargo build --release -p rnfs)"
    (cd "$1" && cargo build --release --quiet -p rnfs) || return 1
  fi
  [ -x "$rnfs" ] || { say "$rnfs is missing (build it or drop --no-build)"; return 1; }
  "$rnfs" bench load --help >/dev/null 2>&1 || { say "$rnfs has no 'bench load'"; return 1; }
}

# stop_pid PID: SIGTERM, then SIGKILL after 10 s; reaps it.
stop_pid() {
  [ -z "${1:-}" ] && return 0
  kill "$1" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# rss_kib PID: the process's resident set (VmRSS) in KiB, or empty.
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }

# write_meta FILE TOOL COMMAND EXTRA_JSON: meta.json with the machine, the
# rnfs revision, nfs-ganesha's version, the command line and EXTRA_JSON's keys.
write_meta() {
  local ganesha rev
  : "${repo:?write_meta needs \$repo}"
  ganesha=$(dpkg-query -W -f '${Version}' nfs-ganesha 2>/dev/null || echo "not installed")
  rev=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
  [ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ] && rev="$rev+dirty"
  /usr/bin/python3 - "$1" "$2" "$3" "$4" "$ganesha" "$rev" <<'PY'
import json, os, platform, sys, time
path, tool, command, extra, ganesha, rev = sys.argv[1:7]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
# Cached dentries: every name lookup walks a dcache hash chain, and millions
# of cached names (left by large-directory fixtures) lengthen them: READDIRPLUS
# cost 1.1-1.3x the server CPU per entry with 2.7M cached than after a drop.
try:
    dentries = int(open("/proc/sys/fs/dentry-state").read().split()[0])
except (OSError, ValueError, IndexError):
    dentries = None
meta = {"tool": tool, "date": time.strftime("%Y-%m-%d"), "command": command,
        "machine": {"nproc": os.cpu_count(), "kernel": platform.release(), "cpu": cpu,
                    "ganesha": ganesha, "rnfs_rev": rev, "dentries": dentries}}
meta.update(json.loads(extra or "{}"))
json.dump(meta, open(path, "w"), indent=1)
PY
}

# hold_dma_latency: opens /dev/cpu_dma_latency on fd 3 with 0 (idle states
# off) when writable; call in a subshell around one run only.
hold_dma_latency() {
  if [ -w /dev/cpu_dma_latency ]; then exec 3>/dev/cpu_dma_latency; printf '\x00\x00\x00\x00' >&3; fi
}

#!/usr/bin/env bash
# Installs what the integration tests (tests/integration/) need on a fresh
# Debian/Ubuntu machine, then fills the Linux-client kernel cache.
# Idempotent: when everything is present it returns in about a second.
#   ci/deps.sh            install packages + build the guest kernel cache
#   ci/deps.sh --check    only report what is missing (exit 1 if anything is)
# Environment: LINUX_CLIENT_CACHE (cache dir, default ~/.cache/rnfs-linux-client).
set -euo pipefail
cd "$(dirname "$0")/.."

check_only=0
[ "${1:-}" = "--check" ] && check_only=1

say() { printf 'deps: %s\n' "$*" >&2; }
die() { printf 'deps: error: %s\n' "$*" >&2; exit 1; }

# package -> a file it installs that we depend on
declare -A probe=(
  [qemu-system-x86]=/usr/bin/qemu-system-x86_64
  [kmod]=/usr/bin/kmod
  [libnfs-utils]=/usr/bin/nfs-cp
  [libnfs-dev]=/usr/include/nfsc/libnfs.h
  [nfs-ganesha]=/usr/bin/ganesha.nfsd
  [nfs-ganesha-vfs]=/usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so
  [nfs-ganesha-mem]=/usr/lib/x86_64-linux-gnu/ganesha/libfsalmem.so
  [rpcbind]=/usr/sbin/rpcbind
  [gcc]=/usr/bin/gcc
  [libc6-dev]=/usr/lib/x86_64-linux-gnu/libc.a
  [python3]=/usr/bin/python3
  [git]=/usr/bin/git
  [fuse3]=/usr/bin/fusermount3
  [fio]=/usr/bin/fio
  [chromium]=/usr/bin/chromium
)

missing=()
for pkg in "${!probe[@]}"; do
  [ -e "${probe[$pkg]}" ] || missing+=("$pkg")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ $check_only = 1 ]; then
    die "missing packages: ${missing[*]} (run ci/deps.sh as root)"
  fi
  command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get (not Debian/Ubuntu?)"
  [ "$(id -u)" = 0 ] || die "missing packages ${missing[*]}; run as root: apt-get install ${missing[*]}"
  say "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/deps-apt.log 2>&1; then
    say "apt-get install failed; running apt-get update and retrying"
    apt-get update >>/tmp/deps-apt.log 2>&1 || die "apt-get update failed (see /tmp/deps-apt.log)"
    apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/deps-apt.log 2>&1 \
      || die "apt-get install ${missing[*]} failed: $(tail -n 5 /tmp/deps-apt.log)"
  fi
  for pkg in "${missing[@]}"; do
    [ -e "${probe[$pkg]}" ] || die "package $pkg installed but ${probe[$pkg]} is still missing"
  done
fi

# The guest kernel and busybox .debs, unpacked into the runner's cache
# (not installed on the host). Fast no-op when the cache is filled.
if [ $check_only = 1 ]; then
  tests/integration/linux-client/run --prepare --check-only || die "linux-client cache is empty (run ci/deps.sh)"
else
  tests/integration/linux-client/run --prepare || die "building the linux-client kernel cache failed"
fi
say "all integration-test dependencies present"

#!/usr/bin/env bash
# libnfs.sh: test an NFSv3 server with libnfs (a userspace client nobody on
# the team wrote): nfs-ls, nfs-cp round trips (host -> server -> host, by
# sha256, up to a 20 MiB file), server-side copy, and our libnfs nfs-stat
# (stat, statvfs, unlink; libnfs-utils 4.0 ships no stat tool).
#
#   libnfs.sh --server-port P [--mount-port M] --export PATH
#             [--export-dir HOSTDIR [--host-changes]] [--nfs-stat BIN] [--big-mib N]
#
# --export-dir: the host directory behind the export; when given, files the
# server wrote are also compared there. --host-changes (with --export-dir):
# also change files on the host, outside NFS, and check that the very next
# nfs-ls (READDIRPLUS) shows each change; rnfs promises that (its listing
# caches follow inotify), nfs-ganesha's metadata cache does not (it expires).
# --nfs-stat: prebuilt nfs-stat (else it is compiled from tools/nfs-stat.c
# into a temp dir). Prints one line per check, ends with "N passed, N
# failed", exits 1 if any check failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
port="" mport="" export_path="" export_dir="" nfs_stat="" big_mib=20 host_changes=0
while [ $# -gt 0 ]; do
  case "$1" in
    --server-port) port=$2; shift 2 ;;
    --mount-port) mport=$2; shift 2 ;;
    --export) export_path=$2; shift 2 ;;
    --export-dir) export_dir=$2; shift 2 ;;
    --host-changes) host_changes=1; shift ;;
    --nfs-stat) nfs_stat=$2; shift 2 ;;
    --big-mib) big_mib=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "libnfs.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$port" ] && [ -n "$export_path" ] || { echo "libnfs.sh: --server-port and --export are required" >&2; exit 2; }
mport=${mport:-$port}
for t in nfs-ls nfs-cp; do
  command -v $t >/dev/null || { echo "libnfs.sh: $t missing (apt-get install libnfs-utils, or ci/deps.sh)" >&2; exit 2; }
done

work=$(mktemp -d /tmp/rnfs-libnfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [ -z "$nfs_stat" ]; then
  nfs_stat=$work/nfs-stat
  gcc -O2 -Wall -o "$nfs_stat" "$here/tools/nfs-stat.c" -lnfs \
    || { echo "libnfs.sh: cannot build nfs-stat (libnfs-dev missing?)" >&2; exit 2; }
fi

args="nfsport=$port&mountport=$mport&version=3"
base="nfs://127.0.0.1${export_path%/}"
url() { echo "$base/$1?$args"; }          # a file in the export root
root_url="$base?$args"
tag="libnfs-$$"
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1${2:+: $2}"; }
eq() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1" "got '$2', want '$3'"; fi; }
sha() { sha256sum < "$1" | cut -d' ' -f1; }
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }

echo "libnfs: libnfs $(dpkg-query -W -f '${Version}' libnfs13 2>/dev/null || echo '?'), server $root_url"
if out=$(nfs-ls "$root_url" 2>&1); then ok "nfs-ls of the export root"; else bad "nfs-ls of the export root" "$out"; fi

# Local files: empty, text, odd size, 1 MiB, big.
printf '' > "$work/empty"
printf 'hello libnfs\n' > "$work/text"
head -c 1234567 /dev/urandom > "$work/odd"
head -c 1048576 /dev/urandom > "$work/onemib"
head -c $((big_mib * 1048576)) /dev/urandom > "$work/big"
names="empty text odd onemib big"

for n in $names; do
  size=$(stat -c %s "$work/$n")
  t0=$(date +%s.%N)
  if out=$(nfs-cp "$work/$n" "$(url "$tag-$n")" 2>&1); then ok "nfs-cp host -> server: $n ($size bytes)"; else bad "nfs-cp host -> server: $n" "$out"; continue; fi
  t1=$(date +%s.%N)
  st=$("$nfs_stat" "$(url "$tag-$n")" 2>&1)
  eq "nfs-stat size of $n" "$(echo "$st" | field size)" "$size"
  eq "nfs-stat type of $n" "$(echo "$st" | field type)" "regular"
  rm -f "$work/$n.back"
  if out=$(nfs-cp "$(url "$tag-$n")" "$work/$n.back" 2>&1); then ok "nfs-cp server -> host: $n"; else bad "nfs-cp server -> host: $n" "$out"; continue; fi
  t2=$(date +%s.%N)
  eq "round trip sha256 of $n" "$(sha "$work/$n.back")" "$(sha "$work/$n")"
  if [ -n "$export_dir" ]; then
    eq "server wrote $n byte-exact to its export dir" "$(sha "$export_dir/$tag-$n")" "$(sha "$work/$n")"
  fi
  if [ "$n" = big ]; then
    echo "libnfs: $big_mib MiB: write $(echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}')s, read $(echo "$t1 $t2" | awk '{printf "%.2f", $2 - $1}')s"
  fi
done

# Server-side copy (libnfs reads and writes through the server).
if out=$(nfs-cp "$(url "$tag-odd")" "$(url "$tag-odd2")" 2>&1); then ok "nfs-cp server -> server"; else bad "nfs-cp server -> server" "$out"; fi
nfs-cp "$(url "$tag-odd2")" "$work/odd2.back" >/dev/null 2>&1
eq "server -> server copy sha256" "$(sha "$work/odd2.back" 2>/dev/null)" "$(sha "$work/odd")"

# nfs-ls shows every file with its size ("MODE NLINK UID GID SIZE NAME").
listing=$(nfs-ls "$root_url" 2>&1)
for n in $names; do
  eq "nfs-ls lists $n with its size" "$(echo "$listing" | awk -v f="$tag-$n" '$NF == f { print $5 }')" "$(stat -c %s "$work/$n")"
done
eq "nfs-ls -s summary" "$(nfs-ls -s "$root_url" 2>&1 | grep -c 'bytes free')" "1"

# Changes made on the host show in the very next listing, after listings the
# server may answer from its caches.
if [ "$host_changes" = 1 ] && [ -n "$export_dir" ]; then
  f="$tag-host"
  # Field N of the line for name F; a failing nfs-ls prints its error instead,
  # so that no check (an absence least of all) passes on an nfs-ls that failed.
  ls_field() {
    local out
    out=$(nfs-ls "$root_url" 2>&1) || { echo "(nfs-ls failed: $out)"; return; }
    awk -v f="$1" -v n="$2" '$NF == f { print $n }' <<<"$out"
  }
  printf 'x' > "$export_dir/$f"
  eq "a file made on the host is listed" "$(ls_field "$f" 5)" "1"
  eq "and listed again" "$(ls_field "$f" 5)" "1"
  head -c 4321 /dev/zero >> "$export_dir/$f"
  eq "a host append shows in the next nfs-ls" "$(ls_field "$f" 5)" "4322"
  chmod 600 "$export_dir/$f"
  eq "a host chmod shows in the next nfs-ls" "$(ls_field "$f" 1)" "-rw-------"
  mv "$export_dir/$f" "$export_dir/$f-moved"
  eq "a host rename shows in the next nfs-ls" "$(ls_field "$f" 5)/$(ls_field "$f-moved" 5)" "/4322"
  rm "$export_dir/$f-moved"
  eq "a host removal shows in the next nfs-ls" "$(ls_field "$f-moved" 5)" ""
fi

# statvfs (FSSTAT) and errors.
sv=$("$nfs_stat" -f "$(url "$tag-text")" 2>&1)
blocks=$(echo "$sv" | field blocks) bfree=$(echo "$sv" | field bfree)
if [ "${blocks:-0}" -gt 0 ] && [ "$bfree" -le "$blocks" ]; then ok "nfs-stat -f (FSSTAT): $sv"; else bad "nfs-stat -f (FSSTAT)" "$sv"; fi
# Failing is not enough (a dead server fails too): the error must be NOENT.
missing() { # NAME CMD...: CMD must fail with NFS3ERR_NOENT
  local name=$1 out; shift
  if out=$("$@" 2>&1); then bad "$name" "it succeeded: $out"
  elif [[ "$out" == *NFS3ERR_NOENT* ]]; then ok "$name"
  else bad "$name" "not NFS3ERR_NOENT: $out"; fi
}
missing "stat of a missing file fails with NOENT" "$nfs_stat" "$(url "$tag-missing")"
missing "nfs-cp of a missing file fails with NOENT" nfs-cp "$(url "$tag-missing")" "$work/missing"

# Cleanup through libnfs (REMOVE), then the names must be gone.
for n in $names odd2; do
  "$nfs_stat" -u "$(url "$tag-$n")" >/dev/null 2>&1 || bad "unlink $tag-$n"
done
if out=$(nfs-ls "$root_url" 2>&1); then
  eq "all test files removed" "$(grep -c "$tag" <<<"$out")" "0"
else
  bad "all test files removed" "nfs-ls failed: $out"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

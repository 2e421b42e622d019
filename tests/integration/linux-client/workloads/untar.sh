#!/bin/sh
# untar.sh TARBALL MANIFEST [MODES]: extract a real source tree (made on the
# host) into the mount, drop caches, then check every file's sha256 against
# MANIFEST (sha256sum format, paths relative to the tree root), the file
# count, and (if given) every file's mode against MODES ("MODE PATH" lines).
# Defaults: /opt/rnfs-it/src.tar, /opt/rnfs-it/src.sha256, /opt/rnfs-it/src.modes.
TAR=${1:-/opt/rnfs-it/src.tar}
SUMS=${2:-/opt/rnfs-it/src.sha256}
MODES=${3:-/opt/rnfs-it/src.modes}
for f in "$TAR" "$SUMS"; do [ -f "$f" ] || { echo "untar: FAIL: $f missing in the guest"; exit 1; }; done
now() { cut -d' ' -f1 /proc/uptime; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
fails=0
D="$(pwd)/untar.$$"
mkdir "$D" && cd "$D" || { echo "untar: FAIL: mkdir $D"; exit 1; }
want=$(wc -l < "$SUMS")
echo "untar: $(wc -c < "$TAR") bytes of tar, $want files"

t=$(now)
tar -xf "$TAR" || { echo "untar: FAIL: tar -x exited $?"; fails=1; }
sync
echo "untar: extract + sync: $(took "$t")s"
echo 3 > /proc/sys/vm/drop_caches

t=$(now)
got=$(find . -type f | wc -l)
[ "$got" -eq "$want" ] || { echo "untar: FAIL: $got files extracted, manifest has $want"; fails=1; }
bad=$(sha256sum -c "$SUMS" 2>&1 | grep -v ': OK$')
if [ -n "$bad" ]; then
  echo "untar: FAIL: checksum mismatches:"; echo "$bad" | head -n 20; fails=1
fi
echo "untar: sha256 of $want files: $(took "$t")s"
if [ -f "$MODES" ]; then
  find . -type f -exec stat -c '%a %n' {} + | sort > /tmp/untar.modes.$$
  if ! cmp -s /tmp/untar.modes.$$ "$MODES"; then
    echo "untar: FAIL: file modes differ:"; diff "$MODES" /tmp/untar.modes.$$ | head -n 20; fails=1
  fi
fi

cd .. && t=$(now)
rm -rf "$D" || { echo "untar: FAIL: rm -rf"; fails=1; }
echo "untar: rm -rf: $(took "$t")s"
[ $fails -eq 0 ] && echo "untar: PASS ($want files byte-identical)"
exit $fails

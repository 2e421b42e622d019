#!/bin/sh
# reload.sh: configuration reloads under a live kernel mount (rnfs only).
# run-all.sh starts `rnfs serve --config FILE` and gives the runner three host
# commands: `add` (a second export, $RELOAD_SECOND, appended to FILE, then
# SIGHUP), `bad` (FILE made invalid, SIGHUP: the server must keep its exports,
# then FILE restored) and `remove` (the second export dropped again, SIGHUP).
# Across all three the mounted export must never be dropped: a file opened
# before keeps writing, data written before reads back, the directory lists,
# new files are created; the second export mounts after `add` and no longer
# after `remove`.
set -u
fail() { echo "reload: FAIL: $*"; exit 1; }
[ -n "${RELOAD_SECOND:-}" ] || fail "RELOAD_SECOND is not set (run it from run-all.sh)"
D="$(pwd)/reload.$$"
M2=/mnt-second
mkdir "$D" "$M2" || fail "mkdir $D $M2"
exec 3>"$D/log" || fail "open $D/log"
echo start >&3
dd if=/dev/urandom of="$D/data" bs=65536 count=16 2>/dev/null || fail "write $D/data"
sum=$(md5sum <"$D/data")

still_mounted() {  # STEP: the open fd, the old data, listing and a new file still work
  echo "$1" >&3 || fail "$1: write through the fd opened before the reload"
  [ "$(md5sum <"$D/data")" = "$sum" ] || fail "$1: $D/data changed"
  touch "$D/new-$1" || fail "$1: create in the mounted export"
  ls "$D" >/dev/null || fail "$1: ls of the mounted export"
}

lc-ctl run add || fail "host command add"
still_mounted add
out=$(mount -i -t nfs -o "$LC_MOUNT_OPTS" "$LC_SERVER:$RELOAD_SECOND" "$M2" 2>&1) \
  || fail "the export added by the reload does not mount: $out"
echo hello >"$M2/from-guest" || fail "write to the added export"
umount "$M2" || fail "umount $M2"

lc-ctl run bad || fail "host command bad"
still_mounted bad

lc-ctl run remove || fail "host command remove"
still_mounted remove
if mount -i -t nfs -o "$LC_MOUNT_OPTS" "$LC_SERVER:$RELOAD_SECOND" "$M2" 2>/dev/null; then
  umount "$M2"
  fail "the export removed by the reload still mounts"
fi

exec 3>&-
[ "$(cat "$D/log" | tr '\n' ' ')" = "start add bad remove " ] \
  || fail "the file written across the reloads reads back as: $(cat "$D/log" | tr '\n' ' ')"
[ "$(ls "$D" | wc -l)" -eq 5 ] || fail "expected 5 entries in $D, found: $(ls "$D" | tr '\n' ' ')"
rm -rf "$D" || fail "rm -rf $D"
echo "reload: PASS"

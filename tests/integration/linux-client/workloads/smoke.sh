#!/bin/sh
# smoke.sh: every NFSv3 procedure the Linux client issues, with the results
# checked (not just exit codes). Runs in the guest (busybox sh) in the mount.
# Needs NFSIT (the nfsit helper, copied in by the runner; default
# /opt/rnfs-it/nfsit) for O_EXCL create, raw rename(2) and running as uid 1000.
# Prints one line per check and ends with "N passed, N failed".
# Usage: smoke.sh [NUM_DIR_ENTRIES (default 300)]

NENT=${1:-300}
MNT=$(pwd)
T="$MNT/smoke.$$"
L=/tmp/smoke.$$
NFSIT=${NFSIT:-/opt/rnfs-it/nfsit}
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1${2:+: $2}"; }
# yes NAME CMD...: CMD must succeed
yes_() { n=$1; shift; if o=$("$@" 2>&1); then ok "$n"; else bad "$n" "$(echo "$o" | tail -n 2 | tr '\n' ' ')"; fi; }
# no NAME CMD...: CMD must fail
no_() { n=$1; shift; if o=$("$@" 2>&1); then bad "$n" "succeeded but must fail"; else ok "$n"; fi; }
# eq NAME GOT WANT
eq() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1" "got '$2', want '$3'"; fi; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
sum() { md5sum < "$1" | cut -d' ' -f1; }
as_user() { "$NFSIT" asuser 1000 1000 "$@"; }

[ -x "$NFSIT" ] || { echo "smoke: FAIL: helper $NFSIT missing (runner --copy-file nfsit:$NFSIT)"; exit 1; }
mkdir -p "$L"
echo "smoke: server $LC_SERVER:$LC_EXPORT, opts $LC_MOUNT_OPTS"

# --- MKDIR, LOOKUP, GETATTR, RMDIR
yes_ "mkdir (MKDIR)" mkdir "$T"
yes_ "mkdir -p nested" mkdir -p "$T/a/b/c"
eq "stat of a directory (LOOKUP, GETATTR)" "$(stat -c '%F %a' "$T/a/b" 2>&1)" "directory 755"
no_ "mkdir of an existing name fails" mkdir "$T/a"
no_ "rmdir of a non-empty dir fails" rmdir "$T/a/b"
no_ "lookup of a missing name fails" stat "$T/no-such-file"
eq "new dir has link count 2" "$(stat -c %h "$T/a/b/c")" "2"
eq "parent link count counts subdirs" "$(stat -c %h "$T/a/b")" "3"

# --- CREATE (unchecked and exclusive), WRITE, READ, COMMIT
yes_ "create empty file (CREATE)" touch "$T/empty"
eq "empty file size" "$(stat -c %s "$T/empty")" "0"
echo "hello nfs" > "$T/small"
eq "small write + read back" "$(cat "$T/small")" "hello nfs"
if (set -C; echo first > "$T/noclobber") 2>/dev/null; then ok "O_EXCL create via noclobber"; else bad "O_EXCL create via noclobber"; fi
if (set -C; echo second > "$T/noclobber") 2>/dev/null; then bad "noclobber on an existing file must fail"; else ok "O_EXCL create of an existing name fails"; fi
eq "exclusive-created file keeps its content" "$(cat "$T/noclobber")" "first"
"$NFSIT" excl "$T/excl"; eq "nfsit excl creates (CREATE EXCLUSIVE)" "$?" "0"
"$NFSIT" excl "$T/excl"; eq "nfsit excl again gets EEXIST" "$?" "3"
eq "exclusive create sets mode and content" "$(stat -c '%a %s' "$T/excl")" "640 10"

dd if=/dev/urandom of="$L/data" bs=65536 count=48 2>/dev/null   # 3 MiB, several WRITEs
yes_ "write 3 MiB (WRITE)" cp "$L/data" "$T/data"
yes_ "fsync it (COMMIT)" sync "$T/data"
eq "size after write" "$(stat -c %s "$T/data")" "3145728"
drop
eq "read back after drop_caches (READ)" "$(sum "$T/data")" "$(sum "$L/data")"
printf 'PATCHED!' > "$L/patch"
dd if="$L/patch" of="$T/data" bs=1 seek=1234567 conv=notrunc 2>/dev/null
dd if="$L/patch" of="$L/data" bs=1 seek=1234567 conv=notrunc 2>/dev/null
sync
drop
eq "overwrite in the middle" "$(sum "$T/data")" "$(sum "$L/data")"
echo "one" > "$T/log"; echo "two" >> "$T/log"
drop
eq "append" "$(cat "$T/log" | tr '\n' ,)" "one,two,"
dd if="$L/patch" of="$T/sparse" bs=1 seek=5368709120 2>/dev/null   # past 4 GiB
eq "64-bit offsets: size" "$(stat -c %s "$T/sparse")" "5368709128"
drop
eq "64-bit offsets: data" "$(dd if="$T/sparse" bs=1 skip=5368709120 count=8 2>/dev/null)" "PATCHED!"
eq "64-bit offsets: hole reads as zeros" "$(dd if="$T/sparse" bs=4096 skip=1000 count=1 2>/dev/null | tr -d '\000' | wc -c)" "0"

# --- SETATTR: mode, owner, size, times
yes_ "chmod 640 (SETATTR mode)" chmod 640 "$T/small"
eq "mode after chmod" "$(stat -c %a "$T/small")" "640"
yes_ "chmod 4755 (setuid bit)" chmod 4755 "$T/small"
eq "setuid mode" "$(stat -c %a "$T/small")" "4755"
chmod 644 "$T/small"
yes_ "chown 1234:5678 (SETATTR uid/gid)" chown 1234:5678 "$T/small"
drop
eq "owner after chown" "$(stat -c %u:%g "$T/small")" "1234:5678"
yes_ "truncate shrink (SETATTR size)" truncate -s 1000 "$T/data"
eq "size after shrink" "$(stat -c %s "$T/data")" "1000"
drop
eq "content after shrink" "$(sum "$T/data")" "$(head -c 1000 "$L/data" | md5sum | cut -d' ' -f1)"
yes_ "truncate extend" truncate -s 8000 "$T/data"
drop
eq "extension reads as zeros" "$(tail -c 7000 "$T/data" | tr -d '\000' | wc -c)" "0"
yes_ "truncate to zero" truncate -s 0 "$T/log"
eq "size after truncate to zero" "$(stat -c %s "$T/log")" "0"
yes_ "touch -d (SETATTR mtime)" touch -d @1577934245 "$T/small"
drop
eq "mtime after touch -d" "$(stat -c %Y "$T/small")" "1577934245"
yes_ "touch -a -d (SETATTR atime)" touch -a -d @1500000000 "$T/small"
eq "atime after touch -a -d" "$(stat -c %X "$T/small")" "1500000000"
m1=$(stat -c %Y "$T/empty"); sleep 1; echo x >> "$T/empty"; drop
m2=$(stat -c %Y "$T/empty")
if [ "$m2" -gt "$m1" ]; then ok "a write moves mtime forward"; else bad "a write moves mtime forward" "$m1 -> $m2"; fi

# --- ACCESS, as an unprivileged user (uid 1000)
echo secret > "$T/secret"; chmod 600 "$T/secret"
no_ "uid 1000 cannot read a 0600 root file (ACCESS)" as_user cat "$T/secret"
chmod 644 "$T/secret"
eq "uid 1000 reads a 0644 file" "$(as_user cat "$T/secret" 2>&1)" "secret"
no_ "uid 1000 cannot write a 0644 root file" as_user sh -c "echo x >> '$T/secret'"
mkdir "$T/private"; chmod 700 "$T/private"
no_ "uid 1000 cannot list a 0700 root dir" as_user ls "$T/private"
mkdir "$T/public"; chmod 1777 "$T/public"
yes_ "uid 1000 creates in a 1777 dir" as_user sh -c "echo mine > '$T/public/userfile'"
eq "file created by uid 1000 is owned by it" "$(stat -c %u:%g "$T/public/userfile")" "1000:1000"
# A file created read-only is written through the descriptor that made it
# (tar, cp -p, git): the server's owner override. (Here the server still holds
# the descriptor its CREATE opened; the local backend's tests cover a fresh
# open.)
yes_ "uid 1000 writes a file it creates 0444" as_user sh -c "umask 222; echo made-ro > '$T/public/ro-made'"
drop
eq "the 0444 file holds what was written" "$(cat "$T/public/ro-made" 2>&1) $(stat -c %a "$T/public/ro-made")" "made-ro 444"

# --- SYMLINK, READLINK
yes_ "symlink (SYMLINK)" ln -s small "$T/sym"
eq "readlink (READLINK)" "$(readlink "$T/sym")" "small"
eq "lstat type" "$(stat -c %F "$T/sym")" "symbolic link"
eq "read through symlink" "$(cat "$T/sym")" "hello nfs"
long=$(printf '%0900d' 0 | tr 0 x)
yes_ "symlink with a 900-byte target" ln -s "$long" "$T/longsym"
drop
eq "readlink of the long target" "$(readlink "$T/longsym")" "$long"
yes_ "dangling symlink" ln -s does/not/exist "$T/dangling"
eq "readlink dangling" "$(readlink "$T/dangling")" "does/not/exist"

# --- MKNOD: fifo, char and block devices
yes_ "mkfifo (MKNOD fifo)" mkfifo "$T/fifo"
eq "fifo type" "$(stat -c %F "$T/fifo")" "fifo"
yes_ "mknod c 1 3 (MKNOD chr)" mknod "$T/chr" c 1 3
eq "char device type and numbers" "$(stat -c '%F %t %T' "$T/chr")" "character special file 1 3"
yes_ "mknod b 7 129 (MKNOD blk)" mknod "$T/blk" b 7 129
drop
eq "block device type and numbers" "$(stat -c '%F %t %T' "$T/blk")" "block special file 7 81"
eq "reading the char device node reads /dev/null" "$(cat "$T/chr" 2>&1 | wc -c)" "0"

# --- LINK
yes_ "hard link (LINK)" ln "$T/small" "$T/hard"
eq "link count 2" "$(stat -c %h "$T/small")" "2"
eq "same inode" "$(stat -c %i "$T/hard")" "$(stat -c %i "$T/small")"
echo more >> "$T/hard"
drop
eq "write through the link is visible" "$(tail -n 1 "$T/small")" "more"
yes_ "unlink one name (REMOVE)" rm "$T/hard"
eq "link count back to 1" "$(stat -c %h "$T/small")" "1"

# --- RENAME
yes_ "rename in a dir (RENAME)" mv "$T/small" "$T/small2"
if [ ! -e "$T/small" ] && [ "$(head -n 1 "$T/small2")" = "hello nfs" ]; then ok "rename result"; else bad "rename result"; fi
yes_ "rename across dirs" mv "$T/small2" "$T/a/b/c/moved"
eq "moved file content" "$(head -n 1 "$T/a/b/c/moved")" "hello nfs"
echo victim > "$T/victim"
ino=$(stat -c %i "$T/a/b/c/moved")
yes_ "rename over an existing file" mv -f "$T/a/b/c/moved" "$T/victim"
drop
eq "target replaced by the source" "$(head -n 1 "$T/victim"):$(stat -c %i "$T/victim")" "hello nfs:$ino"
mkdir "$T/emptydir"
yes_ "rename a dir over an empty dir" "$NFSIT" rename "$T/a/b" "$T/emptydir"
eq "renamed dir keeps its content" "$(ls "$T/emptydir")" "c"
mkdir "$T/emptydir2"
eq "rename a file over a dir fails with EISDIR" "$("$NFSIT" rename "$T/victim" "$T/emptydir2")" "EISDIR"
eq "rename a dir over a non-empty dir fails" "$("$NFSIT" rename "$T/emptydir2" "$T/emptydir")" "ENOTEMPTY"
yes_ "rename onto itself is a no-op" "$NFSIT" rename "$T/victim" "$T/victim"
eq "file still there after rename onto itself" "$(head -n 1 "$T/victim")" "hello nfs"

# --- REMOVE, RMDIR
yes_ "rm (REMOVE)" rm "$T/empty"
no_ "removed file is gone" stat "$T/empty"
yes_ "rmdir (RMDIR)" rmdir "$T/emptydir/c"
no_ "removed dir is gone" stat "$T/emptydir/c"
no_ "remove of a missing name fails" rm "$T/empty"

# --- names: non-UTF-8, long, odd characters
bad8=$(printf 'caf\351-\377\376')
yes_ "create a non-UTF-8 name" touch "$T/$bad8"
drop
# (busybox ls prints '?' for such bytes; find prints names raw)
eq "non-UTF-8 name listed byte-exact" "$(find "$T" -maxdepth 1 -name 'caf*' | sed 's|.*/||' | od -An -tx1 | tr -d ' \n')" "636166e92dfffe0a"
yes_ "stat by the non-UTF-8 name" stat "$T/$bad8"
yes_ "rename to another non-UTF-8 name" mv "$T/$bad8" "$T/$(printf '\200\201')"
n255=$(printf '%0255d' 7)
yes_ "255-byte name" touch "$T/$n255"
no_ "256-byte name fails" touch "$T/${n255}8"
odd='sp ace;$(x)*?[]'"'"'"\tab'
yes_ "name with shell metacharacters" touch "$T/$odd"
eq "odd name round trip" "$(ls "$T" | grep -c -F "$odd")" "1"

# --- READDIRPLUS (ls -l) and READDIR (second mount with nordirplus)
mkdir "$T/many"
i=1; while [ $i -le "$NENT" ]; do : > "$T/many/entry-$i"; i=$((i + 1)); done
drop
eq "ls -l lists $NENT files (READDIRPLUS)" "$(ls -l "$T/many" | grep -c '^-')" "$NENT"
eq "all names listed" "$(ls "$T/many" | sort | md5sum)" "$(i=1; while [ $i -le "$NENT" ]; do echo "entry-$i"; i=$((i + 1)); done | sort | md5sum)"
eq "seekdir to every telldir position (READDIR cookies)" "$("$NFSIT" seekdir "$T/many" 2>&1)" "nfsit seekdir: $((NENT + 2)) positions ok"
M2=/tmp/smoke-m2.$$
mkdir -p "$M2"
if o=$(mount -i -t nfs -o "$LC_MOUNT_OPTS,nordirplus" "$LC_SERVER:$LC_EXPORT" "$M2" 2>&1); then
  eq "plain ls via a nordirplus mount lists $NENT (READDIR)" "$(ls "$M2/smoke.$$/many" | wc -l)" "$NENT"
  eq "ls -a counts . and .." "$(ls -a "$M2/smoke.$$/many" | wc -l)" "$((NENT + 2))"
else
  bad "second mount with nordirplus" "$o"
fi

# --- MNT of a directory below the export (as mountd serves it)
M3=/tmp/smoke-m3.$$
mkdir -p "$M3"
mkdir -p "$T/sub/dir/deeper"
echo below > "$T/sub/dir/deeper/below.txt"
if o=$(mount -i -t nfs -o "$LC_MOUNT_OPTS" "$LC_SERVER:$LC_EXPORT/smoke.$$/sub/dir" "$M3" 2>&1); then
  eq "a subdirectory mount shows that directory" "$(cat "$M3/deeper/below.txt" 2>&1)" "below"
  umount "$M3"
else
  bad "mount of a subdirectory of the export" "$o"
fi
no_ "mount of a file below the export fails" mount -i -t nfs -o "$LC_MOUNT_OPTS" "$LC_SERVER:$LC_EXPORT/smoke.$$/sub/dir/deeper/below.txt" "$M3"
rmdir "$M3" 2>/dev/null

# --- FSSTAT (df), FSINFO/PATHCONF (at mount; statfs namelen comes from PATHCONF)
# shellcheck disable=SC2046 # split into $1..$4 on purpose
set -- $(stat -f -c '%b %f %a %l' "$MNT")
if [ "${1:-0}" -gt 0 ] && [ "$2" -le "$1" ] && [ "$3" -le "$2" ]; then ok "statfs blocks/free/avail sane (FSSTAT): $*"; else bad "statfs (FSSTAT)" "$*"; fi
eq "name_max from PATHCONF" "$4" "255"
df -k "$MNT" | tail -n 1 | grep -q /mnt && ok "df" || bad "df"

# --- rm -r of everything
yes_ "rm -r the test tree" rm -r "$T"
no_ "tree gone" stat "$T"

# --- which procedures the client sent (per-op counters of each mount)
# opcounts MOUNTPOINT: "PROC COUNT" lines from /proc/self/mountstats
opcounts() {
  awk -v mp="$1" '$1 == "device" { cur = ($5 == mp) } cur && $1 ~ /^[A-Z]+:$/ && NF >= 9 { sub(":", "", $1); print $1, $2 }' /proc/self/mountstats
}
opcounts "$MNT" > "$L/ops1"
[ -d "$M2" ] && opcounts "$M2" > "$L/ops2"
for p in GETATTR SETATTR LOOKUP ACCESS READLINK READ WRITE CREATE MKDIR SYMLINK MKNOD REMOVE RMDIR \
         RENAME LINK READDIR READDIRPLUS FSSTAT FSINFO PATHCONF COMMIT; do
  n=$(awk -v p="$p" '$1 == p { s += $2 } END { print s + 0 }' "$L/ops1" "$L/ops2" 2>/dev/null)
  if [ "$n" -gt 0 ]; then ok "procedure $p sent ($n)"; else bad "procedure $p was never sent"; fi
done
echo "smoke: per-op counts (main mount): $(tr '\n' ' ' < "$L/ops1")"
umount "$M2" 2>/dev/null
rm -rf "$L"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

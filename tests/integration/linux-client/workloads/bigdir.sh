#!/bin/sh
# bigdir.sh [N]: create N (default 100000) files in one directory, then
# `ls -l | wc -l` (READDIRPLUS + GETATTRs) and `ls -f | wc -l` (unsorted
# READDIR stream) must count exactly N entries (+1 'total' line, +2 for . and ..),
# after dropping the caches. Prints the time of each step, then removes them.
# Env: NFSIT (default /opt/rnfs-it/nfsit), GNU_LS (default /opt/gnu/ls: busybox
# ls has no -f; falls back to busybox ls -a if missing).
N=${1:-100000}
NFSIT=${NFSIT:-/opt/rnfs-it/nfsit}
GNU_LS=${GNU_LS:-/opt/gnu/ls}
[ -x "$NFSIT" ] || { echo "bigdir: FAIL: helper $NFSIT missing"; exit 1; }
now() { cut -d' ' -f1 /proc/uptime; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
fails=0
D="$(pwd)/bigdir.$$"
mkdir "$D" || { echo "bigdir: FAIL: mkdir $D"; exit 1; }

t=$(now)
"$NFSIT" mkfiles "$D" "$N" f >/dev/null || { echo "bigdir: FAIL: creating $N files"; exit 1; }
echo "bigdir: create $N files: $(took "$t")s"

drop; t=$(now)
if [ -x "$GNU_LS" ]; then LSL="$GNU_LS -l"; LSF="$GNU_LS -f"; want_f=$((N + 2)); else
  echo "bigdir: note: $GNU_LS missing, using busybox ls -a instead of ls -f"
  LSL="ls -l"; LSF="ls -a"; want_f=$((N + 2)); fi
got=$($LSL "$D" | wc -l)
echo "bigdir: ls -l | wc -l: $got (want $((N + 1))): $(took "$t")s"
[ "$got" -eq $((N + 1)) ] || { echo "bigdir: FAIL: ls -l counted $got lines, want $((N + 1))"; fails=1; }

drop; t=$(now)
got=$($LSF "$D" | wc -l)
echo "bigdir: ls -f | wc -l: $got (want $want_f): $(took "$t")s"
[ "$got" -eq "$want_f" ] || { echo "bigdir: FAIL: ls -f counted $got lines, want $want_f"; fails=1; }

# Every name exactly once (no duplicates or losses across READDIR cookies).
drop; t=$(now)
dups=$($LSF "$D" | sort | uniq -d | wc -l)
missing=$($LSF "$D" | grep -c '^f[0-9]*$')
echo "bigdir: names check: $missing f* names, $dups duplicates: $(took "$t")s"
[ "$dups" -eq 0 ] && [ "$missing" -eq "$N" ] || { echo "bigdir: FAIL: $missing of $N names, $dups duplicated"; fails=1; }

t=$(now)
rm -rf "$D" || { echo "bigdir: FAIL: rm -rf"; fails=1; }
echo "bigdir: rm -rf $N files: $(took "$t")s"
[ ! -e "$D" ] || { echo "bigdir: FAIL: $D still exists after rm -rf"; fails=1; }
[ $fails -eq 0 ] && echo "bigdir: PASS ($N entries)"
exit $fails

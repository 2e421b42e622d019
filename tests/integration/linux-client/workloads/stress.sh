#!/bin/sh
# stress.sh [MODE...]: the stress helper's torture modes (tools/stress.c), one
# after another, each in its own place under a fresh directory of the mount.
# Default: dirstorm append mmap sparse truncread stripes (about 150 s under
# TCG). `strict` runs only when named: it can fail spuriously when the client
# reconnects (tests/integration/README.md, "Soak"). Ends with the mount's
# transport counters (connects: 2 in an undisturbed run under Debian's 6.1
# kernel, more when the client reconnected) and every procedure that needed
# retransmissions, from /proc/self/mountstats.
# Env: STRESS (helper path, default /opt/rnfs-it/stress), STRESS_SEED (mmap's
# seed, default 1), STRESS_SECS (dirstorm and truncread, default 40),
# STRESS_NAMES (dirstorm file names per directory, default 48), STRESS_N
# (append records and stripes rounds per process, default 3000; strict runs
# N/10 iterations, mmap N/100).
STRESS=${STRESS:-/opt/rnfs-it/stress}
[ -x "$STRESS" ] || { echo "stress: FAIL: helper $STRESS missing (runner --copy-file stress:$STRESS)"; exit 1; }
modes=${*:-dirstorm append mmap sparse truncread stripes}
for m in $modes; do
  case $m in
    dirstorm|append|mmap|sparse|truncread|stripes|strict) ;;
    *) echo "stress: unknown mode $m (dirstorm append mmap sparse truncread stripes strict)"; exit 2 ;;
  esac
done
secs=${STRESS_SECS:-40}
n=${STRESS_N:-3000}
strict_n=$((n / 10)); [ "$strict_n" -ge 1 ] || strict_n=1
mmap_n=$((n / 100)); [ "$mmap_n" -ge 1 ] || mmap_n=1
D="$(pwd)/stress.$$"
mkdir "$D" || { echo "stress: FAIL: mkdir $D"; exit 1; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }

rc=0 failed=""
for m in $modes; do
  echo "stress: == $m"
  t0=$(uptime_s)
  case $m in
    dirstorm) "$STRESS" dirstorm "$D/dirstorm" 6 "$secs" "${STRESS_NAMES:-48}" ;;
    append) "$STRESS" append "$D/append" 6 "$n" ;;
    mmap) "$STRESS" mmap "$D/mmap" 3000000 "$mmap_n" "${STRESS_SEED:-1}" ;;
    sparse) "$STRESS" sparse "$D/sparse" ;;
    truncread) "$STRESS" truncread "$D/truncread" "$secs" 3 ;;
    stripes) "$STRESS" stripes "$D/stripes" 5 "$n" ;;
    strict) "$STRESS" strict "$D/strict" 4 "$strict_n" ;;
  esac
  r=$?
  dt=$(awk -v a="$t0" -v b="$(uptime_s)" 'BEGIN { printf "%.1f", b - a }')
  if [ $r -eq 0 ]; then
    echo "stress: $m passed (${dt}s)"
  else
    echo "stress: FAIL: mode $m exited $r (${dt}s)"
    rc=1 failed="$failed $m"
  fi
done

awk '$1 == "xprt:" && $2 == "tcp" {
       print "stress: transport: source port " $3 ", connects " $5 ", sends " $8 ", receives " $9 }
     $1 ~ /^[A-Z_]+:$/ && NF >= 9 && $2 > 0 && $3 != $2 {
       print "stress: retransmissions: " $1 " ops " $2 ", transmissions " $3 ", timeouts " $4 }' \
  /proc/self/mountstats
if [ $rc -eq 0 ]; then
  rm -rf "$D" || { echo "stress: FAIL: rm -rf $D"; exit 1; }
  echo "stress: PASS ($modes)"
else
  echo "stress: FAIL:$failed; files left in $D"
fi
exit $rc

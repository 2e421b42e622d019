#!/bin/sh
# restart.sh [CYCLES [BYTES]]: crash test. Needs the runner's --server-cmd.
# nfsit writes and fsyncs data, asks the harness (lc-ctl protocol on ttyS3) to
# kill -9 the server and start it again on the same port and export, then,
# through the SAME open fds and directory handle, reads back what was committed,
# commits data written before the kill, writes more, lists and renames. Odd
# cycles keep appending + fsyncing while the server is being killed. After all
# cycles every file is verified through fresh opens. Defaults: 2 cycles, 2 MiB.
NFSIT=${NFSIT:-/opt/rnfs-it/nfsit}
[ -x "$NFSIT" ] || { echo "restart: FAIL: helper $NFSIT missing"; exit 1; }
[ "$LC_SERVER_CONTROL" = 1 ] || { echo "restart: FAIL: run the runner with --server-cmd (it must own the server to restart it)"; exit 1; }
D="$(pwd)/restart-ws.$$"
mkdir "$D" || { echo "restart: FAIL: mkdir $D"; exit 1; }
"$NFSIT" restart -d "$D" -c "${1:-2}" -s "${2:-2097152}"
rc=$?
if [ $rc -eq 0 ]; then
  # And the plain tools agree after the restarts.
  n=$(ls "$D"/restart.*/ | wc -l)
  [ "$n" -ge 3 ] || { echo "restart: FAIL: ls after the restarts lists $n entries"; rc=1; }
  rm -rf "$D" || { echo "restart: FAIL: rm -rf after the restarts"; rc=1; }
fi
[ $rc -eq 0 ] && echo "restart: PASS"
exit $rc

#!/bin/sh
# integrity.sh [OPS [MAXSIZE [FILES]]]: random writes, truncates and reads on
# FILES files of up to MAXSIZE bytes, checked against an in-memory model by the
# nfsit helper; every phase ends with fsync, close, drop_caches and a full
# verify of every file from the server. One file uses O_DIRECT.
# Defaults: 2400 ops, 4 MiB, 4 files (about 30 s of work under TCG).
# Env: NFSIT (helper path, default /opt/rnfs-it/nfsit), INTEGRITY_SEED,
# INTEGRITY_PHASES (default 4).
NFSIT=${NFSIT:-/opt/rnfs-it/nfsit}
[ -x "$NFSIT" ] || { echo "integrity: FAIL: helper $NFSIT missing (runner --copy-file nfsit:$NFSIT)"; exit 1; }
D="$(pwd)/integrity.$$"
mkdir "$D" || { echo "integrity: FAIL: mkdir $D"; exit 1; }
"$NFSIT" integrity -d "$D" -n "${1:-2400}" -s "${2:-4194304}" -f "${3:-4}" \
  -p "${INTEGRITY_PHASES:-4}" ${INTEGRITY_SEED:+-S "$INTEGRITY_SEED"}
rc=$?
if [ $rc -eq 0 ]; then
  rmdir "$D" || { echo "integrity: FAIL: $D not empty after the run: $(ls "$D")"; exit 1; }
else
  echo "integrity: FAIL (exit $rc); files left in $D"
fi
exit $rc

#!/bin/sh
# plainmount.sh: a second mount of the same export with NO port options, so the
# guest kernel asks the port mapper on the server (10.0.2.2:111, the host's
# loopback) for the MOUNT and NFS ports, as a plain `mount -t nfs host:/dir /mnt`
# does. The server must be registered with the host's rpcbind (rnfs --register)
# or serve the port mapper itself (rnfs --portmap).
M2=/tmp/plainmount.$$
mkdir -p "$M2"
opts="vers=3,proto=tcp,mountproto=tcp,nolock,addr=$LC_SERVER,mountaddr=$LC_SERVER"
if ! o=$(mount -i -t nfs -o "$opts" "$LC_SERVER:$LC_EXPORT" "$M2" 2>&1); then
  echo "plainmount: FAIL: mount without ports: $o"
  exit 1
fi
echo "written through the first mount" > plainmount.txt
got=$(cat "$M2/plainmount.txt" 2>&1)
umount "$M2"
rm -f plainmount.txt
if [ "$got" = "written through the first mount" ]; then
  echo "plainmount: PASS (ports found through the port mapper)"
else
  echo "plainmount: FAIL: read back '$got'"
  exit 1
fi

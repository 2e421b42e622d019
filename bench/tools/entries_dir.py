#!/usr/bin/env python3
"""entries_dir.py EXPORT WIDTH K: the load generator's directory of K entries
(`rnfs bench load --dir-entries K --name-width WIDTH`) made on the local disk,
much faster than the load generator's CREATEs over NFS; prints its path.

The layout is the load generator's (crates/bench/src/load/ops.rs,
`entries_dir_name` and `Name::entry`): `rnfs-bench-load/dir-K/f0..f<K-1>`
for width 0, else `rnfs-bench-load/dir-K-wWIDTH/` with `f` and WIDTH
zero-padded digits. Names already there are kept; a count on standard error.
Used by bench/sweeps and bench/dir-ab."""
import os
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    export, width, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if width and k > 10**width:
        sys.exit(f"entries_dir.py: a name width of {width} is too narrow for {k} entries")
    name = f"dir-{k}-w{width}" if width else f"dir-{k}"
    d = os.path.join(export, "rnfs-bench-load", name)
    os.makedirs(d, exist_ok=True)
    have = set(os.listdir(d))
    made = 0
    for i in range(k):
        entry = f"f{i:0{width}}" if width else f"f{i}"
        if entry not in have:
            os.close(os.open(os.path.join(d, entry), os.O_CREAT | os.O_WRONLY, 0o644))
            made += 1
    print(f"{d}: {k} entries ({made} created)", file=sys.stderr)
    print(d)


if __name__ == "__main__":
    main()

//! POSIX permission checks from mode bits, owner and groups.

use super::inode::Meta;
use crate::Cred;

/// Read permission bit (in any class).
pub(super) const R: u32 = 4;
/// Write permission bit.
pub(super) const W: u32 = 2;
/// Execute / search permission bit.
pub(super) const X: u32 = 1;

/// Set-user-id.
pub(super) const S_ISUID: u32 = 0o4000;
/// Set-group-id.
pub(super) const S_ISGID: u32 = 0o2000;
/// Sticky (restricted deletion for directories).
pub(super) const S_ISVTX: u32 = 0o1000;

/// Whether `cred` is the superuser.
pub(super) fn is_root(cred: &Cred) -> bool {
    cred.uid == 0
}

/// Whether `cred` has every bit of `want` (`R`/`W`/`X`) on an object. Exactly
/// one class applies: owner, else group (primary or supplementary), else
/// others. Root has read and write always, and execute when the object is a
/// directory or has at least one x bit.
pub(super) fn permits(cred: &Cred, meta: &Meta, is_dir: bool, want: u32) -> bool {
    if is_root(cred) {
        return want & X == 0 || is_dir || meta.mode & 0o111 != 0;
    }
    cred.mode_bits(meta.uid, meta.gid, meta.mode) & want == want
}

/// Whether `cred` may read or write a file's data: `permits`, or ownership.
/// Like knfsd's owner override: a client that created a file with mode 0444
/// must still be able to write the data it opened the file for.
pub(super) fn may_access_data(cred: &Cred, meta: &Meta, want: u32) -> bool {
    cred.uid == meta.uid || permits(cred, meta, false, want)
}

/// The sticky-directory rule: in a directory with `S_ISVTX`, only root, the
/// entry's owner or the directory's owner may remove or replace an entry.
pub(super) fn may_delete(cred: &Cred, dir: &Meta, victim: &Meta) -> bool {
    dir.mode & S_ISVTX == 0 || is_root(cred) || cred.uid == victim.uid || cred.uid == dir.uid
}

/// Mode bits a write or truncation by `cred` strips from a regular file:
/// setuid, and setgid when group-executable (as Linux does for non-root).
pub(super) fn strip_on_write(cred: &Cred, mode: u32) -> u32 {
    if is_root(cred) {
        return mode;
    }
    strip_suid(mode)
}

/// `mode` without setuid, and without setgid if the group may execute.
pub(super) fn strip_suid(mode: u32) -> u32 {
    let mut mode = mode & !S_ISUID;
    if mode & 0o010 != 0 {
        mode &= !S_ISGID;
    }
    mode
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Time;

    fn meta(mode: u32, uid: u32, gid: u32) -> Meta {
        Meta {
            mode,
            nlink: 1,
            uid,
            gid,
            atime: Time::default(),
            mtime: Time::default(),
            ctime: Time::default(),
        }
    }

    #[test]
    fn classes_and_root() {
        let user = Cred {
            uid: 1000,
            gid: 1000,
            groups: vec![7],
        };
        assert!(permits(&user, &meta(0o400, 1000, 0), false, R));
        assert!(!permits(&user, &meta(0o044, 1000, 1000), false, R));
        assert!(!permits(&user, &meta(0o604, 0, 7), false, R));
        assert!(permits(&user, &meta(0o060, 0, 7), false, R | W));
        assert!(permits(&user, &meta(0o001, 0, 0), true, X));
        let root = Cred::root();
        assert!(permits(&root, &meta(0o000, 5, 5), false, R | W));
        assert!(!permits(&root, &meta(0o666, 5, 5), false, X));
        assert!(permits(&root, &meta(0o001, 5, 5), false, X));
        assert!(permits(&root, &meta(0o000, 5, 5), true, X));
        assert!(may_access_data(&user, &meta(0o000, 1000, 0), W));
        assert_eq!(strip_suid(0o6755), 0o0755);
        assert_eq!(strip_suid(0o6745), 0o2745);
    }
}

//! Which error a reply carries, read from the reply bytes: the RPC-level status
//! (accept or reject status) or, for a successful NFS or MOUNT reply, the first
//! result word (`nfsstat3`, `mountstat3`). Reading the reply keeps the services
//! untouched: no procedure has to report its status.
//!
//! Errors are counted per slot in a small array: [`RPC_ERRORS`] first, then the
//! program's status names, then one entry for a status value outside the RFC's.

use super::procs::StatusWord;

/// RPC-level errors, in code order.
const RPC_ERRORS: [&str; 7] = [
    "PROG_UNAVAIL",
    "PROG_MISMATCH",
    "PROC_UNAVAIL",
    "GARBAGE_ARGS",
    "SYSTEM_ERR",
    "RPC_MISMATCH",
    "AUTH_ERROR",
];
const RPC_MISMATCH: usize = 5;
const AUTH_ERROR: usize = 6;

/// `nfsstat3` error values and names (RFC 1813 §2.6), sorted by value.
const NFS_ERRORS: [(u32, &str); 28] = [
    (1, "NFS3ERR_PERM"),
    (2, "NFS3ERR_NOENT"),
    (5, "NFS3ERR_IO"),
    (6, "NFS3ERR_NXIO"),
    (13, "NFS3ERR_ACCES"),
    (17, "NFS3ERR_EXIST"),
    (18, "NFS3ERR_XDEV"),
    (19, "NFS3ERR_NODEV"),
    (20, "NFS3ERR_NOTDIR"),
    (21, "NFS3ERR_ISDIR"),
    (22, "NFS3ERR_INVAL"),
    (27, "NFS3ERR_FBIG"),
    (28, "NFS3ERR_NOSPC"),
    (30, "NFS3ERR_ROFS"),
    (31, "NFS3ERR_MLINK"),
    (63, "NFS3ERR_NAMETOOLONG"),
    (66, "NFS3ERR_NOTEMPTY"),
    (69, "NFS3ERR_DQUOT"),
    (70, "NFS3ERR_STALE"),
    (71, "NFS3ERR_REMOTE"),
    (10001, "NFS3ERR_BADHANDLE"),
    (10002, "NFS3ERR_NOT_SYNC"),
    (10003, "NFS3ERR_BAD_COOKIE"),
    (10004, "NFS3ERR_NOTSUPP"),
    (10005, "NFS3ERR_TOOSMALL"),
    (10006, "NFS3ERR_SERVERFAULT"),
    (10007, "NFS3ERR_BADTYPE"),
    (10008, "NFS3ERR_JUKEBOX"),
];

/// `mountstat3` error values and names (RFC 1813 appendix I), sorted by value.
const MOUNT_ERRORS: [(u32, &str); 9] = [
    (1, "MNT3ERR_PERM"),
    (2, "MNT3ERR_NOENT"),
    (5, "MNT3ERR_IO"),
    (13, "MNT3ERR_ACCES"),
    (20, "MNT3ERR_NOTDIR"),
    (22, "MNT3ERR_INVAL"),
    (63, "MNT3ERR_NAMETOOLONG"),
    (10004, "MNT3ERR_NOTSUPP"),
    (10006, "MNT3ERR_SERVERFAULT"),
];

/// Error counters per slot: the RPC errors, the largest status table, and one
/// "value not in the RFC" entry.
pub(crate) const CODES: usize = RPC_ERRORS.len() + NFS_ERRORS.len() + 1;

fn table(status: StatusWord) -> &'static [(u32, &'static str)] {
    match status {
        StatusWord::None => &[],
        StatusWord::Nfs => &NFS_ERRORS,
        StatusWord::Mount => &MOUNT_ERRORS,
    }
}

/// The name of error `code` of a slot whose replies carry `status`.
pub(crate) fn name(status: StatusWord, code: usize) -> &'static str {
    if let Some(name) = RPC_ERRORS.get(code) {
        return name;
    }
    let t = table(status);
    match t.get(code - RPC_ERRORS.len()) {
        Some((_, name)) => name,
        None => match status {
            StatusWord::Nfs => "NFS3ERR_OTHER",
            StatusWord::Mount => "MNT3ERR_OTHER",
            StatusWord::None => "OTHER",
        },
    }
}

fn word(reply: &[u8], i: usize) -> Option<u32> {
    let b = reply.get(i * 4..i * 4 + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The error code of a record-marked reply, or `None` for success. A reply too
/// short to read counts as SYSTEM_ERR (it does not happen: replies come from the
/// dispatcher or the duplicate request cache).
pub(crate) fn classify(reply: &[u8], status: StatusWord) -> Option<usize> {
    const SYSTEM_ERR: usize = 4;
    // Words: record mark, xid, msg_type, reply_stat.
    let Some(reply_stat) = word(reply, 3) else {
        return Some(SYSTEM_ERR);
    };
    if reply_stat != 0 {
        // MSG_DENIED: reject_stat 0 is RPC_MISMATCH, 1 AUTH_ERROR.
        return Some(if word(reply, 4) == Some(0) {
            RPC_MISMATCH
        } else {
            AUTH_ERROR
        });
    }
    // MSG_ACCEPTED: verifier flavor and length, body, then accept_stat.
    let Some(verf_len) = word(reply, 5) else {
        return Some(SYSTEM_ERR);
    };
    let accept = 6 + (verf_len as usize).div_ceil(4);
    match word(reply, accept) {
        Some(0) => {}
        Some(stat @ 1..=5) => return Some(stat as usize - 1),
        _ => return Some(SYSTEM_ERR),
    }
    let t = table(status);
    if t.is_empty() {
        return None;
    }
    match word(reply, accept + 1) {
        Some(0) => None,
        // A result too short for its status word cannot come from our encoders.
        None => Some(SYSTEM_ERR),
        Some(value) => Some(
            RPC_ERRORS.len()
                + t.binary_search_by_key(&value, |&(v, _)| v)
                    .unwrap_or(t.len()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record-marked accepted reply with `accept_stat` and result words.
    fn accepted(accept_stat: u32, results: &[u32]) -> Vec<u8> {
        let mut words = vec![0x8000_0000, 7, 1, 0, 0, 0, accept_stat];
        words.extend_from_slice(results);
        words.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    #[test]
    fn success_and_status_words() {
        assert_eq!(classify(&accepted(0, &[]), StatusWord::None), None);
        assert_eq!(classify(&accepted(0, &[0, 1]), StatusWord::Nfs), None);
        let noent = classify(&accepted(0, &[2]), StatusWord::Nfs).unwrap();
        assert_eq!(name(StatusWord::Nfs, noent), "NFS3ERR_NOENT");
        let jukebox = classify(&accepted(0, &[10008]), StatusWord::Nfs).unwrap();
        assert_eq!(name(StatusWord::Nfs, jukebox), "NFS3ERR_JUKEBOX");
        let odd = classify(&accepted(0, &[3]), StatusWord::Nfs).unwrap();
        assert!(odd < CODES);
        assert_eq!(name(StatusWord::Nfs, odd), "NFS3ERR_OTHER");
        let acces = classify(&accepted(0, &[13]), StatusWord::Mount).unwrap();
        assert_eq!(name(StatusWord::Mount, acces), "MNT3ERR_ACCES");
        // A status word is not read where the procedure has none.
        assert_eq!(classify(&accepted(0, &[2]), StatusWord::None), None);
    }

    #[test]
    fn rpc_level_errors() {
        for (stat, expected) in [
            (1, "PROG_UNAVAIL"),
            (2, "PROG_MISMATCH"),
            (3, "PROC_UNAVAIL"),
            (4, "GARBAGE_ARGS"),
            (5, "SYSTEM_ERR"),
        ] {
            let code = classify(&accepted(stat, &[0, 0]), StatusWord::Nfs).unwrap();
            assert_eq!(name(StatusWord::Nfs, code), expected);
        }
        let denied = |reject: u32| -> Vec<u8> {
            [0x8000_0000u32, 7, 1, 1, reject, 1]
                .iter()
                .flat_map(|w| w.to_be_bytes())
                .collect()
        };
        let c = classify(&denied(0), StatusWord::Nfs).unwrap();
        assert_eq!(name(StatusWord::Nfs, c), "RPC_MISMATCH");
        let c = classify(&denied(1), StatusWord::Nfs).unwrap();
        assert_eq!(name(StatusWord::Nfs, c), "AUTH_ERROR");
        assert_eq!(name(StatusWord::None, 2), "PROC_UNAVAIL");
    }

    #[test]
    fn short_replies_do_not_panic() {
        for len in 0..40 {
            let r = accepted(0, &[2]);
            let _ = classify(&r[..len.min(r.len())], StatusWord::Nfs);
        }
    }
}

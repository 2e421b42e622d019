//! The fixed table of counted procedures: every (program, version, procedure)
//! this server serves has a slot, so per-thread counters are plain arrays indexed
//! by [`slot`]. Calls outside the table share a few catch-all slots, so the table
//! stays bounded whatever clients send.

use crate::portmap::{PMAP_PROGRAM, PMAP_V2, RPCB_V3, RPCB_V4};
use crate::services::{MOUNT_PROGRAM, NFS_PROGRAM};

/// How the first result word of an accepted, successful reply is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusWord {
    /// No status word (NULL, DUMP, the port mapper).
    None,
    /// An `nfsstat3`.
    Nfs,
    /// A `mountstat3`.
    Mount,
}

/// One served (program, version) and its procedures, numbered from 0.
struct Range {
    prog: u32,
    program: &'static str,
    vers: u32,
    procs: &'static [&'static str],
}

const NFS3_PROCS: &[&str] = &rnfs_nfs3::NFS3_PROC_NAMES;
const MOUNT_PROCS: &[&str] = &rnfs_nfs3::mount::MOUNT3_PROC_NAMES;
const PMAP2_PROCS: &[&str] = &["NULL", "SET", "UNSET", "GETPORT", "DUMP", "CALLIT"];
const RPCB3_PROCS: &[&str] = &[
    "NULL",
    "SET",
    "UNSET",
    "GETADDR",
    "DUMP",
    "CALLIT",
    "GETTIME",
    "UADDR2TADDR",
    "TADDR2UADDR",
];
const RPCB4_PROCS: &[&str] = &[
    "NULL",
    "SET",
    "UNSET",
    "GETADDR",
    "DUMP",
    "BCAST",
    "GETTIME",
    "UADDR2TADDR",
    "TADDR2UADDR",
    "GETVERSADDR",
    "INDIRECT",
    "GETADDRLIST",
    "GETSTAT",
];

const NFS: &str = "nfs";
const MOUNT: &str = "mount";
const PORTMAP: &str = "portmap";

/// The served ranges. Each takes `procs.len() + 1` slots: one per procedure and
/// one for a procedure number beyond the list.
const RANGES: [Range; 7] = [
    Range {
        prog: NFS_PROGRAM,
        program: NFS,
        vers: 3,
        procs: NFS3_PROCS,
    },
    Range {
        prog: MOUNT_PROGRAM,
        program: MOUNT,
        vers: 1,
        procs: MOUNT_PROCS,
    },
    Range {
        prog: MOUNT_PROGRAM,
        program: MOUNT,
        vers: 2,
        procs: MOUNT_PROCS,
    },
    Range {
        prog: MOUNT_PROGRAM,
        program: MOUNT,
        vers: 3,
        procs: MOUNT_PROCS,
    },
    Range {
        prog: PMAP_PROGRAM,
        program: PORTMAP,
        vers: PMAP_V2,
        procs: PMAP2_PROCS,
    },
    Range {
        prog: PMAP_PROGRAM,
        program: PORTMAP,
        vers: RPCB_V3,
        procs: RPCB3_PROCS,
    },
    Range {
        prog: PMAP_PROGRAM,
        program: PORTMAP,
        vers: RPCB_V4,
        procs: RPCB4_PROCS,
    },
];

/// First slot of each range.
const BASES: [usize; RANGES.len()] = bases();

const fn bases() -> [usize; RANGES.len()] {
    let mut out = [0; RANGES.len()];
    let mut next = 0;
    let mut i = 0;
    while i < RANGES.len() {
        out[i] = next;
        next += RANGES[i].procs.len() + 1;
        i += 1;
    }
    out
}

/// After the ranges: a version not served, per known program; then any other
/// program (and calls whose header could not be decoded).
const RANGE_SLOTS: usize = BASES[RANGES.len() - 1] + RANGES[RANGES.len() - 1].procs.len() + 1;
const NFS_OTHER_VERSION: usize = RANGE_SLOTS;
const MOUNT_OTHER_VERSION: usize = RANGE_SLOTS + 1;
const PORTMAP_OTHER_VERSION: usize = RANGE_SLOTS + 2;
const OTHER_PROGRAM: usize = RANGE_SLOTS + 3;

/// Number of slots.
pub(crate) const SLOTS: usize = OTHER_PROGRAM + 1;

/// How the replies of each slot carry a status.
pub(crate) const STATUS: [StatusWord; SLOTS] = status_table();

const fn status_table() -> [StatusWord; SLOTS] {
    let mut out = [StatusWord::None; SLOTS];
    let mut r = 0;
    while r < RANGES.len() {
        let range = &RANGES[r];
        // From 1: NULL has no results.
        let mut p = 1;
        while p < range.procs.len() {
            out[BASES[r] + p] = if range.prog == NFS_PROGRAM {
                StatusWord::Nfs
            } else if range.prog == MOUNT_PROGRAM && p == 1 {
                // MNT; the other MOUNT results carry no status.
                StatusWord::Mount
            } else {
                StatusWord::None
            };
            p += 1;
        }
        r += 1;
    }
    out
}

/// Procedure name of a catch-all slot.
const UNKNOWN: &str = "UNKNOWN";

/// The slot of a call: constant time, a few compares.
pub(crate) fn slot(prog: u32, vers: u32, proc_: u32) -> usize {
    let range = match (prog, vers) {
        (NFS_PROGRAM, 3) => 0,
        (MOUNT_PROGRAM, 1..=3) => vers as usize,
        (PMAP_PROGRAM, PMAP_V2..=RPCB_V4) => 4 + (vers - PMAP_V2) as usize,
        (NFS_PROGRAM, _) => return NFS_OTHER_VERSION,
        (MOUNT_PROGRAM, _) => return MOUNT_OTHER_VERSION,
        (PMAP_PROGRAM, _) => return PORTMAP_OTHER_VERSION,
        _ => return OTHER_PROGRAM,
    };
    let procs = RANGES[range].procs.len();
    BASES[range] + (proc_ as usize).min(procs)
}

/// What a slot stands for, for snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotInfo {
    /// `nfs`, `mount`, `portmap` or `other`.
    pub(crate) program: &'static str,
    /// The version; 0 for the "version not served" and "other program" slots.
    pub(crate) version: u32,
    /// The RFC's procedure name, or `UNKNOWN`.
    pub(crate) procedure: &'static str,
    /// How the first result word of a successful reply is read.
    pub(crate) status: StatusWord,
}

/// The description of `slot` (`slot < SLOTS`).
pub(crate) fn info(slot: usize) -> SlotInfo {
    let catch_all = |program| SlotInfo {
        program,
        version: 0,
        procedure: UNKNOWN,
        status: StatusWord::None,
    };
    match slot {
        NFS_OTHER_VERSION => return catch_all(NFS),
        MOUNT_OTHER_VERSION => return catch_all(MOUNT),
        PORTMAP_OTHER_VERSION => return catch_all(PORTMAP),
        s if s >= OTHER_PROGRAM => return catch_all("other"),
        _ => {}
    }
    let range = BASES.iter().rposition(|&b| b <= slot).unwrap_or(0);
    let r = &RANGES[range];
    let index = slot - BASES[range];
    SlotInfo {
        program: r.program,
        version: r.vers,
        procedure: r.procs.get(index).copied().unwrap_or(UNKNOWN),
        status: STATUS[slot],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_procedure_has_its_own_slot() {
        let mut seen = std::collections::HashSet::new();
        for r in &RANGES {
            for (p, name) in r.procs.iter().enumerate() {
                let s = slot(r.prog, r.vers, p as u32);
                assert!(s < SLOTS);
                assert!(seen.insert(s), "slot {s} reused");
                let i = info(s);
                assert_eq!(
                    (i.program, i.version, i.procedure),
                    (r.program, r.vers, *name)
                );
            }
        }
    }

    #[test]
    fn unknown_calls_land_in_catch_all_slots() {
        let s = slot(NFS_PROGRAM, 3, 22);
        assert_eq!(info(s).procedure, UNKNOWN);
        assert_eq!(slot(NFS_PROGRAM, 3, u32::MAX), s);
        assert_eq!(info(slot(NFS_PROGRAM, 4, 1)).version, 0);
        assert_eq!(info(slot(MOUNT_PROGRAM, 9, 1)).program, MOUNT);
        assert_eq!(info(slot(100_227, 3, 0)).program, "other");
        assert_eq!(info(slot(0, 0, 0)).program, "other");
        assert_eq!(slot(7, 7, 7), SLOTS - 1);
    }

    #[test]
    fn status_words() {
        assert_eq!(info(slot(NFS_PROGRAM, 3, 0)).status, StatusWord::None);
        assert_eq!(info(slot(NFS_PROGRAM, 3, 3)).status, StatusWord::Nfs);
        assert_eq!(info(slot(MOUNT_PROGRAM, 3, 1)).status, StatusWord::Mount);
        assert_eq!(info(slot(MOUNT_PROGRAM, 3, 3)).status, StatusWord::None);
        assert_eq!(info(slot(PMAP_PROGRAM, 2, 3)).status, StatusWord::None);
    }
}

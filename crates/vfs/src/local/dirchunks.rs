//! What `getdents` returned, kept for READDIRPLUS while the directory's
//! names cannot have changed.
//!
//! A [`Chunk`] is what one `getdents64` call returned from a position, with
//! the directory's *names generation* from before the call (`watches.rs`:
//! it moves with every create, delete or rename in the directory). While
//! the generation stands, reading from that position again would return the
//! same entries with the same cookies, so listings share the chunk instead
//! of asking the kernel: no open, no seek and, on ext4, no htree walk.
//!
//! Chunks are found through **resume points**: the position a listing
//! resumes from (0, or the cookie of the last entry a reply took) and the
//! chunk and index of the entry at that position. Reading a chunk adds one
//! at its start; a reply that stops inside a chunk adds one where it
//! stopped. Clients listing with the same page size stop at the same
//! cookies, so they find each other's. A position with no resume point is
//! listed from the kernel as before (`readdir.rs`), as is a directory whose
//! watch or generation is missing.
//!
//! Each entry of a chunk also has a [`SlotHint`]: where its inode was last
//! found in the inode handle cache, so that the next listing goes straight
//! to that slot (checked against its key) instead of through the cache's
//! hash table, two dependent cache misses per entry in a large directory.
//!
//! Bounds: a chunk holds at most [`CHUNK_BYTES`] of `getdents` records (up
//! to 341 entries, at most about 15 KiB with its index and hints), and the
//! cache at most [`RESUME_POINTS`] resume points, each keeping at most one
//! chunk alive: about 240 MiB at worst, if every point kept a chunk of its own.
//! In use, a chunk has its start point and the points where pages stopped
//! inside it: a directory of 1,000 entries takes about 50 KiB, one of a
//! million about 49 MiB (3,000 chunks, 9,000 points), which the default
//! bound is sized for.

use std::num::NonZeroU64;
use std::sync::Arc;

use super::cache::SlotHint;
use super::dirstreams::Pending;
use super::watches::DirKey;

/// The largest `getdents64` buffer a chunk is read with.
pub(super) const CHUNK_BYTES: usize = 8 * 1024;

/// How many resume points are kept.
pub(super) const RESUME_POINTS: usize = 16 * 1024;

/// What one `getdents64` call returned from `start`.
#[derive(Debug)]
pub(super) struct Chunk {
    /// The directory's names generation from before the call.
    pub(super) names: NonZeroU64,
    /// The entries, `.` and `..` included (listings skip them).
    pub(super) entries: Pending,
    /// Where each entry's inode was last found in the inode handle cache.
    pub(super) hints: Box<[SlotHint]>,
    /// The position after the last entry (`start` when there is none).
    pub(super) end: u64,
    /// Whether the directory ends here: the call returned nothing.
    pub(super) eof: bool,
    /// How many entries (`.` and `..` left out) come before this chunk, if
    /// it was read in a chain of chunks from the directory's start.
    pub(super) before: Option<u64>,
    /// How many entries it holds, `.` and `..` left out.
    pub(super) listed: u64,
}

/// One empty [`SlotHint`] per entry of a new chunk of `count` entries.
pub(super) fn no_hints(count: usize) -> Box<[SlotHint]> {
    (0..count).map(|_| SlotHint::new()).collect()
}

/// Where a listing resuming at a position finds its next entry.
#[derive(Debug, Clone)]
pub(super) struct ResumePoint {
    pub(super) chunk: Arc<Chunk>,
    /// The entry at the position.
    pub(super) index: usize,
}

/// A resume point's key: the directory and the position.
pub(super) type ResumeKey = (DirKey, u64);

//! Open directory streams kept between READDIR calls.
//!
//! A listing that stops because the reply is full leaves its directory
//! descriptor in a bounded cache, keyed by the directory's handle and the
//! cookie the client will resume from. A call with that cookie takes it out
//! (one user at a time, so no shared file position) and reads on: no open, no
//! seek and, on ext4, no rebuild of the htree readdir state. The descriptor is
//! never seeked: `ext4_dir_llseek` discards that state even when the position
//! does not change.
//!
//! `getdents64` fills a whole buffer, usually past the last entry the reply
//! took, so the descriptor's position is beyond the key. The entries read but
//! not handed out travel with it ([`Pending`]): the stream from the key on is
//! `pending`, then whatever the descriptor reads next. That is what the
//! descriptor returned from the key's position when it read them, so the key
//! and the stream agree exactly, whatever was buffered.
//!
//! Entries read ahead go stale when the directory changes: a name removed
//! since would be listed, one created at a position already read would be
//! missed. So a stream remembers the directory's ctime from before it read
//! them, and a call finding another ctime drops them and seeks back to the
//! key: from there the stream reads what a fresh descriptor would. (Changes
//! with nothing read ahead need nothing: the kernel reads on from its
//! position, as for any open directory.) That needs every later change to
//! show as another ctime, which timestamps of coarse granularity do not
//! promise within one clock tick, so a stream is kept only if, before it
//! read, its directory's ctime was already older than the granularity
//! allows ([`settled`]); a directory changing all the time is listed with a
//! descriptor per call.

use std::ffi::CStr;
use std::os::fd::OwnedFd;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::Stat;

use crate::{BackendHandle, FsError, FsResult};

/// How old a ctime with sub-millisecond digits must be: more than a tick of
/// the kernel's coarse clock (at most 10 ms) plus the file system's
/// granularity (under 1 ms, since it is a multiple of it).
const FINE_SETTLE: Duration = Duration::from_millis(50);
/// How old any other ctime must be: granularities go up to 2 s (FAT).
const COARSE_SETTLE: Duration = Duration::from_secs(3);

/// A directory's ctime, as seconds and nanoseconds.
pub(super) type Ctime = (i64, u64);

/// The ctime of `stat`.
#[allow(clippy::useless_conversion, reason = "stat field widths vary by arch")]
pub(super) fn ctime(stat: &Stat) -> Ctime {
    (
        i64::from(stat.st_ctime),
        u64::try_from(stat.st_ctime_nsec).unwrap_or(0),
    )
}

/// Whether any change to a directory after `now` gives it a ctime other than
/// `ctime`, its ctime before `now`: the file system stamps a change with the
/// kernel's clock (coarse, or finer where it multigrains), truncated to its
/// granularity, so once `ctime` is older than a tick plus that granularity, no
/// later change can be stamped with it. A ctime in the future (clock set back)
/// is not settled.
pub(super) fn settled(ctime: Ctime, now: SystemTime) -> bool {
    let (secs, nanos) = ctime;
    let Ok(secs) = u64::try_from(secs) else {
        return false;
    };
    let Some(nanos) = u32::try_from(nanos).ok().filter(|&n| n < 1_000_000_000) else {
        return false;
    };
    let margin = if nanos % 1_000_000 != 0 {
        FINE_SETTLE
    } else {
        COARSE_SETTLE
    };
    UNIX_EPOCH
        .checked_add(Duration::new(secs, nanos))
        .and_then(|at| now.duration_since(at).ok())
        .is_some_and(|age| age >= margin)
}

/// Where a cached stream resumes: the directory and a READDIR cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct StreamKey {
    /// The directory's handle (it names one inode for good: a new directory
    /// with the same name or inode number has another handle).
    pub(super) dir: BackendHandle,
    /// The cookie of the last entry handed out (the position of the next).
    pub(super) cookie: u64,
    /// Which of the [`WAYS`] streams at this position: listings that run in
    /// step (started together, same page size) stop at the same cookies.
    pub(super) way: u8,
}

/// How many streams a position of a directory can have.
pub(super) const WAYS: u8 = 4;

/// An open directory descriptor part way through a listing.
#[derive(Debug)]
pub(super) struct DirStream {
    /// Opened for reading; its position is right after the last entry of
    /// `pending` (at the key when `pending` is empty: nothing read ahead).
    pub(super) fd: OwnedFd,
    /// The directory's ctime from before `pending` was read.
    pub(super) ctime: Ctime,
    /// Entries read from `fd` that no reply has taken yet.
    pub(super) pending: Pending,
    /// How many entries this stream has handed out since the directory's
    /// start, if it read the directory from there with no change seen
    /// (`None` once it starts elsewhere or the directory changes): at the end
    /// of the listing, the directory's size in entries.
    pub(super) listed: Option<u64>,
}

/// One more entry handed out, for [`DirStream::listed`] (a field of its own:
/// the stream's descriptor and pending entries are borrowed meanwhile).
pub(super) fn count_one(listed: &mut Option<u64>) {
    if let Some(n) = listed {
        *n += 1;
    }
}

/// Directory entries copied out of a `getdents64` buffer, in order, `.` and
/// `..` included (the reader skips them), so the last one's cookie is the
/// descriptor's position. At most one buffer's worth.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// The names, each with its NUL, back to back.
    names: Vec<u8>,
    entries: Vec<PendingEntry>,
    /// The first entry not handed out yet.
    next: usize,
}

/// One entry of [`Pending`].
#[derive(Debug)]
struct PendingEntry {
    ino: u64,
    /// `d_off`: the position after the entry.
    cookie: u64,
    /// Its name in `names`, NUL included.
    name: std::ops::Range<usize>,
}

/// An entry as `getdents64` gave it.
#[derive(Debug, Clone, Copy)]
pub(super) struct RawEntry<'a> {
    /// `d_ino`.
    pub(super) ino: u64,
    /// `d_off`: the position after the entry.
    pub(super) cookie: u64,
    /// `d_name`.
    pub(super) name: &'a CStr,
}

impl Pending {
    /// Appends an entry.
    pub(super) fn push(&mut self, entry: RawEntry<'_>) {
        let start = self.names.len();
        self.names.extend_from_slice(entry.name.to_bytes_with_nul());
        self.entries.push(PendingEntry {
            ino: entry.ino,
            cookie: entry.cookie,
            name: start..self.names.len(),
        });
    }

    /// The first entry not handed out yet.
    #[cfg(test)]
    pub(super) fn peek(&self) -> FsResult<Option<RawEntry<'_>>> {
        self.at(self.next)
    }

    /// The entry at `index`.
    pub(super) fn at(&self, index: usize) -> FsResult<Option<RawEntry<'_>>> {
        let Some(entry) = self.entries.get(index) else {
            return Ok(None);
        };
        let name = self
            .names
            .get(entry.name.clone())
            .and_then(|bytes| CStr::from_bytes_with_nul(bytes).ok())
            // Cannot happen: `push` stores a C string's bytes.
            .ok_or(FsError::ServerFault)?;
        Ok(Some(RawEntry {
            ino: entry.ino,
            cookie: entry.cookie,
            name,
        }))
    }

    /// The inode numbers of the entries from `index` on, as many as fit
    /// `inos`; returns how many.
    pub(super) fn inos_from(&self, index: usize, inos: &mut [u64]) -> usize {
        let upcoming = self.entries.get(index..).unwrap_or_default();
        let count = upcoming.len().min(inos.len());
        for (ino, entry) in inos.iter_mut().zip(upcoming) {
            *ino = entry.ino;
        }
        count
    }

    /// Whether it holds no entry, handed out or not.
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Marks the entry [`peek`](Self::peek) gave as handed out.
    #[cfg(test)]
    pub(super) fn advance(&mut self) {
        self.next = (self.next + 1).min(self.entries.len());
    }

    /// The index of the first entry not handed out yet.
    pub(super) fn next_index(&self) -> usize {
        self.next
    }

    /// Marks the entries before `index` as handed out.
    pub(super) fn set_next_index(&mut self, index: usize) {
        self.next = index.min(self.entries.len());
    }

    /// How many entries it holds, `.` and `..` included.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The cookie of the last entry, handed out or not.
    pub(super) fn last_cookie(&self) -> Option<u64> {
        self.entries.last().map(|e| e.cookie)
    }

    /// Gives back the memory it does not use.
    pub(super) fn shrink_to_fit(&mut self) {
        self.names.shrink_to_fit();
        self.entries.shrink_to_fit();
    }

    /// Forgets every entry, keeping the memory.
    pub(super) fn clear(&mut self) {
        self.names.clear();
        self.entries.clear();
        self.next = 0;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn raw(ino: u64, cookie: u64, name: &CStr) -> RawEntry<'_> {
        RawEntry { ino, cookie, name }
    }

    fn drain(pending: &mut Pending) -> Vec<(u64, u64, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(e) = pending.peek().unwrap() {
            out.push((e.ino, e.cookie, e.name.to_bytes().to_vec()));
            pending.advance();
        }
        out
    }

    #[test]
    fn settled_once_older_than_a_tick_and_the_granularity() {
        let at = |secs: u64, nanos: u32| UNIX_EPOCH + Duration::new(secs, nanos);
        let fine = (1_000, 123_456_789);
        let fine_at = at(1_000, 123_456_789);
        assert!(!settled(fine, fine_at));
        assert!(!settled(fine, fine_at + Duration::from_millis(49)));
        assert!(settled(fine, fine_at + Duration::from_millis(50)));
        // Whole milliseconds or seconds: maybe a coarse file system.
        for coarse in [(1_000, 0), (1_000, 10_000_000)] {
            let coarse_at = at(1_000, u32::try_from(coarse.1).unwrap());
            assert!(!settled(coarse, coarse_at + Duration::from_millis(2_999)));
            assert!(settled(coarse, coarse_at + Duration::from_secs(3)));
        }
        // In the future, before the epoch, or not a time at all.
        assert!(!settled(fine, at(999, 0)));
        assert!(!settled((-5, 1), at(1_000, 0)));
        assert!(!settled((1_000, 1_000_000_001), at(2_000, 0)));
    }

    #[test]
    fn hands_back_what_was_pushed_in_order() {
        let mut pending = Pending::default();
        assert!(pending.peek().unwrap().is_none());
        pending.push(raw(7, 100, c"a"));
        pending.push(raw(8, 200, c"longer name"));
        pending.push(raw(9, 300, c""));
        // Peeking does not consume.
        assert_eq!(pending.peek().unwrap().unwrap().cookie, 100);
        assert_eq!(pending.peek().unwrap().unwrap().cookie, 100);
        assert_eq!(
            drain(&mut pending),
            [
                (7, 100, b"a".to_vec()),
                (8, 200, b"longer name".to_vec()),
                (9, 300, b"".to_vec())
            ]
        );
        pending.advance();
        assert!(pending.peek().unwrap().is_none());
        pending.clear();
        pending.push(raw(1, 2, c"b"));
        assert_eq!(drain(&mut pending), [(1, 2, b"b".to_vec())]);
    }
}

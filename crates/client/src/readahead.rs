//! Sequential read-ahead detection, sans-IO.
//!
//! [`ReadAhead::on_read`] is told each application read and answers the
//! byte range to prefetch, if any. A read that starts where the last one
//! ended (or inside what was already prefetched, moving forward) is
//! sequential: the window starts at four times the read (at least
//! `min_window`) and doubles on each sequential read up to `max_window`. A
//! read a little behind the last one, inside what was already asked for, is
//! the same stream served out of order and changes nothing. Any other read
//! resets the window to nothing. The prefetched range never starts before
//! the end of the read, never repeats bytes already asked for, and never ends
//! more than `max_window` bytes past the read or past the file size.

use std::ops::Range;

/// The read-ahead state of one open file.
#[derive(Debug, Clone)]
pub struct ReadAhead {
    min_window: u64,
    max_window: u64,
    window: u64,
    /// Offset of the last read.
    last: Option<u64>,
    /// End of the last read.
    next: Option<u64>,
    /// Prefetched (or read) up to here.
    ahead: u64,
}

impl ReadAhead {
    /// A detector whose window grows from `min_window` (usually the READ
    /// size) to `max_window` bytes (0: never prefetch).
    pub fn new(min_window: u64, max_window: u64) -> Self {
        Self {
            min_window: min_window.min(max_window),
            max_window,
            window: 0,
            last: None,
            next: None,
            ahead: 0,
        }
    }

    /// The application reads `len` bytes at `offset` of a `size`-byte file:
    /// the range to prefetch now, if any.
    pub fn on_read(&mut self, offset: u64, len: u64, size: u64) -> Option<Range<u64>> {
        let end = offset.saturating_add(len);
        // Just behind the last read, in what was already asked for: the
        // requests of one stream served out of order (a FUSE mount's
        // threads take the kernel's concurrent reads). What was fetched
        // serves it, and the stream goes on as it was; a reset here would
        // ask for the whole window again.
        if let Some(last) = self.last {
            if offset < last && end <= self.ahead && last - offset <= self.max_window {
                return None;
            }
        }
        let sequential = match (self.last, self.next) {
            (Some(last), Some(next)) => {
                offset == next || (offset > last && offset < self.ahead.max(next))
            }
            _ => offset == 0,
        };
        self.last = Some(offset);
        self.next = Some(end);
        if !sequential || self.max_window == 0 {
            self.window = 0;
            self.ahead = end;
            return None;
        }
        self.window = if self.window == 0 {
            len.saturating_mul(4).max(self.min_window)
        } else {
            self.window.saturating_mul(2)
        }
        .min(self.max_window);
        let from = self.ahead.max(end);
        let to = end.saturating_add(self.window).min(size);
        if to <= from {
            return None;
        }
        self.ahead = to;
        Some(from..to)
    }

    /// Bytes from `from` on were not prefetched after all (the cache was
    /// full or the READs failed): they may be asked for again.
    pub fn cancel(&mut self, from: u64) {
        self.ahead = self.ahead.min(from);
    }

    /// Forgets the access pattern (after a write, truncate or close).
    pub fn reset(&mut self) {
        *self = Self::new(self.min_window, self.max_window);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    #[test]
    fn sequential_reads_double_the_window_up_to_the_maximum() {
        let mut ra = ReadAhead::new(64 * K, 1024 * K);
        let size = 1 << 30;
        let mut windows = Vec::new();
        let mut offset = 0;
        for _ in 0..8 {
            let r = ra.on_read(offset, 16 * K, size);
            if let Some(r) = &r {
                assert!(r.start >= offset + 16 * K, "prefetch starts after the read");
                assert!(
                    r.end - (offset + 16 * K) <= 1024 * K,
                    "bounded by the maximum"
                );
            }
            windows.push(ra.window);
            offset += 16 * K;
        }
        assert_eq!(
            windows,
            [64, 128, 256, 512, 1024, 1024, 1024, 1024].map(|w| w * K)
        );
    }

    #[test]
    fn prefetches_never_overlap_and_cover_the_stream() {
        let mut ra = ReadAhead::new(4 * K, 256 * K);
        let size = 10 * 1024 * K;
        let mut covered = 16 * K; // the first read itself
        let mut offset = 0;
        while offset < size {
            if let Some(r) = ra.on_read(offset, 16 * K, size) {
                assert_eq!(r.start, covered.max(offset + 16 * K), "no gap, no overlap");
                covered = r.end;
            }
            offset += 16 * K;
            covered = covered.max(offset.min(size));
        }
        assert_eq!(covered, size);
    }

    #[test]
    fn random_reads_reset_the_window() {
        let mut ra = ReadAhead::new(64 * K, 1024 * K);
        assert!(ra.on_read(0, 4096, 1 << 30).is_some());
        assert!(ra.on_read(4096, 4096, 1 << 30).is_some());
        assert_eq!(ra.on_read(900 * K * K, 4096, 1 << 40), None);
        assert_eq!(ra.window, 0);
        assert_eq!(ra.on_read(5 * K * K, 4096, 1 << 40), None);
        // Sequential again from there: a fresh, small window.
        let r = ra.on_read(5 * K * K + 4096, 4096, 1 << 40).unwrap();
        assert_eq!(r.end - r.start, 64 * K);
    }

    #[test]
    fn never_prefetches_past_the_end_or_when_disabled() {
        let mut ra = ReadAhead::new(64 * K, 1024 * K);
        assert_eq!(ra.on_read(0, 4096, 100 * K), Some(4096..68 * K));
        assert_eq!(ra.on_read(4096, 4096, 100 * K), Some(68 * K..100 * K));
        assert_eq!(ra.on_read(8192, 4096, 100 * K), None);
        let mut off = ReadAhead::new(64 * K, 0);
        assert_eq!(off.on_read(0, 4096, 1 << 30), None);
        assert_eq!(off.on_read(4096, 4096, 1 << 30), None);
    }

    /// The kernel's concurrent reads of a FUSE mount, served by several
    /// threads, arrive a little out of order: the stream keeps its window
    /// and nothing is asked for twice.
    #[test]
    fn reads_served_out_of_order_ask_for_nothing_twice() {
        let mut ra = ReadAhead::new(64 * K, 1024 * K);
        let size = 1 << 30;
        let chunk = 128 * K;
        let mut asked = chunk; // the first read itself
        for pair in (0..64).step_by(2) {
            let order = if pair % 8 == 2 {
                [pair + 1, pair]
            } else {
                [pair, pair + 1]
            };
            for i in order {
                if let Some(r) = ra.on_read(i * chunk, chunk, size) {
                    assert!(r.start >= asked, "{r:?} asked for again (up to {asked})");
                    asked = r.end;
                }
            }
        }
        assert_eq!(ra.window, 1024 * K, "the window kept growing");
        assert!(asked >= 64 * chunk, "the stream was prefetched");
    }

    #[test]
    fn reads_inside_the_prefetched_window_stay_sequential() {
        let mut ra = ReadAhead::new(64 * K, 1024 * K);
        ra.on_read(0, 4096, 1 << 30);
        // Out of order but within what was prefetched (parallel readers).
        ra.on_read(3 * 4096, 4096, 1 << 30);
        assert!(ra.window > 64 * K);
        ra.cancel(32 * K);
        let r = ra.on_read(4 * 4096, 4096, 1 << 30).unwrap();
        assert_eq!(r.start, 32 * K, "cancelled bytes are asked for again");
    }
}

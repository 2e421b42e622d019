//! Record marking for stream transports (RFC 5531 §11).
//!
//! On TCP every RPC message is a *record* sent as one or more *fragments*, each
//! preceded by a four-byte mark: the high bit flags the last fragment, the low 31
//! bits give the fragment's length.
//!
//! [`RecordDecoder`] is the sans-IO receive side. The transport drives it as:
//! 1. `let n = socket.read(decoder.read_buf())?;` then `decoder.advance(n)`;
//! 2. call [`next_record`](RecordDecoder::next_record) until it returns `Ok(None)`
//!    (or process one record and re-enqueue the connection while
//!    [`has_complete_record`](RecordDecoder::has_complete_record) is true);
//! 3. on `Err`, close the connection: the stream cannot be resynchronised.
//!
//! Limits are enforced from the marks alone, before any data is buffered: a record
//! larger than `max_record` and a record of more than [`MAX_FRAGMENTS`] fragments
//! (e.g. a flood of empty non-final fragments) are errors. Every received byte is
//! copied once, from the read buffer into the record being assembled; the read
//! buffer is compacted only when that costs no more than the bytes consumed since,
//! so decoding is O(n) in the bytes received.
//!
//! The send side is [`encode_record`], or [`begin_record`] / [`finish_record`] to
//! write a message straight into the output buffer and patch its mark afterwards.

/// High bit of a record mark: this fragment ends the record.
pub const LAST_FRAGMENT: u32 = 0x8000_0000;
/// Largest fragment a mark can describe (31 bits).
pub const MAX_FRAGMENT_LEN: usize = 0x7FFF_FFFF;
/// Most fragments accepted in one record. Linux clients send one fragment per
/// record; this bounds the work a peer can cause with empty fragments.
pub const MAX_FRAGMENTS: usize = 1024;

/// Size of the read buffer handed to the transport (at least; more when a record
/// being assembled is larger).
const READ_CHUNK: usize = 64 * 1024;
/// First read buffer: small, so an idle connection that sent a few small
/// calls holds a few KiB, not `READ_CHUNK` (10,000 idle connections matter).
const INITIAL_CHUNK: usize = 8 * 1024;
/// Compact or grow when less than this much room is left at the end of the buffer.
const MIN_READ: usize = 4 * 1024;
/// Fragment bodies at least this long may be read straight into the record
/// ([`RecordDecoder::direct_target`]).
const DIRECT_MIN: usize = 16 * 1024;

/// The targets of one vectored read; see [`RecordDecoder::read_targets`].
#[derive(Debug)]
pub struct ReadTargets<'a> {
    /// The record being assembled, to append at most `direct_room` bytes
    /// to first (what its fragment lacks), or `None`.
    pub direct: Option<&'a mut Vec<u8>>,
    /// The bytes `direct` lacks (its spare capacity may be larger); 0
    /// without `direct`.
    pub direct_room: usize,
    /// Free space in the read buffer, for the bytes after `direct`'s.
    pub buf: &'a mut [u8],
}

/// Why the byte stream cannot be decoded into records. Fatal for the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// A fragment mark announced a record of `size` bytes (so far), over `max`.
    #[error("record of {size} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Size of the record including the announced fragment.
        size: usize,
        /// The decoder's `max_record`.
        max: usize,
    },
    /// A record had more than `max` fragments.
    #[error("record has more than {max} fragments")]
    TooManyFragments {
        /// [`MAX_FRAGMENTS`].
        max: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for a fragment mark.
    Mark,
    /// Copying a fragment body; `left` bytes of it are still to come.
    Body { left: usize, last: bool },
}

/// Reassembles records from a byte stream; see the module docs for the call order.
#[derive(Debug)]
pub struct RecordDecoder {
    max_record: usize,
    /// Read buffer; `buf.len()` is its usable size. Invariant:
    /// `start <= end <= buf.len()`, and `buf[start..end]` are received bytes not yet
    /// parsed.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    state: State,
    /// Fragment bodies of the record being assembled.
    record: Vec<u8>,
    /// Fragments of the record being assembled whose mark has been parsed.
    fragments: usize,
    /// Set on the first error; every later call returns it.
    failed: Option<RecordError>,
    /// Smallest fragment body read straight into the record.
    direct_min: usize,
    /// While the caller reads into [`direct_target`](Self::direct_target):
    /// the record's length once the fragment is complete.
    direct_end: Option<usize>,
    /// The record's length when it was offered as a direct target.
    direct_from: usize,
    /// With [`grow_on_full_reads`](Self::grow_on_full_reads): the last read
    /// filled all the space offered (the peer sends faster than the buffer
    /// drains), so the next [`read_buf`](Self::read_buf) doubles it, up to
    /// `READ_CHUNK`.
    grow: bool,
    grow_on_full_reads: bool,
}

impl RecordDecoder {
    /// A decoder accepting records of at most `max_record` bytes (marks excluded).
    pub fn new(max_record: usize) -> Self {
        Self {
            max_record,
            buf: Vec::new(),
            start: 0,
            end: 0,
            state: State::Mark,
            record: Vec::new(),
            fragments: 0,
            failed: None,
            direct_min: DIRECT_MIN,
            direct_end: None,
            direct_from: 0,
            grow: false,
            grow_on_full_reads: false,
        }
    }

    /// Offers [`direct_target`](Self::direct_target) for fragment bodies of
    /// at least `min` bytes (default 16 KiB; at least 1).
    pub fn direct_reads_from(mut self, min: usize) -> Self {
        self.direct_min = min.max(1);
        self
    }

    /// Doubles the read buffer (from 8 KiB up to 64 KiB) after each read that
    /// fills it: a burst of pipelined calls is then read in fewer reads, with
    /// more of its records complete at once (the server's reply coalescing
    /// needs the next record complete). Off by default: the client's async
    /// reader, draining 32 KiB READ replies, lost 30% of its calls per second
    /// with it (fewer, longer reads end short more often, and each short read
    /// waits for the next readiness event).
    pub fn grow_on_full_reads(mut self) -> Self {
        self.grow_on_full_reads = true;
        self
    }

    /// The largest record accepted.
    pub fn max_record(&self) -> usize {
        self.max_record
    }

    /// Largest read buffer: a whole maximal record with a mark per fragment fits,
    /// even if the caller reads it all before calling `next_record`.
    fn buf_limit(&self) -> usize {
        self.max_record
            .saturating_add(4 * MAX_FRAGMENTS)
            .max(READ_CHUNK)
    }

    /// Free space to read socket bytes into; report how many were written with
    /// [`advance`](Self::advance).
    ///
    /// Never empty while the caller drains [`next_record`](Self::next_record)
    /// between reads. (It can only be empty after a maximal record's worth of bytes
    /// was buffered without parsing; treat that like a protocol error.)
    pub fn read_buf(&mut self) -> &mut [u8] {
        self.prepare_read_buf();
        &mut self.buf[self.end..]
    }

    /// Makes room at the end of the read buffer (see [`read_buf`](Self::read_buf)).
    fn prepare_read_buf(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if std::mem::take(&mut self.grow) && self.buf.len() < READ_CHUNK {
            let grown = self
                .buf
                .len()
                .saturating_mul(2)
                .clamp(INITIAL_CHUNK, READ_CHUNK);
            self.buf.resize(grown, 0);
        }
        if self.buf.len() - self.end < MIN_READ {
            let unparsed = self.end - self.start;
            let limit = self.buf_limit();
            // Moving `unparsed` bytes costs no more than the `start` bytes parsed since
            // the last compaction, so compaction is amortised O(1) per byte.
            if self.start > 0 && (self.start >= unparsed || self.buf.len() >= limit) {
                self.buf.copy_within(self.start..self.end, 0);
                self.start = 0;
                self.end = unparsed;
            }
            if self.buf.len() - self.end < MIN_READ && self.buf.len() < limit {
                let grown = self
                    .buf
                    .len()
                    .saturating_mul(2)
                    .max(INITIAL_CHUNK)
                    .min(limit);
                self.buf.resize(grown, 0);
            }
        }
    }

    /// The record being assembled, to read into instead of
    /// [`read_buf`](Self::read_buf), when a record of at least the
    /// direct-read size is arriving (at least 4 KiB of it received and 4 KiB
    /// of its fragment still to come) and nothing else is buffered: the
    /// bytes then land in the record once, instead of in the read buffer and
    /// then the record. Its spare capacity is exactly the bytes offered: those
    /// the fragment still lacks, but at most 64 KiB or twice the bytes
    /// received (the record grows with what arrives, not with what its mark
    /// claims), so a read into it (rustix's `spare_capacity`, or
    /// `Read::take(spare).read_to_end`) cannot take the next record's bytes.
    /// Append at most that much, then call
    /// [`direct_filled`](Self::direct_filled), and ask again.
    ///
    /// The trade: one copy saved, but the read stops at the record's end. It
    /// paid for the server's 64 KiB WRITE calls (0.86x CPU per call) and the
    /// client's blocking reads of 32 KiB READ replies (0.84x), not for a
    /// non-blocking reader draining a socket with many replies queued, which
    /// then needs more reads (0.77-0.93x calls/s).
    pub fn direct_target(&mut self) -> Option<&mut Vec<u8>> {
        self.offer_direct(true).then_some(&mut self.record)
    }

    /// Both places one vectored read (`readv`, or `recvmsg` with two
    /// buffers) fills, in order: the record being assembled, when
    /// [`direct_target`](Self::direct_target) would offer it, then the read
    /// buffer. A large reply's body then lands in its record without a copy,
    /// and what follows it (the next record's mark and header) arrives in the
    /// same read, so draining a socket of many queued records takes no more
    /// reads than through the buffer alone. Append at most `direct_room`
    /// bytes to `direct` (its spare capacity may be larger: a buffer given
    /// with [`supply_record_buffer`](Self::supply_record_buffer) is kept),
    /// write the rest at the start of `buf` (only once `direct` has its
    /// `direct_room`), then call [`targets_filled`](Self::targets_filled).
    pub fn read_targets(&mut self) -> ReadTargets<'_> {
        let direct = self.offer_direct(false);
        self.prepare_read_buf();
        let direct_room = match self.direct_end {
            Some(end) if direct => end - self.record.len(),
            _ => 0,
        };
        ReadTargets {
            direct: direct.then_some(&mut self.record),
            direct_room,
            buf: &mut self.buf[self.end..],
        }
    }

    /// Whether the next record has no buffer yet (the last one was returned
    /// by [`next_record`](Self::next_record)), so that one given with
    /// [`supply_record_buffer`](Self::supply_record_buffer) would be used.
    pub fn wants_record_buffer(&self) -> bool {
        self.record.capacity() == 0
    }

    /// Gives the decoder an empty buffer (e.g. a record already consumed)
    /// to assemble the next record in, so that it need not allocate one: a
    /// reused buffer's pages are already mapped, where a fresh allocation of
    /// tens of KiB often is not. Ignored unless
    /// [`wants_record_buffer`](Self::wants_record_buffer).
    pub fn supply_record_buffer(&mut self, mut buf: Vec<u8>) {
        if self.wants_record_buffer() {
            buf.clear();
            self.record = buf;
        }
    }

    /// Accounts a read into [`read_targets`](Self::read_targets) of `n`
    /// bytes in all: those appended to its `direct` record, then the rest at
    /// the start of its `buf`.
    pub fn targets_filled(&mut self, n: usize) {
        let direct_n = match self.direct_end {
            Some(end) => self.record.len().min(end).saturating_sub(self.direct_from),
            None => 0,
        };
        debug_assert!(
            n == direct_n || self.direct_end.is_none_or(|end| self.record.len() >= end),
            "bytes for the read buffer before the direct target was full"
        );
        self.direct_filled();
        self.advance(n.saturating_sub(direct_n));
    }

    /// Prepares the record being assembled as a direct read target (see
    /// [`direct_target`](Self::direct_target)); whether it is one. With
    /// `exact`, its spare capacity is made exactly the bytes offered.
    ///
    /// The bytes offered are the fragment's missing bytes, but at most
    /// [`direct_allowance`] of the bytes already received: a mark costs the
    /// peer four bytes and may claim up to `max_record`, so a record's
    /// buffer grows with what arrives (geometrically, so a large WRITE is
    /// still read straight into its buffer, with O(log n) reallocations),
    /// never with what a mark promises. An idle connection that sent a
    /// forged mark and a few KiB thus holds a few KiB plus one chunk, not
    /// `max_record` bytes.
    fn offer_direct(&mut self, exact: bool) -> bool {
        if self.failed.is_some() || self.start != self.end {
            return false;
        }
        let State::Body { left, .. } = self.state else {
            return false;
        };
        let received = self.record.len();
        // `left` was checked against `max_record` when its mark was parsed.
        let Some(frag_end) = received.checked_add(left) else {
            return false;
        };
        // A short remainder goes through the read buffer, with what follows
        // it, in one read; so do the first bytes of a record, until enough
        // have arrived to show that it is not just a mark.
        let small = self.direct_min.min(MIN_READ);
        if frag_end < self.direct_min || left < small || received < small {
            return false;
        }
        // Capacity already held costs nothing more (a supplied buffer, or a
        // direct read that came back short), up to the fragment's end.
        let end = received
            .saturating_add(left.min(direct_allowance(received)))
            .max(self.record.capacity())
            .min(frag_end);
        if self.record.capacity() < end {
            self.record.reserve_exact(end - received);
        }
        if exact && self.record.capacity() != end {
            // Exactly the bytes offered as spare capacity (`with_capacity`
            // guarantees the exact size; `reserve_exact` need not).
            let mut exact = Vec::with_capacity(end);
            exact.extend_from_slice(&self.record);
            self.record = exact;
            if self.record.capacity() != end {
                return false;
            }
        }
        self.direct_end = Some(end);
        self.direct_from = received;
        true
    }

    /// Accounts the bytes appended to [`direct_target`](Self::direct_target)'s
    /// record (any beyond the bytes offered are dropped: a caller's bug).
    pub fn direct_filled(&mut self) {
        let Some(end) = self.direct_end.take() else {
            return;
        };
        if let State::Body { left, last } = self.state {
            self.record.truncate(end);
            // At most `end - direct_from`, which is at most `left`.
            let got = self.record.len().saturating_sub(self.direct_from);
            self.state = State::Body {
                left: left.saturating_sub(got),
                last,
            };
        }
    }

    /// Frees the buffers if nothing is buffered and they grew past the
    /// usual size (after a large record), so idle connections stay small.
    /// A read buffer grown by full reads (at most `READ_CHUNK`, 64 KiB) is
    /// kept: a busy stream pauses often, and freeing and regrowing it at every
    /// pause costs more than it saves.
    pub fn shrink_if_idle(&mut self) {
        if self.start == self.end && self.record.is_empty() && self.buf.len() > READ_CHUNK {
            self.buf = Vec::new();
            self.record = Vec::new();
            self.start = 0;
            self.end = 0;
        }
    }

    /// Records that `n` bytes were written at the start of the last
    /// [`read_buf`](Self::read_buf) (clamped to its length).
    pub fn advance(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
        if n > 0 && self.end == self.buf.len() && self.grow_on_full_reads {
            self.grow = true;
        }
    }

    /// Bytes received but not yet returned as part of a record: unparsed bytes plus
    /// the record being assembled.
    pub fn buffered(&self) -> usize {
        self.end - self.start + self.record.len()
    }

    /// The next complete record (fragments joined), `Ok(None)` if more bytes are
    /// needed (partial data is kept), or the error that makes the stream unusable.
    pub fn next_record(&mut self) -> Result<Option<Vec<u8>>, RecordError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        loop {
            match self.state {
                State::Mark => {
                    let Some(mark) = self
                        .buf
                        .get(self.start..self.end)
                        .and_then(|b| b.first_chunk::<4>())
                    else {
                        return Ok(None);
                    };
                    let mark = u32::from_be_bytes(*mark);
                    self.start += 4;
                    let (len, last) = split_mark(mark);
                    self.fragments += 1;
                    if let Err(e) =
                        check_fragment(self.fragments, self.record.len(), len, self.max_record)
                    {
                        self.failed = Some(e.clone());
                        return Err(e);
                    }
                    // Reserve only what has arrived: a forged mark must not make
                    // an idle connection hold `max_record` bytes.
                    self.record.reserve(len.min(self.end - self.start));
                    self.state = State::Body { left: len, last };
                }
                State::Body { left, last } => {
                    let n = left.min(self.end - self.start);
                    self.record
                        .extend_from_slice(&self.buf[self.start..self.start + n]);
                    self.start += n;
                    if n < left {
                        self.state = State::Body {
                            left: left - n,
                            last,
                        };
                        return Ok(None);
                    }
                    self.state = State::Mark;
                    if last {
                        self.fragments = 0;
                        return Ok(Some(std::mem::take(&mut self.record)));
                    }
                }
            }
        }
    }

    /// The first `n` bytes of the next record, when that record is complete,
    /// starts at a record boundary and its first fragment holds them; else `None`
    /// (also when the stream has failed). Copies nothing; O(fragment marks
    /// buffered), like [`has_complete_record`](Self::has_complete_record).
    pub fn peek_complete_record(&self, n: usize) -> Option<&[u8]> {
        if self.failed.is_some() || self.state != State::Mark || !self.record.is_empty() {
            return None;
        }
        let mark = self.buf.get(self.start..self.end)?.first_chunk::<4>()?;
        let (len, _) = split_mark(u32::from_be_bytes(*mark));
        if len < n || !self.has_complete_record() {
            return None;
        }
        self.buf.get(self.start + 4..self.start + 4 + n)
    }

    /// Whether [`next_record`](Self::next_record) would return a record or an error
    /// now, without copying anything. Costs O(fragment marks buffered).
    pub fn has_complete_record(&self) -> bool {
        if self.failed.is_some() {
            return true;
        }
        let mut pos = self.start;
        let mut state = self.state;
        let mut fragments = self.fragments;
        // The record's size once the fragment being copied is complete.
        let mut size = match self.state {
            State::Body { left, .. } => self.record.len().saturating_add(left),
            State::Mark => self.record.len(),
        };
        loop {
            match state {
                State::Mark => {
                    let Some(mark) = self
                        .buf
                        .get(pos..self.end)
                        .and_then(|b| b.first_chunk::<4>())
                    else {
                        return false;
                    };
                    pos += 4;
                    let (len, last) = split_mark(u32::from_be_bytes(*mark));
                    fragments += 1;
                    if check_fragment(fragments, size, len, self.max_record).is_err() {
                        return true;
                    }
                    size += len;
                    state = State::Body { left: len, last };
                }
                State::Body { left, last } => {
                    if self.end - pos < left {
                        return false;
                    }
                    if last {
                        return true;
                    }
                    pos += left;
                    state = State::Mark;
                }
            }
        }
    }
}

/// Most bytes a direct read may add to a record of which `received` bytes
/// arrived: one chunk, or twice what arrived. A record's capacity thus
/// stays within three times what the peer really sent plus a chunk, and
/// grows geometrically while the data comes.
fn direct_allowance(received: usize) -> usize {
    received.saturating_mul(2).max(READ_CHUNK)
}

fn split_mark(mark: u32) -> (usize, bool) {
    ((mark & !LAST_FRAGMENT) as usize, mark & LAST_FRAGMENT != 0)
}

/// Checks a newly announced fragment against the limits.
fn check_fragment(
    fragments: usize,
    size_so_far: usize,
    len: usize,
    max: usize,
) -> Result<(), RecordError> {
    if fragments > MAX_FRAGMENTS {
        return Err(RecordError::TooManyFragments { max: MAX_FRAGMENTS });
    }
    let size = size_so_far.saturating_add(len);
    if size > max {
        return Err(RecordError::TooLarge { size, max });
    }
    Ok(())
}

/// Appends `msg` to `out` as one record (several fragments only if it exceeds
/// [`MAX_FRAGMENT_LEN`]).
pub fn encode_record(msg: &[u8], out: &mut Vec<u8>) {
    let start = begin_record(out);
    out.extend_from_slice(msg);
    finish_record(out, start);
}

/// Reserves a record mark at the end of `out` and returns its offset; write the
/// message after it, then call [`finish_record`].
pub fn begin_record(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    start
}

/// Fills in the mark reserved by [`begin_record`] at `start`, making everything
/// after it one record. A message over [`MAX_FRAGMENT_LEN`] is split into fragments
/// in place.
pub fn finish_record(out: &mut Vec<u8>, start: usize) {
    finish_record_with(out, start, MAX_FRAGMENT_LEN);
}

/// [`finish_record`] with a smaller fragment size (tests exercise splitting with it).
pub(crate) fn finish_record_with(out: &mut Vec<u8>, start: usize, max_fragment: usize) {
    let Some(len) = out.len().checked_sub(start + 4) else {
        debug_assert!(false, "finish_record without begin_record");
        return;
    };
    let max_fragment = max_fragment.clamp(1, MAX_FRAGMENT_LEN);
    let count = len.div_ceil(max_fragment).max(1);
    // Open a 4-byte gap before every fragment but the first, moving from the back so
    // that each byte moves once.
    out.resize(out.len() + 4 * (count - 1), 0);
    for i in (0..count).rev() {
        let body_start = start + 4 + i * max_fragment;
        let body_len = max_fragment.min(len - i * max_fragment);
        let mark_at = start + i * (max_fragment + 4);
        if i > 0 {
            out.copy_within(body_start..body_start + body_len, mark_at + 4);
        }
        let last = if i == count - 1 { LAST_FRAGMENT } else { 0 };
        let mark = last | body_len as u32; // body_len <= MAX_FRAGMENT_LEN
        out[mark_at..mark_at + 4].copy_from_slice(&mark.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large fragment read straight into its record: the spare capacity
    /// offered is exactly what the fragment lacks, the next record's bytes
    /// still go through the read buffer, and the records come out intact.
    #[test]
    fn large_fragments_are_read_straight_into_the_record() {
        let big: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        let small = vec![7u8; 100];
        let mut stream = Vec::new();
        encode_record(&big, &mut stream);
        encode_record(&small, &mut stream);
        let mut dec = RecordDecoder::new(1 << 20);
        // The mark and 1000 bytes of the body arrive through the read buffer:
        // too few to offer the record (see `a_forged_mark_allocates_...`).
        dec.read_buf()[..1004].copy_from_slice(&stream[..1004]);
        dec.advance(1004);
        assert_eq!(dec.next_record(), Ok(None));
        assert!(dec.direct_target().is_none());
        // 7000 more, and the record is offered.
        dec.read_buf()[..7000].copy_from_slice(&stream[1004..8004]);
        dec.advance(7000);
        assert_eq!(dec.next_record(), Ok(None));
        let mut fed = 8004;
        let mut direct_reads = 0;
        while let Some(rec) = dec.direct_target() {
            let spare = rec.capacity() - rec.len();
            assert_eq!(spare, 4 + big.len() - fed, "exactly the missing bytes");
            let n = spare.min(7000);
            rec.extend_from_slice(&stream[fed..fed + n]);
            dec.direct_filled();
            fed += n;
            direct_reads += 1;
        }
        // The last 4000 bytes (under 4 KiB) come with the next record.
        assert_eq!((fed, direct_reads), (4 + big.len() - 4000, 4));
        assert_eq!(dec.next_record(), Ok(None));
        let rest = &stream[fed..];
        dec.read_buf()[..rest.len()].copy_from_slice(rest);
        dec.advance(rest.len());
        assert_eq!(dec.next_record(), Ok(Some(big)));
        // Nothing is offered for a mark or a small body.
        assert!(dec.direct_target().is_none());
        assert_eq!(dec.next_record(), Ok(Some(small)));
        assert_eq!(dec.buffered(), 0);
    }

    /// A mark claiming a record just under the limit, then nothing: the
    /// record's buffer grows with the bytes that arrive, not with the mark
    /// (which once made an idle connection hold the whole claimed size), and
    /// the record, fed in pieces, still comes out intact, read directly with
    /// few reallocations.
    #[test]
    fn a_forged_mark_allocates_only_what_arrived() {
        const MAX: usize = 1_114_112;
        let body: Vec<u8> = (0..MAX - 1).map(|i| (i % 251) as u8).collect();
        let mut stream = Vec::new();
        encode_record(&body, &mut stream);
        assert_eq!(stream[..4], 0x8010_FFFFu32.to_be_bytes());
        for vectored in [false, true] {
            let mut dec = RecordDecoder::new(MAX);
            // The mark alone: nothing offered, nothing reserved.
            dec.read_buf()[..4].copy_from_slice(&stream[..4]);
            dec.advance(4);
            assert_eq!(dec.next_record(), Ok(None));
            let offered = |dec: &mut RecordDecoder| {
                if vectored {
                    let t = dec.read_targets();
                    t.direct
                        .map(|rec| (rec.capacity() - rec.len(), t.direct_room))
                } else {
                    let rec = dec.direct_target()?;
                    let spare = rec.capacity() - rec.len();
                    Some((spare, spare))
                }
            };
            assert_eq!(offered(&mut dec), None);
            assert_eq!(dec.record.capacity(), 0, "nothing reserved for a mark");
            // 5000 bytes of body: offered, but one chunk, not the 1 MiB claimed.
            dec.read_buf()[..5000].copy_from_slice(&stream[4..5004]);
            dec.advance(5000);
            assert_eq!(dec.next_record(), Ok(None));
            let (spare, room) = offered(&mut dec).unwrap();
            assert_eq!(room, READ_CHUNK);
            assert!(spare <= READ_CHUNK, "{spare}");
            assert!(dec.record.capacity() <= 5000 + READ_CHUNK);
            dec.direct_filled();
            // The rest in pieces of 100 KiB, each through the direct target
            // while one is offered: the capacity stays within a chunk of
            // three times what arrived, and grows O(log n) times.
            let mut fed = 5004;
            let mut direct_bytes = 0;
            let mut grown = 0;
            let mut capacity = dec.record.capacity();
            let mut records = Vec::new();
            while fed < stream.len() {
                let piece = (stream.len() - fed).min(100 * 1024);
                let n = if vectored {
                    let t = dec.read_targets();
                    let room = t.direct_room;
                    let mut n = 0;
                    if let Some(rec) = t.direct {
                        assert!(room <= rec.capacity() - rec.len());
                        n = piece.min(room);
                        rec.extend_from_slice(&stream[fed..fed + n]);
                        direct_bytes += n;
                    }
                    if n == room || room == 0 {
                        let b = (piece - n).min(t.buf.len());
                        t.buf[..b].copy_from_slice(&stream[fed + n..fed + n + b]);
                        n += b;
                    }
                    dec.targets_filled(n);
                    n
                } else if let Some(rec) = dec.direct_target() {
                    let n = piece.min(rec.capacity() - rec.len());
                    rec.extend_from_slice(&stream[fed..fed + n]);
                    direct_bytes += n;
                    dec.direct_filled();
                    n
                } else {
                    let buf = dec.read_buf();
                    let n = piece.min(buf.len());
                    buf[..n].copy_from_slice(&stream[fed..fed + n]);
                    dec.advance(n);
                    n
                };
                fed += n;
                let held = dec.record.capacity();
                if held != capacity {
                    grown += 1;
                    capacity = held;
                }
                assert!(
                    held <= 3 * dec.buffered() + READ_CHUNK,
                    "{held} held for {} received",
                    dec.buffered()
                );
                while let Some(rec) = dec.next_record().unwrap() {
                    records.push(rec);
                }
            }
            assert_eq!(records, vec![body.clone()], "vectored: {vectored}");
            assert!(grown <= 6, "{grown} reallocations");
            assert!(
                direct_bytes >= body.len() * 9 / 10,
                "{direct_bytes} of {} read directly",
                body.len()
            );
        }
    }

    /// A vectored read fills the large record's missing bytes first, then
    /// the read buffer with the next record, in one read: two records of
    /// 40,000 bytes arrive in three reads, only the first record's head and
    /// the second's going through the read buffer.
    #[test]
    fn vectored_reads_fill_the_record_then_the_buffer() {
        let a: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        let b: Vec<u8> = (0..40_000u32).map(|i| (i % 241) as u8).collect();
        let mut stream = Vec::new();
        encode_record(&a, &mut stream);
        encode_record(&b, &mut stream);
        let mut dec = RecordDecoder::new(1 << 20);
        let mut fed = 0;
        let mut reads = Vec::new();
        let mut records = Vec::new();
        while fed < stream.len() {
            let t = dec.read_targets();
            let direct_room = t.direct_room;
            let mut n = direct_room.min(stream.len() - fed);
            if let Some(rec) = t.direct {
                rec.extend_from_slice(&stream[fed..fed + n]);
            }
            let rest = &stream[fed + n..];
            let b_n = rest.len().min(t.buf.len());
            t.buf[..b_n].copy_from_slice(&rest[..b_n]);
            n += b_n;
            dec.targets_filled(n);
            reads.push((direct_room, n));
            fed += n;
            while let Some(rec) = dec.next_record().unwrap() {
                records.push(rec);
            }
        }
        assert_eq!(records, vec![a, b]);
        // 1: buffer only (8 KiB: the first mark and head); 2: the rest of
        // the first record directly, and 8 KiB of the second through the
        // buffer; 3: the rest of the second record directly.
        let head = INITIAL_CHUNK - 4;
        assert_eq!(
            reads,
            vec![
                (0, INITIAL_CHUNK),
                (40_000 - head, 40_000 - head + INITIAL_CHUNK),
                (40_000 - head, 40_000 - head),
            ]
        );
        assert_eq!(dec.buffered(), 0);
    }

    /// A buffer supplied for the next record holds it (no allocation), and a
    /// direct read into it is bounded by the fragment, not its capacity.
    #[test]
    fn a_supplied_buffer_holds_the_next_record() {
        let body: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        let mut stream = Vec::new();
        encode_record(&body, &mut stream);
        let mut dec = RecordDecoder::new(1 << 20);
        assert!(dec.wants_record_buffer());
        let mut used = Vec::with_capacity(64 * 1024);
        used.extend_from_slice(&[9, 9, 9]); // stale contents, cleared
        let at = used.as_ptr();
        dec.supply_record_buffer(used);
        assert!(!dec.wants_record_buffer());
        dec.supply_record_buffer(Vec::with_capacity(10)); // ignored
        let t = dec.read_targets();
        assert!(t.direct.is_none());
        t.buf[..INITIAL_CHUNK].copy_from_slice(&stream[..INITIAL_CHUNK]);
        dec.targets_filled(INITIAL_CHUNK);
        assert_eq!(dec.next_record(), Ok(None));
        let t = dec.read_targets();
        let room = t.direct_room;
        assert_eq!(room, stream.len() - INITIAL_CHUNK);
        let rec = t.direct.unwrap();
        assert!(rec.capacity() - rec.len() > room);
        rec.extend_from_slice(&stream[INITIAL_CHUNK..]);
        dec.targets_filled(room);
        let rec = dec.next_record().unwrap().unwrap();
        assert_eq!(rec, body);
        assert_eq!(rec.as_ptr(), at, "the supplied buffer");
        assert!(dec.wants_record_buffer());
    }

    /// Splitting a reply into fragments in place (the real threshold is 2^31 - 1).
    #[test]
    fn finish_record_splits_oversized_messages() {
        for len in 0..=13usize {
            let msg: Vec<u8> = (1..=len as u8).collect();
            let mut out = vec![0xEE];
            let start = begin_record(&mut out);
            out.extend_from_slice(&msg);
            finish_record_with(&mut out, start, 4);

            let mut want = vec![0xEE];
            let mut chunks = msg.chunks(4).peekable();
            if chunks.peek().is_none() {
                want.extend_from_slice(&LAST_FRAGMENT.to_be_bytes());
            }
            while let Some(c) = chunks.next() {
                let last = if chunks.peek().is_none() {
                    LAST_FRAGMENT
                } else {
                    0
                };
                want.extend_from_slice(&(last | c.len() as u32).to_be_bytes());
                want.extend_from_slice(c);
            }
            assert_eq!(out, want, "len {len}");

            let mut dec = RecordDecoder::new(64);
            dec.read_buf()[..out.len() - 1].copy_from_slice(&out[1..]);
            dec.advance(out.len() - 1);
            assert_eq!(dec.next_record(), Ok(Some(msg)));
        }
    }
}

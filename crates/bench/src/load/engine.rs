//! The measured path: one mio event loop per thread over its share of the
//! connections, each connection with `depth` calls in flight.
//!
//! Per connection, slot `i` of `depth` holds one call: its XID is
//! `generation * depth + i`, so a reply finds its slot as `xid % depth` (no
//! map) and is accepted only if the slot is busy with exactly that XID.
//! After a readable event the loop reads until the socket is drained,
//! parsing every complete reply as it goes (the rnfs-rpc record decoder and
//! reply header decoder), then encodes the next call of every freed slot and
//! writes them all with one `writev`. Sockets are non-blocking with
//! TCP_NODELAY. A reply's time is taken once per `read`, a call's once per
//! batch just before the write; a call belongs to the measured window if its
//! reply arrives inside it.

use std::collections::BTreeMap;
use std::io::{self, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use rnfs_nfs3::NfsProc3;
use rnfs_rpc::{decode_reply, RecordDecoder, RecordError, ReplyStatus};

use super::ops::{reply_status_name, ConnCtx, Outcome, SlotState, Workload, PROCS};
use super::LoadError;

/// The run's time line (shared by every thread).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    /// Start of the measured window (end of the warm-up).
    pub(crate) start: Instant,
    /// End of the measured window: no new calls after it.
    pub(crate) end: Instant,
    /// Calls still in flight are abandoned at this time.
    pub(crate) drain_until: Instant,
}

/// What a thread tells the coordinator.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Msg {
    /// Its connections are registered; it waits at the [`Gate`].
    Ready,
    /// It ended, successfully or not.
    Finished { failed: bool },
}

/// Holds the threads until every one is ready, then hands them the window
/// (or `None`: the run is abandoned).
#[derive(Debug, Default)]
pub(crate) struct Gate {
    window: Mutex<Option<Option<Window>>>,
    opened: Condvar,
}

impl Gate {
    /// Releases every thread, now and later.
    pub(crate) fn open(&self, window: Option<Window>) {
        let mut w = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        *w = Some(window);
        self.opened.notify_all();
    }

    fn wait(&self) -> Option<Window> {
        let mut w = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(window) = *w {
                return window;
            }
            w = self.opened.wait(w).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// What one thread measured.
#[derive(Debug)]
pub(crate) struct Stats {
    /// Call latency in ns (replies inside the window).
    pub(crate) hist: Histogram<u64>,
    /// Calls completed inside the window (errors included).
    pub(crate) calls: u64,
    /// READ/WRITE payload bytes inside the window.
    pub(crate) bytes: u64,
    /// READDIRPLUS entries inside the window.
    pub(crate) entries: u64,
    /// Complete directory listings (pages with eof) inside the window.
    pub(crate) listings: u64,
    /// Calls that failed, inside the window.
    pub(crate) error_calls: u64,
    /// Failures by status name, inside the window.
    pub(crate) errors: BTreeMap<&'static str, u64>,
    /// Failures outside the window (warm-up, drain) or of unknown calls.
    pub(crate) errors_outside: u64,
    /// RPCs inside the window by procedure.
    pub(crate) by_proc: [u64; PROCS],
}

impl Stats {
    #[allow(
        clippy::expect_used,
        reason = "constant bounds that hdrhistogram accepts"
    )]
    fn new() -> Stats {
        Stats {
            hist: crate::report::latency_histogram(),
            calls: 0,
            bytes: 0,
            entries: 0,
            listings: 0,
            error_calls: 0,
            errors: BTreeMap::new(),
            errors_outside: 0,
            by_proc: [0; PROCS],
        }
    }

    /// The sum of every thread's stats.
    pub(crate) fn merge(all: Vec<Stats>) -> Stats {
        let mut total = Stats::new();
        for s in all {
            let _ = total.hist.add(&s.hist);
            total.calls += s.calls;
            total.bytes += s.bytes;
            total.entries += s.entries;
            total.listings += s.listings;
            total.error_calls += s.error_calls;
            for (k, v) in s.errors {
                *total.errors.entry(k).or_default() += v;
            }
            total.errors_outside += s.errors_outside;
            for (t, v) in total.by_proc.iter_mut().zip(s.by_proc) {
                *t += v;
            }
        }
        total
    }

    fn failed(&mut self, name: &'static str, in_window: bool) {
        if in_window {
            self.error_calls += 1;
            *self.errors.entry(name).or_default() += 1;
        } else {
            self.errors_outside += 1;
        }
    }
}

/// Calls queued for one `writev`: ranges of an encode buffer, and WRITE data
/// shared by every call (not copied).
#[derive(Debug)]
pub(crate) struct OutQueue {
    buf: Vec<u8>,
    /// `buf[..sealed]` is described by `segs`; the rest is being encoded.
    sealed: usize,
    segs: Vec<Seg>,
    /// First segment not yet fully written, and bytes of it already written.
    head: usize,
    offset: usize,
    payload: std::sync::Arc<[u8]>,
}

#[derive(Debug, Clone, Copy)]
enum Seg {
    Buf { start: usize, end: usize },
    Payload { len: usize },
}

/// Most iovecs per `writev`.
const MAX_IOV: usize = 64;

impl OutQueue {
    pub(crate) fn new(payload: std::sync::Arc<[u8]>) -> OutQueue {
        OutQueue {
            buf: Vec::with_capacity(16 << 10),
            sealed: 0,
            segs: Vec::new(),
            head: 0,
            offset: 0,
            payload,
        }
    }

    /// The buffer to append encoded bytes to.
    pub(crate) fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Queues the first `len` bytes of the shared payload after what was
    /// appended so far.
    pub(crate) fn push_payload(&mut self, len: usize) {
        self.seal();
        self.segs.push(Seg::Payload {
            len: len.min(self.payload.len()),
        });
    }

    fn seal(&mut self) {
        let end = self.buf.len();
        if end == self.sealed {
            return;
        }
        match self.segs.last_mut() {
            Some(Seg::Buf { end: last, .. }) if *last == self.sealed => *last = end,
            _ => self.segs.push(Seg::Buf {
                start: self.sealed,
                end,
            }),
        }
        self.sealed = end;
    }

    fn is_empty(&self) -> bool {
        self.head == self.segs.len() && self.sealed == self.buf.len()
    }

    fn slice(&self, seg: Seg) -> &[u8] {
        match seg {
            Seg::Buf { start, end } => &self.buf[start..end],
            Seg::Payload { len } => &self.payload[..len],
        }
    }

    /// Writes as much as the socket takes: `true` when everything went.
    fn flush(&mut self, w: &mut impl Write) -> io::Result<bool> {
        self.seal();
        loop {
            if self.head == self.segs.len() {
                self.buf.clear();
                self.segs.clear();
                self.sealed = 0;
                self.head = 0;
                self.offset = 0;
                return Ok(true);
            }
            let mut iov = [IoSlice::new(&[]); MAX_IOV];
            let mut n = 0;
            let mut want = 0;
            for (i, &seg) in self.segs[self.head..].iter().take(MAX_IOV).enumerate() {
                let s = self.slice(seg);
                let s = if i == 0 { &s[self.offset..] } else { s };
                iov[n] = IoSlice::new(s);
                want += s.len();
                n += 1;
            }
            match w.write_vectored(&iov[..n]) {
                Ok(0) if want > 0 => return Err(io::ErrorKind::WriteZero.into()),
                Ok(written) => self.advance(written),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn advance(&mut self, mut n: usize) {
        while n > 0 && self.head < self.segs.len() {
            let len = self.slice(self.segs[self.head]).len() - self.offset;
            if n < len {
                self.offset += n;
                return;
            }
            n -= len;
            self.head += 1;
            self.offset = 0;
        }
        // Empty segments (zero-length payloads) are passed over too.
        while self.head < self.segs.len() && self.slice(self.segs[self.head]).is_empty() {
            self.head += 1;
        }
    }
}

/// One call in flight (or a free place for one).
#[derive(Debug)]
struct Slot {
    xid: u32,
    busy: bool,
    /// The slot's last reply was half of a call (CREATE of a pair): the next
    /// RPC continues it, even after the window.
    continuing: bool,
    proc_: NfsProc3,
    /// When the call (its first RPC) was sent.
    started: Instant,
    state: SlotState,
}

/// One measured connection.
#[derive(Debug)]
struct Conn {
    ctx: ConnCtx,
    stream: TcpStream,
    peer: SocketAddr,
    decoder: RecordDecoder,
    out: OutQueue,
    slots: Vec<Slot>,
    /// Slots whose reply arrived and which get their next call in this batch.
    ready: Vec<u32>,
    /// Slots given a call in this batch (stamped just before the write).
    issued: Vec<u32>,
    in_flight: usize,
    generation: u32,
    generations: u32,
}

/// Connects one measured connection: blocking connect, then non-blocking
/// with TCP_NODELAY.
pub(crate) fn connect(addr: SocketAddr) -> Result<std::net::TcpStream, LoadError> {
    let err = |source| LoadError::Connect { addr, source };
    let s = std::net::TcpStream::connect(addr).map_err(err)?;
    s.set_nodelay(true).map_err(err)?;
    s.set_nonblocking(true).map_err(err)?;
    Ok(s)
}

impl Conn {
    fn new(work: &Workload, index: usize, stream: std::net::TcpStream, seed: u64) -> Conn {
        let depth = work.depth.max(1);
        let peer = stream
            .peer_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let now = Instant::now();
        let slots = (0..depth)
            .map(|_| Slot {
                xid: 0,
                busy: false,
                continuing: false,
                proc_: NfsProc3::Null,
                started: now,
                state: work.slot_state(),
            })
            .collect();
        let generations = u32::MAX / depth;
        Conn {
            ctx: ConnCtx::new(index, seed),
            stream: TcpStream::from_std(stream),
            peer,
            decoder: RecordDecoder::new(work.max_reply),
            out: OutQueue::new(std::sync::Arc::clone(&work.payload)),
            slots,
            ready: (0..depth).collect(),
            issued: Vec::with_capacity(depth as usize),
            in_flight: 0,
            // Different connections start at different XIDs.
            generation: (seed as u32 ^ index as u32).wrapping_mul(7919) % generations,
            generations,
        }
    }

    fn closed(&self, detail: String) -> LoadError {
        LoadError::ConnectionClosed {
            conn: self.ctx.index,
            addr: self.peer,
            detail,
        }
    }

    /// Reads until the socket is drained, handling every complete reply,
    /// then sends the next calls.
    fn on_readable(
        &mut self,
        work: &Workload,
        window: &Window,
        stats: &mut Stats,
    ) -> Result<(), LoadError> {
        loop {
            let buf = self.decoder.read_buf();
            let want = buf.len();
            if want == 0 {
                return Err(LoadError::Protocol {
                    conn: self.ctx.index,
                    source: RecordError::TooLarge {
                        size: self.decoder.buffered(),
                        max: self.decoder.max_record(),
                    },
                });
            }
            match self.stream.read(buf) {
                Ok(0) => return Err(self.closed("end of stream".into())),
                Ok(n) => {
                    self.decoder.advance(n);
                    let now = Instant::now();
                    while let Some(rec) =
                        self.decoder
                            .next_record()
                            .map_err(|source| LoadError::Protocol {
                                conn: self.ctx.index,
                                source,
                            })?
                    {
                        self.on_record(work, &rec, now, window, stats);
                    }
                    // A short read drained the socket; new data raises a new edge.
                    if n < want {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.closed(e.to_string())),
            }
        }
        self.issue(work, Instant::now() < window.end)
    }

    fn on_record(
        &mut self,
        work: &Workload,
        rec: &[u8],
        now: Instant,
        window: &Window,
        stats: &mut Stats,
    ) {
        let in_window = now >= window.start && now < window.end;
        let reply = decode_reply(rec);
        let xid = match (&reply, rec.first_chunk::<4>()) {
            (Ok(r), _) => r.header.xid,
            (Err(_), Some(x)) => u32::from_be_bytes(*x),
            (Err(_), None) => return stats.failed("GARBAGE_REPLY", false),
        };
        let depth = self.slots.len() as u32;
        let idx = xid % depth;
        let slot = &mut self.slots[idx as usize];
        if !slot.busy || slot.xid != xid {
            return stats.failed("UNEXPECTED_XID", false);
        }
        slot.busy = false;
        self.in_flight -= 1;
        let outcome = match reply {
            Ok(r) if r.header.status == ReplyStatus::Success => {
                work.on_reply(&mut slot.state, slot.proc_, r.results)
            }
            Ok(r) => {
                work.reset(&mut slot.state);
                Outcome::Failed(reply_status_name(&r.header.status))
            }
            Err(_) => {
                work.reset(&mut slot.state);
                Outcome::Failed("GARBAGE_REPLY")
            }
        };
        if in_window {
            stats.by_proc[u32::from(slot.proc_) as usize % PROCS] += 1;
        }
        slot.continuing = outcome == Outcome::Continue;
        if !slot.continuing && in_window {
            stats.calls += 1;
            let ns = now.saturating_duration_since(slot.started).as_nanos();
            stats
                .hist
                .saturating_record(u64::try_from(ns).unwrap_or(u64::MAX).max(1));
        }
        match outcome {
            Outcome::Done {
                bytes,
                entries,
                eof,
            } if in_window => {
                stats.bytes += bytes;
                stats.entries += u64::from(entries);
                stats.listings += u64::from(eof);
            }
            Outcome::Failed(name) => stats.failed(name, in_window),
            _ => {}
        }
        self.ready.push(idx);
    }

    /// Encodes the next call of every ready slot (after the window only the
    /// halves of calls in progress) and writes them.
    fn issue(&mut self, work: &Workload, running: bool) -> Result<(), LoadError> {
        let depth = self.slots.len() as u32;
        for &idx in &self.ready {
            let slot = &mut self.slots[idx as usize];
            if slot.busy || !(running || slot.continuing) {
                continue;
            }
            let xid = self.generation * depth + idx;
            self.generation += 1;
            if self.generation >= self.generations {
                self.generation = 0;
            }
            slot.proc_ = work.encode(&mut self.ctx, &mut slot.state, xid, &mut self.out);
            slot.xid = xid;
            slot.busy = true;
            self.in_flight += 1;
            self.issued.push(idx);
        }
        self.ready.clear();
        if !self.issued.is_empty() {
            let now = Instant::now();
            for &idx in &self.issued {
                let slot = &mut self.slots[idx as usize];
                if !slot.continuing {
                    slot.started = now;
                }
            }
            self.issued.clear();
        }
        self.flush()
    }

    fn flush(&mut self) -> Result<(), LoadError> {
        if self.out.is_empty() {
            return Ok(());
        }
        match self.out.flush(&mut self.stream) {
            Ok(_) => Ok(()),
            Err(e) => Err(self.closed(e.to_string())),
        }
    }
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> LoadError {
    move |source| LoadError::Io { what, source }
}

/// Longest sleep in `epoll_wait`: how soon a thread notices the end of the
/// window or another thread's failure.
const TICK: Duration = Duration::from_millis(20);

/// Runs one thread's connections: registers them, reports [`Msg::Ready`],
/// waits at the gate for the window, then runs through it and the drain.
pub(crate) fn run_thread(
    work: &Workload,
    streams: Vec<(usize, std::net::TcpStream)>,
    gate: &Gate,
    ready: &Sender<Msg>,
    stop: &AtomicBool,
) -> Result<Stats, LoadError> {
    let mut poll = Poll::new().map_err(io_err("creating an epoll instance"))?;
    let mut events = Events::with_capacity(1024);
    let seed = super::ops::time_seed();
    let mut conns = Vec::with_capacity(streams.len());
    for (i, (index, s)) in streams.into_iter().enumerate() {
        let mut c = Conn::new(work, index, s, seed.rotate_left(i as u32));
        poll.registry()
            .register(
                &mut c.stream,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(io_err("registering a connection with epoll"))?;
        conns.push(c);
    }
    let mut stats = Stats::new();
    let _ = ready.send(Msg::Ready);
    let Some(window) = gate.wait() else {
        return Ok(stats);
    };
    for c in &mut conns {
        c.issue(work, Instant::now() < window.end)?;
    }
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let now = Instant::now();
        let timeout = if now < window.end {
            window.end - now
        } else if now >= window.drain_until || conns.iter().all(|c| c.in_flight == 0) {
            break;
        } else {
            window.drain_until - now
        };
        match poll.poll(&mut events, Some(timeout.min(TICK))) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(LoadError::Io {
                    what: "epoll_wait",
                    source: e,
                })
            }
        }
        for ev in events.iter() {
            let Some(c) = conns.get_mut(ev.token().0) else {
                continue;
            };
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                c.on_readable(work, &window, &mut stats)?;
            }
            if ev.is_writable() {
                c.flush()?;
            }
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    /// A writer that takes at most `chunk` bytes per call and records them.
    struct Trickle {
        chunk: usize,
        got: Vec<u8>,
        calls: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[IoSlice::new(b)])
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls % 3 == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let mut n = 0;
            for b in bufs {
                let take = (self.chunk - n).min(b.len());
                self.got.extend_from_slice(&b[..take]);
                n += take;
                if n == self.chunk {
                    break;
                }
            }
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn out_queue_sends_buffers_and_payload_in_order_across_partial_writes() {
        let payload: std::sync::Arc<[u8]> = (0..100u8).collect::<Vec<_>>().into();
        let mut q = OutQueue::new(payload);
        let mut want = Vec::new();
        for round in 0..5u8 {
            q.buf().extend_from_slice(&[round; 7]);
            want.extend_from_slice(&[round; 7]);
            q.push_payload(10 + usize::from(round));
            want.extend(0..10 + round);
            q.buf().extend_from_slice(&[0xff; 2]);
            want.extend_from_slice(&[0xff; 2]);
        }
        let mut w = Trickle {
            chunk: 5,
            got: Vec::new(),
            calls: 0,
        };
        let mut rounds = 0;
        while !q.flush(&mut w).unwrap() {
            rounds += 1;
            assert!(rounds < 1000);
        }
        assert_eq!(w.got, want);
        assert!(q.is_empty());
        // Reusable after draining.
        q.buf().extend_from_slice(b"abc");
        assert!(q.flush(&mut w).unwrap() || q.flush(&mut w).unwrap());
        assert_eq!(&w.got[want.len()..], b"abc");
    }
}

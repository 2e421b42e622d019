//! Per-service-thread counters ([`Shard`]) and the registry that folds them.
//!
//! Each service thread owns one shard and is its only writer, so counting a call
//! is a handful of plain loads and stores on memory no other thread writes: no
//! lock, no read-modify-write instruction, no shared cache line. A snapshot reads
//! every shard under the registry lock and adds the totals of threads that have
//! exited ([`Registry::retire`] folds a shard into them when its thread stops), so
//! totals never go backwards.
//!
//! Memory: a shard is about 2 KiB, plus 1,056 bytes for each procedure its thread
//! has served (allocated on the thread's first call of that procedure): 224
//! latency buckets and 36 error counters as `u32`, a sum and a maximum. With 4,096
//! threads that each served all 22 NFSv3 procedures that is about 100 MiB; at the
//! default 8 threads, under 200 KiB.
//!
//! Exports are counted by *dense index* ([`export_index`]), given to each export id
//! when an export table is built: the first 16 in cells inside the shard, later
//! ones in chunks of 64 allocated on the thread's first call of one of the chunk's
//! (a 4 KiB table of chunks, and 2 KiB per chunk). A call finds its export's cell
//! by position, with no search and no lock, however many exports there are. (An hdrhistogram of 1 significant digit over
//! the same range takes about 4 KiB per procedure per thread.)
//!
//! A `u32` counter that reaches [`FLUSH_AT`] is moved into the registry's totals
//! under its lock (once per 2^31 calls of one bucket), which a snapshot also holds
//! while it reads, so a snapshot never sees a count both in a shard and in the
//! totals.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::histogram::{self, BUCKETS};
use super::note::CallNote;
use super::procs::SLOTS;
use super::status::CODES;

/// Counters per slot: latency buckets, then error codes.
pub(crate) const COUNTS: usize = BUCKETS + CODES;
/// A per-thread `u32` counter at this value is flushed into the totals.
const FLUSH_AT: u32 = 1 << 31;
/// Exports one shard counts in place, by dense index
/// ([`export_index`]): the first ones of the process, with no allocation.
const EXPORT_CELLS: usize = 16;
/// Exports per further chunk of a shard's export counters (2 KiB).
const EXPORT_CHUNK: usize = 64;
/// Further chunks a shard may have: exports of dense index up to
/// `EXPORT_CELLS + EXPORT_CHUNK * EXPORT_CHUNKS` (16,400) are counted per
/// thread; calls of later ones are added to the totals under the registry
/// lock.
const EXPORT_CHUNKS: usize = 256;

/// Every export id the process has served, in the order first seen: an id's
/// position is its dense index, which picks its counters in every shard
/// without a search. Taken when an export table is built (start and
/// reload), never on the call path. Append-only: a reload that keeps an id
/// keeps its counters, and the list grows only with the distinct ids ever
/// configured.
static EXPORT_INDEX: Mutex<Option<HashMap<u32, u32>>> = Mutex::new(None);

/// The dense index of export `id` (see [`EXPORT_INDEX`]).
pub(crate) fn export_index(id: u32) -> u32 {
    let mut index = EXPORT_INDEX
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let index = index.get_or_insert_with(HashMap::new);
    let next = u32::try_from(index.len()).unwrap_or(u32::MAX);
    *index.entry(id).or_insert(next)
}

/// Adds `n` to a counter that only the calling thread writes: a load and a store,
/// not a read-modify-write. Relaxed: a snapshot needs some recent value of each
/// counter, nothing else is published through it.
#[inline]
fn add(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

/// One procedure's counters in one shard.
struct SlotCells {
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
    counts: [AtomicU32; COUNTS],
}

/// One export's counters in one shard. `key` is the export id + 1 (0: unused);
/// it is set once, by the owner, and never changes, so Relaxed suffices: the
/// counters start at 0 whether or not a reader sees them with the key.
#[derive(Default)]
struct ExportCell {
    key: AtomicU64,
    calls: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

/// Export counters beyond a shard's first [`EXPORT_CELLS`], by chunk.
type ExportChunks = Box<[OnceLock<Box<[ExportCell; EXPORT_CHUNK]>>]>;

/// One service thread's counters. Written only by that thread.
pub(crate) struct Shard {
    /// Indexed by slot; set on the thread's first call of that slot.
    slots: Box<[OnceLock<Box<SlotCells>>]>,
    /// By dense export index.
    exports: [ExportCell; EXPORT_CELLS],
    /// By dense export index past `EXPORT_CELLS`; the table on the thread's
    /// first call of such an export, each chunk on its first call of one
    /// of the chunk's.
    more_exports: OnceLock<ExportChunks>,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    replies_held: AtomicU64,
}

impl Shard {
    fn new() -> Self {
        Shard {
            slots: (0..SLOTS).map(|_| OnceLock::new()).collect(),
            exports: Default::default(),
            more_exports: OnceLock::new(),
            bytes_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            replies_held: AtomicU64::new(0),
        }
    }
}

/// One slot's totals; `counts` is empty until the slot is used.
#[derive(Debug, Clone, Default)]
pub(crate) struct SlotTotals {
    pub(crate) counts: Vec<u64>,
    pub(crate) sum_ns: u64,
    pub(crate) max_ns: u64,
}

impl SlotTotals {
    fn add_count(&mut self, i: usize, n: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; COUNTS];
        }
        self.counts[i] += n;
    }

    /// Calls counted (every call has one latency sample).
    pub(crate) fn calls(&self) -> u64 {
        self.counts.iter().take(BUCKETS).sum()
    }
}

/// One export's totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ExportTotals {
    pub(crate) calls: u64,
    pub(crate) bytes_read: u64,
    pub(crate) bytes_written: u64,
}

/// Everything the shards count, summed.
#[derive(Debug, Clone)]
pub(crate) struct Totals {
    pub(crate) slots: Vec<SlotTotals>,
    pub(crate) bytes_read: u64,
    pub(crate) bytes_written: u64,
    /// Replies held for coalescing instead of written at once.
    pub(crate) replies_held: u64,
    pub(crate) exports: HashMap<u32, ExportTotals>,
}

impl Default for Totals {
    fn default() -> Self {
        Totals {
            slots: vec![SlotTotals::default(); SLOTS],
            bytes_read: 0,
            bytes_written: 0,
            replies_held: 0,
            exports: HashMap::new(),
        }
    }
}

impl Totals {
    fn add_shard(&mut self, shard: &Shard) {
        for (total, cells) in self.slots.iter_mut().zip(shard.slots.iter()) {
            let Some(cells) = cells.get() else { continue };
            for (i, c) in cells.counts.iter().enumerate() {
                let n = c.load(Relaxed);
                if n > 0 {
                    total.add_count(i, u64::from(n));
                }
            }
            total.sum_ns += cells.sum_ns.load(Relaxed);
            total.max_ns = total.max_ns.max(cells.max_ns.load(Relaxed));
        }
        self.bytes_read += shard.bytes_read.load(Relaxed);
        self.replies_held += shard.replies_held.load(Relaxed);
        self.bytes_written += shard.bytes_written.load(Relaxed);
        let more = shard.more_exports.get().into_iter().flat_map(|chunks| {
            chunks
                .iter()
                .filter_map(OnceLock::get)
                .flat_map(|chunk| chunk.iter())
        });
        for cell in shard.exports.iter().chain(more) {
            // A cell's key is set before its counters move (see
            // `ExportCell`); one not yet used is skipped.
            let Some(id) = cell.key.load(Relaxed).checked_sub(1) else {
                continue;
            };
            let e = self.exports.entry(id as u32).or_default();
            e.calls += cell.calls.load(Relaxed);
            e.bytes_read += cell.bytes_read.load(Relaxed);
            e.bytes_written += cell.bytes_written.load(Relaxed);
        }
    }

    fn add_export(&mut self, id: u32, note: &CallNote) {
        let e = self.exports.entry(id).or_default();
        e.calls += 1;
        e.bytes_read += u64::from(note.bytes_read);
        e.bytes_written += u64::from(note.bytes_written);
    }
}

/// The live shards and the totals of retired ones.
#[derive(Default)]
struct Registered {
    shards: Vec<Arc<Shard>>,
    retired: Totals,
}

/// Every shard of one [`Metrics`](super::Metrics).
#[derive(Default)]
pub(crate) struct Registry {
    inner: Mutex<Registered>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Registered> {
        // The counters stay consistent if a holder panicked.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new shard for the calling thread (at thread start).
    pub(crate) fn register(self: &Arc<Self>) -> ShardHandle {
        let shard = Arc::new(Shard::new());
        self.lock().shards.push(Arc::clone(&shard));
        ShardHandle {
            shard,
            registry: Arc::clone(self),
        }
    }

    /// Folds `shard` into the retired totals and forgets it (at thread exit).
    fn retire(&self, shard: &Arc<Shard>) {
        let mut r = self.lock();
        r.retired.add_shard(shard);
        r.shards.retain(|s| !Arc::ptr_eq(s, shard));
    }

    /// The sum of every shard, live and retired.
    pub(crate) fn totals(&self) -> Totals {
        let r = self.lock();
        let mut t = r.retired.clone();
        for s in &r.shards {
            t.add_shard(s);
        }
        t
    }

    fn flush(&self, slot: usize, i: usize, cell: &AtomicU32) {
        let mut r = self.lock();
        // Under the lock, so no snapshot sees the count twice or not at all; the
        // owner is the only writer, so nothing is lost between load and store.
        let n = u64::from(cell.load(Relaxed)) + 1;
        if let Some(t) = r.retired.slots.get_mut(slot) {
            t.add_count(i, n);
        }
        cell.store(0, Relaxed);
    }

    fn add_export(&self, id: u32, note: &CallNote) {
        self.lock().retired.add_export(id, note);
    }

    #[cfg(test)]
    fn live(&self) -> usize {
        self.lock().shards.len()
    }
}

/// A service thread's handle on its shard; dropping it (at thread exit) folds
/// the shard into the retired totals.
pub(crate) struct ShardHandle {
    shard: Arc<Shard>,
    registry: Arc<Registry>,
}

impl ShardHandle {
    /// Counts one call of `slot` that took `ns` nanoseconds, with error `code`
    /// (see [`status`](super::status)), and what the service noted.
    #[inline]
    pub(crate) fn record(&self, slot: usize, error: Option<usize>, ns: u64, note: &CallNote) {
        let Some(cells) = self.shard.slots.get(slot) else {
            return;
        };
        let cells = cells.get_or_init(|| {
            Box::new(SlotCells {
                sum_ns: AtomicU64::new(0),
                max_ns: AtomicU64::new(0),
                counts: std::array::from_fn(|_| AtomicU32::new(0)),
            })
        });
        self.bump(slot, &cells.counts, histogram::bucket(ns));
        if let Some(code) = error {
            self.bump(slot, &cells.counts, BUCKETS + code.min(CODES - 1));
        }
        add(&cells.sum_ns, ns);
        if ns > cells.max_ns.load(Relaxed) {
            cells.max_ns.store(ns, Relaxed);
        }
        if note.bytes_read > 0 {
            add(&self.shard.bytes_read, u64::from(note.bytes_read));
        }
        if note.bytes_written > 0 {
            add(&self.shard.bytes_written, u64::from(note.bytes_written));
        }
        if note.reply_held {
            add(&self.shard.replies_held, 1);
        }
        if let Some((id, index)) = note.export {
            self.record_export(id, index, note);
        }
    }

    #[inline]
    fn bump(&self, slot: usize, counts: &[AtomicU32; COUNTS], i: usize) {
        let c = &counts[i];
        let n = c.load(Relaxed);
        if n < FLUSH_AT {
            c.store(n + 1, Relaxed);
        } else {
            self.registry.flush(slot, i, c);
        }
    }

    /// Counts a call of export `id`, of dense index `index`, in its cell:
    /// found by position, no search.
    fn record_export(&self, id: u32, index: u32, note: &CallNote) {
        let Some(cell) = self.export_cell(index as usize) else {
            // Past every shard's cells: as many exports as no server has.
            self.registry.add_export(id, note);
            return;
        };
        let key = u64::from(id) + 1;
        if cell.key.load(Relaxed) != key {
            // First use: one id per index, for the process's life.
            cell.key.store(key, Relaxed);
        }
        add(&cell.calls, 1);
        add(&cell.bytes_read, u64::from(note.bytes_read));
        add(&cell.bytes_written, u64::from(note.bytes_written));
    }

    fn export_cell(&self, index: usize) -> Option<&ExportCell> {
        if let Some(cell) = self.shard.exports.get(index) {
            return Some(cell);
        }
        let index = index - EXPORT_CELLS;
        let chunk = self
            .shard
            .more_exports
            .get_or_init(|| (0..EXPORT_CHUNKS).map(|_| OnceLock::new()).collect());
        let chunk = chunk
            .get(index / EXPORT_CHUNK)?
            .get_or_init(|| Box::new(std::array::from_fn(|_| ExportCell::default())));
        chunk.get(index % EXPORT_CHUNK)
    }
}

impl Drop for ShardHandle {
    fn drop(&mut self) {
        self.registry.retire(&self.shard);
    }
}

impl std::fmt::Debug for ShardHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShardHandle")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(t: &Totals, slot: usize) -> u64 {
        t.slots[slot].calls()
    }

    #[test]
    fn retired_threads_keep_their_counts() {
        let registry = Arc::new(Registry::default());
        let a = registry.register();
        let b = registry.register();
        let note = CallNote {
            export: Some((5, export_index(5))),
            bytes_read: 100,
            bytes_written: 0,
            reply_held: false,
        };
        a.record(3, None, 1_000, &note);
        b.record(3, Some(2), 2_000, &CallNote::default());
        let before = registry.totals();
        assert_eq!(calls(&before, 3), 2);
        assert_eq!(before.slots[3].counts[BUCKETS + 2], 1);
        assert_eq!(before.slots[3].sum_ns, 3_000);
        assert_eq!(before.slots[3].max_ns, 2_000);
        assert_eq!(before.bytes_read, 100);
        assert_eq!(before.exports[&5].calls, 1);
        drop(a);
        assert_eq!(registry.live(), 1);
        let after = registry.totals();
        assert_eq!(calls(&after, 3), 2);
        assert_eq!(after.bytes_read, 100);
        assert_eq!(after.exports[&5].bytes_read, 100);
    }

    #[test]
    fn full_counters_flush_into_the_totals() {
        let registry = Arc::new(Registry::default());
        let h = registry.register();
        h.record(0, None, 100, &CallNote::default());
        let cells = h.shard.slots[0].get().unwrap();
        let b = histogram::bucket(100);
        cells.counts[b].store(FLUSH_AT, Relaxed);
        h.record(0, None, 100, &CallNote::default());
        assert_eq!(cells.counts[b].load(Relaxed), 0);
        assert_eq!(calls(&registry.totals(), 0), u64::from(FLUSH_AT) + 1);
        h.record(0, None, 100, &CallNote::default());
        assert_eq!(calls(&registry.totals(), 0), u64::from(FLUSH_AT) + 2);
    }

    /// A thousand exports are each counted in the thread's own cells, found
    /// by dense index: none goes through the registry's lock, which every
    /// thread shares. Past every cell, calls are still counted, there.
    #[test]
    fn a_thousand_exports_are_counted_per_thread() {
        let registry = Arc::new(Registry::default());
        let h = registry.register();
        let ids: Vec<u32> = (0..1_000).map(|i| 0x5eed_0000 + i).collect();
        for &id in &ids {
            let note = CallNote {
                export: Some((id, export_index(id))),
                bytes_read: 0,
                bytes_written: 8,
                reply_held: false,
            };
            h.record(7, None, 10, &note);
            h.record(7, None, 10, &note);
        }
        assert!(
            registry.lock().retired.exports.is_empty(),
            "counted under the shared lock"
        );
        let t = registry.totals();
        for id in &ids {
            assert_eq!(
                t.exports[id],
                ExportTotals {
                    calls: 2,
                    bytes_read: 0,
                    bytes_written: 16
                }
            );
        }
        let beyond = CallNote {
            export: Some((9, (EXPORT_CELLS + EXPORT_CHUNK * EXPORT_CHUNKS) as u32)),
            ..CallNote::default()
        };
        h.record(7, None, 10, &beyond);
        assert_eq!(registry.totals().exports[&9].calls, 1);
        drop(h);
        assert_eq!(registry.totals().exports[&ids[999]].calls, 2);
    }

    #[test]
    fn dense_indices_are_stable_and_distinct() {
        let a = export_index(0xd15_0001);
        let b = export_index(0xd15_0002);
        assert_ne!(a, b);
        assert_eq!(export_index(0xd15_0001), a);
    }
}

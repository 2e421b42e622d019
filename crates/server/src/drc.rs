//! The duplicate request cache (DRC): a retransmitted non-idempotent call gets the
//! reply of the original instead of running twice.
//!
//! A client that lost a reply (the connection broke, a timeout fired) sends the
//! call again with the same xid. Running a REMOVE, RENAME or exclusive CREATE a
//! second time turns a success into an error; the DRC answers the retransmission
//! from memory. It is Linux knfsd's `nfscache.c` design, generic over bytes: the
//! caller decides which calls go through it (the non-idempotent NFS procedures) and
//! what a reply is (the record-marked bytes it sends).
//!
//! # Keys
//!
//! [`DrcKey`]: the client's address (IP *and* port, as knfsd: the Linux client
//! keeps its source port across reconnects), xid, program, version, procedure and a
//! checksum of the arguments (their length and the CRC-32 of their first
//! [`CHECKSUM_BYTES`] bytes; knfsd also uses a plain checksum here: it guards
//! against accidents, and only the client itself can aim at its own entries).
//! Everything in the key is what makes a call a retransmission of the same
//! request; the peer address keeps one client from ever being answered with
//! another's reply, and the checksum catches an xid reused for a different
//! request (client reboot, xid wrap).
//!
//! # Protocol
//!
//! [`DuplicateRequestCache::begin`] returns
//! - [`DrcBegin::Run`] for a new call: run it, then [`DrcGuard::finish`] with the
//!   reply. Dropping the guard without `finish` (the call was dropped, the thread
//!   failed) forgets the entry, so a retransmission runs;
//! - [`DrcBegin::Replay`] with the cached reply of a completed original;
//! - [`DrcBegin::Drop`]: send nothing. Either the original is still running and did
//!   not finish within [`DrcLimits::in_progress_wait`] (the client retransmits again
//!   later and then gets the cached reply), or it finished, while this duplicate
//!   waited, with a reply too large to cache.
//!
//! A duplicate that arrives while its original runs waits on a condition variable
//! (blocking its service thread for at most `in_progress_wait`) rather than running
//! concurrently.
//!
//! A reply larger than [`DrcLimits::max_reply_bytes`] is not cached. Like knfsd's
//! `RC_NOCACHE`, a later retransmission then runs again; only duplicates that were
//! already waiting for that original are dropped. NFSv3's non-idempotent replies
//! (wcc data, a file handle, attributes) are all far below the 4 KiB default.
//!
//! # Bounds and cost
//!
//! At most [`DrcLimits::max_entries`] entries and [`DrcLimits::max_bytes`] bytes of
//! cached replies, split evenly over the shards so the bound holds without any
//! shared counter. When a shard is full, its oldest *completed* entry goes first (a
//! completed entry counts as new when it completes, as knfsd moves it to the LRU
//! tail). Running calls are never evicted: evicting one would let its duplicate run
//! concurrently. If a shard is full of running calls, a new call runs without an
//! entry (counted in [`DrcStats::overflows`]). `max_bytes` counts reply bytes;
//! each entry adds under 200 bytes of bookkeeping (slab node, map slot) and
//! [`INLINE_REPLY_BYTES`] of inline reply space (replies that fit are kept
//! there, not on the heap), so the defaults hold at most 16 MiB plus about
//! 4.2 MiB.
//!
//! The key's hash (SipHash with a per-cache random key, computed once per call)
//! picks one of [`DrcLimits::shards`] shards, each a mutex over a hash table of
//! slots, a slab of entries (each keeping its hash, so eviction never hashes
//! again) and an intrusive FIFO list of the completed ones: every operation is
//! O(1) under one shard's lock, and counters live in the shard, so no cache
//! line is shared by all calls.
//!
//! # Wiring
//!
//! Around `Dispatcher::dispatch` in the handler, for the calls the caller chooses:
//!
//! ```
//! # use std::net::SocketAddr;
//! # use rnfs_server::drc::{DrcBegin, DrcKey, DuplicateRequestCache, DrcLimits};
//! # fn is_non_idempotent(_: &DrcKey) -> bool { true }
//! # fn dispatch(_: &[u8], out: &mut Vec<u8>) { out.extend_from_slice(b"reply") }
//! # fn send(_: &[u8]) {}
//! # let drc = DuplicateRequestCache::new(DrcLimits::default());
//! # let peer: SocketAddr = "127.0.0.1:700".parse().unwrap();
//! # let mut record = Vec::new();
//! # rnfs_rpc::encode_call(1, 100_003, 3, 12, &rnfs_rpc::Auth::None, &[0; 8], &mut record);
//! # let record = &record[4..];
//! # let mut reply = Vec::new();
//! match DrcKey::from_call(peer, record).filter(is_non_idempotent) {
//!     None => { dispatch(record, &mut reply); send(&reply) }
//!     Some(key) => match drc.begin(key) {
//!         DrcBegin::Run(guard) => {
//!             dispatch(record, &mut reply);
//!             if !reply.is_empty() {
//!                 guard.finish(&reply); // else dropping the guard forgets the call
//!             }
//!             send(&reply)
//!         }
//!         DrcBegin::Replay(cached) => send(&cached),
//!         DrcBegin::Drop => {}
//!     },
//! }
//! ```

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use hashbrown::HashTable;
use rnfs_xdr::Reader;

/// How many leading argument bytes the checksum covers (knfsd's `RC_CSUMLEN`).
pub const CHECKSUM_BYTES: usize = 256;

/// Replies up to this long are kept in their entry's slot of the shard's
/// reply slab instead of on the heap: every NFSv3 non-idempotent reply but a
/// CREATE or MKDIR with a long handle (a WRITE's is 164 bytes, a REMOVE's
/// 148). Evicting such an entry touches nothing but its node: no atomic
/// decrement on a cold reference count, no `free`.
pub const INLINE_REPLY_BYTES: usize = 320;

/// Sizes and timing of a [`DuplicateRequestCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrcLimits {
    /// Most entries (running and completed), over all shards.
    pub max_entries: usize,
    /// Most bytes of cached replies, over all shards.
    pub max_bytes: usize,
    /// Replies longer than this are not cached (see the module docs).
    pub max_reply_bytes: usize,
    /// How long a duplicate waits for its running original before being dropped.
    pub in_progress_wait: Duration,
    /// Number of shards; rounded down to a power of two, at most `max_entries`.
    pub shards: usize,
}

impl DrcLimits {
    /// Default [`max_entries`](Self::max_entries).
    pub const DEFAULT_MAX_ENTRIES: usize = 8192;
    /// Default [`max_bytes`](Self::max_bytes): 16 MiB.
    pub const DEFAULT_MAX_BYTES: usize = 16 << 20;
    /// Default [`max_reply_bytes`](Self::max_reply_bytes): 4 KiB.
    pub const DEFAULT_MAX_REPLY_BYTES: usize = 4 << 10;
    /// Default [`in_progress_wait`](Self::in_progress_wait): 5 s.
    pub const DEFAULT_IN_PROGRESS_WAIT: Duration = Duration::from_secs(5);
    /// Default [`shards`](Self::shards).
    pub const DEFAULT_SHARDS: usize = 64;
}

impl Default for DrcLimits {
    fn default() -> Self {
        Self {
            max_entries: Self::DEFAULT_MAX_ENTRIES,
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_reply_bytes: Self::DEFAULT_MAX_REPLY_BYTES,
            in_progress_wait: Self::DEFAULT_IN_PROGRESS_WAIT,
            shards: Self::DEFAULT_SHARDS,
        }
    }
}

/// What identifies a retransmission (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DrcKey {
    peer: SocketAddr,
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    args_sum: u64,
}

impl DrcKey {
    /// The key of a call whose encoded arguments are `args`.
    pub fn new(peer: SocketAddr, xid: u32, prog: u32, vers: u32, proc_: u32, args: &[u8]) -> Self {
        Self {
            peer,
            xid,
            prog,
            vers,
            proc_,
            args_sum: args_checksum(args),
        }
    }

    /// The key of a call record (without its record mark, as given to
    /// `Dispatcher::dispatch`): the arguments are what follows the call header.
    /// `None` if the header does not decode (the dispatcher answers or drops such
    /// a record without running anything).
    pub fn from_call(peer: SocketAddr, record: &[u8]) -> Option<Self> {
        let mut r = Reader::new(record);
        let header = rnfs_rpc::decode_call(&mut r).ok()?;
        Some(Self::new(
            peer,
            header.xid,
            header.prog,
            header.vers,
            header.proc_,
            r.peek_rest(),
        ))
    }

    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Transaction id.
    pub fn xid(&self) -> u32 {
        self.xid
    }

    /// Program number.
    pub fn prog(&self) -> u32 {
        self.prog
    }

    /// Program version.
    pub fn vers(&self) -> u32 {
        self.vers
    }

    /// Procedure number.
    pub fn proc_(&self) -> u32 {
        self.proc_
    }

    /// The arguments' checksum.
    pub fn args_sum(&self) -> u64 {
        self.args_sum
    }
}

/// Checksum of call arguments: their length (high 32 bits, saturated) and the
/// CRC-32 of their first [`CHECKSUM_BYTES`] bytes (low 32 bits).
pub fn args_checksum(args: &[u8]) -> u64 {
    let len = u32::try_from(args.len()).unwrap_or(u32::MAX);
    let crc = crc32fast::hash(&args[..args.len().min(CHECKSUM_BYTES)]);
    u64::from(len) << 32 | u64::from(crc)
}

/// What to do with a call; see the module docs.
#[derive(Debug)]
#[must_use]
pub enum DrcBegin<'a> {
    /// A new call: run it and [`finish`](DrcGuard::finish) the guard.
    Run(DrcGuard<'a>),
    /// A retransmission of a completed call: send this reply.
    Replay(Arc<[u8]>),
    /// A duplicate to drop without reply.
    Drop,
}

/// Counters and occupancy of a [`DuplicateRequestCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrcStats {
    /// Retransmissions answered from the cache.
    pub hits: u64,
    /// Calls run with an entry ([`DrcBegin::Run`] with a cache entry).
    pub misses: u64,
    /// Calls that waited for a running original.
    pub in_progress_waits: u64,
    /// Duplicates dropped ([`DrcBegin::Drop`]).
    pub drops: u64,
    /// Completed entries evicted to make room.
    pub evictions: u64,
    /// Calls run without an entry because their shard was full of running calls.
    pub overflows: u64,
    /// Entries now (running and completed).
    pub entries: usize,
    /// Bytes of cached replies now.
    pub bytes: usize,
}

/// The duplicate request cache; see the module docs. `Send + Sync`: share it by
/// reference or `Arc`.
pub struct DuplicateRequestCache {
    shards: Box<[Shard]>,
    /// Picks the shard; random per cache so clients cannot aim at one shard.
    hasher: RandomState,
    entries_per_shard: usize,
    bytes_per_shard: usize,
    max_reply_bytes: usize,
    /// Replies up to this long are stored inline ([`INLINE_REPLY_BYTES`];
    /// smaller in tests, to exercise both kinds of storage).
    inline_bytes: usize,
    in_progress_wait: Duration,
}

struct Shard {
    synced: Mutex<Synced>,
    /// Signalled when an entry some duplicate waits for completes or is forgotten.
    finished: Condvar,
}

/// "No node" in the slab's links.
const NIL: u32 = u32::MAX;

/// One shard's state, all under its mutex.
struct Synced {
    /// Slots in `nodes` of the live entries, by their key's hash
    /// ([`Node::hash`]).
    map: HashTable<u32>,
    /// Slab of entries; grows up to `entries_per_shard`, never shrinks.
    nodes: Vec<Node>,
    /// The inline replies: `inline_bytes` bytes per slot of `nodes`, grown
    /// with it.
    inline: Vec<u8>,
    /// Vacant slots of `nodes`.
    free: Vec<u32>,
    /// Oldest completed entry (evicted first), or NIL.
    head: u32,
    /// Newest completed entry, or NIL.
    tail: u32,
    /// Sum of the cached replies' lengths; at most `bytes_per_shard`.
    bytes: usize,
    /// Next entry ticket: tells a guard whether its slot still holds its entry.
    next_ticket: u64,
    stats: DrcStats,
}

struct Node {
    key: DrcKey,
    /// `key`'s hash with the cache's hasher.
    hash: u64,
    ticket: u64,
    state: State,
    /// Links of the completed list; NIL while running or vacant.
    prev: u32,
    next: u32,
}

enum State {
    Vacant,
    Running {
        /// Duplicates waiting on the shard's condvar for this entry.
        waiters: u32,
    },
    Done(Cached),
}

/// Where a completed entry's reply is.
enum Cached {
    /// Too large to cache.
    Nothing,
    /// The first `len` bytes of the slot's part of [`Synced::inline`].
    Inline { len: u16 },
    /// Longer than the inline space.
    Heap(Arc<[u8]>),
}

impl Cached {
    fn len(&self) -> usize {
        match self {
            Cached::Nothing => 0,
            Cached::Inline { len } => usize::from(*len),
            Cached::Heap(reply) => reply.len(),
        }
    }
}

/// Which entry a guard owns.
#[derive(Debug, Clone, Copy)]
struct EntryRef {
    shard: usize,
    slot: u32,
    ticket: u64,
}

/// A call being run; see [`DrcBegin::Run`].
#[must_use = "dropping the guard forgets the call; finish it with the reply"]
pub struct DrcGuard<'a> {
    cache: &'a DuplicateRequestCache,
    /// `None` when the call runs without an entry (overflow).
    entry: Option<EntryRef>,
}

impl DuplicateRequestCache {
    /// An empty cache with `limits` (shards rounded down to a power of two and to
    /// at most `max_entries`; each shard gets an equal share of both caps, and
    /// `max_reply_bytes` is lowered to a shard's byte share if it exceeds it).
    pub fn new(limits: DrcLimits) -> Self {
        Self::with_inline_bytes(limits, INLINE_REPLY_BYTES)
    }

    fn with_inline_bytes(limits: DrcLimits, inline_bytes: usize) -> Self {
        // An inline length must fit `Cached::Inline`'s u16.
        let inline_bytes = inline_bytes.min(usize::from(u16::MAX));
        let shards = limits
            .shards
            .clamp(1, 1 << 16)
            .min(limits.max_entries.max(1));
        let shards = 1usize << (usize::BITS - 1 - shards.leading_zeros());
        let bytes_per_shard = limits.max_bytes / shards;
        Self {
            shards: (0..shards)
                .map(|_| Shard {
                    synced: Mutex::new(Synced {
                        map: HashTable::new(),
                        nodes: Vec::new(),
                        inline: Vec::new(),
                        free: Vec::new(),
                        head: NIL,
                        tail: NIL,
                        bytes: 0,
                        next_ticket: 0,
                        stats: DrcStats::default(),
                    }),
                    finished: Condvar::new(),
                })
                .collect(),
            hasher: RandomState::new(),
            // Slots are u32 and NIL is reserved.
            entries_per_shard: (limits.max_entries / shards).min(NIL as usize),
            bytes_per_shard,
            max_reply_bytes: limits.max_reply_bytes.min(bytes_per_shard),
            inline_bytes,
            in_progress_wait: limits.in_progress_wait,
        }
    }

    /// The limits in effect, after [`new`](Self::new)'s rounding: the caps are the
    /// per-shard shares times the shard count.
    pub fn limits(&self) -> DrcLimits {
        let shards = self.shards.len();
        DrcLimits {
            max_entries: self.entries_per_shard * shards,
            max_bytes: self.bytes_per_shard * shards,
            max_reply_bytes: self.max_reply_bytes,
            in_progress_wait: self.in_progress_wait,
            shards,
        }
    }

    /// Looks a call up; may block up to [`DrcLimits::in_progress_wait`] if its
    /// original is running. See the module docs.
    pub fn begin(&self, key: DrcKey) -> DrcBegin<'_> {
        let hash = self.hasher.hash_one(key);
        // Bits 32 and up: the table inside the shard indexes by the low bits
        // and tags by the top seven, so the shard's choice stays independent
        // of both.
        let shard_index = (hash >> 32) as usize & (self.shards.len() - 1);
        let shard = &self.shards[shard_index];
        let mut synced = lock(&shard.synced);
        // Set once this call has waited for a running original.
        let mut deadline: Option<Instant> = None;
        loop {
            let Some(slot) = synced.find(hash, &key) else {
                // A new call, or its original was forgotten while we waited.
                return self.run(&mut synced, shard_index, key, hash);
            };
            let node = &synced.nodes[slot as usize];
            let ticket = node.ticket;
            match &node.state {
                State::Done(Cached::Heap(reply)) => {
                    let reply = Arc::clone(reply);
                    synced.stats.hits += 1;
                    return DrcBegin::Replay(reply);
                }
                &State::Done(Cached::Inline { len }) => {
                    // A copy under the lock, of at most INLINE_REPLY_BYTES; only
                    // retransmissions pay it.
                    let at = slot as usize * self.inline_bytes;
                    let reply = Arc::from(&synced.inline[at..at + usize::from(len)]);
                    synced.stats.hits += 1;
                    return DrcBegin::Replay(reply);
                }
                State::Done(Cached::Nothing) if deadline.is_some() => {
                    synced.stats.drops += 1;
                    return DrcBegin::Drop;
                }
                State::Done(Cached::Nothing) => {
                    // Completed without a cached reply: run again (knfsd RC_NOCACHE).
                    synced.unlink(slot);
                    let ticket = synced.new_ticket();
                    let node = &mut synced.nodes[slot as usize];
                    node.ticket = ticket;
                    node.state = State::Running { waiters: 0 };
                    synced.stats.misses += 1;
                    return DrcBegin::Run(self.guard(shard_index, slot, ticket));
                }
                State::Running { .. } => {
                    let now = Instant::now();
                    let until = match deadline {
                        Some(until) => until,
                        None => {
                            synced.stats.in_progress_waits += 1;
                            *deadline.insert(now + self.in_progress_wait)
                        }
                    };
                    let Some(left) = until.checked_duration_since(now).filter(|d| !d.is_zero())
                    else {
                        synced.stats.drops += 1;
                        return DrcBegin::Drop;
                    };
                    synced.nodes[slot as usize].add_waiters(1);
                    synced = shard
                        .finished
                        .wait_timeout(synced, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                    // Still the same entry (not completed, forgotten or reused)?
                    let node = &mut synced.nodes[slot as usize];
                    if node.ticket == ticket {
                        node.add_waiters(-1);
                    }
                }
                State::Vacant => {
                    debug_assert!(false, "map points at a vacant slot");
                    return DrcBegin::Drop;
                }
            }
        }
    }

    /// Counters and occupancy, summed over the shards.
    pub fn stats(&self) -> DrcStats {
        let mut total = DrcStats::default();
        for shard in self.shards.iter() {
            let s = lock(&shard.synced);
            total.hits += s.stats.hits;
            total.misses += s.stats.misses;
            total.in_progress_waits += s.stats.in_progress_waits;
            total.drops += s.stats.drops;
            total.evictions += s.stats.evictions;
            total.overflows += s.stats.overflows;
            total.entries += s.map.len();
            total.bytes += s.bytes;
        }
        total
    }

    /// Adds a running entry for `key`, evicting the oldest completed one if the
    /// shard is full; runs without an entry if every entry is running.
    fn run(&self, synced: &mut Synced, shard: usize, key: DrcKey, hash: u64) -> DrcBegin<'_> {
        if synced.map.len() >= self.entries_per_shard && !synced.evict_oldest() {
            synced.stats.overflows += 1;
            return DrcBegin::Run(DrcGuard {
                cache: self,
                entry: None,
            });
        }
        let ticket = synced.new_ticket();
        let node = Node {
            key,
            hash,
            ticket,
            state: State::Running { waiters: 0 },
            prev: NIL,
            next: NIL,
        };
        let slot = match synced.free.pop() {
            Some(slot) => {
                synced.nodes[slot as usize] = node;
                slot
            }
            None => {
                // At most `entries_per_shard` nodes, and `new` caps shards so that a
                // shard's share fits in u32 for any realistic `max_entries`.
                let slot = u32::try_from(synced.nodes.len()).unwrap_or(NIL);
                synced.nodes.push(node);
                let inline_len = synced.nodes.len() * self.inline_bytes;
                synced.inline.resize(inline_len, 0);
                slot
            }
        };
        let Synced { map, nodes, .. } = synced;
        map.insert_unique(hash, slot, |&s| nodes[s as usize].hash);
        synced.stats.misses += 1;
        DrcBegin::Run(self.guard(shard, slot, ticket))
    }

    fn guard(&self, shard: usize, slot: u32, ticket: u64) -> DrcGuard<'_> {
        DrcGuard {
            cache: self,
            entry: Some(EntryRef {
                shard,
                slot,
                ticket,
            }),
        }
    }
}

impl Synced {
    /// The slot of the live entry for `key`, whose hash is `hash`.
    fn find(&self, hash: u64, key: &DrcKey) -> Option<u32> {
        self.map
            .find(hash, |&slot| self.nodes[slot as usize].key == *key)
            .copied()
    }

    fn new_ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.next_ticket
    }

    /// Evicts the oldest completed entry; `false` if there is none.
    fn evict_oldest(&mut self) -> bool {
        let slot = self.head;
        if slot == NIL {
            return false;
        }
        self.unlink(slot);
        self.release(slot);
        self.stats.evictions += 1;
        true
    }

    /// Removes the entry in `slot` (not linked) from the map and frees the slot.
    fn release(&mut self, slot: u32) {
        let node = &mut self.nodes[slot as usize];
        if let State::Done(reply) = std::mem::replace(&mut node.state, State::Vacant) {
            // Dropping a `Heap` reply touches its (cold) allocation; an inline
            // one is just forgotten.
            self.bytes -= reply.len();
        }
        let hash = node.hash;
        if let Ok(entry) = self.map.find_entry(hash, |&s| s == slot) {
            entry.remove();
        }
        self.free.push(slot);
    }

    /// Appends `slot` to the completed list (newest).
    fn push_back(&mut self, slot: u32) {
        let tail = self.tail;
        let node = &mut self.nodes[slot as usize];
        node.prev = tail;
        node.next = NIL;
        match tail {
            NIL => self.head = slot,
            t => self.nodes[t as usize].next = slot,
        }
        self.tail = slot;
    }

    /// Takes `slot` off the completed list.
    fn unlink(&mut self, slot: u32) {
        let Node { prev, next, .. } = self.nodes[slot as usize];
        match prev {
            NIL => self.head = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n as usize].prev = prev,
        }
        let node = &mut self.nodes[slot as usize];
        node.prev = NIL;
        node.next = NIL;
    }

    /// The running entry `entry` refers to, with its waiter count, if it still is.
    fn running(&mut self, entry: EntryRef) -> Option<u32> {
        let node = self.nodes.get(entry.slot as usize)?;
        match node.state {
            State::Running { waiters } if node.ticket == entry.ticket => Some(waiters),
            _ => None,
        }
    }
}

impl Node {
    /// Adjusts the waiter count of a running entry (no-op otherwise).
    fn add_waiters(&mut self, delta: i32) {
        if let State::Running { waiters } = &mut self.state {
            *waiters = waiters.saturating_add_signed(delta);
        }
    }
}

impl DrcGuard<'_> {
    /// Records the call's reply (cached if at most
    /// [`DrcLimits::max_reply_bytes`]) and wakes any duplicate waiting for it.
    pub fn finish(mut self, reply: &[u8]) {
        let Some(entry) = self.entry.take() else {
            return;
        };
        let cache = self.cache;
        let len = reply.len();
        let fits = len <= cache.max_reply_bytes;
        let inline = fits && len <= cache.inline_bytes;
        // A heap copy is made outside the lock; an inline one (a few cache
        // lines) under it.
        let heap: Option<Arc<[u8]>> = (fits && !inline).then(|| reply.into());
        let shard = &cache.shards[entry.shard];
        let mut synced = lock(&shard.synced);
        let Some(waiters) = synced.running(entry) else {
            return;
        };
        let mut fits = fits;
        if fits {
            while synced.bytes + len > cache.bytes_per_shard {
                if !synced.evict_oldest() {
                    break;
                }
            }
            // Cannot fail (a reply fits an empty shard); stay within the cap.
            fits = synced.bytes + len <= cache.bytes_per_shard;
        }
        let cached = match (fits, heap) {
            (false, _) => Cached::Nothing,
            (true, Some(heap)) => Cached::Heap(heap),
            (true, None) => {
                let at = entry.slot as usize * cache.inline_bytes;
                synced.inline[at..at + len].copy_from_slice(reply);
                // `len <= inline_bytes`, which `with_inline_bytes` keeps within u16.
                Cached::Inline {
                    len: u16::try_from(len).unwrap_or(u16::MAX),
                }
            }
        };
        synced.bytes += cached.len();
        synced.nodes[entry.slot as usize].state = State::Done(cached);
        synced.push_back(entry.slot);
        drop(synced);
        if waiters > 0 {
            shard.finished.notify_all();
        }
    }

    /// Whether the call has a cache entry (`false` after an overflow: a
    /// retransmission of it would run again).
    pub fn is_cached(&self) -> bool {
        self.entry.is_some()
    }
}

impl Drop for DrcGuard<'_> {
    /// Forgets an unfinished call, so that a retransmission runs it.
    fn drop(&mut self) {
        let Some(entry) = self.entry.take() else {
            return;
        };
        let shard = &self.cache.shards[entry.shard];
        let mut synced = lock(&shard.synced);
        let Some(waiters) = synced.running(entry) else {
            return;
        };
        synced.release(entry.slot);
        drop(synced);
        if waiters > 0 {
            shard.finished.notify_all();
        }
    }
}

fn lock(m: &Mutex<Synced>) -> MutexGuard<'_, Synced> {
    // Nothing under the lock panics short of a bug; the state stays usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl fmt::Debug for DuplicateRequestCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DuplicateRequestCache")
            .field("limits", &self.limits())
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for DrcGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DrcGuard")
            .field("entry", &self.entry)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    impl Synced {
        /// Every structural invariant of a shard.
        fn check(&self, entries_cap: usize, bytes_cap: usize) {
            assert!(self.map.len() <= entries_cap);
            assert!(self.bytes <= bytes_cap);
            let live = self
                .nodes
                .iter()
                .filter(|n| !matches!(n.state, State::Vacant));
            assert_eq!(live.count(), self.map.len());
            assert_eq!(self.map.len() + self.free.len(), self.nodes.len());
            for &slot in &self.map {
                let node = &self.nodes[slot as usize];
                assert!(!matches!(node.state, State::Vacant));
                assert_eq!(self.find(node.hash, &node.key), Some(slot));
            }
            // The completed list, both ways, holds exactly the Done nodes.
            let (mut forward, mut bytes, mut prev, mut at) = (0, 0, NIL, self.head);
            while at != NIL {
                let node = &self.nodes[at as usize];
                assert_eq!(node.prev, prev);
                match &node.state {
                    State::Done(reply) => bytes += reply.len(),
                    _ => panic!("a running or vacant node is linked"),
                }
                forward += 1;
                (prev, at) = (at, node.next);
            }
            assert_eq!(prev, self.tail);
            let done = self
                .nodes
                .iter()
                .filter(|n| matches!(n.state, State::Done(_)));
            assert_eq!(done.count(), forward);
            assert_eq!(bytes, self.bytes);
        }
    }

    #[test]
    fn bookkeeping_per_entry_is_as_documented() {
        // Slab node + table slot (u32, control byte) at the table's 7/8 load.
        let map_slot = (size_of::<u32>() + 1) * 8 / 7;
        let per_entry = size_of::<Node>() + map_slot + size_of::<u32>();
        assert!(per_entry < 200, "{per_entry} bytes");
        // The module docs' total for the defaults, in KiB.
        let entries = DrcLimits::DEFAULT_MAX_ENTRIES;
        let extra = entries * (per_entry + INLINE_REPLY_BYTES) / 1024;
        assert!(extra < 4300, "{extra} KiB");
    }

    #[test]
    fn random_operations_keep_the_shard_consistent() {
        // Replies of 0..50 bytes: inline up to 16, on the heap up to 40, not
        // cached above.
        let drc = DuplicateRequestCache::with_inline_bytes(
            DrcLimits {
                max_entries: 16,
                max_bytes: 200,
                max_reply_bytes: 40,
                in_progress_wait: Duration::ZERO,
                shards: 1,
            },
            16,
        );
        // The reply each xid was last finished with (what a replay must give).
        let mut finished: std::collections::HashMap<u32, Vec<u8>> = Default::default();
        let peer: SocketAddr = "127.0.0.1:700".parse().unwrap();
        let mut running: Vec<(u32, DrcGuard<'_>)> = Vec::new();
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let r = next();
            let xid = (r % 40) as u32;
            let key = DrcKey::new(peer, xid, 1, 1, 1, &[]);
            match (r >> 8) % 4 {
                // Begin (a zero wait drops duplicates of running calls at once).
                0 | 1 => match drc.begin(key) {
                    DrcBegin::Run(g) => running.push((xid, g)),
                    DrcBegin::Replay(reply) => {
                        assert_eq!(Some(&reply[..]), finished.get(&xid).map(|r| &r[..]));
                        assert!(reply.len() <= 40);
                    }
                    DrcBegin::Drop => {}
                },
                2 if !running.is_empty() => {
                    let (xid, g) = running.swap_remove((r >> 16) as usize % running.len());
                    let len = (r >> 32) as usize % 50;
                    let reply: Vec<u8> = (0..len)
                        .map(|i| (xid as u8) ^ (r >> 40) as u8 ^ i as u8)
                        .collect();
                    g.finish(&reply);
                    finished.insert(xid, reply);
                }
                _ if !running.is_empty() => {
                    drop(running.swap_remove((r >> 16) as usize % running.len()).1);
                }
                _ => {}
            }
            lock(&drc.shards[0].synced).check(16, 200);
        }
        let st = drc.stats();
        assert!(st.hits > 0 && st.evictions > 0 && st.drops > 0, "{st:?}");
    }
}

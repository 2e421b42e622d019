//! The slot table of one connection: which calls are in flight, and where
//! each reply lands.
//!
//! **Slots.** A call owns one slot from reservation to release. Its XID's low
//! `slot_bits` bits are the slot index, the high bits a per-slot generation
//! bumped on every reuse, so the reader finds the slot of a reply in O(1) and
//! a late reply for an earlier call of the same slot fails the XID check.
//!
//! **Slot state** is one word: `xid << 8 | phase`.
//! ```text
//!   FREE --begin (owner)--> WAITING --deliver (reader: CAS)--> DELIVERING
//!     ^                       |                                   | store
//!     |                 abandon (owner: CAS)                       v
//!     +------- release (owner) <------------------------------- DONE
//! ```
//! Only the thread whose CAS moved `WAITING` to `DELIVERING` writes the reply
//! cell; only the owner, after seeing `DONE`, reads it. The CAS compares the
//! whole word, XID included, so a stale reply cannot land in a reused slot.
//!
//! **Free slots** are a lock-free stack (a Treiber stack of indices with an
//! ABA tag). The table starts with [`PREALLOCATED`] slots in circulation and
//! grows on demand up to its capacity (Linux: 2, then up to
//! `tcp_max_slot_table_entries`).
//!
//! **Backlog** (Linux `xprt_add_backlog`, `XPRT_CONGESTED`): when no slot is
//! free, the caller queues a [`Ticket`] under the backlog mutex and sets
//! `congested`. A releaser that sees `congested` hands its slot straight to
//! the oldest ticket; while `congested` is set, newcomers queue behind the
//! backlog instead of taking a slot (no barging). The two sides form a Dekker
//! pair, each with a `SeqCst` fence: the reserver stores `congested` then
//! re-checks the free stack; the releaser pushes on the free stack then
//! re-checks `congested`. At least one of them sees the other, so a slot is
//! never left free while a ticket waits.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::error::ClientError;
use crate::lockstat::Site;

use super::sync::{fence, lock, park, spin_wait, AtomicBool, AtomicU32, AtomicU64, Ordering};
use super::sync::{Mutex, MutexGuard, UnsafeCell, Waiter};

/// Slots in circulation when a table is created.
pub(crate) const PREALLOCATED: u32 = 2;
/// The most slots a connection may have (16 XID bits for the index).
pub(crate) const MAX_SLOTS: u32 = 1 << 16;

const PHASE_MASK: u64 = 0xff;
const FREE: u64 = 0;
const WAITING: u64 = 1;
const DELIVERING: u64 = 2;
const DONE: u64 = 3;

fn pack(xid: u32, phase: u64) -> u64 {
    (u64::from(xid) << 8) | phase
}

fn xid_of(state: u64) -> u32 {
    // Truncation intended: the XID is the 32 bits above the phase byte.
    (state >> 8) as u32
}

/// What a reader or the shutdown path leaves in a slot for its owner.
#[derive(Debug)]
pub(crate) enum Delivery {
    /// The reply record (record marks removed), moved in by the reader.
    Reply(Vec<u8>),
    /// The call failed on the connection (e.g. the server broke the record
    /// stream).
    Failed(ClientError),
}

/// One call's place in the table.
#[derive(Debug)]
pub(crate) struct Slot {
    /// `xid << 8 | phase` (module docs). Written by the owner (begin,
    /// abandon, release) and by the one deliverer whose CAS wins.
    state: AtomicU64,
    /// Next index + 1 on the free stack (0: none). Written by the pusher
    /// before its Release CAS on the stack head.
    next_free: AtomicU32,
    /// The reply. Written only in `DELIVERING` by the CAS winner, read only
    /// by the owner after an Acquire load of `DONE`.
    reply: UnsafeCell<Option<Delivery>>,
    /// The owner's wake-up registration (a thread or an async task).
    pub(crate) waiter: Waiter,
    /// When the owner wants to be woken to retransmit, in ms since the
    /// connection was created (for async owners, woken by the reader's tick).
    pub(crate) deadline_ms: AtomicU64,
    /// The owner's part in reading the socket (`lead.rs`): `LEAD_NONE`,
    /// `LEAD_WANT` (a blocking owner asleep, willing to read) or `LEAD_BATON`
    /// (a releasing reader picked it: it must read or pass the baton on).
    lead: AtomicU32,
    /// This slot's index in its table.
    index: u32,
    /// Next index + 1 on the want stack (0: none).
    next_want: AtomicU32,
    /// This slot has an entry on the want stack, or a releaser has popped
    /// its entry and will still offer it the baton (see [`Shared`]).
    listed: AtomicBool,
    /// The table's counters and want stack.
    shared: Arc<Shared>,
}

/// What the slots of one table update together, so the questions a releaser
/// and the reader ask per call ("does a call wait?", "does an owner want to
/// read, and which?") are answered in O(1), not by a walk over the slots.
#[derive(Debug)]
struct Shared {
    /// Slots in `WAITING`.
    waiting: AtomicU32,
    /// Slots that may want the baton. Every `LEAD_WANT` slot has an entry
    /// (or a releaser has popped it and still offers the baton); an entry
    /// can be stale (its owner took the role itself, or left): the releaser
    /// popping it finds out by the failed `WANT -> BATON` CAS and drops it.
    /// `listed` keeps one entry per slot at most, so the stack is bounded
    /// and each stale entry costs one pop.
    wants: IndexStack,
}

const LEAD_NONE: u32 = 0;
const LEAD_WANT: u32 = 1;
const LEAD_BATON: u32 = 2;

// SAFETY: `reply` is the only non-`Sync` field. It is written only by the
// thread whose CAS moved the state from WAITING to DELIVERING (one thread per
// call) and read only by the owner after it observed DONE with Acquire, which
// synchronises with that thread's Release store of DONE; the next write
// happens only after the owner released the slot and a new owner published
// WAITING again (a Release/Acquire chain through the free stack and the
// state word). So accesses never overlap. `Delivery` is `Send`.
#[allow(unsafe_code)]
unsafe impl Sync for Slot {}

impl Slot {
    fn new(index: u32, xid_before_first_use: u32, shared: Arc<Shared>) -> Self {
        Self {
            state: AtomicU64::new(pack(xid_before_first_use, FREE)),
            next_free: AtomicU32::new(0),
            reply: UnsafeCell::new(None),
            waiter: Waiter::new(),
            deadline_ms: AtomicU64::new(u64::MAX),
            lead: AtomicU32::new(LEAD_NONE),
            index,
            next_want: AtomicU32::new(0),
            listed: AtomicBool::new(false),
            shared,
        }
    }

    /// Owner: announces that it will read the socket if the role is free.
    pub(crate) fn want_lead(&self) {
        // SeqCst (both): the store half of the Dekker pair with a releasing
        // reader (`lead.rs`): `WANT` and the stack entry are visible before
        // the owner looks at the role. Swaps rather than stores: see
        // `ReadRole::wake_reader`.
        self.lead.swap(LEAD_WANT, Ordering::SeqCst);
        // Already listed: the entry is on the stack, or its popper has yet
        // to clear `listed` and then offers the baton, seeing our `WANT`.
        if !self.listed.swap(true, Ordering::SeqCst) {
            self.shared.wants.push(self.index, &self.next_want);
        }
    }

    /// Owner: it took the read role; a baton handed to it meanwhile is spent.
    /// Its stack entry, if any, goes stale.
    pub(crate) fn clear_lead(&self) {
        self.lead.swap(LEAD_NONE, Ordering::SeqCst);
    }

    /// Owner, before releasing the slot: whether it was handed the baton
    /// (and so must pass it on).
    pub(crate) fn leave_lead(&self) -> bool {
        self.lead.swap(LEAD_NONE, Ordering::SeqCst) == LEAD_BATON
    }

    /// A releasing reader: hands the baton to this owner if it wants it.
    fn offer_baton(&self) -> bool {
        self.lead
            .compare_exchange(LEAD_WANT, LEAD_BATON, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// Owner: starts a new call in this slot and returns its XID.
    fn begin(&self, xid_step: u32) -> u32 {
        // Relaxed: the owner is the only writer while the slot is FREE.
        let xid = xid_of(self.state.load(Ordering::Relaxed)).wrapping_add(xid_step);
        // Release: a deliverer that sees WAITING (Acquire CAS) also sees the
        // previous owner's take of the reply cell (chained through the free
        // stack), so its write cannot overlap that take.
        self.state.store(pack(xid, WAITING), Ordering::Release);
        // SeqCst: the slot waits before its owner asks for a reader
        // (`ReadRole::ensure_reader`'s Dekker pair with `release`).
        self.shared.waiting.fetch_add(1, Ordering::SeqCst);
        xid
    }

    /// This call no longer waits (delivered or abandoned).
    fn stop_waiting(&self) {
        // SeqCst: read in the Dekker pair of `ReadRole::release`.
        self.shared.waiting.fetch_sub(1, Ordering::SeqCst);
    }

    /// Deliverer (reader or shutdown): puts `d` in the slot if it still waits
    /// for `xid`, and wakes the owner. `false` (and `d` dropped) otherwise.
    pub(crate) fn deliver(&self, xid: u32, d: Delivery) -> bool {
        // Acquire: pairs with `begin`'s Release (see there).
        if self
            .state
            .compare_exchange(
                pack(xid, WAITING),
                pack(xid, DELIVERING),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return false;
        }
        self.stop_waiting();
        #[allow(unsafe_code)]
        self.reply.with_mut(|p| {
            // SAFETY: our CAS won WAITING -> DELIVERING, which only one thread
            // can do per call, and the owner reads the cell only after DONE
            // (see `Slot`'s `Sync`).
            unsafe { *p = Some(d) }
        });
        // Release: the owner's Acquire load of DONE sees the cell written.
        self.state.store(pack(xid, DONE), Ordering::Release);
        self.waiter.wake();
        true
    }

    /// The XID this slot waits for, if its call is outstanding.
    pub(crate) fn waiting_xid(&self) -> Option<u32> {
        // Acquire: a deliverer that then CASes needs nothing more; this is a
        // snapshot for the connection-failure walk.
        let s = self.state.load(Ordering::Acquire);
        (s & PHASE_MASK == WAITING).then_some(xid_of(s))
    }

    /// Owner: whether the reply (or failure) for `xid` has been delivered.
    pub(crate) fn is_done(&self, xid: u32) -> bool {
        // Acquire: pairs with `deliver`'s Release store of DONE.
        self.state.load(Ordering::Acquire) == pack(xid, DONE)
    }

    /// Owner: takes the delivery for `xid` if it has arrived.
    pub(crate) fn take_if_done(&self, xid: u32) -> Option<Delivery> {
        if !self.is_done(xid) {
            return None;
        }
        self.take()
    }

    fn take(&self) -> Option<Delivery> {
        #[allow(unsafe_code)]
        self.reply.with_mut(|p| {
            // SAFETY: called by the owner after an Acquire load saw DONE: the
            // deliverer's write happened before, and no one else writes the
            // cell until the owner releases the slot.
            unsafe { (*p).take() }
        })
    }

    /// Owner: gives up waiting for `xid` (timeout, shutdown, drop). If a
    /// delivery won the race, returns it (the caller may still use it).
    /// Afterwards no one will write the cell for this call.
    pub(crate) fn abandon(&self, xid: u32) -> Option<Delivery> {
        // Acquire on failure paths below: pairs with `deliver`'s Release.
        if self
            .state
            .compare_exchange(
                pack(xid, WAITING),
                pack(xid, FREE),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            self.stop_waiting();
            return None;
        }
        loop {
            match self.state.load(Ordering::Acquire) {
                s if s == pack(xid, DONE) => return self.take(),
                s if s == pack(xid, DELIVERING) => spin_wait(),
                // Already FREE for this XID (abandoned before): nothing to take.
                _ => return None,
            }
        }
    }

    /// Owner: marks the slot FREE before it is released.
    fn reset(&self) {
        // Relaxed: the owner has exclusive use; the free stack's Release CAS
        // publishes this to the next owner.
        let xid = xid_of(self.state.load(Ordering::Relaxed));
        self.state.store(pack(xid, FREE), Ordering::Relaxed);
    }
}

/// A caller waiting in the backlog for a slot.
#[derive(Debug)]
pub(crate) struct Ticket {
    /// `TICKET_WAITING`, `TICKET_CANCELLED`, `TICKET_SHUTDOWN`, or the index of
    /// the slot handed over. Moved from WAITING by exactly one CAS.
    state: AtomicU32,
    /// The waiting caller's registration.
    pub(crate) waiter: Waiter,
}

const TICKET_WAITING: u32 = u32::MAX;
const TICKET_CANCELLED: u32 = u32::MAX - 1;
const TICKET_SHUTDOWN: u32 = u32::MAX - 2;

/// What a backlog ticket holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TicketState {
    /// Still queued.
    Waiting,
    /// A slot was handed over: the caller owns it.
    Granted(u32),
    /// The connection is shutting down.
    Shutdown,
}

impl Ticket {
    fn new() -> Self {
        Self {
            state: AtomicU32::new(TICKET_WAITING),
            waiter: Waiter::new(),
        }
    }

    /// Hands slot `idx` over; `false` if the ticket was cancelled or shut.
    fn offer(&self, value: u32) -> bool {
        // Release: the new owner's Acquire load sees the slot's FREE state
        // and everything the releaser did before.
        self.state
            .compare_exchange(TICKET_WAITING, value, Ordering::Release, Ordering::Relaxed)
            .is_ok()
    }

    /// Blocks the calling thread until a slot is handed over (`Some`) or
    /// the connection shuts down (`None`).
    pub(crate) fn wait_blocking(&self) -> Option<u32> {
        loop {
            // Register before checking: a hand-over in between wakes us.
            self.waiter.register_thread();
            match self.state() {
                TicketState::Granted(idx) => return Some(idx),
                TicketState::Shutdown => return None,
                TicketState::Waiting => park(None),
            }
        }
    }

    /// The ticket's state, for its waiter.
    pub(crate) fn state(&self) -> TicketState {
        // Acquire: pairs with `offer`'s Release.
        match self.state.load(Ordering::Acquire) {
            TICKET_WAITING | TICKET_CANCELLED => TicketState::Waiting,
            TICKET_SHUTDOWN => TicketState::Shutdown,
            idx => TicketState::Granted(idx),
        }
    }

    /// The waiter gives up. Returns a slot it was handed meanwhile (which
    /// the caller must release).
    #[cfg_attr(
        any(not(feature = "async"), loom),
        allow(dead_code, reason = "only async callers cancel")
    )]
    pub(crate) fn cancel(&self) -> Option<u32> {
        match self.state.compare_exchange(
            TICKET_WAITING,
            TICKET_CANCELLED,
            Ordering::Acquire,
            Ordering::Acquire,
        ) {
            Ok(_) | Err(TICKET_CANCELLED | TICKET_SHUTDOWN) => None,
            Err(idx) => Some(idx),
        }
    }
}

/// The outcome of [`SlotTable::reserve`].
#[derive(Debug)]
pub(crate) enum Reservation {
    /// This slot is now the caller's.
    Slot(u32),
    /// Every slot is in use: wait on the ticket.
    Queued(Arc<Ticket>),
    /// The connection is shutting down.
    Shutdown,
}

/// Data behind the backlog mutex.
#[derive(Debug, Default)]
struct Backlog {
    /// Oldest first. Cancelled tickets stay until they reach the front.
    queue: VecDeque<Arc<Ticket>>,
    /// Set at shutdown: no more tickets.
    closed: bool,
}

/// The slots of one connection.
#[derive(Debug)]
pub(crate) struct SlotTable {
    slots: Box<[Slot]>,
    /// Low XID bits holding the slot index.
    slot_bits: u32,
    /// Slots in circulation; grows by CAS up to `slots.len()`, never shrinks.
    allocated: AtomicU32,
    /// Free slots.
    free: IndexStack,
    /// `XPRT_CONGESTED`: tickets may be waiting. Set and cleared under the
    /// backlog mutex; read without it (module docs for the fence pairing).
    congested: AtomicBool,
    backlog: Mutex<Backlog>,
    /// Counters and the want stack, shared with the slots.
    shared: Arc<Shared>,
}

impl SlotTable {
    /// A table of at most `capacity` slots (clamped to 1..=[`MAX_SLOTS`]);
    /// the first XIDs derive from `seed`.
    pub(crate) fn new(capacity: u32, seed: u32) -> Self {
        let capacity = capacity.clamp(1, MAX_SLOTS);
        let slot_bits = u32::BITS - (capacity - 1).leading_zeros();
        let step = 1u32 << slot_bits;
        let shared = Arc::new(Shared {
            waiting: AtomicU32::new(0),
            wants: IndexStack::new(),
        });
        let slots = (0..capacity)
            .map(|i| {
                let xid = (seed << slot_bits | i).wrapping_sub(step);
                Slot::new(i, xid, Arc::clone(&shared))
            })
            .collect();
        let table = Self {
            slots,
            slot_bits,
            allocated: AtomicU32::new(0),
            free: IndexStack::new(),
            congested: AtomicBool::new(false),
            backlog: Mutex::new(Backlog::default()),
            shared,
        };
        let pre = PREALLOCATED.min(capacity);
        for i in (0..pre).rev() {
            table.push_free(i);
        }
        // Relaxed: the table is not shared yet.
        table.allocated.store(pre, Ordering::Relaxed);
        table
    }

    /// The most slots this table may use.
    pub(crate) fn capacity(&self) -> u32 {
        // Never truncates: clamped to MAX_SLOTS in `new`.
        self.slots.len() as u32
    }

    /// Slots in circulation now.
    pub(crate) fn allocated(&self) -> u32 {
        // Acquire: a slot index below this value is initialised (trivially:
        // all are; kept Acquire for readers that index by it).
        self.allocated.load(Ordering::Acquire)
    }

    /// The slots in circulation.
    fn circulating(&self) -> impl Iterator<Item = &Slot> {
        self.slots.iter().take(self.allocated() as usize)
    }

    /// The slot at `idx`.
    pub(crate) fn slot(&self, idx: u32) -> Option<&Slot> {
        self.slots.get(idx as usize)
    }

    /// The slot a reply with `xid` belongs to, if that slot is in circulation.
    pub(crate) fn slot_for_xid(&self, xid: u32) -> Option<&Slot> {
        let idx = xid & ((1u32 << self.slot_bits) - 1);
        if idx >= self.allocated() {
            return None;
        }
        self.slot(idx)
    }

    /// Owner: starts a call in slot `idx`; returns its XID.
    pub(crate) fn begin(&self, idx: u32) -> Option<u32> {
        let step = 1u32 << self.slot_bits;
        self.slot(idx).map(|s| s.begin(step))
    }

    /// A slot if one is free now and nobody is queued; never queues.
    pub(crate) fn try_reserve(&self) -> Option<u32> {
        // SeqCst: as in `reserve`. A miss is harmless: the caller does not
        // wait, so no wake-up can be lost.
        if self.congested.load(Ordering::SeqCst) {
            return None;
        }
        self.try_alloc()
    }

    /// Takes a slot without waiting, unless callers are queued (no barging).
    pub(crate) fn reserve(&self) -> Reservation {
        // SeqCst: one half of the Dekker pair with `release` (module docs):
        // a newcomer that sees `congested` clear may take a slot directly.
        if !self.congested.load(Ordering::SeqCst) {
            if let Some(idx) = self.try_alloc() {
                return Reservation::Slot(idx);
            }
        }
        let mut backlog = lock(&self.backlog, Site::Backlog);
        if backlog.closed {
            return Reservation::Shutdown;
        }
        if live_front(&mut backlog.queue).is_none() {
            // SeqCst store + fence: the releaser either sees `congested` after
            // its push, or we see its push here.
            self.congested.store(true, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if let Some(idx) = self.try_alloc() {
                self.congested.store(false, Ordering::SeqCst);
                return Reservation::Slot(idx);
            }
        }
        let ticket = Arc::new(Ticket::new());
        backlog.queue.push_back(Arc::clone(&ticket));
        Reservation::Queued(ticket)
    }

    /// Owner: gives slot `idx` up. The oldest ticket gets it if there is one;
    /// otherwise it goes back on the free stack.
    pub(crate) fn release(&self, idx: u32) {
        let Some(slot) = self.slot(idx) else {
            return;
        };
        slot.reset();
        // SeqCst: with the reserver's store + fence (module docs).
        if self.congested.load(Ordering::SeqCst) && self.hand_over(idx) {
            return;
        }
        self.push_free(idx);
        // SeqCst fence: our push is visible before we read `congested`, so a
        // reserver that missed the push has set `congested` and we see it.
        fence(Ordering::SeqCst);
        if self.congested.load(Ordering::SeqCst) {
            self.hand_over_free();
        }
    }

    /// Hands `idx` to the oldest live ticket. `false` if none.
    fn hand_over(&self, idx: u32) -> bool {
        self.offer_to_oldest(lock(&self.backlog, Site::Backlog), idx)
    }

    /// Under the backlog mutex: hands `idx` to the oldest ticket that takes
    /// it and wakes that caller (after unlocking), clearing `congested` once
    /// no live ticket is left. `false` (and `congested` cleared) if none.
    fn offer_to_oldest(&self, mut backlog: MutexGuard<'_, Backlog>, idx: u32) -> bool {
        while let Some(ticket) = backlog.queue.pop_front() {
            if ticket.offer(idx) {
                if live_front(&mut backlog.queue).is_none() {
                    self.congested.store(false, Ordering::SeqCst);
                }
                drop(backlog);
                ticket.waiter.wake();
                return true;
            }
        }
        self.congested.store(false, Ordering::SeqCst);
        false
    }

    /// A slot was pushed while tickets wait: take one from the free stack
    /// and hand it to the oldest ticket.
    fn hand_over_free(&self) {
        let mut backlog = lock(&self.backlog, Site::Backlog);
        if live_front(&mut backlog.queue).is_none() {
            self.congested.store(false, Ordering::SeqCst);
            return;
        }
        // Another thread may have taken the pushed slot; it will see
        // `congested` when it releases the slot, so no wake-up is lost.
        let Some(idx) = self.pop_free() else {
            return;
        };
        if !self.offer_to_oldest(backlog, idx) {
            self.push_free(idx);
        }
    }

    /// Refuses new tickets and wakes every queued one with `Shutdown`.
    pub(crate) fn close(&self) {
        let tickets = {
            let mut backlog = lock(&self.backlog, Site::Control);
            backlog.closed = true;
            std::mem::take(&mut backlog.queue)
        };
        for t in tickets {
            if t.offer(TICKET_SHUTDOWN) {
                t.waiter.wake();
            }
        }
    }

    /// Wakes every slot's owner (after a reconnect, at shutdown, or on the
    /// reader's tick for owners whose deadline `now_ms` passed).
    pub(crate) fn wake_owners(&self, due_by_ms: Option<u64>) {
        for s in self.circulating() {
            let due = match due_by_ms {
                None => true,
                // Relaxed: a hint; a late wake is caught by the next tick.
                Some(now) => {
                    s.waiting_xid().is_some() && s.deadline_ms.load(Ordering::Relaxed) <= now
                }
            };
            if due {
                s.waiter.wake();
            }
        }
    }

    /// Hands the baton to one owner that wants to read and wakes it.
    /// `false` if none wants to. O(1) amortised: each stale entry popped
    /// here was pushed once. The pop is the load half of the Dekker pair
    /// with `Slot::want_lead` (after the releaser's fence, `lead.rs`).
    pub(crate) fn pass_baton(&self) -> bool {
        while let Some(idx) = self
            .shared
            .wants
            .pop(|i| self.slot(i).map(|s| &s.next_want))
        {
            let Some(s) = self.slot(idx) else {
                continue;
            };
            // SeqCst: before the CAS, so an owner that saw `listed` set (and
            // did not push) has its `WANT` seen by the CAS below.
            s.listed.store(false, Ordering::SeqCst);
            if s.offer_baton() {
                s.waiter.wake();
                return true;
            }
        }
        false
    }

    /// Whether some owner may sleep willing to read (a stale entry makes
    /// this true once: the next `pass_baton` drops it).
    pub(crate) fn has_want(&self) -> bool {
        !self.shared.wants.is_empty()
    }

    /// Whether some call still waits for its reply.
    pub(crate) fn any_waiting(&self) -> bool {
        // SeqCst: the load half of the Dekker pair with `Slot::begin` +
        // `ReadRole::ensure_reader`.
        self.shared.waiting.load(Ordering::SeqCst) > 0
    }

    /// Fails every outstanding call with `error()`.
    pub(crate) fn fail_outstanding(&self, error: impl Fn() -> ClientError) {
        for s in self.circulating() {
            if let Some(xid) = s.waiting_xid() {
                s.deliver(xid, Delivery::Failed(error()));
            }
        }
    }

    /// A free slot, from the stack or by growing the table.
    fn try_alloc(&self) -> Option<u32> {
        if let Some(idx) = self.pop_free() {
            return Some(idx);
        }
        let cap = self.capacity();
        // Relaxed: the CAS only hands out a fresh index; nothing to publish.
        let mut n = self.allocated.load(Ordering::Relaxed);
        while n < cap {
            match self.allocated.compare_exchange_weak(
                n,
                n + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(n),
                Err(now) => n = now,
            }
        }
        None
    }

    fn pop_free(&self) -> Option<u32> {
        self.free.pop(|i| self.slot(i).map(|s| &s.next_free))
    }

    fn push_free(&self, idx: u32) {
        if let Some(slot) = self.slot(idx) {
            self.free.push(idx, &slot.next_free);
        }
    }

    /// Free slots now (tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn free_count(&self) -> usize {
        let mut n = 0;
        let mut top = self.free.head.load(Ordering::Acquire) as u32;
        while let Some(idx) = top.checked_sub(1) {
            n += 1;
            top = self.slots[idx as usize].next_free.load(Ordering::Relaxed);
        }
        n
    }
}

/// A lock-free stack of slot indices (a Treiber stack), linked through one
/// `AtomicU32` per slot that the caller names (`next_free`, `next_want`).
#[derive(Debug)]
struct IndexStack {
    /// `tag << 32 | (index + 1)`; index part 0 = empty. The tag changes on
    /// every push and pop, so a CAS on a stale head fails (ABA).
    head: AtomicU64,
}

impl IndexStack {
    fn new() -> Self {
        Self {
            head: AtomicU64::new(0),
        }
    }

    fn is_empty(&self) -> bool {
        // SeqCst: read by the reader thread after its own role changes.
        self.head.load(Ordering::SeqCst) as u32 == 0
    }

    fn push(&self, idx: u32, next: &AtomicU32) {
        // Relaxed: the CAS below publishes.
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // Truncation intended: the low 32 bits are index + 1.
            next.store(head as u32, Ordering::Relaxed);
            let new = ((head >> 32).wrapping_add(1) << 32) | u64::from(idx + 1);
            // SeqCst (success): Release for the next popper, and the store
            // half of the Dekker pairs (`congested` for the free stack, the
            // read role for the want stack).
            match self
                .head
                .compare_exchange_weak(head, new, Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    fn pop<'a>(&self, next_of: impl Fn(u32) -> Option<&'a AtomicU32>) -> Option<u32> {
        // Acquire: see the `next` written by the pusher, and the pusher's
        // writes before its push.
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            // Truncation intended: the low 32 bits are index + 1.
            let idx = (head as u32).checked_sub(1)?;
            // Relaxed: ordered by the Acquire load of `head`; if the stack
            // changed since, the tag makes the CAS fail and we reload.
            let next = next_of(idx)?.load(Ordering::Relaxed);
            let new = ((head >> 32).wrapping_add(1) << 32) | u64::from(next);
            // SeqCst (success): part of the Dekker pairs (see `push`).
            match self
                .head
                .compare_exchange_weak(head, new, Ordering::SeqCst, Ordering::Acquire)
            {
                Ok(_) => return Some(idx),
                Err(now) => head = now,
            }
        }
    }
}

/// Drops cancelled tickets from the front; returns the first live one.
fn live_front(queue: &mut VecDeque<Arc<Ticket>>) -> Option<&Arc<Ticket>> {
    while let Some(front) = queue.front() {
        // Relaxed: under the backlog mutex; a cancel racing with this check is
        // caught by `offer`'s CAS.
        if front.state.load(Ordering::Relaxed) == TICKET_CANCELLED {
            queue.pop_front();
        } else {
            break;
        }
    }
    queue.front()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn grows_from_two_to_capacity_then_queues() {
        let t = SlotTable::new(4, 7);
        assert_eq!(t.allocated(), 2);
        let got: Vec<u32> = (0..4)
            .map(|_| match t.reserve() {
                Reservation::Slot(i) => i,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(t.allocated(), 4);
        let mut sorted = got.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2, 3]);
        let Reservation::Queued(ticket) = t.reserve() else {
            panic!("expected a ticket");
        };
        assert_eq!(ticket.state(), TicketState::Waiting);
        t.release(got[2]);
        assert_eq!(ticket.state(), TicketState::Granted(got[2]));
        assert_eq!(t.free_count(), 0);
        // The backlog emptied: newcomers take free slots again.
        t.release(got[0]);
        assert!(matches!(t.reserve(), Reservation::Slot(i) if i == got[0]));
    }

    #[test]
    fn xids_carry_the_index_and_change_on_reuse() {
        let t = SlotTable::new(8, 0x1234);
        let Reservation::Slot(i) = t.reserve() else {
            panic!()
        };
        let x1 = t.begin(i).unwrap();
        assert_eq!(x1 & 7, i);
        assert!(t.slot_for_xid(x1).is_some());
        let s = t.slot(i).unwrap();
        assert!(s.deliver(x1, Delivery::Reply(vec![1])));
        assert!(
            !s.deliver(x1, Delivery::Reply(vec![2])),
            "second reply dropped"
        );
        assert!(matches!(s.take_if_done(x1), Some(Delivery::Reply(v)) if v == [1]));
        t.release(i);
        let Reservation::Slot(j) = t.reserve() else {
            panic!()
        };
        assert_eq!(i, j);
        let x2 = t.begin(j).unwrap();
        assert_ne!(x1, x2);
        assert_eq!(x2 & 7, i);
        assert!(!s.deliver(x1, Delivery::Reply(vec![3])), "stale XID");
        assert!(s.abandon(x2).is_none());
        assert!(!s.deliver(x2, Delivery::Reply(vec![4])), "abandoned");
    }

    #[test]
    fn cancelled_tickets_are_skipped_and_fifo_is_kept() {
        let t = SlotTable::new(1, 0);
        let Reservation::Slot(i) = t.reserve() else {
            panic!()
        };
        let tickets: Vec<Arc<Ticket>> = (0..3)
            .map(|_| match t.reserve() {
                Reservation::Queued(tk) => tk,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(tickets[0].cancel(), None);
        t.release(i);
        assert_eq!(tickets[1].state(), TicketState::Granted(i));
        assert_eq!(tickets[2].state(), TicketState::Waiting);
        t.close();
        assert_eq!(tickets[2].state(), TicketState::Shutdown);
        assert!(matches!(t.reserve(), Reservation::Shutdown));
    }
}

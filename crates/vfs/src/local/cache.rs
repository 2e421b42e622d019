//! [`ClockCache`]: a bounded map from keys (handle bytes by default) to values
//! (open file descriptors), evicting with the CLOCK algorithm.
//!
//! Every operation is O(1) (eviction amortised: the hand clears at most one
//! "referenced" bit per slot it passes). The map is split into shards, each
//! behind its own mutex held only for a hash lookup, so service threads working on
//! different files rarely meet. A key is hashed once per operation: the hash's
//! high half picks the shard, and the shard's table (hashbrown's `HashTable`
//! of slot indexes; each slot keeps its key's hash for eviction and growth)
//! works from the low half. Values are handed out as clones (`Arc`s): an
//! evicted descriptor stays open until the last caller using it drops its clone,
//! and is dropped outside the shard lock. A value with one user at a time (an
//! open directory stream) is taken out with `remove` and inserted back.

use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, MutexGuard, PoisonError};

use hashbrown::HashTable;

use crate::BackendHandle;

/// Shards per cache: enough that 16-64 service threads seldom contend.
const SHARDS: usize = 16;

/// A bounded `K` -> `V` map with CLOCK eviction. A capacity of 0 caches nothing.
pub(super) struct ClockCache<V, K = BackendHandle> {
    shards: Box<[Mutex<Shard<V, K>>]>,
    hasher: std::collections::hash_map::RandomState,
    capacity: usize,
}

/// One shard. `table` holds each slot's index, found by the slot's hash;
/// `slots.len() <= cap`.
struct Shard<V, K> {
    table: HashTable<usize>,
    slots: Vec<Slot<V, K>>,
    hand: usize,
    cap: usize,
    /// `ClockCache::update`s of this shard, counted (wrapping).
    updates: u32,
}

/// Each shard's count of updates (`ClockCache::updates`).
pub(super) type Updates = [u32; SHARDS];

struct Slot<V, K> {
    key: K,
    /// `key`'s hash, for the table (its growth, and removal on eviction).
    hash: u64,
    value: V,
    /// Set on every hit; the clock hand clears it once before evicting.
    referenced: bool,
}

impl<V, K: Eq> Shard<V, K> {
    /// The index of `key`'s slot.
    fn find(&self, hash: u64, key: &K) -> Option<usize> {
        let slots = &self.slots;
        self.table.find(hash, |&i| slots[i].key == *key).copied()
    }

    /// Points the table entry of slot `from` (whose key hashes to `hash`) at
    /// `to`, or removes it (`None`).
    fn repoint(&mut self, hash: u64, from: usize, to: Option<usize>) {
        if let Ok(entry) = self.table.find_entry(hash, |&i| i == from) {
            match to {
                Some(to) => *entry.into_mut() = to,
                None => drop(entry.remove()),
            }
        }
    }

    /// Removes slot `index`, whose table entry is already gone, moving the
    /// last slot into its place. Returns its value.
    fn take_slot(&mut self, index: usize) -> V {
        let slot = self.slots.swap_remove(index);
        let last = self.slots.len();
        if let Some(moved_hash) = self.slots.get(index).map(|moved| moved.hash) {
            self.repoint(moved_hash, last, Some(index));
        }
        slot.value
    }

    /// `slot`, if it holds `key`: a [`SlotHint`] is believed only then.
    fn hinted_slot(&self, slot: Option<usize>, key: &K) -> Option<usize> {
        slot.filter(|&i| self.slots.get(i).is_some_and(|s| s.key == *key))
    }

    /// Adds `index` to the table under `hash`.
    fn index(&mut self, hash: u64, index: usize) {
        let slots = &self.slots;
        let _ = self.table.insert_unique(hash, index, |&i| slots[i].hash);
    }

    /// Caches `value` for `key` (hashing to `hash`), replacing any previous
    /// value or evicting with CLOCK when full. Returns what was replaced or
    /// evicted.
    fn put(&mut self, hash: u64, key: K, value: V) -> Option<V> {
        if self.cap == 0 {
            return Some(value);
        }
        if let Some(index) = self.find(hash, &key) {
            let slot = &mut self.slots[index];
            slot.referenced = true;
            return Some(std::mem::replace(&mut slot.value, value));
        }
        if self.slots.len() < self.cap {
            let index = self.slots.len();
            self.slots.push(Slot {
                key,
                hash,
                value,
                referenced: false,
            });
            self.index(hash, index);
            return None;
        }
        // CLOCK: pass over recently used slots once, evict the first that is not.
        loop {
            let hand = self.hand % self.slots.len();
            let slot = &mut self.slots[hand];
            if slot.referenced {
                slot.referenced = false;
                self.hand = hand + 1;
                continue;
            }
            let old_hash = std::mem::replace(&mut slot.hash, hash);
            slot.key = key;
            let old = std::mem::replace(&mut slot.value, value);
            self.repoint(old_hash, hand, None);
            self.index(hash, hand);
            self.hand = hand + 1;
            return Some(old);
        }
    }
}

impl<V, K: Hash + Eq + Copy> ClockCache<V, K> {
    /// A cache holding at most about `capacity` values (rounded up to a multiple
    /// of the shard count).
    pub(super) fn new(capacity: usize) -> Self {
        Self::with_shards(capacity, SHARDS)
    }

    /// At most [`SHARDS`] shards (`get_many` locks them by index).
    fn with_shards(capacity: usize, shard_count: usize) -> Self {
        let shard_count = shard_count.clamp(1, SHARDS);
        let per_shard = capacity.div_ceil(shard_count);
        let shards = (0..shard_count)
            .map(|_| {
                Mutex::new(Shard {
                    table: HashTable::new(),
                    slots: Vec::new(),
                    hand: 0,
                    cap: per_shard,
                    updates: 0,
                })
            })
            .collect();
        Self {
            shards,
            hasher: std::collections::hash_map::RandomState::new(),
            capacity: per_shard * shard_count,
        }
    }

    /// How many values it holds at most (0: it caches nothing).
    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The shard and slot `hint` names, if it names a shard of this cache.
    fn hinted(&self, hint: &SlotHint) -> Option<(usize, usize)> {
        hint.get().filter(|&(shard, _)| shard < self.shards.len())
    }

    /// `key`'s hash and its shard, locked.
    fn shard(&self, key: &K) -> (u64, MutexGuard<'_, Shard<V, K>>) {
        let hash = self.hasher.hash_one(key);
        (hash, self.lock_shard(self.shard_index(hash)))
    }

    /// The shard of a key hashing to `hash`.
    fn shard_index(&self, hash: u64) -> usize {
        // The high half: the table's buckets and tags come from the rest.
        ((hash >> 32) as usize) % self.shards.len()
    }

    fn lock_shard(&self, index: usize) -> MutexGuard<'_, Shard<V, K>> {
        // A panic while holding a shard lock cannot leave the shard inconsistent in
        // a way that matters (at worst a stale index, checked on use), so a
        // poisoned lock is simply taken over.
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Caches `value` for `key`, replacing any previous value. Returns what was
    /// replaced or evicted, for the caller to drop outside the lock.
    pub(super) fn insert(&self, key: K, value: V) -> Option<V> {
        let (hash, mut guard) = self.shard(&key);
        guard.put(hash, key, value)
    }

    /// [`insert`](Self::insert) of `value`, unless `key` has a value that
    /// `merge(cached, &value)` takes `value` into (changing `cached` in
    /// place, under the shard's lock) and returns `true` for. Counts no
    /// update. Returns what was replaced or evicted, for the caller to drop
    /// outside the lock.
    pub(super) fn insert_or_merge(
        &self,
        key: K,
        value: V,
        merge: impl FnOnce(&mut V, &V) -> bool,
    ) -> Option<V> {
        let (hash, mut guard) = self.shard(&key);
        let shard = &mut *guard;
        if let Some(slot) = shard.find(hash, &key).and_then(|i| shard.slots.get_mut(i)) {
            if merge(&mut slot.value, &value) {
                return None;
            }
        }
        guard.put(hash, key, value)
    }

    /// [`insert`](Self::insert) of `make(updated)`, where `updated` says
    /// whether an [`update`](Self::update) ran in `key`'s shard since
    /// `since` was taken ([`updates`](Self::updates)). Decided under the
    /// shard's lock, as `update` is: an update of `key` either counted
    /// before this looked, or changes what this stores. With a `hint` that
    /// still names `key`'s slot ([`get_many`](Self::get_many)), the value is
    /// replaced there without a hash or a table lookup.
    pub(super) fn insert_with(
        &self,
        key: K,
        hint: Option<&SlotHint>,
        since: &Updates,
        make: impl FnOnce(bool) -> V,
    ) -> Option<V> {
        if let Some((index, slot)) = hint.and_then(|hint| self.hinted(hint)) {
            let mut guard = self.lock_shard(index);
            if let Some(slot) = guard.hinted_slot(Some(slot), &key) {
                let updated = since.get(index) != Some(&guard.updates);
                let value = make(updated);
                let slot = guard.slots.get_mut(slot)?;
                slot.referenced = true;
                return Some(std::mem::replace(&mut slot.value, value));
            }
        }
        // Unhinted, or a stale hint: the table decides.
        let (hash, mut guard) = self.shard(&key);
        let index = self.shard_index(hash);
        let updated = since.get(index) != Some(&guard.updates);
        let value = make(updated);
        guard.put(hash, key, value)
    }

    /// How many [`update`](Self::update)s each shard has seen (wrapping).
    pub(super) fn updates(&self) -> Updates {
        let mut out = [0; SHARDS];
        for (index, count) in out.iter_mut().enumerate().take(self.shards.len()) {
            *count = self.lock_shard(index).updates;
        }
        out
    }

    /// Whether a value is cached for `key`.
    pub(super) fn contains(&self, key: &K) -> bool {
        let (hash, shard) = self.shard(key);
        shard.find(hash, key).is_some()
    }

    /// Changes the value cached for `key`, if any, in place, and counts an
    /// update of its shard (see [`insert_with`](Self::insert_with)).
    pub(super) fn update(&self, key: &K, change: impl FnOnce(&mut V)) {
        let (hash, mut guard) = self.shard(key);
        let shard = &mut *guard;
        shard.updates = shard.updates.wrapping_add(1);
        if let Some(slot) = shard.find(hash, key).and_then(|i| shard.slots.get_mut(i)) {
            change(&mut slot.value);
        }
    }

    /// Forgets `key`. Returns its value, for the caller to drop outside the lock.
    pub(super) fn remove(&self, key: &K) -> Option<V> {
        let (hash, mut guard) = self.shard(key);
        let shard = &mut *guard;
        let slots = &shard.slots;
        let entry = shard.table.find_entry(hash, |&i| slots[i].key == *key);
        let (index, _) = entry.ok()?.remove();
        Some(shard.take_slot(index))
    }

    /// Forgets every value `take` returns `true` for, and pushes it onto
    /// `out`, for the caller to drop outside the locks. Visits every value:
    /// O(values), for background work (the idle-writer sweep), never for a
    /// call. Locks one shard at a time, for that shard's values only (at
    /// most a sixteenth of the capacity); `take` runs under the lock and
    /// must be quick. Marks nothing recently used.
    pub(super) fn take_if(&self, mut take: impl FnMut(&V) -> bool, out: &mut Vec<V>) {
        for index in 0..self.shards.len() {
            let mut guard = self.lock_shard(index);
            let shard = &mut *guard;
            let mut i = 0;
            while i < shard.slots.len() {
                if take(&shard.slots[i].value) {
                    let hash = shard.slots[i].hash;
                    shard.repoint(hash, i, None);
                    // The last slot moves into `i`: look at `i` again.
                    out.push(shard.take_slot(i));
                } else {
                    i += 1;
                }
            }
        }
    }

    /// How many values are cached.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        (0..self.shards.len())
            .map(|i| {
                self.shards[i]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .slots
                    .len()
            })
            .sum()
    }
}

impl<V: Clone, K: Hash + Eq + Copy> ClockCache<V, K> {
    /// The value cached for `key`, marking it recently used.
    pub(super) fn get(&self, key: &K) -> Option<V> {
        let (hash, mut shard) = self.shard(key);
        let index = shard.find(hash, key)?;
        let slot = shard.slots.get_mut(index)?;
        slot.referenced = true;
        Some(slot.value.clone())
    }

    /// [`get`](Self::get) of every key of `keys`, in order, into `out`
    /// (cleared first); at most [`MAX_BATCH`] keys. `hints`, if given, holds
    /// a [`SlotHint`] per key, read and updated here.
    ///
    /// For a table larger than the CPU's caches, where every lookup misses
    /// (READDIRPLUS of a large directory): `get` after `get` waits out each
    /// miss in turn, since taking a shard's lock is an atomic
    /// read-modify-write, which no later load may pass. Here every shard the
    /// keys need is locked first, in index order (so two batches never
    /// deadlock, and a plain `get` holds one lock only), and then the lookups
    /// run back to back with no atomic between them: the processor overlaps
    /// their misses. A hinted key skips its hash and the table (two misses
    /// that depend on each other) and goes straight to its slot.
    pub(super) fn get_many(
        &self,
        keys: &[K],
        hints: Option<&[SlotHint]>,
        out: &mut Vec<Option<V>>,
    ) {
        out.clear();
        let keys = &keys[..keys.len().min(MAX_BATCH)];
        // Per key: its hash (`None` while a hint stands in for it), its
        // shard, and the slot its hint names.
        let mut at = [(None::<u64>, 0usize, None::<usize>); MAX_BATCH];
        let mut needed = 0u64;
        for (i, (key, at)) in keys.iter().zip(at.iter_mut()).enumerate() {
            let hinted = hints
                .and_then(|hints| hints.get(i))
                .and_then(|hint| self.hinted(hint));
            *at = match hinted {
                Some((shard, slot)) => (None, shard, Some(slot)),
                None => {
                    let hash = self.hasher.hash_one(key);
                    (Some(hash), self.shard_index(hash), None)
                }
            };
            needed |= 1 << at.1;
        }
        let mut guards: [Option<MutexGuard<'_, Shard<V, K>>>; SHARDS] = Default::default();
        for (index, guard) in guards.iter_mut().enumerate() {
            if needed & (1 << index) != 0 {
                *guard = Some(self.lock_shard(index));
            }
        }
        // Every hinted slot's lines are asked for before the first is used.
        for &(_, shard_index, hinted) in &at[..keys.len()] {
            let shard = guards[shard_index].as_ref();
            if let Some(slot) = hinted.and_then(|i| shard?.slots.get(i)) {
                prefetch(slot);
            }
        }
        for (i, (key, &(hash, shard_index, hinted))) in keys.iter().zip(at.iter()).enumerate() {
            let value = guards[shard_index].as_mut().and_then(|shard| {
                // A hint is checked against the slot's key: a slot evicted or
                // moved since holds another key, and the table decides.
                let index = match shard.hinted_slot(hinted, key) {
                    Some(index) => index,
                    None => {
                        let hash = hash.unwrap_or_else(|| self.hasher.hash_one(key));
                        // A key lives in its hash's shard only. A hint naming
                        // another was not written by this cache: it is
                        // dropped, and this lookup misses (that shard is not
                        // locked, and taking it now could deadlock).
                        if self.shard_index(hash) != shard_index {
                            if let Some(hint) = hints.and_then(|hints| hints.get(i)) {
                                hint.clear();
                            }
                            return None;
                        }
                        let index = shard.find(hash, key)?;
                        if let Some(hint) = hints.and_then(|hints| hints.get(i)) {
                            hint.set(shard_index, index);
                        }
                        index
                    }
                };
                let slot = shard.slots.get_mut(index)?;
                slot.referenced = true;
                Some(slot.value.clone())
            });
            out.push(value);
        }
    }
}

/// Asks the processor to start loading `value`'s cache lines: a hint,
/// which changes nothing the program sees.
#[inline]
fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        // Every line the value touches: from the start of its first line,
        // which may begin before the value, to its last byte.
        let start = std::ptr::from_ref(value).cast::<i8>();
        let first = start.wrapping_sub(start.addr() % 64);
        let lines = (start.addr() % 64 + size_of::<T>()).div_ceil(64);
        for line in 0..lines {
            // SAFETY: a prefetch cannot fault and writes nothing, whatever the
            // address; these lines each hold a byte of `value` anyway.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                    first.wrapping_add(line * 64),
                );
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Where a key was last found: its shard and slot, so that the next
/// [`ClockCache::get_many`] of it can skip the hash table. Only a hint: the
/// slot's key is checked under the shard's lock before it is believed, so
/// any value is safe. `Relaxed`: it publishes nothing, and an old value
/// only costs the table lookup it would have saved.
#[derive(Debug)]
pub(super) struct SlotHint(std::sync::atomic::AtomicU32);

impl SlotHint {
    /// Bits of the slot index; the shard index takes the rest.
    const SLOT_BITS: u32 = 27;
    const NONE: u32 = u32::MAX;

    /// No hint yet.
    pub(super) fn new() -> Self {
        Self(std::sync::atomic::AtomicU32::new(Self::NONE))
    }

    /// The shard and slot hinted at, if any.
    fn get(&self) -> Option<(usize, usize)> {
        let hint = self.0.load(std::sync::atomic::Ordering::Relaxed);
        let slot_mask = (1 << Self::SLOT_BITS) - 1;
        (hint != Self::NONE).then_some((
            (hint >> Self::SLOT_BITS) as usize,
            (hint & slot_mask) as usize,
        ))
    }

    /// Forgets the hint.
    fn clear(&self) {
        self.0
            .store(Self::NONE, std::sync::atomic::Ordering::Relaxed);
    }

    /// Hints at `slot` of `shard`, if both fit.
    fn set(&self, shard: usize, slot: usize) {
        let (Ok(shard), Ok(slot)) = (u32::try_from(shard), u32::try_from(slot)) else {
            return;
        };
        if slot >> Self::SLOT_BITS == 0 && shard < (1 << (32 - Self::SLOT_BITS)) - 1 {
            self.0.store(
                shard << Self::SLOT_BITS | slot,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    }
}

/// Most keys one [`ClockCache::get_many`] looks up.
pub(super) const MAX_BATCH: usize = 64;

impl<V, K> std::fmt::Debug for ClockCache<V, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClockCache")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn key(i: u32) -> BackendHandle {
        BackendHandle::new(&i.to_le_bytes()).unwrap()
    }

    #[test]
    fn bounded_and_every_kept_key_maps_to_its_own_value() {
        let cache = ClockCache::new(64);
        for i in 0..10_000u32 {
            cache.insert(key(i), i);
            assert!(cache.len() <= 64);
        }
        let mut kept = 0;
        for i in 0..10_000u32 {
            if let Some(v) = cache.get(&key(i)) {
                assert_eq!(v, i);
                kept += 1;
            }
        }
        assert_eq!(kept, cache.len());
        assert!(kept > 0);
    }

    #[test]
    fn recently_used_entries_survive_a_sweep() {
        let cache = ClockCache::with_shards(3, 1);
        for i in 0..3 {
            assert_eq!(cache.insert(key(i), i), None);
        }
        assert_eq!(cache.get(&key(0)), Some(0));
        // The hand passes key 0 (referenced) and evicts key 1.
        assert_eq!(cache.insert(key(3), 3), Some(1));
        assert_eq!(cache.get(&key(0)), Some(0));
        assert_eq!(cache.get(&key(1)), None);
        assert_eq!(cache.get(&key(2)), Some(2));
        assert_eq!(cache.get(&key(3)), Some(3));
    }

    #[test]
    fn replace_and_remove() {
        let cache = ClockCache::new(SHARDS * 4);
        assert_eq!(cache.insert(key(1), 10), None);
        assert_eq!(cache.insert(key(1), 11), Some(10));
        assert_eq!(cache.get(&key(1)), Some(11));
        assert_eq!(cache.remove(&key(1)), Some(11));
        assert_eq!(cache.get(&key(1)), None);
        assert_eq!(cache.remove(&key(1)), None);
    }

    #[test]
    fn updates_are_counted_by_shard_for_later_inserts() {
        let cache = ClockCache::new(SHARDS * 4);
        let since = cache.updates();
        let value = |updated: bool| if updated { 0 } else { 10 };
        assert_eq!(cache.insert_with(key(1), None, &since, value), None);
        assert_eq!(cache.get(&key(1)), Some(10));
        cache.update(&key(1), |v| *v += 1);
        assert_eq!(cache.get(&key(1)), Some(11));
        // Another key of another shard: uncached, but counted there.
        let other = (2..).map(key).find(|k| {
            let shard = |k: &BackendHandle| cache.shard_index(cache.hasher.hash_one(k));
            shard(k) != shard(&key(1))
        });
        let other = other.unwrap();
        cache.update(&other, |v| *v += 1);
        assert_eq!(cache.get(&other), None);
        // Taken before the updates: key 1's shard has moved.
        assert_eq!(cache.insert_with(key(1), None, &since, value), Some(11));
        assert_eq!(cache.get(&key(1)), Some(0));
        // Taken after them: nothing moved since.
        let since = cache.updates();
        assert_eq!(cache.insert_with(key(1), None, &since, value), Some(0));
        assert_eq!(cache.get(&key(1)), Some(10));
    }

    #[test]
    fn removal_keeps_the_other_indexes_right() {
        let cache = ClockCache::new(SHARDS * 100);
        for i in 0..500u32 {
            cache.insert(key(i), i);
        }
        for i in (0..500u32).step_by(3) {
            assert_eq!(cache.remove(&key(i)), Some(i));
        }
        for i in 0..500u32 {
            let expect = (i % 3 != 0).then_some(i);
            assert_eq!(cache.get(&key(i)), expect);
        }
    }

    /// `insert_or_merge` changes a value in place when `merge` takes the new
    /// one, and replaces it (or inserts) otherwise.
    #[test]
    fn insert_or_merge_keeps_what_merge_takes() {
        let cache = ClockCache::new(SHARDS * 4);
        let sum = |cached: &mut u32, new: &u32| {
            let takes = *new < 10;
            if takes {
                *cached += *new;
            }
            takes
        };
        assert_eq!(cache.insert_or_merge(key(1), 5, sum), None);
        assert_eq!(cache.get(&key(1)), Some(5));
        assert_eq!(cache.insert_or_merge(key(1), 3, sum), None);
        assert_eq!(cache.get(&key(1)), Some(8));
        assert_eq!(cache.insert_or_merge(key(1), 20, sum), Some(8));
        assert_eq!(cache.get(&key(1)), Some(20));
        assert_eq!(cache.updates(), [0; SHARDS], "merging is no update");
    }

    /// `get_many` answers as `get` key by key, in order, over every shard,
    /// with keys present, absent and repeated, and marks what it finds
    /// recently used as `get` does.
    #[test]
    fn get_many_answers_as_get_does() {
        for shards in [1, 3, SHARDS] {
            let cache = ClockCache::with_shards(SHARDS * 8, shards);
            for i in (0..200u32).step_by(2) {
                let _ = cache.insert(key(i), i);
            }
            let keys: Vec<_> = (0..MAX_BATCH as u32 + 10)
                .map(|i| key(i * 7 % 150))
                .collect();
            let mut got = vec![Some(99)];
            cache.get_many(&keys, None, &mut got);
            let want: Vec<_> = keys[..MAX_BATCH].iter().map(|k| cache.get(k)).collect();
            assert_eq!(got, want, "{shards} shards");
            assert!(got.iter().any(Option::is_some) && got.iter().any(Option::is_none));
            cache.get_many(&[], None, &mut got);
            assert!(got.is_empty());
        }
        // Found by `get_many`, so passed over once by the hand: the next
        // insert into the full shard evicts the other key.
        let cache = ClockCache::with_shards(2, 1);
        let _ = cache.insert(key(0), 0);
        let _ = cache.insert(key(1), 1);
        let mut got = Vec::new();
        cache.get_many(&[key(0)], None, &mut got);
        assert_eq!(cache.insert(key(2), 2), Some(1));
        assert_eq!(cache.get(&key(0)), Some(0));
    }

    /// Hints name each key's slot after a lookup, and a hint made stale by
    /// eviction, removal (which moves another key into the slot) or plain
    /// garbage never answers with another key's value.
    /// An insert through a hint replaces its own key's value, wherever the
    /// hint points, and sees updates of the shard as an unhinted one does.
    #[test]
    fn hinted_inserts_replace_their_own_key_and_see_updates() {
        for shards in [1, 3, SHARDS] {
            let cache = ClockCache::with_shards(SHARDS * 40, shards);
            let keys: Vec<_> = (0..40u32).map(key).collect();
            for (i, k) in (0..).zip(&keys) {
                let _ = cache.insert(*k, i);
            }
            let hints: Vec<_> = keys.iter().map(|_| SlotHint::new()).collect();
            let mut got = Vec::new();
            cache.get_many(&keys, Some(&hints), &mut got);
            // Moves: the removed keys' slots take other keys.
            for k in keys.iter().step_by(4) {
                let _ = cache.remove(k);
            }
            hints[1].set(0, 0);
            hints[2].set(SHARDS - 1, 7);
            let since = cache.updates();
            for (i, (k, hint)) in (0..).zip(keys.iter().zip(&hints)) {
                let value = |updated: bool| {
                    assert!(!updated, "{shards} shards: no update ran");
                    1000 + i
                };
                let _ = cache.insert_with(*k, Some(hint), &since, value);
            }
            for (i, k) in (0..).zip(&keys) {
                assert_eq!(cache.get(k), Some(1000 + i), "{shards} shards, key {i}");
            }
            assert_eq!(cache.len(), 40, "{shards} shards");
            // An update of the key's shard since `since` is seen through a hint.
            cache.get_many(&keys, Some(&hints), &mut got);
            cache.update(&keys[5], |v| *v += 1);
            let mut seen = None;
            let _ = cache.insert_with(keys[5], Some(&hints[5]), &since, |updated| {
                seen = Some(updated);
                0
            });
            assert_eq!(seen, Some(true), "{shards} shards");
        }
    }

    #[test]
    fn hinted_lookups_answer_as_get_does_whatever_the_hints_say() {
        for shards in [1, 3, SHARDS] {
            // Room for all 40 in one shard: none is evicted yet.
            let cache = ClockCache::with_shards(SHARDS * 40, shards);
            for i in 0..40u32 {
                let _ = cache.insert(key(i), i);
            }
            let keys: Vec<_> = (0..40u32).map(key).collect();
            let hints: Vec<_> = keys.iter().map(|_| SlotHint::new()).collect();
            let mut got = Vec::new();
            cache.get_many(&keys, Some(&hints), &mut got);
            assert_eq!(
                got,
                (0..40).map(Some).collect::<Vec<_>>(),
                "{shards} shards"
            );
            for (k, hint) in keys.iter().zip(&hints) {
                let (shard, slot) = hint.get().unwrap();
                let guard = cache.lock_shard(shard);
                assert!(
                    guard.slots[slot].key == *k,
                    "{shards} shards: hint of a key at another's slot"
                );
            }
            // Stale hints: removals move the last slot of a shard into the
            // hole, and new keys evict old ones.
            for i in (0..40u32).step_by(3) {
                let _ = cache.remove(&key(i));
            }
            for i in 100..2_000u32 {
                let _ = cache.insert(key(i), i);
            }
            // Hints this cache did not write: at worst a miss, then dropped.
            hints[1].set(0, 0);
            hints[2].set(SHARDS - 1, 123_456);
            let want: Vec<_> = keys.iter().map(|k| cache.get(k)).collect();
            assert!(
                want.iter().any(Option::is_none),
                "{shards} shards: nothing was evicted"
            );
            cache.get_many(&keys, Some(&hints), &mut got);
            for (i, (got, want)) in got.iter().zip(&want).enumerate() {
                let garbage = i == 1 || i == 2;
                assert!(
                    got == want || (garbage && got.is_none()),
                    "{shards} shards, key {i}: {got:?}, not {want:?}"
                );
            }
            cache.get_many(&keys, Some(&hints), &mut got);
            assert_eq!(got, want, "{shards} shards");
        }
    }

    /// Every slot is in its shard's table under its own hash, and nothing else is.
    fn assert_consistent<V, K: Hash + Eq + Copy + std::fmt::Debug>(cache: &ClockCache<V, K>) {
        for shard in &cache.shards {
            let shard = shard.lock().unwrap();
            assert_eq!(shard.table.len(), shard.slots.len());
            assert!(shard.slots.len() <= shard.cap);
            for (i, slot) in shard.slots.iter().enumerate() {
                assert_eq!(cache.hasher.hash_one(slot.key), slot.hash);
                assert_eq!(shard.find(slot.hash, &slot.key), Some(i), "{:?}", slot.key);
            }
        }
    }

    proptest::proptest! {
        /// Random inserts, gets and removes over few keys, against a model:
        /// what the cache returns is always the model's latest value for the
        /// key, a key just inserted is there, and the table and slots stay in
        /// step through evictions and removals.
        #[test]
        fn random_operations_agree_with_a_model(
            ops in proptest::collection::vec((0u8..4, 0u32..64), 1..3000)
        ) {
            let cache = ClockCache::with_shards(24, 2);
            let mut model = std::collections::HashMap::new();
            for (step, (op, k)) in ops.into_iter().enumerate() {
                let k = key(k);
                match op {
                    0 | 1 => {
                        let _ = cache.insert(k, step);
                        model.insert(k, step);
                        proptest::prop_assert_eq!(cache.get(&k), Some(step));
                    }
                    2 => {
                        if let Some(v) = cache.remove(&k) {
                            proptest::prop_assert_eq!(Some(&v), model.get(&k));
                        }
                        proptest::prop_assert_eq!(cache.get(&k), None);
                    }
                    _ => {
                        if let Some(v) = cache.get(&k) {
                            proptest::prop_assert_eq!(Some(&v), model.get(&k));
                        }
                    }
                }
                if step % 97 == 0 {
                    assert_consistent(&cache);
                }
            }
            assert_consistent(&cache);
        }
    }

    /// `take_if` takes exactly the values it is told to, from every
    /// shard, and leaves the rest findable.
    #[test]
    fn take_if_takes_what_it_is_told_and_keeps_the_rest() {
        for shards in [1, 3, SHARDS] {
            let cache = ClockCache::with_shards(SHARDS * 100, shards);
            for i in 0..500u32 {
                let _ = cache.insert(key(i), i);
            }
            let mut taken = Vec::new();
            cache.take_if(|v| v % 3 == 0, &mut taken);
            taken.sort_unstable();
            let want: Vec<_> = (0..500u32).step_by(3).collect();
            assert_eq!(taken, want, "{shards} shards");
            for i in 0..500u32 {
                let expect = (i % 3 != 0).then_some(i);
                assert_eq!(cache.get(&key(i)), expect, "{shards} shards");
            }
            assert_consistent(&cache);
            taken.clear();
            cache.take_if(|_| true, &mut taken);
            assert_eq!(taken.len(), 500 - want.len());
            assert_eq!(cache.len(), 0);
            assert_consistent(&cache);
        }
    }

    #[test]
    fn capacity_zero_caches_nothing() {
        let cache = ClockCache::new(0);
        assert_eq!(cache.insert(key(1), 1), Some(1));
        assert_eq!(cache.get(&key(1)), None);
        assert!(!cache.contains(&key(1)));
    }

    #[test]
    fn other_keys_and_values_that_are_not_clone() {
        let cache: ClockCache<String, (u8, u64)> = ClockCache::new(SHARDS * 2);
        assert!(cache.insert((1, 2), "a".to_string()).is_none());
        assert!(cache.contains(&(1, 2)));
        assert!(!cache.contains(&(2, 1)));
        assert_eq!(cache.remove(&(1, 2)).as_deref(), Some("a"));
        assert!(!cache.contains(&(1, 2)));
    }
}

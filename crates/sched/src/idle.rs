//! The idle-thread stack and the packed pool state word.
//!
//! [`State`] packs the number of idle threads that nobody has claimed yet and
//! the number of threads woken but not yet running, so a waker can check both
//! and claim a thread with one CAS. [`IdleStack`] is the LIFO of idle worker
//! ids behind the pool mutex: push, pop and remove-self are O(1) (an intrusive
//! doubly linked list over a slab indexed by worker id), and the most recently
//! idled, cache-warm thread is woken first.
//!
//! Invariant: `State::idle() <= IdleStack::len()`. A thread going idle pushes
//! itself and then increments `idle`, both under the lock; a waker first
//! claims (decrements `idle`), then pops under the lock. The difference is the
//! number of claims in flight, each of which will pop one entry.

use std::fmt;

const WAKING_SHIFT: u32 = 32;
const IDLE_MASK: u64 = (1 << WAKING_SHIFT) - 1;

/// Idle (unclaimed) threads in the low 32 bits, woken-but-not-running in the
/// high 32 bits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct State(pub(crate) u64);

impl State {
    pub(crate) const ONE_IDLE: u64 = 1;
    pub(crate) const ONE_WAKING: u64 = 1 << WAKING_SHIFT;

    pub(crate) fn idle(self) -> u64 {
        self.0 & IDLE_MASK
    }

    pub(crate) fn waking(self) -> u64 {
        self.0 >> WAKING_SHIFT
    }

    /// One idle thread becomes a waking one.
    pub(crate) fn claim_one(self) -> State {
        debug_assert!(self.idle() > 0);
        State(self.0 - Self::ONE_IDLE + Self::ONE_WAKING)
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State")
            .field("idle", &self.idle())
            .field("waking", &self.waking())
            .finish()
    }
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Link {
    prev: u32,
    next: u32,
    linked: bool,
}

const UNLINKED: Link = Link {
    prev: NONE,
    next: NONE,
    linked: false,
};

/// LIFO of idle worker ids, O(1) push/pop/remove.
#[derive(Debug, Default)]
pub(crate) struct IdleStack {
    links: Vec<Link>,
    head: Option<u32>,
    len: usize,
}

impl IdleStack {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_linked(&self, id: u32) -> bool {
        self.links.get(id as usize).is_some_and(|l| l.linked)
    }

    pub(crate) fn push(&mut self, id: u32) {
        let idx = id as usize;
        if self.links.len() <= idx {
            // Grows only when a new highest worker id first idles; ids are
            // reused, so this is bounded by the peak thread count.
            self.links.resize(idx + 1, UNLINKED);
        }
        debug_assert!(!self.links[idx].linked, "worker {id} idled twice");
        let old_head = self.head.unwrap_or(NONE);
        self.links[idx] = Link {
            prev: NONE,
            next: old_head,
            linked: true,
        };
        if let Some(h) = self.head {
            self.links[h as usize].prev = id;
        }
        self.head = Some(id);
        self.len += 1;
    }

    pub(crate) fn pop(&mut self) -> Option<u32> {
        let id = self.head?;
        self.unlink(id);
        Some(id)
    }

    /// Removes `id` if it is on the stack; returns whether it was.
    pub(crate) fn remove(&mut self, id: u32) -> bool {
        if !self.is_linked(id) {
            return false;
        }
        self.unlink(id);
        true
    }

    fn unlink(&mut self, id: u32) {
        let Link { prev, next, .. } = self.links[id as usize];
        if prev == NONE {
            self.head = (next != NONE).then_some(next);
        } else {
            self.links[prev as usize].next = next;
        }
        if next != NONE {
            self.links[next as usize].prev = prev;
        }
        self.links[id as usize] = UNLINKED;
        self.len -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_masks() {
        let s = State(3 * State::ONE_IDLE + 2 * State::ONE_WAKING);
        assert_eq!((s.idle(), s.waking()), (3, 2));
        let c = s.claim_one();
        assert_eq!((c.idle(), c.waking()), (2, 3));
        let full = State(IDLE_MASK);
        assert_eq!((full.idle(), full.waking()), (IDLE_MASK, 0));
    }

    #[test]
    fn lifo_and_remove_from_middle() {
        let mut s = IdleStack::default();
        for id in [4, 1, 7, 2] {
            s.push(id);
        }
        assert_eq!(s.len(), 4);
        assert!(s.remove(7));
        assert!(!s.remove(7));
        assert_eq!(s.pop(), Some(2));
        assert!(s.remove(4));
        assert_eq!(s.pop(), Some(1));
        assert_eq!(s.pop(), None);
        assert_eq!(s.len(), 0);
        s.push(7);
        assert!(s.is_linked(7));
        assert_eq!(s.pop(), Some(7));
    }
}

//! The inode table: a slab of inodes indexed by inode number, and the handle
//! format built on it.
//!
//! A handle is the inode number (8 bytes, big-endian) followed by the slot's
//! generation (4 bytes). A slot's generation is bumped when its inode dies, so
//! a handle to a dead object never resolves to the slot's next tenant. New
//! slots start at a per-instance random generation, so handles from an earlier
//! instance (a restarted server) are stale rather than aliases.

use std::sync::Arc;

use super::inode::Inode;
use crate::{BackendHandle, FsError, FsResult};

/// Bytes in a memory handle.
pub(super) const HANDLE_LEN: usize = 12;

const _: () = assert!(HANDLE_LEN <= BackendHandle::MAX_LEN);

/// The handle of inode `ino` in a slot of generation `generation`.
pub(super) fn encode(ino: u64, generation: u32) -> BackendHandle {
    let mut bytes = [0; HANDLE_LEN];
    bytes[..8].copy_from_slice(&ino.to_be_bytes());
    bytes[8..].copy_from_slice(&generation.to_be_bytes());
    match BackendHandle::new(&bytes) {
        Some(handle) => handle,
        // HANDLE_LEN <= MAX_LEN is checked at compile time above.
        None => unreachable!("a {HANDLE_LEN}-byte handle fits"),
    }
}

/// The inode number and generation in `fh`, or `BadHandle` for bytes that no
/// memory backend ever produces (wrong length, inode number 0).
pub(super) fn decode(fh: &BackendHandle) -> FsResult<(u64, u32)> {
    let bytes: &[u8; HANDLE_LEN] = fh.as_bytes().try_into().map_err(|_| FsError::BadHandle)?;
    let (ino, generation) = bytes.split_at(8);
    let ino = u64::from_be_bytes(ino.try_into().map_err(|_| FsError::BadHandle)?);
    let generation = u32::from_be_bytes(generation.try_into().map_err(|_| FsError::BadHandle)?);
    if ino == 0 {
        return Err(FsError::BadHandle);
    }
    Ok((ino, generation))
}

fn slot_index(ino: u64) -> Option<usize> {
    usize::try_from(ino.checked_sub(1)?).ok()
}

struct Slot {
    /// The generation of the current tenant, or of the next one when empty.
    generation: u32,
    inode: Option<Arc<Inode>>,
}

/// Live inodes by number (`ino - 1` is the slot index). The table only grows
/// up to the largest number of objects alive at once; freed slots are reused
/// last-freed first.
pub(super) struct Table {
    slots: Vec<Slot>,
    free: Vec<usize>,
    live: u64,
    first_generation: u32,
}

impl Table {
    /// An empty table whose fresh slots start at `first_generation`.
    pub(super) fn new(first_generation: u32) -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            first_generation,
        }
    }

    /// Live inodes.
    pub(super) fn live(&self) -> u64 {
        self.live
    }

    /// The live inode `ino` of generation `generation`: O(1).
    pub(super) fn get(&self, ino: u64, generation: u32) -> FsResult<Arc<Inode>> {
        let index = slot_index(ino).ok_or(FsError::Stale)?;
        match self.slots.get(index) {
            Some(Slot {
                generation: g,
                inode: Some(inode),
            }) if *g == generation => Ok(Arc::clone(inode)),
            _ => Err(FsError::Stale),
        }
    }

    /// Puts the inode `make(ino, generation)` in a free slot; `NoSpc` when
    /// `max` inodes are alive.
    pub(super) fn insert(
        &mut self,
        max: u64,
        make: impl FnOnce(u64, u32) -> Inode,
    ) -> FsResult<Arc<Inode>> {
        if self.live >= max {
            return Err(FsError::NoSpc);
        }
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.slots.push(Slot {
                    generation: self.first_generation,
                    inode: None,
                });
                self.slots.len() - 1
            }
        };
        let slot = self.slots.get_mut(index).ok_or(FsError::ServerFault)?;
        let inode = Arc::new(make(index as u64 + 1, slot.generation));
        slot.inode = Some(Arc::clone(&inode));
        self.live += 1;
        Ok(inode)
    }

    /// Empties the slot of `ino` and bumps its generation: every handle to it
    /// is stale from now on.
    pub(super) fn remove(&mut self, ino: u64) {
        let Some(index) = slot_index(ino) else {
            return;
        };
        if let Some(slot) = self.slots.get_mut(index) {
            if slot.inode.take().is_some() {
                slot.generation = slot.generation.wrapping_add(1);
                self.free.push(index);
                self.live -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_round_trip_and_bad_bytes() {
        let h = encode(0x0102_0304_0506_0708, 0xa0b0_c0d0);
        assert_eq!(h.as_bytes().len(), HANDLE_LEN);
        assert_eq!(decode(&h), Ok((0x0102_0304_0506_0708, 0xa0b0_c0d0)));
        for len in [0, 1, 11, 13, 40] {
            let h = BackendHandle::new(&vec![1; len]).unwrap();
            assert_eq!(decode(&h), Err(FsError::BadHandle), "len {len}");
        }
        assert_eq!(decode(&encode(0, 5)), Err(FsError::BadHandle));
    }
}

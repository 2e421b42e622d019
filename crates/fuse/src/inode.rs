//! The inode table: FUSE node ids ↔ NFS file handles, the kernel's lookup
//! counts, the attribute cache and the open-file state of each node.
//!
//! A node's id is the NFS `fileid`, so `st_ino` is the server's inode number
//! (as with the kernel NFS client) and stays the same across forgets. Id 1 is
//! FUSE's root; a fileid of 0 or 1, or one already held by a different handle
//! (a reused inode number while the kernel still holds the old file), gets an
//! id from a private range instead. Ids are never reused while the kernel
//! holds them, so the generation is always 0.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rnfs_client::Credential;
use rnfs_nfs3::{Fattr3, FileHandle};

use crate::attr::CachedAttr;
use crate::data::OpenFile;
use crate::options::CacheTimes;

/// FUSE's id of the root.
pub(crate) const ROOT: u64 = 1;
/// Ids handed out when the fileid cannot be used.
const REMAP_BASE: u64 = 1 << 63;

/// A file open through the mount: one [`OpenFile`] per node, shared by all
/// of its opens.
#[derive(Debug)]
pub(crate) struct OpenState {
    pub(crate) file: Arc<OpenFile>,
    /// Opens not yet released.
    pub(crate) opens: u32,
    /// The name the file was renamed to when it was unlinked while open
    /// (Linux's "silly rename"), removed on last release.
    pub(crate) silly: Option<Silly>,
}

/// A silly-renamed name of an open file, to remove on its last release.
#[derive(Debug)]
pub(crate) struct Silly {
    pub(crate) dir: FileHandle,
    pub(crate) name: Vec<u8>,
    /// Who unlinked it, and removes it: the kernel sends the release as
    /// root, whom the server may squash to someone who may not.
    pub(crate) cred: Credential,
}

/// One node the kernel knows.
#[derive(Debug)]
pub(crate) struct Inode {
    pub(crate) fh: FileHandle,
    /// Lookups the kernel has not forgotten (the root is never forgotten).
    nlookup: u64,
    pub(crate) attr: CachedAttr,
    pub(crate) open: Option<OpenState>,
    /// `InodeTable::unlinks` when `attr` was taken: a multi-linked node's
    /// link count may have changed with any later unlink or rename.
    unlinks_seen: u64,
    /// Attributes taken since the last open's revalidation showed that
    /// another client changed the data: the kernel's pages may hold the old
    /// bytes though `attr` is fresh, so the next open must not keep them.
    pub(crate) data_stale: bool,
}

impl Inode {
    /// Whether an unlink or rename since `attr` was taken may have changed
    /// its link count (it had more than one link; not a directory).
    fn links_may_have_changed(&self, unlinks: u64) -> bool {
        self.unlinks_seen != unlinks
            && self.attr.attr.nlink > 1
            && self.attr.attr.ftype != rnfs_nfs3::Ftype3::Dir
    }
}

/// Every node the kernel holds; O(1) by id and by handle.
#[derive(Debug)]
pub(crate) struct InodeTable {
    nodes: HashMap<u64, Inode>,
    by_handle: HashMap<FileHandle, u64>,
    /// Unlinks and renames so far. An unlink of some name may change the
    /// link count of any multi-linked node: rather than expire them all (a
    /// walk per unlink), a node's attributes are stale once this moved on
    /// since they were taken ([`Inode::links_may_have_changed`]).
    unlinks: u64,
    /// Nodes with an open file.
    open_count: usize,
    next_remap: u64,
}

impl InodeTable {
    /// A table holding the root.
    pub(crate) fn new(root: FileHandle, attr: Fattr3, now: Instant, times: &CacheTimes) -> Self {
        let mut t = Self {
            nodes: HashMap::new(),
            by_handle: HashMap::new(),
            unlinks: 0,
            open_count: 0,
            next_remap: REMAP_BASE,
        };
        t.nodes.insert(
            ROOT,
            Inode {
                fh: root,
                nlookup: 1,
                attr: CachedAttr::new(attr, now, times),
                open: None,
                unlinks_seen: 0,
                data_stale: false,
            },
        );
        t.by_handle.insert(root, ROOT);
        t
    }

    pub(crate) fn get(&self, ino: u64) -> Option<&Inode> {
        self.nodes.get(&ino)
    }

    pub(crate) fn get_mut(&mut self, ino: u64) -> Option<&mut Inode> {
        self.nodes.get_mut(&ino)
    }

    /// The node that has `fh`, if the kernel holds one.
    pub(crate) fn ino_of(&self, fh: &FileHandle) -> Option<u64> {
        self.by_handle.get(fh).copied()
    }

    /// Number of nodes (the root included).
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether any file is open.
    pub(crate) fn any_open(&self) -> bool {
        self.open_count > 0
    }

    /// Records one more kernel lookup of `fh` (inserting it if new) and takes
    /// `attr` as its fresh attributes. Returns its node id.
    pub(crate) fn reference(
        &mut self,
        fh: FileHandle,
        attr: Fattr3,
        now: Instant,
        times: &CacheTimes,
    ) -> u64 {
        if let Some(&ino) = self.by_handle.get(&fh) {
            self.update_attr(ino, attr, now, times, false);
            if let Some(node) = self.nodes.get_mut(&ino) {
                node.nlookup += 1;
            }
            return ino;
        }
        let ino = if attr.fileid > ROOT && !self.nodes.contains_key(&attr.fileid) {
            attr.fileid
        } else {
            self.next_remap += 1;
            self.next_remap
        };
        self.nodes.insert(
            ino,
            Inode {
                fh,
                nlookup: 1,
                attr: CachedAttr::new(attr, now, times),
                open: None,
                unlinks_seen: self.unlinks,
                data_stale: false,
            },
        );
        self.by_handle.insert(fh, ino);
        ino
    }

    /// Undoes `n` lookups; the node is dropped when none are left.
    pub(crate) fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT {
            return;
        }
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        node.nlookup = node.nlookup.saturating_sub(n);
        if node.nlookup == 0 && node.open.is_none() {
            let fh = node.fh;
            self.nodes.remove(&ino);
            if self.by_handle.get(&fh) == Some(&ino) {
                self.by_handle.remove(&fh);
            }
        }
    }

    /// Takes fresh attributes for `ino`; `ours`: they follow our own change.
    pub(crate) fn update_attr(
        &mut self,
        ino: u64,
        attr: Fattr3,
        now: Instant,
        times: &CacheTimes,
        ours: bool,
    ) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.attr.refresh(attr, now, times, ours);
            node.unlinks_seen = self.unlinks;
        }
    }

    /// [`update_attr`](Self::update_attr) for the node with `fh`, if any.
    pub(crate) fn update_by_handle(
        &mut self,
        fh: &FileHandle,
        attr: Option<Fattr3>,
        now: Instant,
        times: &CacheTimes,
    ) {
        if let (Some(attr), Some(ino)) = (attr, self.ino_of(fh)) {
            self.update_attr(ino, attr, now, times, true);
        }
    }

    /// Server attributes `attr` of `ino`, fetched by a call other than an
    /// open's revalidation and not after a change of ours, are about to be
    /// taken: if they show that the data changed since the cached ones
    /// (another client wrote) while the node is open, or while `untold`
    /// (they do not reach the kernel, which cannot drop its pages itself),
    /// the kernel's pages are stale for the next open. Returns the node's
    /// open file if its read-ahead and size must be revalidated: not one
    /// holding writes of its own, whose replies changed the attributes.
    pub(crate) fn note_server_attr(
        &mut self,
        ino: u64,
        attr: &Fattr3,
        untold: bool,
    ) -> Option<Arc<OpenFile>> {
        let node = self.nodes.get_mut(&ino)?;
        if !crate::attr::data_changed(&node.attr.attr, attr) {
            return None;
        }
        let open = node.open.as_ref().filter(|o| !o.file.is_dirty());
        if open.is_some() || (untold && node.open.is_none()) {
            node.data_stale = true;
        }
        open.map(|o| Arc::clone(&o.file))
    }

    /// Whether the kernel's pages of `ino` may be stale (see
    /// `Inode::data_stale`); clears it (an open revalidates).
    pub(crate) fn take_data_stale(&mut self, ino: u64) -> bool {
        self.nodes
            .get_mut(&ino)
            .is_some_and(|n| std::mem::take(&mut n.data_stale))
    }

    /// Expires the attributes of `ino`.
    pub(crate) fn expire(&mut self, ino: u64) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.attr.expire();
        }
    }

    /// An unlink or rename happened: every multi-linked node's attributes
    /// are stale from now on (O(1); see `unlinks`).
    pub(crate) fn note_unlink(&mut self) {
        self.unlinks += 1;
    }

    /// How long `ino`'s cached attributes stay valid: none left once an
    /// unlink may have changed its link count.
    pub(crate) fn ttl(&self, ino: u64, now: Instant) -> Duration {
        match self.nodes.get(&ino) {
            Some(node) if !node.links_may_have_changed(self.unlinks) => node.attr.remaining(now),
            _ => Duration::ZERO,
        }
    }

    /// Whether `ino`'s cached attributes may be used now.
    pub(crate) fn is_fresh(&self, ino: u64, now: Instant) -> bool {
        !self.ttl(ino, now).is_zero()
    }

    /// Whether an unlink or rename since `ino`'s attributes were taken may
    /// have changed its link count (its open file must then forget the
    /// attributes of WRITE replies sent before).
    pub(crate) fn links_may_have_changed(&self, ino: u64) -> bool {
        self.nodes
            .get(&ino)
            .is_some_and(|node| node.links_may_have_changed(self.unlinks))
    }

    /// Gives a node without an open file its open state.
    pub(crate) fn set_open(&mut self, ino: u64, open: OpenState) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            if node.open.is_none() {
                self.open_count += 1;
            }
            node.open = Some(open);
        }
    }

    /// Takes a node's open state (its last release); a node the kernel has
    /// forgotten meanwhile is dropped.
    pub(crate) fn close(&mut self, ino: u64) -> Option<OpenState> {
        let node = self.nodes.get_mut(&ino)?;
        let open = node.open.take()?;
        self.open_count -= 1;
        if node.nlookup == 0 {
            self.forget(ino, 0);
        }
        Some(open)
    }

    /// Every open file (for the final flush).
    pub(crate) fn open_files(&self) -> Vec<(u64, Arc<OpenFile>)> {
        self.nodes
            .iter()
            .filter_map(|(ino, n)| n.open.as_ref().map(|o| (*ino, o.file.clone())))
            .collect()
    }

    /// Takes every open file's state out of the table.
    pub(crate) fn take_open(&mut self) -> Vec<OpenState> {
        let mut out = Vec::new();
        for node in self.nodes.values_mut() {
            out.extend(node.open.take());
        }
        self.open_count = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use crate::attr::tests::regular_file as attr;

    fn fh(b: u8) -> FileHandle {
        FileHandle::new(&[b; 8]).unwrap()
    }

    #[test]
    fn ids_are_fileids_and_lookups_are_counted() {
        let t0 = Instant::now();
        let times = CacheTimes::default();
        let mut t = InodeTable::new(fh(0), attr(2), t0, &times);
        assert_eq!(t.reference(fh(1), attr(100), t0, &times), 100);
        assert_eq!(t.reference(fh(1), attr(100), t0, &times), 100);
        // fileid 1 collides with the root's id; fileid 100 with another handle.
        let a = t.reference(fh(2), attr(1), t0, &times);
        let b = t.reference(fh(3), attr(100), t0, &times);
        assert!(a >= REMAP_BASE && b >= REMAP_BASE && a != b);
        t.forget(100, 1);
        assert_eq!(t.ino_of(&fh(1)), Some(100));
        t.forget(100, 1);
        assert_eq!(t.ino_of(&fh(1)), None);
        assert!(t.get(100).is_none());
        t.forget(ROOT, 10);
        assert_eq!(t.ino_of(&fh(0)), Some(ROOT));
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn multi_linked_nodes_expire_on_unlink() {
        let t0 = Instant::now();
        let times = CacheTimes::default();
        let mut t = InodeTable::new(fh(0), attr(2), t0, &times);
        let mut two = attr(50);
        two.nlink = 2;
        let ino = t.reference(fh(1), two, t0, &times);
        let single = t.reference(fh(2), attr(51), t0, &times);
        assert!(t.is_fresh(ino, t0));
        t.note_unlink();
        assert!(!t.is_fresh(ino, t0));
        assert!(t.links_may_have_changed(ino));
        assert!(t.is_fresh(single, t0));
        assert!(!t.links_may_have_changed(single));
        // Fresh attributes taken after the unlink are good again.
        t.update_attr(ino, two, t0, &times, false);
        assert!(t.is_fresh(ino, t0));
    }
}

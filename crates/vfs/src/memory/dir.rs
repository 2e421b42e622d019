//! Directory contents: entries by name, and the same entries by READDIR cookie.
//!
//! Every insertion of a name takes the next value of a per-directory counter as
//! its cookie, so cookies are never reused within a directory: a cookie stays
//! valid while its entry exists, and a cookie whose entry went resumes at the
//! next larger one. Both maps are B-trees: lookup, insert, remove and resume
//! cost O(log n).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use super::inode::Inode;

/// Cookie of `.`.
pub(super) const DOT_COOKIE: u64 = 1;
/// Cookie of `..`.
pub(super) const DOTDOT_COOKIE: u64 = 2;
/// Cookie of the first real entry.
const FIRST_COOKIE: u64 = 3;

/// One name and the object it names.
pub(super) struct Entry {
    /// The name (shared with the by-name index).
    pub(super) name: Arc<[u8]>,
    /// The object.
    pub(super) inode: Arc<Inode>,
}

/// The entries of one directory, `.` and `..` excluded.
pub(super) struct DirData {
    by_name: BTreeMap<Arc<[u8]>, u64>,
    by_cookie: BTreeMap<u64, Entry>,
    next_cookie: u64,
}

impl DirData {
    /// No entries.
    pub(super) fn new() -> Self {
        Self {
            by_name: BTreeMap::new(),
            by_cookie: BTreeMap::new(),
            next_cookie: FIRST_COOKIE,
        }
    }

    /// Whether there are no entries.
    pub(super) fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The object named `name`.
    pub(super) fn get(&self, name: &[u8]) -> Option<&Arc<Inode>> {
        let cookie = self.by_name.get(name)?;
        self.by_cookie.get(cookie).map(|e| &e.inode)
    }

    /// Adds `name` (which must not exist) with a fresh cookie.
    pub(super) fn insert(&mut self, name: &[u8], inode: Arc<Inode>) {
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        let name: Arc<[u8]> = Arc::from(name);
        if let Some(old) = self.by_name.insert(Arc::clone(&name), cookie) {
            self.by_cookie.remove(&old);
        }
        self.by_cookie.insert(cookie, Entry { name, inode });
    }

    /// Removes `name`; returns the object it named.
    pub(super) fn remove(&mut self, name: &[u8]) -> Option<Arc<Inode>> {
        let cookie = self.by_name.remove(name)?;
        self.by_cookie.remove(&cookie).map(|e| e.inode)
    }

    /// Whether `cookie` could have been handed out by this directory.
    pub(super) fn issued(&self, cookie: u64) -> bool {
        cookie < self.next_cookie
    }

    /// Entries whose cookie is above `cookie`, in cookie order.
    pub(super) fn after(&self, cookie: u64) -> impl Iterator<Item = (u64, &Entry)> {
        self.by_cookie
            .range((Bound::Excluded(cookie), Bound::Unbounded))
            .map(|(c, e)| (*c, e))
    }
}

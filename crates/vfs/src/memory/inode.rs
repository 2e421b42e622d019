//! One file-system object: its fixed identity and its locked state.

use std::sync::{Mutex, RwLock, Weak};

use super::dir::DirData;
use super::file::FileData;
use super::table;
use crate::{Attr, BackendHandle, FileType, Time, WccAttr};

/// Size and space reported for a directory.
const DIR_SIZE: u64 = 4096;
/// Allocation unit for `Attr::used`.
const BLOCK: u64 = 4096;

/// An object. Identity fields never change; everything else is in `state`.
pub(super) struct Inode {
    /// Inode number (slot index + 1); the file id.
    pub(super) ino: u64,
    /// Generation of the slot while this inode lives in it.
    pub(super) generation: u32,
    /// The handle: `ino` and `generation`.
    pub(super) handle: BackendHandle,
    /// Object type, fixed at creation.
    pub(super) ftype: FileType,
    /// Directories only: the parent (`..`); dangling for the root, whose `..`
    /// is itself. Written only by RENAME, under the rename lock and this
    /// inode's state lock. A leaf lock: nothing is locked while holding it.
    pub(super) parent: Mutex<Weak<Inode>>,
    /// Attributes and contents.
    pub(super) state: RwLock<State>,
}

/// The mutable part of an inode.
pub(super) struct State {
    /// Set when the last link went: every operation on it is then `Stale`.
    pub(super) dead: bool,
    /// Ownership, mode, link count, times.
    pub(super) meta: Meta,
    /// Type-specific contents.
    pub(super) body: Body,
}

/// Attributes shared by every type.
#[derive(Debug, Clone, Copy)]
pub(super) struct Meta {
    /// Permission bits with setuid, setgid and sticky (`& 0o7777`).
    pub(super) mode: u32,
    /// Links: names for non-directories, `2 + subdirectories` for directories.
    pub(super) nlink: u32,
    /// Owner.
    pub(super) uid: u32,
    /// Group.
    pub(super) gid: u32,
    /// Last access (set by SETATTR only: reads do not update it).
    pub(super) atime: Time,
    /// Last data change.
    pub(super) mtime: Time,
    /// Last attribute change.
    pub(super) ctime: Time,
}

/// Contents by type.
pub(super) enum Body {
    /// Regular file.
    File(FileData),
    /// Directory.
    Dir(DirData),
    /// Symbolic link: its target, verbatim.
    Symlink(Box<[u8]>),
    /// Device, FIFO or socket: the device numbers (zeros unless a device).
    Special((u32, u32)),
}

impl Body {
    /// Frees the contents; returns the bytes they were charged.
    pub(super) fn take_storage(&mut self) -> u64 {
        match self {
            Self::File(f) => f.clear(),
            Self::Symlink(target) => {
                let len = target.len() as u64;
                *target = Box::default();
                len
            }
            Self::Dir(_) | Self::Special(_) => 0,
        }
    }
}

impl State {
    /// The size reported for this object.
    pub(super) fn size(&self) -> u64 {
        match &self.body {
            Body::File(f) => f.size(),
            Body::Dir(_) => DIR_SIZE,
            Body::Symlink(target) => target.len() as u64,
            Body::Special(_) => 0,
        }
    }

    /// The weak-cache-consistency subset of the attributes.
    pub(super) fn wcc_attr(&self) -> WccAttr {
        WccAttr {
            size: self.size(),
            mtime: self.meta.mtime,
            ctime: self.meta.ctime,
        }
    }

    /// The directory contents, if this is a directory.
    pub(super) fn dir(&self) -> Option<&DirData> {
        match &self.body {
            Body::Dir(d) => Some(d),
            _ => None,
        }
    }

    /// The directory contents, mutably.
    pub(super) fn dir_mut(&mut self) -> Option<&mut DirData> {
        match &mut self.body {
            Body::Dir(d) => Some(d),
            _ => None,
        }
    }
}

impl Inode {
    /// A new inode in slot `ino` of generation `generation`.
    pub(super) fn new(
        ino: u64,
        generation: u32,
        ftype: FileType,
        parent: Weak<Inode>,
        state: State,
    ) -> Self {
        Self {
            ino,
            generation,
            handle: table::encode(ino, generation),
            ftype,
            parent: Mutex::new(parent),
            state: RwLock::new(state),
        }
    }

    /// Full attributes from a locked `state`.
    pub(super) fn attr(&self, state: &State, fsid: u64) -> Attr {
        let (used, rdev) = match &state.body {
            Body::File(f) => (f.stored().div_ceil(BLOCK) * BLOCK, (0, 0)),
            Body::Dir(_) => (DIR_SIZE, (0, 0)),
            Body::Symlink(target) => (target.len() as u64, (0, 0)),
            Body::Special(rdev) => (0, *rdev),
        };
        let m = &state.meta;
        Attr {
            ftype: self.ftype,
            mode: m.mode,
            nlink: m.nlink,
            uid: m.uid,
            gid: m.gid,
            size: state.size(),
            used,
            rdev,
            fsid,
            fileid: self.ino,
            atime: m.atime,
            mtime: m.mtime,
            ctime: m.ctime,
        }
    }
}

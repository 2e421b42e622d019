//! Change notifications that vouch for READDIRPLUS's cached attributes
//! (`readdir.rs`, `LocalFs::entry_plus_by_name`).
//!
//! Each watched directory has a **generation**: a number no other directory
//! had or will have, replaced whenever an event arrives for the directory.
//! An entry's attributes are cached with the generation its directory had
//! before they were read, and answer a listing of that directory only while
//! the generation has not moved. A second one, the **names generation**,
//! moves only with events that change which names the directory holds
//! (create, delete, rename in or out, the directory's own deletion or
//! move): what `getdents` returns is cached with it (`dirchunks.rs`).
//!
//! [`DirWatches::generation`] reads every queued event first. inotify queues
//! an event inside the system call that makes the change, so every change
//! that finished before a listing began has moved its directory's generation
//! by the time the listing looks. A change made while the listing runs may
//! or may not show, as with any concurrent change. What inotify reports to a
//! directory's watch, and what it does not, is in the module docs of
//! `local` (*READDIRPLUS attributes and entries*).
//!
//! One inotify instance serves the whole process: a user may open only 128 by
//! default, and a server may have a thousand exports. It watches at most
//! [`MAX_WATCHED`] directories; past that the oldest watch is dropped (its
//! directory's entries then never answer again). A full event queue
//! (`IN_Q_OVERFLOW`) has lost events, so it retires every generation at
//! once, in O(1): generations below `floor` are replaced at their next use.

use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::num::NonZeroU64;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Mutex, OnceLock, PoisonError};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

/// How many directories are watched at most (each pins its inode in the
/// kernel, about 1 KiB there, and counts against the user's
/// `fs.inotify.max_user_watches`).
pub(super) const MAX_WATCHED: usize = 4096;

/// The events that can change an entry's attributes or what a name holds.
/// The directory's own `IN_DELETE_SELF`/`IN_MOVE_SELF` end or move the
/// watch; `IN_IGNORED` and `IN_Q_OVERFLOW` always arrive.
fn watch_flags() -> WatchFlags {
    WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
}

/// A directory by device and inode number.
pub(super) type DirKey = (u64, u64);

/// The process's directory watches.
pub(super) struct DirWatches {
    inotify: OwnedFd,
    state: Mutex<State>,
}

struct State {
    by_wd: HashMap<i32, Watched>,
    by_dir: HashMap<DirKey, i32>,
    /// Watches in the order they were added, for dropping the oldest. May
    /// hold watches that are gone (skipped); compacted when twice the limit.
    order: VecDeque<(i32, DirKey)>,
    /// The next generation handed out.
    next: u64,
    /// Generations below this were current when events were lost.
    floor: u64,
    limit: usize,
    buf: Vec<MaybeUninit<u8>>,
}

struct Watched {
    dir: DirKey,
    generation: u64,
    names: u64,
}

/// A watched directory's generations (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Generations {
    /// Moves with every event.
    pub(super) any: NonZeroU64,
    /// Moves with the events that change which names the directory holds.
    pub(super) names: NonZeroU64,
}

impl Watched {
    fn generations(&self) -> Option<Generations> {
        Some(Generations {
            any: NonZeroU64::new(self.generation)?,
            names: NonZeroU64::new(self.names)?,
        })
    }
}

/// The events that change which names a directory holds.
fn names_change(flags: ReadFlags) -> bool {
    flags.intersects(
        ReadFlags::CREATE
            | ReadFlags::DELETE
            | ReadFlags::MOVED_FROM
            | ReadFlags::MOVED_TO
            | ReadFlags::DELETE_SELF
            | ReadFlags::MOVE_SELF,
    )
}

impl State {
    fn fresh(&mut self) -> u64 {
        let generation = self.next;
        self.next += 1;
        generation
    }

    /// Moves the generation of what `event` is about.
    fn apply(&mut self, wd: i32, flags: ReadFlags) {
        if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
            self.floor = self.next;
            return;
        }
        if flags.contains(ReadFlags::IGNORED) {
            // The directory is gone or the watch was dropped; forgetting it
            // retires its generation, since a new watch gets a fresh one.
            if let Some(watched) = self.by_wd.remove(&wd) {
                self.by_dir.remove(&watched.dir);
            }
            return;
        }
        let generation = self.fresh();
        if let Some(watched) = self.by_wd.get_mut(&wd) {
            watched.generation = generation;
            if names_change(flags) {
                watched.names = generation;
            }
        }
    }

    /// Drops the oldest watch still in place.
    fn drop_oldest(&mut self, inotify: BorrowedFd<'_>) {
        while let Some((wd, dir)) = self.order.pop_front() {
            if self.by_dir.get(&dir) == Some(&wd) {
                self.by_dir.remove(&dir);
                self.by_wd.remove(&wd);
                // Its `IN_IGNORED` comes later and finds nothing to forget.
                let _ = inotify::remove_watch(inotify, wd);
                return;
            }
        }
    }
}

impl DirWatches {
    /// The process's watches; `None` while inotify is unavailable (then
    /// nothing is cached). A failure is not remembered: a shortage of
    /// descriptors or of the user's 128 instances may pass, and the next
    /// listing tries again (one failing `inotify_init1`).
    pub(super) fn get() -> Option<&'static DirWatches> {
        static WATCHES: OnceLock<DirWatches> = OnceLock::new();
        if let Some(watches) = WATCHES.get() {
            return Some(watches);
        }
        let fresh = DirWatches::new(MAX_WATCHED).ok()?;
        // Two first listings may race: one instance stays, the other closes.
        Some(WATCHES.get_or_init(|| fresh))
    }

    fn new(limit: usize) -> rustix::io::Result<Self> {
        let inotify = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
        Ok(Self {
            inotify,
            state: Mutex::new(State {
                by_wd: HashMap::new(),
                by_dir: HashMap::new(),
                order: VecDeque::new(),
                next: 1,
                floor: 1,
                limit,
                buf: vec![MaybeUninit::uninit(); 16 * 1024],
            }),
        })
    }

    /// The current generations of the directory `dir` (open as `fd`), after
    /// every queued event; it is watched from now on if it was not. `None`
    /// if it cannot be watched (no permission to read it, the user's watch
    /// limit, an error reading events).
    pub(super) fn generation(&self, fd: BorrowedFd<'_>, dir: DirKey) -> Option<Generations> {
        // A panic under the lock leaves at worst a generation that moved too
        // often, never one that should have moved and did not: events are
        // applied as they are read.
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let state = &mut *guard;
        if !self.drain(state) {
            state.floor = state.next;
        }
        if let Some(&wd) = state.by_dir.get(&dir) {
            let floor = state.floor;
            let fresh = state.next;
            let watched = state.by_wd.get_mut(&wd)?;
            // `names` never exceeds `generation`: both are retired.
            if watched.names < floor {
                watched.generation = fresh;
                watched.names = fresh;
                state.next += 1;
            }
            return watched.generations();
        }
        if state.by_wd.len() >= state.limit {
            state.drop_oldest(self.inotify.as_fd());
        }
        // The magic link names the directory itself, whatever its path.
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let wd = inotify::add_watch(&self.inotify, path, watch_flags()).ok()?;
        let generation = state.fresh();
        // An earlier watch of the same inode gets the same descriptor back.
        let watched = Watched {
            dir,
            generation,
            names: generation,
        };
        let generations = watched.generations();
        if let Some(old) = state.by_wd.insert(wd, watched) {
            state.by_dir.remove(&old.dir);
        }
        state.by_dir.insert(dir, wd);
        state.order.push_back((wd, dir));
        if state.order.len() > 2 * state.limit.max(1) {
            let State { order, by_dir, .. } = state;
            order.retain(|(wd, dir)| by_dir.get(dir) == Some(wd));
        }
        generations
    }

    /// Applies every queued event; `false` if reading failed (then events may
    /// have been lost).
    fn drain(&self, state: &mut State) -> bool {
        // The buffer leaves `state` while the reader borrows it.
        let mut buf = std::mem::take(&mut state.buf);
        let mut reader = inotify::Reader::new(&self.inotify, &mut buf);
        let ok = loop {
            match reader.next() {
                Ok(event) => state.apply(event.wd(), event.events()),
                Err(Errno::AGAIN) => break true,
                Err(_) => break false,
            }
        };
        state.buf = buf;
        ok
    }
}

impl std::fmt::Debug for DirWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirWatches").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;

    use rustix::fs::{Mode, OFlags};

    use super::*;

    fn open_dir(path: &std::path::Path) -> (OwnedFd, DirKey) {
        let fd = rustix::fs::open(path, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let meta = std::fs::metadata(path).unwrap();
        (fd, (meta.dev(), meta.ino()))
    }

    #[test]
    fn a_generation_moves_with_every_change_to_its_directory_and_only_then() {
        let watches = DirWatches::new(16).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        let (fd, key) = open_dir(dir.path());
        let (other_fd, other_key) = open_dir(other.path());

        let first = watches.generation(fd.as_fd(), key).unwrap();
        let other_first = watches.generation(other_fd.as_fd(), other_key).unwrap();
        assert_ne!(first, other_first);
        assert_eq!(watches.generation(fd.as_fd(), key), Some(first));

        let changes: [&dyn Fn(); 4] = [
            &|| std::fs::write(dir.path().join("f"), b"longer").unwrap(),
            &|| {
                let perms = std::os::unix::fs::PermissionsExt::from_mode(0o600);
                std::fs::set_permissions(dir.path().join("f"), perms).unwrap();
            },
            &|| std::fs::rename(dir.path().join("f"), dir.path().join("g")).unwrap(),
            &|| std::fs::rename(dir.path().join("g"), dir.path().join("f")).unwrap(),
        ];
        let mut last = first;
        for (i, change) in changes.iter().enumerate() {
            change();
            let now = watches.generation(fd.as_fd(), key).unwrap();
            assert_ne!(now.any, last.any, "change {i}");
            // Only the renames change the names.
            assert_eq!(now.names == last.names, i < 2, "change {i}");
            last = now;
        }
        // The other directory saw none of it.
        assert_eq!(
            watches.generation(other_fd.as_fd(), other_key),
            Some(other_first)
        );
    }

    #[test]
    fn the_oldest_watch_is_dropped_past_the_limit() {
        let watches = DirWatches::new(2).unwrap();
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let opened: Vec<_> = dirs.iter().map(|d| open_dir(d.path())).collect();
        let firsts: Vec<_> = opened
            .iter()
            .map(|(fd, key)| watches.generation(fd.as_fd(), *key).unwrap())
            .collect();
        // The third evicted the first, which comes back with a new generation.
        let (fd, key) = &opened[0];
        assert_ne!(watches.generation(fd.as_fd(), *key).unwrap(), firsts[0]);
        assert_eq!(watches.state.lock().unwrap().by_wd.len(), 2);
    }

    #[test]
    fn lost_events_retire_every_generation() {
        let watches = DirWatches::new(16).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (fd, key) = open_dir(dir.path());
        let first = watches.generation(fd.as_fd(), key).unwrap();
        watches
            .state
            .lock()
            .unwrap()
            .apply(-1, ReadFlags::QUEUE_OVERFLOW);
        let now = watches.generation(fd.as_fd(), key).unwrap();
        assert_ne!(now.any, first.any);
        assert_ne!(now.names, first.names);
    }

    #[test]
    fn a_removed_directory_is_forgotten() {
        let watches = DirWatches::new(16).unwrap();
        let parent = tempfile::tempdir().unwrap();
        let path = parent.path().join("d");
        std::fs::create_dir(&path).unwrap();
        let (fd, key) = open_dir(&path);
        watches.generation(fd.as_fd(), key).unwrap();
        // Once nothing holds it, removing it ends the watch (IN_DELETE_SELF,
        // then IN_IGNORED), which the next drain applies.
        drop(fd);
        std::fs::remove_dir(&path).unwrap();
        let (other, other_key) = open_dir(parent.path());
        watches.generation(other.as_fd(), other_key).unwrap();
        let state = watches.state.lock().unwrap();
        assert!(!state.by_dir.contains_key(&key));
        assert_eq!(state.by_wd.len(), 1);
    }
}

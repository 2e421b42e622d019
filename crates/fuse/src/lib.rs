//! rnfs FUSE mount: an NFSv3 export as a local file system, over the rnfs
//! client (`rnfs mount nfs://host/export /mnt`).
//!
//! # How it maps to NFSv3
//!
//! - **Nodes.** A FUSE node id is the NFS `fileid` (so `st_ino` is the
//!   server's), mapped to its file handle in the inode table with the
//!   kernel's lookup count; `forget` drops it (`inode.rs`).
//! - **Attributes** are cached per node with Linux's `acregmin`/`acregmax`/
//!   `acdirmin`/`acdirmax` and its adaptive timeout (doubling while the
//!   object does not change); the kernel is told to trust them for the time
//!   left. Replies to our own changes (post-op and wcc attributes) refresh
//!   them. `getattr` of a file we hold unwritten data for goes through
//!   [`NfsFile::getattr`](rnfs_client::NfsFile::getattr): a bounded flush,
//!   then the post-op attributes of the WRITE replies it collected (or a
//!   GETATTR if none came).
//! - **Close-to-open.** `open` sends ACCESS (the permission check and fresh
//!   attributes in one call); if the file's mtime or size changed the
//!   kernel drops its cached pages. `flush` (every `close(2)`) and `fsync`
//!   write back and COMMIT.
//! - **Data** goes through one [`NfsFile`](rnfs_client::NfsFile) per open
//!   node (shared by all opens): its write-behind keeps up to
//!   `wb_max_outstanding` WRITEs and `wb_max_outstanding_kb` KiB in flight
//!   per file. The kernel's own writeback cache is off, so every `write(2)`
//!   reaches us in order.
//! - **Directories** are listed with READDIRPLUS; each entry's handle and
//!   attributes fill the inode table and the attribute cache.
//! - **Permissions** are the server's: each call carries the caller's uid,
//!   gid and supplementary groups (AUTH_SYS), and the mount does not ask the
//!   kernel to check mode bits (`default_permissions` is off), as with NFS.
//!   Mounted by root, the mount is `allow_other`, like an NFS mount.
//! - **Unlinking an open file** renames it to `.rnfs…` and removes it at the
//!   last close (Linux's silly rename). `RENAME_NOREPLACE` is emulated with
//!   a LOOKUP; `RENAME_EXCHANGE`, locks and extended attributes are not
//!   supported (locks are local to this machine, as with `nolock`).
//!
//! # Threads
//!
//! fuser 0.15 reads and dispatches requests on one thread. Requests that
//! need the server are handed, with their reply, to a pool of `threads`
//! workers, so parallel writers and a `stat` loop progress side by side;
//! `getattr` answered from the cache and `forget` run inline.
#![warn(missing_docs)]

mod attr;
mod core;
mod cred;
mod data;
mod flusher;
mod fs;
mod inode;
mod options;
mod pool;
mod sys;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use fuser::MountOption;
use rnfs_client::{Credential, NfsError, NfsUrl, Session};
use rnfs_nfs3::Ftype3;

pub use options::{CacheTimes, MountOptions, OptionError};
pub use sys::is_fuse_mounted;

use crate::core::Core;

/// Why mounting or unmounting failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
    /// The mount point cannot be used.
    #[error("mount point {path}: {cause}")]
    Mountpoint {
        /// The mount point.
        path: PathBuf,
        /// Why.
        cause: io::Error,
    },
    /// Reaching or mounting the export failed.
    #[error("mounting {url} failed: {cause}")]
    Nfs {
        /// The export.
        url: String,
        /// Why.
        cause: NfsError,
    },
    /// The URL names something that is not a directory.
    #[error("{0} is not a directory")]
    NotADirectory(String),
    /// The FUSE mount itself failed.
    #[error("FUSE mount on {path} failed: {cause}")]
    Fuse {
        /// The mount point.
        path: PathBuf,
        /// Why.
        cause: io::Error,
    },
    /// Unmounting failed.
    #[error("unmounting {path} failed: {cause}")]
    Unmount {
        /// The mount point.
        path: PathBuf,
        /// Why.
        cause: io::Error,
    },
    /// The mount options contradict the URL.
    #[error("{0}")]
    Options(String),
    /// The FUSE session ended with an error, or a thread could not start.
    #[error("FUSE session: {0}")]
    Session(io::Error),
}

/// How an unmount went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmounted {
    /// Unmounted; the session ends.
    Clean,
    /// The mount was busy: it was detached (`umount -l`). `aborted`: its
    /// FUSE connection was aborted too, so the session ends now; otherwise
    /// it ends when the last user lets go (open files were written back).
    Detached {
        /// Whether the connection was aborted.
        aborted: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// The session loop ended (the kernel unmounted it).
    Ended,
    /// Detached while busy and not aborted: written back, given up on.
    Abandoned,
}

#[derive(Debug)]
struct Lifecycle {
    phase: Mutex<Phase>,
    changed: Condvar,
}

impl Lifecycle {
    fn set(&self, phase: Phase) {
        let mut p = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        if *p == Phase::Running {
            *p = phase;
        }
        self.changed.notify_all();
    }

    fn wait(&self) -> Phase {
        let p = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        *self
            .changed
            .wait_while(p, |p| *p == Phase::Running)
            .unwrap_or_else(|e| e.into_inner())
    }
}

/// Unmounts a mount from any thread (a signal handler thread, say).
#[derive(Debug, Clone)]
pub struct Unmounter {
    mountpoint: PathBuf,
    conn: Option<u32>,
    core: Arc<Core>,
    life: Arc<Lifecycle>,
}

impl Unmounter {
    /// Unmounts; if the mount is busy, writes back every open file, detaches
    /// it and aborts its FUSE connection (through `fusectl`) so the session
    /// ends. Unmounting what is already unmounted is not an error.
    pub fn unmount(&self) -> Result<Unmounted, MountError> {
        let err = |cause| MountError::Unmount {
            path: self.mountpoint.clone(),
            cause,
        };
        if *self.life.phase.lock().unwrap_or_else(|e| e.into_inner()) != Phase::Running {
            return Ok(Unmounted::Clean);
        }
        match sys::unmount(&self.mountpoint, false) {
            Ok(()) => Ok(Unmounted::Clean),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                tracing::warn!(
                    "{} is busy: writing back open files and detaching it",
                    self.mountpoint.display()
                );
                self.core.sync_all();
                sys::unmount(&self.mountpoint, true).map_err(err)?;
                let aborted = match self.conn.map(sys::abort) {
                    Some(Ok(())) => true,
                    Some(Err(e)) => {
                        tracing::warn!("cannot abort the FUSE connection: {e}");
                        false
                    }
                    None => false,
                };
                if !aborted {
                    self.life.set(Phase::Abandoned);
                }
                Ok(Unmounted::Detached { aborted })
            }
            // Not mounted (any more): someone else unmounted it.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && !self.mounted() => {
                Ok(Unmounted::Clean)
            }
            Err(e) => Err(err(e)),
        }
    }

    /// Gives up on a server that does not answer, as `umount -f` does: every
    /// NFS call in flight or to come fails (`ESHUTDOWN` to the mount's
    /// users), so an [`unmount`](Self::unmount) or a session waiting to
    /// write back open files goes on, and what they held is lost. For a
    /// hard mount whose server is gone; cannot be undone.
    pub fn give_up(&self) {
        tracing::warn!(
            "giving up on the server of {}: data not yet written back is lost",
            self.mountpoint.display()
        );
        self.core.abort_calls();
    }

    fn mounted(&self) -> bool {
        is_fuse_mounted(&self.mountpoint)
    }
}

/// A mounted export, served by background threads until unmounted.
///
/// Dropping it unmounts (lazily if busy) and waits for the session to end.
#[derive(Debug)]
pub struct MountHandle {
    unmounter: Unmounter,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl MountHandle {
    /// The mount point (canonical).
    pub fn mountpoint(&self) -> &Path {
        &self.unmounter.mountpoint
    }

    /// Something that can unmount it from another thread.
    pub fn unmounter(&self) -> Unmounter {
        self.unmounter.clone()
    }

    /// Files open through the mount now.
    pub fn open_files(&self) -> usize {
        self.unmounter.core.open_count()
    }

    /// Directory reads since the mount whose offset was not where the
    /// directory's previous read stopped, and was searched for in the
    /// cached page of entries (a listing read in order makes none).
    pub fn listing_searches(&self) -> u64 {
        self.unmounter.core.listing_searches()
    }

    /// Nodes the kernel holds now (the root included).
    pub fn nodes(&self) -> usize {
        self.unmounter.core.node_count()
    }

    /// Waits until the mount is unmounted (by [`Unmounter::unmount`],
    /// `umount`, or `fusermount -u`) and its files are written back.
    pub fn join(mut self) -> Result<(), MountError> {
        self.finish()
    }

    /// Unmounts and waits for the session to end.
    pub fn unmount(mut self) -> Result<(), MountError> {
        self.unmounter.unmount()?;
        self.finish()
    }

    fn finish(&mut self) -> Result<(), MountError> {
        let phase = self.unmounter.life.wait();
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        if phase == Phase::Abandoned {
            // The loop runs until the last user lets go; the data is safe.
            return Ok(());
        }
        match thread.join() {
            Ok(r) => r.map_err(MountError::Session),
            Err(_) => Err(MountError::Session(io::Error::other(
                "the FUSE session thread panicked",
            ))),
        }
    }
}

impl Drop for MountHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            if let Err(e) = self.unmounter.unmount() {
                tracing::error!("{e}");
                return;
            }
            if let Err(e) = self.finish() {
                tracing::error!("{e}");
            }
        }
    }
}

/// Mounts `url` on `mountpoint` and serves it from background threads.
pub fn spawn(
    url: &NfsUrl,
    mountpoint: &Path,
    options: MountOptions,
) -> Result<MountHandle, MountError> {
    let mountpoint = mountpoint
        .canonicalize()
        .map_err(|cause| MountError::Mountpoint {
            path: mountpoint.to_owned(),
            cause,
        })?;
    let nfs_err = |cause| MountError::Nfs {
        url: url.to_string(),
        cause,
    };
    let root_uid = rustix::process::geteuid().is_root();
    if !root_uid && (options.suid || options.dev) {
        // fusermount3 would drop them with a warning and mount anyway.
        return Err(MountError::Options(
            "mount options suid and dev need root (FUSE mounts of other users are \
             always nosuid,nodev)"
                .to_owned(),
        ));
    }
    let url = &options
        .url_with_ports(url)
        .map_err(|e| MountError::Options(e.to_string()))?;
    let (session, rest) =
        Session::connect(url, options.client.clone(), Credential::current()).map_err(nfs_err)?;
    let (root, root_attr) = session.resolve(&rest).map_err(nfs_err)?;
    if root_attr.ftype != Ftype3::Dir {
        return Err(MountError::NotADirectory(url.to_string()));
    }
    let allow_other = options.allow_other.unwrap_or(root_uid);
    let flags = sys::VfsFlags {
        read_only: options.read_only,
        exec: options.exec,
        suid: options.suid,
        dev: options.dev,
    };
    let threads = options.threads;
    let core = Arc::new(Core::new(session, root, root_attr, options));
    let fs = fs::RnfsFs::new(core.clone(), threads).map_err(MountError::Session)?;
    let fuse_err = |cause| MountError::Fuse {
        path: mountpoint.clone(),
        cause,
    };
    let mut session = if root_uid {
        // mount(2) ourselves: the type is `fuse.rnfs`, and fuser holds no
        // mount of its own to unmount again after we did.
        let fd =
            sys::mount_fuse(&mountpoint, &url.to_string(), flags, allow_other).map_err(fuse_err)?;
        let acl = if allow_other {
            fuser::SessionACL::All
        } else {
            fuser::SessionACL::Owner
        };
        fuser::Session::from_fd(fs, fd, acl)
    } else {
        // fuser's mount goes through fusermount3.
        // fusermount3 refuses suid and dev to users other than root.
        let mut fuse_options = vec![
            MountOption::FSName(url.to_string()),
            MountOption::Subtype("rnfs".into()),
            if flags.dev {
                MountOption::Dev
            } else {
                MountOption::NoDev
            },
            if flags.suid {
                MountOption::Suid
            } else {
                MountOption::NoSuid
            },
        ];
        if allow_other {
            fuse_options.push(MountOption::AllowOther);
        }
        if flags.read_only {
            fuse_options.push(MountOption::RO);
        }
        if !flags.exec {
            fuse_options.push(MountOption::NoExec);
        }
        fuser::Session::new(fs, &mountpoint, &fuse_options).map_err(fuse_err)?
    };
    core.set_notifier(session.notifier());
    let life = Arc::new(Lifecycle {
        phase: Mutex::new(Phase::Running),
        changed: Condvar::new(),
    });
    let unmounter = Unmounter {
        conn: sys::connection_of(&mountpoint),
        mountpoint,
        core,
        life: life.clone(),
    };
    let thread = std::thread::Builder::new()
        .name("rnfs-fuse".into())
        .spawn(move || {
            let r = session.run();
            // Dropping the session calls `destroy`: writes back open files.
            drop(session);
            life.set(Phase::Ended);
            r
        })
        .map_err(MountError::Session)?;
    tracing::info!("mounted {url} on {}", unmounter.mountpoint.display());
    Ok(MountHandle {
        unmounter,
        thread: Some(thread),
    })
}

/// Mounts `url` on `mountpoint` and serves it until it is unmounted.
pub fn mount(url: &NfsUrl, mountpoint: &Path, options: MountOptions) -> Result<(), MountError> {
    spawn(url, mountpoint, options)?.join()
}

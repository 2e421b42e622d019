//! The NFSv3 program (100003 version 3): decodes each procedure's arguments,
//! checks the handle and the caller, calls the export's backend and encodes the
//! result.
//!
//! Every call that names a file handle goes through [`NfsService::open`], in this
//! order (the first failure wins, as in knfsd):
//! 1. the handle's MAC and format: NFS3ERR_BADHANDLE;
//! 2. its export id names a live export: else NFS3ERR_STALE (export removed);
//! 3. the caller's address and port are allowed by the export: else
//!    NFS3ERR_ACCES (logged);
//! 4. the caller's identity after squashing becomes the thread's file-system
//!    identity (when the server runs as root);
//! 5. for a modifying procedure, a read-only export answers NFS3ERR_ROFS.
//!
//! Backend errors become statuses in one place ([`convert::status`]).

// Failures carry wcc data, as NFSv3 results do; see `rnfs_vfs`.
#![allow(clippy::result_large_err, reason = "errors carry wcc data by design")]

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::time::{clock_gettime, ClockId};

use rnfs_nfs3::*;
use rnfs_rpc::{CallContext, Service, ServiceError};
use rnfs_vfs::{identity, Attr, BackendHandle, Cred, DirEntry, FsError, FsInfo, SpecialNode, Wcc};
use rnfs_xdr::{Decode, Encode, Reader, Writer};

use super::convert::{self, fattr, post_op, sattr, status, wcc};
use super::exports::{Export, Exports};
use super::handles::{ExportStamp, HandleKey};
use crate::metrics::note;

/// Largest READ, WRITE and READDIR payload (FSINFO rtmax/wtmax): 1 MiB, what the
/// Linux client uses by default when the server allows it.
pub const MAX_IO: u32 = 1 << 20;
/// Preferred READDIR size (FSINFO dtpref). Larger than knfsd's page so that big
/// directories take fewer round trips.
pub const DIR_PREF: u32 = 64 << 10;

/// FSINFO `properties` bits (RFC 1813 §3.3.19).
const FSF3_LINK: u32 = 0x1;
const FSF3_SYMLINK: u32 = 0x2;
const FSF3_HOMOGENEOUS: u32 = 0x8;
const FSF3_CANSETTIME: u32 = 0x10;

thread_local! {
    /// READ and READLINK data, reused across calls of one service thread.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The NFSv3 service.
#[derive(Debug)]
pub struct NfsService {
    exports: Arc<Exports>,
    key: HandleKey,
    /// Switch each service thread's fsuid/fsgid/groups to the caller's.
    switch_identity: bool,
    /// Note each call's export and READ/WRITE bytes for the metrics
    /// (see [`crate::metrics`]'s side channel).
    notes: bool,
    /// Whether buffered writes have been waiting lately (see [`WriteStalls`]).
    write_stalls: WriteStalls,
}

/// Notes buffered writes that waited: the kernel throttling a writer of too
/// many dirty pages (`balance_dirty_pages` sleeps up to 200 ms), a journal
/// commit, a contended inode lock. WRITE is quick among its peers (a reply of
/// one may be held for the next one, see [`Service::is_quick_among_peers`])
/// only while none did for [`WriteStalls::BACKOFF_NS`], so a run of WRITEs is
/// answered in batches while writes take microseconds and one at a time while
/// they stall. The worst a stall costs is one batch of WRITE replies held for
/// one slow write, once per `BACKOFF_NS`.
#[derive(Debug)]
struct WriteStalls {
    /// [`coarse_now_ns`] until which writes count as stalling; 0 when none
    /// was ever noted. Relaxed: a hint that publishes nothing else, and a
    /// stale read costs one more reply held or sent at once.
    until: AtomicU64,
}

/// `CLOCK_MONOTONIC_COARSE` in nanoseconds. It ticks once a jiffy (1-10 ms),
/// far finer than [`WriteStalls::THRESHOLD_NS`], and reads without the TSC (or a
/// VM's paravirtual clock), so timing every WRITE costs a few nanoseconds
/// instead of two precise clock reads (2% of a WRITE's user time in `perf`).
/// Through the C library's `clock_gettime` (nix), not rustix's: rustix finds
/// the vDSO by parsing the auxiliary vector itself, which faults under
/// valgrind (3.19), and `bench/callgrind-sizes` counts WRITEs there. 0 if
/// the clock cannot be read (never on Linux >= 2.6.32): no write then looks
/// like a stall.
fn coarse_now_ns() -> u64 {
    let Ok(ts) = clock_gettime(ClockId::CLOCK_MONOTONIC_COARSE) else {
        return 0;
    };
    // Monotonic time is never negative.
    let secs = u64::try_from(ts.tv_sec()).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec()).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

impl WriteStalls {
    /// A write that took longer than this waited for something: a 1 MiB
    /// buffered write copies in a few hundred microseconds, and the kernel's
    /// dirty throttling sleeps for 10 ms or more at a time. Lower, it would
    /// see ordinary scheduling: with 16 writers on 2 CPUs, a writer preempted
    /// while holding the file's lock makes the others' writes take 2-10 ms.
    /// Measured on the coarse clock, so to within a jiffy. In nanoseconds,
    /// as [`coarse_now_ns`].
    const THRESHOLD_NS: u64 = 20_000_000;
    /// How long after a stall WRITE replies are sent at once, in nanoseconds.
    const BACKOFF_NS: u64 = 1_000_000_000;

    fn new() -> Self {
        Self {
            until: AtomicU64::new(0),
        }
    }

    /// Whether a write stalled within the last `BACKOFF_NS`. Reads the clock only
    /// if one ever did.
    fn recent(&self) -> bool {
        let until = self.until.load(Ordering::Relaxed);
        until != 0 && coarse_now_ns() < until
    }

    /// Notes a write that ran from `started` to `ended` ([`coarse_now_ns`]).
    fn note(&self, started: u64, ended: u64) {
        let took = ended.saturating_sub(started);
        if took <= Self::THRESHOLD_NS {
            return;
        }
        let until = ended.saturating_add(Self::BACKOFF_NS);
        if self.until.swap(until, Ordering::Relaxed) < ended {
            tracing::debug!(
                took_us = took / 1000,
                "a buffered write waited: WRITE replies are sent one by one for {:?}",
                Duration::from_nanos(Self::BACKOFF_NS)
            );
        }
    }
}

/// A checked handle: its export, the backend's handle and the caller's identity.
struct Opened {
    export: Arc<Export>,
    fh: BackendHandle,
    cred: Cred,
}

impl NfsService {
    /// A service over `exports`, checking handles with `key`. Identities are
    /// switched per call when the process runs as root.
    pub fn new(exports: Arc<Exports>, key: HandleKey) -> Self {
        Self {
            exports,
            key,
            switch_identity: identity::can_switch(),
            notes: false,
            write_stalls: WriteStalls::new(),
        }
    }

    /// [`NfsService::new`], also noting each call's export and READ/WRITE byte
    /// counts for the server's [`Metrics`](crate::metrics::Metrics) (a few
    /// thread-local stores per call).
    pub fn with_metrics(exports: Arc<Exports>, key: HandleKey) -> Self {
        Self {
            notes: true,
            ..Self::new(exports, key)
        }
    }

    fn open(&self, ctx: &CallContext<'_>, fh: NfsFh3<'_>) -> Result<Opened, Nfsstat3> {
        let opened = self
            .key
            .open(fh.as_bytes())
            .map_err(|_| Nfsstat3::Badhandle)?;
        let backend = opened.backend;
        let export = self
            .exports
            .load()
            .get(opened.export_id)
            .filter(|e| e.issued_under_this_root(opened.root_tag))
            .cloned()
            .ok_or(Nfsstat3::Stale)?;
        if self.notes {
            note::export(export.id, export.metrics_index);
        }
        if let Err(refusal) = export.options.check(ctx.peer) {
            if let Some(not_logged) = export.refusals.admit(ctx.peer) {
                tracing::warn!(
                    peer = %ctx.peer_name(),
                    export = %export.mount_path,
                    not_logged,
                    "refused NFS call: {refusal} (one such line per host and export every \
                     5 s; `not_logged` counts the refusals since the last)"
                );
            }
            return Err(Nfsstat3::Acces);
        }
        let cred = export
            .options
            .act_as(ctx.auth, self.switch_identity)
            .map_err(|e| {
                tracing::error!("{e}");
                Nfsstat3::Serverfault
            })?;
        Ok(Opened {
            export,
            fh: backend,
            cred,
        })
    }

    /// [`open`](Self::open) for a procedure that modifies the file system.
    fn open_rw(&self, ctx: &CallContext<'_>, fh: NfsFh3<'_>) -> Result<Opened, Nfsstat3> {
        let o = self.open(ctx, fh)?;
        if o.export.read_only() {
            return Err(Nfsstat3::Rofs);
        }
        Ok(o)
    }

    /// Opens the directory of a `diropargs3` for a modifying call and checks the
    /// name's length.
    fn open_dir_rw(&self, ctx: &CallContext<'_>, d: &DirOpArgs3<'_>) -> Result<Opened, Nfsstat3> {
        let o = self.open_rw(ctx, d.dir)?;
        check_name(d.name)?;
        Ok(o)
    }
}

fn check_name(name: &[u8]) -> Result<(), Nfsstat3> {
    if name.len() > NAME_MAX {
        Err(Nfsstat3::Nametoolong)
    } else {
        Ok(())
    }
}

/// Status and wcc of a failure before the backend was reached.
fn early(s: Nfsstat3) -> (Nfsstat3, WccData) {
    (s, WccData::default())
}

fn fail_wcc((e, w): (FsError, Wcc)) -> (Nfsstat3, WccData) {
    (status(e), wcc(&w))
}

impl Service for NfsService {
    fn program(&self) -> u32 {
        crate::services::NFS_PROGRAM
    }

    fn versions(&self) -> (u32, u32) {
        (3, 3)
    }

    fn name(&self) -> &'static str {
        "nfs"
    }

    fn call(
        &self,
        ctx: &CallContext<'_>,
        args: &mut Reader<'_>,
        reply: &mut Writer<'_>,
    ) -> Result<(), ServiceError> {
        let proc_ = NfsProc3::try_from(ctx.proc_).map_err(|_| ServiceError::ProcUnavail)?;
        match proc_ {
            NfsProc3::Null => {}
            NfsProc3::Getattr => self.getattr(ctx, GetattrArgs::decode(args)?).encode(reply),
            NfsProc3::Setattr => self.setattr(ctx, SetattrArgs::decode(args)?).encode(reply),
            NfsProc3::Lookup => self.lookup(ctx, LookupArgs::decode(args)?).encode(reply),
            NfsProc3::Access => self.access(ctx, AccessArgs::decode(args)?).encode(reply),
            NfsProc3::Readlink => self.readlink(ctx, ReadlinkArgs::decode(args)?, reply),
            NfsProc3::Read => self.read(ctx, ReadArgs::decode(args)?, reply),
            NfsProc3::Write => self.write(ctx, WriteArgs::decode(args)?).encode(reply),
            NfsProc3::Create => {
                let a = CreateArgs::decode(args)?;
                let how = convert::create_how(&a.how);
                self.create_like(ctx, &a.where_, |fs, cred, dir, name| {
                    fs.create(cred, dir, name, &how)
                })
                .encode(reply);
            }
            NfsProc3::Mkdir => {
                let a = MkdirArgs::decode(args)?;
                let attr = sattr(&a.attributes);
                self.create_like(ctx, &a.where_, |fs, cred, dir, name| {
                    fs.mkdir(cred, dir, name, &attr)
                })
                .encode(reply);
            }
            NfsProc3::Symlink => {
                let a = SymlinkArgs::decode(args)?;
                let attr = sattr(&a.symlink.symlink_attributes);
                let target = a.symlink.symlink_data;
                self.create_like(ctx, &a.where_, |fs, cred, dir, name| {
                    fs.symlink(cred, dir, name, target, &attr)
                })
                .encode(reply);
            }
            NfsProc3::Mknod => {
                let a = MknodArgs::decode(args)?;
                let (node, attr) = match &a.what {
                    Mknoddata3::Chr(d) => (
                        SpecialNode::Char(d.spec.specdata1, d.spec.specdata2),
                        d.dev_attributes,
                    ),
                    Mknoddata3::Blk(d) => (
                        SpecialNode::Block(d.spec.specdata1, d.spec.specdata2),
                        d.dev_attributes,
                    ),
                    Mknoddata3::Sock(s) => (SpecialNode::Socket, *s),
                    Mknoddata3::Fifo(s) => (SpecialNode::Fifo, *s),
                    Mknoddata3::Other(_) => {
                        // Still check the handle first, as knfsd does.
                        let res = match self.open_dir_rw(ctx, &a.where_) {
                            Err(s) => CreateLike::Fail(early(s)),
                            Ok(_) => CreateLike::Fail(early(Nfsstat3::Badtype)),
                        };
                        res.encode(reply);
                        return Ok(());
                    }
                };
                let attr = sattr(&attr);
                self.create_like(ctx, &a.where_, |fs, cred, dir, name| {
                    fs.mknod(cred, dir, name, &node, &attr)
                })
                .encode(reply);
            }
            NfsProc3::Remove => {
                let a = RemoveArgs::decode(args)?;
                let res = match self.remove_like(ctx, &a.object, false) {
                    Ok(w) => RemoveRes::Ok(RemoveResOk { dir_wcc: w }),
                    Err((status, dir_wcc)) => RemoveRes::Fail { status, dir_wcc },
                };
                res.encode(reply);
            }
            NfsProc3::Rmdir => {
                let a = RmdirArgs::decode(args)?;
                let res = match self.remove_like(ctx, &a.object, true) {
                    Ok(w) => RmdirRes::Ok(RemoveResOk { dir_wcc: w }),
                    Err((status, dir_wcc)) => RmdirRes::Fail { status, dir_wcc },
                };
                res.encode(reply);
            }
            NfsProc3::Rename => self.rename(ctx, RenameArgs::decode(args)?).encode(reply),
            NfsProc3::Link => self.link(ctx, LinkArgs::decode(args)?).encode(reply),
            NfsProc3::Readdir => self.readdir(ctx, ReaddirArgs::decode(args)?, reply),
            NfsProc3::Readdirplus => self.readdirplus(ctx, ReaddirplusArgs::decode(args)?, reply),
            NfsProc3::Fsstat => self.fsstat(ctx, FsstatArgs::decode(args)?).encode(reply),
            NfsProc3::Fsinfo => self.fsinfo(ctx, FsinfoArgs::decode(args)?).encode(reply),
            NfsProc3::Pathconf => self
                .pathconf(ctx, PathconfArgs::decode(args)?)
                .encode(reply),
            NfsProc3::Commit => self.commit(ctx, CommitArgs::decode(args)?).encode(reply),
        }
        Ok(())
    }

    /// Metadata reads, answered from the inode and dentry caches in
    /// microseconds, and READ, whose data comes from the page cache when it is
    /// there; a READ that must wait for storage first writes the replies held
    /// for it (`handler::before_blocking`). WRITE (quick only among its peers),
    /// COMMIT, the directory listings (sized by the client's count) and every
    /// change are not quick, so no other reply ever waits behind them.
    fn is_quick(&self, _vers: u32, proc_: u32) -> bool {
        matches!(
            NfsProc3::try_from(proc_),
            Ok(NfsProc3::Null
                | NfsProc3::Getattr
                | NfsProc3::Lookup
                | NfsProc3::Access
                | NfsProc3::Read
                | NfsProc3::Readlink
                | NfsProc3::Fsstat
                | NfsProc3::Fsinfo
                | NfsProc3::Pathconf)
        )
    }

    /// WRITE, unless buffered writes stalled lately (`WriteStalls`): its
    /// UNSTABLE writes land in the page cache in microseconds, and clients
    /// send them in pipelined runs; a WRITE that must reach storage first
    /// writes the replies held for it.
    fn is_quick_among_peers(&self, _vers: u32, proc_: u32) -> bool {
        proc_ == NfsProc3::Write as u32 && !self.write_stalls.recent()
    }
}

/// The common result shape of CREATE, MKDIR, SYMLINK and MKNOD.
enum CreateLike {
    Ok(CreateResOk),
    Fail((Nfsstat3, WccData)),
}

impl CreateLike {
    /// The four results share one wire layout (`CREATE3res`).
    fn encode(self, w: &mut Writer<'_>) {
        match self {
            Self::Ok(ok) => CreateRes::Ok(ok).encode(w),
            Self::Fail((status, dir_wcc)) => CreateRes::Fail { status, dir_wcc }.encode(w),
        }
    }
}

type CreateResult = Result<rnfs_vfs::Created, (FsError, Wcc)>;

/// Stands in for a directory's attributes in a READDIR reply until the backend
/// has listed (overwritten before the reply is sent).
const PLACEHOLDER_ATTR: Fattr3 = Fattr3 {
    ftype: Ftype3::Dir,
    mode: 0,
    nlink: 0,
    uid: 0,
    gid: 0,
    size: 0,
    used: 0,
    rdev: Specdata3 {
        specdata1: 0,
        specdata2: 0,
    },
    fsid: 0,
    fileid: 0,
    atime: Nfstime3 {
        seconds: 0,
        nseconds: 0,
    },
    mtime: Nfstime3 {
        seconds: 0,
        nseconds: 0,
    },
    ctime: Nfstime3 {
        seconds: 0,
        nseconds: 0,
    },
};

impl NfsService {
    fn getattr(&self, ctx: &CallContext<'_>, a: GetattrArgs<'_>) -> GetattrRes {
        let r = self
            .open(ctx, a.object)
            .and_then(|o| o.export.fs.getattr(&o.cred, &o.fh).map_err(status));
        match r {
            Ok(attr) => GetattrRes::Ok(GetattrResOk {
                obj_attributes: fattr(&attr),
            }),
            Err(status) => GetattrRes::Fail { status },
        }
    }

    fn setattr(&self, ctx: &CallContext<'_>, a: SetattrArgs<'_>) -> SetattrRes {
        let r = self.open_rw(ctx, a.object).map_err(early).and_then(|o| {
            o.export
                .fs
                .setattr(
                    &o.cred,
                    &o.fh,
                    &sattr(&a.new_attributes),
                    a.guard.map(convert::guard_time),
                )
                .map_err(fail_wcc)
        });
        match r {
            Ok(w) => SetattrRes::Ok(SetattrResOk { obj_wcc: wcc(&w) }),
            Err((status, obj_wcc)) => SetattrRes::Fail { status, obj_wcc },
        }
    }

    fn lookup(&self, ctx: &CallContext<'_>, a: LookupArgs<'_>) -> LookupRes {
        let o = match self.open(ctx, a.what.dir) {
            Ok(o) => o,
            Err(status) => {
                return LookupRes::Fail {
                    status,
                    dir_attributes: None,
                }
            }
        };
        if let Err(status) = check_name(a.what.name) {
            return LookupRes::Fail {
                status,
                dir_attributes: None,
            };
        }
        match o.export.fs.lookup(&o.cred, &o.fh, a.what.name) {
            Ok((fh, attr, dir)) => LookupRes::Ok(LookupResOk {
                object: self.key.seal(o.export.stamp(), &fh),
                obj_attributes: Some(fattr(&attr)),
                dir_attributes: post_op(dir.as_ref()),
            }),
            Err((e, dir)) => LookupRes::Fail {
                status: status(e),
                dir_attributes: post_op(dir.as_ref()),
            },
        }
    }

    fn access(&self, ctx: &CallContext<'_>, a: AccessArgs<'_>) -> AccessRes {
        let o = match self.open(ctx, a.object) {
            Ok(o) => o,
            Err(status) => {
                return AccessRes::Fail {
                    status,
                    obj_attributes: None,
                }
            }
        };
        match o
            .export
            .fs
            .access(&o.cred, &o.fh, a.access & rnfs_vfs::access::ALL)
        {
            Ok((mut granted, attr)) => {
                if o.export.read_only() {
                    use rnfs_vfs::access::{DELETE, EXTEND, MODIFY};
                    granted &= !(MODIFY | EXTEND | DELETE);
                }
                AccessRes::Ok(AccessResOk {
                    obj_attributes: Some(fattr(&attr)),
                    access: granted & a.access,
                })
            }
            Err(e) => AccessRes::Fail {
                status: status(e),
                obj_attributes: None,
            },
        }
    }

    fn readlink(&self, ctx: &CallContext<'_>, a: ReadlinkArgs<'_>, reply: &mut Writer<'_>) {
        let o = match self.open(ctx, a.symlink) {
            Ok(o) => o,
            Err(status) => {
                return ReadlinkRes::Fail {
                    status,
                    symlink_attributes: None,
                }
                .encode(reply)
            }
        };
        SCRATCH.with(|buf| {
            let mut buf = buf.borrow_mut();
            buf.clear();
            let res = match o.export.fs.readlink(&o.cred, &o.fh, &mut buf) {
                Ok(attr) => ReadlinkRes::Ok(ReadlinkResOk {
                    symlink_attributes: Some(fattr(&attr)),
                    data: &buf,
                }),
                Err(e) => ReadlinkRes::Fail {
                    status: status(e),
                    symlink_attributes: None,
                },
            };
            res.encode(reply);
        });
    }

    fn read(&self, ctx: &CallContext<'_>, a: ReadArgs<'_>, reply: &mut Writer<'_>) {
        let o = match self.open(ctx, a.file) {
            Ok(o) => o,
            Err(status) => {
                return ReadRes::Fail {
                    status,
                    file_attributes: None,
                }
                .encode(reply)
            }
        };
        SCRATCH.with(|buf| {
            let mut buf = buf.borrow_mut();
            buf.clear();
            let count = a.count.min(MAX_IO);
            // READ is quick (replies may be held for it) as long as its data is
            // in memory; before waiting for storage, let them go.
            let fs = &o.export.fs;
            let read = match fs.read_cached(&o.cred, &o.fh, a.offset, count, &mut buf) {
                Ok(Some(ok)) => Ok(ok),
                Ok(None) => {
                    crate::handler::before_blocking();
                    fs.read(&o.cred, &o.fh, a.offset, count, &mut buf)
                }
                Err(e) => Err(e),
            };
            let res = match read {
                Ok(ok) => {
                    let data = &buf[..(ok.count as usize).min(buf.len())];
                    if self.notes {
                        note::read(data.len() as u32);
                    }
                    ReadRes::Ok(ReadResOk {
                        file_attributes: post_op(ok.attr.as_ref()),
                        count: ok.count,
                        eof: ok.eof,
                        data,
                    })
                }
                Err(e) => ReadRes::Fail {
                    status: status(e),
                    file_attributes: None,
                },
            };
            res.encode(reply);
            // Do not keep a 1 MiB buffer per thread after a large read.
            if buf.capacity() > 256 << 10 {
                *buf = Vec::new();
            }
        });
    }

    fn write(&self, ctx: &CallContext<'_>, a: WriteArgs<'_>) -> WriteRes {
        let r = self.open_rw(ctx, a.file).map_err(early).and_then(|o| {
            // `count` and the data's length are equal from every client we know;
            // if they differ, write no more than both.
            let n = (a.count as usize).min(a.data.len());
            // Replies may be held for this WRITE (quick among its peers); a
            // write that waits for storage, or while writes stall, lets them go.
            let stable = convert::stability(a.stable);
            if stable != rnfs_vfs::Stability::Unstable || self.write_stalls.recent() {
                crate::handler::before_blocking();
            }
            // The verifier from before the write, as knfsd takes it: if a
            // writeback of this data fails while the write runs (and the
            // verifier changes), the reply must carry the old one, so that the
            // COMMIT's new one makes the client send the data again. Taken
            // after, both would carry the new one and the loss go unseen.
            let verf = o.export.fs.write_verifier();
            let started = coarse_now_ns();
            let written = o
                .export
                .fs
                .write(&o.cred, &o.fh, a.offset, &a.data[..n], stable);
            if stable == rnfs_vfs::Stability::Unstable {
                self.write_stalls.note(started, coarse_now_ns());
            }
            written.map(|ok| (ok, verf)).map_err(fail_wcc)
        });
        match r {
            Ok((ok, verf)) => {
                if self.notes {
                    note::written(ok.count);
                }
                WriteRes::Ok(WriteResOk {
                    file_wcc: wcc(&ok.wcc),
                    count: ok.count,
                    committed: convert::stable_how(ok.committed),
                    verf,
                })
            }
            Err((status, file_wcc)) => WriteRes::Fail { status, file_wcc },
        }
    }

    fn create_like(
        &self,
        ctx: &CallContext<'_>,
        where_: &DirOpArgs3<'_>,
        op: impl FnOnce(&dyn rnfs_vfs::Filesystem, &Cred, &BackendHandle, &[u8]) -> CreateResult,
    ) -> CreateLike {
        let o = match self.open_dir_rw(ctx, where_) {
            Ok(o) => o,
            Err(s) => return CreateLike::Fail(early(s)),
        };
        match op(&*o.export.fs, &o.cred, &o.fh, where_.name) {
            Ok(c) => CreateLike::Ok(CreateResOk {
                obj: Some(self.key.seal(o.export.stamp(), &c.handle)),
                obj_attributes: Some(fattr(&c.attr)),
                dir_wcc: wcc(&c.dir_wcc),
            }),
            Err(e) => CreateLike::Fail(fail_wcc(e)),
        }
    }

    fn remove_like(
        &self,
        ctx: &CallContext<'_>,
        object: &DirOpArgs3<'_>,
        dir: bool,
    ) -> Result<WccData, (Nfsstat3, WccData)> {
        let o = self.open_dir_rw(ctx, object).map_err(early)?;
        let r = if dir {
            o.export.fs.rmdir(&o.cred, &o.fh, object.name)
        } else {
            o.export.fs.remove(&o.cred, &o.fh, object.name)
        };
        r.map(|w| wcc(&w)).map_err(fail_wcc)
    }

    fn rename(&self, ctx: &CallContext<'_>, a: RenameArgs<'_>) -> RenameRes {
        let fail = |status| RenameRes::Fail {
            status,
            fromdir_wcc: WccData::default(),
            todir_wcc: WccData::default(),
        };
        let from = match self.open_dir_rw(ctx, &a.from) {
            Ok(o) => o,
            Err(s) => return fail(s),
        };
        let to = match self.open_dir_rw(ctx, &a.to) {
            Ok(o) => o,
            Err(s) => return fail(s),
        };
        if from.export.id != to.export.id {
            return fail(Nfsstat3::Xdev);
        }
        match from
            .export
            .fs
            .rename(&from.cred, &from.fh, a.from.name, &to.fh, a.to.name)
        {
            Ok((f, t)) => RenameRes::Ok(RenameResOk {
                fromdir_wcc: wcc(&f),
                todir_wcc: wcc(&t),
            }),
            Err((e, f, t)) => RenameRes::Fail {
                status: status(e),
                fromdir_wcc: wcc(&f),
                todir_wcc: wcc(&t),
            },
        }
    }

    fn link(&self, ctx: &CallContext<'_>, a: LinkArgs<'_>) -> LinkRes {
        let fail = |status| LinkRes::Fail {
            status,
            file_attributes: None,
            linkdir_wcc: WccData::default(),
        };
        let file = match self.open_rw(ctx, a.file) {
            Ok(o) => o,
            Err(s) => return fail(s),
        };
        let dir = match self.open_dir_rw(ctx, &a.link) {
            Ok(o) => o,
            Err(s) => return fail(s),
        };
        if file.export.id != dir.export.id {
            return fail(Nfsstat3::Xdev);
        }
        match dir
            .export
            .fs
            .link(&dir.cred, &file.fh, &dir.fh, a.link.name)
        {
            Ok((attr, w)) => LinkRes::Ok(LinkResOk {
                file_attributes: post_op(attr.as_ref()),
                linkdir_wcc: wcc(&w),
            }),
            Err((e, attr, w)) => LinkRes::Fail {
                status: status(e),
                file_attributes: post_op(attr.as_ref()),
                linkdir_wcc: wcc(&w),
            },
        }
    }

    fn readdir(&self, ctx: &CallContext<'_>, a: ReaddirArgs<'_>, reply: &mut Writer<'_>) {
        self.list(ctx, a.dir, a.cookie, a.cookieverf, None, a.count, reply);
    }

    fn readdirplus(&self, ctx: &CallContext<'_>, a: ReaddirplusArgs<'_>, reply: &mut Writer<'_>) {
        // `dircount` is ignored, as knfsd ignores it: only `maxcount` bounds
        // the reply. The Linux client asks for a `dircount` of `maxcount / 8`,
        // which would cut a reply of short names to about two thirds of the
        // entries `maxcount` holds, for as many more round trips per listing.
        self.list(
            ctx,
            a.dir,
            a.cookie,
            a.cookieverf,
            Some(u32::MAX),
            a.maxcount,
            reply,
        );
    }

    /// READDIR (`dircount` None) and READDIRPLUS. The reply is streamed: the
    /// directory's attributes and the cookie verifier go first on the wire but are
    /// known only once the backend has listed, so placeholders of the same size
    /// are written and overwritten at the end.
    #[allow(clippy::too_many_arguments, reason = "the two procedures' arguments")]
    fn list(
        &self,
        ctx: &CallContext<'_>,
        dir: NfsFh3<'_>,
        cookie: u64,
        verifier: CookieVerf3,
        dircount: Option<u32>,
        count: u32,
        reply: &mut Writer<'_>,
    ) {
        let o = match self.open(ctx, dir) {
            Ok(o) => o,
            Err(status) => {
                return ReaddirRes::Fail {
                    status,
                    dir_attributes: None,
                }
                .encode(reply)
            }
        };
        let fs = &*o.export.fs;
        let count = count.min(MAX_IO);
        // The backend reports the directory's attributes (and NOTDIR for a
        // non-directory, before listing anything); until then, zeros of the
        // same size hold their place.
        let placeholder = Some(PLACEHOLDER_ATTR);
        let start = reply.len();
        // Status word, then the post_op_attr flag, then the attributes.
        let attr_pos = start + 8;
        let verf_pos = attr_pos + Fattr3::WIRE_SIZE;

        let plus = dircount.is_some();
        let mut enc = match dircount {
            Some(dc) => Encoder::Plus(ReaddirplusEncoder::begin(
                reply,
                dc,
                count,
                0,
                &placeholder,
                &verifier,
            )),
            None => Encoder::Plain(ReaddirEncoder::begin(
                reply,
                count,
                0,
                &placeholder,
                &verifier,
            )),
        };
        let export = o.export.stamp();
        let result = fs.readdir(
            &o.cred,
            &o.fh,
            cookie,
            verifier,
            plus,
            &mut |e: DirEntry<'_>| enc.push(reply, &self.key, export, &e),
        );
        match result {
            Ok(end) => {
                if enc.is_too_small() {
                    return enc.too_small(reply, &post_op(end.dir_attr.as_ref()));
                }
                let after = match end.dir_attr {
                    Some(attr) => attr,
                    // A backend may list without them: fetch them, once.
                    None => match fs.getattr(&o.cred, &o.fh) {
                        Ok(attr) => attr,
                        Err(e) => {
                            reply.truncate(start);
                            return ReaddirRes::Fail {
                                status: status(e),
                                dir_attributes: None,
                            }
                            .encode(reply);
                        }
                    },
                };
                let mut attr = Vec::with_capacity(Fattr3::WIRE_SIZE);
                fattr(&after).encode(&mut Writer::new(&mut attr));
                reply.overwrite(attr_pos, &attr);
                reply.overwrite(verf_pos, &end.verifier);
                enc.finish(reply, end.eof);
            }
            Err((e, dir_attr)) => {
                reply.truncate(start);
                ReaddirRes::Fail {
                    status: status(e),
                    dir_attributes: post_op(dir_attr.as_ref()),
                }
                .encode(reply);
            }
        }
    }

    fn fsstat(&self, ctx: &CallContext<'_>, a: FsstatArgs<'_>) -> FsstatRes {
        let r = self
            .open(ctx, a.fsroot)
            .and_then(|o| o.export.fs.fsstat(&o.cred, &o.fh).map_err(status));
        match r {
            Ok((s, attr)) => FsstatRes::Ok(FsstatResOk {
                obj_attributes: Some(fattr(&attr)),
                tbytes: s.total_bytes,
                fbytes: s.free_bytes,
                abytes: s.avail_bytes,
                tfiles: s.total_files,
                ffiles: s.free_files,
                afiles: s.avail_files,
                invarsec: 0,
            }),
            Err(status) => FsstatRes::Fail {
                status,
                obj_attributes: None,
            },
        }
    }

    /// FSINFO and PATHCONF: the backend's static facts and the object's attributes.
    fn info(&self, ctx: &CallContext<'_>, fh: NfsFh3<'_>) -> Result<(FsInfo, Attr), Nfsstat3> {
        let o = self.open(ctx, fh)?;
        let attr = o.export.fs.getattr(&o.cred, &o.fh).map_err(status)?;
        Ok((o.export.fs.info(), attr))
    }

    fn fsinfo(&self, ctx: &CallContext<'_>, a: FsinfoArgs<'_>) -> FsinfoRes {
        match self.info(ctx, a.fsroot) {
            Ok((info, attr)) => {
                let mut properties = FSF3_HOMOGENEOUS | FSF3_CANSETTIME;
                if info.link {
                    properties |= FSF3_LINK;
                }
                if info.symlink {
                    properties |= FSF3_SYMLINK;
                }
                FsinfoRes::Ok(FsinfoResOk {
                    obj_attributes: Some(fattr(&attr)),
                    rtmax: MAX_IO,
                    rtpref: MAX_IO,
                    rtmult: 4096,
                    wtmax: MAX_IO,
                    wtpref: MAX_IO,
                    wtmult: 4096,
                    dtpref: DIR_PREF,
                    maxfilesize: info.max_file_size,
                    time_delta: convert::time(info.time_delta),
                    properties,
                })
            }
            Err(status) => FsinfoRes::Fail {
                status,
                obj_attributes: None,
            },
        }
    }

    fn pathconf(&self, ctx: &CallContext<'_>, a: PathconfArgs<'_>) -> PathconfRes {
        match self.info(ctx, a.object) {
            Ok((info, attr)) => PathconfRes::Ok(PathconfResOk {
                obj_attributes: Some(fattr(&attr)),
                linkmax: info.max_link,
                name_max: info.max_name,
                no_trunc: info.no_trunc,
                chown_restricted: info.chown_restricted,
                case_insensitive: info.case_insensitive,
                case_preserving: info.case_preserving,
            }),
            Err(status) => PathconfRes::Fail {
                status,
                obj_attributes: None,
            },
        }
    }

    fn commit(&self, ctx: &CallContext<'_>, a: CommitArgs<'_>) -> CommitRes {
        let r = self.open(ctx, a.file).map_err(early).and_then(|o| {
            o.export
                .fs
                .commit(&o.cred, &o.fh, a.offset, a.count)
                .map(|w| (w, o.export.fs.write_verifier()))
                .map_err(fail_wcc)
        });
        match r {
            Ok((w, verf)) => CommitRes::Ok(CommitResOk {
                file_wcc: wcc(&w),
                verf,
            }),
            Err((status, file_wcc)) => CommitRes::Fail { status, file_wcc },
        }
    }
}

/// READDIR or READDIRPLUS encoder.
enum Encoder {
    Plain(ReaddirEncoder),
    Plus(ReaddirplusEncoder),
}

impl Encoder {
    fn push(
        &mut self,
        w: &mut Writer<'_>,
        key: &HandleKey,
        export: ExportStamp,
        e: &DirEntry<'_>,
    ) -> bool {
        match self {
            Self::Plain(enc) => enc.push(w, e.fileid, e.name, e.cookie),
            Self::Plus(enc) => {
                let (attr, fh) = match &e.plus {
                    Some((fh, attr)) => (Some(fattr(attr)), Some(key.seal(export, fh))),
                    None => (None, None),
                };
                enc.push(w, e.fileid, e.name, e.cookie, attr.as_ref(), fh.as_ref())
            }
        }
    }

    fn is_too_small(&self) -> bool {
        match self {
            Self::Plain(enc) => enc.is_too_small(),
            Self::Plus(enc) => enc.is_too_small(),
        }
    }

    fn too_small(self, w: &mut Writer<'_>, dir_attributes: &PostOpAttr) {
        match self {
            Self::Plain(enc) => enc.too_small(w, dir_attributes),
            Self::Plus(enc) => enc.too_small(w, dir_attributes),
        }
    }

    fn finish(self, w: &mut Writer<'_>, eof: bool) {
        match self {
            Self::Plain(enc) => {
                enc.finish(w, eof);
            }
            Self::Plus(enc) => {
                enc.finish(w, eof);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stalled_write_stops_write_coalescing_for_the_backoff() {
        let threshold = WriteStalls::THRESHOLD_NS;
        let backoff = WriteStalls::BACKOFF_NS;
        let stalls = WriteStalls::new();
        let t0 = coarse_now_ns();
        assert!(!stalls.recent(), "none noted yet");
        stalls.note(t0, t0 + threshold);
        assert!(!stalls.recent(), "at the threshold is not a stall");
        let ended = coarse_now_ns();
        stalls.note(ended - threshold * 2, ended);
        assert!(stalls.recent());
        assert_eq!(stalls.until.load(Ordering::Relaxed), ended + backoff);
        // A stall that ended a backoff ago no longer counts.
        let stalls = WriteStalls::new();
        stalls.note(
            ended.saturating_sub(backoff + threshold * 3),
            ended.saturating_sub(backoff + threshold),
        );
        assert!(!stalls.recent(), "expired");
    }
}

//! fuser's [`Filesystem`]: each request is answered from the attribute cache
//! when it can be, else handed with its reply to the pool (see `pool.rs`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::consts::{
    FOPEN_KEEP_CACHE, FUSE_AUTO_INVAL_DATA, FUSE_DO_READDIRPLUS, FUSE_PARALLEL_DIROPS,
};
use fuser::{
    Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request,
    TimeOrNow,
};
use libc::c_int;
use rnfs_client::Credential;

use crate::attr::kind;
use crate::core::{Core, Entry, Errno, OpResult};
use crate::pool::Pool;

/// Statfs block size.
const STATFS_BSIZE: u64 = 4096;

/// The FUSE side of a mount.
#[derive(Debug)]
pub(crate) struct RnfsFs {
    core: Arc<Core>,
    pool: Pool,
}

fn entry(reply: ReplyEntry, r: OpResult<Entry>) {
    match r {
        Ok(e) => reply.entry(&e.ttl, &e.attr, 0),
        Err(Errno(e)) => reply.error(e),
    }
}

fn empty(reply: ReplyEmpty, r: OpResult<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(Errno(e)) => reply.error(e),
    }
}

fn attr(reply: ReplyAttr, r: OpResult<Entry>) {
    match r {
        Ok(e) => reply.attr(&e.ttl, &e.attr),
        Err(Errno(e)) => reply.error(e),
    }
}

impl RnfsFs {
    pub(crate) fn new(core: Arc<Core>, threads: usize) -> std::io::Result<Self> {
        Ok(Self {
            core,
            pool: Pool::new(threads)?,
        })
    }

    fn cred(&self, req: &Request<'_>) -> Credential {
        self.core.creds.get(req.uid(), req.gid(), req.pid())
    }

    /// Runs `f` on the pool with the caller's credential and the reply.
    /// `what` on node `ino` names the request in slow-request warnings.
    fn spawn<R: Send + 'static>(
        &self,
        tag: (&'static str, u64),
        req: &Request<'_>,
        reply: R,
        f: impl FnOnce(&Core, Credential, R) + Send + 'static,
    ) {
        let cred = self.cred(req);
        self.run(tag, reply, move |core, reply| f(core, cred, reply));
    }

    /// [`spawn`](Self::spawn) for a request that needs no credential (the
    /// open file's own is used): none is looked up.
    fn run<R: Send + 'static>(
        &self,
        (what, ino): (&'static str, u64),
        reply: R,
        f: impl FnOnce(&Core, R) + Send + 'static,
    ) {
        let core = self.core.clone();
        self.pool.spawn(what, ino, move || f(&core, reply));
    }
}

impl Filesystem for RnfsFs {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), c_int> {
        let (rsize, wsize) = self.core.io_sizes();
        let _ = config.set_max_write(wsize);
        let _ = config.set_max_readahead(rsize);
        let _ = config.set_max_background(64);
        let _ = config.set_congestion_threshold(48);
        // Each separately: an old kernel lacking one still mounts.
        for cap in [
            FUSE_DO_READDIRPLUS,
            FUSE_PARALLEL_DIROPS,
            FUSE_AUTO_INVAL_DATA,
        ] {
            if config.add_capabilities(cap).is_err() {
                tracing::debug!("kernel lacks FUSE capability {cap:#x}");
            }
        }
        Ok(())
    }

    fn destroy(&mut self) {
        self.pool.shutdown();
        self.core.shutdown();
    }

    fn lookup(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let name = name.to_owned();
        self.spawn(("lookup", parent), req, reply, move |core, cred, reply| {
            entry(reply, core.lookup(parent, &name, cred));
        });
    }

    fn forget(&mut self, _req: &Request<'_>, ino: u64, nlookup: u64) {
        self.core.forget(ino, nlookup);
    }

    fn batch_forget(&mut self, _req: &Request<'_>, nodes: &[fuser::fuse_forget_one]) {
        self.core.with_table(|t| {
            for n in nodes {
                t.forget(n.nodeid, n.nlookup);
            }
        });
    }

    fn getattr(&mut self, req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        if let Some(e) = self.core.cached_attr(ino) {
            reply.attr(&e.ttl, &e.attr);
            return;
        }
        self.spawn(("getattr", ino), req, reply, move |core, cred, reply| {
            attr(reply, core.getattr(ino, cred));
        });
    }

    fn setattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        self.spawn(("setattr", ino), req, reply, move |core, cred, reply| {
            attr(
                reply,
                core.setattr(ino, cred, mode, uid, gid, size, atime, mtime, fh.is_some()),
            );
        });
    }

    fn readlink(&mut self, req: &Request<'_>, ino: u64, reply: ReplyData) {
        self.spawn(
            ("readlink", ino),
            req,
            reply,
            move |core, cred, reply| match core.readlink(ino, cred) {
                Ok(target) => reply.data(&target),
                Err(Errno(e)) => reply.error(e),
            },
        );
    }

    fn mknod(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let name = name.to_owned();
        self.spawn(("mknod", parent), req, reply, move |core, cred, reply| {
            entry(reply, core.mknod(parent, &name, mode, rdev, cred));
        });
    }

    fn mkdir(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let name = name.to_owned();
        self.spawn(("mkdir", parent), req, reply, move |core, cred, reply| {
            entry(reply, core.mkdir(parent, &name, mode, cred));
        });
    }

    fn unlink(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.spawn(("unlink", parent), req, reply, move |core, cred, reply| {
            empty(reply, core.unlink(parent, &name, cred));
        });
    }

    fn rmdir(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.spawn(("rmdir", parent), req, reply, move |core, cred, reply| {
            empty(reply, core.rmdir(parent, &name, cred));
        });
    }

    fn symlink(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        link_name: &OsStr,
        target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        let name = link_name.to_owned();
        let target = target.as_os_str().as_bytes().to_vec();
        self.spawn(("symlink", parent), req, reply, move |core, cred, reply| {
            entry(reply, core.symlink(parent, &name, &target, cred));
        });
    }

    fn rename(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        let (name, newname) = (name.to_owned(), newname.to_owned());
        self.spawn(("rename", parent), req, reply, move |core, cred, reply| {
            empty(
                reply,
                core.rename(parent, &name, newparent, &newname, flags, cred),
            );
        });
    }

    fn link(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let name = newname.to_owned();
        self.spawn(("link", ino), req, reply, move |core, cred, reply| {
            entry(reply, core.link(ino, newparent, &name, cred));
        });
    }

    fn open(&mut self, req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.spawn(
            ("open", ino),
            req,
            reply,
            move |core, cred, reply| match core.open(ino, flags, cred) {
                Ok((handle, keep)) => reply.opened(handle, if keep { FOPEN_KEEP_CACHE } else { 0 }),
                Err(Errno(e)) => reply.error(e),
            },
        );
    }

    fn read(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        let Ok(offset) = u64::try_from(offset) else {
            reply.error(libc::EINVAL);
            return;
        };
        self.spawn(
            ("read", ino),
            req,
            reply,
            move |core, cred, reply| match core.read(ino, offset, size, cred) {
                Ok(data) => reply.data(&data),
                Err(Errno(e)) => reply.error(e),
            },
        );
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let Ok(offset) = u64::try_from(offset) else {
            reply.error(libc::EINVAL);
            return;
        };
        // The request buffer is reused for the next request: copy.
        let data = data.to_vec();
        self.run(("write", ino), reply, move |core, reply| {
            match core.write(ino, offset, &data) {
                Ok(n) => reply.written(n),
                Err(Errno(e)) => reply.error(e),
            }
        });
    }

    fn flush(&mut self, _req: &Request<'_>, ino: u64, fh: u64, _lock: u64, reply: ReplyEmpty) {
        self.run(("flush", ino), reply, move |core, reply| {
            empty(reply, core.flush(ino, fh));
        });
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // A silly-renamed file goes as its unlinker: the kernel sends the
        // release as root.
        self.run(("release", ino), reply, move |core, reply| {
            empty(reply, core.release(ino, fh));
        });
    }

    fn fsync(&mut self, _req: &Request<'_>, ino: u64, fh: u64, _datasync: bool, reply: ReplyEmpty) {
        self.run(("fsync", ino), reply, move |core, reply| {
            empty(reply, core.fsync(ino, fh));
        });
    }

    fn opendir(&mut self, _req: &Request<'_>, _ino: u64, _flags: i32, reply: ReplyOpen) {
        reply.opened(self.core.opendir(), 0);
    }

    fn readdir(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        reply: ReplyDirectory,
    ) {
        self.spawn(
            ("readdir", ino),
            req,
            reply,
            move |core, cred, mut reply| {
                let listed = core.list_dir(ino, fh, offset as u64, cred, |t, item, _, _| {
                    let ino = core.dir_ino(t, ino, item);
                    let name = OsStr::from_bytes(&item.name);
                    reply.add(ino, item.cookie as i64, kind(item.attr.ftype), name)
                });
                match listed {
                    Ok(()) => reply.ok(),
                    Err(Errno(e)) => reply.error(e),
                }
            },
        );
    }

    fn readdirplus(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        reply: ReplyDirectoryPlus,
    ) {
        self.spawn(
            ("readdirplus", ino),
            req,
            reply,
            move |core, cred, mut reply| {
                let listed =
                    core.list_dir(ino, fh, offset as u64, cred, |t, item, now, changed| {
                        let (e, counted) = core.dir_entry(t, ino, item, now, changed);
                        let name = OsStr::from_bytes(&item.name);
                        let full =
                            reply.add(e.attr.ino, item.cookie as i64, name, &e.ttl, &e.attr, 0);
                        // Not sent: the kernel did not see this lookup.
                        if full && counted {
                            t.forget(e.attr.ino, 1);
                        }
                        full
                    });
                match listed {
                    Ok(()) => reply.ok(),
                    Err(Errno(e)) => reply.error(e),
                }
            },
        );
    }

    fn releasedir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        reply: ReplyEmpty,
    ) {
        self.core.releasedir(fh);
        reply.ok();
    }

    fn fsyncdir(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _ds: bool, reply: ReplyEmpty) {
        // Directory operations are synchronous on the server already.
        reply.ok();
    }

    fn statfs(&mut self, req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        self.spawn(
            ("statfs", 1),
            req,
            reply,
            move |core, cred, reply| match core.statfs(cred) {
                Ok(s) => reply.statfs(
                    s.tbytes / STATFS_BSIZE,
                    s.fbytes / STATFS_BSIZE,
                    s.abytes / STATFS_BSIZE,
                    s.tfiles,
                    s.ffiles,
                    STATFS_BSIZE as u32,
                    core.name_max(),
                    STATFS_BSIZE as u32,
                ),
                Err(Errno(e)) => reply.error(e),
            },
        );
    }

    fn access(&mut self, req: &Request<'_>, ino: u64, mask: i32, reply: ReplyEmpty) {
        self.spawn(("access", ino), req, reply, move |core, cred, reply| {
            empty(reply, core.access(ino, cred, mask));
        });
    }

    fn create(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let name = name.to_owned();
        self.spawn(
            ("create", parent),
            req,
            reply,
            move |core, cred, reply| match core.create(parent, &name, mode, flags, cred) {
                Ok((e, handle)) => reply.created(&e.ttl, &e.attr, 0, handle, 0),
                Err(Errno(e)) => reply.error(e),
            },
        );
    }
}

//! The MOUNT program (100005), versions 1 to 3 (RFC 1813 appendix I).
//!
//! MNT hands out the handle of an export's root, or of a directory below it
//! (`/srv/data/projects` of the export `/srv/data`, as mountd allows), after
//! checking the client's address; it
//! exists only in version 3 here, because versions 1 and 2 carry 32-byte handles
//! and ours are up to 64 bytes (their MNT answers PROC_UNAVAIL). DUMP, UMNT,
//! UMNTALL and EXPORT have the same form in every version, so `showmount`, which
//! speaks version 1, works.
//!
//! The mount list (DUMP) is advisory, as in every implementation: it is bounded
//! and forgotten on restart; nothing depends on it.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rnfs_nfs3::{
    DumpRes, ExportNode, ExportRes, MntArgs, MountBody, MountProc3, Mountres3, Mountres3Ok,
    Mountstat3, UmntArgs, NAME_MAX,
};
use rnfs_rpc::{CallContext, Service, ServiceError};
use rnfs_vfs::{identity, BackendHandle, FileType, FsError};
use rnfs_xdr::{Decode, Encode, Reader, Writer};

use super::exports::{Export, ExportTable, Exports};
use super::handles::HandleKey;

/// AUTH_SYS, the only flavor offered at mount time.
const AUTH_SYS: u32 = 1;
/// Most (host, path) pairs remembered for DUMP.
const MAX_MOUNT_LIST: usize = 4096;

/// The mount list: (client address, mount path) pairs, for DUMP and for the
/// per-client rows of [`StatsSnapshot`](crate::metrics::StatsSnapshot).
/// Bounded: at most [`MAX_MOUNT_LIST`] pairs are kept.
#[derive(Debug, Default)]
pub(crate) struct MountList {
    set: Mutex<BTreeSet<(String, String)>>,
    /// Bumped by every removal from `set`, under its lock (see
    /// [`removals`](Self::removals)).
    removals: AtomicU64,
}

impl MountList {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<(String, String)>> {
        // The set stays consistent even if a holder panicked.
        self.set
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A removal from the list, under its lock (after it). `Relaxed`: the
    /// count orders nothing else; see [`removals`](Self::removals).
    fn removed(&self) {
        self.removals.fetch_add(1, Ordering::Relaxed);
    }

    /// A count of the removals from the list (UMNT, UMNTALL: nothing else
    /// takes a mount away, not even the removal of its export). While it
    /// stays the same, a host seen with a mount still has one: an insert
    /// never takes one away. The client table's eviction relies on that.
    ///
    /// `Relaxed` is enough: the list itself is only read under its lock, and
    /// the count is bumped under that lock. A reader that reads the count,
    /// then finds a host mounted (under the lock), locked before any later
    /// removal of that mount, so the count it read cannot include that
    /// removal (coherence, through the lock's happens-before); and a read
    /// that happens after the removal (after its unlock) sees it.
    pub(crate) fn removals(&self) -> u64 {
        self.removals.load(Ordering::Relaxed)
    }

    /// Adds `host` mounting `path` (unless the list is full).
    pub(crate) fn insert(&self, host: &str, path: &str) {
        let mut set = self.lock();
        if set.len() < MAX_MOUNT_LIST {
            set.insert((host.to_owned(), path.to_owned()));
        }
    }

    /// Removes `host`'s mount of `path`; whether it was listed.
    pub(crate) fn remove(&self, host: &str, path: &str) -> bool {
        let mut set = self.lock();
        let removed = set.remove(&(host.to_owned(), path.to_owned()));
        if removed {
            self.removed();
        }
        removed
    }

    /// Removes every mount of `host`; returns their paths.
    pub(crate) fn remove_host(&self, host: &str) -> Vec<String> {
        let mut removed = Vec::new();
        let mut set = self.lock();
        set.retain(|(h, p)| {
            let keep = h != host;
            if !keep {
                removed.push(p.clone());
            }
            keep
        });
        if !removed.is_empty() {
            self.removed();
        }
        removed
    }

    /// Whether `host` has a mount: one search of the sorted list.
    pub(crate) fn has_host(&self, host: &str) -> bool {
        let first = (host.to_owned(), String::new());
        self.lock()
            .range(first..)
            .next()
            .is_some_and(|(h, _)| h == host)
    }

    /// Every (host, path) pair, sorted.
    pub(crate) fn entries(&self) -> Vec<(String, String)> {
        self.lock().iter().cloned().collect()
    }
}

/// The MOUNT service.
#[derive(Debug)]
pub struct MountService {
    exports: Arc<Exports>,
    key: HandleKey,
    mounts: Arc<MountList>,
    /// Whether a MNT below an export's root looks names up as the caller
    /// (the server runs as root), as NFS calls do.
    switch_identity: bool,
}

impl MountService {
    /// A MOUNT service for `exports`, sealing root handles with `key`.
    pub fn new(exports: Arc<Exports>, key: HandleKey) -> Self {
        Self::with_mount_list(exports, key, Arc::default())
    }

    /// A MOUNT service keeping its mount list in `mounts` (shared with the
    /// server's metrics).
    pub(crate) fn with_mount_list(
        exports: Arc<Exports>,
        key: HandleKey,
        mounts: Arc<MountList>,
    ) -> Self {
        Self {
            exports,
            key,
            mounts,
            switch_identity: identity::can_switch(),
        }
    }

    fn host(ctx: &CallContext<'_>) -> String {
        ctx.peer
            .map_or_else(|| "unknown".to_owned(), |p| p.ip().to_string())
    }

    /// The caller's address and port, for logs.
    fn mnt(&self, ctx: &CallContext<'_>, a: MntArgs<'_>) -> Mountres3 {
        // Logged as a quoted field: the path is the client's to choose.
        let shown = String::from_utf8_lossy(a.dirpath);
        let path = match canonical_path(a.dirpath) {
            Ok(path) => path,
            Err(status) => {
                tracing::info!(peer = %ctx.peer_name(), path = ?shown, "MNT refused: {status:?}");
                return Mountres3::Fail(status);
            }
        };
        let table = self.exports.load();
        let Some((export, below)) = export_holding(&table, &path) else {
            tracing::info!(peer = %ctx.peer_name(), path = ?shown, "MNT: no such export");
            return Mountres3::Fail(Mountstat3::Noent);
        };
        if let Err(refusal) = export.options.check(ctx.peer) {
            if let Some(not_logged) = export.refusals.admit(ctx.peer) {
                tracing::warn!(peer = %ctx.peer_name(), path = ?shown, not_logged, "MNT refused: {refusal}");
            }
            return Mountres3::Fail(Mountstat3::Acces);
        }
        let dir = match self.resolve_below(ctx, export, below) {
            Ok(dir) => dir,
            Err(status) => {
                tracing::info!(peer = %ctx.peer_name(), path = ?shown, "MNT refused: {status:?}");
                return Mountres3::Fail(status);
            }
        };
        let fhandle = self.key.seal(export.stamp(), &dir);
        let host = Self::host(ctx);
        let mounted = String::from_utf8_lossy(&path);
        self.mounts.insert(&host, &mounted);
        tracing::info!(peer = %ctx.peer_name(), export = %export.mount_path, path = ?mounted, "client mounted");
        Mountres3::Ok(Mountres3Ok {
            fhandle,
            auth_flavors: vec![AUTH_SYS],
        })
    }

    /// The directory `below` (slash-separated names, maybe empty) under the
    /// export's root, looked up name by name as the caller (after squashing),
    /// as a LOOKUP would: a client cannot mount a directory it could not
    /// reach through the export. `..` is refused rather than resolved, so the
    /// walk never leaves the export.
    fn resolve_below(
        &self,
        ctx: &CallContext<'_>,
        export: &Export,
        below: &[u8],
    ) -> Result<BackendHandle, Mountstat3> {
        let mut dir = export.fs.root();
        if below.is_empty() {
            return Ok(dir);
        }
        let cred = export
            .options
            .act_as(ctx.auth, self.switch_identity)
            .map_err(|e| {
                tracing::error!("{e}");
                Mountstat3::Serverfault
            })?;
        for name in below.split(|&b| b == b'/') {
            if name.len() > NAME_MAX {
                return Err(Mountstat3::Nametoolong);
            }
            let (fh, attr, _) = export
                .fs
                .lookup(&cred, &dir, name)
                .map_err(|(e, _)| mount_status(e))?;
            if attr.ftype != FileType::Directory {
                return Err(Mountstat3::Notdir);
            }
            dir = fh;
        }
        Ok(dir)
    }
}

/// A MNT path with empty and `.` components dropped (`/data//x/./y` is
/// `/data/x/y`), so that one directory is matched to one export however it
/// is spelled. Must be absolute (NOENT); `..` is refused (INVAL) rather than
/// resolved, so the walk below an export never leaves it.
fn canonical_path(raw: &[u8]) -> Result<Vec<u8>, Mountstat3> {
    if raw.first() != Some(&b'/') {
        return Err(Mountstat3::Noent);
    }
    let mut path = Vec::with_capacity(raw.len());
    for name in raw.split(|&b| b == b'/') {
        match name {
            b"" | b"." => {}
            b".." => return Err(Mountstat3::Inval),
            name => {
                path.push(b'/');
                path.extend_from_slice(name);
            }
        }
    }
    if path.is_empty() {
        path.push(b'/');
    }
    Ok(path)
}

/// The export whose mount path is the canonical `path` or its longest
/// ancestor, and the rest of `path` below it (names separated by single
/// slashes; empty for the export itself). One hash lookup per component of
/// `path`, at most. Names below an export may be any bytes; mount paths are
/// UTF-8, so a prefix that is not is no export.
fn export_holding<'t, 'p>(
    table: &'t ExportTable,
    path: &'p [u8],
) -> Option<(&'t Arc<Export>, &'p [u8])> {
    let mut end = path.len();
    loop {
        let prefix = if end == 0 { &b"/"[..] } else { &path[..end] };
        if let Some(export) = std::str::from_utf8(prefix)
            .ok()
            .and_then(|p| table.by_mount_path(p))
        {
            let below = path.get(end + 1..).unwrap_or_default();
            return Some((export, below));
        }
        if end == 0 {
            return None;
        }
        end = path[..end].iter().rposition(|&b| b == b'/')?;
    }
}

/// A backend error met while resolving a MNT path, as MOUNT reports it.
fn mount_status(e: FsError) -> Mountstat3 {
    match e {
        FsError::NoEnt | FsError::Stale | FsError::XDev => Mountstat3::Noent,
        FsError::Access => Mountstat3::Acces,
        FsError::Perm => Mountstat3::Perm,
        FsError::NotDir => Mountstat3::Notdir,
        FsError::NameTooLong => Mountstat3::Nametoolong,
        FsError::Inval => Mountstat3::Inval,
        FsError::Io => Mountstat3::Io,
        _ => Mountstat3::Serverfault,
    }
}

impl Service for MountService {
    fn program(&self) -> u32 {
        crate::services::MOUNT_PROGRAM
    }

    fn versions(&self) -> (u32, u32) {
        (1, 3)
    }

    fn name(&self) -> &'static str {
        "mount"
    }

    fn call(
        &self,
        ctx: &CallContext<'_>,
        args: &mut Reader<'_>,
        reply: &mut Writer<'_>,
    ) -> Result<(), ServiceError> {
        let proc_ = MountProc3::try_from(ctx.proc_).map_err(|_| ServiceError::ProcUnavail)?;
        match proc_ {
            MountProc3::Null => {}
            MountProc3::Mnt if ctx.vers != 3 => return Err(ServiceError::ProcUnavail),
            MountProc3::Mnt => self.mnt(ctx, MntArgs::decode(args)?).encode(reply),
            MountProc3::Dump => {
                let mounts = self.mounts.entries();
                DumpRes {
                    mounts: mounts
                        .iter()
                        .map(|(host, dir)| MountBody {
                            hostname: host.as_bytes(),
                            directory: dir.as_bytes(),
                        })
                        .collect(),
                }
                .encode(reply);
            }
            MountProc3::Umnt => {
                let a = UmntArgs::decode(args)?;
                // As MNT recorded it: a client unmounts with the spelling it
                // mounted with.
                let path = canonical_path(a.dirpath).unwrap_or_else(|_| a.dirpath.to_vec());
                let path = String::from_utf8_lossy(&path);
                let host = Self::host(ctx);
                if self.mounts.remove(&host, &path) {
                    tracing::info!(peer = %ctx.peer_name(), export = ?path, "client unmounted");
                }
            }
            MountProc3::Umntall => {
                let host = Self::host(ctx);
                for path in self.mounts.remove_host(&host) {
                    tracing::info!(peer = %ctx.peer_name(), export = %path, "client unmounted");
                }
            }
            MountProc3::Export => {
                let table = self.exports.load();
                ExportRes {
                    exports: table
                        .iter()
                        .map(|e| ExportNode {
                            dir: e.mount_path.as_bytes(),
                            groups: e
                                .config
                                .clients
                                .iter()
                                .flatten()
                                .map(|c| c.as_bytes())
                                .collect(),
                        })
                        .collect(),
                }
                .encode(reply);
            }
        }
        Ok(())
    }

    /// Only NULL: the rest touch the export table or the mount list.
    fn is_quick(&self, _vers: u32, proc_: u32) -> bool {
        matches!(MountProc3::try_from(proc_), Ok(MountProc3::Null))
    }
}

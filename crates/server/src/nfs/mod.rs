//! The NFSv3 and MOUNT services over [`rnfs_vfs`] backends: exports and their
//! options ([`exports`]), file handles ([`handles`]), the MOUNT program
//! ([`MountService`]) and the NFS program ([`NfsService`]).

mod convert;
pub mod exports;
pub mod handles;
mod mount;
mod nfs3;

use std::sync::Arc;

use rnfs_rpc::{Dispatcher, RegisterError};

use crate::metrics::Metrics;

pub use exports::{ConfigError, ConfigFile, ExportConfig, Exports};
pub use handles::HandleKey;
pub(crate) use mount::MountList;
pub use mount::MountService;
pub use nfs3::{NfsService, DIR_PREF, MAX_IO};

/// The duplicate request cache setting for NFSv3: SETATTR, WRITE, CREATE, MKDIR,
/// SYMLINK, MKNOD, REMOVE, RMDIR, RENAME and LINK are cached, as in knfsd.
pub fn drc_config() -> crate::DrcConfig {
    crate::DrcConfig {
        limits: crate::drc::DrcLimits::default(),
        cached: |prog, vers, proc_| {
            prog == crate::services::NFS_PROGRAM
                && vers == 3
                && rnfs_nfs3::NfsProc3::try_from(proc_).is_ok_and(|p| !p.is_idempotent())
        },
    }
}

/// A dispatcher serving NFSv3 and MOUNT (versions 1-3) for `exports`. NFSACL is
/// not registered: Linux clients ask for it at mount time, get PROG_UNAVAIL and
/// carry on without ACLs.
pub fn dispatcher(exports: Arc<Exports>, key: HandleKey) -> Result<Dispatcher, RegisterError> {
    dispatcher_with_metrics(exports, key, None)
}

/// [`dispatcher`], feeding `metrics` (give the same [`Metrics`] to
/// [`ServerConfig::metrics`](crate::ServerConfig::metrics)): the NFS service notes
/// each call's export and READ/WRITE bytes, the MOUNT service keeps its mount list
/// in `metrics` (per-client mounts), and `metrics` lists `exports` in snapshots.
pub fn dispatcher_with_metrics(
    exports: Arc<Exports>,
    key: HandleKey,
    metrics: Option<Arc<Metrics>>,
) -> Result<Dispatcher, RegisterError> {
    let mut d = Dispatcher::new();
    let (nfs, mount) = match &metrics {
        None => (
            NfsService::new(Arc::clone(&exports), key.clone()),
            MountService::new(exports, key),
        ),
        Some(m) => {
            m.set_exports(Arc::clone(&exports));
            (
                NfsService::with_metrics(Arc::clone(&exports), key.clone()),
                MountService::with_mount_list(exports, key, m.mount_list()),
            )
        }
    };
    d.register(Arc::new(nfs))?;
    d.register(Arc::new(mount))?;
    Ok(d)
}

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

pub use exports::{ConfigError, ConfigFile, ExportConfig, Exports};
pub use handles::HandleKey;
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
    let mut d = Dispatcher::new();
    d.register(Arc::new(NfsService::new(Arc::clone(&exports), key.clone())))?;
    d.register(Arc::new(MountService::new(exports, key)))?;
    Ok(d)
}

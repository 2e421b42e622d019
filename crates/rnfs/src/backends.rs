//! Opens the backend of an export from its configuration.

use std::sync::Arc;

use rnfs_server::nfs::exports::BackendKind;
use rnfs_server::nfs::ExportConfig;
use rnfs_vfs::local::{LocalFs, LocalOptions};
use rnfs_vfs::memory::MemoryFs;
use rnfs_vfs::Filesystem;

/// The backend for `c`. Read-only exports are enforced by the NFS service, not
/// the backend, so a reload can switch `access` without reopening it.
pub(crate) fn open(c: &ExportConfig) -> Result<Arc<dyn Filesystem>, String> {
    match c.backend {
        BackendKind::Local => LocalFs::open(
            &c.path,
            LocalOptions {
                attr_max_age: c.attr_cache_max_age,
                sync_metadata: c.sync,
                ..LocalOptions::default()
            },
        )
        .map(|fs| Arc::new(fs) as Arc<dyn Filesystem>)
        .map_err(|e| e.to_string()),
        BackendKind::Memory => Ok(Arc::new(MemoryFs::new(u64::from(c.export_id())))),
    }
}

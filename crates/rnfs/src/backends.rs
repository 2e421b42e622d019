//! Opens the backend of an export from its configuration.

use std::sync::Arc;

use rnfs_server::nfs::exports::{BackendKind, BackendOpener};
use rnfs_server::nfs::ExportConfig;
use rnfs_vfs::local::{LocalFs, LocalOptions, SharedVerifier};
use rnfs_vfs::memory::MemoryFs;
use rnfs_vfs::Filesystem;

/// The opener of every export's backend for one server. Its local exports
/// share one write verifier, as knfsd's exports do: when one export sees a
/// write-back error first, a COMMIT of the same file through another
/// (nested exports) still answers with a new verifier. A reload keeps it,
/// so reopening an export does not make its clients resend.
pub(crate) fn opener() -> anyhow::Result<Box<BackendOpener>> {
    let verifier = SharedVerifier::random()
        .map_err(|e| anyhow::anyhow!("cannot read /dev/urandom for the write verifier: {e}"))?;
    Ok(Box::new(move |c: &ExportConfig| open(c, &verifier)))
}

/// The backend for `c`. Read-only exports are enforced by the NFS service, not
/// the backend, so a reload can switch `access` without reopening it.
fn open(c: &ExportConfig, verifier: &SharedVerifier) -> Result<Arc<dyn Filesystem>, String> {
    match c.backend {
        BackendKind::Local => LocalFs::open(
            &c.path,
            LocalOptions {
                attr_max_age: c.attr_cache_max_age,
                sync_metadata: c.sync,
                verifier: Some(verifier.clone()),
                ..LocalOptions::default()
            },
        )
        .map(|fs| Arc::new(fs) as Arc<dyn Filesystem>)
        .map_err(|e| e.to_string()),
        BackendKind::Memory => Ok(Arc::new(MemoryFs::new(u64::from(c.export_id())))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two local exports of one server answer with the same verifier, and
    /// a backend reopened by a reload keeps it.
    #[test]
    fn local_exports_share_the_write_verifier() {
        let top = tempfile::tempdir().unwrap();
        let inner = top.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        let open = opener().unwrap();
        let outer_fs = open(&ExportConfig::new(top.path())).unwrap();
        let inner_fs = open(&ExportConfig::new(&inner)).unwrap();
        let reopened = open(&ExportConfig::new(top.path())).unwrap();
        assert_eq!(outer_fs.write_verifier(), inner_fs.write_verifier());
        assert_eq!(outer_fs.write_verifier(), reopened.write_verifier());
        let other_server = opener().unwrap()(&ExportConfig::new(top.path())).unwrap();
        assert_ne!(other_server.write_verifier(), outer_fs.write_verifier());
    }
}

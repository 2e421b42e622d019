//! The server a client test talks to: an in-process rnfs server by default,
//! or any NFSv3 server named by `RNFS_TEST_SERVER_URL` (e.g. nfs-ganesha:
//! `nfs://127.0.0.1/export?nfsport=2049&mountport=...`), which must export a
//! writable directory the tests may fill and empty.
#![allow(dead_code, reason = "each test binary uses a different subset")]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use rnfs_client::{ClientOptions, Credential, DirtyBudget, IoConfig, NfsFile, NfsUrl, Session};
use rnfs_nfs3::{FileHandle, Sattr3};
use rnfs_server::nfs::exports::{Access, BackendKind, ExportConfig, Exports, Squash};
use rnfs_server::nfs::{self, HandleKey};
use rnfs_server::{Server, ServerConfig};
use rnfs_vfs::Filesystem;

/// Opens `fh` as an [`NfsFile`] with its current attributes.
pub(crate) fn open(
    s: &Session,
    fh: FileHandle,
    config: IoConfig,
    budget: &Arc<DirtyBudget>,
) -> NfsFile {
    let attr = s.nfs().getattr(&fh).unwrap();
    NfsFile::new(s.nfs().clone(), fh, &attr, config, Arc::clone(budget))
}

/// A server under test and a fresh, empty directory on it for this test.
pub(crate) struct TestServer {
    /// The export's URL.
    pub(crate) url: NfsUrl,
    server: Option<Server>,
    _dir: Option<tempfile::TempDir>,
}

/// Which rnfs backend an in-process server uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// The memory backend.
    Memory,
    /// The local backend on a temporary directory.
    Local,
}

impl TestServer {
    /// The external server if `RNFS_TEST_SERVER_URL` is set, else an
    /// in-process rnfs server with the local backend.
    pub(crate) fn start() -> Self {
        match std::env::var("RNFS_TEST_SERVER_URL") {
            Ok(url) if !url.is_empty() => Self {
                url: NfsUrl::parse(&url).expect("RNFS_TEST_SERVER_URL"),
                server: None,
                _dir: None,
            },
            _ => Self::rnfs(Backend::Local),
        }
    }

    /// An in-process rnfs server (4 threads, squash none) on loopback.
    pub(crate) fn rnfs(backend: Backend) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut c = ExportConfig::new(dir.path());
        c.mount_path = Some("/export".into());
        c.backend = match backend {
            Backend::Memory => BackendKind::Memory,
            Backend::Local => BackendKind::Local,
        };
        c.access = Access::Rw;
        c.squash = Squash::None;
        let exports = Arc::new(
            Exports::new(
                &[c],
                Box::new(|c: &ExportConfig| match c.backend {
                    BackendKind::Memory => Ok(Arc::new(rnfs_vfs::memory::MemoryFs::new(u64::from(
                        c.export_id(),
                    ))) as Arc<dyn Filesystem>),
                    BackendKind::Local => {
                        rnfs_vfs::local::LocalFs::open(&c.path, Default::default())
                            .map(|fs| Arc::new(fs) as Arc<dyn Filesystem>)
                            .map_err(|e| e.to_string())
                    }
                }),
            )
            .unwrap(),
        );
        let d = nfs::dispatcher(exports, HandleKey::ephemeral().unwrap()).unwrap();
        let mut config = ServerConfig::new(vec!["127.0.0.1:0".parse().unwrap()]);
        let mut sched = rnfs_sched::Config::fixed(4);
        sched.name = "rnfs-test".into();
        sched.pool_mode = rnfs_sched::PoolMode::Global;
        sched.pin_threads = false;
        config.sched = sched;
        config.drc = Some(nfs::drc_config());
        let server = Server::start_with_dispatcher(config, Arc::new(d)).unwrap();
        let port = server.local_addrs()[0].port();
        Self {
            url: NfsUrl::parse(&format!("nfs://127.0.0.1:{port}/export")).unwrap(),
            server: Some(server),
            _dir: Some(dir),
        }
    }

    /// Stops an in-process server (its connections close); no-op for an
    /// external one.
    pub(crate) fn stop(&mut self) {
        drop(self.server.take());
    }

    /// Whether the server runs in this process (and [`stop`](Self::stop)
    /// stops it).
    pub(crate) fn is_in_process(&self) -> bool {
        self.server.is_some()
    }

    /// A session on the export, as root, with default options.
    pub(crate) fn session(&self) -> Session {
        self.session_with(ClientOptions::default())
    }

    /// A session on the export with `options`.
    pub(crate) fn session_with(&self, options: ClientOptions) -> Session {
        Session::connect(&self.url, options, Credential::root())
            .unwrap()
            .0
    }

    /// A new, empty directory for one test (so tests can share an external
    /// server): its handle, in a session.
    pub(crate) fn scratch(&self, session: &Session) -> FileHandle {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "t{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let attrs = Sattr3 {
            mode: Some(0o777),
            ..Sattr3::default()
        };
        let created = session
            .nfs()
            .mkdir(&session.root(), name.as_bytes(), &attrs)
            .unwrap();
        match created.handle {
            Some(fh) => fh,
            None => {
                session
                    .nfs()
                    .lookup(&session.root(), name.as_bytes())
                    .unwrap()
                    .0
            }
        }
    }
}

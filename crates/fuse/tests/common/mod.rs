//! An in-process rnfs server on a temporary directory, mounted through FUSE
//! on another temporary directory.
#![allow(dead_code, reason = "each test binary uses a different subset")]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use rnfs_client::NfsUrl;
use rnfs_fuse::{MountHandle, MountOptions};
use rnfs_server::nfs::exports::{Access, BackendKind, ExportConfig, Exports, Squash};
use rnfs_server::nfs::{self, HandleKey};
use rnfs_server::{Server, ServerConfig};
use rnfs_vfs::Filesystem;

#[path = "../../../../tests/support/cannot_run.rs"]
pub(crate) mod cannot_run;
use cannot_run::cannot_run;

/// Why FUSE cannot be mounted here, if it cannot.
pub(crate) fn fuse_unavailable() -> Option<String> {
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return Some(format!("cannot open /dev/fuse: {e}"));
    }
    let root = rustix::process::geteuid().is_root();
    let fusermount = [
        "/usr/bin/fusermount3",
        "/bin/fusermount3",
        "/usr/bin/fusermount",
    ]
    .iter()
    .any(|p| Path::new(p).exists());
    if !root && !fusermount {
        return Some("not root and no fusermount3".into());
    }
    None
}

/// Returns `true` (after printing why) when the test must be skipped: FUSE
/// cannot be mounted here (a failure under CI, see [`cannot_run`]).
pub(crate) fn skip(test: &str) -> bool {
    match fuse_unavailable() {
        Some(why) => {
            cannot_run(&format!("{test}: FUSE mounts are impossible here ({why})"));
            true
        }
        None => false,
    }
}

/// As [`skip`], and also when this process is not root (the test plays other
/// users).
pub(crate) fn skip_unless_root(test: &str) -> bool {
    if skip(test) {
        return true;
    }
    if !rustix::process::geteuid().is_root() {
        cannot_run(&format!("{test}: needs root, to play other users"));
        return true;
    }
    false
}

/// Aborts a mount's FUSE connection (through `fusectl`) if the test panics
/// while this lives, so that unwinding cannot hang closing descriptors on a
/// mount that still waits for a server that is gone. Declare it after the
/// files it protects: it must drop first.
pub(crate) struct AbortOnPanic {
    conn: u32,
}

impl AbortOnPanic {
    /// For the mount on `mnt` (which must answer `stat` now).
    pub(crate) fn new(mnt: &Path) -> Self {
        let dev = rustix::fs::stat(mnt).unwrap().st_dev;
        // A FUSE mount's minor device number is its connection number.
        Self {
            conn: rustix::fs::minor(dev),
        }
    }
}

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let abort = format!("/sys/fs/fuse/connections/{}/abort", self.conn);
            if let Err(e) = std::fs::write(&abort, b"1") {
                eprintln!("cannot write {abort}: {e}");
            }
        }
    }
}

/// An rnfs server exporting `export` (a temporary directory), mounted on
/// `mountpoint`.
pub(crate) struct TestMount {
    /// The mount (None once unmounted by the test).
    pub(crate) handle: Option<MountHandle>,
    /// The mount point (canonical).
    pub(crate) mnt: PathBuf,
    /// The server's backing directory.
    pub(crate) export: PathBuf,
    /// The export's URL.
    pub(crate) url: NfsUrl,
    server: Option<Server>,
    _export_dir: tempfile::TempDir,
    _mnt_dir: tempfile::TempDir,
}

impl TestMount {
    /// Default options.
    pub(crate) fn new() -> Self {
        Self::with_options("")
    }

    /// With `-o`-style `options`.
    pub(crate) fn with_options(options: &str) -> Self {
        Self::through_proxy(options, |server| server)
    }

    /// With `-o`-style `options`, mounted through a proxy: `proxy` is given
    /// the server's address and returns the proxy's (which relays both NFS
    /// and MOUNT calls).
    pub(crate) fn through_proxy(
        options: &str,
        proxy: impl FnOnce(SocketAddr) -> SocketAddr,
    ) -> Self {
        Self::build(options, Squash::None, proxy)
    }

    /// With `-o`-style `options`, the server squashing as `squash`.
    pub(crate) fn with_squash(options: &str, squash: Squash) -> Self {
        Self::build(options, squash, |server| server)
    }

    fn build(options: &str, squash: Squash, proxy: impl FnOnce(SocketAddr) -> SocketAddr) -> Self {
        let export_dir = tempfile::tempdir().unwrap();
        let mnt_dir = tempfile::tempdir().unwrap();
        let (server, url) = start_server_squashing(export_dir.path(), squash);
        let at = proxy(SocketAddr::from(([127, 0, 0, 1], url.nfs_port.unwrap())));
        let proxied = NfsUrl {
            nfs_port: Some(at.port()),
            mount_port: Some(at.port()),
            ..url.clone()
        };
        let mut opts = MountOptions::default();
        opts.apply(options).unwrap();
        let handle = rnfs_fuse::spawn(&proxied, mnt_dir.path(), opts).unwrap();
        let mnt = handle.mountpoint().to_owned();
        Self {
            handle: Some(handle),
            mnt,
            export: export_dir.path().canonicalize().unwrap(),
            url,
            server: Some(server),
            _export_dir: export_dir,
            _mnt_dir: mnt_dir,
        }
    }

    /// `rel` under the mount point.
    pub(crate) fn m(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    /// `rel` in the server's backing directory.
    pub(crate) fn e(&self, rel: &str) -> PathBuf {
        self.export.join(rel)
    }

    /// The mount.
    pub(crate) fn handle(&self) -> &MountHandle {
        self.handle.as_ref().unwrap()
    }

    /// Stops the server; the mount stays.
    pub(crate) fn stop_server(&mut self) {
        drop(self.server.take());
    }

    /// Unmounts and checks that nothing is left mounted.
    pub(crate) fn unmount(&mut self) {
        self.handle.take().unwrap().unmount().unwrap();
        assert!(!rnfs_fuse::is_fuse_mounted(&self.mnt));
    }
}

impl Drop for TestMount {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            // A failed test may leave files open: detach rather than hang.
            let _ = h.unmounter().unmount();
            drop(h);
        }
        if rnfs_fuse::is_fuse_mounted(&self.mnt) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
    }
}

/// An in-process rnfs server (4 threads, squash none, local backend) on
/// loopback, exporting `dir` as `/export`.
pub(crate) fn start_server(dir: &Path) -> (Server, NfsUrl) {
    start_server_squashing(dir, Squash::None)
}

/// [`start_server`], squashing as `squash`.
pub(crate) fn start_server_squashing(dir: &Path, squash: Squash) -> (Server, NfsUrl) {
    let mut c = ExportConfig::new(dir);
    c.mount_path = Some("/export".into());
    c.backend = BackendKind::Local;
    c.access = Access::Rw;
    c.squash = squash;
    let exports = Arc::new(
        Exports::new(
            &[c],
            Box::new(|c: &ExportConfig| {
                rnfs_vfs::local::LocalFs::open(&c.path, Default::default())
                    .map(|fs| Arc::new(fs) as Arc<dyn Filesystem>)
                    .map_err(|e| e.to_string())
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
    let url = NfsUrl::parse(&format!("nfs://127.0.0.1:{port}/export")).unwrap();
    (server, url)
}

/// Runs `cmd` through `sh -c` and fails the test with its output if it fails.
pub(crate) fn sh(cmd: &str) -> String {
    let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    assert!(
        out.status.success(),
        "`{cmd}` failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

//! Helpers shared by the `rnfs` binary's process-level tests.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The `rnfs` binary under test, with a predictable environment.
pub(crate) fn rnfs() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rnfs"));
    c.env_remove("RUST_LOG").env("TZ", "UTC");
    c
}

/// A fresh empty directory, removed on drop.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("rnfs-t-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// `name` inside the directory.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The directory as an argument.
    pub(crate) fn arg(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

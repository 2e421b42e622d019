//! fsx-style randomized integrity test of `NfsFile` against the test server
//! (`FSX_OPS` and `FSX_SEED` override the length and seed).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;
#[path = "support/fsx_model.rs"]
mod fsx_model;

use std::sync::Arc;
use std::time::Duration;

use common::{open, TestServer};
use fsx_model::{FsxConfig, FsxFile};
use rnfs_client::{DirtyBudget, IoConfig, NfsError, NfsFile, Session};
use rnfs_nfs3::{CreateHow3, FileHandle, Sattr3};

struct NfsFsx {
    s: Session,
    fh: FileHandle,
    config: IoConfig,
    budget: Arc<DirtyBudget>,
    file: NfsFile,
}

impl NfsFsx {
    fn new(server: &TestServer, config: IoConfig, budget: Arc<DirtyBudget>) -> Self {
        let s = server.session();
        let dir = server.scratch(&s);
        let created = s
            .nfs()
            .create(&dir, b"fsx", CreateHow3::Guarded(Sattr3::default()))
            .unwrap();
        let fh = created.handle.unwrap();
        let file = open(&s, fh, config.clone(), &budget);
        Self {
            s,
            fh,
            config,
            budget,
            file,
        }
    }
}

impl FsxFile for NfsFsx {
    type Error = NfsError;

    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, NfsError> {
        self.file.read(offset, buf)
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), NfsError> {
        assert_eq!(self.file.write(offset, data)?, data.len());
        Ok(())
    }

    fn truncate(&mut self, size: u64) -> Result<(), NfsError> {
        let attr = self.file.truncate(size)?;
        assert_eq!(attr.size, size);
        Ok(())
    }

    fn fsync(&mut self) -> Result<(), NfsError> {
        self.file.fsync()
    }

    fn size(&mut self) -> Result<u64, NfsError> {
        let local = self.file.size();
        let attr = self.file.getattr()?;
        assert_eq!(attr.size, local, "getattr and size() agree");
        Ok(local)
    }

    fn reopen(&mut self) -> Result<(), NfsError> {
        self.file.close()?;
        self.file = open(&self.s, self.fh, self.config.clone(), &self.budget);
        Ok(())
    }
}

fn io(wsize: u32, cap: u32) -> IoConfig {
    IoConfig {
        rsize: 4096,
        wsize,
        max_outstanding_writes: cap,
        max_outstanding_write_bytes: IoConfig::DEFAULT_MAX_OUTSTANDING_WRITE_BYTES,
        max_read_ahead: 64 * 1024,
        dirty_expire: Duration::from_millis(20),
    }
}

fn run(seed: u64, ops: usize, config: IoConfig, budget: u64) {
    let server = TestServer::start();
    let mut f = NfsFsx::new(&server, config, DirtyBudget::new(budget));
    let fsx = FsxConfig::from_env(seed, ops, 512 * 1024, 40 * 1024);
    let report = fsx_model::run(&mut f, &fsx);
    assert!(report.writes > 0 && report.reads > 0 && report.truncates > 0);
    assert!(report.reopens > 0 && report.fsyncs > 0);
    assert_eq!(f.budget.dirty_bytes(), 0);
}

#[test]
fn fsx_write_behind() {
    run(
        0x5eed_0001,
        3000,
        io(4096, 16),
        DirtyBudget::DEFAULT_MAX_BYTES,
    );
}

#[test]
fn fsx_small_cap_unaligned_wsize() {
    run(
        0x5eed_0002,
        2000,
        io(1000, 1),
        DirtyBudget::DEFAULT_MAX_BYTES,
    );
}

#[test]
fn fsx_legacy_with_a_tight_budget() {
    run(0x5eed_0003, 2000, io(8192, 0), 64 * 1024);
}

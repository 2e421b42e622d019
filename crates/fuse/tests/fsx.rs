//! fsx-style randomized data integrity through the FUSE mount: the shared
//! model (`crates/client/tests/support/fsx_model.rs`) drives `std::fs::File`
//! descriptors on the mount, then the file on the server's disk must equal
//! what the mount reads. `FSX_OPS` and `FSX_SEED` lengthen or reseed a run.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;
#[path = "../../client/tests/support/fsx_model.rs"]
mod fsx_model;

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use common::{skip, TestMount};
use fsx_model::{FsxConfig, FsxFile};

/// Two descriptors on one file: writes go through the first, reads alternate
/// between both (one node, one shared `NfsFile`, two opens).
struct MountFile {
    path: PathBuf,
    w: File,
    r: File,
    reads: u64,
}

impl MountFile {
    fn open(path: &PathBuf) -> io::Result<(File, File)> {
        let rw = || OpenOptions::new().read(true).write(true).open(path);
        Ok((rw()?, rw()?))
    }
}

impl FsxFile for MountFile {
    type Error = io::Error;

    fn read(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.reads += 1;
        let f = if self.reads % 2 == 0 {
            &self.r
        } else {
            &self.w
        };
        f.read_at(buf, offset)
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.w.write_all_at(data, offset)
    }

    fn truncate(&mut self, size: u64) -> io::Result<()> {
        self.w.set_len(size)
    }

    fn fsync(&mut self) -> io::Result<()> {
        self.w.sync_all()
    }

    fn size(&mut self) -> io::Result<u64> {
        // fstat, then stat by name: both must agree.
        let by_fd = self.r.metadata()?.len();
        let by_name = fs::metadata(&self.path)?.len();
        if by_fd != by_name {
            return Err(io::Error::other(format!("fstat {by_fd} != stat {by_name}")));
        }
        Ok(by_fd)
    }

    fn reopen(&mut self) -> io::Result<()> {
        let (w, r) = Self::open(&self.path)?;
        self.w = w;
        self.r = r;
        Ok(())
    }
}

fn run(name: &str, options: &str, seed: u64, ops: usize) {
    if skip(name) {
        return;
    }
    let t = TestMount::with_options(options);
    let path = t.m("fsx");
    File::create(&path).unwrap();
    let (w, r) = MountFile::open(&path).unwrap();
    let mut f = MountFile {
        path: path.clone(),
        w,
        r,
        reads: 0,
    };
    let config = FsxConfig::from_env(seed, ops, 1 << 20, 96 << 10);
    let report = fsx_model::run(&mut f, &config);
    assert!(report.writes > 0 && report.reads > 0 && report.truncates > 0);
    drop(f);
    // Close-to-open: what the server holds is what the mount showed.
    assert_eq!(fs::read(t.e("fsx")).unwrap(), fs::read(&path).unwrap());
    println!("{name}: {report:?}");
}

#[test]
fn fsx_write_behind() {
    run("fsx_write_behind", "", 0xf05e_0001, 2500);
}

#[test]
fn fsx_legacy_writes() {
    run(
        "fsx_legacy_writes",
        "wb_max_outstanding=0",
        0xf05e_0002,
        1500,
    );
}

#[test]
fn fsx_small_io_no_attribute_cache() {
    run(
        "fsx_small_io_no_attribute_cache",
        "rsize=4096,wsize=4096,wb_max_outstanding=2,noac",
        0xf05e_0003,
        1500,
    );
}

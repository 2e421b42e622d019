//! `rnfs bench fileio` on small temporary files: reads and writes run and
//! are counted, writes stay inside the file and reach it, fsyncs happen as
//! asked, and a file too small is refused, untouched, with the typed error.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::fs::{self, File};
use std::time::Duration;

use rnfs_bench::fileio::{self, FileIoError, FileIoParams, FileOp};

const FILE_SIZE: u64 = 1 << 20;

fn params(path: &std::path::Path, op: FileOp) -> FileIoParams {
    let mut p = FileIoParams::new(path, op);
    p.threads = 2;
    p.file_size = Some(FILE_SIZE);
    p.warmup = Duration::from_millis(50);
    p.duration = Duration::from_millis(300);
    p
}

fn sparse_file(dir: &tempfile::TempDir, name: &str, len: u64) -> std::path::PathBuf {
    let path = dir.path().join(name);
    File::create(&path).unwrap().set_len(len).unwrap();
    path
}

#[test]
fn reads_are_counted_with_latency_and_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let path = sparse_file(&dir, "f", FILE_SIZE);
    let r = fileio::run(&params(&path, FileOp::Read)).unwrap();
    assert!(r.ops > 0, "{r}");
    assert_eq!((r.threads, r.size, r.file_size), (2, 4096, FILE_SIZE));
    assert_eq!(r.fsyncs, 0);
    assert!((r.ops_per_s - r.ops as f64 / 0.3).abs() < 1.0);
    // Every op moved 4 KiB.
    assert!((r.mb_per_s * 1e6 * 0.3 - (r.ops * 4096) as f64).abs() < 4096.0);
    assert!(r.latency_us.p50 > 0.0 && r.latency_us.p50 <= r.latency_us.p99);
    assert!(r.cpu_us_per_op.is_finite() && r.cpu_us_per_op > 0.0, "{r}");
    // The CPU is sampled by the main thread as it wakes at each edge of the
    // 0.3 s window, so preemption on a loaded machine (this binary's tests
    // run side by side, two I/O threads each) moves either sample by tens of
    // milliseconds: about the window, and neither the 0.1 s warm-up alone
    // nor the warm-up and the window together.
    assert!((0.2..=0.38).contains(&r.cpu_window_s), "{r}");
    let json = serde_json::to_value(&r).unwrap();
    for key in [
        "ops",
        "ops_per_s",
        "mb_per_s",
        "cpu_us_per_op",
        "threads",
        "size",
        "file_size",
    ] {
        assert!(json[key].is_number(), "{key}: {json}");
    }
    assert_eq!(json["op"], "read");
    assert!(json["latency_us"]["p50"].is_number() && json["latency_us"]["p99"].is_number());
}

#[test]
fn writes_land_inside_the_file_and_fsync_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    // Not a multiple of the op size: the last partial block is never written.
    let len = FILE_SIZE + 1000;
    let path = sparse_file(&dir, "f", len);
    let mut p = params(&path, FileOp::Write);
    p.file_size = Some(len);
    p.commit_every = 4;
    let r = fileio::run(&p).unwrap();
    assert!(r.ops > 0, "{r}");
    assert!(r.fsyncs > 0, "{r}");
    // Ops = writes + fsyncs, bytes only from the writes.
    let writes = (r.mb_per_s * 1e6 * 0.3 / 4096.0).round() as u64;
    assert_eq!(writes + r.fsyncs, r.ops, "{r}");
    let data = fs::read(&path).unwrap();
    assert_eq!(data.len() as u64, len, "the file's size changed");
    assert!(data[FILE_SIZE as usize..].iter().all(|&b| b == 0));
    // Whole aligned blocks of the pattern, zeros elsewhere.
    let mut written = 0;
    for block in data[..FILE_SIZE as usize].chunks(4096) {
        if block[0] == 0xa5 {
            assert!(block.iter().all(|&b| b == 0xa5));
            written += 1;
        } else {
            assert!(block.iter().all(|&b| b == 0));
        }
    }
    assert!(written > 0);
}

#[test]
fn attrs_runs_both_ops_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = sparse_file(&dir, "f", FILE_SIZE);
    for op in [FileOp::Write, FileOp::Read] {
        let mut p = params(&path, op);
        p.attrs = true;
        let r = fileio::run(&p).unwrap();
        assert!(r.ops > 0 && r.attrs, "{r}");
        assert!(r.to_string().contains("fstat around each op"), "{r}");
        assert_eq!(serde_json::to_value(&r).unwrap()["attrs"], true);
    }
    let r = fileio::run(&params(&path, FileOp::Read)).unwrap();
    assert!(!r.attrs && !r.to_string().contains("fstat"), "{r}");
    assert_eq!(serde_json::to_value(&r).unwrap()["attrs"], false);
}

#[test]
fn a_file_too_small_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = sparse_file(&dir, "small", FILE_SIZE / 2);
    for op in [FileOp::Read, FileOp::Write] {
        match fileio::run(&params(&path, op)) {
            Err(FileIoError::TooSmall { actual, wanted, .. }) => {
                assert_eq!((actual, wanted), (FILE_SIZE / 2, FILE_SIZE));
            }
            other => panic!("{op:?}: expected TooSmall, got {other:?}"),
        }
    }
    assert_eq!(fs::metadata(&path).unwrap().len(), FILE_SIZE / 2);
    let missing = dir.path().join("missing");
    assert!(matches!(
        fileio::run(&params(&missing, FileOp::Read)),
        Err(FileIoError::Open { .. })
    ));
    assert!(!missing.exists());
}

#[test]
fn create_makes_a_sparse_file_of_the_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new");
    let mut p = params(&path, FileOp::Read);
    p.create = true;
    p.duration = Duration::from_millis(100);
    let r = fileio::run(&p).unwrap();
    assert!(r.created && r.ops > 0, "{r}");
    assert_eq!(fs::metadata(&path).unwrap().len(), FILE_SIZE);
    // Without a file size the file's own size is used.
    let mut p = params(&path, FileOp::Read);
    p.file_size = None;
    p.duration = Duration::from_millis(100);
    let r = fileio::run(&p).unwrap();
    assert_eq!((r.file_size, r.created), (FILE_SIZE, false));
}

#[test]
fn bad_parameters_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = sparse_file(&dir, "f", FILE_SIZE);
    type Breaker = fn(&mut FileIoParams);
    let cases: [(&str, Breaker); 4] = [
        ("size", |p| p.size = 0),
        ("file-size", |p| p.file_size = Some(100)),
        ("threads", |p| p.threads = 0),
        ("duration", |p| p.duration = Duration::ZERO),
    ];
    for (name, break_it) in cases {
        let mut p = params(&path, FileOp::Read);
        break_it(&mut p);
        match fileio::run(&p) {
            Err(FileIoError::InvalidParam(rnfs_bench::InvalidParam { name: got, .. })) => {
                assert_eq!(got, name)
            }
            other => panic!("{name}: expected InvalidParam, got {other:?}"),
        }
    }
    assert!(matches!(
        fileio::run(&params(dir.path(), FileOp::Read)),
        Err(FileIoError::NotRegular { .. })
    ));
}

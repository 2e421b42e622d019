//! An fsx-style randomized file integrity check, generic over the file under
//! test: random writes (often extending), reads, truncates (down and up),
//! fsyncs, size checks and close/reopen, each checked against an in-memory
//! model. Seeded and reproducible; a failure names the seed, the operation
//! and the last operations.
//!
//! Reuse: `#[path = "../../client/tests/support/fsx_model.rs"] mod fsx_model;`
//! and implement [`FsxFile`] (e.g. for `std::fs::File` on a mount).
#![allow(dead_code, reason = "each user takes what it needs")]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::collections::VecDeque;
use std::fmt::Debug;

/// The file under test.
pub(crate) trait FsxFile {
    /// Its error type.
    type Error: Debug;
    /// Reads at `offset`; may return fewer bytes than asked (0 at the end).
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, Self::Error>;
    /// Writes all of `data` at `offset`.
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), Self::Error>;
    /// Sets the size.
    fn truncate(&mut self, size: u64) -> Result<(), Self::Error>;
    /// Makes everything written stable.
    fn fsync(&mut self) -> Result<(), Self::Error>;
    /// The size as the file reports it.
    fn size(&mut self) -> Result<u64, Self::Error>;
    /// Closes the file and opens it again.
    fn reopen(&mut self) -> Result<(), Self::Error>;
}

/// How a run goes.
#[derive(Debug, Clone)]
pub(crate) struct FsxConfig {
    /// Seed of the operation sequence.
    pub(crate) seed: u64,
    /// Operations to run.
    pub(crate) ops: usize,
    /// Largest file size.
    pub(crate) max_len: u64,
    /// Largest read or write.
    pub(crate) max_op: u64,
}

impl FsxConfig {
    /// `ops` from the environment variable `FSX_OPS` if set, and the seed
    /// from `FSX_SEED` if set.
    pub(crate) fn from_env(seed: u64, ops: usize, max_len: u64, max_op: u64) -> Self {
        let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
        Self {
            seed: env("FSX_SEED").unwrap_or(seed),
            ops: env("FSX_OPS").map_or(ops, |n: u64| n as usize),
            max_len,
            max_op,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FsxReport {
    /// Writes.
    pub(crate) writes: usize,
    /// Reads.
    pub(crate) reads: usize,
    /// Truncates.
    pub(crate) truncates: usize,
    /// Fsyncs.
    pub(crate) fsyncs: usize,
    /// Reopens.
    pub(crate) reopens: usize,
    /// Bytes compared.
    pub(crate) bytes_checked: u64,
}

/// splitmix64: small, seedable, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Runs `config.ops` random operations on `file`, which must start empty,
/// checking every read and size against the model; panics on a divergence.
/// Ends with fsync, reopen and a full comparison.
pub(crate) fn run<F: FsxFile>(file: &mut F, config: &FsxConfig) -> FsxReport {
    let mut rng = Rng(config.seed);
    let mut model: Vec<u8> = Vec::new();
    let mut log: VecDeque<String> = VecDeque::new();
    let mut report = FsxReport::default();
    let fail = |log: &VecDeque<String>, i: usize, what: String| -> ! {
        let recent: Vec<&String> = log.iter().collect();
        panic!(
            "fsx seed {} op {i}: {what}\nlast operations (oldest first):\n{recent:#?}",
            config.seed
        );
    };
    for i in 0..config.ops {
        let roll = rng.below(100);
        let len = model.len() as u64;
        let desc;
        if roll < 45 {
            // Write: half of them at or near the end (sequential appends).
            let n = 1 + rng.below(config.max_op);
            let off = if rng.below(2) == 0 {
                len.saturating_sub(rng.below(16))
            } else {
                rng.below(config.max_len)
            };
            let off = off.min(config.max_len.saturating_sub(n));
            let stamp = rng.next() as u8;
            let data: Vec<u8> = (0..n)
                .map(|k| stamp.wrapping_add((k / 3) as u8) ^ (i as u8))
                .collect();
            desc = format!("write {off:#x}+{n:#x}");
            log_push(&mut log, &desc);
            if let Err(e) = file.write(off, &data) {
                fail(&log, i, format!("{desc}: {e:?}"));
            }
            let end = (off + n) as usize;
            if model.len() < end {
                model.resize(end, 0);
            }
            model[off as usize..end].copy_from_slice(&data);
            report.writes += 1;
        } else if roll < 75 {
            // Read, possibly past the end.
            let off = rng.below(len + 1 + config.max_op / 4);
            let n = 1 + rng.below(config.max_op);
            desc = format!("read {off:#x}+{n:#x}");
            log_push(&mut log, &desc);
            let mut buf = vec![0u8; n as usize];
            let got = read_full(file, off, &mut buf)
                .unwrap_or_else(|e| fail(&log, i, format!("{desc}: {e:?}")));
            let want = model
                .get(off as usize..(off + n).min(len) as usize)
                .unwrap_or(&[]);
            check(&buf[..got], want, off).unwrap_or_else(|m| fail(&log, i, format!("{desc}: {m}")));
            report.reads += 1;
            report.bytes_checked += got as u64;
        } else if roll < 85 {
            // Truncate: mostly down, sometimes up.
            let size = if rng.below(3) == 0 {
                rng.below(config.max_len)
            } else {
                rng.below(len + 1)
            };
            desc = format!("truncate {size:#x}");
            log_push(&mut log, &desc);
            if let Err(e) = file.truncate(size) {
                fail(&log, i, format!("{desc}: {e:?}"));
            }
            model.resize(size as usize, 0);
            report.truncates += 1;
        } else if roll < 91 {
            desc = "fsync".to_owned();
            log_push(&mut log, &desc);
            if let Err(e) = file.fsync() {
                fail(&log, i, format!("fsync: {e:?}"));
            }
            report.fsyncs += 1;
        } else if roll < 96 {
            desc = "size".to_owned();
            log_push(&mut log, &desc);
            match file.size() {
                Ok(s) if s == len => {}
                other => fail(&log, i, format!("size: {other:?}, model {len:#x}")),
            }
        } else {
            desc = "reopen".to_owned();
            log_push(&mut log, &desc);
            if let Err(e) = file.reopen() {
                fail(&log, i, format!("reopen: {e:?}"));
            }
            report.reopens += 1;
        }
    }
    let n = config.ops;
    log_push(&mut log, "final fsync, reopen, compare");
    file.fsync()
        .unwrap_or_else(|e| fail(&log, n, format!("fsync: {e:?}")));
    file.reopen()
        .unwrap_or_else(|e| fail(&log, n, format!("reopen: {e:?}")));
    let size = file
        .size()
        .unwrap_or_else(|e| fail(&log, n, format!("size: {e:?}")));
    if size != model.len() as u64 {
        fail(&log, n, format!("size {size:#x}, model {:#x}", model.len()));
    }
    let mut all = vec![0u8; model.len()];
    let got = read_full(file, 0, &mut all).unwrap_or_else(|e| fail(&log, n, format!("{e:?}")));
    check(&all[..got], &model, 0).unwrap_or_else(|m| fail(&log, n, m));
    report.bytes_checked += got as u64;
    report
}

fn log_push(log: &mut VecDeque<String>, what: &str) {
    if log.len() == 32 {
        log.pop_front();
    }
    log.push_back(what.to_owned());
}

/// Reads until `buf` is full or the end of the file.
fn read_full<F: FsxFile>(file: &mut F, offset: u64, buf: &mut [u8]) -> Result<usize, F::Error> {
    let mut done = 0;
    while done < buf.len() {
        let n = file.read(offset + done as u64, &mut buf[done..])?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

fn check(got: &[u8], want: &[u8], offset: u64) -> Result<(), String> {
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        return Err(format!(
            "byte {:#x} is {:#04x}, model has {:#04x}",
            offset + i as u64,
            got[i],
            want[i]
        ));
    }
    if got.len() != want.len() {
        return Err(format!(
            "read {:#x} bytes, model has {:#x}",
            got.len(),
            want.len()
        ));
    }
    Ok(())
}

//! `rnfs bench fileio`: the I/O of `rnfs bench load --op read|write`, done
//! directly on a local file, with no NFS in between.
//!
//! `threads` threads share one descriptor of an existing file and each
//! repeats `pread` or `pwrite` of `size` bytes at a random `size`-aligned
//! offset in `[0, file_size)`; writers `fsync` after every `commit_every`
//! writes of their own, as the load generator sends a COMMIT after every
//! `commit_every` UNSTABLE WRITEs per connection. After `warmup` the run
//! measures for `duration`: ops/s, MB/s, latency (HDR histogram) and this
//! process's CPU time per op (`getrusage`, user + system) over exactly the
//! measured window.
//!
//! It is the local baseline of the file-size sweep: what the kernel alone
//! costs per op on the very file the server served (page-cache misses on
//! holes, block allocation), to be taken off the server's CPU per call.
//!
//! Accounting follows `rnfs bench load`: an `fsync` counts as an op (as a
//! COMMIT counts as a call) but not as bytes, and its latency is recorded.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::load::{latency, time_seed, LatencyUs, Rng};
use crate::report::latency_histogram;
use crate::report::own_cpu_seconds;

/// The I/O a run repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum FileOp {
    /// `pread` of `size` bytes at a random aligned offset.
    Read,
    /// `pwrite` of `size` bytes at a random aligned offset, with a periodic
    /// `fsync`.
    Write,
}

impl FileOp {
    /// The op's name on the command line and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            FileOp::Read => "read",
            FileOp::Write => "write",
        }
    }
}

/// One run's configuration.
#[derive(Debug, Clone)]
pub struct FileIoParams {
    /// The file (it must exist and hold `file_size` bytes, unless `create`).
    pub path: PathBuf,
    /// `pread` or `pwrite`.
    pub op: FileOp,
    /// Bytes per op, 1 to 1 MiB.
    pub size: u32,
    /// Offsets lie in `[0, file_size)`; `None`: the file's size.
    pub file_size: Option<u64>,
    /// Threads, each with one op in flight.
    pub threads: u32,
    /// An `fsync` after every this many writes per thread (0: never).
    pub commit_every: u32,
    /// Unmeasured time before the measured window.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// Create the file, or extend it, sparse, to `file_size` (`set_len`).
    pub create: bool,
    /// `fstat` around each op as an NFSv3 server must for its reply's
    /// attributes: before and after a write (the WRITE's wcc data), after a
    /// read (the READ's post-op attributes). Each `fstat` asks for the ctime,
    /// so on a kernel with multigrain timestamps the next write must take a
    /// fine-grained one and dirty the inode, as it must under an NFS server.
    pub attrs: bool,
}

impl FileIoParams {
    /// The command line's defaults for `path` and `op`.
    pub fn new(path: impl Into<PathBuf>, op: FileOp) -> FileIoParams {
        FileIoParams {
            path: path.into(),
            op,
            size: 4096,
            file_size: None,
            threads: 16,
            commit_every: 256,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(3),
            create: false,
            attrs: false,
        }
    }

    fn validate(&self) -> Result<(), FileIoError> {
        let bad = |name, reason| Err(crate::InvalidParam { name, reason }.into());
        if !(1..=(1 << 20)).contains(&self.size) {
            return bad("size", "must be 1 to 1M");
        }
        if self.file_size.is_some_and(|f| f < u64::from(self.size)) {
            return bad("file-size", "must be at least --size");
        }
        if self.create && self.file_size.is_none() {
            return bad("create", "needs --file-size");
        }
        if !(1..=1024).contains(&self.threads) {
            return bad("threads", "must be 1 to 1024");
        }
        if self.duration.is_zero() {
            return bad("duration", "must be positive");
        }
        Ok(())
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileIoError {
    /// A parameter out of range.
    #[error(transparent)]
    InvalidParam(#[from] crate::InvalidParam),
    /// The file could not be opened (or created, with `create`).
    #[error("cannot open {}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The path is a directory, a device or something else.
    #[error("{} is not a regular file", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
    },
    /// The file holds fewer bytes than the offsets would reach.
    #[error(
        "{} holds {actual} bytes, less than the file size {wanted}; it is neither \
         created nor extended without --create",
        path.display()
    )]
    TooSmall {
        /// The file.
        path: PathBuf,
        /// Its size.
        actual: u64,
        /// The file size asked for.
        wanted: u64,
    },
    /// The file is smaller than one op (without a file size given).
    #[error("{} holds {actual} bytes, less than one op of {size} bytes", path.display())]
    SmallerThanOneOp {
        /// The file.
        path: PathBuf,
        /// Its size.
        actual: u64,
        /// Bytes per op.
        size: u32,
    },
    /// A system call on the file failed.
    #[error("{what} of {}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// Starting a thread failed.
    #[error("cannot start an I/O thread")]
    Spawn(#[source] io::Error),
    /// An I/O thread panicked.
    #[error("an I/O thread panicked")]
    Panicked,
}

/// One run's result (JSON: `tool` `rnfs-bench-fileio`, `schema` 1).
#[derive(Debug, Clone, Serialize)]
pub struct FileIoResult {
    /// Always `rnfs-bench-fileio`.
    pub tool: &'static str,
    /// Version of this object's layout: 1.
    pub schema: u32,
    /// The file.
    pub path: PathBuf,
    /// The op.
    pub op: FileOp,
    /// Bytes per op.
    pub size: u32,
    /// Offsets lie in `[0, file_size)`.
    pub file_size: u64,
    /// Threads.
    pub threads: u32,
    /// Writes per `fsync` per thread (0: never).
    pub commit_every: u32,
    /// Whether the run created or extended the file (`create`).
    pub created: bool,
    /// Whether each op had its `fstat`s ([`FileIoParams::attrs`]).
    pub attrs: bool,
    /// Warm-up seconds.
    pub warmup_s: f64,
    /// Measured seconds.
    pub duration_s: f64,
    /// Ops completed in the window (`fsync`s included).
    pub ops: u64,
    /// `ops / duration_s`.
    pub ops_per_s: f64,
    /// Bytes read or written, 10^6 per second.
    pub mb_per_s: f64,
    /// `fsync`s completed in the window.
    pub fsyncs: u64,
    /// Latency of the ops in the window.
    pub latency_us: LatencyUs,
    /// User + system CPU seconds of this process over the window.
    pub cpu_s: f64,
    /// `cpu_s` per op, in microseconds.
    pub cpu_us_per_op: f64,
    /// Seconds between the CPU samples at the window's edges.
    pub cpu_window_s: f64,
}

impl fmt::Display for FileIoResult {
    /// A few lines for people; the JSON has everything.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} {} B x {} thread{} on {} ({} bytes{}{}): {:.1} s after {:.1} s warm-up",
            self.op.name(),
            self.size,
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            self.path.display(),
            self.file_size,
            if self.created { ", created" } else { "" },
            if self.attrs {
                ", fstat around each op"
            } else {
                ""
            },
            self.duration_s,
            self.warmup_s
        )?;
        write!(
            f,
            "  ops       {} ({:.0}/s), {:.1} MB/s",
            self.ops, self.ops_per_s, self.mb_per_s
        )?;
        if self.op == FileOp::Write {
            write!(
                f,
                ", {} fsyncs (every {} writes per thread)",
                self.fsyncs, self.commit_every
            )?;
        }
        writeln!(f)?;
        let l = &self.latency_us;
        writeln!(
            f,
            "  latency   us: min {:.1}  p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}  mean {:.1}",
            l.min, l.p50, l.p90, l.p99, l.p999, l.max, l.mean
        )?;
        write!(
            f,
            "  cpu       {:.2} us CPU/op ({:.2} s user+system over {:.2} s)",
            self.cpu_us_per_op, self.cpu_s, self.cpu_window_s
        )
    }
}

/// Runs one configuration: opens (or, with `create`, makes) the file, then
/// warm-up and the measured window.
pub fn run(p: &FileIoParams) -> Result<FileIoResult, FileIoError> {
    p.validate()?;
    let (file, file_size, created) = open(p)?;
    let job = Arc::new(Job {
        file,
        path: p.path.clone(),
        op: p.op,
        size: p.size,
        slots: file_size / u64::from(p.size),
        commit_every: p.commit_every,
        attrs: p.attrs,
        seed: time_seed(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    let window = Window {
        start: start + p.warmup,
        end: start + p.warmup + p.duration,
    };
    let mut handles = Vec::with_capacity(p.threads as usize);
    for index in 0..p.threads {
        let (job, thread_stop, tx) = (Arc::clone(&job), Arc::clone(&stop), tx.clone());
        let spawned = thread::Builder::new()
            .name(format!("fileio-{index}"))
            .spawn(move || {
                let r = worker(&job, index, window, &thread_stop);
                if r.is_err() {
                    // The other threads end at their next op.
                    thread_stop.store(true, Ordering::Relaxed);
                    let _ = tx.send(());
                }
                r
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                let _ = join_all(handles);
                return Err(FileIoError::Spawn(e));
            }
        }
    }
    drop(tx);

    let mut samples = None;
    if !failed_before(&rx, window.start) {
        let before = (Instant::now(), own_cpu_seconds());
        if !failed_before(&rx, window.end) {
            samples = Some((before, (Instant::now(), own_cpu_seconds())));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let stats = join_all(handles)?;
    let Some(((t0, cpu0), (t1, cpu1))) = samples else {
        return Err(FileIoError::Panicked);
    };
    let secs = p.duration.as_secs_f64();
    let cpu_s = (cpu1 - cpu0).max(0.0);
    Ok(FileIoResult {
        tool: "rnfs-bench-fileio",
        schema: 1,
        path: p.path.clone(),
        op: p.op,
        size: p.size,
        file_size,
        threads: p.threads,
        commit_every: p.commit_every,
        created,
        attrs: p.attrs,
        warmup_s: p.warmup.as_secs_f64(),
        duration_s: secs,
        ops: stats.ops,
        ops_per_s: stats.ops as f64 / secs,
        mb_per_s: stats.bytes as f64 / secs / 1e6,
        fsyncs: stats.fsyncs,
        latency_us: latency(&stats.hist),
        cpu_s,
        cpu_us_per_op: if stats.ops == 0 {
            f64::NAN
        } else {
            cpu_s * 1e6 / stats.ops as f64
        },
        cpu_window_s: t1.saturating_duration_since(t0).as_secs_f64(),
    })
}

/// Opens the file for the op, checks (or, with `create`, makes) its size:
/// the file, the effective file size, and whether it was created or extended.
fn open(p: &FileIoParams) -> Result<(File, u64, bool), FileIoError> {
    let path = &p.path;
    let file = OpenOptions::new()
        .read(true)
        .write(p.op == FileOp::Write || p.create)
        .create(p.create)
        .open(path)
        .map_err(|source| FileIoError::Open {
            path: path.clone(),
            source,
        })?;
    let meta = file.metadata().map_err(io_err("fstat", path))?;
    if !meta.is_file() {
        return Err(FileIoError::NotRegular { path: path.clone() });
    }
    let actual = meta.len();
    let Some(wanted) = p.file_size else {
        if actual < u64::from(p.size) {
            return Err(FileIoError::SmallerThanOneOp {
                path: path.clone(),
                actual,
                size: p.size,
            });
        }
        return Ok((file, actual, false));
    };
    if actual >= wanted {
        return Ok((file, wanted, false));
    }
    if !p.create {
        return Err(FileIoError::TooSmall {
            path: path.clone(),
            actual,
            wanted,
        });
    }
    file.set_len(wanted)
        .map_err(io_err("extending (set_len)", path))?;
    Ok((file, wanted, true))
}

/// What every thread shares.
#[derive(Debug)]
struct Job {
    file: File,
    path: PathBuf,
    op: FileOp,
    size: u32,
    /// Offsets are `size * below(slots)`; `slots * size <= file_size`.
    slots: u64,
    commit_every: u32,
    attrs: bool,
    seed: u64,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    end: Instant,
}

/// One thread's counts in the window.
#[derive(Debug)]
struct Stats {
    hist: Histogram<u64>,
    ops: u64,
    bytes: u64,
    fsyncs: u64,
}

impl Stats {
    fn new() -> Stats {
        Stats {
            hist: latency_histogram(),
            ops: 0,
            bytes: 0,
            fsyncs: 0,
        }
    }

    /// Counts an op that ended at `done` if that is inside the window.
    fn count(&mut self, window: &Window, began: Instant, done: Instant, bytes: u64) -> bool {
        let inside = done >= window.start && done < window.end;
        if inside {
            let ns = done.saturating_duration_since(began).as_nanos();
            self.hist
                .saturating_record(u64::try_from(ns).unwrap_or(u64::MAX));
            self.ops += 1;
            self.bytes += bytes;
        }
        inside
    }
}

/// One thread: ops until the window ends or `stop`.
fn worker(job: &Job, index: u32, window: Window, stop: &AtomicBool) -> Result<Stats, FileIoError> {
    let mut rng = Rng::new(job.seed ^ u64::from(index).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut buf = vec![0xa5u8; job.size as usize];
    let mut stats = Stats::new();
    let bytes = u64::from(job.size);
    let mut writes_since_sync = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let offset = rng.below(job.slots) * bytes;
        let began = Instant::now();
        if job.attrs && job.op == FileOp::Write {
            fstat(job)?;
        }
        match job.op {
            FileOp::Read => job
                .file
                .read_exact_at(&mut buf, offset)
                .map_err(io_err("pread", &job.path))?,
            FileOp::Write => job
                .file
                .write_all_at(&buf, offset)
                .map_err(io_err("pwrite", &job.path))?,
        }
        if job.attrs {
            fstat(job)?;
        }
        let mut done = Instant::now();
        stats.count(&window, began, done, bytes);
        if job.op == FileOp::Write && job.commit_every > 0 {
            writes_since_sync += 1;
            if writes_since_sync >= job.commit_every {
                writes_since_sync = 0;
                let began = done;
                job.file.sync_all().map_err(io_err("fsync", &job.path))?;
                done = Instant::now();
                if stats.count(&window, began, done, 0) {
                    stats.fsyncs += 1;
                }
            }
        }
        if done >= window.end {
            break;
        }
    }
    Ok(stats)
}

/// The `fstat` of [`FileIoParams::attrs`] (the same system call as the
/// server's local backend makes).
fn fstat(job: &Job) -> Result<(), FileIoError> {
    rustix::fs::fstat(&job.file)
        .map(drop)
        .map_err(|e| io_err("fstat", &job.path)(e.into()))
}

/// Waits until `until`; `true` if a thread failed first.
fn failed_before(rx: &mpsc::Receiver<()>, until: Instant) -> bool {
    let left = until.saturating_duration_since(Instant::now());
    match rx.recv_timeout(left) {
        Ok(()) => true,
        Err(mpsc::RecvTimeoutError::Timeout) => false,
        // Every thread ended without failing (a window already over).
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            thread::sleep(until.saturating_duration_since(Instant::now()));
            false
        }
    }
}

/// Joins every thread: the sum of their stats, or the first error.
fn join_all(
    handles: Vec<thread::JoinHandle<Result<Stats, FileIoError>>>,
) -> Result<Stats, FileIoError> {
    let mut total = Stats::new();
    let mut first = None;
    for h in handles {
        match h.join() {
            Ok(Ok(s)) => {
                // Same bounds on both sides: adding cannot fail.
                let _ = total.hist.add(&s.hist);
                total.ops += s.ops;
                total.bytes += s.bytes;
                total.fsyncs += s.fsyncs;
            }
            Ok(Err(e)) => {
                first.get_or_insert(e);
            }
            Err(_) => {
                first.get_or_insert(FileIoError::Panicked);
            }
        }
    }
    match first {
        Some(e) => Err(e),
        None => Ok(total),
    }
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> FileIoError + 'a {
    move |source| FileIoError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

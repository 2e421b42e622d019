//! Client benchmarks: closed-loop calls through the rnfs client library
//! (seed 002: many threads of random reads over one connection), and
//! write-behind through a mounted file system (seed 003: parallel writers
//! beside a `stat`/`ls -l` loop).

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rnfs_client::{ClientOptions, Credential, NfsError, NfsUrl, Session};
use rnfs_nfs3::{CreateHow3, FileHandle, Sattr3, StableHow};
use serde::Serialize;

use crate::report::Summary;

/// Why a client benchmark could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientBenchError {
    /// An NFS call failed.
    #[error("{0}")]
    Nfs(#[from] NfsError),
    /// A local file operation failed.
    #[error("{path}: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        cause: std::io::Error,
    },
    /// A worker thread panicked.
    #[error("a benchmark thread panicked")]
    Panicked,
}

/// The call each thread repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientOp {
    /// NULL.
    Null,
    /// GETATTR of the test file.
    Getattr,
    /// READ of `size` bytes at a random aligned offset.
    Read,
    /// UNSTABLE WRITE of `size` bytes at a random aligned offset.
    Write,
}

/// How the client's concurrency is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadMode {
    /// `threads` OS threads, each making blocking calls.
    Threads,
    /// `threads` tasks on a tokio runtime with one worker thread, each awaiting
    /// `RpcClient::call_async` (the shape of libnfs's event loop).
    Async,
    /// As `Async`, with the client's runtime reader off
    /// (`ClientOptions::runtime_reader`): replies handed over by the
    /// connection's reader thread, the path of other executors.
    #[serde(rename = "async-reader-thread")]
    AsyncReaderThread,
}

/// Parameters of [`client_load`].
#[derive(Debug, Clone)]
pub struct ClientLoadParams {
    /// The export (the test file is created in its root).
    pub url: NfsUrl,
    /// The call.
    pub op: ClientOp,
    /// Threads (or tasks), each with one call in flight, sharing one client.
    pub threads: u32,
    /// Threads or async tasks.
    pub mode: LoadMode,
    /// TCP connections of the client (`nconnect`).
    pub connections: u32,
    /// READ/WRITE size in bytes.
    pub size: u32,
    /// Size of the test file.
    pub file_size: u64,
    /// Unmeasured warm-up.
    pub warmup: Duration,
    /// Measured time.
    pub duration: Duration,
}

/// One [`client_load`] result.
#[derive(Debug, Clone, Serialize)]
pub struct ClientLoadRow {
    /// The call.
    pub op: ClientOp,
    /// Threads or tasks.
    pub threads: u32,
    /// Threads or async tasks.
    pub mode: LoadMode,
    /// Calls per second.
    pub calls_per_sec: f64,
    /// Payload MB/s (READ/WRITE).
    pub mb_per_sec: f64,
    /// Latency per call, ns.
    pub latency: Summary,
    /// This process's CPU time per call, µs.
    pub cpu_us_per_call: f64,
    /// Lock acquisitions per call, when the client counts them.
    pub locks_per_call: Option<f64>,
}

/// Creates (or reuses, when its size matches) `name` in the export root,
/// `size` bytes of non-zero data.
fn test_file(s: &Session, name: &[u8], size: u64) -> Result<FileHandle, NfsError> {
    let nfs = s.nfs();
    if let Ok((fh, attr)) = nfs.lookup(&s.root(), name) {
        if attr.is_some_and(|a| a.size == size) {
            return Ok(fh);
        }
    }
    let created = nfs.create(
        &s.root(),
        name,
        CreateHow3::Unchecked(Sattr3 {
            mode: Some(0o644),
            size: Some(0),
            ..Sattr3::default()
        }),
    )?;
    let fh = match created.handle {
        Some(fh) => fh,
        None => nfs.lookup(&s.root(), name)?.0,
    };
    let chunk = vec![0x5a_u8; s.wsize() as usize];
    let mut off = 0;
    while off < size {
        let n = chunk.len().min((size - off) as usize);
        let w = nfs.write(&fh, off, &chunk[..n], StableHow::Unstable)?;
        off += u64::from(w.count.max(1));
    }
    nfs.commit(&fh, 0, 0)?;
    Ok(fh)
}

fn new_histogram() -> Histogram<u64> {
    // 3 significant digits, auto-resizing: cannot fail.
    #[allow(clippy::expect_used, reason = "constant, valid arguments")]
    Histogram::new(3).expect("3 significant figures is valid")
}

/// What a thread or task of [`client_load`] keeps besides its calls: its
/// random offsets and the latencies measured.
struct Worker {
    /// xorshift64* state.
    rng: u64,
    size: u32,
    blocks: u64,
    latencies: Histogram<u64>,
    measuring: Arc<AtomicBool>,
}

impl Worker {
    /// Worker number `t` (its own offsets) of `size`-byte calls within
    /// `blocks` blocks.
    fn new(t: u32, size: u32, blocks: u64, measuring: Arc<AtomicBool>) -> Self {
        Self {
            rng: 0x9e37_79b9_7f4a_7c15 ^ (u64::from(t) + 1),
            size,
            blocks,
            latencies: new_histogram(),
            measuring,
        }
    }

    /// A random `size`-aligned offset in the test file.
    fn next_offset(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % self.blocks) * u64::from(self.size)
    }

    /// Records the call started at `t0`, while measuring.
    fn done(&mut self, t0: Instant) {
        if self.measuring.load(Ordering::Relaxed) {
            let _ = self.latencies.record(t0.elapsed().as_nanos() as u64);
        }
    }
}

/// Runs `p.threads` threads of `p.op` over one client for `p.duration`.
pub fn client_load(p: &ClientLoadParams) -> Result<ClientLoadRow, ClientBenchError> {
    let options = ClientOptions {
        connections: p.connections,
        max_slots: (p.threads * 2).max(128),
        runtime_reader: p.mode != LoadMode::AsyncReaderThread,
        ..ClientOptions::default()
    };
    let (session, _) = Session::connect(&p.url, options, Credential::root())?;
    let fh = match p.op {
        ClientOp::Null => session.root(),
        _ => test_file(&session, b"rnfs-bench-client.dat", p.file_size)?,
    };
    let blocks = (p.file_size / u64::from(p.size.max(1))).max(1);
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let worker_threads = match p.mode {
        LoadMode::Threads => p.threads as usize,
        LoadMode::Async | LoadMode::AsyncReaderThread => 1,
    };
    // Every worker parks on its own futex while its call is out.
    rnfs_sched::fit_futex_hash(worker_threads);
    let start = Arc::new(Barrier::new(worker_threads + 1));
    let workers: Vec<thread::JoinHandle<Result<Histogram<u64>, NfsError>>> = match p.mode {
        LoadMode::Threads => (0..p.threads)
            .map(|t| {
                let nfs = session.nfs().clone();
                let (stop, start) = (stop.clone(), start.clone());
                let op = p.op;
                let mut w = Worker::new(t, p.size, blocks, measuring.clone());
                thread::spawn(move || {
                    let mut buf = vec![0u8; w.size as usize];
                    start.wait();
                    while !stop.load(Ordering::Relaxed) {
                        let off = w.next_offset();
                        let t0 = Instant::now();
                        match op {
                            ClientOp::Null => nfs.null()?,
                            ClientOp::Getattr => {
                                nfs.getattr(&fh)?;
                            }
                            ClientOp::Read => {
                                nfs.read(&fh, off, &mut buf)?;
                            }
                            ClientOp::Write => {
                                nfs.write(&fh, off, &buf, StableHow::Unstable)?;
                            }
                        }
                        w.done(t0);
                    }
                    Ok(w.latencies)
                })
            })
            .collect(),
        LoadMode::Async | LoadMode::AsyncReaderThread => {
            let nfs = session.nfs().clone();
            let (stop, measuring, start) = (stop.clone(), measuring.clone(), start.clone());
            let (op, size, tasks) = (p.op, p.size, p.threads);
            vec![thread::spawn(move || {
                // One worker: the tasks and the client's reader task share
                // one thread, as libnfs's event loop does. Multi-thread
                // flavour: the client reads on the runtime's reactor only
                // there (`rnfs_client` transport, `reactor.rs`).
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .map_err(|e| NfsError::Client(rnfs_client::ClientError::Io(e)))?;
                start.wait();
                rt.block_on(async move {
                    let mut set = tokio::task::JoinSet::new();
                    for t in 0..tasks {
                        let w = Worker::new(t, size, blocks, measuring.clone());
                        set.spawn(async_worker(nfs.clone(), fh, op, w, stop.clone()));
                    }
                    let mut total = new_histogram();
                    while let Some(h) = set.join_next().await {
                        let h =
                            h.map_err(|_| NfsError::Client(rnfs_client::ClientError::Shutdown))??;
                        let _ = total.add(&h);
                    }
                    Ok(total)
                })
            })]
        }
    };
    start.wait();
    thread::sleep(p.warmup);
    let locks0 = rnfs_client::lockstat::snapshot();
    let cpu0 = crate::report::own_cpu_seconds();
    measuring.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    thread::sleep(p.duration);
    measuring.store(false, Ordering::Relaxed);
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = crate::report::own_cpu_seconds() - cpu0;
    let locks = rnfs_client::lockstat::snapshot().since(&locks0);
    stop.store(true, Ordering::Relaxed);
    let mut total = new_histogram();
    for w in workers {
        let h = w.join().map_err(|_| ClientBenchError::Panicked)??;
        let _ = total.add(&h);
    }
    let calls = total.len() as f64;
    let bytes = match p.op {
        ClientOp::Read | ClientOp::Write => calls * f64::from(p.size),
        _ => 0.0,
    };
    Ok(ClientLoadRow {
        op: p.op,
        threads: p.threads,
        mode: p.mode,
        calls_per_sec: calls / elapsed,
        mb_per_sec: bytes / elapsed / 1e6,
        latency: Summary::of(&total),
        cpu_us_per_call: if calls > 0.0 { cpu * 1e6 / calls } else { 0.0 },
        locks_per_call: rnfs_client::lockstat::enabled().then(|| locks.per_call()),
    })
}

/// One async task of [`client_load`]: the same calls through
/// `RpcClient::call_async`.
async fn async_worker(
    nfs: rnfs_client::NfsClient,
    fh: FileHandle,
    op: ClientOp,
    mut w: Worker,
    stop: Arc<AtomicBool>,
) -> Result<Histogram<u64>, NfsError> {
    use rnfs_nfs3::{GetattrArgs, GetattrRes, NfsProc3, ReadArgs, ReadRes, WriteArgs, WriteRes};
    use rnfs_xdr::Decode;
    let rpc = nfs.rpc();
    let cred = nfs.credential();
    let call = |proc_: NfsProc3| (100_003, 3, u32::from(proc_));
    let size = w.size;
    let buf = vec![0u8; size as usize];
    let bad =
        |what: &'static str| NfsError::Client(rnfs_client::ClientError::BadReply(what.into()));
    while !stop.load(Ordering::Relaxed) {
        let off = w.next_offset();
        let t0 = Instant::now();
        let ok = match op {
            ClientOp::Null => {
                let (prog, vers, proc_) = call(NfsProc3::Null);
                rpc.call_async(cred, prog, vers, proc_, &(), |_| Ok(true))
                    .await?
            }
            ClientOp::Getattr => {
                let (prog, vers, proc_) = call(NfsProc3::Getattr);
                let args = GetattrArgs {
                    object: fh.as_fh3(),
                };
                rpc.call_async(cred, prog, vers, proc_, &args, |r| {
                    Ok(matches!(GetattrRes::decode(r)?, GetattrRes::Ok(_)))
                })
                .await?
            }
            ClientOp::Read => {
                let (prog, vers, proc_) = call(NfsProc3::Read);
                let args = ReadArgs {
                    file: fh.as_fh3(),
                    offset: off,
                    count: size,
                };
                rpc.call_async(cred, prog, vers, proc_, &args, |r| {
                    Ok(matches!(ReadRes::decode(r)?, ReadRes::Ok(_)))
                })
                .await?
            }
            ClientOp::Write => {
                let (prog, vers, proc_) = call(NfsProc3::Write);
                let args = WriteArgs {
                    file: fh.as_fh3(),
                    offset: off,
                    count: size,
                    stable: StableHow::Unstable,
                    data: &buf,
                };
                rpc.call_async(cred, prog, vers, proc_, &args, |r| {
                    Ok(matches!(WriteRes::decode(r)?, WriteRes::Ok(_)))
                })
                .await?
            }
        };
        if !ok {
            return Err(bad("the server returned an error status"));
        }
        w.done(t0);
    }
    Ok(w.latencies)
}

/// Parameters of [`writeback`].
#[derive(Debug, Clone)]
pub struct WritebackParams {
    /// A directory on the mounted file system under test (files are created
    /// and removed in it).
    pub dir: PathBuf,
    /// Parallel writers, one file each.
    pub writers: u32,
    /// Bytes each writer writes.
    pub size: u64,
    /// Bytes per write(2).
    pub block: usize,
    /// Pause between two rounds of the stat loop.
    pub interval: Duration,
}

/// One [`writeback`] result.
#[derive(Debug, Clone, Serialize)]
pub struct WritebackRow {
    /// All writers' bytes over the time from the first write to the last
    /// close, MB/s.
    pub write_mb_per_sec: f64,
    /// Seconds from start to the last close.
    pub seconds: f64,
    /// Latency of one `stat()` of a file being written, ns.
    pub stat: Summary,
    /// Latency of one `ls -l` of the directory (readdir plus a stat per
    /// entry), ns.
    pub ls_l: Summary,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ClientBenchError + '_ {
    move |cause| ClientBenchError::Io {
        path: path.to_owned(),
        cause,
    }
}

/// Seed 003: `writers` threads each write `size` bytes sequentially to their
/// own file in `dir` and close it, while another thread loops `stat` on
/// every file and `ls -l` on the directory.
pub fn writeback(p: &WritebackParams) -> Result<WritebackRow, ClientBenchError> {
    let files: Vec<PathBuf> = (0..p.writers)
        .map(|i| p.dir.join(format!("rnfs-wb-{i}.dat")))
        .collect();
    for f in &files {
        fs::File::create(f).map_err(io_err(f))?;
    }
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(files.len() + 2));
    let mut writers = Vec::new();
    for f in files.clone() {
        let (start, size, block) = (start.clone(), p.size, p.block);
        writers.push(thread::spawn(move || -> Result<(), ClientBenchError> {
            let mut data = vec![0u8; block];
            for (i, b) in data.iter_mut().enumerate() {
                *b = (i % 251) as u8;
            }
            let mut file = fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&f)
                .map_err(io_err(&f))?;
            start.wait();
            let mut left = size;
            while left > 0 {
                let n = block.min(left as usize);
                file.write_all(&data[..n]).map_err(io_err(&f))?;
                left -= n as u64;
            }
            drop(file);
            Ok(())
        }));
    }
    let stat_files = files.clone();
    let (dir, interval) = (p.dir.clone(), p.interval);
    let (done2, start2) = (done.clone(), start.clone());
    let stats = thread::spawn(
        move || -> Result<(Histogram<u64>, Histogram<u64>), ClientBenchError> {
            let mut stat = new_histogram();
            let mut ls = new_histogram();
            start2.wait();
            while !done2.load(Ordering::Acquire) {
                for f in &stat_files {
                    let t0 = Instant::now();
                    fs::metadata(f).map_err(io_err(f))?;
                    let _ = stat.record(t0.elapsed().as_nanos() as u64);
                }
                let t0 = Instant::now();
                for e in fs::read_dir(&dir).map_err(io_err(&dir))? {
                    let e = e.map_err(io_err(&dir))?;
                    // `ls -l` stats every entry; a file removed meanwhile is fine.
                    let _ = fs::symlink_metadata(e.path());
                }
                let _ = ls.record(t0.elapsed().as_nanos() as u64);
                thread::sleep(interval);
            }
            Ok((stat, ls))
        },
    );
    start.wait();
    let t0 = Instant::now();
    let mut first_err = None;
    for w in writers {
        match w.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => first_err = first_err.or(Some(e)),
            Err(_) => first_err = first_err.or(Some(ClientBenchError::Panicked)),
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    done.store(true, Ordering::Release);
    let (stat, ls) = stats.join().map_err(|_| ClientBenchError::Panicked)??;
    for f in &files {
        let _ = fs::remove_file(f);
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    Ok(WritebackRow {
        write_mb_per_sec: (p.size * u64::from(p.writers)) as f64 / seconds / 1e6,
        seconds,
        stat: Summary::of(&stat),
        ls_l: Summary::of(&ls),
    })
}

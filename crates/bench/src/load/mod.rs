//! `rnfs bench load`: closed-loop load against any NFSv3 server (rnfs,
//! nfs-ganesha, knfsd).
//!
//! `connections` TCP connections each keep `depth` calls in flight: as soon
//! as a reply arrives, the next call goes out on the same connection. After
//! `warmup` the generator measures for `duration`: calls/s, MB/s, latency
//! (HDR histogram), errors by `nfsstat3` name, the server's CPU time per call
//! from `/proc/PID/stat` over exactly the measured window, the server's RSS,
//! and this process's own CPU per call (`getrusage`), so a client-bound
//! result is recognisable.
//!
//! Layout:
//! - `fixtures`: setup through the rnfs client library (MNT, the test file,
//!   the directory of K entries, the create-remove scratch directories under
//!   `rnfs-bench-load/`), never used for measured calls;
//! - `ops`: what each op sends (pre-encoded call headers, argument encoders)
//!   and how each reply is checked;
//! - `engine`: the lean measured path: one mio event loop per thread over its
//!   share of connections, replies parsed in batches, the next calls written
//!   with one `writev`;
//! - `idle`: idle connections for the connection sweep;
//! - `host`: `/dev/cpu_dma_latency` and the open-file limit;
//! - `proc_stat`: server CPU and RSS from `/proc`, own CPU from `getrusage`;
//! - `report`: the JSON result object and the text summary.
//!
//! # The ops
//! - `null`, `getattr`, `access`: one call each on the test file (`null` on
//!   nothing);
//! - `lookup`: LOOKUP of a random existing name in `dir-<K>` (or
//!   `dir-<K>-w<W>`: `name_width`);
//! - `read`, `write`: `size` bytes at a random `size`-aligned offset of the
//!   test file `file-<N>`. The file is made by SETATTR of its size, so it is
//!   sparse: READs return zeros without touching a disk on either server,
//!   which is honest for both (the cost measured is the server's, not the
//!   disk's). WRITEs are UNSTABLE, with a COMMIT after every
//!   `commit_every` WRITEs per connection (COMMITs count as calls but not as
//!   bytes);
//! - `create-remove`: CREATE (GUARDED) of a new name in the connection's own
//!   `cr-<conn>` directory, then REMOVE of it; one call = the pair, and its
//!   latency is the pair's;
//! - `readdirplus`: each in-flight slot lists `dir-<K>` page after page
//!   (`dir_page` bytes of reply, dircount one eighth of it as the Linux
//!   client sends), starting again at cookie 0 after `eof`; one call = one
//!   READDIRPLUS RPC, and the time per entry is reported too;
//! - `mix`: an `ls -l`/rsync-style listing of `dir-<K>`: in every 16 calls
//!   of a slot, 1 READDIRPLUS page (continuing the slot's listing), then
//!   7 GETATTR, 4 LOOKUP and 4 ACCESS of the entries that page returned
//!   (handles and names from the page, in order). Every RPC is a call.

mod engine;
mod fixtures;
mod host;
mod idle;
mod ops;
mod proc_stat;
mod report;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use rnfs_client::{NfsError, UrlError};
use rnfs_nfs3::Mountstat3;
use rnfs_rpc::RecordError;
use serde::Serialize;

pub(crate) use ops::{time_seed, Rng};
pub(crate) use report::latency;
pub use report::{LatencyUs, LoadResult, LoadgenUsage, ServerUsage};

/// The call a load run repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum LoadOp {
    /// NULL.
    Null,
    /// GETATTR of the test file.
    Getattr,
    /// LOOKUP of a random name in the directory of K entries.
    Lookup,
    /// ACCESS of the test file.
    Access,
    /// READ of `size` bytes at a random aligned offset.
    Read,
    /// UNSTABLE WRITE of `size` bytes at a random aligned offset, with
    /// periodic COMMIT.
    Write,
    /// CREATE then REMOVE of a new name (one call = the pair).
    CreateRemove,
    /// Listings of the directory of K entries, one page per call.
    Readdirplus,
    /// READDIRPLUS pages, then GETATTR/LOOKUP/ACCESS of their entries.
    Mix,
}

impl LoadOp {
    /// Every op, in the order of the command line's help.
    pub const ALL: [LoadOp; 9] = [
        LoadOp::Null,
        LoadOp::Getattr,
        LoadOp::Lookup,
        LoadOp::Access,
        LoadOp::Read,
        LoadOp::Write,
        LoadOp::CreateRemove,
        LoadOp::Readdirplus,
        LoadOp::Mix,
    ];

    /// The op's name on the command line and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            LoadOp::Null => "null",
            LoadOp::Getattr => "getattr",
            LoadOp::Lookup => "lookup",
            LoadOp::Access => "access",
            LoadOp::Read => "read",
            LoadOp::Write => "write",
            LoadOp::CreateRemove => "create-remove",
            LoadOp::Readdirplus => "readdirplus",
            LoadOp::Mix => "mix",
        }
    }

    fn needs_file(self) -> bool {
        matches!(
            self,
            LoadOp::Getattr | LoadOp::Access | LoadOp::Read | LoadOp::Write
        )
    }

    fn needs_dir(self) -> bool {
        matches!(self, LoadOp::Lookup | LoadOp::Readdirplus | LoadOp::Mix)
    }
}

/// One load configuration (one run).
#[derive(Debug, Clone)]
pub struct LoadParams {
    /// `nfs://HOST[:PORT]/EXPORT[?nfsport=P&mountport=P&nomount=1]`.
    pub url: String,
    /// The call to repeat.
    pub op: LoadOp,
    /// Measured TCP connections.
    pub connections: u32,
    /// Calls in flight per connection.
    pub depth: u32,
    /// READ/WRITE size in bytes.
    pub size: u32,
    /// Size of the test file for READ/WRITE/GETATTR/ACCESS.
    pub file_size: u64,
    /// Entries of the LOOKUP/READDIRPLUS/mix directory.
    pub dir_entries: u64,
    /// Digits of the directory's entry names: 0 for `f0` .. `f<K-1>` in
    /// `dir-<K>`, W for `f` and W zero-padded digits in `dir-<K>-w<W>`, so
    /// that every size of a sweep lists names of one length.
    pub name_width: u8,
    /// A COMMIT after every this many WRITEs per connection (0: never).
    pub commit_every: u32,
    /// READDIRPLUS `maxcount` (dircount is one eighth of it).
    pub dir_page: u32,
    /// Unmeasured time before the measured window.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// The server's process, for its CPU time and RSS.
    pub server_pid: Option<u32>,
    /// Extra connections that send one NULL and then stay idle.
    pub idle_connections: u32,
    /// Load-generator threads (event loops).
    pub threads: u32,
    /// Copied into the result.
    pub label: Option<String>,
    /// Hold `/dev/cpu_dma_latency` at 0 during the run, when writable.
    pub dma_latency: bool,
}

impl LoadParams {
    /// The command line's defaults for `url` and `op`.
    pub fn new(url: impl Into<String>, op: LoadOp) -> LoadParams {
        LoadParams {
            url: url.into(),
            op,
            connections: 1,
            depth: 1,
            size: 4096,
            file_size: 64 << 20,
            dir_entries: 1000,
            name_width: 0,
            commit_every: 256,
            dir_page: 32 << 10,
            warmup: Duration::from_secs(2),
            duration: Duration::from_secs(10),
            server_pid: None,
            idle_connections: 0,
            threads: 1,
            label: None,
            dma_latency: true,
        }
    }

    fn validate(&self) -> Result<(), LoadError> {
        let bad = |name, reason| Err(crate::InvalidParam { name, reason }.into());
        if self.connections == 0 {
            return bad("connections", "must be at least 1");
        }
        if !(1..=65_536).contains(&self.depth) {
            return bad("depth", "must be 1 to 65536");
        }
        if !(1..=(1 << 20)).contains(&self.size) {
            return bad("size", "must be 1 to 1M");
        }
        if self.op.needs_file() && self.file_size < u64::from(self.size) {
            return bad("file-size", "must be at least --size");
        }
        if self.op.needs_dir() && self.dir_entries == 0 {
            return bad("dir-entries", "must be at least 1");
        }
        if self.name_width > ops::MAX_NAME_WIDTH {
            return bad("name-width", "must be 0 to 20");
        }
        if self.op.needs_dir() && !ops::fits_width(self.dir_entries - 1, self.name_width) {
            return bad(
                "name-width",
                "must have as many digits as the largest entry number, dir-entries - 1",
            );
        }
        if !(1024..=(1 << 20)).contains(&self.dir_page) {
            return bad("dir-page", "must be 1K to 1M");
        }
        if self.threads == 0 || self.threads > self.connections {
            return bad("threads", "must be 1 to --connections");
        }
        if self.duration.is_zero() {
            return bad("duration", "must be positive");
        }
        Ok(())
    }
}

/// Why a load run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A parameter out of range.
    #[error(transparent)]
    InvalidParam(#[from] crate::InvalidParam),
    /// The URL could not be parsed.
    #[error("{0}")]
    Url(#[from] UrlError),
    /// `?nomount=1` with an op other than null.
    #[error(
        "?nomount=1 is only possible with --op null (every other op needs the export's handles)"
    )]
    NoMountNeedsNull,
    /// The server refused to mount the export.
    #[error("MNT of {path} refused by the server: {}", mountstat_name(*status))]
    Mount {
        /// The path in the URL.
        path: String,
        /// The MOUNT status.
        status: Mountstat3,
    },
    /// A setup call (mounting, creating fixtures) failed.
    #[error("{what}")]
    Setup {
        /// What was being done.
        what: String,
        /// The client library's error.
        #[source]
        source: NfsError,
    },
    /// Connecting a measured or idle connection failed.
    #[error("cannot connect to {addr}")]
    Connect {
        /// The server address.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: io::Error,
    },
    /// The server closed (or reset) a measured connection during the run.
    #[error("the server closed connection {conn} to {addr} during the run ({detail})")]
    ConnectionClosed {
        /// The connection's number (0-based).
        conn: usize,
        /// The server address.
        addr: SocketAddr,
        /// EOF or the socket error.
        detail: String,
    },
    /// The server sent a byte stream that is not RPC records.
    #[error("connection {conn}: unreadable record stream from the server")]
    Protocol {
        /// The connection's number.
        conn: usize,
        /// The record-marking error.
        #[source]
        source: RecordError,
    },
    /// A local system call failed.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A load-generator thread panicked.
    #[error("a load-generator thread panicked")]
    Panicked,
}

/// `MNT3ERR_*` name of a MOUNT status.
pub(crate) fn mountstat_name(s: Mountstat3) -> &'static str {
    match s {
        Mountstat3::Ok => "MNT3_OK",
        Mountstat3::Perm => "MNT3ERR_PERM",
        Mountstat3::Noent => "MNT3ERR_NOENT",
        Mountstat3::Io => "MNT3ERR_IO",
        Mountstat3::Acces => "MNT3ERR_ACCES",
        Mountstat3::Notdir => "MNT3ERR_NOTDIR",
        Mountstat3::Inval => "MNT3ERR_INVAL",
        Mountstat3::Nametoolong => "MNT3ERR_NAMETOOLONG",
        Mountstat3::Notsupp => "MNT3ERR_NOTSUPP",
        Mountstat3::Serverfault => "MNT3ERR_SERVERFAULT",
    }
}

/// Replies still awaited after the measured window are given this long.
const DRAIN: Duration = Duration::from_secs(5);

/// Runs one load configuration: setup (MNT, fixtures), connections, warm-up,
/// the measured window, and the drain of calls still in flight. Progress of
/// fixture creation goes to standard error.
pub fn run(p: &LoadParams) -> Result<LoadResult, LoadError> {
    p.validate()?;
    let target = fixtures::connect(&p.url, p.op)?;
    let fx = fixtures::prepare(&target, p)?;
    let work = Arc::new(ops::Workload::new(p, &target, fx));
    let addr = target.nfs_addr;

    let open_now = std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count() as u64);
    let total_fds = open_now + u64::from(p.connections) + u64::from(p.idle_connections) + 64;
    host::raise_fd_limit(total_fds).map_err(|source| LoadError::Io {
        what: "raising the open-file limit (RLIMIT_NOFILE)",
        source,
    })?;
    let mut conns = Vec::with_capacity(p.connections as usize);
    for i in 0..p.connections as usize {
        conns.push((i, engine::connect(addr)?));
    }
    let idle = idle::open(addr, p.idle_connections, &work.null_record(0))?;
    // Setup is done: the session's connections are not part of the run.
    drop(target);

    let dma = if p.dma_latency {
        host::DmaLatency::hold()
    } else {
        None
    };
    let ticks = proc_stat::clock_ticks();
    let (gate, rx, handles) = start_threads(&work, conns, p.threads as usize)?;

    // The clock starts once every thread has its connections registered.
    let mut ready = 0;
    while ready < handles.len() {
        match rx.recv() {
            Ok(engine::Msg::Ready) => ready += 1,
            Ok(engine::Msg::Finished { failed: false }) => {}
            Ok(engine::Msg::Finished { failed: true }) | Err(_) => {
                gate.open(None);
                return Err(join_all(handles).1.unwrap_or(LoadError::Panicked));
            }
        }
    }
    let start = Instant::now();
    let window = engine::Window {
        start: start + p.warmup,
        end: start + p.warmup + p.duration,
        drain_until: start + p.warmup + p.duration + DRAIN,
    };
    gate.open(Some(window));
    let samples = sample_window(&rx, &window, p.server_pid);
    let dma_held = dma.is_some();
    drop(dma);
    let (stats, failure) = join_all(handles);
    let idle_opened = idle.len();
    drop(idle);
    if let Some(e) = failure {
        return Err(e);
    }
    let Some((before, after)) = samples else {
        return Err(LoadError::Panicked);
    };
    Ok(report::build(
        p,
        &work,
        engine::Stats::merge(stats),
        &before,
        &after,
        ticks,
        idle_opened,
        dma_held,
    ))
}

type Handles = Vec<thread::JoinHandle<Result<engine::Stats, LoadError>>>;

/// Spreads the connections over `threads` threads, which register them,
/// report ready and wait at the returned gate.
fn start_threads(
    work: &Arc<ops::Workload>,
    conns: Vec<(usize, std::net::TcpStream)>,
    threads: usize,
) -> Result<(Arc<engine::Gate>, mpsc::Receiver<engine::Msg>, Handles), LoadError> {
    let stop = Arc::new(AtomicBool::new(false));
    let gate = Arc::new(engine::Gate::default());
    let (tx, rx) = mpsc::channel();
    let mut per_thread: Vec<Vec<_>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, c) in conns.into_iter().enumerate() {
        per_thread[i % threads].push(c);
    }
    let mut handles = Vec::new();
    for (t, mine) in per_thread.into_iter().enumerate() {
        let (work, stop, thread_gate, tx) = (
            Arc::clone(work),
            Arc::clone(&stop),
            Arc::clone(&gate),
            tx.clone(),
        );
        let spawned = thread::Builder::new()
            .name(format!("load-{t}"))
            .spawn(move || {
                let r = engine::run_thread(&work, mine, &thread_gate, &tx, &stop);
                if r.is_err() {
                    // The other threads end at their next wake-up.
                    stop.store(true, Ordering::Relaxed);
                }
                let _ = tx.send(engine::Msg::Finished { failed: r.is_err() });
                r
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(source) => {
                gate.open(None);
                join_all(handles);
                return Err(LoadError::Io {
                    what: "starting a load thread",
                    source,
                });
            }
        }
    }
    Ok((gate, rx, handles))
}

/// Samples both processes at the window's start and end, unless a thread
/// fails first (`None`).
fn sample_window(
    rx: &mpsc::Receiver<engine::Msg>,
    window: &engine::Window,
    pid: Option<u32>,
) -> Option<(proc_stat::Sample, proc_stat::Sample)> {
    let failed_before = |until: Instant| loop {
        let left = until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(engine::Msg::Finished { failed: true }) => return true,
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => return false,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                thread::sleep(left);
                return false;
            }
        }
    };
    if failed_before(window.start) {
        return None;
    }
    let before = proc_stat::Sample::take(pid);
    if failed_before(window.end) {
        return None;
    }
    Some((before, proc_stat::Sample::take(pid)))
}

/// Joins every thread: their stats, and the first error among them.
fn join_all(handles: Handles) -> (Vec<engine::Stats>, Option<LoadError>) {
    let mut stats = Vec::new();
    let mut first = None;
    for h in handles {
        match h.join() {
            Ok(Ok(s)) => stats.push(s),
            Ok(Err(e)) => {
                first.get_or_insert(e);
            }
            Err(_) => {
                first.get_or_insert(LoadError::Panicked);
            }
        }
    }
    (stats, first)
}

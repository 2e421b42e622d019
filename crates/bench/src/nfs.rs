//! `rnfs bench nfs`: the "no O(n)" numbers of the NFS server, each measured
//! against its small baseline in the same run.
//!
//! - **lookup**: LOOKUP of random existing names in a directory of `small`
//!   entries and one of `big` entries;
//! - **readdirplus**: a full READDIRPLUS listing (64 KiB replies) of a directory
//!   of `list_small` entries and of `big` entries, as time per entry;
//! - **open files**: 4 KiB READs of random files among 1 and among `files`
//!   distinct files.
//!
//! The server runs in this process on 127.0.0.1 with the local backend over
//! directories under `dir` (kept between runs: populating a million entries takes
//! a while), driven by one blocking client (one call in flight), so the numbers
//! are per-call service costs plus one loopback round trip.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rnfs_client::{CallError, SyncConnection};
use rnfs_nfs3::{
    DirOpArgs3, FileHandle, LookupArgs, LookupRes, NfsProc3, ReadArgs, ReaddirplusArgs,
    ReaddirplusRes,
};
use rnfs_server::nfs::exports::{Access, Squash};
use rnfs_server::nfs::{self, ExportConfig, Exports, HandleKey};
use rnfs_server::{Server, ServerConfig};
use rnfs_vfs::local::{LocalFs, LocalOptions};
use rnfs_vfs::Filesystem;
use rnfs_xdr::{Decode, Reader};
use serde::Serialize;

use crate::report::{median, Summary};

/// What to measure.
#[derive(Debug, Clone)]
pub struct NfsParams {
    /// Scratch directory for the exported trees.
    pub dir: PathBuf,
    /// Entries of the small LOOKUP directory.
    pub small: usize,
    /// Entries of the big directory (LOOKUP and READDIRPLUS).
    pub big: usize,
    /// Entries of the small READDIRPLUS directory.
    pub list_small: usize,
    /// Distinct files of the open-files case (compared with 1).
    pub files: usize,
    /// Measured time per LOOKUP and READ run.
    pub duration: Duration,
    /// Repetitions; medians are reported.
    pub repeat: usize,
    /// Service threads.
    pub threads: usize,
}

/// One measured case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    /// `lookup`, `readdirplus` or `read`.
    pub case: &'static str,
    /// Directory entries or distinct files.
    pub size: usize,
    /// Median over repetitions of the per-call (or per-entry) mean, ns.
    pub mean_ns: f64,
    /// Median over repetitions of the per-call p50, ns (per entry for readdirplus).
    pub p50_ns: f64,
    /// Calls (or entries) measured in total.
    pub samples: u64,
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum NfsBenchError {
    /// Preparing the trees failed.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The server did not start.
    #[error("server: {0}")]
    Server(String),
    /// A call failed.
    #[error("call: {0}")]
    Call(#[from] CallError),
    /// The server answered a call with an error status.
    #[error("{0}")]
    Status(String),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> NfsBenchError + '_ {
    move |source| NfsBenchError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Creates `dir` with `n` empty files `f0..f{n-1}` of `size` bytes, unless a
/// previous run completed it.
fn populate(dir: &Path, n: usize, size: usize) -> Result<(), NfsBenchError> {
    let marker = dir.with_extension("complete");
    if marker.exists() {
        return Ok(());
    }
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let data = vec![0x5a; size];
    let started = Instant::now();
    for i in 0..n {
        let p = dir.join(format!("f{i}"));
        fs::write(&p, &data).map_err(io_err(&p))?;
        if i > 0 && i % 100_000 == 0 {
            eprintln!(
                "  populating {}: {i}/{n} ({:.0} s)",
                dir.display(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    fs::write(&marker, b"").map_err(io_err(&marker))?;
    Ok(())
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        // xorshift64*: deterministic, no dependency.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    }
}

fn lookup(
    c: &mut SyncConnection,
    dir: &FileHandle,
    name: &[u8],
) -> Result<FileHandle, NfsBenchError> {
    let res: LookupRes = c.nfs(
        NfsProc3::Lookup,
        &LookupArgs {
            what: DirOpArgs3 {
                dir: dir.as_fh3(),
                name,
            },
        },
    )?;
    match res {
        LookupRes::Ok(ok) => Ok(ok.object),
        other => Err(NfsBenchError::Status(format!(
            "LOOKUP {}: {:?}",
            String::from_utf8_lossy(name),
            other.status()
        ))),
    }
}

#[allow(
    clippy::expect_used,
    reason = "constant bounds that hdrhistogram accepts"
)]
fn histogram() -> Histogram<u64> {
    // 1 ns .. 100 s, 3 significant figures.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// LOOKUP random names of `n` entries for `d`; per-call latency.
fn run_lookups(
    c: &mut SyncConnection,
    dir: &FileHandle,
    n: usize,
    d: Duration,
    rng: &mut Rng,
) -> Result<Histogram<u64>, NfsBenchError> {
    let mut h = histogram();
    let names: Vec<Vec<u8>> = (0..1024)
        .map(|_| format!("f{}", rng.below(n)).into_bytes())
        .collect();
    let end = Instant::now() + d;
    let mut i = 0;
    while Instant::now() < end {
        let t = Instant::now();
        lookup(c, dir, &names[i % names.len()])?;
        let _ = h.record(t.elapsed().as_nanos() as u64);
        i += 1;
    }
    Ok(h)
}

/// Lists `dir` completely with READDIRPLUS; returns (entries, elapsed).
fn list(c: &mut SyncConnection, dir: &FileHandle) -> Result<(u64, Duration), NfsBenchError> {
    let mut cookie = 0;
    let mut verf = [0; 8];
    let mut entries = 0u64;
    let t = Instant::now();
    loop {
        let raw = c.nfs_raw(
            NfsProc3::Readdirplus,
            &ReaddirplusArgs {
                dir: dir.as_fh3(),
                cookie,
                cookieverf: verf,
                dircount: 64 << 10,
                maxcount: 64 << 10,
            },
        )?;
        let res = ReaddirplusRes::decode(&mut Reader::new(&raw))
            .map_err(|e| NfsBenchError::Status(format!("READDIRPLUS reply: {e}")))?;
        let ReaddirplusRes::Ok(ok) = res else {
            return Err(NfsBenchError::Status(format!(
                "READDIRPLUS: {:?}",
                res.status()
            )));
        };
        entries += ok.entries.len() as u64;
        if let Some(last) = ok.entries.last() {
            cookie = last.cookie;
        }
        verf = ok.cookieverf;
        if ok.eof {
            return Ok((entries, t.elapsed()));
        }
    }
}

/// 4 KiB READs of random files among `files` for `d`.
fn run_reads(
    c: &mut SyncConnection,
    files: &[FileHandle],
    d: Duration,
    rng: &mut Rng,
) -> Result<Histogram<u64>, NfsBenchError> {
    let mut h = histogram();
    let end = Instant::now() + d;
    while Instant::now() < end {
        let f = &files[rng.below(files.len())];
        let t = Instant::now();
        c.nfs_raw(
            NfsProc3::Read,
            &ReadArgs {
                file: f.as_fh3(),
                offset: 0,
                count: 4096,
            },
        )?;
        let _ = h.record(t.elapsed().as_nanos() as u64);
    }
    Ok(h)
}

fn summarize(case: &'static str, size: usize, runs: &[Summary]) -> CaseResult {
    let mut means: Vec<f64> = runs.iter().map(|s| s.mean).collect();
    let mut p50s: Vec<f64> = runs.iter().map(|s| s.p50 as f64).collect();
    CaseResult {
        case,
        size,
        mean_ns: median(&mut means),
        p50_ns: median(&mut p50s),
        samples: runs.iter().map(|s| s.count).sum(),
    }
}

/// Runs every case and returns one result per (case, size), small size first.
pub fn run(p: &NfsParams) -> Result<Vec<CaseResult>, NfsBenchError> {
    fs::create_dir_all(&p.dir).map_err(io_err(&p.dir))?;
    let tree = |name: &str, n: usize| p.dir.join(format!("{name}-{n}"));
    eprintln!("preparing directories under {}", p.dir.display());
    populate(&tree("dir", p.small), p.small, 0)?;
    populate(&tree("dir", p.list_small), p.list_small, 0)?;
    populate(&tree("dir", p.big), p.big, 0)?;
    populate(&tree("files", 1), 1, 4096)?;
    populate(&tree("files", p.files), p.files, 4096)?;

    let root = fs::canonicalize(&p.dir).map_err(io_err(&p.dir))?;
    let mut export = ExportConfig::new(&root);
    export.access = Access::Ro;
    export.squash = Squash::None;
    let exports = Exports::new(
        &[export],
        Box::new(|c: &ExportConfig| {
            LocalFs::open(&c.path, LocalOptions::default())
                .map(|fs| Arc::new(fs) as Arc<dyn Filesystem>)
                .map_err(|e| e.to_string())
        }),
    )
    .map_err(|e| NfsBenchError::Server(e.to_string()))?;
    let key = HandleKey::ephemeral().map_err(io_err(&p.dir))?;
    let dispatcher = nfs::dispatcher(Arc::new(exports), key)
        .map_err(|e| NfsBenchError::Server(e.to_string()))?;
    let mut config = ServerConfig::new(vec![([127, 0, 0, 1], 0).into()]);
    config.sched = rnfs_sched::Config::fixed(p.threads);
    config.sched.name = "rnfs-bench".into();
    let server = Server::start_with_dispatcher(config, Arc::new(dispatcher))
        .map_err(|e| NfsBenchError::Server(e.to_string()))?;
    let mut c = SyncConnection::connect(server.local_addrs()[0])?;
    let root_fh = c.mount(&root.to_string_lossy())?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);

    let handle_of = |c: &mut SyncConnection, name: String| lookup(c, &root_fh, name.as_bytes());
    let small_dir = handle_of(&mut c, format!("dir-{}", p.small))?;
    let list_dir = handle_of(&mut c, format!("dir-{}", p.list_small))?;
    let big_dir = handle_of(&mut c, format!("dir-{}", p.big))?;
    let one_dir = handle_of(&mut c, "files-1".into())?;
    let many_dir = handle_of(&mut c, format!("files-{}", p.files))?;
    let one = vec![lookup(&mut c, &one_dir, b"f0")?];
    let many = (0..p.files)
        .map(|i| lookup(&mut c, &many_dir, format!("f{i}").as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;

    // Warm the server's and the kernel's caches once.
    run_lookups(&mut c, &big_dir, p.big, p.duration / 2, &mut rng)?;
    list(&mut c, &big_dir)?;

    let mut lookups = [Vec::new(), Vec::new()];
    let mut lists = [Vec::new(), Vec::new()];
    let mut reads = [Vec::new(), Vec::new()];
    for rep in 0..p.repeat {
        // Alternate the order so drift does not favour one side.
        let order: [usize; 2] = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        for &i in &order {
            let (dir, n) = if i == 0 {
                (&small_dir, p.small)
            } else {
                (&big_dir, p.big)
            };
            let h = run_lookups(&mut c, dir, n, p.duration, &mut rng)?;
            lookups[i].push(Summary::of(&h));
        }
        for &i in &order {
            let dir = if i == 0 { &list_dir } else { &big_dir };
            // Repeat the small listing to list about as many entries as the big one.
            let rounds = if i == 0 {
                (p.big / p.list_small.max(1)).clamp(1, 1000)
            } else {
                1
            };
            let mut total = (0u64, Duration::ZERO);
            for _ in 0..rounds {
                let (n, d) = list(&mut c, dir)?;
                total.0 += n;
                total.1 += d;
            }
            let per_entry = total.1.as_nanos() as f64 / total.0.max(1) as f64;
            lists[i].push(Summary {
                count: total.0,
                min: per_entry as u64,
                mean: per_entry,
                p50: per_entry as u64,
                p99: per_entry as u64,
                max: per_entry as u64,
            });
        }
        for &i in &order {
            let files = if i == 0 { &one } else { &many };
            let h = run_reads(&mut c, files, p.duration, &mut rng)?;
            reads[i].push(Summary::of(&h));
        }
        eprintln!("  repetition {}/{} done", rep + 1, p.repeat);
    }
    server.shutdown();
    Ok(vec![
        summarize("lookup", p.small, &lookups[0]),
        summarize("lookup", p.big, &lookups[1]),
        summarize("readdirplus", p.list_small, &lists[0]),
        summarize("readdirplus", p.big, &lists[1]),
        summarize("read", 1, &reads[0]),
        summarize("read", p.files, &reads[1]),
    ])
}

/// The results as a table, with each big case's ratio to its small baseline.
pub fn table(rows: &[CaseResult]) -> String {
    let mut out = format!(
        "{:<12} {:>10} {:>12} {:>12} {:>10} {:>14}\n",
        "case", "size", "mean ns", "p50 ns", "samples", "ratio (p50)"
    );
    for pair in rows.chunks(2) {
        let base = pair[0].p50_ns.max(1.0);
        for r in pair {
            out += &format!(
                "{:<12} {:>10} {:>12.0} {:>12.0} {:>10} {:>13.2}x\n",
                r.case,
                r.size,
                r.mean_ns,
                r.p50_ns,
                r.samples,
                r.p50_ns / base
            );
        }
    }
    out
}

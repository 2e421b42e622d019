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
//!
//! Two local baselines, on the same trees and in the same repetitions, do the
//! kernel work the server does, without NFS, so that what grows with size can
//! be told apart from rnfs's own cost (NFS minus local, as `rnfs bench fileio`
//! does for file size):
//!
//! - **readdirplus-local**: what the privileged local backend asks of the
//!   kernel for a listing: `getdents64` on a directory descriptor and, per
//!   entry, a handle lookup by name and `fstatat(AT_SYMLINK_NOFOLLOW)`. The
//!   handle lookup is `statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_INO)`,
//!   standing in for `name_to_handle_at(dirfd, name, 0)`, which this crate
//!   cannot call (no unsafe code here; rustix and nix do not wrap it): the same
//!   path walk and dentry hash lookup, then a read of the inode (as the handle
//!   encoding does), without the handle's small allocation and copy-out. Skipped
//!   (zero samples) when the backend is unprivileged, whose listing opens every
//!   entry instead;
//! - **read-local**: the READ of a file whose descriptor the open-file cache
//!   holds: `fstat` (the cache's check), `pread` of 4 KiB at offset 0 and, as
//!   the read reaches the end of the file, `fstat` again, on descriptors of all
//!   the files opened once beforehand, random files drawn as for NFS. It runs
//!   after the server has stopped (its own repetitions, order alternating):
//!   with the server's cache that would be two descriptors per file, more
//!   than an open-file limit of 20,000 holds for 10,000 files.
//!
//! Every case also reports this process's CPU time (user + system,
//! `getrusage`) per call or entry. For the NFS cases that is the client and
//! the in-process server together; for the local cases, the system calls alone.

use std::ffi::CStr;
use std::fs::{self, File};
use std::io;
use std::mem::MaybeUninit;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
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
use rustix::fs as rfs;
use serde::Serialize;

use crate::load::Rng;
use crate::report::{latency_histogram, median, Summary};

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
    /// `lookup`, `readdirplus`, `read`, or the local baselines
    /// `readdirplus-local` and `read-local`.
    pub case: &'static str,
    /// Directory entries or distinct files.
    pub size: usize,
    /// Median over repetitions of the per-call (or per-entry) mean, ns.
    pub mean_ns: f64,
    /// Median over repetitions of the per-call p50, ns (per entry for readdirplus).
    pub p50_ns: f64,
    /// Calls (or entries) measured in total; 0 for a skipped case.
    pub samples: u64,
    /// Median over repetitions of this process's CPU time (user + system) per
    /// call (or entry), ns: client and in-process server together for the NFS
    /// cases.
    pub cpu_ns: f64,
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum NfsBenchError {
    /// Preparing the trees failed.
    #[error("{path}: {cause}")]
    Io {
        /// The path involved.
        path: String,
        /// The error.
        cause: io::Error,
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
    move |cause| NfsBenchError::Io {
        path: path.display().to_string(),
        cause,
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

/// CPU time of this process so far, user + system (zero if unknown).
fn cpu_time() -> Duration {
    Duration::from_secs_f64(crate::report::own_cpu_seconds())
}

/// `s` with the CPU time per sample since `cpu_at_start`.
fn with_cpu(s: Summary, cpu_at_start: Duration) -> (Summary, f64) {
    let cpu = cpu_time().saturating_sub(cpu_at_start);
    (s, cpu.as_nanos() as f64 / s.count.max(1) as f64)
}

/// A per-entry summary of a listing: `entries` in `elapsed` (all statistics
/// are the mean).
fn per_entry(entries: u64, elapsed: Duration) -> Summary {
    let mean = elapsed.as_nanos() as f64 / entries.max(1) as f64;
    Summary {
        count: entries,
        min: mean as u64,
        mean,
        p50: mean as u64,
        p99: mean as u64,
        max: mean as u64,
    }
}

/// LOOKUP random names of `n` entries for `d`; per-call latency.
fn run_lookups(
    c: &mut SyncConnection,
    dir: &FileHandle,
    n: usize,
    d: Duration,
    rng: &mut Rng,
) -> Result<Histogram<u64>, NfsBenchError> {
    let mut h = latency_histogram();
    let names: Vec<Vec<u8>> = (0..1024)
        .map(|_| format!("f{}", rng.below(n as u64)).into_bytes())
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
    let mut h = latency_histogram();
    let end = Instant::now() + d;
    while Instant::now() < end {
        let f = &files[rng.below(files.len() as u64) as usize];
        let t = Instant::now();
        let raw = c.nfs_raw(
            NfsProc3::Read,
            &ReadArgs {
                file: f.as_fh3(),
                offset: 0,
                count: 4096,
            },
        )?;
        let _ = h.record(t.elapsed().as_nanos() as u64);
        // The reply starts with its nfsstat3: a failed READ (say, the server out
        // of descriptors) must not pass for a fast one.
        let status = raw
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_be_bytes);
        if status != Some(0) {
            return Err(NfsBenchError::Status(format!("READ: status {status:?}")));
        }
    }
    Ok(h)
}

/// Lists `dir` as the privileged local backend's READDIRPLUS does in the
/// kernel (see the module docs): `getdents64` into a 32 KiB buffer, then for
/// every entry but `.` and `..` the handle lookup by name and
/// `fstatat(AT_SYMLINK_NOFOLLOW)` ([`crate::dirio::list_once`]). Hands each
/// name to `seen`; returns the entries listed.
fn list_local_with(dir: &Path, mut seen: impl FnMut(&CStr)) -> Result<u64, NfsBenchError> {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 32 << 10];
    let mut entries = 0;
    let mut failed = None;
    crate::dirio::list_once(dir, &mut buf, true, |name, stated| match stated {
        Ok(()) => {
            seen(name);
            entries += 1;
            ControlFlow::Continue(())
        }
        Err(e) => {
            failed = Some(NfsBenchError::Io {
                path: dir
                    .join(name.to_string_lossy().as_ref())
                    .display()
                    .to_string(),
                cause: e.into(),
            });
            ControlFlow::Break(())
        }
    })
    .map_err(|e| io_err(dir)(io::Error::other(e)))?;
    match failed {
        Some(e) => Err(e),
        None => Ok(entries),
    }
}

/// `rounds` complete listings by `list`: time per entry, with CPU.
fn list_rounds(
    rounds: usize,
    mut list: impl FnMut() -> Result<(u64, Duration), NfsBenchError>,
) -> Result<(Summary, f64), NfsBenchError> {
    let (mut entries, mut elapsed) = (0, Duration::ZERO);
    let cpu = cpu_time();
    for _ in 0..rounds {
        let (n, d) = list()?;
        entries += n;
        elapsed += d;
    }
    Ok(with_cpu(per_entry(entries, elapsed), cpu))
}

/// [`list_local_with`] timed: (entries, elapsed).
fn list_local(dir: &Path) -> Result<(u64, Duration), NfsBenchError> {
    let t = Instant::now();
    let entries = list_local_with(dir, |_| {})?;
    Ok((entries, t.elapsed()))
}

/// What the server asks of the kernel for a 4 KiB READ at offset 0 of a
/// 4 KiB file whose descriptor it has cached: `fstat`, `pread`, `fstat`.
fn read_local(file: &File, buf: &mut [u8]) -> io::Result<usize> {
    rfs::fstat(file)?;
    let n = file.read_at(buf, 0)?;
    // The read reached the end of the file: the server stats again.
    rfs::fstat(file)?;
    Ok(n)
}

/// [`read_local`] of random files among `files` (opened from `dir`) for `d`.
fn run_reads_local(
    files: &[File],
    dir: &Path,
    d: Duration,
    rng: &mut Rng,
) -> Result<Histogram<u64>, NfsBenchError> {
    let mut h = latency_histogram();
    let mut buf = vec![0; 4096];
    let end = Instant::now() + d;
    while Instant::now() < end {
        let f = &files[rng.below(files.len() as u64) as usize];
        let t = Instant::now();
        let n = read_local(f, &mut buf).map_err(io_err(dir))?;
        let _ = h.record(t.elapsed().as_nanos() as u64);
        if n != buf.len() {
            return Err(NfsBenchError::Status(format!(
                "{}: short read ({n} bytes)",
                dir.display()
            )));
        }
    }
    Ok(h)
}

/// Opens `f0..f{n-1}` of `dir` for reading.
fn open_files(dir: &Path, n: usize) -> Result<Vec<File>, NfsBenchError> {
    (0..n)
        .map(|i| {
            let p = dir.join(format!("f{i}"));
            File::open(&p).map_err(io_err(&p))
        })
        .collect()
}

/// Medians over `runs` of (summary, CPU per sample); zeros when none ran.
fn summarize(case: &'static str, size: usize, runs: &[(Summary, f64)]) -> CaseResult {
    let pick = |f: fn(&(Summary, f64)) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        if v.is_empty() {
            0.0
        } else {
            median(&mut v)
        }
    };
    CaseResult {
        case,
        size,
        mean_ns: pick(|r| r.0.mean),
        p50_ns: pick(|r| r.0.p50 as f64),
        cpu_ns: pick(|r| r.1),
        samples: runs.iter().map(|r| r.0.count).sum(),
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
    // Whether the backend lists by name (privileged), which readdirplus-local
    // mirrors, or opens every entry.
    let backend = Arc::new(
        LocalFs::open(&root, LocalOptions::default())
            .map_err(|e| NfsBenchError::Server(e.to_string()))?,
    );
    let privileged = backend.privileged();
    if !privileged {
        eprintln!(
            "readdirplus-local skipped: the backend is unprivileged (not root) and \
             opens every entry, which the local baseline does not mirror"
        );
    }
    let mut export = ExportConfig::new(&root);
    export.access = Access::Ro;
    export.squash = Squash::None;
    let exports = Exports::new(
        &[export],
        // The one export is `root`, already open.
        Box::new(move |_: &ExportConfig| Ok(Arc::clone(&backend) as Arc<dyn Filesystem>)),
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
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);

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
    // The same trees for the local baselines; every file opened once, as the
    // server's open-file cache holds them.
    let local_dirs = [tree("dir", p.list_small), tree("dir", p.big)];
    let local_file_dirs = [tree("files", 1), tree("files", p.files)];

    // Warm the server's and the kernel's caches once.
    run_lookups(&mut c, &big_dir, p.big, p.duration / 2, &mut rng)?;
    list(&mut c, &big_dir)?;
    if privileged {
        list_local(&local_dirs[1])?;
    }

    // Repeat the small listing to list about as many entries as the big one.
    let rounds = [(p.big / p.list_small.max(1)).clamp(1, 1000), 1];
    let mut lookups = [Vec::new(), Vec::new()];
    let mut lists = [Vec::new(), Vec::new()];
    let mut lists_local = [Vec::new(), Vec::new()];
    let mut reads = [Vec::new(), Vec::new()];
    let mut reads_local = [Vec::new(), Vec::new()];
    for rep in 0..p.repeat {
        // Alternate the order so drift does not favour one side.
        let order: [usize; 2] = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        for &i in &order {
            let (dir, n) = if i == 0 {
                (&small_dir, p.small)
            } else {
                (&big_dir, p.big)
            };
            let cpu = cpu_time();
            let h = run_lookups(&mut c, dir, n, p.duration, &mut rng)?;
            lookups[i].push(with_cpu(Summary::of(&h), cpu));
        }
        for &i in &order {
            let dir = if i == 0 { &list_dir } else { &big_dir };
            lists[i].push(list_rounds(rounds[i], || list(&mut c, dir))?);
        }
        for &i in order.iter().filter(|_| privileged) {
            lists_local[i].push(list_rounds(rounds[i], || list_local(&local_dirs[i]))?);
        }
        for &i in &order {
            let files = if i == 0 { &one } else { &many };
            let cpu = cpu_time();
            let h = run_reads(&mut c, files, p.duration, &mut rng)?;
            reads[i].push(with_cpu(Summary::of(&h), cpu));
        }
        eprintln!("  repetition {}/{} done", rep + 1, p.repeat);
    }
    server.shutdown();
    // read-local runs once the server is gone: its open-file cache holds up to
    // half of RLIMIT_NOFILE (one descriptor per file read), and read-local
    // holds one per file too, which together need not fit (20,000 here).
    let local_files = [
        open_files(&local_file_dirs[0], 1)?,
        open_files(&local_file_dirs[1], p.files)?,
    ];
    for rep in 0..p.repeat {
        let order: [usize; 2] = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        for &i in &order {
            let cpu = cpu_time();
            let h = run_reads_local(&local_files[i], &local_file_dirs[i], p.duration, &mut rng)?;
            reads_local[i].push(with_cpu(Summary::of(&h), cpu));
        }
    }
    Ok(vec![
        summarize("lookup", p.small, &lookups[0]),
        summarize("lookup", p.big, &lookups[1]),
        summarize("readdirplus", p.list_small, &lists[0]),
        summarize("readdirplus", p.big, &lists[1]),
        summarize("read", 1, &reads[0]),
        summarize("read", p.files, &reads[1]),
        summarize("readdirplus-local", p.list_small, &lists_local[0]),
        summarize("readdirplus-local", p.big, &lists_local[1]),
        summarize("read-local", 1, &reads_local[0]),
        summarize("read-local", p.files, &reads_local[1]),
    ])
}

/// The results as a table, with each big case's ratio to its small baseline
/// (rows in pairs, small first), then rnfs's own cost (NFS minus local) of the
/// big case against the small one for READDIRPLUS (per entry, p50) and READ
/// (per call, mean).
pub fn table(rows: &[CaseResult]) -> String {
    let mut out = format!(
        "{:<18} {:>10} {:>12} {:>12} {:>10} {:>14} {:>10}\n",
        "case", "size", "mean ns", "p50 ns", "samples", "ratio (p50)", "cpu ns"
    );
    for pair in rows.chunks(2) {
        let base = pair[0].p50_ns.max(1.0);
        for r in pair {
            out += &format!(
                "{:<18} {:>10} {:>12.0} {:>12.0} {:>10} {:>13.2}x {:>10.0}\n",
                r.case,
                r.size,
                r.mean_ns,
                r.p50_ns,
                r.samples,
                r.p50_ns / base,
                r.cpu_ns
            );
        }
    }
    out += &own_line(
        rows,
        "readdirplus",
        "rnfs's own per entry (NFS - local) big / small",
        |r| r.p50_ns,
    );
    out += &own_line(
        rows,
        "read",
        "rnfs's own per call (NFS - local, mean) {big} files / 1",
        |r| r.mean_ns,
    );
    out
}

/// One "NFS minus local, big / small" line of [`table`] for `case`, with
/// `{big}` in `label` replaced by the big size; n/a where a row is missing or
/// not measured, or the small case's own cost is not positive.
fn own_line(rows: &[CaseResult], case: &str, label: &str, value: fn(&CaseResult) -> f64) -> String {
    let local = format!("{case}-local");
    let pair = |name: &str| {
        let mut found = rows.iter().filter(|r| r.case == name && r.samples > 0);
        Some((found.next()?, found.next()?))
    };
    let (Some((nfs_small, nfs_big)), Some((local_small, local_big))) = (pair(case), pair(&local))
    else {
        return format!("{case}: {label} = n/a (not measured)\n");
    };
    let label = label.replace("{big}", &nfs_big.size.to_string());
    let small = value(nfs_small) - value(local_small);
    let big = value(nfs_big) - value(local_big);
    if small <= 0.0 {
        return format!("{case}: {label} = n/a (small: {small:.0} ns)\n");
    }
    format!(
        "{case}: {label} = {:.2}x ({big:.0} / {small:.0} ns)\n",
        big / small
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn local_listing_counts_every_entry_once_across_buffers() {
        let tmp = tempfile::tempdir().unwrap();
        // 3,000 entries of 24 to 32 bytes each: about three 32 KiB buffers.
        for i in 0..3000 {
            fs::write(tmp.path().join(format!("f{i}")), b"").unwrap();
        }
        fs::create_dir(tmp.path().join("sub")).unwrap();
        // Dangling: fails unless both per-entry calls do not follow symlinks.
        std::os::unix::fs::symlink("missing", tmp.path().join("link")).unwrap();

        let mut names = Vec::new();
        let n = list_local_with(tmp.path(), |name| {
            names.push(name.to_string_lossy().into_owned());
        })
        .unwrap();

        assert_eq!(n, 3002);
        assert_eq!(names.len(), 3002);
        let unique: HashSet<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(unique.len(), 3002, "an entry was listed twice");
        assert!(!unique.contains(".") && !unique.contains(".."));
        assert!(unique.contains("sub") && unique.contains("link"));
        assert!((0..3000).all(|i| unique.contains(format!("f{i}").as_str())));
        assert_eq!(list_local(tmp.path()).unwrap().0, 3002);
    }

    #[test]
    fn local_listing_of_a_missing_directory_fails() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(list_local(&tmp.path().join("none")).is_err());
    }

    #[test]
    fn local_read_reads_the_whole_4k_file() {
        let tmp = tempfile::tempdir().unwrap();
        populate(&tmp.path().join("files-3"), 3, 4096).unwrap();
        let files = open_files(&tmp.path().join("files-3"), 3).unwrap();
        let mut buf = vec![0; 4096];
        assert_eq!(read_local(&files[2], &mut buf).unwrap(), 4096);
        assert!(buf.iter().all(|&b| b == 0x5a));
    }

    fn row(case: &'static str, size: usize, mean_ns: f64, p50_ns: f64) -> CaseResult {
        CaseResult {
            case,
            size,
            mean_ns,
            p50_ns,
            samples: 10,
            cpu_ns: 0.0,
        }
    }

    fn rows() -> Vec<CaseResult> {
        vec![
            row("lookup", 10, 30_000.0, 30_000.0),
            row("lookup", 1_000_000, 31_000.0, 30_500.0),
            row("readdirplus", 1000, 2_600.0, 2_600.0),
            row("readdirplus", 1_000_000, 4_000.0, 4_000.0),
            row("read", 1, 30_000.0, 29_000.0),
            row("read", 10_000, 34_000.0, 33_000.0),
            row("readdirplus-local", 1000, 1_000.0, 1_000.0),
            row("readdirplus-local", 1_000_000, 1_700.0, 1_700.0),
            row("read-local", 1, 1_000.0, 900.0),
            row("read-local", 10_000, 1_400.0, 1_300.0),
        ]
    }

    #[test]
    fn table_subtracts_local_from_nfs() {
        let t = table(&rows());
        // (4000 - 1700) / (2600 - 1000) = 2300 / 1600.
        assert!(t.contains(
            "readdirplus: rnfs's own per entry (NFS - local) big / small = 1.44x (2300 / 1600 ns)\n"
        ));
        // Means: (34000 - 1400) / (30000 - 1000) = 32600 / 29000.
        assert!(t.contains(
            "read: rnfs's own per call (NFS - local, mean) 10000 files / 1 = 1.12x (32600 / 29000 ns)\n"
        ));
        // The local pair has its own ratio: 1300 / 900.
        assert!(t.lines().any(|l| l.starts_with("read-local ")
            && l.contains(" 10000 ")
            && l.contains(" 1.44x")));
        assert_eq!(t.lines().count(), 1 + 10 + 2);
    }

    #[test]
    fn table_says_n_a_for_a_skipped_local_case() {
        let mut rows = rows();
        rows[6].samples = 0;
        rows[7].samples = 0;
        let t = table(&rows);
        assert!(t.contains("readdirplus: rnfs's own per entry (NFS - local) big / small = n/a"));
        assert!(t.contains("read: rnfs's own per call (NFS - local, mean) 10000 files / 1 = 1.12x"));
    }
}

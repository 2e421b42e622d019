//! `rnfs bench`: benchmarks that report numbers side by side with their
//! baselines. They assert nothing; the tests do that.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use rnfs_bench::sched::{self, Mode, Params};
use rnfs_sched::{Policy, PoolMode};

const SCHED_ABOUT: &str = "\
Reproduces the service-thread hand-off study of the Linux SUNRPC constant-time \
scheduler series (2023) for every scheduler policy, side by side in one run.

For each policy and thread count it reports the hand-off latency (from a \
transport being queued to a service thread picking it up): min, mean, p50, p99, \
max and a histogram in 300 ns bins; calls per second; wake-ups per call; the \
share of wake-ups that found nothing to do; the peak number of threads woken \
but not yet running; and voluntary and involuntary context switches per call \
(getrusage, whole process).

Modes: `inproc` drives the scheduler with synthetic transports (one poller \
thread per pool makes a transport readable again as soon as its call \
completes: a closed loop with --connections calls in flight). `loopback` \
starts an rnfs server on 127.0.0.1 and drives it with NULL calls over \
--connections TCP connections.

Runs alternate the policy order between repetitions. Results go to standard \
output as tables, and as JSON with --json.";

/// Benchmarks.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    pub(crate) which: Which,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Which {
    /// Scheduler hand-off latency and throughput, every policy side by side.
    #[command(long_about = SCHED_ABOUT)]
    Sched(SchedArgs),
    /// NFS per-call costs against directory size and open files (no O(n)).
    #[command(long_about = NFS_ABOUT)]
    Nfs(NfsArgs),
    /// Closed-loop calls through the rnfs client library against any server.
    #[command(long_about = CLIENT_ABOUT)]
    Client(ClientArgs),
    /// Parallel writers beside a stat / ls -l loop on a mounted file system.
    #[command(long_about = WRITEBACK_ABOUT)]
    Writeback(WritebackArgs),
}

const CLIENT_ABOUT: &str = "\
Drives any NFSv3 server through the rnfs client library: --threads threads \
share one client (one TCP connection unless --connections), each with one call \
in flight, repeating --op for --duration seconds after --warmup. READ and WRITE \
go to random --size-aligned offsets of a --file-size test file \
(rnfs-bench-client.dat, created in the export's root and reused). Reports \
calls/s, MB/s, latency percentiles, this process's CPU time per call and, when \
the client was built with the lock-stats feature, lock acquisitions per call.

Example (seed 002: 32 KiB random reads):
  rnfs bench client --url nfs://127.0.0.1:2049/srv --op read --size 32768 --threads 8,16,64";

const WRITEBACK_ABOUT: &str = "\
Seed 003: --writers threads each write --size bytes sequentially (write(2) of \
--block bytes) to their own new file in --dir and close it, while one more \
thread loops: stat() every file being written, then `ls -l` the directory \
(readdir plus an lstat per entry), pausing --interval-ms between rounds. \
Reports the writers' aggregate MB/s (first write to last close) and the \
latency of stat() and of one `ls -l`. Point --dir at a mounted NFS file system \
(e.g. `rnfs mount -o wb_max_outstanding=16` vs `=0`); bench/writeback.sh runs \
both side by side.";

fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => {
            let mult = match t[i..].to_ascii_lowercase().as_str() {
                "k" | "kib" => 1u64 << 10,
                "m" | "mib" => 1 << 20,
                "g" | "gib" => 1 << 30,
                "t" | "tib" => 1 << 40,
                other => return Err(format!("unknown size suffix {other:?} (use K, M, G or T)")),
            };
            (&t[..i], mult)
        }
        None => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("not a size: {s:?}"))
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ClientOpArg {
    /// NULL calls.
    Null,
    /// GETATTR of the test file.
    Getattr,
    /// READ at random offsets.
    Read,
    /// UNSTABLE WRITE at random offsets.
    Write,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum LoadModeArg {
    /// --threads OS threads, blocking calls.
    Threads,
    /// --threads tasks on one tokio thread, async calls.
    Async,
}

/// Options of `rnfs bench client`.
#[derive(Debug, Args)]
pub(crate) struct ClientArgs {
    /// The export, as nfs://host[:port]/export.
    #[arg(long)]
    url: String,
    /// Calls to make (comma separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [ClientOpArg::Read])]
    op: Vec<ClientOpArg>,
    /// Thread counts (comma separated).
    #[arg(long, value_delimiter = ',', default_values_t = [8, 16, 64],
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: Vec<u32>,
    /// Concurrency by OS threads making blocking calls, or by tasks on one
    /// thread awaiting the async API.
    #[arg(long, value_enum, default_value_t = LoadModeArg::Threads)]
    mode: LoadModeArg,
    /// TCP connections of the client.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    connections: u32,
    /// READ/WRITE size (K, M suffixes).
    #[arg(long, default_value = "32K", value_parser = parse_size)]
    size: u64,
    /// Size of the test file (K, M, G suffixes).
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    file_size: u64,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Unmeasured warm-up seconds before each run.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Repetitions (medians are reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Also write every run as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Options of `rnfs bench writeback`.
#[derive(Debug, Args)]
pub(crate) struct WritebackArgs {
    /// Directory on the file system under test.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Parallel writers.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=1024))]
    writers: u32,
    /// Bytes per writer (K, M, G suffixes).
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    size: u64,
    /// Bytes per write(2).
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    block: u64,
    /// Pause between stat-loop rounds, in milliseconds.
    #[arg(long, default_value_t = 50)]
    interval_ms: u64,
    /// Also write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

const NFS_ABOUT: &str = "\
Measures that no per-call cost of the NFS server grows with directory size or \
with the number of files in use, each big case side by side with its small \
baseline in the same run: LOOKUP of random names in a directory of --small and \
of --big entries; a complete READDIRPLUS listing (64 KiB replies) of --list-small \
and of --big entries, as time per entry; 4 KiB READs of random files among 1 and \
among --files files.

The server runs in this process on 127.0.0.1 with the local backend over \
directories created under --dir (kept for later runs: creating a million files \
takes a minute), driven by one client with one call in flight. Results are \
medians over --repeat repetitions, with the ratio of each big case to its \
baseline.";

/// Options of `rnfs bench nfs`.
#[derive(Debug, Args)]
pub(crate) struct NfsArgs {
    /// Scratch directory for the test trees (created; reused between runs).
    #[arg(long, value_name = "DIR", default_value = "/tmp/rnfs-bench-nfs")]
    dir: PathBuf,
    /// Entries of the small LOOKUP directory.
    #[arg(long, default_value_t = 10)]
    small: usize,
    /// Entries of the big directory.
    #[arg(long, default_value_t = 1_000_000)]
    big: usize,
    /// Entries of the small READDIRPLUS directory.
    #[arg(long, default_value_t = 1000)]
    list_small: usize,
    /// Distinct files read in the open-files case (compared with 1).
    #[arg(long, default_value_t = 10_000)]
    files: usize,
    /// Measured seconds per LOOKUP and READ run.
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// Repetitions (medians are reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Service threads.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: u32,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ModeArg {
    /// Synthetic transports: the scheduler alone.
    Inproc,
    /// A real server and NULL calls over loopback TCP.
    Loopback,
    /// Both.
    Both,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum PolicyArg {
    /// Lock-free queue, O(1) idle stack, one waker.
    Lwq,
    /// Baseline: mutex and linear walk of all threads.
    Listwalk,
    /// Baseline: broadcast wake-up.
    Wakeall,
}

impl From<PolicyArg> for Policy {
    fn from(p: PolicyArg) -> Policy {
        match p {
            PolicyArg::Lwq => Policy::Lwq,
            PolicyArg::Listwalk => Policy::ListWalk,
            PolicyArg::Wakeall => Policy::WakeAll,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum PoolModeArg {
    /// One pool.
    Global,
    /// One pool per CPU.
    Percpu,
    /// One pool per NUMA node.
    Pernode,
    /// As Linux chooses.
    Auto,
}

impl From<PoolModeArg> for PoolMode {
    fn from(p: PoolModeArg) -> PoolMode {
        match p {
            PoolModeArg::Global => PoolMode::Global,
            PoolModeArg::Percpu => PoolMode::PerCpu,
            PoolModeArg::Pernode => PoolMode::PerNode,
            PoolModeArg::Auto => PoolMode::Auto,
        }
    }
}

/// Options of `rnfs bench sched`.
#[derive(Debug, Args)]
pub(crate) struct SchedArgs {
    /// Which harness to run.
    #[arg(long, value_enum, default_value_t = ModeArg::Both)]
    mode: ModeArg,
    /// Policies to compare (comma separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [PolicyArg::Lwq, PolicyArg::Listwalk, PolicyArg::Wakeall])]
    policies: Vec<PolicyArg>,
    /// Service thread counts (comma separated).
    #[arg(long, value_delimiter = ',', default_values_t = [8, 32, 128, 512, 2048],
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    threads: Vec<u32>,
    /// Transports (TCP connections in loopback mode), each with one call in flight.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    connections: u32,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// Unmeasured warm-up seconds before each run.
    #[arg(long, default_value_t = 0.5)]
    warmup: f64,
    /// Repetitions of the whole matrix (report medians over them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// CPU work per call in the in-process mode, in nanoseconds (busy loop).
    #[arg(long, default_value_t = 0)]
    work_ns: u64,
    /// lwq's bound on threads woken but not yet running.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    max_waking: u32,
    /// Pool layout.
    #[arg(long, value_enum, default_value_t = PoolModeArg::Global)]
    pool_mode: PoolModeArg,
    /// Loopback client threads (default: one per 16 connections, at most 4).
    #[arg(long, default_value_t = 0)]
    client_threads: u32,
    /// Also write every run as JSON to this file (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn seconds(name: &str, s: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(s)
        .with_context(|| format!("--{name} must be a non-negative number of seconds"))
}

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.which {
        Which::Sched(a) => run_sched(a),
        Which::Nfs(a) => run_nfs(a),
        Which::Client(a) => run_client(a),
        Which::Writeback(a) => run_writeback(a),
    }
}

fn write_json<T: serde::Serialize>(path: Option<PathBuf>, value: &T) -> anyhow::Result<()> {
    if let Some(path) = path {
        std::fs::write(&path, serde_json::to_string_pretty(value)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn run_client(a: ClientArgs) -> anyhow::Result<()> {
    use rnfs_bench::client::{client_load, ClientLoadParams, ClientOp, LoadMode};
    let url = rnfs_client::NfsUrl::parse(&a.url)?;
    let size = u32::try_from(a.size)
        .ok()
        .filter(|s| (1..=1 << 20).contains(s))
        .context("--size must be 1 to 1M")?;
    let warmup = seconds("warmup", a.warmup)?;
    let duration = seconds("duration", a.duration)?;
    let mode = match a.mode {
        LoadModeArg::Threads => LoadMode::Threads,
        LoadModeArg::Async => LoadMode::Async,
    };
    let mut all = Vec::new();
    println!(
        "{:<8} {:>7} {:>12} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "op", "threads", "calls/s", "MB/s", "p50 us", "p99 us", "max us", "cpu us/op", "locks/op"
    );
    for &op in &a.op {
        let op = match op {
            ClientOpArg::Null => ClientOp::Null,
            ClientOpArg::Getattr => ClientOp::Getattr,
            ClientOpArg::Read => ClientOp::Read,
            ClientOpArg::Write => ClientOp::Write,
        };
        for &threads in &a.threads {
            let mut runs = Vec::new();
            for _ in 0..a.repeat {
                runs.push(client_load(&ClientLoadParams {
                    url: url.clone(),
                    op,
                    threads,
                    mode,
                    connections: a.connections,
                    size,
                    file_size: a.file_size,
                    warmup,
                    duration,
                })?);
            }
            let med = |f: &dyn Fn(&rnfs_bench::client::ClientLoadRow) -> f64| {
                let mut v: Vec<f64> = runs.iter().map(f).collect();
                rnfs_bench::report::median(&mut v)
            };
            let locks = med(&|r| r.locks_per_call.unwrap_or(f64::NAN));
            println!(
                "{:<8} {:>7} {:>12.0} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>10.2} {:>10}",
                format!("{op:?}").to_lowercase(),
                threads,
                med(&|r| r.calls_per_sec),
                med(&|r| r.mb_per_sec),
                med(&|r| r.latency.p50 as f64) / 1e3,
                med(&|r| r.latency.p99 as f64) / 1e3,
                med(&|r| r.latency.max as f64) / 1e3,
                med(&|r| r.cpu_us_per_call),
                if locks.is_nan() {
                    "-".to_owned()
                } else {
                    format!("{locks:.2}")
                },
            );
            all.extend(runs);
        }
    }
    write_json(a.json, &all)
}

fn run_writeback(a: WritebackArgs) -> anyhow::Result<()> {
    let p = rnfs_bench::client::WritebackParams {
        dir: a.dir,
        writers: a.writers,
        size: a.size,
        block: usize::try_from(a.block)
            .ok()
            .filter(|b| *b >= 1)
            .context("--block must be at least 1")?,
        interval: Duration::from_millis(a.interval_ms),
    };
    let row = rnfs_bench::client::writeback(&p)?;
    println!(
        "writers {} x {} MiB: {:.1} MB/s in {:.1} s; stat p50 {:.2} ms p99 {:.2} ms max {:.2} ms ({} calls); ls -l p50 {:.2} ms p99 {:.2} ms max {:.2} ms ({} runs)",
        p.writers,
        p.size >> 20,
        row.write_mb_per_sec,
        row.seconds,
        row.stat.p50 as f64 / 1e6,
        row.stat.p99 as f64 / 1e6,
        row.stat.max as f64 / 1e6,
        row.stat.count,
        row.ls_l.p50 as f64 / 1e6,
        row.ls_l.p99 as f64 / 1e6,
        row.ls_l.max as f64 / 1e6,
        row.ls_l.count,
    );
    write_json(a.json, &row)
}

fn run_nfs(a: NfsArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.small >= 1 && a.list_small >= 1 && a.big >= 1 && a.files >= 1,
        "sizes must be at least 1"
    );
    let params = rnfs_bench::nfs::NfsParams {
        dir: a.dir,
        small: a.small,
        big: a.big,
        list_small: a.list_small,
        files: a.files,
        duration: seconds("duration", a.duration)?,
        repeat: a.repeat as usize,
        threads: a.threads as usize,
    };
    // As `rnfs serve` does: the open-file cache is sized from this limit.
    crate::raise_fd_limit();
    let rows = rnfs_bench::nfs::run(&params)?;
    println!("{}", rnfs_bench::nfs::table(&rows));
    write_json(a.json, &rows)
}

fn run_sched(a: SchedArgs) -> anyhow::Result<()> {
    let modes = match a.mode {
        ModeArg::Inproc => vec![Mode::InProcess],
        ModeArg::Loopback => vec![Mode::Loopback],
        ModeArg::Both => vec![Mode::InProcess, Mode::Loopback],
    };
    let params = Params {
        modes,
        policies: a.policies.iter().map(|&p| p.into()).collect(),
        threads: a.threads.iter().map(|&t| t as usize).collect(),
        connections: a.connections as usize,
        duration: seconds("duration", a.duration)?,
        warmup: seconds("warmup", a.warmup)?,
        repeat: a.repeat as usize,
        work: Duration::from_nanos(a.work_ns),
        max_waking: a.max_waking as usize,
        pool_mode: a.pool_mode.into(),
        client_threads: a.client_threads as usize,
    };
    let mut first = true;
    let rows = sched::run(&params, |row| {
        let table = sched::table(std::slice::from_ref(row));
        let mut lines = table.lines();
        let header = lines.next().unwrap_or_default();
        if first {
            eprintln!("{header}");
            first = false;
        }
        for l in lines {
            eprintln!("{l}");
        }
    })?;
    println!("{}", sched::table(&rows));
    println!("{}", sched::histogram_table(&rows));
    println!("{}", sched::summary(&rows));
    if let Some(path) = a.json {
        let json = serde_json::to_string_pretty(&rows)?;
        if path.as_os_str() == "-" {
            println!("{json}");
        } else {
            std::fs::write(&path, json)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    Ok(())
}

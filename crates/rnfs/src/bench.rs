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
    }
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
    if let Some(path) = a.json {
        std::fs::write(&path, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
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

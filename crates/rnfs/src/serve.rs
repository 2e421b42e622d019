//! `rnfs serve`: run the server until SIGINT or SIGTERM.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use nix::sys::signal::{SigSet, Signal};
use rnfs_sched::{Config, Policy, PoolMode};
use rnfs_server::{Limits, Server, ServerConfig, NFS_PORT};

use crate::Failure;

/// Listen port when not running as root, which cannot bind 2049.
pub(crate) const UNPRIVILEGED_PORT: u16 = 20490;
/// Default total thread count, as knfsd's.
const DEFAULT_THREADS: u32 = 8;
/// Default maximum with dynamic sizing when only --min-threads is given.
const DEFAULT_MAX_THREADS: u32 = 64;

pub(crate) const SERVE_ABOUT: &str = "\
Serve EXPORT_DIR over NFSv3 on TCP until SIGINT or SIGTERM, then shut down cleanly \
(exit status 0).

Work in progress: EXPORT_DIR is checked (it must exist and be a directory) but not \
yet served. The server answers the NULL procedure of NFS version 3 and MOUNT \
version 3; every other procedure gets PROC_UNAVAIL, other NFS and MOUNT versions \
PROG_MISMATCH, and other programs (NFSACL included) PROG_UNAVAIL.

Threads: --threads N runs a fixed N service threads in total (default 8, like \
knfsd). --min-threads/--max-threads instead size the pool dynamically: a thread is \
added when work arrives and none is idle, and an idle thread above the minimum \
retires after --idle-timeout seconds.";

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Directory to export (checked, not yet served: only NULL is answered for now).
    #[arg(value_name = "EXPORT_DIR", value_parser = parse_export_dir)]
    export_dir: Option<PathBuf>,

    /// Address to listen on; repeat for several. IPv6 addresses are bound
    /// IPv6-only, so `0.0.0.0:P` and `[::]:P` can be combined. [default:
    /// 0.0.0.0:2049 as root, else 0.0.0.0:20490, since binding a port below 1024
    /// needs root]
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Vec<SocketAddr>,

    /// Run exactly N service threads in total, spread over the pools. [default: 8]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..),
          conflicts_with_all = ["min_threads", "max_threads"])]
    threads: Option<u32>,

    /// Size the thread pool dynamically, never below N threads. [default: 1 when
    /// --max-threads is given]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    min_threads: Option<u32>,

    /// Size the thread pool dynamically, never above N threads. [default: 64 when
    /// --min-threads is given]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_threads: Option<u32>,

    /// How service threads are split into pools (each pool has its own queue,
    /// threads and poller; pools do not steal work from each other).
    #[arg(long, value_enum, value_name = "MODE", default_value_t = PoolModeArg::Global)]
    pool_mode: PoolModeArg,

    /// How a connection with data finds a service thread.
    #[arg(long = "sched", value_enum, value_name = "POLICY", default_value_t = PolicyArg::Lwq)]
    sched: PolicyArg,

    /// Most threads per pool woken but not yet running (1 = one waker at a time).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_waking: u32,

    /// Most open connections; beyond it new connections are closed at once.
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT_MAX_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64,

    /// Most calls per connection read but not yet answered; at the limit the
    /// connection is not read until a reply goes out (back-pressure).
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT_MAX_IN_FLIGHT_PER_CONN,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_inflight_per_conn: u32,

    /// Largest RPC record accepted, in bytes; a larger one closes the connection.
    /// The default fits a 1 MiB NFS WRITE.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::DEFAULT_MAX_RECORD_SIZE as u64,
          value_parser = clap::value_parser!(u64).range(Limits::MIN_RECORD_SIZE as u64..))]
    max_record_size: u64,

    /// With dynamic sizing, an idle thread above --min-threads retires after this
    /// many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout: u64,

    /// Log filter: a level (error, warn, info, debug, trace) or tracing directives
    /// such as `rnfs_server=debug`. Overrides RUST_LOG. [default: info]
    #[arg(long, value_name = "LEVEL")]
    pub(crate) log: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PoolModeArg {
    /// One pool for the whole machine (Linux's default).
    Global,
    /// One pool per CPU, threads pinned to it.
    Percpu,
    /// One pool per NUMA node, threads pinned to its CPUs.
    Pernode,
    /// pernode on multi-node machines, else percpu above 2 CPUs, else global.
    Auto,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PolicyArg {
    /// Lock-free queue, LIFO idle stack, one thread waking at a time (Linux 6.6+).
    Lwq,
    /// One lock per pool and a walk over all threads for an idle one (before 6.6).
    Listwalk,
    /// One lock and a wake-everyone broadcast per connection (baseline).
    Wakeall,
}

impl From<PoolModeArg> for PoolMode {
    fn from(m: PoolModeArg) -> Self {
        match m {
            PoolModeArg::Global => PoolMode::Global,
            PoolModeArg::Percpu => PoolMode::PerCpu,
            PoolModeArg::Pernode => PoolMode::PerNode,
            PoolModeArg::Auto => PoolMode::Auto,
        }
    }
}

impl From<PolicyArg> for Policy {
    fn from(p: PolicyArg) -> Self {
        match p {
            PolicyArg::Lwq => Policy::Lwq,
            PolicyArg::Listwalk => Policy::ListWalk,
            PolicyArg::Wakeall => Policy::WakeAll,
        }
    }
}

fn parse_export_dir(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => Ok(path),
        Ok(_) => Err("not a directory".into()),
        Err(e) => Err(e.to_string()),
    }
}

impl ServeArgs {
    fn listen(&self) -> Vec<SocketAddr> {
        if !self.listen.is_empty() {
            return self.listen.clone();
        }
        let port = if nix::unistd::geteuid().is_root() {
            NFS_PORT
        } else {
            UNPRIVILEGED_PORT
        };
        vec![SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))]
    }

    fn server_config(&self) -> Result<ServerConfig, Failure> {
        let mut sched = Config::default();
        sched.name = "rnfs-svc".into();
        sched.policy = self.sched.into();
        sched.pool_mode = self.pool_mode.into();
        sched.max_waking = self.max_waking as usize;
        sched.idle_timeout = Duration::from_secs(self.idle_timeout);
        let (min, initial, max) = match (self.threads, self.min_threads, self.max_threads) {
            (Some(n), _, _) => (n, n, n),
            (None, None, None) => (DEFAULT_THREADS, DEFAULT_THREADS, DEFAULT_THREADS),
            (None, min, max) => {
                let min = min.unwrap_or(1);
                let max = max.unwrap_or(DEFAULT_MAX_THREADS.max(min));
                if min > max {
                    return Err(Failure::Usage {
                        subcommand: "serve",
                        msg: format!("--min-threads ({min}) is larger than --max-threads ({max})"),
                    });
                }
                (min, min, max)
            }
        };
        sched.min_threads = min as usize;
        sched.initial_threads = initial as usize;
        sched.max_threads = max as usize;

        let mut config = ServerConfig::new(self.listen());
        config.sched = sched;
        config.limits.max_connections = usize::try_from(self.max_connections).unwrap_or(usize::MAX);
        config.limits.max_in_flight_per_conn = self.max_inflight_per_conn;
        config.limits.max_record_size = usize::try_from(self.max_record_size).unwrap_or(usize::MAX);
        Ok(config)
    }
}

/// Starts the server, waits for SIGINT or SIGTERM, shuts down.
pub(crate) fn run(args: ServeArgs) -> Result<(), Failure> {
    let config = args.server_config()?;

    // Block the signals before any thread starts: every thread inherits the mask,
    // so they stay pending until `wait` below takes them (no handler, no unsafe).
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals
        .thread_block()
        .context("cannot block SIGINT/SIGTERM")?;

    let server = Server::start(config.clone()).context("cannot start the server")?;
    let addrs = server
        .local_addrs()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ");
    let export = args
        .export_dir
        .as_ref()
        .map_or_else(|| "none".to_owned(), |p| p.display().to_string());
    let sched = &config.sched;
    let threads = if sched.min_threads == sched.max_threads {
        sched.max_threads.to_string()
    } else {
        format!("{}..={}", sched.min_threads, sched.max_threads)
    };
    tracing::info!(
        "serving on {addrs} (policy {}, pool mode {}, {} pool(s), {threads} threads, export {export}: NULL only)",
        sched.policy,
        sched.pool_mode,
        server.scheduler().pools(),
    );

    let signal = signals.wait().context("waiting for a signal failed")?;
    tracing::info!("{signal}: shutting down");
    server.shutdown();
    tracing::info!("stopped");
    Ok(())
}

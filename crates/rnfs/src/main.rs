//! `rnfs`: a userspace NFSv3 server and its tools.
//!
//! Each subcommand lives in its own module with an `Args` struct (clap derive) and a
//! `run` function; adding one is a variant in [`Command`] and a match arm in `main`.
#![forbid(unsafe_code)]
// Doc comments here are clap's --help text: `nfs://HOST[:PORT]/...` is not a link.
#![allow(rustdoc::broken_intra_doc_links)]

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use tracing_subscriber::EnvFilter;

mod admin;
mod backends;
mod bench;
mod cli;
mod mount;
mod serve;
mod stats;

#[cfg(test)]
#[path = "../../../tests/support/cannot_run.rs"]
mod cannot_run;

const LONG_ABOUT: &str = "\
rnfs is a userspace NFSv3 server and client.

`rnfs serve` exports directories over NFSv3 and MOUNT v3. Calls arrive over \
TCP; one poller thread per scheduler pool turns socket readiness into work, \
and a pool of service threads, scheduled the way the Linux kernel's nfsd \
schedules its threads (a lock-free queue of ready connections and one thread \
waking at a time), reads, decodes and answers them. The scheduler policy, the \
pool layout and the thread counts are options, so the policies can be \
compared under load.

`rnfs mount` mounts any NFSv3 export on a local directory through FUSE, with \
write-behind flow control; `rnfs ls`, `stat`, `cat`, `cp`, `mv`, `rm`, \
`mkdir` and `df` work on nfs://host[:port]/export/path URLs directly, like \
their coreutils namesakes. `rnfs bench` runs the benchmarks.

`rnfs stats` shows a running server's figures and `rnfs admin` changes it (thread \
count, exports, drain) through the server's admin socket.

Logging goes to standard error; choose the level with --log or RUST_LOG.";

/// A userspace NFSv3 server and client.
#[derive(Debug, Parser)]
#[command(name = "rnfs", version, long_about = LONG_ABOUT, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve directories over NFSv3 and MOUNT v3.
    #[command(long_about = serve::SERVE_ABOUT, after_long_help = serve::SERVE_EXAMPLES)]
    Serve(serve::ServeArgs),
    /// Run benchmarks (e.g. `rnfs bench sched`: scheduler policies side by side).
    Bench(bench::BenchArgs),
    /// Mount an NFS export on a local directory (FUSE).
    Mount(mount::MountArgs),
    /// Show a running server's statistics (like nfsstat; --watch like top).
    #[command(long_about = stats::STATS_ABOUT, after_long_help = stats::STATS_EXAMPLES)]
    Stats(stats::StatsArgs),
    /// Change a running server: threads, exports, reload, drain.
    #[command(long_about = admin::cli::ADMIN_ABOUT, after_long_help = admin::cli::ADMIN_EXAMPLES)]
    Admin(admin::cli::AdminArgs),
    #[command(flatten)]
    Client(cli::ClientCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => {
            init_logging(args.log.as_deref());
            serve::run(args)
        }
        Command::Bench(args) => {
            init_logging(None);
            bench::run(args).map_err(Failure::from)
        }
        Command::Mount(args) => {
            init_logging(None);
            mount::run(args).map_err(Failure::from)
        }
        Command::Stats(args) => return stats::run(args),
        Command::Admin(args) => return admin::cli::run(args),
        Command::Client(cmd) => return cli::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage { subcommand, msg }) => {
            let mut cli = Cli::command();
            cli.build();
            match cli.find_subcommand_mut(subcommand) {
                Some(sub) => sub
                    .error(clap::error::ErrorKind::ArgumentConflict, msg)
                    .exit(),
                None => cli
                    .error(clap::error::ErrorKind::ArgumentConflict, msg)
                    .exit(),
            }
        }
        Err(Failure::Runtime(e)) => {
            eprintln!("rnfs: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Why a subcommand failed: bad arguments (exit code 2, like clap's own errors) or
/// a failure while running (exit code 1).
#[derive(Debug)]
enum Failure {
    Usage {
        subcommand: &'static str,
        msg: String,
    },
    Runtime(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Runtime(e)
    }
}

/// The levels `--log` takes, bare or after `TARGET=`.
const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// Checks a `--log` value and returns the filter it means: each directive a
/// level or `TARGET=LEVEL`, with `info` for everything else unless a bare
/// level is given. `EnvFilter` itself would take a misspelt level as a
/// target name and silently log nothing, and `rnfs_server=debug` alone would
/// silence every other part, errors included.
pub(crate) fn parse_log_filter(s: &str) -> Result<String, String> {
    let mut bare_level = false;
    for directive in s.split(',').map(str::trim) {
        let level = match directive.rsplit_once('=') {
            Some((target, level)) if !target.is_empty() && !target.contains(['[', '{']) => level,
            Some(_) => return Err(format!("`{directive}`: expected TARGET=LEVEL")),
            None => {
                bare_level = true;
                directive
            }
        };
        if !LOG_LEVELS.contains(&level.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "`{level}` is not a log level (expected one of {}, or TARGET=LEVEL)",
                LOG_LEVELS.join(", ")
            ));
        }
    }
    Ok(if bare_level {
        s.to_owned()
    } else {
        format!("info,{s}")
    })
}

/// Logs to stderr with `filter` (checked by [`parse_log_filter`]), else
/// `RUST_LOG`, else `info`.
fn init_logging(filter: Option<&str>) {
    let filter = match filter {
        Some(directives) => EnvFilter::new(directives),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// Raises the soft limit on open files to the hard limit, as servers do: every
/// connection and every cached open file is a descriptor, and the usual soft
/// limit of 1024 would cap connections far below `--max-connections`.
pub(crate) fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => tracing::debug!("open file limit raised from {soft} to {hard}"),
            Err(e) => tracing::warn!("cannot raise the open file limit from {soft}: {e}"),
        },
        Ok((soft, _)) => tracing::debug!("open file limit {soft}"),
        Err(e) => tracing::warn!("cannot read the open file limit: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_log_filter;

    #[test]
    fn log_filters_are_levels_or_target_levels_over_info() {
        assert_eq!(parse_log_filter("debug").unwrap(), "debug");
        assert_eq!(
            parse_log_filter("rnfs_server=debug").unwrap(),
            "info,rnfs_server=debug"
        );
        assert_eq!(
            parse_log_filter("warn,rnfs_server::nfs=TRACE").unwrap(),
            "warn,rnfs_server::nfs=TRACE"
        );
        for bad in [
            "wran",
            "",
            "rnfs_server=loud",
            "=debug",
            "debug,",
            "[span]=info",
        ] {
            assert!(parse_log_filter(bad).is_err(), "{bad:?} accepted");
        }
    }
}

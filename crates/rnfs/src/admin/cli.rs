//! `rnfs admin`: change a running server through its admin socket.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use rnfs_server::metrics::ClientSnapshot;

use super::client::{AdminClient, AdminError};
use super::protocol::{
    AccessName, BackendName, DrainReply, ExportChangeReply, ExportRow, ExportSpec, ReloadReply,
    Request, SquashName, ThreadsReply,
};
use crate::stats::{clients_table, print_table};

pub(crate) const ADMIN_ABOUT: &str = "\
Change a running `rnfs serve` through its admin socket: the service-thread count, \
the export table, a drain before maintenance. Every change takes effect at once \
and is checked first: a refused request changes nothing.

The admin socket is a Unix socket only its owner can use (mode 0600), by default \
/run/rnfs/admin.sock for a server run as root, else \
$XDG_RUNTIME_DIR/rnfs/admin.sock, else admin.sock in the server's state \
directory; `rnfs serve --admin-socket PATH` and --socket PATH here choose another. \
The protocol is one JSON object per line (`{\"cmd\":\"stats\"}`), answered by one \
line `{\"ok\":true,\"result\":...}` or `{\"ok\":false,\"error\":\"...\"}`, so \
`socat - UNIX-CONNECT:PATH` works too.

Exit status: 0 on success; 1 if the server cannot be reached or refuses the \
request (its message is printed); 2 for bad arguments.";

pub(crate) const ADMIN_EXAMPLES: &str = "\
Examples:
  rnfs admin threads                       show the thread count and bounds
  rnfs admin threads 16                    run exactly 16 service threads
  rnfs admin threads --min 4 --max 64      size the pool dynamically
  rnfs admin exports                       list the exports
  rnfs admin export add /srv/scratch --mount-path /scratch
  rnfs admin export add /srv/docs --ro --client 10.0.0.0/8
  rnfs admin export remove /scratch        clients of other exports are unaffected
  rnfs admin reload                        re-read --config (as SIGHUP does)
  rnfs admin clients                       clients, their calls and mounts
  rnfs admin drain --timeout 30            finish calls in flight, stop serving
  rnfs admin --socket /tmp/rnfs.sock exports";

/// Where the admin socket of a server on this host is by default.
pub(crate) const SOCKET_HELP: &str = "The server's admin socket. [default: \
/run/rnfs/admin.sock as root, else $XDG_RUNTIME_DIR/rnfs/admin.sock, else admin.sock \
in the default state directory]";

#[derive(Debug, Args)]
pub(crate) struct AdminArgs {
    #[command(subcommand)]
    command: AdminCommand,

    #[arg(long, global = true, value_name = "PATH", help = SOCKET_HELP)]
    socket: Option<PathBuf>,

    /// Print the server's answer as JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Show or change the number of service threads.
    #[command(long_about = THREADS_ABOUT)]
    Threads(ThreadsArgs),
    /// List the exports being served.
    Exports,
    /// Re-read the server's --config file, as SIGHUP does.
    #[command(long_about = RELOAD_ABOUT)]
    Reload,
    /// Add or remove an export while the server runs.
    #[command(subcommand)]
    Export(ExportCommand),
    /// List the clients: address, connections, calls, bytes and mounts.
    Clients,
    /// Finish the calls in flight, then stop serving.
    #[command(long_about = DRAIN_ABOUT)]
    Drain(DrainArgs),
}

const THREADS_ABOUT: &str = "\
Without arguments, show the service threads running now and the bounds. With N, \
run exactly N threads (at least one per scheduler pool). With --min and/or --max, \
size the pool dynamically between them: a thread is added when work finds none \
idle, and an idle thread above the minimum retires after the server's \
--idle-timeout. Surplus threads exit as soon as they finish their current call.";

const RELOAD_ABOUT: &str = "\
Re-read the server's --config file and swap the export table, as SIGHUP does. \
Exports that keep their id, path and backend keep their clients and file handles. \
A file that does not parse, or describes an unusable table, changes nothing and \
is reported. Changes made with `rnfs admin export` are lost: the file wins.";

const DRAIN_ABOUT: &str = "\
Wait for the calls in flight to finish (at most --timeout seconds), then stop \
accepting connections, close the connections and stop the service threads. The \
process keeps running, and `rnfs stats` shows its final figures, until it gets \
SIGTERM. Prints how much work was in flight at the start and how much remained \
when the server stopped (0 unless the timeout passed).";

#[derive(Debug, Args)]
struct ThreadsArgs {
    /// Run exactly N service threads.
    #[arg(value_name = "N", value_parser = clap::value_parser!(u64).range(1..=rnfs_sched::MAX_THREADS as u64),
          conflicts_with_all = ["min", "max"])]
    count: Option<u64>,

    /// Never fewer than N threads (the other bound stays as it is).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=rnfs_sched::MAX_THREADS as u64))]
    min: Option<u64>,

    /// Never more than N threads (the other bound stays as it is).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=rnfs_sched::MAX_THREADS as u64))]
    max: Option<u64>,
}

#[derive(Debug, Subcommand)]
enum ExportCommand {
    /// Export a directory (read-write unless --ro) until removed or reloaded.
    #[command(long_about = EXPORT_ADD_ABOUT)]
    Add(ExportAddArgs),
    /// Stop exporting MOUNT_PATH; clients of the other exports are unaffected.
    #[command(long_about = EXPORT_REMOVE_ABOUT)]
    Remove {
        /// The path clients mount (as `rnfs admin exports` lists it).
        #[arg(value_name = "MOUNT_PATH")]
        mount_path: String,
    },
}

const EXPORT_ADD_ABOUT: &str = "\
Add PATH to the live export table, read-write with root squashing unless the \
options say otherwise (as `rnfs serve EXPORT_DIR`). The other exports keep their \
clients and handles. When the server runs from --config FILE, the change is not \
written to FILE: the next reload or restart undoes it.";

const EXPORT_REMOVE_ABOUT: &str = "\
Remove the export mounted as MOUNT_PATH. Its clients get NFS3ERR_STALE on their \
next call and a new MNT fails; clients of the other exports are unaffected. The \
last export cannot be removed. When the server runs from --config FILE, the change \
is not written to FILE.";

#[derive(Debug, Args)]
struct ExportAddArgs {
    /// Directory on the server's host (relative to the current directory).
    #[arg(value_name = "PATH")]
    path: PathBuf,

    /// The path clients mount. [default: PATH's absolute path]
    #[arg(long, value_name = "PATH")]
    mount_path: Option<String>,

    /// Export read-only: every modifying call gets NFS3ERR_ROFS.
    #[arg(long, visible_alias = "read-only")]
    ro: bool,

    /// Handle prefix, stable across restarts. [default: a hash of the mount path]
    #[arg(long, value_name = "N")]
    id: Option<u32>,

    /// Where the files live: `local` (PATH itself) or `memory` (an empty
    /// in-memory file system; PATH only names the mount path).
    #[arg(long, value_enum, value_name = "KIND")]
    backend: Option<BackendName>,

    /// Whose identity is replaced by --anonuid/--anongid: root, all or none.
    #[arg(long, value_enum, value_name = "WHO")]
    squash: Option<SquashName>,

    /// uid that squashed callers get. [default: 65534]
    #[arg(long, value_name = "UID")]
    anonuid: Option<u32>,

    /// gid that squashed callers get. [default: 65534]
    #[arg(long, value_name = "GID")]
    anongid: Option<u32>,

    /// Allow only clients from this network (CIDR or one address); repeat for
    /// several. [default: everyone]
    #[arg(long = "client", value_name = "NET")]
    clients: Vec<String>,

    /// Refuse calls from source ports of 1024 and above.
    #[arg(long)]
    secure: bool,

    /// Seconds READDIRPLUS may answer an entry from attributes read earlier
    /// when no change was reported (see `rnfs serve --help`); 0 stats every
    /// entry. [default: 10]
    #[arg(long, value_name = "SECS")]
    attr_cache_max_age: Option<u32>,

    /// Reply to changes before they are on stable storage (exports(5)
    /// `async`; see `rnfs serve --help`). [default: sync]
    #[arg(long = "async")]
    async_: bool,
}

#[derive(Debug, Args)]
struct DrainArgs {
    /// Most seconds to wait for the calls in flight.
    #[arg(long, value_name = "SECS", default_value_t = 10.0,
          value_parser = parse_timeout)]
    timeout: f64,
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if t.is_finite() && (0.0..=3600.0).contains(&t) => Ok(t),
        Ok(_) => Err("must be between 0 and 3600".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The default admin socket of a server on this host: /run/rnfs/admin.sock
/// as root, else `$XDG_RUNTIME_DIR/rnfs/admin.sock`, else `admin.sock` in
/// `state_dir`.
pub(crate) fn default_socket_path(state_dir: &Path) -> PathBuf {
    if nix::unistd::geteuid().is_root() {
        return PathBuf::from("/run/rnfs/admin.sock");
    }
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("rnfs/admin.sock");
    }
    state_dir.join("admin.sock")
}

/// The socket a client command talks to: `--socket`, else the default of a
/// server using the default state directory.
pub(crate) fn client_socket_path(socket: Option<PathBuf>) -> PathBuf {
    socket.unwrap_or_else(|| default_socket_path(&crate::serve::default_state_dir()))
}

/// Prints `e` as coreutils would and returns exit status 1.
pub(crate) fn report(command: &str, e: &AdminError) -> ExitCode {
    match e {
        AdminError::Connect { .. } => eprintln!("rnfs: {e}"),
        _ => eprintln!("rnfs {command}: {e}"),
    }
    ExitCode::FAILURE
}

/// Runs `rnfs admin`.
pub(crate) fn run(args: AdminArgs) -> ExitCode {
    let path = client_socket_path(args.socket);
    match run_command(&path, args.command, args.json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => report("admin", &e),
    }
}

fn run_command(path: &Path, command: AdminCommand, json: bool) -> Result<(), AdminError> {
    let request = match command {
        AdminCommand::Threads(t) => Request::Threads {
            set: t.count,
            min: t.min,
            max: t.max,
        },
        AdminCommand::Exports => Request::Exports,
        AdminCommand::Reload => Request::Reload,
        AdminCommand::Export(ExportCommand::Add(a)) => Request::ExportAdd(export_spec(a)),
        AdminCommand::Export(ExportCommand::Remove { mount_path }) => {
            Request::ExportRemove { mount_path }
        }
        AdminCommand::Clients => Request::Clients,
        AdminCommand::Drain(d) => Request::Drain {
            timeout_secs: Some(d.timeout),
        },
    };
    let mut client = AdminClient::connect(path)?;
    let value = client.request(&request)?;
    if json {
        println!("{value}");
        return Ok(());
    }
    let decode = |e: serde_json::Error| AdminError::BadReply(e.to_string());
    match request {
        Request::Threads { .. } => {
            let t: ThreadsReply = serde_json::from_value(value).map_err(decode)?;
            print_threads(&t);
        }
        Request::Exports => {
            let rows: Vec<ExportRow> = serde_json::from_value(value).map_err(decode)?;
            print_exports(&rows);
        }
        Request::Reload => {
            let r: ReloadReply = serde_json::from_value(value).map_err(decode)?;
            print_reload(&r);
        }
        Request::ExportAdd(_) | Request::ExportRemove { .. } => {
            let added = matches!(request, Request::ExportAdd(_));
            let r: ExportChangeReply = serde_json::from_value(value).map_err(decode)?;
            let e = &r.export;
            println!(
                "{} {} (id {}, {}, {} {}); {} export(s) now",
                if added { "added" } else { "removed" },
                e.mount_path,
                e.id,
                access_flags(e),
                e.backend,
                e.path,
                r.exports
            );
            if let Some(note) = r.note {
                eprintln!("rnfs admin: note: {note}");
            }
        }
        Request::Clients => {
            let rows: Vec<ClientSnapshot> = serde_json::from_value(value).map_err(decode)?;
            print_clients(&rows);
        }
        Request::Drain { .. } => {
            let d: DrainReply = serde_json::from_value(value).map_err(decode)?;
            if d.stopped_now {
                println!(
                    "drained in {:.2}s: {} in flight at the start, {} remaining; the server \
                     no longer serves (stop it with SIGTERM)",
                    d.waited_secs, d.in_flight, d.remaining
                );
            } else {
                println!("already drained");
            }
        }
        Request::Stats => println!("{value}"),
    }
    Ok(())
}

fn export_spec(a: ExportAddArgs) -> ExportSpec {
    // The server has its own working directory: send the path absolute (if the
    // current directory is gone, the server says the path is not absolute).
    let path = std::path::absolute(&a.path).unwrap_or(a.path);
    ExportSpec {
        path,
        mount_path: a.mount_path,
        id: a.id,
        backend: a.backend,
        access: Some(if a.ro { AccessName::Ro } else { AccessName::Rw }),
        squash: a.squash,
        anonuid: a.anonuid,
        anongid: a.anongid,
        // No --client: the key is left out (everyone); an empty list is refused.
        clients: (!a.clients.is_empty()).then_some(a.clients),
        secure: a.secure,
        attr_cache_max_age: a.attr_cache_max_age,
        async_: a.async_,
    }
}

fn print_threads(t: &ThreadsReply) {
    let bounds = if t.min == t.max {
        format!("fixed at {}", t.min)
    } else {
        format!("min {}, max {}", t.min, t.max)
    };
    println!(
        "{} service thread(s) running ({bounds}; {} pool(s))",
        t.threads, t.pools
    );
}

/// `rw`, `ro`, with `,async` and `,secure` when set (exports(5) style).
fn access_flags(e: &ExportRow) -> String {
    let mut flags = e.access.to_string();
    if !e.sync {
        flags.push_str(",async");
    }
    if e.secure {
        flags.push_str(",secure");
    }
    flags
}

fn print_exports(rows: &[ExportRow]) {
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|e| {
            vec![
                e.mount_path.clone(),
                e.id.to_string(),
                access_flags(e),
                e.backend.to_string(),
                e.squash.to_string(),
                if e.clients.is_empty() {
                    "*".into()
                } else {
                    e.clients.join(",")
                },
                e.path.clone(),
            ]
        })
        .collect();
    print_table(
        &[
            "MOUNT PATH",
            "ID",
            "ACCESS",
            "BACKEND",
            "SQUASH",
            "CLIENTS",
            "PATH",
        ],
        &[false, true, false, false, false, false, false],
        &table,
    );
}

fn print_reload(r: &ReloadReply) {
    let mut parts = Vec::new();
    for (what, paths) in [
        ("added", &r.added),
        ("removed", &r.removed),
        ("changed", &r.changed),
    ] {
        if !paths.is_empty() {
            parts.push(format!("{what} {}", paths.join(", ")));
        }
    }
    let changes = if parts.is_empty() {
        "no change".to_owned()
    } else {
        parts.join("; ")
    };
    println!("reloaded {}: {} export(s), {changes}", r.config, r.exports);
    if let Some(note) = &r.note {
        eprintln!("rnfs admin: note: {note}");
    }
}

fn print_clients(rows: &[ClientSnapshot]) {
    if rows.is_empty() {
        println!("no clients");
        return;
    }
    print!("{}", clients_table(rows));
}

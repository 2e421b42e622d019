//! `rnfs serve`: run the server until SIGINT or SIGTERM.

use std::ffi::{OsStr, OsString};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, ValueEnum};
use nix::sys::signal::{SigSet, Signal};
use rnfs_sched::{Config, Policy, PoolMode};
use rnfs_server::metrics::{Metrics, MetricsConfig};
use rnfs_server::nfs::exports::{
    Access, BackendKind, Export, ServerSection, Squash, ANON_ID, DEFAULT_ATTR_CACHE_MAX_AGE,
};
use rnfs_server::nfs::{ConfigFile, ExportConfig, Exports, HandleKey};
use rnfs_server::portmap::{
    register_with_rpcbind, tcp_mappings, unregister_from_rpcbind, Mapping, PortRegistry,
    PortmapService, RpcbindEndpoint, PMAP_PORT, PMAP_PROGRAM,
};
use rnfs_server::services::{MOUNT_PROGRAM, NFS_PROGRAM};
use rnfs_server::{Limits, Server, ServerConfig, NFS_PORT};

use crate::admin::cli::default_socket_path;
use crate::admin::control::Control;
use crate::admin::socket::{AdminSocket, BoundSocket, SocketError};
use crate::Failure;

pub(crate) const SERVE_EXAMPLES: &str = "\
Examples:
  rnfs serve ~/share                        # as a user: 0.0.0.0:20490, calls run as you
  rnfs serve /srv/data --listen 127.0.0.1:2049 --client 127.0.0.0/8
  rnfs serve /srv/data --squash none --client 192.168.1.0/24   # trusted clients' root
  rnfs serve /srv/data --pool-mode percpu   # one pool per CPU, threads pinned
  rnfs serve --config /etc/rnfs/rnfs.toml   # several exports; SIGHUP reloads

A configuration file (TOML; each export is an [[export]] table):
  [server]
  state_dir = \"/var/lib/rnfs\"

  [[export]]
  path = \"/srv/data\"            # directory on this host
  mount_path = \"/data\"          # clients: mount -t nfs server:/data /mnt
  id = 1                        # part of every file handle: never reuse one
  access = \"rw\"                 # \"ro\" is the default, as in exports(5)
  squash = \"root\"               # \"root\" (default), \"all\" or \"none\"
  clients = [\"192.168.1.0/24\"]  # absent: every host
  sync = true                   # commit changes before replying (default)
";

/// Listen port when not running as root: a user's server, which serves
/// every call as that user, stays off the system's NFS port (2049).
pub(crate) const UNPRIVILEGED_PORT: u16 = 20490;
/// Default total thread count, as knfsd's.
const DEFAULT_THREADS: u32 = 8;
/// Default maximum with dynamic sizing when only --min-threads is given.
const DEFAULT_MAX_THREADS: u32 = 64;

pub(crate) const SERVE_ABOUT: &str = "\
Serve EXPORT_DIR (or the exports of --config FILE) over NFSv3 and MOUNT v3 on TCP \
until SIGINT or SIGTERM. SIGHUP reloads --config FILE: exports that keep their id \
keep their clients and handles; each export added, removed or changed is logged \
(`export reloaded`).

Shutdown (SIGTERM or SIGINT): rnfs waits for a moment when no call is in flight \
(calls being served finish and are answered), then stops accepting, closes its \
connections and stops its threads; the writable local exports are flushed (syncfs, \
so UNSTABLE writes no COMMIT covered reach the disk), and rnfs exits with status 0. \
If that takes longer than --shutdown-timeout, rnfs logs a warning and exits with \
status 0 anyway: the stop was asked for and done, and a \
failure status would make systemd's Restart=on-failure start it again (keep \
TimeoutStopSec above --shutdown-timeout). A flush that fails (syncfs reports a \
write-back error not seen before) exits with status 1. Either way, the write \
verifier changes at the next start, so clients send again what no COMMIT covered. \
After a restart with the same --state-dir, clients' file handles stay valid.

A running server is watched with `rnfs stats` and changed with `rnfs admin` \
(threads, exports, reload, drain) through its admin socket (--admin-socket).

Clients mount EXPORT_DIR by its absolute path (or --mount-path), on the same port \
as NFS: `mount -t nfs -o vers=3,proto=tcp,port=P,mountport=P,mountproto=tcp,nolock \
host:/srv/data /mnt` (`nolock`: rnfs has no NLM lock manager, so locks stay local \
to each client). With the built-in port mapper (--portmap, as root) \
`mount -t nfs -o vers=3,nolock host:/srv/data /mnt` works.

EXPORT_DIR is exported read-write with root squashing (uid 0 becomes --anonuid); \
a config file's exports are read-only unless they say `access = \"rw\"`, as \
exports(5). Running as root, every call runs with the caller's uid, gid and groups, \
so the file system's own permissions apply; running as another user, every call \
runs as that user.

File handles are signed with a key kept in --state-dir, so they stay valid across \
restarts; deleting the key makes every client's handles stale.

Threads: --threads N runs a fixed N service threads in total (default 8, like \
knfsd, or one per pool where --pool-mode makes more pools). --min-threads/--max-threads instead size the pool dynamically: a thread is \
added when work arrives and none is idle, and an idle thread above the minimum \
retires after --idle-timeout seconds.";

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Directory to export, read-write (see --read-only).
    #[arg(value_name = "EXPORT_DIR", value_parser = parse_export_dir,
          required_unless_present = "config")]
    export_dir: Option<PathBuf>,

    /// Serve the exports of this TOML file instead of EXPORT_DIR (format:
    /// `[[export]]` tables with path, mount_path, id, backend, access, squash,
    /// anonuid, anongid, clients, secure, attr_cache_max_age, sync; every key and
    /// its default in docs/operations.md, an example in dist/rnfs.toml).
    /// SIGHUP reloads it.
    #[arg(long, short = 'c', value_name = "FILE", conflicts_with_all = [
        "export_dir", "read_only", "squash", "anonuid", "anongid", "clients", "secure",
        "backend", "mount_path", "attr_cache_max_age", "async_"])]
    config: Option<PathBuf>,

    /// Export EXPORT_DIR read-only: every modifying call gets NFS3ERR_ROFS.
    #[arg(long, visible_alias = "ro")]
    read_only: bool,

    /// Whose identity is replaced by --anonuid/--anongid: root (uid and gid 0,
    /// exports(5) root_squash), all, or none (no_root_squash).
    #[arg(long, value_enum, value_name = "WHO", default_value_t = SquashArg::Root)]
    squash: SquashArg,

    /// uid that squashed callers get.
    #[arg(long, value_name = "UID", default_value_t = ANON_ID)]
    anonuid: u32,

    /// gid that squashed callers get.
    #[arg(long, value_name = "GID", default_value_t = ANON_ID)]
    anongid: u32,

    /// Allow only clients from this network (CIDR such as 10.0.0.0/8, or one
    /// address); repeat for several. [default: everyone]
    #[arg(long = "client", value_name = "NET")]
    clients: Vec<String>,

    /// Refuse calls from source ports of 1024 and above (exports(5) `secure`).
    #[arg(long)]
    secure: bool,

    /// Where exported files live: `local` (EXPORT_DIR itself) or `memory` (an
    /// empty in-memory file system, for tests and benchmarks; EXPORT_DIR only
    /// names the mount path).
    #[arg(long, value_enum, value_name = "KIND", default_value_t = BackendArg::Local)]
    backend: BackendArg,

    /// How long, in seconds, READDIRPLUS may answer an entry from attributes
    /// it read earlier. Changes the kernel reports (any write, truncate,
    /// chmod, chown, utimes, rename or unlink in the directory, by any
    /// process) and rnfs's own changes show at once whatever this is; it
    /// bounds what the kernel does not report: writes through shared
    /// mappings, new hard links made in other directories, access times.
    /// 0 stats every entry, as knfsd does.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_ATTR_CACHE_MAX_AGE)]
    attr_cache_max_age: u32,

    /// Reply to CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME, LINK
    /// and SETATTR before their change is on stable storage (exports(5)
    /// `async`). Faster for metadata-heavy work (untar, compiles), but a
    /// server crash or power loss may lose changes clients were told are
    /// done, and they will not resend them. By default (`sync`) each such
    /// change is committed (`fsync` of the directory or file) first, as
    /// RFC 1813 asks. Data written with UNSTABLE WRITEs is unaffected: it
    /// is committed by the client's COMMIT either way.
    #[arg(long = "async")]
    async_: bool,

    /// The path clients mount. [default: EXPORT_DIR's absolute path]
    #[arg(long, value_name = "PATH")]
    mount_path: Option<String>,

    /// Also serve the port mapper (portmap v2, rpcbind v3/v4) on TCP port 111,
    /// listing rnfs's programs, for hosts without rpcbind: then a plain
    /// `mount -t nfs host:/dir /mnt` finds the ports by itself. Needs root.
    #[arg(long, conflicts_with = "register")]
    portmap: bool,

    /// Register NFS v3 and MOUNT v1-v3 with the host's running rpcbind at start
    /// (unregister at shutdown), as rpc.mountd and knfsd do.
    #[arg(long)]
    register: bool,

    /// Directory for the handle-signing key (and for the admin socket of an
    /// unprivileged server when $XDG_RUNTIME_DIR is unset; see
    /// --admin-socket). [default: $STATE_DIRECTORY (set
    /// by systemd's StateDirectory=), unless a key is already in the next
    /// one and none there; else /var/lib/rnfs as root, else
    /// $XDG_STATE_HOME/rnfs or ~/.local/state/rnfs]
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,

    /// Address to listen on; repeat for several. IPv6 addresses are bound
    /// IPv6-only, so `0.0.0.0:P` and `[::]:P` can be combined. [default:
    /// 0.0.0.0:2049 as root, else 0.0.0.0:20490: a server run by a user serves
    /// every call as that user, and stays off the system's NFS port]. A port
    /// alone means 0.0.0.0:PORT; host names are not resolved.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen)]
    listen: Vec<SocketAddr>,

    /// Run exactly N service threads in total, spread over the pools; at
    /// least one per pool. [default: 8, or one per pool where there are more]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..),
          conflicts_with_all = ["min_threads", "max_threads"])]
    threads: Option<u32>,

    /// Size the thread pool dynamically, never below N threads. [default: one
    /// per pool when --max-threads is given]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    min_threads: Option<u32>,

    /// Size the thread pool dynamically, never above N threads. [default, when
    /// only --min-threads is given: 64, or --min-threads if that is larger]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_threads: Option<u32>,

    /// How service threads are split into pools (each pool has its own queue,
    /// threads and poller; pools do not steal work from each other).
    #[arg(long, value_enum, value_name = "MODE", default_value_t = PoolModeArg::Global)]
    pool_mode: PoolModeArg,

    /// How a connection with data finds a service thread.
    #[arg(long = "sched", value_enum, value_name = "POLICY", default_value_t = PolicyArg::Lwq)]
    sched: PolicyArg,

    /// Most threads per pool woken but not yet running (1 = one waker at a
    /// time). Above 1, lwq wakes another thread only while more calls are
    /// queued than threads already waking for them.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_waking: u32,

    /// Most open connections; beyond it new connections are closed at once.
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT_MAX_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64,

    /// Close a connection that carried no call for this many seconds (with
    /// nothing in flight), as knfsd does after 6 minutes: a client gone
    /// without a goodbye gives its slot back, and a live one reconnects on
    /// its next call. Checked once a period, so a quiet connection goes after
    /// one to two periods. 0: never.
    #[arg(long, value_name = "SECS",
          default_value_t = Limits::DEFAULT_CONN_IDLE_TIMEOUT.as_secs())]
    conn_idle_timeout: u64,

    /// Most calls per connection read but not yet answered; at the limit the
    /// connection is not read until a reply goes out (back-pressure).
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT_MAX_IN_FLIGHT_PER_CONN,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_inflight_per_conn: u32,

    /// Most bytes of replies per connection waiting for the client to read them;
    /// above it the connection is not read until a reply goes out
    /// (back-pressure: a client pipelining large READs it never reads holds
    /// bounded memory).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::DEFAULT_MAX_OUTPUT_PER_CONN as u64)]
    max_output_per_conn: u64,

    /// Reply coalescing: while a connection's next call is already received and
    /// is a quick one (NULL, GETATTR, LOOKUP, ACCESS, READ, READLINK, FSSTAT,
    /// FSINFO, PATHCONF; a READ whose data is not in the page cache first sends
    /// what was held for it), a finished reply is held to leave in one write with that call's
    /// reply; so is a WRITE's reply while the next call is a WRITE, unless buffered
    /// writes stalled lately. Holding stops once the oldest held reply is this many
    /// microseconds old. A reply thus waits at most this long plus one quick call's
    /// turn, never for storage (a call that must wait for it first sends what was
    /// held), and pipelining clients get several replies per system call. 0 sends
    /// every reply at once.
    #[arg(long, value_name = "MICROSECONDS",
          default_value_t = Limits::DEFAULT_MAX_REPLY_HOLD.as_micros() as u64)]
    max_reply_hold: u64,

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

    /// The admin socket that `rnfs stats` and `rnfs admin` use (a Unix socket,
    /// mode 0600, its directory created if missing), or `none`. A socket left by
    /// a server that died is replaced; one a running server answers on is an
    /// error. When the default is in use, the server runs without one (with a
    /// warning). [default: /run/rnfs/admin.sock as root, else
    /// $XDG_RUNTIME_DIR/rnfs/admin.sock, else admin.sock in the state directory]
    #[arg(long, value_name = "PATH")]
    admin_socket: Option<PathBuf>,

    /// Serve Prometheus metrics at http://ADDR/metrics, a live dashboard at
    /// http://ADDR/ and the statistics as JSON at http://ADDR/api/stats (for
    /// example 127.0.0.1:9400). No authentication: keep it on a trusted address.
    /// [default: off]
    #[arg(long, value_name = "ADDR:PORT")]
    metrics: Option<SocketAddr>,

    /// Log a warning for every call that takes longer than this many
    /// milliseconds from its record being read to its reply being sent.
    /// [default: off]
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    slow_call_ms: Option<u64>,

    /// On SIGTERM or SIGINT, wait at most this many seconds for the calls in
    /// flight and the flush of the exports before exiting anyway.
    #[arg(long, value_name = "SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    shutdown_timeout: u64,

    /// Log filter: a level (off, error, warn, info, debug, trace), or
    /// comma-separated TARGET=LEVEL directives such as `rnfs_server=debug`,
    /// which raise or lower one part and leave the rest at `info` unless a
    /// bare level is also given (`warn,rnfs_server::nfs=debug`). Overrides
    /// RUST_LOG. [default: info]
    #[arg(long, value_name = "LEVEL", value_parser = crate::parse_log_filter)]
    pub(crate) log: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SquashArg {
    /// uid 0 and gid 0 become the anonymous ids (root_squash).
    Root,
    /// Every caller becomes the anonymous ids (all_squash).
    All,
    /// Identities are used as sent (no_root_squash).
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendArg {
    /// The host directory.
    Local,
    /// An in-memory file system, empty at start.
    Memory,
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
    /// As lwq, but the waker hands the connection to the thread it wakes: no
    /// wasted wake-ups, more wake-ups in all (measured in docs/benchmarks.md).
    LwqHandoff,
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
            PolicyArg::LwqHandoff => Policy::LwqHandoff,
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
        let pool_mode = PoolMode::from(self.pool_mode);
        let pools = u32::try_from(pool_mode.pools()).unwrap_or(u32::MAX);
        let (min, initial, max) = thread_counts(
            self.threads,
            self.min_threads,
            self.max_threads,
            pools,
            pool_mode,
        )
        .map_err(|msg| Failure::Usage {
            subcommand: "serve",
            msg,
        })?;
        sched.min_threads = min as usize;
        sched.initial_threads = initial as usize;
        sched.max_threads = max as usize;

        let mut config = ServerConfig::new(self.listen());
        config.sched = sched;
        config.limits.max_connections = usize::try_from(self.max_connections).unwrap_or(usize::MAX);
        config.limits.max_in_flight_per_conn = self.max_inflight_per_conn;
        config.limits.max_output_per_conn =
            usize::try_from(self.max_output_per_conn).unwrap_or(usize::MAX);
        config.limits.max_reply_hold = Duration::from_micros(self.max_reply_hold);
        config.limits.max_record_size = usize::try_from(self.max_record_size).unwrap_or(usize::MAX);
        config.limits.conn_idle_timeout =
            (self.conn_idle_timeout > 0).then(|| Duration::from_secs(self.conn_idle_timeout));
        Ok(config)
    }
}

/// `--listen`: `ADDR:PORT`, `[V6ADDR]:PORT`, or a port alone (all IPv4
/// addresses).
fn parse_listen(arg: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = arg.parse::<u16>() {
        return Ok(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)));
    }
    arg.parse().map_err(|_| {
        "expected ADDR:PORT with a numeric address, e.g. 0.0.0.0:2049, \
         127.0.0.1:20490 or [::]:2049 (host names are not resolved)"
            .to_owned()
    })
}

/// Minimum, initial and maximum service threads from `--threads`,
/// `--min-threads` and `--max-threads` for `pools` pools. Every pool needs
/// a thread, so the defaults are at least one per pool, and a count given
/// below that is refused with the number to give.
fn thread_counts(
    threads: Option<u32>,
    min: Option<u32>,
    max: Option<u32>,
    pools: u32,
    pool_mode: PoolMode,
) -> Result<(u32, u32, u32), String> {
    let too_few = |option: &str, n: u32| {
        format!(
            "{option} {n} is fewer than the {pools} pools of --pool-mode {pool_mode} (every \
             pool needs a thread): give {option} {pools} or more, or --pool-mode global"
        )
    };
    match (threads, min, max) {
        (Some(n), _, _) if n < pools => Err(too_few("--threads", n)),
        (Some(n), _, _) => Ok((n, n, n)),
        (None, None, None) => {
            let n = DEFAULT_THREADS.max(pools);
            Ok((n, n, n))
        }
        (None, _, Some(max)) if max < pools => Err(too_few("--max-threads", max)),
        (None, Some(min), _) if min < pools => Err(too_few("--min-threads", min)),
        (None, min, max) => {
            let min = min.unwrap_or(pools);
            let max = max.unwrap_or(DEFAULT_MAX_THREADS.max(min));
            if min > max {
                return Err(format!(
                    "--min-threads ({min}) is larger than --max-threads ({max})"
                ));
            }
            Ok((min, min, max))
        }
    }
}

impl ServeArgs {
    /// The exports to serve and the state directory from the config file, if any.
    fn exports(&self) -> Result<(Vec<ExportConfig>, ServerSection), Failure> {
        if let Some(path) = &self.config {
            let file = ConfigFile::load(path).map_err(|e| anyhow::anyhow!(e))?;
            return Ok((file.exports, file.server));
        }
        let Some(dir) = &self.export_dir else {
            return Err(Failure::Usage {
                subcommand: "serve",
                msg: "give EXPORT_DIR or --config FILE".into(),
            });
        };
        let dir = std::fs::canonicalize(dir)
            .with_context(|| format!("cannot resolve {}", dir.display()))?;
        let mut c = ExportConfig::new(dir);
        c.mount_path = self.mount_path.clone();
        c.access = if self.read_only {
            Access::Ro
        } else {
            Access::Rw
        };
        c.squash = match self.squash {
            SquashArg::Root => Squash::Root,
            SquashArg::All => Squash::All,
            SquashArg::None => Squash::None,
        };
        c.anonuid = self.anonuid;
        c.anongid = self.anongid;
        // No --client: everyone (an empty list would be refused).
        c.clients = (!self.clients.is_empty()).then(|| self.clients.clone());
        c.secure = self.secure;
        c.attr_cache_max_age = self.attr_cache_max_age;
        c.sync = !self.async_;
        c.backend = match self.backend {
            BackendArg::Local => BackendKind::Local,
            BackendArg::Memory => BackendKind::Memory,
        };
        Ok((vec![c], ServerSection::default()))
    }
}

/// Warns about an export that is read-write for every host when the server
/// listens on an address other hosts can reach (at start, and when a reload
/// or `rnfs admin export` adds or changes it).
pub(crate) fn warn_if_open_to_the_network(e: &Export, listen: &[SocketAddr]) {
    let reachable = listen.iter().filter(|a| !a.ip().is_loopback());
    let addrs: Vec<String> = reachable.map(ToString::to_string).collect();
    if !addrs.is_empty() && !e.read_only() && e.config.clients.is_none() {
        tracing::warn!(
            "export {} is read-write for any host that can reach {}; \
             restrict it with `clients` (--client NET), or listen on 127.0.0.1",
            e.mount_path,
            addrs.join(" ")
        );
    }
}

/// What to do when a port cannot be had.
fn start_hint(e: &rnfs_server::ServerError) -> &'static str {
    match e {
        rnfs_server::ServerError::Bind { addr, source } if addr.port() == PMAP_PORT => {
            match source.kind() {
                std::io::ErrorKind::PermissionDenied => {
                    " (--portmap needs root for port 111; without it, clients give \
                     port= and mountport=)"
                }
                std::io::ErrorKind::AddrInUse => {
                    " (a port mapper, rpcbind, already runs here: use --register \
                     instead of --portmap)"
                }
                _ => "",
            }
        }
        rnfs_server::ServerError::Bind { source, .. }
            if source.kind() == std::io::ErrorKind::AddrInUse =>
        {
            " (another NFS server holds the port, e.g. the kernel's nfsd or another \
             rnfs serve: stop it, or choose another port with --listen)"
        }
        rnfs_server::ServerError::Bind { addr, source }
            if source.kind() == std::io::ErrorKind::PermissionDenied && addr.port() < 1024 =>
        {
            " (ports below 1024 need root or CAP_NET_BIND_SERVICE: choose a port \
             above 1023 with --listen and give clients port= and mountport=)"
        }
        _ => "",
    }
}

/// The state directory of the user running this command, as a server
/// started by them would have it by default (systemd's `$STATE_DIRECTORY`
/// aside): where a client command looks for the default admin socket.
pub(crate) fn default_state_dir() -> PathBuf {
    user_state_dir(
        |name| std::env::var_os(name),
        nix::unistd::geteuid().is_root(),
    )
    .0
}

/// `/var/lib/rnfs` for root, else the XDG state directory (`$XDG_STATE_HOME`
/// or `~/.local/state`, absolute paths only, as the XDG specification has
/// it) plus `rnfs`; `true` with a directory under the temporary directory,
/// which is often emptied at boot (no better place was known).
fn user_state_dir(env: impl Fn(&str) -> Option<OsString>, root: bool) -> (PathBuf, bool) {
    if root {
        return (PathBuf::from("/var/lib/rnfs"), false);
    }
    let absolute = |name| env(name).map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(dir) = absolute("XDG_STATE_HOME") {
        return (dir.join("rnfs"), false);
    }
    match absolute("HOME") {
        Some(home) => (home.join(".local/state/rnfs"), false),
        None => (std::env::temp_dir().join("rnfs-state"), true),
    }
}

/// The state directory that earlier versions took from a relative
/// `$XDG_STATE_HOME` or `$HOME` (relative to the working directory), which
/// [`user_state_dir`] now ignores as the XDG spec asks, if a handle key is
/// there: starting with a new key elsewhere would make every client's
/// handles stale without a word.
fn ignored_relative_key(
    env: impl Fn(&str) -> Option<OsString>,
    root: bool,
    has_key: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    if root {
        return None;
    }
    let set = |name| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let old = match set("XDG_STATE_HOME") {
        Some(xdg) => xdg.join("rnfs"),
        None => set("HOME")?.join(".local/state/rnfs"),
    };
    (old.is_relative() && has_key(&old)).then_some(old)
}

/// systemd's `$STATE_DIRECTORY`, set by a unit's `StateDirectory=`: a
/// colon-separated list, of which the first absolute entry is ours.
fn systemd_state_dir(env: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let list = env("STATE_DIRECTORY")?;
    list.as_bytes()
        .split(|&b| b == b':')
        .map(|dir| Path::new(OsStr::from_bytes(dir)))
        .find(|dir| dir.is_absolute())
        .map(Path::to_path_buf)
}

/// Where the handle key lives when neither `--state-dir` nor the
/// configuration says: systemd's `$STATE_DIRECTORY` first (the unit may run
/// as a user of its own, or name another directory), else
/// [`user_state_dir`]. A key already in the user's directory and none in
/// systemd's keeps the user's: it is what the server used before it read
/// `$STATE_DIRECTORY`, and a new key would make every client's handles
/// stale. `has_key` says whether a directory holds a key.
fn default_key_dir(
    env: impl Fn(&str) -> Option<OsString>,
    root: bool,
    has_key: impl Fn(&Path) -> bool,
) -> KeyDir {
    let (user, temporary) = user_state_dir(&env, root);
    match systemd_state_dir(&env) {
        Some(systemd) if !has_key(&systemd) && has_key(&user) => KeyDir::KeptUser { user, systemd },
        Some(systemd) => KeyDir::Systemd(systemd),
        None if temporary => KeyDir::Temporary(user),
        None => KeyDir::User(user),
    }
}

/// What [`default_key_dir`] chose.
#[derive(Debug, PartialEq, Eq)]
enum KeyDir {
    Systemd(PathBuf),
    User(PathBuf),
    /// The user's, though systemd names another: a key is there.
    KeptUser {
        user: PathBuf,
        systemd: PathBuf,
    },
    /// Under the temporary directory.
    Temporary(PathBuf),
}

impl KeyDir {
    fn path(&self) -> &Path {
        match self {
            KeyDir::Systemd(p) | KeyDir::User(p) | KeyDir::Temporary(p) => p,
            KeyDir::KeptUser { user, .. } => user,
        }
    }
}

/// The admin socket to serve, if any: `--admin-socket PATH` must work; the
/// default is skipped with a warning when it cannot be used (another server
/// holds it, or its directory cannot be created).
fn bind_admin_socket(arg: Option<&Path>, state_dir: &Path) -> Result<Option<BoundSocket>, Failure> {
    match arg {
        Some(p) if p.as_os_str() == "none" => Ok(None),
        Some(p) => Ok(Some(BoundSocket::bind(p).map_err(|e| anyhow::anyhow!(e))?)),
        None => {
            let path = default_socket_path(state_dir);
            match BoundSocket::bind(&path) {
                Ok(bound) => Ok(Some(bound)),
                Err(e @ SocketError::InUse(_)) => {
                    tracing::warn!("{e}: running without an admin socket (see --admin-socket)");
                    Ok(None)
                }
                Err(e) => {
                    tracing::warn!("running without an admin socket: {e}");
                    Ok(None)
                }
            }
        }
    }
}

/// Starts the server, waits for SIGINT or SIGTERM, shuts down gracefully.
/// SIGHUP reloads the configuration file.
pub(crate) fn run(args: ServeArgs) -> Result<(), Failure> {
    let mut config = args.server_config()?;
    crate::raise_fd_limit();
    let (export_configs, server_section) = args.exports()?;
    let explicit = args.state_dir.clone().or(server_section.state_dir.clone());
    let state_dir = match &explicit {
        Some(dir) => dir.clone(),
        None => {
            // A key that cannot be looked for counts as there: loading it
            // then fails with the reason, rather than a new key being made.
            let has_key = |dir: &Path| dir.join(HandleKey::FILE_NAME).try_exists().unwrap_or(true);
            let env = |name: &str| std::env::var_os(name);
            let root = nix::unistd::geteuid().is_root();
            let chosen = default_key_dir(env, root, has_key);
            if let Some(old) =
                ignored_relative_key(env, root, has_key).filter(|_| !has_key(chosen.path()))
            {
                return Err(anyhow::anyhow!(
                    "a handle key is in {}, from a relative $XDG_STATE_HOME or $HOME, \
                     which rnfs no longer follows, and none is in {}: give --state-dir \
                     with {}'s absolute path to keep clients' file handles valid",
                    old.display(),
                    chosen.path().display(),
                    old.display()
                )
                .into());
            }
            match &chosen {
                KeyDir::Temporary(dir) => tracing::warn!(
                    "no $HOME, $XDG_STATE_HOME or $STATE_DIRECTORY: the handle key goes \
                     in {}, which is often emptied at boot, and then every client's \
                     file handles go stale; give --state-dir",
                    dir.display()
                ),
                KeyDir::KeptUser { user, systemd } => tracing::info!(
                    "keeping the handle key in {} rather than $STATE_DIRECTORY ({}): \
                     a new key would make every client's file handles stale \
                     (move {} there to use it)",
                    user.display(),
                    systemd.display(),
                    HandleKey::FILE_NAME
                ),
                KeyDir::Systemd(_) | KeyDir::User(_) => {}
            }
            chosen.path().to_path_buf()
        }
    };
    // The admin socket's default does not follow $STATE_DIRECTORY: client
    // commands, run from a shell, look where the user's server would be.
    let socket_dir = explicit.unwrap_or_else(default_state_dir);
    let key = HandleKey::load_or_create(&state_dir).context("cannot load the handle key")?;
    let exports = Arc::new(
        Exports::new(&export_configs, crate::backends::opener()?).map_err(|e| {
            match &args.config {
                Some(file) => anyhow::anyhow!("{}: {e}", file.display()),
                None => anyhow::anyhow!(e),
            }
        })?,
    );
    // Before any port is opened: a second server on the same socket stops here.
    let admin_socket = bind_admin_socket(args.admin_socket.as_deref(), &socket_dir)?;
    let mut metrics_config = MetricsConfig::default();
    metrics_config.slow_call = args.slow_call_ms.map(Duration::from_millis);
    let metrics = Arc::new(Metrics::new(metrics_config));
    let dispatcher = rnfs_server::nfs::dispatcher_with_metrics(
        Arc::clone(&exports),
        key,
        Some(Arc::clone(&metrics)),
    )
    .context("cannot register the NFS services")?;

    // Block the signals before any thread starts: every thread inherits the mask,
    // so they stay pending until `wait` below takes them (no handler, no unsafe).
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGHUP);
    signals
        .thread_block()
        .context("cannot block SIGINT/SIGTERM/SIGHUP")?;

    config.sched.name = "rnfs-svc".into();
    config.drc = Some(rnfs_server::nfs::drc_config());
    config.metrics = Some(metrics);
    let mut dispatcher = dispatcher;
    let nfs_listen = config.listen.clone();
    let mappings: Vec<Mapping> = [
        tcp_mappings(NFS_PROGRAM, 3..=3, &nfs_listen),
        tcp_mappings(MOUNT_PROGRAM, 1..=3, &nfs_listen),
    ]
    .concat();
    if args.portmap {
        let pmap_listen: Vec<SocketAddr> = nfs_listen
            .iter()
            .map(|a| SocketAddr::new(a.ip(), PMAP_PORT))
            .collect();
        let registry = Arc::new(PortRegistry::new());
        registry
            .set_all(mappings.clone())
            .and_then(|()| registry.set_all(tcp_mappings(PMAP_PROGRAM, 2..=4, &pmap_listen)))
            .map_err(|e| anyhow::anyhow!("port mapper: {e}"))?;
        dispatcher
            .register(Arc::new(PortmapService::new(registry)))
            .context("cannot register the port mapper")?;
        config.listen.extend(pmap_listen);
    }
    let server =
        Server::start_with_dispatcher(config.clone(), Arc::new(dispatcher)).map_err(|e| {
            let hint = start_hint(&e);
            anyhow::Error::new(e).context(format!("cannot start the server{hint}"))
        })?;
    if args.register {
        register_with_rpcbind(RpcbindEndpoint::system(), &mappings)
            .context("cannot register with rpcbind (is it running?)")?;
        tracing::info!("registered NFS and MOUNT with rpcbind");
    }
    let addrs = server
        .local_addrs()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ");
    let sched = &config.sched;
    let threads = if sched.min_threads == sched.max_threads {
        sched.max_threads.to_string()
    } else {
        format!("{}..={}", sched.min_threads, sched.max_threads)
    };
    tracing::info!(
        "serving on {addrs} (policy {}, pool mode {}, {} pool(s), {threads} threads)",
        sched.policy,
        sched.pool_mode,
        server.scheduler().pools(),
    );
    for e in exports.load().iter() {
        tracing::info!(
            "export {} -> {} ({}, {}{}{}, squash {}, clients {})",
            e.mount_path,
            e.config.path.display(),
            e.config.backend,
            e.config.access,
            if e.config.sync { "" } else { ", async" },
            if e.config.secure { ", secure" } else { "" },
            e.config.squash,
            match &e.config.clients {
                None => "everyone".to_owned(),
                Some(list) => list.join(","),
            }
        );
    }
    for e in exports.load().iter() {
        warn_if_open_to_the_network(e, &config.listen);
    }
    if !rnfs_vfs::identity::can_switch() {
        tracing::info!("not running as root: every call runs as this process's user");
    }

    let control = Arc::new(Control::new(
        server,
        exports,
        args.config.clone(),
        server_section,
        config.listen.clone(),
    ));
    let admin_socket: Option<AdminSocket> = match admin_socket {
        Some(bound) => {
            let path = bound.path().to_owned();
            let handler = Arc::clone(&control);
            let socket = bound
                .serve(Arc::new(move |request| handler.handle(request)))
                .map_err(|e| anyhow::anyhow!(e))?;
            tracing::info!("admin socket {}", path.display());
            Some(socket)
        }
        None => None,
    };
    let metrics_http = match args.metrics {
        Some(addr) => {
            let source = Arc::clone(&control);
            let http = rnfs_metrics::MetricsServer::start(
                addr,
                Arc::new(move || source.stats().unwrap_or_default()),
            )
            .context("cannot serve --metrics")?;
            Some(http)
        }
        None => None,
    };

    loop {
        let signal = signals.wait().context("waiting for a signal failed")?;
        if signal != Signal::SIGHUP {
            tracing::info!("{signal}: shutting down");
            break;
        }
        if args.config.is_none() {
            tracing::info!("SIGHUP: no --config file, nothing to reload");
            continue;
        }
        match control.reload() {
            Ok(r) => tracing::info!("SIGHUP: reloaded {} ({} exports)", r.config, r.exports),
            Err(e) => tracing::error!("SIGHUP: {e}"),
        }
    }
    let flushed = shutdown(&control, Duration::from_secs(args.shutdown_timeout));
    if args.register {
        if let Err(e) = unregister_from_rpcbind(RpcbindEndpoint::system(), &mappings) {
            tracing::warn!("cannot unregister from rpcbind: {e}");
        }
    }
    if let Some(socket) = admin_socket {
        socket.shutdown();
    }
    if let Some(http) = metrics_http {
        http.shutdown();
    }
    match flushed {
        Ok(()) => {
            tracing::info!("stopped");
            Ok(())
        }
        Err(e) => Err(Failure::Runtime(anyhow::anyhow!(e))),
    }
}

/// Graceful shutdown: drain (calls in flight finish), stop, flush. Runs on a
/// thread of its own so that a call that never finishes cannot hold the exit
/// past `timeout`; past it, logs a warning and returns `Ok` (see SERVE_ABOUT).
/// Only a failed flush is an error.
fn shutdown(control: &Arc<Control>, timeout: Duration) -> Result<(), String> {
    let start = Instant::now();
    let (done_tx, done_rx) = mpsc::channel();
    let worker = Arc::clone(control);
    let spawned = std::thread::Builder::new()
        .name("rnfs-shutdown".into())
        .spawn(move || {
            let drained = worker.drain(timeout);
            let flushed = worker.flush();
            let _ = done_tx.send((drained, flushed));
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the shutdown thread ({e}); stopping at once");
        control.drain(Duration::ZERO);
        return control.flush().map(|_| ());
    }
    match done_rx.recv_timeout(timeout + Duration::from_millis(500)) {
        Ok((drained, flushed)) => {
            if drained.remaining > 0 {
                tracing::warn!(
                    "--shutdown-timeout ({}s) passed with {} call(s) still in flight; they were \
                     cut off",
                    timeout.as_secs(),
                    drained.remaining
                );
            }
            match flushed {
                Ok(n) => {
                    tracing::info!(
                        "shut down in {:.3}s ({} in flight at SIGTERM, {n} file system(s) flushed)",
                        start.elapsed().as_secs_f64(),
                        drained.in_flight
                    );
                    Ok(())
                }
                Err(e) => {
                    tracing::error!("{e}");
                    Err(e)
                }
            }
        }
        Err(_) => {
            tracing::warn!(
                "shutdown did not finish within --shutdown-timeout ({}s): exiting with calls \
                 or the flush still running",
                timeout.as_secs()
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    fn no_key(_: &Path) -> bool {
        false
    }

    #[test]
    fn a_port_that_cannot_be_had_says_what_to_do() {
        let bind = |port: u16, kind: std::io::ErrorKind| rnfs_server::ServerError::Bind {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            source: kind.into(),
        };
        use std::io::ErrorKind::{AddrInUse, PermissionDenied};
        assert!(start_hint(&bind(2049, AddrInUse)).contains("nfsd"));
        assert!(start_hint(&bind(PMAP_PORT, AddrInUse)).contains("--register"));
        assert!(start_hint(&bind(900, PermissionDenied)).contains("CAP_NET_BIND_SERVICE"));
        assert!(start_hint(&bind(PMAP_PORT, PermissionDenied)).contains("port="));
        assert_eq!(start_hint(&bind(20490, PermissionDenied)), "");
    }

    /// The configuration shown in `rnfs serve --help` is one the server takes.
    #[test]
    fn the_help_configuration_parses() {
        let (_, example) = SERVE_EXAMPLES.split_once("table):\n").unwrap();
        let toml: String = example.lines().map(|l| format!("{}\n", l.trim())).collect();
        let file = ConfigFile::parse(&toml).unwrap();
        assert_eq!(file.exports.len(), 1);
        assert_eq!(file.exports[0].mount_path.as_deref(), Some("/data"));
        assert_eq!(file.server.state_dir, Some(PathBuf::from("/var/lib/rnfs")));
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(parse_listen("2049"), Ok("0.0.0.0:2049".parse().unwrap()));
        assert_eq!(
            parse_listen("[::1]:20490"),
            Ok("[::1]:20490".parse().unwrap())
        );
        assert!(parse_listen("localhost:2049")
            .unwrap_err()
            .contains("host names are not resolved"));
        assert!(parse_listen("0.0.0.0").is_err());
    }

    /// The default thread count serves every pool of a many-CPU machine,
    /// and a count below one per pool is refused with the one to give.
    #[test]
    fn every_pool_gets_a_thread() {
        let counts = |t, min, max, pools| thread_counts(t, min, max, pools, PoolMode::PerCpu);
        assert_eq!(counts(None, None, None, 2), Ok((8, 8, 8)));
        assert_eq!(counts(None, None, None, 16), Ok((16, 16, 16)));
        assert_eq!(counts(Some(4), None, None, 2), Ok((4, 4, 4)));
        let refused = counts(Some(8), None, None, 16).unwrap_err();
        assert!(refused.contains("give --threads 16 or more"), "{refused}");
        assert_eq!(counts(None, None, Some(32), 16), Ok((16, 16, 32)));
        assert_eq!(counts(None, Some(20), None, 16), Ok((20, 20, 64)));
        assert_eq!(counts(None, Some(100), None, 16), Ok((100, 100, 100)));
        assert!(counts(None, Some(4), None, 16)
            .unwrap_err()
            .contains("give --min-threads 16"));
        assert!(counts(None, None, Some(4), 16)
            .unwrap_err()
            .contains("give --max-threads 16"));
        assert!(counts(None, Some(40), Some(20), 16)
            .unwrap_err()
            .contains("is larger than"));
    }

    #[test]
    fn systemd_state_directory_comes_first() {
        let vars = [
            ("STATE_DIRECTORY", "/var/lib/rnfs-a:/var/lib/other"),
            ("HOME", "/home/u"),
        ];
        for root in [false, true] {
            assert_eq!(
                default_key_dir(env(&vars), root, no_key),
                KeyDir::Systemd(PathBuf::from("/var/lib/rnfs-a"))
            );
        }
        // Empty or relative entries are not taken.
        let vars = [("STATE_DIRECTORY", ":relative:/srv/state"), ("HOME", "/h")];
        assert_eq!(
            default_key_dir(env(&vars), false, no_key),
            KeyDir::Systemd(PathBuf::from("/srv/state"))
        );
        let vars = [("STATE_DIRECTORY", ""), ("HOME", "/h")];
        assert_eq!(
            default_key_dir(env(&vars), false, no_key),
            KeyDir::User(PathBuf::from("/h/.local/state/rnfs"))
        );
    }

    /// A key made where the server kept it before it read $STATE_DIRECTORY
    /// stays in use until one is in systemd's directory.
    #[test]
    fn an_existing_key_is_kept_over_state_directory() {
        let vars = [("STATE_DIRECTORY", "/var/lib/foo"), ("HOME", "/h")];
        let user = PathBuf::from("/h/.local/state/rnfs");
        let old_key_only = |dir: &Path| dir == user;
        assert_eq!(
            default_key_dir(env(&vars), false, old_key_only),
            KeyDir::KeptUser {
                user: user.clone(),
                systemd: PathBuf::from("/var/lib/foo")
            }
        );
        let both = |dir: &Path| dir == user || dir == Path::new("/var/lib/foo");
        assert_eq!(
            default_key_dir(env(&vars), false, both),
            KeyDir::Systemd(PathBuf::from("/var/lib/foo"))
        );
        let root_key = |dir: &Path| dir == Path::new("/var/lib/rnfs");
        assert_eq!(
            default_key_dir(env(&vars), true, root_key).path(),
            Path::new("/var/lib/rnfs")
        );
    }

    /// A key where a relative $XDG_STATE_HOME or $HOME used to put it is
    /// found, so that the server does not silently start with a new one.
    #[test]
    fn a_key_under_a_relative_state_home_is_found() {
        let any_key = |_: &Path| true;
        let vars = [("XDG_STATE_HOME", "state"), ("HOME", "/h")];
        assert_eq!(
            ignored_relative_key(env(&vars), false, any_key),
            Some(PathBuf::from("state/rnfs"))
        );
        assert_eq!(ignored_relative_key(env(&vars), false, no_key), None);
        assert_eq!(ignored_relative_key(env(&vars), true, any_key), None);
        let vars = [("HOME", "h")];
        assert_eq!(
            ignored_relative_key(env(&vars), false, any_key),
            Some(PathBuf::from("h/.local/state/rnfs"))
        );
        let vars = [("XDG_STATE_HOME", "/x"), ("HOME", "h")];
        assert_eq!(ignored_relative_key(env(&vars), false, any_key), None);
    }

    #[test]
    fn root_then_xdg_then_home_then_temporary() {
        let vars = [("XDG_STATE_HOME", "/x"), ("HOME", "/h")];
        assert_eq!(
            user_state_dir(env(&vars), true),
            (PathBuf::from("/var/lib/rnfs"), false)
        );
        assert_eq!(
            user_state_dir(env(&vars), false),
            (PathBuf::from("/x/rnfs"), false)
        );
        // Relative paths are ignored, as the XDG specification says.
        let vars = [("XDG_STATE_HOME", "x"), ("HOME", "/h")];
        assert_eq!(
            user_state_dir(env(&vars), false),
            (PathBuf::from("/h/.local/state/rnfs"), false)
        );
        assert!(matches!(
            default_key_dir(env(&[("HOME", "")]), false, no_key),
            KeyDir::Temporary(dir) if dir.starts_with(std::env::temp_dir())
        ));
        // The admin socket's default ignores $STATE_DIRECTORY.
        let vars = [("STATE_DIRECTORY", "/var/lib/foo"), ("HOME", "/h")];
        assert_eq!(
            user_state_dir(env(&vars), false).0,
            PathBuf::from("/h/.local/state/rnfs")
        );
    }
}

//! Exports: which directories are served, to whom, and with which identity rules.
//!
//! The configuration file is TOML, one `[[export]]` table per export:
//!
//! ```toml
//! [server]
//! state_dir = "/var/lib/rnfs"        # where the handle key lives
//!
//! [[export]]
//! path = "/srv/data"                 # directory on this host (required)
//! mount_path = "/data"               # what clients mount; default: `path`
//! id = 1                             # handle prefix; default: a hash of the
//!                                    # mount path, trailing slashes ignored
//! backend = "local"                  # or "memory" (contents vanish on exit)
//! access = "rw"                      # "ro" (the default, as exports(5)) or "rw"
//! squash = "root"                    # "root" (default), "all" or "none"
//! anonuid = 65534                    # identity of squashed callers
//! anongid = 65534
//! clients = ["10.0.0.0/8", "192.168.1.7"]   # addresses and networks (v4, v6);
//!                                    # absent or "*": everyone; no host names;
//!                                    # `clients = []` is an error, not "everyone"
//! secure = false                     # require a source port below 1024
//! attr_cache_max_age = 10            # seconds READDIRPLUS may answer from cached
//!                                    # attributes (0: never; see `rnfs_vfs::local`)
//! sync = true                        # commit changes before replying (exports(5)
//!                                    # `sync`); false: `async`, a crash may lose
//!                                    # what clients were told is done
//! ```
//!
//! The table is swapped atomically on reload ([`Exports::reload`]): calls in flight
//! finish with the table they started with. An export that keeps its id, path,
//! backend kind, `attr_cache_max_age` and `sync` keeps its backend (open files,
//! caches, memory contents); one whose `attr_cache_max_age` or `sync` changed
//! is reopened on the same directory, and its clients' handles stay valid.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use ipnet::IpNet;
use rnfs_rpc::Auth;
use rnfs_vfs::{Cred, Filesystem};

use super::handles::{root_tag, ExportStamp};
use serde::Deserialize;

/// Read-only or read-write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Every modifying call gets NFS3ERR_ROFS.
    #[default]
    Ro,
    /// Reads and writes.
    Rw,
}

/// How callers' identities are mapped (exports(5) `root_squash` etc.).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Squash {
    /// uid 0 and gid 0 become `anonuid`/`anongid` (`root_squash`).
    #[default]
    Root,
    /// Everyone becomes `anonuid`/`anongid` (`all_squash`).
    All,
    /// Identities are taken as sent (`no_root_squash`).
    None,
}

/// Which backend serves an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The host directory at `path`.
    #[default]
    Local,
    /// An empty in-memory file system (tests, benchmarks).
    Memory,
}

/// The configuration's spelling (`ro`, `root`, `local`...), for log lines.
macro_rules! display_as_config {
    ($ty:ty { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(match self { $(Self::$variant => $name),+ })
            }
        }
    };
}
display_as_config!(Access { Ro => "ro", Rw => "rw" });
display_as_config!(Squash { Root => "root", All => "all", None => "none" });
display_as_config!(BackendKind { Local => "local", Memory => "memory" });

/// Default anonymous uid and gid (`nobody`/`nogroup` on Debian).
pub const ANON_ID: u32 = 65534;

fn anon() -> u32 {
    ANON_ID
}

/// One `[[export]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportConfig {
    /// Directory on this host.
    pub path: PathBuf,
    /// The path clients mount; default: `path`.
    #[serde(default)]
    pub mount_path: Option<String>,
    /// Handle prefix, stable across restarts; default: a hash of the mount
    /// path as the table keys it ([`ExportConfig::export_id`]).
    #[serde(default)]
    pub id: Option<u32>,
    /// Backend.
    #[serde(default)]
    pub backend: BackendKind,
    /// `ro` or `rw`.
    #[serde(default)]
    pub access: Access,
    /// Identity squashing.
    #[serde(default)]
    pub squash: Squash,
    /// uid of squashed callers.
    #[serde(default = "anon")]
    pub anonuid: u32,
    /// gid of squashed callers.
    #[serde(default = "anon")]
    pub anongid: u32,
    /// Allowed client networks (CIDR or single addresses); `None` (the key
    /// absent): everyone. An empty list is a configuration error
    /// ([`ConfigError::NoClients`]): it cannot mean "everyone", which is what
    /// an administrator emptying the list to shut clients out would get.
    #[serde(default)]
    pub clients: Option<Vec<String>>,
    /// Require a privileged source port.
    #[serde(default)]
    pub secure: bool,
    /// Local backend: how long, in seconds, READDIRPLUS may answer an entry
    /// from attributes read earlier while nothing reported a change; the
    /// bound on changes the kernel does not report (writes through shared
    /// mappings, links made elsewhere, access times). 0: stat every entry.
    /// Read when the backend opens: a reload that changes it reopens the
    /// backend (see [`Exports::reload`]).
    #[serde(default = "attr_cache_max_age")]
    pub attr_cache_max_age: u32,
    /// Local backend: commit every change to the file system's namespace and
    /// to attributes to stable storage before replying, as RFC 1813 asks
    /// (exports(5) `sync`, the default). `false` is exports(5) `async`:
    /// faster metadata changes, and a server crash may lose changes clients
    /// were told are done. Read when the backend opens (as
    /// `attr_cache_max_age`).
    #[serde(default = "yes")]
    pub sync: bool,
}

fn yes() -> bool {
    true
}

/// The default of [`ExportConfig::attr_cache_max_age`].
pub const DEFAULT_ATTR_CACHE_MAX_AGE: u32 = 10;

fn attr_cache_max_age() -> u32 {
    DEFAULT_ATTR_CACHE_MAX_AGE
}

impl ExportConfig {
    /// An export of `path` with default options (read-only, root squash, everyone).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            mount_path: None,
            id: None,
            backend: BackendKind::Local,
            access: Access::Ro,
            squash: Squash::Root,
            anonuid: ANON_ID,
            anongid: ANON_ID,
            clients: None,
            secure: false,
            attr_cache_max_age: DEFAULT_ATTR_CACHE_MAX_AGE,
            sync: true,
        }
    }

    /// The path clients mount.
    pub fn mount_path(&self) -> String {
        self.mount_path
            .clone()
            .unwrap_or_else(|| self.path.to_string_lossy().into_owned())
    }

    /// The export id: explicit, or FNV-1a of the mount path normalized as the
    /// table keys it ([`normalize_mount_path`]: `/data/` and `/data` are one
    /// export and get one id), stable across restarts and hosts, so a trailing
    /// slash added to `mount_path` (or to `path`, when it is the mount path)
    /// does not make every client's handles stale.
    pub fn export_id(&self) -> u32 {
        self.id.unwrap_or_else(|| {
            normalize_mount_path(&self.mount_path())
                .bytes()
                .fold(0x811c_9dc5u32, |h, b| {
                    (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
                })
        })
    }
}

/// The `[server]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// Directory for the handle key; default: `$STATE_DIRECTORY` (systemd),
    /// else `/var/lib/rnfs` as root, else `$XDG_STATE_HOME/rnfs` or
    /// `~/.local/state/rnfs`.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
}

/// A whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Server-wide settings.
    #[serde(default)]
    pub server: ServerSection,
    /// The exports.
    #[serde(default, rename = "export")]
    pub exports: Vec<ExportConfig>,
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// The file is not valid TOML for this schema.
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// No `[[export]]`.
    #[error("no exports configured: add an [[export]] table with a `path`")]
    NoExports,
    /// A `clients` entry is neither an address nor a CIDR network nor `*`.
    #[error(
        "export {path}: bad client network {value:?} (expected an address or network such as \
         10.0.0.0/8, 192.168.1.7 or fd00::/8, or * for everyone; host names, wildcards and \
         @netgroups are not supported)"
    )]
    BadNetwork {
        /// The export's mount path.
        path: String,
        /// The entry.
        value: String,
    },
    /// Two exports share a mount path.
    #[error(
        "two exports have the mount path {0} (a `mount_path`, or the `path` itself); \
         remove one or give it another `mount_path`"
    )]
    DuplicateMountPath(String),
    /// Two exports with different mount paths share an id.
    #[error("exports {first} and {second} have the same id {id}; give one another `id`")]
    DuplicateId {
        /// One export's mount path.
        first: String,
        /// The other's.
        second: String,
        /// The id.
        id: u32,
    },
    /// A local export's `path` is not absolute.
    #[error("export {0}: `path` must be absolute")]
    RelativePath(String),
    /// `clients = []`: a list that admits nobody.
    #[error(
        "export {0}: `clients = []` admits nobody; remove the export, or omit `clients` to admit everyone"
    )]
    NoClients(String),
    /// A mount path that is not absolute.
    #[error("export {0}: mount_path must start with '/'")]
    RelativeMountPath(String),
    /// The backend could not be opened.
    #[error("export {path}: {message}")]
    Backend {
        /// The export's mount path.
        path: String,
        /// The backend's error.
        message: String,
    },
}

impl ConfigFile {
    /// Reads and parses a TOML configuration file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
            path: path.to_owned(),
            cause,
        })?;
        Self::parse(&text).map_err(|message| ConfigError::Parse {
            path: path.to_owned(),
            message,
        })
    }

    /// Parses TOML text.
    pub fn parse(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| {
            // `[export]` is one table where a list of them is expected.
            let single = text
                .parse::<toml::Table>()
                .is_ok_and(|t| t.get("export").is_some_and(toml::Value::is_table));
            if single {
                format!("{e}each export is written [[export]], not [export]")
            } else {
                e.to_string()
            }
        })
    }
}

/// Options of a live export, checked on every call.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// `ro` or `rw`.
    pub access: Access,
    /// Identity squashing.
    pub squash: Squash,
    /// uid of squashed callers.
    pub anonuid: u32,
    /// gid of squashed callers.
    pub anongid: u32,
    /// Allowed networks; empty: everyone (`clients` absent from the
    /// configuration, which refuses an empty list).
    pub clients: ClientNets,
    /// Require a privileged source port.
    pub secure: bool,
}

/// An export's `clients` list, compiled for a check on every call whose
/// cost does not grow with the number of entries: per address family, one
/// hash set of network addresses per distinct prefix length in the list
/// (each entry's address masked to its length). An address is in the list
/// when, for one of those lengths, the address masked to it is in that
/// length's set: at most 33 probes for IPv4 and 129 for IPv6, in practice
/// one per kind of entry (`/32` hosts, `/24` networks, ...). A linear scan
/// cost about 7 ns an entry per file handle: 74 µs of CPU per GETATTR with
/// 10,001 entries.
///
/// Matching is exactly `IpNet::contains` over the list: an IPv4 address
/// matches only IPv4 entries, an IPv6 one only IPv6 entries (the caller of
/// [`ExportOptions::check`] turns an IPv4-mapped peer into IPv4 first).
#[derive(Debug, Clone, Default)]
pub struct ClientNets {
    v4: Prefixes<u32>,
    v6: Prefixes<u128>,
}

impl ClientNets {
    /// The compiled form of `nets` (empty: everyone, as in
    /// [`ExportOptions::clients`]).
    pub fn new(nets: &[IpNet]) -> Self {
        let mut out = Self::default();
        for net in nets {
            match net {
                IpNet::V4(n) => out.v4.insert(n.prefix_len(), u32::from(n.addr())),
                IpNet::V6(n) => out.v6.insert(n.prefix_len(), u128::from(n.addr())),
            }
        }
        out
    }

    /// Whether no network is listed: the export admits everyone.
    pub fn is_empty(&self) -> bool {
        self.v4.by_len.is_empty() && self.v6.by_len.is_empty()
    }

    /// Whether some listed network contains `ip`.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.v4.contains(u32::from(a)),
            IpAddr::V6(a) => self.v6.contains(u128::from(a)),
        }
    }
}

/// The networks of one address family (`A`: the address as an integer),
/// by prefix length.
#[derive(Debug, Clone, Default)]
struct Prefixes<A> {
    /// One per distinct prefix length: its mask and the listed networks'
    /// addresses masked to it.
    by_len: Vec<(A, HashSet<A>)>,
}

/// An address family's addresses as integers.
trait Addr: Copy + Eq + std::hash::Hash + std::ops::BitAnd<Output = Self> {
    const BITS: u32;
    const ONES: Self;
    const ZERO: Self;
    fn shl(self, by: u32) -> Option<Self>;
}

impl Addr for u32 {
    const BITS: u32 = u32::BITS;
    const ONES: Self = u32::MAX;
    const ZERO: Self = 0;
    fn shl(self, by: u32) -> Option<Self> {
        self.checked_shl(by)
    }
}

impl Addr for u128 {
    const BITS: u32 = u128::BITS;
    const ONES: Self = u128::MAX;
    const ZERO: Self = 0;
    fn shl(self, by: u32) -> Option<Self> {
        self.checked_shl(by)
    }
}

impl<A: Addr> Prefixes<A> {
    fn insert(&mut self, len: u8, addr: A) {
        // `len <= A::BITS` (ipnet checks); a shift by the full width is the
        // empty mask of length 0.
        let mask = A::ONES
            .shl(A::BITS.saturating_sub(u32::from(len)))
            .unwrap_or(A::ZERO);
        let set = match self.by_len.iter().position(|(m, _)| *m == mask) {
            Some(i) => &mut self.by_len[i].1,
            None => {
                self.by_len.push((mask, HashSet::new()));
                let last = self.by_len.len() - 1;
                &mut self.by_len[last].1
            }
        };
        set.insert(addr & mask);
    }

    fn contains(&self, addr: A) -> bool {
        self.by_len
            .iter()
            .any(|(mask, set)| set.contains(&(addr & *mask)))
    }
}

/// Why a caller may not use an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The caller's address is not in `clients`.
    #[error("client address not allowed")]
    Network,
    /// `secure` and the source port is not privileged.
    #[error("insecure source port")]
    InsecurePort,
}

impl ExportOptions {
    fn from_config(c: &ExportConfig) -> Result<Self, ConfigError> {
        let clients = match &c.clients {
            None => &[][..],
            Some(list) if list.is_empty() => {
                return Err(ConfigError::NoClients(
                    normalize_mount_path(&c.mount_path()).to_owned(),
                ))
            }
            Some(list) => &list[..],
        };
        // `*` admits everyone, as in exports(5): the empty list.
        let clients = if clients.iter().any(|s| s == "*") {
            &[][..]
        } else {
            clients
        };
        let clients = clients
            .iter()
            .map(|s| {
                s.parse::<IpNet>()
                    .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| ConfigError::BadNetwork {
                        path: c.mount_path(),
                        value: s.clone(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            access: c.access,
            squash: c.squash,
            anonuid: c.anonuid,
            anongid: c.anongid,
            clients: ClientNets::new(&clients),
            secure: c.secure,
        })
    }

    /// Whether `peer` may use the export: at most one hash probe per
    /// distinct prefix length in `clients` (see [`ClientNets`]), whatever
    /// the number of entries.
    pub fn check(&self, peer: Option<SocketAddr>) -> Result<(), Refusal> {
        let Some(peer) = peer else {
            // No address (not a socket transport): only an unrestricted export.
            return if self.clients.is_empty() && !self.secure {
                Ok(())
            } else {
                Err(Refusal::Network)
            };
        };
        if self.secure && peer.port() >= 1024 {
            return Err(Refusal::InsecurePort);
        }
        if self.clients.is_empty() {
            return Ok(());
        }
        let ip = match peer.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        if self.clients.contains(ip) {
            Ok(())
        } else {
            Err(Refusal::Network)
        }
    }

    /// The identity a call with credential `auth` runs as (see
    /// [`credentials`](Self::credentials)), made the calling thread's
    /// file-system identity when `switch` (the server runs as root). On
    /// error the call must not run: it would run with the wrong permissions.
    #[inline]
    pub fn act_as(
        &self,
        auth: &Auth<'_>,
        switch: bool,
    ) -> Result<Cred, rnfs_vfs::identity::IdentityError> {
        let sys = match auth {
            Auth::Sys(s) => Some((s.uid, s.gid, &*s.gids)),
            _ => None,
        };
        let cred = self.credentials(sys);
        if switch {
            rnfs_vfs::identity::switch_to(&cred)?;
        }
        Ok(cred)
    }

    /// The identity a call runs with: AUTH_SYS values after squashing, or the
    /// anonymous identity for AUTH_NONE (`None`).
    pub fn credentials(&self, sys: Option<(u32, u32, &[u32])>) -> Cred {
        let anon = || Cred {
            uid: self.anonuid,
            gid: self.anongid,
            groups: Vec::new(),
        };
        let Some((uid, gid, groups)) = sys else {
            return anon();
        };
        match self.squash {
            Squash::All => anon(),
            Squash::None => Cred {
                uid,
                gid,
                groups: groups.to_vec(),
            },
            Squash::Root => Cred {
                uid: if uid == 0 { self.anonuid } else { uid },
                gid: if gid == 0 { self.anongid } else { gid },
                groups: groups
                    .iter()
                    .map(|&g| if g == 0 { self.anongid } else { g })
                    .collect(),
            },
        }
    }
}

/// One live export.
#[derive(Debug)]
pub struct Export {
    /// Handle prefix.
    pub id: u32,
    /// What clients mount.
    pub mount_path: String,
    /// The configuration it came from.
    pub config: ExportConfig,
    /// Access rules.
    pub options: ExportOptions,
    /// The backend.
    pub fs: Arc<dyn Filesystem>,
    /// [`root_tag`] of the backend's root: what
    /// ties a handle to this export's directory as well as to its id.
    pub root_tag: u32,
    /// Whether version 1 handles, which carry no root tag, are accepted:
    /// only while the export's backend is the one the server started with,
    /// the root they were most likely issued under.
    pub accepts_untagged: bool,
    /// `(st_dev, st_ino)` of a local export's `path` when its backend was
    /// opened: a reload reopens the backend if the path now names another
    /// directory (a file system mounted on it, or a directory moved into
    /// place), as `exportfs -r` does.
    pub path_identity: Option<(u64, u64)>,
    /// Rate limit for the warnings of refused callers.
    pub refusals: RefusalLog,
    /// Where each service thread counts this export's calls
    /// (`metrics::shard::export_index`).
    pub(crate) metrics_index: u32,
}

/// Limits the warnings that refused callers cause to one per
/// [`RefusalLog::INTERVAL`] per caller address and export, counting the ones
/// left out: a client that is not allowed retries every call, and a line per
/// call would flood the log (knfsd logs none; this keeps each host's first
/// refusal and then a line now and then). Only refusals take its lock.
#[derive(Debug)]
pub struct RefusalLog {
    start: Instant,
    /// Per caller address (`None`: unknown): nanoseconds after `start`
    /// before which nothing more is logged, and the refusals not logged.
    hosts: Mutex<HashMap<Option<IpAddr>, (u64, u64)>>,
}

impl Default for RefusalLog {
    fn default() -> Self {
        Self {
            start: Instant::now(),
            hosts: Mutex::new(HashMap::new()),
        }
    }
}

impl RefusalLog {
    /// At most one warning per host per this long.
    pub const INTERVAL: Duration = Duration::from_secs(5);
    /// Most hosts remembered; past it the record starts again (so a flood
    /// of addresses costs bounded memory and at worst more lines).
    const MAX_HOSTS: usize = 1024;

    /// Whether to log the refusal of `peer` being made now; if so, how many
    /// of its refusals were left out of the log since the last one logged.
    pub fn admit(&self, peer: Option<SocketAddr>) -> Option<u64> {
        let now = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.admit_at(peer.map(|p| p.ip()), now)
    }

    fn admit_at(&self, host: Option<IpAddr>, now_ns: u64) -> Option<u64> {
        let interval = u64::try_from(Self::INTERVAL.as_nanos()).unwrap_or(u64::MAX);
        let mut hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
        if hosts.len() >= Self::MAX_HOSTS && !hosts.contains_key(&host) {
            hosts.clear();
        }
        let (next, not_logged) = hosts.entry(host).or_insert((0, 0));
        if now_ns >= *next {
            *next = now_ns.saturating_add(interval);
            return Some(std::mem::take(not_logged));
        }
        *not_logged += 1;
        None
    }
}

impl Export {
    /// Whether modifying calls are refused.
    pub fn read_only(&self) -> bool {
        self.options.access == Access::Ro
    }

    /// What handles of this export are sealed with.
    pub fn stamp(&self) -> ExportStamp {
        ExportStamp {
            id: self.id,
            root_tag: self.root_tag,
        }
    }

    /// Whether a handle with `tag` (`None`: version 1) was issued under this
    /// export's present root; one that was not is STALE.
    pub fn issued_under_this_root(&self, tag: Option<u32>) -> bool {
        match tag {
            Some(tag) => tag == self.root_tag,
            None => self.accepts_untagged,
        }
    }
}

/// An immutable set of exports, looked up by id (every call) and by mount path
/// (MNT).
#[derive(Debug, Default)]
pub struct ExportTable {
    by_id: HashMap<u32, Arc<Export>>,
    by_path: HashMap<String, Arc<Export>>,
    /// In configuration order, for EXPORT and DUMP.
    ordered: Vec<Arc<Export>>,
}

impl ExportTable {
    /// The export with handle prefix `id`.
    pub fn get(&self, id: u32) -> Option<&Arc<Export>> {
        self.by_id.get(&id)
    }

    /// The export mounted as `path` (trailing slashes ignored).
    pub fn by_mount_path(&self, path: &str) -> Option<&Arc<Export>> {
        self.by_path.get(normalize_mount_path(path))
    }

    /// Every export, in configuration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Export>> {
        self.ordered.iter()
    }

    /// Number of exports.
    pub fn len(&self) -> usize {
        self.ordered.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ordered.is_empty()
    }
}

/// A mount path as the table keys it: without trailing slashes, `/` for the
/// root. Clients send `/srv/data/` and `/srv/data` alike.
pub fn normalize_mount_path(path: &str) -> &str {
    match path.trim_end_matches('/') {
        "" if path.starts_with('/') => "/",
        trimmed => trimmed,
    }
}

/// Opens the backend of an export.
pub type BackendOpener = dyn Fn(&ExportConfig) -> Result<Arc<dyn Filesystem>, String> + Send + Sync;

/// The live export table, read lock-free on every call and replaced whole on
/// reload.
pub struct Exports {
    table: ArcSwap<ExportTable>,
    opener: Box<BackendOpener>,
}

impl std::fmt::Debug for Exports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exports")
            .field("table", &self.table.load())
            .finish_non_exhaustive()
    }
}

impl Exports {
    /// Builds the table, opening every backend with `opener`.
    pub fn new(configs: &[ExportConfig], opener: Box<BackendOpener>) -> Result<Self, ConfigError> {
        let table = build(configs, None, &*opener)?;
        Ok(Self {
            table: ArcSwap::from_pointee(table),
            opener,
        })
    }

    /// The current table. Cheap (no lock); hold it for the length of one call.
    pub fn load(&self) -> arc_swap::Guard<Arc<ExportTable>> {
        self.table.load()
    }

    /// Replaces the table with one built from `configs`. An export whose id, path
    /// (and the directory it names), backend kind, `attr_cache_max_age` and
    /// `sync` are unchanged keeps its backend, so its open state survives; only its options
    /// change. A reopened backend of the same directory keeps its clients'
    /// handles. On error the old table stays in place.
    pub fn reload(&self, configs: &[ExportConfig]) -> Result<(), ConfigError> {
        let old = self.table.load_full();
        let table = build(configs, Some(&old), &*self.opener)?;
        self.table.store(Arc::new(table));
        Ok(())
    }
}

fn build(
    configs: &[ExportConfig],
    old: Option<&ExportTable>,
    opener: &BackendOpener,
) -> Result<ExportTable, ConfigError> {
    if configs.is_empty() {
        return Err(ConfigError::NoExports);
    }
    let mut table = ExportTable::default();
    for c in configs {
        // Resolved against the server's working directory, a relative path
        // would name another directory under systemd (started in /).
        if c.backend == BackendKind::Local && !c.path.is_absolute() {
            return Err(ConfigError::RelativePath(c.path.display().to_string()));
        }
        let mount_path = normalize_mount_path(&c.mount_path()).to_owned();
        if !mount_path.starts_with('/') {
            return Err(ConfigError::RelativeMountPath(mount_path));
        }
        // The mount path first: the default id is its hash, so two equal
        // mount paths also share an id, and the remedy is another path.
        if table.by_path.contains_key(&mount_path) {
            return Err(ConfigError::DuplicateMountPath(mount_path));
        }
        let id = c.export_id();
        if let Some(other) = table.by_id.get(&id) {
            return Err(ConfigError::DuplicateId {
                first: other.mount_path.clone(),
                second: mount_path,
                id,
            });
        }
        let options = ExportOptions::from_config(c)?;
        let path_identity = path_identity(c);
        let same_dir = old.and_then(|t| t.get(id)).filter(|e| {
            e.config.path == c.path
                && e.config.backend == c.backend
                && e.path_identity == path_identity
        });
        // The backend takes `attr_cache_max_age` and `sync` when it opens,
        // so a change reopens it: the same directory, so the same root and
        // handles.
        let reuse = same_dir.filter(|e| {
            e.config.attr_cache_max_age == c.attr_cache_max_age && e.config.sync == c.sync
        });
        let (fs, root_tag, accepts_untagged) = match reuse {
            Some(e) => (Arc::clone(&e.fs), e.root_tag, e.accepts_untagged),
            None => {
                let fs = opener(c).map_err(|message| ConfigError::Backend {
                    path: mount_path.clone(),
                    message,
                })?;
                let tag = root_tag(&fs.root());
                // Untagged handles were most likely issued under the root
                // the server started with: at start (no old table), unless
                // the configuration changed across the restart too, and
                // after a reopen that found that root again.
                let accepts_untagged = match old {
                    None => true,
                    Some(_) => same_dir.is_some_and(|e| e.accepts_untagged && e.root_tag == tag),
                };
                (fs, tag, accepts_untagged)
            }
        };
        let export = Arc::new(Export {
            id,
            mount_path: mount_path.clone(),
            config: c.clone(),
            options,
            root_tag,
            accepts_untagged,
            path_identity,
            refusals: RefusalLog::default(),
            metrics_index: crate::metrics::export_index(id),
            fs,
        });
        table.by_id.insert(id, Arc::clone(&export));
        table.by_path.insert(mount_path, Arc::clone(&export));
        table.ordered.push(export);
    }
    Ok(table)
}

/// What directory a local export's `path` names now (`None` for other
/// backends, or a path that cannot be read, which the opener then reports).
/// Taken before the backend is opened: if the path changes in between, the
/// next reload sees a difference and reopens, which is harmless.
fn path_identity(c: &ExportConfig) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    match c.backend {
        BackendKind::Local => std::fs::metadata(&c.path).ok().map(|m| (m.dev(), m.ino())),
        BackendKind::Memory => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn parses_every_option_and_defaults() {
        let cfg = ConfigFile::parse(
            r#"
            [server]
            state_dir = "/tmp/s"
            [[export]]
            path = "/srv/a"
            [[export]]
            path = "/srv/b"
            mount_path = "/b"
            id = 7
            backend = "memory"
            access = "rw"
            squash = "all"
            anonuid = 1
            anongid = 2
            clients = ["10.0.0.0/8", "::1"]
            secure = true
            "#,
        )
        .unwrap();
        assert_eq!(cfg.server.state_dir, Some(PathBuf::from("/tmp/s")));
        let a = &cfg.exports[0];
        assert_eq!(
            (a.access, a.squash, a.anonuid, a.secure),
            (Access::Ro, Squash::Root, ANON_ID, false)
        );
        let b = &cfg.exports[1];
        assert_eq!(b.mount_path(), "/b");
        assert_eq!(b.export_id(), 7);
        assert_eq!(b.backend, BackendKind::Memory);
        assert_eq!((b.access, b.squash), (Access::Rw, Squash::All));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors_with_a_location() {
        let e =
            ConfigFile::parse("[[export]]\npath = \"/a\"\nsquash = \"sometimes\"\n").unwrap_err();
        assert!(e.contains("sometimes") && e.contains("line 3"), "{e}");
        let e = ConfigFile::parse("[[export]]\npath = \"/a\"\nro = true\n").unwrap_err();
        assert!(e.contains("unknown field"), "{e}"); // One `[export]` table instead of a list gets the fix spelled out.
        let e = ConfigFile::parse("[export]\npath = \"/a\"\n").unwrap_err();
        assert!(e.contains("written [[export]], not [export]"), "{e}");
        let e = ConfigFile::parse("export = 3\n").unwrap_err();
        assert!(!e.contains("[[export]]"), "{e}");
    }

    fn opts(clients: &[&str], secure: bool) -> ExportOptions {
        let mut c = ExportConfig::new("/x");
        c.clients = (!clients.is_empty()).then(|| clients.iter().map(|s| s.to_string()).collect());
        c.secure = secure;
        ExportOptions::from_config(&c).unwrap()
    }

    #[test]
    fn client_networks_and_secure_ports() {
        let o = opts(&["10.1.0.0/16", "192.168.1.7"], false);
        assert_eq!(o.check(Some("10.1.2.3:900".parse().unwrap())), Ok(()));
        assert_eq!(o.check(Some("192.168.1.7:5000".parse().unwrap())), Ok(()));
        assert_eq!(
            o.check(Some("192.168.1.8:5000".parse().unwrap())),
            Err(Refusal::Network)
        );
        // IPv4-mapped IPv6 peers match IPv4 networks.
        assert_eq!(
            o.check(Some("[::ffff:10.1.9.9]:1".parse().unwrap())),
            Ok(())
        );
        assert_eq!(o.check(None), Err(Refusal::Network));
        let s = opts(&[], true);
        assert_eq!(s.check(Some("1.2.3.4:1023".parse().unwrap())), Ok(()));
        assert_eq!(
            s.check(Some("1.2.3.4:1024".parse().unwrap())),
            Err(Refusal::InsecurePort)
        );
        let mut c = ExportConfig::new("/x");
        c.clients = Some(vec!["10.0.0.0/8".into(), "*".into()]);
        let everyone = ExportOptions::from_config(&c).unwrap();
        assert_eq!(
            everyone.check(Some("192.0.2.1:900".parse().unwrap())),
            Ok(())
        );
        assert_eq!(
            everyone.check(Some("[2001:db8::1]:900".parse().unwrap())),
            Ok(())
        );
        let mut c = ExportConfig::new("/x");
        c.clients = Some(vec!["10.0.0.0/33".into()]);
        assert!(matches!(
            ExportOptions::from_config(&c),
            Err(ConfigError::BadNetwork { .. })
        ));
    }

    /// The check before `clients` was compiled: a scan of the list.
    fn scanned(nets: &[IpNet], peer: SocketAddr) -> bool {
        let ip = match peer.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        nets.iter().any(|net| net.contains(&ip))
    }

    fn parsed(list: &[String]) -> Vec<IpNet> {
        list.iter()
            .map(|s| {
                s.parse::<IpNet>()
                    .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn compiled_client_lists_at_their_edges() {
        let peer = |s: &str| Some(s.parse::<SocketAddr>().unwrap());
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Single addresses are /32 and /128: the neighbours are refused.
        let o = opts(&["192.0.2.7", "2001:db8::7"], false);
        assert_eq!(o.check(peer("192.0.2.7:1")), Ok(()));
        assert_eq!(o.check(peer("192.0.2.6:1")), Err(Refusal::Network));
        assert_eq!(o.check(peer("192.0.2.8:1")), Err(Refusal::Network));
        assert_eq!(o.check(peer("[2001:db8::7]:1")), Ok(()));
        assert_eq!(o.check(peer("[2001:db8::6]:1")), Err(Refusal::Network));
        assert_eq!(o.check(peer("[2001:db8::7:0]:1")), Err(Refusal::Network));
        // An IPv4-mapped peer is its IPv4 address, which the IPv6 entries
        // do not name, and a mapped entry names no IPv4 peer.
        assert_eq!(o.check(peer("[::ffff:192.0.2.7]:1")), Ok(()));
        let mapped = opts(&["::ffff:192.0.2.7", "::ffff:0:0/96"], false);
        assert_eq!(
            mapped.check(peer("[::ffff:192.0.2.7]:1")),
            Err(Refusal::Network)
        );
        assert_eq!(mapped.check(peer("192.0.2.7:1")), Err(Refusal::Network));
        // The families do not mix, not even at length 0.
        let v4_all = opts(&["0.0.0.0/0"], false);
        assert_eq!(v4_all.check(peer("203.0.113.9:1")), Ok(()));
        assert_eq!(v4_all.check(peer("[::ffff:203.0.113.9]:1")), Ok(()));
        assert_eq!(v4_all.check(peer("[2001:db8::1]:1")), Err(Refusal::Network));
        let v6_all = opts(&["::/0"], false);
        assert_eq!(v6_all.check(peer("[2001:db8::1]:1")), Ok(()));
        assert_eq!(v6_all.check(peer("[::1]:1")), Ok(()));
        assert_eq!(v6_all.check(peer("203.0.113.9:1")), Err(Refusal::Network));
        assert_eq!(
            v6_all.check(peer("[::ffff:203.0.113.9]:1")),
            Err(Refusal::Network)
        );
        // Host bits past the prefix are ignored, as `IpNet::contains` does.
        let sloppy = opts(&["10.1.2.3/16", "2001:db8:1:2::5/32"], false);
        assert_eq!(sloppy.check(peer("10.1.200.1:1")), Ok(()));
        assert_eq!(sloppy.check(peer("10.2.0.1:1")), Err(Refusal::Network));
        assert_eq!(sloppy.check(peer("[2001:db8:ffff::1]:1")), Ok(()));
        assert_eq!(sloppy.check(peer("[2001:db9::1]:1")), Err(Refusal::Network));
        // Overlapping entries and duplicates; `*` anywhere is everyone.
        let list = names(&["10.0.0.0/8", "10.1.0.0/16", "10.1.0.0/16", "10.1.2.3"]);
        let nets = ClientNets::new(&parsed(&list));
        assert!(!nets.is_empty());
        assert!(nets.contains("10.1.2.3".parse().unwrap()));
        assert!(nets.contains("10.200.0.1".parse().unwrap()));
        assert!(!nets.contains("11.0.0.1".parse().unwrap()));
        assert!(ClientNets::new(&[]).is_empty());
        let everyone = opts(&["192.0.2.7", "*"], false);
        assert!(everyone.clients.is_empty());
        assert_eq!(everyone.check(peer("[2001:db8::1]:1")), Ok(()));
        // Every length of either family, at its boundaries.
        for len in 0..=32u8 {
            let net = format!("198.51.100.0/{len}").parse::<IpNet>().unwrap();
            let nets = ClientNets::new(&[net]);
            for ip in [net.network(), net.broadcast()] {
                assert!(nets.contains(ip), "{net} {ip}");
            }
            if let IpAddr::V4(b) = net.broadcast() {
                if let Some(next) = u32::from(b).checked_add(1) {
                    let next = IpAddr::V4(next.into());
                    assert!(!nets.contains(next), "{net} {next}");
                }
            }
        }
        for len in 0..=128u8 {
            let net = format!("2001:db8::/{len}").parse::<IpNet>().unwrap();
            let nets = ClientNets::new(&[net]);
            for ip in [net.network(), net.broadcast()] {
                assert!(nets.contains(ip), "{net} {ip}");
            }
            if let IpAddr::V6(b) = net.broadcast() {
                if let Some(next) = u128::from(b).checked_add(1) {
                    let next = IpAddr::V6(next.into());
                    assert!(!nets.contains(next), "{net} {next}");
                }
            }
        }
    }

    /// What a check costs: one probe per distinct prefix length, however
    /// many entries share it.
    #[test]
    fn a_check_probes_once_per_prefix_length_not_per_entry() {
        let mut list: Vec<String> = (0..10_000u32)
            .map(|i| std::net::Ipv4Addr::from(0x0a00_0000 + i).to_string())
            .collect();
        list.extend(
            [
                "192.168.0.0/16",
                "172.16.0.0/12",
                "172.17.0.0/16",
                "fd00::/8",
            ]
            .map(String::from),
        );
        let nets = ClientNets::new(&parsed(&list));
        // /32, /16 and /12 for IPv4; /8 for IPv6.
        assert_eq!((nets.v4.by_len.len(), nets.v6.by_len.len()), (3, 1));
        assert_eq!(
            nets.v4.by_len.iter().map(|(_, s)| s.len()).sum::<usize>(),
            10_003
        );
        assert!(nets.contains("10.0.39.15".parse().unwrap()));
        assert!(!nets.contains("10.0.39.16".parse().unwrap()));
    }

    /// An address near the few that lists are built from, so that lists
    /// and peers meet often.
    fn near_v4() -> impl proptest::strategy::Strategy<Value = u32> {
        use proptest::prelude::*;
        (
            prop::sample::select(vec![0x0a00_0000u32, 0xc000_0200, 0xffff_ff00, 0]),
            0..512u32,
        )
            .prop_map(|(base, off)| base ^ off.rotate_left(off % 32))
    }

    fn near_v6() -> impl proptest::strategy::Strategy<Value = u128> {
        use proptest::prelude::*;
        (
            prop::sample::select(vec![0x2001_0db8u128 << 96, 0, u128::MAX, 0xffff << 32]),
            0..512u128,
            0..128u32,
        )
            .prop_map(|(base, off, rot)| base ^ off.rotate_left(rot))
    }

    /// A configured entry: a network of any length, or a single address.
    fn entry() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            (near_v4(), 0..=32u8).prop_map(|(a, l)| format!("{}/{l}", std::net::Ipv4Addr::from(a))),
            near_v4().prop_map(|a| std::net::Ipv4Addr::from(a).to_string()),
            (near_v6(), 0..=128u8)
                .prop_map(|(a, l)| format!("{}/{l}", std::net::Ipv6Addr::from(a))),
            near_v6().prop_map(|a| std::net::Ipv6Addr::from(a).to_string()),
            // IPv4-mapped entries, which no peer matches: peers are mapped
            // to IPv4 first.
            (near_v4(), 96..=128u8).prop_map(|(a, l)| {
                format!("{}/{l}", std::net::Ipv4Addr::from(a).to_ipv6_mapped())
            }),
        ]
    }

    fn peer() -> impl proptest::strategy::Strategy<Value = SocketAddr> {
        use proptest::prelude::*;
        let v4 = || near_v4().prop_map(|a| IpAddr::V4(a.into()));
        prop_oneof![
            v4(),
            near_v6().prop_map(|a| IpAddr::V6(a.into())),
            near_v4().prop_map(|a| IpAddr::V6(std::net::Ipv4Addr::from(a).to_ipv6_mapped())),
            any::<u32>().prop_map(|a| IpAddr::V4(a.into())),
            any::<u128>().prop_map(|a| IpAddr::V6(a.into())),
        ]
        .prop_map(|ip| SocketAddr::new(ip, 900))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// The compiled list admits exactly whom the scan of the list did.
        #[test]
        fn compiled_clients_admit_whom_the_scan_did(
            list in proptest::collection::vec(entry(), 1..40),
            peers in proptest::collection::vec(peer(), 1..40),
        ) {
            let o = opts(&list.iter().map(String::as_str).collect::<Vec<_>>(), false);
            let nets = parsed(&list);
            for p in peers {
                let scan = if scanned(&nets, p) { Ok(()) } else { Err(Refusal::Network) };
                proptest::prop_assert_eq!(o.check(Some(p)), scan, "{:?} {}", list, p);
            }
        }
    }

    fn memory_opener() -> Box<BackendOpener> {
        Box::new(|_c: &ExportConfig| {
            Ok(Arc::new(rnfs_vfs::memory::MemoryFs::new(1)) as Arc<dyn Filesystem>)
        })
    }

    #[test]
    fn an_empty_client_list_admits_nobody_and_is_refused() {
        let cfg = ConfigFile::parse(
            "[[export]]\npath = \"/x/\"\nbackend = \"memory\"\nclients = []\n\
             [[export]]\npath = \"/y\"\nbackend = \"memory\"\n",
        )
        .unwrap();
        assert_eq!(cfg.exports[0].clients, Some(Vec::new()));
        // Absent: everyone.
        assert_eq!(cfg.exports[1].clients, None);
        let e = Exports::new(&cfg.exports, memory_opener()).unwrap_err();
        assert!(matches!(e, ConfigError::NoClients(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "export /x: `clients = []` admits nobody; remove the export, or omit \
             `clients` to admit everyone"
        );
        // A reload that empties the list is refused and the old table stays.
        let exports = Exports::new(&cfg.exports[1..], memory_opener()).unwrap();
        let everyone = exports.load().by_mount_path("/y").unwrap().options.clone();
        assert_eq!(
            everyone.check(Some("203.0.113.9:700".parse().unwrap())),
            Ok(())
        );
        let mut emptied = cfg.exports[1].clone();
        emptied.clients = Some(Vec::new());
        assert!(matches!(
            exports.reload(&[emptied]),
            Err(ConfigError::NoClients(_))
        ));
        let kept = exports.load().by_mount_path("/y").unwrap().options.clone();
        assert_eq!(kept.check(Some("203.0.113.9:700".parse().unwrap())), Ok(()));
    }

    #[test]
    fn the_default_id_ignores_trailing_slashes_and_keeps_its_value() {
        // The ids of normalized spellings are those rnfs has always given
        // (FNV-1a of the bytes): existing handles stay valid.
        let id = |path: &str, mount_path: Option<&str>| {
            let mut c = ExportConfig::new(path);
            c.mount_path = mount_path.map(str::to_owned);
            c.export_id()
        };
        assert_eq!(id("/data", None), 0x49f6_53fe);
        assert_eq!(id("/srv/x", Some("/data")), 0x49f6_53fe);
        assert_eq!(id("/", None), 0x2a0c_975e);
        assert_eq!(id("/data/", None), id("/data", None));
        assert_eq!(id("/srv/x", Some("/data/")), id("/data", None));
        assert_eq!(id("/srv/x", Some("/data//")), id("/data", None));
        assert_eq!(id("//", None), id("/", None));
    }

    #[test]
    fn squashing() {
        let mut o = opts(&[], false);
        let groups = [0, 5];
        let root = o.credentials(Some((0, 0, &groups)));
        assert_eq!(
            (root.uid, root.gid, root.groups),
            (ANON_ID, ANON_ID, vec![ANON_ID, 5])
        );
        let user = o.credentials(Some((1000, 100, &[])));
        assert_eq!((user.uid, user.gid), (1000, 100));
        assert_eq!(o.credentials(None).uid, ANON_ID);
        o.squash = Squash::None;
        assert_eq!(o.credentials(Some((0, 0, &groups))).uid, 0);
        o.squash = Squash::All;
        assert_eq!(o.credentials(Some((1000, 100, &[]))).uid, ANON_ID);
    }

    #[test]
    fn reload_keeps_unchanged_backends_and_replaces_options() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let opened = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&opened);
        let opener: Box<BackendOpener> = Box::new(move |_c: &ExportConfig| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(Arc::new(rnfs_vfs::memory::MemoryFs::new(1)) as Arc<dyn Filesystem>)
        });
        let mut a = ExportConfig::new("/a");
        a.backend = BackendKind::Memory;
        let mut b = ExportConfig::new("/b");
        b.backend = BackendKind::Memory;
        let exports = Exports::new(&[a.clone(), b.clone()], opener).unwrap();
        assert_eq!(opened.load(Ordering::SeqCst), 2);
        let fs_a = Arc::clone(&exports.load().by_mount_path("/a").unwrap().fs);

        // /a changes options only; /b goes away; /c is new.
        a.access = Access::Rw;
        let mut c = ExportConfig::new("/c");
        c.backend = BackendKind::Memory;
        exports.reload(&[a.clone(), c]).unwrap();
        let table = exports.load();
        let new_a = table.by_mount_path("/a").unwrap();
        assert!(Arc::ptr_eq(&fs_a, &new_a.fs), "same backend object");
        assert!(!new_a.read_only());
        assert!(table.by_mount_path("/b").is_none());
        assert!(table.by_mount_path("/c").is_some());
        assert_eq!(opened.load(Ordering::SeqCst), 3, "only /c was opened");
        // Untagged (version 1) handles: for the backends the server started
        // with, not for one opened by a reload.
        assert!(new_a.issued_under_this_root(None));
        let new_c = table.by_mount_path("/c").unwrap();
        assert!(!new_c.issued_under_this_root(None));
        assert!(new_c.issued_under_this_root(Some(new_c.root_tag)));
        assert!(!new_c.issued_under_this_root(Some(new_c.root_tag ^ 1)));

        // A bad reload keeps the old table.
        let mut bad = ExportConfig::new("/bad");
        bad.clients = Some(vec!["not-a-net".into()]);
        assert!(exports.reload(&[bad]).is_err());
        assert!(exports.load().by_mount_path("/a").is_some());
        // Duplicate ids are refused.
        let mut dup = ExportConfig::new("/d");
        dup.id = Some(a.export_id());
        assert!(matches!(
            exports.reload(&[a.clone(), dup]),
            Err(ConfigError::DuplicateId { .. })
        ));
        // The same mount path twice is a duplicate mount path (not an id
        // clash, although the default ids clash too), with or without
        // explicit ids and mount paths.
        let mut twice = a.clone();
        twice.id = Some(77);
        for second in [a.clone(), twice] {
            let err = exports.reload(&[a.clone(), second]).unwrap_err();
            assert!(
                matches!(err, ConfigError::DuplicateMountPath(ref p) if p == "/a"),
                "{err}"
            );
        }
        let mut elsewhere = ExportConfig::new("/e");
        elsewhere.mount_path = Some("/a".into());
        assert!(matches!(
            exports.reload(&[a, elsewhere]),
            Err(ConfigError::DuplicateMountPath(_))
        ));
        // A relative local path is refused, not resolved against the
        // server's working directory.
        let err = exports.reload(&[ExportConfig::new("data")]).unwrap_err();
        assert!(matches!(err, ConfigError::RelativePath(_)), "{err}");
    }

    #[test]
    fn reload_reopens_a_local_export_whose_path_names_another_directory() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let base = std::env::temp_dir().join(format!("rnfs-reload-ident-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("data");
        std::fs::create_dir_all(&dir).unwrap();
        let opened = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&opened);
        // A backend per open, tagged with the open's number, so that a
        // reopened export has another root (as a real new directory does).
        let opener: Box<BackendOpener> = Box::new(move |_c: &ExportConfig| {
            let n = counter.fetch_add(1, Ordering::SeqCst) as u64;
            Ok(Arc::new(rnfs_vfs::memory::MemoryFs::new(n + 1)) as Arc<dyn Filesystem>)
        });
        let config = [ExportConfig::new(&dir)];
        let exports = Exports::new(&config, opener).unwrap();
        let before = Arc::clone(exports.load().get(config[0].export_id()).unwrap());
        exports.reload(&config).unwrap();
        let same = Arc::clone(exports.load().get(config[0].export_id()).unwrap());
        assert!(
            Arc::ptr_eq(&before.fs, &same.fs),
            "an unchanged path is kept"
        );
        assert_eq!(opened.load(Ordering::SeqCst), 1);

        // Another directory now sits at the same path.
        std::fs::rename(&dir, base.join("old")).unwrap();
        std::fs::create_dir(&dir).unwrap();
        exports.reload(&config).unwrap();
        let after = Arc::clone(exports.load().get(config[0].export_id()).unwrap());
        assert_eq!(opened.load(Ordering::SeqCst), 2, "the backend is reopened");
        assert!(!Arc::ptr_eq(&before.fs, &after.fs));
        assert!(!after.issued_under_this_root(None));
        assert_ne!(after.path_identity, before.path_identity);

        // A path that vanished is opened again, so that the real opener
        // reports it (and the reload fails) instead of serving what was there.
        std::fs::remove_dir(&dir).unwrap();
        exports.reload(&config).unwrap();
        assert_eq!(opened.load(Ordering::SeqCst), 3);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn reload_reopens_a_local_export_whose_attr_cache_max_age_changed() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = std::env::temp_dir().join(format!("rnfs-reload-age-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let opened = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&opened);
        let count = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&count);
        // Every open finds the same root, as reopening one directory does.
        let fs: Arc<dyn Filesystem> = Arc::new(rnfs_vfs::memory::MemoryFs::new(1));
        let opener: Box<BackendOpener> = Box::new(move |c: &ExportConfig| {
            counter.fetch_add(1, Ordering::SeqCst);
            seen.lock().unwrap().push(c.attr_cache_max_age);
            Ok(Arc::clone(&fs))
        });
        let mut config = [ExportConfig::new(&dir)];
        let exports = Exports::new(&config, opener).unwrap();
        let before = Arc::clone(exports.load().get(config[0].export_id()).unwrap());
        config[0].attr_cache_max_age = 0;
        exports.reload(&config).unwrap();
        let after = Arc::clone(exports.load().get(config[0].export_id()).unwrap());
        assert_eq!(*opened.lock().unwrap(), [DEFAULT_ATTR_CACHE_MAX_AGE, 0]);
        // The same directory: handles of either kind stay good.
        assert!(after.issued_under_this_root(Some(before.root_tag)));
        assert!(after.issued_under_this_root(None));
        // Nothing changed: the backend is kept.
        exports.reload(&config).unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refusals_are_logged_once_per_interval_with_a_count_of_the_rest() {
        let log = RefusalLog::default();
        let second = 1_000_000_000;
        let a = Some(IpAddr::from([192, 0, 2, 1]));
        let b = Some(IpAddr::from([192, 0, 2, 2]));
        assert_eq!(log.admit_at(a, 0), Some(0));
        for t in 1..=100 {
            assert_eq!(log.admit_at(a, t * 10_000_000), None);
        }
        // Another host's first refusal is logged although a is noisy.
        assert_eq!(log.admit_at(b, 2 * second), Some(0));
        assert_eq!(log.admit_at(b, 3 * second), None);
        assert_eq!(log.admit_at(a, 5 * second), Some(100));
        assert_eq!(log.admit_at(a, 5 * second + 1), None);
        assert_eq!(log.admit_at(a, 20 * second), Some(1));
        assert_eq!(log.admit_at(a, 20 * second), None);
        assert_eq!(log.admit_at(b, 20 * second), Some(1));
        assert_eq!(log.admit_at(None, 20 * second), Some(0));
    }
}

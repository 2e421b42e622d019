//! Mount options, parsed from a `mount.nfs`-style `-o a,b=c` list.

use std::time::Duration;

use rnfs_client::ClientOptions;

/// How long attributes stay cached, as the Linux NFS client's `acregmin`,
/// `acregmax`, `acdirmin` and `acdirmax`.
///
/// A cached entry starts at the minimum; each time a refresh finds the object
/// unchanged its timeout doubles, up to the maximum; a change (or one of our
/// own modifications) puts it back to the minimum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheTimes {
    /// Shortest timeout for files (`acregmin`, 3 s).
    pub acregmin: Duration,
    /// Longest timeout for files (`acregmax`, 60 s).
    pub acregmax: Duration,
    /// Shortest timeout for directories (`acdirmin`, 30 s).
    pub acdirmin: Duration,
    /// Longest timeout for directories (`acdirmax`, 60 s).
    pub acdirmax: Duration,
}

impl Default for CacheTimes {
    fn default() -> Self {
        Self {
            acregmin: Duration::from_secs(3),
            acregmax: Duration::from_secs(60),
            acdirmin: Duration::from_secs(30),
            acdirmax: Duration::from_secs(60),
        }
    }
}

impl CacheTimes {
    /// No attribute caching at all (`noac`).
    pub fn none() -> Self {
        Self {
            acregmin: Duration::ZERO,
            acregmax: Duration::ZERO,
            acdirmin: Duration::ZERO,
            acdirmax: Duration::ZERO,
        }
    }

    /// `(min, max)` for a directory or for anything else.
    pub fn bounds(&self, dir: bool) -> (Duration, Duration) {
        if dir {
            (self.acdirmin, self.acdirmax.max(self.acdirmin))
        } else {
            (self.acregmin, self.acregmax.max(self.acregmin))
        }
    }
}

/// Everything `rnfs mount` can be told. `Default` is what `mount.nfs` does
/// with no options, plus rnfs's write-behind.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// The RPC transport: `timeo`, `retrans`, `hard`/`soft`, `nconnect`.
    pub client: ClientOptions,
    /// Attribute cache timeouts.
    pub cache: CacheTimes,
    /// Close-to-open consistency (`cto`, the default): `open` revalidates the
    /// attributes and drops cached data if the file changed.
    pub cto: bool,
    /// Mount read-only (`ro`).
    pub read_only: bool,
    /// READ size (`rsize`); `None`: the server's preferred size.
    pub rsize: Option<u32>,
    /// WRITE size (`wsize`); `None`: the server's preferred size, at most
    /// [`WRITE_BEHIND_WSIZE`](Self::WRITE_BEHIND_WSIZE) with write-behind on.
    pub wsize: Option<u32>,
    /// Write-behind: the most WRITEs in flight per file
    /// (`wb_max_outstanding`); `Some(0)` is the legacy synchronous path,
    /// `None` the engine's default.
    pub wb_max_outstanding: Option<u32>,
    /// Write-behind: the most bytes of WRITEs in flight per file
    /// (`wb_max_outstanding_kb`, in KiB; `Some(0)`: no byte limit), which
    /// bounds how long a `stat()` of a file being written waits; `None` the
    /// engine's default (2 MiB).
    pub wb_max_outstanding_bytes: Option<u64>,
    /// Dirty bytes all open files may hold before writers wait
    /// (`wb_dirty_mb`, in MiB); `None`: the engine's default (256 MiB).
    pub dirty_limit: Option<u64>,
    /// Data written this long ago is written back and committed, by the
    /// file's next operation or by the mount's flusher if the file is idle
    /// (`wb_expire`, in seconds); `None`: the engine's default (30 s, as
    /// Linux's `dirty_expire_centisecs`).
    pub wb_expire: Option<Duration>,
    /// Threads serving FUSE requests (`threads`).
    pub threads: usize,
    /// Let every user use the mount (`allow_other`); `None`: yes when
    /// mounted by root, as NFS mounts are.
    pub allow_other: Option<bool>,
    /// Programs on the mount may be executed (`exec`, the default;
    /// `noexec`).
    pub exec: bool,
    /// Set-user-id and set-group-id bits take effect (`suid`; default
    /// `nosuid`, as FUSE mounts are; only root may ask for it).
    pub suid: bool,
    /// Device files can be opened (`dev`; default `nodev`, as FUSE mounts
    /// are; only root may ask for it).
    pub dev: bool,
    /// The NFS port (`port`), for a URL that does not give one.
    pub port: Option<u16>,
    /// The MOUNT port (`mountport`), for a URL that does not give one.
    pub mount_port: Option<u16>,
}

impl MountOptions {
    /// The largest default WRITE with write-behind on (`wsize` overrides
    /// it). Write-behind sends a file's data in `wsize` chunks, and a
    /// `stat()` of the file sends its partial chunk and waits for the
    /// chunks in flight: in seed 003 (six 1 GiB writers beside a `stat`
    /// loop, docs/benchmarks.md) 256 KiB chunks gave a `stat()` p99 of
    /// 31 ms where 1 MiB gave 66 ms, with no less write throughput. The
    /// legacy path (`wb_max_outstanding=0`) keeps the server's size.
    pub const WRITE_BEHIND_WSIZE: u32 = 256 << 10;

    /// The WRITE size for a server that prefers `server` bytes: `wsize` if
    /// given (never above `server`), else `server`, capped at
    /// [`WRITE_BEHIND_WSIZE`](Self::WRITE_BEHIND_WSIZE) if `write_behind`.
    pub fn write_size(&self, server: u32, write_behind: bool) -> u32 {
        match self.wsize {
            Some(w) => w.min(server),
            None if write_behind => server.min(Self::WRITE_BEHIND_WSIZE),
            None => server,
        }
    }
}

impl Default for MountOptions {
    fn default() -> Self {
        Self {
            // mount.nfs mounts hard: a server that goes away makes calls
            // wait for it, not fail with EIO (which loses written data).
            client: ClientOptions {
                hard: true,
                ..ClientOptions::default()
            },
            cache: CacheTimes::default(),
            cto: true,
            read_only: false,
            rsize: None,
            wsize: None,
            wb_max_outstanding: None,
            wb_max_outstanding_bytes: None,
            dirty_limit: None,
            wb_expire: None,
            threads: 16,
            allow_other: None,
            exec: true,
            suid: false,
            dev: false,
            port: None,
            mount_port: None,
        }
    }
}

/// A mount option that was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionError {
    /// The name is not a known option.
    #[error("unknown mount option {0:?}")]
    Unknown(String),
    /// The option needs a value (`name=value`).
    #[error("mount option {0:?} needs a value")]
    MissingValue(String),
    /// The option takes no value.
    #[error("mount option {0:?} takes no value")]
    UnexpectedValue(String),
    /// The value is not valid for the option.
    #[error("bad value {value:?} for mount option {name:?}")]
    BadValue {
        /// The option.
        name: String,
        /// The value given.
        value: String,
    },
    /// A known option that rnfs does not implement, and why.
    #[error("mount option {name:?} is not supported: {why}")]
    Unsupported {
        /// The option.
        name: String,
        /// Why, and what to do instead.
        why: &'static str,
    },
    /// A port option disagrees with the port in the URL.
    #[error("mount option {name}={option} disagrees with port {url} in the URL")]
    PortConflict {
        /// `port` or `mountport`.
        name: &'static str,
        /// The option's port.
        option: u16,
        /// The URL's port.
        url: u16,
    },
}

/// Options accepted and ignored, for `fstab` compatibility.
const IGNORED: &[&str] = &[
    "defaults",
    "_netdev",
    "auto",
    "noauto",
    "user",
    "nouser",
    "tcp",
    "intr",
    "nointr",
    "nolock",
    "async",
    "rdirplus",
    "sharecache",
    "fg",
    "bg",
    "nofail",
    // The server keeps access times, as for the kernel's NFS client, and a
    // FUSE mount never updates them itself.
    "atime",
    "noatime",
    "relatime",
    "norelatime",
    "strictatime",
    "nostrictatime",
    "lazytime",
    "nolazytime",
    "diratime",
    "nodiratime",
    // NFSv3 namespace calls are synchronous on the server (RFC 1813).
    "dirsync",
    // Kernel NFS client tuning with no counterpart here.
    "resvport",
    "noresvport",
    "nosharecache",
    "nordirplus",
    "acl",
    "noacl",
    "fsc",
    "nofsc",
];

/// Options with a value accepted and ignored: fstab comments, systemd's
/// `x-` options, and `mount.nfs` addressing that the URL already gives.
const IGNORED_WITH_VALUE: &[&str] = &[
    "comment",
    "addr",
    "mountaddr",
    "clientaddr",
    "mounthost",
    "retry",
    "lookupcache",
    "namlen",
];

impl MountOptions {
    /// Applies a comma-separated option list (`ro,actimeo=5,hard`); later
    /// options override earlier ones.
    pub fn apply(&mut self, list: &str) -> Result<(), OptionError> {
        for opt in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            self.apply_one(opt)?;
        }
        Ok(())
    }

    fn apply_one(&mut self, opt: &str) -> Result<(), OptionError> {
        let (name, value) = match opt.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (opt, None),
        };
        let flag = || match value {
            None => Ok(()),
            Some(_) => Err(OptionError::UnexpectedValue(name.to_owned())),
        };
        match name {
            "ro" => self.read_only = flag().map(|()| true)?,
            "rw" => self.read_only = flag().map(|()| false)?,
            "hard" => self.client.hard = flag().map(|()| true)?,
            "soft" => self.client.hard = flag().map(|()| false)?,
            "cto" => self.cto = flag().map(|()| true)?,
            "nocto" => self.cto = flag().map(|()| false)?,
            "noac" => self.cache = flag().map(|()| CacheTimes::none())?,
            "exec" => self.exec = flag().map(|()| true)?,
            "noexec" => self.exec = flag().map(|()| false)?,
            "suid" => self.suid = flag().map(|()| true)?,
            "nosuid" => self.suid = flag().map(|()| false)?,
            "dev" => self.dev = flag().map(|()| true)?,
            "nodev" => self.dev = flag().map(|()| false)?,
            "sync" => {
                return Err(OptionError::Unsupported {
                    name: name.to_owned(),
                    why: "writes are always written back in the background; \
                          fsync(2) or close(2) waits for them to be committed \
                          (wb_expire bounds how long data stays unwritten)",
                })
            }
            // 0 is nfs(5)'s "ask the port mapper", which is what no port does.
            "port" => self.port = Some(number(name, value, 0, u16::MAX)?).filter(|&p| p != 0),
            "mountport" => {
                self.mount_port = Some(number(name, value, 0, u16::MAX)?).filter(|&p| p != 0);
            }
            "mountproto" => match value {
                Some("tcp") => {}
                _ => return Err(bad(name, value)),
            },
            "mountvers" => match value {
                Some("3") => {}
                _ => return Err(bad(name, value)),
            },
            "allow_other" => self.allow_other = flag().map(|()| Some(true))?,
            "noallow_other" => self.allow_other = flag().map(|()| Some(false))?,
            "acregmin" => self.cache.acregmin = secs(name, value)?,
            "acregmax" => self.cache.acregmax = secs(name, value)?,
            "acdirmin" => self.cache.acdirmin = secs(name, value)?,
            "acdirmax" => self.cache.acdirmax = secs(name, value)?,
            "actimeo" => {
                let t = secs(name, value)?;
                self.cache = CacheTimes {
                    acregmin: t,
                    acregmax: t,
                    acdirmin: t,
                    acdirmax: t,
                };
            }
            "timeo" => {
                let ds: u64 = number(name, value, 1, 6000)?;
                self.client.timeout = Duration::from_millis(ds * 100);
            }
            "retrans" => self.client.retrans = number(name, value, 0, 1000)?,
            "nconnect" => self.client.connections = number(name, value, 1, 16)?,
            "rsize" => self.rsize = Some(io_size(name, value)?),
            "wsize" => self.wsize = Some(io_size(name, value)?),
            "wb_max_outstanding" => {
                self.wb_max_outstanding = Some(number(name, value, 0, 1024)?);
            }
            "wb_max_outstanding_kb" => {
                let kb: u64 = number(name, value, 0, 1 << 20)?;
                self.wb_max_outstanding_bytes = Some(kb << 10);
            }
            "wb_expire" => {
                let s: u64 = number(name, value, 1, 3600)?;
                self.wb_expire = Some(Duration::from_secs(s));
            }
            "wb_dirty_mb" => {
                let mb: u64 = number(name, value, 1, 1 << 20)?;
                self.dirty_limit = Some(mb << 20);
            }
            "threads" => self.threads = number(name, value, 1, 1024)?,
            "vers" | "nfsvers" => match value {
                Some("3") => {}
                _ => return Err(bad(name, value)),
            },
            "proto" => match value {
                Some("tcp") => {}
                _ => return Err(bad(name, value)),
            },
            "sec" => match value {
                Some("sys") => {}
                _ => return Err(bad(name, value)),
            },
            "local_lock" => match value {
                Some("none" | "all" | "posix" | "flock") => {}
                _ => return Err(bad(name, value)),
            },
            _ if IGNORED.contains(&name) && value.is_none() => {}
            _ if value.is_some()
                && (IGNORED_WITH_VALUE.contains(&name) || name.starts_with("x-")) => {}
            // systemd's options without a value (`x-systemd.automount`).
            _ if name.starts_with("x-") => {}
            _ => return Err(OptionError::Unknown(opt.to_owned())),
        }
        Ok(())
    }
}

impl MountOptions {
    /// `url` with the `port` and `mountport` options applied where it gives
    /// none; a port given both ways must agree.
    pub fn url_with_ports(
        &self,
        url: &rnfs_client::NfsUrl,
    ) -> Result<rnfs_client::NfsUrl, OptionError> {
        let mut url = url.clone();
        for (name, option, in_url) in [
            ("port", self.port, &mut url.nfs_port),
            ("mountport", self.mount_port, &mut url.mount_port),
        ] {
            match (option, *in_url) {
                (Some(option), Some(url)) if option != url => {
                    return Err(OptionError::PortConflict { name, option, url });
                }
                (Some(option), _) => *in_url = Some(option),
                (None, _) => {}
            }
        }
        Ok(url)
    }
}

fn bad(name: &str, value: Option<&str>) -> OptionError {
    match value {
        None => OptionError::MissingValue(name.to_owned()),
        Some(v) => OptionError::BadValue {
            name: name.to_owned(),
            value: v.to_owned(),
        },
    }
}

fn number<T: std::str::FromStr + PartialOrd>(
    name: &str,
    value: Option<&str>,
    min: T,
    max: T,
) -> Result<T, OptionError> {
    let v = value.ok_or_else(|| OptionError::MissingValue(name.to_owned()))?;
    match v.parse::<T>() {
        Ok(n) if n >= min && n <= max => Ok(n),
        _ => Err(bad(name, value)),
    }
}

fn secs(name: &str, value: Option<&str>) -> Result<Duration, OptionError> {
    number(name, value, 0u64, 3600 * 24).map(Duration::from_secs)
}

/// `rsize`/`wsize`: 4 KiB to 1 MiB, rounded down to a multiple of 4 KiB.
fn io_size(name: &str, value: Option<&str>) -> Result<u32, OptionError> {
    number(name, value, 4096u32, 1 << 20).map(|n| n & !4095)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn write_size_defaults_to_the_servers_capped_for_write_behind() {
        let mut o = MountOptions::default();
        let cap = MountOptions::WRITE_BEHIND_WSIZE;
        assert_eq!(o.write_size(1 << 20, true), cap);
        assert_eq!(o.write_size(1 << 20, false), 1 << 20);
        assert_eq!(o.write_size(64 << 10, true), 64 << 10);
        o.apply("wsize=1048576").unwrap();
        assert_eq!(o.write_size(1 << 20, true), 1 << 20);
        assert_eq!(o.write_size(512 << 10, true), 512 << 10);
    }

    #[test]
    fn an_fstab_line_s_options_are_accepted() {
        let mut o = MountOptions::default();
        assert!(o.exec && !o.suid && !o.dev);
        o.apply(
            "defaults,_netdev,nofail,noatime,nodiratime,relatime,lazytime,noexec,nosuid,\
             nodev,x-systemd.automount,x-systemd.idle-timeout=60,comment=backup,\
             port=20490,mountport=20490,mountproto=tcp,mountvers=3,noresvport",
        )
        .unwrap();
        assert!(!o.exec && !o.suid && !o.dev);
        assert_eq!((o.port, o.mount_port), (Some(20490), Some(20490)));
        o.apply("exec,suid,dev").unwrap();
        assert!(o.exec && o.suid && o.dev);

        let url = rnfs_client::NfsUrl::parse("nfs://server/data").unwrap();
        let with = o.url_with_ports(&url).unwrap();
        assert_eq!((with.nfs_port, with.mount_port), (Some(20490), Some(20490)));
        let url = rnfs_client::NfsUrl::parse("nfs://server:2049/data").unwrap();
        assert_eq!(
            o.url_with_ports(&url).unwrap_err().to_string(),
            "mount option port=20490 disagrees with port 2049 in the URL"
        );

        let e = MountOptions::default().apply("rw,sync").unwrap_err();
        assert!(matches!(e, OptionError::Unsupported { .. }), "{e}");
        assert!(e.to_string().contains("fsync"), "{e}");
        let mut zero = MountOptions::default();
        zero.apply("port=0,mountport=0").unwrap();
        assert_eq!((zero.port, zero.mount_port), (None, None));
        for bad in [
            "noatime=1",
            "port=-1",
            "port=70000",
            "mountproto=udp",
            "frobnicate",
        ] {
            assert!(MountOptions::default().apply(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_mount_nfs_options() {
        let mut o = MountOptions::default();
        assert!(o.client.hard, "mount.nfs mounts hard by default");
        o.apply("soft").unwrap();
        assert!(!o.client.hard);
        o.apply("ro,acregmin=1,acregmax=7,timeo=15,retrans=4,hard,nconnect=4")
            .unwrap();
        o.apply("rsize=65536,wsize=70000,wb_max_outstanding=0,vers=3,nolock")
            .unwrap();
        assert_eq!(o.wb_max_outstanding_bytes, None);
        o.apply("wb_max_outstanding_kb=2048").unwrap();
        assert_eq!(o.wb_max_outstanding_bytes, Some(2 << 20));
        assert!(o.read_only);
        assert_eq!(o.cache.acregmin, Duration::from_secs(1));
        assert_eq!(o.cache.acregmax, Duration::from_secs(7));
        assert_eq!(o.cache.acdirmin, Duration::from_secs(30));
        assert_eq!(o.client.timeout, Duration::from_millis(1500));
        assert_eq!(o.client.retrans, 4);
        assert!(o.client.hard);
        assert_eq!(o.client.connections, 4);
        assert_eq!(o.rsize, Some(65536));
        assert_eq!(o.wsize, Some(69632));
        assert_eq!(o.wb_max_outstanding, Some(0));
        o.apply("actimeo=5").unwrap();
        assert_eq!(
            o.cache.bounds(true),
            (Duration::from_secs(5), Duration::from_secs(5))
        );
        o.apply("noac,rw,nocto").unwrap();
        assert_eq!(o.cache, CacheTimes::none());
        assert!(!o.read_only);
        assert!(!o.cto);
    }

    #[test]
    fn refuses_bad_options() {
        let mut o = MountOptions::default();
        assert!(matches!(o.apply("bogus"), Err(OptionError::Unknown(_))));
        assert!(matches!(
            o.apply("acregmin"),
            Err(OptionError::MissingValue(_))
        ));
        assert!(matches!(
            o.apply("ro=1"),
            Err(OptionError::UnexpectedValue(_))
        ));
        assert!(matches!(
            o.apply("vers=4"),
            Err(OptionError::BadValue { .. })
        ));
        assert!(matches!(
            o.apply("rsize=12"),
            Err(OptionError::BadValue { .. })
        ));
        assert!(matches!(
            o.apply("nconnect=x"),
            Err(OptionError::BadValue { .. })
        ));
        assert!(matches!(
            o.apply("wb_max_outstanding_kb=2097152"),
            Err(OptionError::BadValue { .. })
        ));
    }
}

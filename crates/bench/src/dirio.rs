//! `rnfs bench dirio`: the file-system work of `rnfs bench load --op
//! readdirplus`, done directly on a local directory, with no NFS in between.
//!
//! One thread lists the directory again and again: a fresh descriptor per
//! listing, `getdents64` into a `buffer`-byte buffer, and one
//! `fstatat(AT_SYMLINK_NOFOLLOW)` per entry other than `.` and `..`: what any
//! server answering READDIRPLUS with current attributes must ask the kernel
//! (a server that also needs each entry's file handle asks more). After
//! `warmup` the run measures for `duration`: entries/s, listings, and this
//! process's CPU time per entry (`getrusage`, user + system) over exactly the
//! measured window.
//!
//! It is the local baseline of the directory-size sweep: what the kernel
//! alone costs per entry on the very directory the server listed (dentry
//! lookups, inode cache misses as the directory outgrows the CPU's caches),
//! to be taken off the server's CPU per entry.

use std::ffi::CStr;
use std::fmt;
use std::io;
use std::mem::MaybeUninit;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, Mode, OFlags, RawDir, StatxFlags};
use serde::Serialize;

use crate::report::own_cpu_seconds;

/// One run's configuration.
#[derive(Debug, Clone)]
pub struct DirIoParams {
    /// The directory.
    pub path: PathBuf,
    /// `getdents64` buffer bytes, 1 KiB to 1 MiB.
    pub buffer: u32,
    /// Also look each entry's handle up by name (`list_once`), as a server
    /// does that has no cached handle for it.
    pub handles: bool,
    /// Unmeasured time before the measured window.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
}

impl DirIoParams {
    /// The command line's defaults for `path`.
    pub fn new(path: impl Into<PathBuf>) -> DirIoParams {
        DirIoParams {
            path: path.into(),
            buffer: 32 << 10,
            handles: false,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(3),
        }
    }

    fn validate(&self) -> Result<(), DirIoError> {
        let bad = |name, reason| Err(crate::InvalidParam { name, reason }.into());
        if !(1024..=(1 << 20)).contains(&self.buffer) {
            return bad("buffer", "must be 1K to 1M");
        }
        if self.duration.is_zero() {
            return bad("duration", "must be positive");
        }
        Ok(())
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirIoError {
    /// A parameter out of range.
    #[error(transparent)]
    InvalidParam(#[from] crate::InvalidParam),
    /// A system call on the directory failed.
    #[error("{what} of {}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The directory holds nothing but `.` and `..`.
    #[error("{} has no entries to list", path.display())]
    Empty {
        /// The directory.
        path: PathBuf,
    },
}

/// One run's result (JSON: `tool` `rnfs-bench-dirio`, `schema` 1).
#[derive(Debug, Clone, Serialize)]
pub struct DirIoResult {
    /// Always `rnfs-bench-dirio`.
    pub tool: &'static str,
    /// Version of this object's layout: 1.
    pub schema: u32,
    /// The directory.
    pub path: PathBuf,
    /// `getdents64` buffer bytes.
    pub buffer: u32,
    /// Whether each entry's handle was looked up too.
    pub handles: bool,
    /// Entries (without `.` and `..`) in the first full listing.
    pub directory_entries: u64,
    /// Warm-up seconds.
    pub warmup_s: f64,
    /// Measured seconds.
    pub duration_s: f64,
    /// Entries listed and stated in the window.
    pub entries: u64,
    /// `entries / duration_s`.
    pub entries_per_s: f64,
    /// Listings finished in the window.
    pub listings: u64,
    /// Entries that vanished between `getdents64` and `fstatat` (skipped).
    pub vanished: u64,
    /// User + system CPU seconds of this process over the window.
    pub cpu_s: f64,
    /// `cpu_s` per entry, in nanoseconds.
    pub cpu_ns_per_entry: f64,
    /// Wall time per entry (`1e9 / entries_per_s`), in nanoseconds.
    pub ns_per_entry: f64,
    /// Seconds between the CPU samples at the window's edges.
    pub cpu_window_s: f64,
}

impl fmt::Display for DirIoResult {
    /// A few lines for people; the JSON has everything.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "getdents64 ({} B) + {}fstatat per entry of {} ({} entries): {:.1} s after {:.1} s warm-up",
            self.buffer,
            if self.handles { "handle lookup + " } else { "" },
            self.path.display(),
            self.directory_entries,
            self.duration_s,
            self.warmup_s
        )?;
        writeln!(
            f,
            "  entries   {} ({:.0}/s, {:.0} ns each), {} listings{}",
            self.entries,
            self.entries_per_s,
            self.ns_per_entry,
            self.listings,
            if self.vanished > 0 {
                format!(", {} vanished", self.vanished)
            } else {
                String::new()
            }
        )?;
        write!(
            f,
            "  cpu       {:.0} ns CPU/entry ({:.2} s user+system over {:.2} s)",
            self.cpu_ns_per_entry, self.cpu_s, self.cpu_window_s
        )
    }
}

/// Counts of one stretch of listing.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    entries: u64,
    listings: u64,
    vanished: u64,
}

/// Lists `path` again and again, counting; `first` gets the entry count of
/// the first complete listing.
struct Lister<'a> {
    path: &'a Path,
    handles: bool,
    buf: Vec<MaybeUninit<u8>>,
    first: Option<u64>,
}

impl Lister<'_> {
    /// Lists until `until`, checking the clock at the end of each listing
    /// and every 4096 entries, so that a huge directory cannot overrun the
    /// window by a whole listing.
    fn run_until(&mut self, until: Instant) -> Result<Counts, DirIoError> {
        let mut counts = Counts::default();
        loop {
            let mut in_listing = 0u64;
            let mut failed = None;
            let complete = list_once(self.path, &mut self.buf, self.handles, |_, stated| {
                match stated {
                    Ok(()) => {
                        counts.entries += 1;
                        in_listing += 1;
                    }
                    // Removed since getdents64 read it: a server skips it too.
                    Err(rustix::io::Errno::NOENT) => counts.vanished += 1,
                    Err(e) => {
                        failed = Some(e);
                        return ControlFlow::Break(());
                    }
                }
                if counts.entries % 4096 == 0 && Instant::now() >= until {
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            })?;
            if let Some(e) = failed {
                return Err(io_err("fstatat", self.path)(e));
            }
            if !complete {
                return Ok(counts);
            }
            counts.listings += 1;
            if self.first.is_none() {
                if in_listing == 0 {
                    return Err(DirIoError::Empty {
                        path: self.path.to_path_buf(),
                    });
                }
                self.first = Some(in_listing);
            }
            if Instant::now() >= until {
                return Ok(counts);
            }
        }
    }
}

/// One listing of `dir` as a READDIRPLUS server asks the kernel for it: a
/// fresh descriptor, `getdents64` into `buf`, and for every entry but `.`
/// and `..`, `fstatat(AT_SYMLINK_NOFOLLOW)`; with `handle_lookup`, first
/// `statx(STATX_INO)` by name, standing in for `name_to_handle_at(dirfd,
/// name, 0)` (the same path walk and dentry lookup, then a read of the
/// inode; this crate has no unsafe code to call it, and rustix and nix do
/// not wrap it). `each` gets every name with the outcome of its calls and
/// may stop the listing. Returns whether the listing reached the end.
pub(crate) fn list_once(
    dir: &Path,
    buf: &mut [MaybeUninit<u8>],
    handle_lookup: bool,
    mut each: impl FnMut(&CStr, Result<(), rustix::io::Errno>) -> ControlFlow<()>,
) -> Result<bool, DirIoError> {
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io_err("open", dir))?;
    let mut entries = RawDir::new(&fd, buf);
    while let Some(entry) = entries.next() {
        let entry = entry.map_err(io_err("getdents64", dir))?;
        let name = entry.file_name();
        if is_dot(name) {
            continue;
        }
        let stated = (|| {
            if handle_lookup {
                rustix::fs::statx(&fd, name, AtFlags::SYMLINK_NOFOLLOW, StatxFlags::INO)?;
            }
            rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW).map(drop)
        })();
        if each(name, stated).is_break() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Runs one configuration: warm-up, then the measured window.
pub fn run(p: &DirIoParams) -> Result<DirIoResult, DirIoError> {
    p.validate()?;
    let mut lister = Lister {
        path: &p.path,
        handles: p.handles,
        buf: vec![MaybeUninit::uninit(); p.buffer as usize],
        first: None,
    };
    let start = Instant::now();
    lister.run_until(start + p.warmup)?;
    let (t0, cpu0) = (Instant::now(), own_cpu_seconds());
    let counts = lister.run_until(t0 + p.duration)?;
    let (t1, cpu1) = (Instant::now(), own_cpu_seconds());
    // The window is what was measured: it may overrun `duration` by the
    // last stretch between clock checks.
    let secs = t1.saturating_duration_since(t0).as_secs_f64();
    let cpu_s = (cpu1 - cpu0).max(0.0);
    let per_entry = |total: f64| {
        if counts.entries == 0 {
            f64::NAN
        } else {
            total * 1e9 / counts.entries as f64
        }
    };
    Ok(DirIoResult {
        tool: "rnfs-bench-dirio",
        schema: 1,
        path: p.path.clone(),
        buffer: p.buffer,
        handles: p.handles,
        directory_entries: lister.first.unwrap_or(counts.entries),
        warmup_s: p.warmup.as_secs_f64(),
        duration_s: secs,
        entries: counts.entries,
        entries_per_s: counts.entries as f64 / secs,
        listings: counts.listings,
        vanished: counts.vanished,
        cpu_s,
        cpu_ns_per_entry: per_entry(cpu_s),
        ns_per_entry: per_entry(secs),
        cpu_window_s: secs,
    })
}

fn is_dot(name: &CStr) -> bool {
    matches!(name.to_bytes(), b"." | b"..")
}

fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(rustix::io::Errno) -> DirIoError + 'a {
    move |e| DirIoError::Io {
        what,
        path: path.to_path_buf(),
        source: e.into(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn params(path: &Path) -> DirIoParams {
        let mut p = DirIoParams::new(path);
        p.warmup = Duration::ZERO;
        p.duration = Duration::from_millis(50);
        p.buffer = 1024;
        p
    }

    #[test]
    fn counts_every_entry_of_each_listing() {
        let dir = tempfile::tempdir().unwrap();
        // More than one 1 KiB buffer of entries, and a subdirectory.
        for i in 0..100 {
            std::fs::write(dir.path().join(format!("entry-{i:03}")), b"").unwrap();
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let r = run(&params(dir.path())).unwrap();
        assert_eq!(r.directory_entries, 101);
        assert!(r.listings >= 1, "{r:?}");
        // Whole listings, plus at most the one the window ended in.
        assert!(r.entries >= r.listings * 101, "{r:?}");
        assert!(r.entries < (r.listings + 1) * 101, "{r:?}");
        assert_eq!(r.vanished, 0);
        assert!(r.cpu_ns_per_entry > 0.0, "{r:?}");
    }

    #[test]
    fn an_empty_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = run(&params(dir.path())).unwrap_err();
        assert!(matches!(e, DirIoError::Empty { .. }), "{e}");
    }

    #[test]
    fn a_file_is_not_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let e = run(&params(&file)).unwrap_err();
        assert!(
            matches!(e, DirIoError::Io { what: "open", .. }),
            "{e}: {:?}",
            e
        );
        let e = run(&params(&dir.path().join("missing"))).unwrap_err();
        assert!(matches!(e, DirIoError::Io { what: "open", .. }), "{e}");
    }

    #[test]
    fn rejects_a_tiny_buffer() {
        let mut p = params(Path::new("/"));
        p.buffer = 100;
        assert!(matches!(
            run(&p).unwrap_err(),
            DirIoError::InvalidParam(crate::InvalidParam { name: "buffer", .. })
        ));
    }
}

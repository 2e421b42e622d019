//! The host's side of a run: `/dev/cpu_dma_latency` and the open-file limit.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Holds `/dev/cpu_dma_latency` open at 0 µs: while it is open the kernel
/// keeps CPUs out of deep idle states (PM QoS), so a wake-up does not pay tens
/// of microseconds of exit latency. Closing the file (drop) lifts it.
#[derive(Debug)]
pub(crate) struct DmaLatency(#[allow(dead_code, reason = "held open")] File);

impl DmaLatency {
    /// Opens and sets it, or `None` when the file is missing or not writable.
    pub(crate) fn hold() -> Option<DmaLatency> {
        let mut f = OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")
            .ok()?;
        // The interface takes a binary s32 (an ASCII hex string also works).
        f.write_all(&0i32.to_ne_bytes()).ok()?;
        Some(DmaLatency(f))
    }
}

/// Raises RLIMIT_NOFILE to at least `need` descriptors: the soft limit up to
/// the hard one, and the hard one (root only) up to `/proc/sys/fs/nr_open`.
pub(crate) fn raise_fd_limit(need: u64) -> io::Result<()> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    if soft >= need {
        return Ok(());
    }
    if hard >= need {
        return setrlimit(Resource::RLIMIT_NOFILE, need, hard).map_err(io::Error::from);
    }
    let nr_open = fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(hard);
    if need > nr_open {
        return Err(io::Error::other(format!(
            "{need} descriptors needed, the system allows {nr_open} (fs.nr_open)"
        )));
    }
    setrlimit(Resource::RLIMIT_NOFILE, need, need).map_err(|e| {
        io::Error::other(format!(
            "{need} descriptors needed, the hard limit is {hard} and cannot be raised: {e}"
        ))
    })
}

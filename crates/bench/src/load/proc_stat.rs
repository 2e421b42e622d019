//! CPU time and memory: the server's from `/proc/PID`, this process's from
//! `getrusage`.

use std::fs;
use std::time::Instant;

use nix::unistd::{sysconf, SysconfVar};

use crate::report::own_cpu_seconds;

/// Clock ticks per second of `/proc/PID/stat` times (`sysconf(_SC_CLK_TCK)`,
/// 100 if unknown).
pub(crate) fn clock_ticks() -> u64 {
    match sysconf(SysconfVar::CLK_TCK) {
        Ok(Some(t)) if t > 0 => t as u64,
        _ => 100,
    }
}

/// One look at both processes at the edge of the measured window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    /// When it was taken.
    pub(crate) at: Instant,
    /// The server's utime + stime in clock ticks, and its RSS in KiB.
    pub(crate) server: Option<(u64, u64)>,
    /// This process's user + system CPU seconds.
    pub(crate) own_cpu_s: f64,
}

impl Sample {
    /// Reads `/proc/<pid>/stat` and `/proc/<pid>/status` (when a PID is
    /// given) and `getrusage(RUSAGE_SELF)`.
    pub(crate) fn take(pid: Option<u32>) -> Sample {
        let server = pid.and_then(|pid| {
            let ticks = cpu_ticks(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
            let rss = fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| rss_kib(&s))
                .unwrap_or(0);
            Some((ticks, rss))
        });
        Sample {
            at: Instant::now(),
            server,
            own_cpu_s: own_cpu_seconds(),
        }
    }
}

/// utime + stime (fields 14 and 15) of a `/proc/PID/stat` line. The command
/// name (field 2) may hold spaces and parentheses, so fields are counted from
/// its closing parenthesis.
pub(crate) fn cpu_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name: utime is field 14.
    let mut fields = after.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// `VmRSS` in KiB from `/proc/PID/status`.
pub(crate) fn rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_name() {
        let line = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    1234 567 0 0 20 0 9 0 100 1000000 250 18446744073709551615";
        assert_eq!(cpu_ticks(line), Some(1234 + 567));
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn rss_is_read_from_status() {
        let s = "Name:\trnfs\nVmPeak:\t  9000 kB\nVmRSS:\t  4321 kB\nThreads:\t9\n";
        assert_eq!(rss_kib(s), Some(4321));
        assert_eq!(rss_kib("Name:\tkthreadd\n"), None);
    }

    #[test]
    fn own_process_has_cpu_time_and_ticks() {
        let s = fs::read_to_string("/proc/self/stat").unwrap();
        assert!(cpu_ticks(&s).is_some());
        assert!(clock_ticks() > 0);
    }
}

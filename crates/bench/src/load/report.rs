//! The result of a run: the JSON object of the contract (`schema` 1) plus a
//! few added fields, and its text summary.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use hdrhistogram::Histogram;
use serde::Serialize;

use super::engine::Stats;
use super::ops::{proc_name, Workload};
use super::proc_stat::Sample;
use super::{LoadOp, LoadParams};

/// Most points of `latency_cdf`.
const CDF_POINTS: usize = 200;

/// Latency of the calls in the measured window, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LatencyUs {
    /// Fastest call.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Slowest call.
    pub max: f64,
}

/// The server process over the measured window (`/proc/PID`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ServerUsage {
    /// Its process id.
    pub pid: u32,
    /// utime + stime over the window, in seconds (clock-tick resolution).
    pub cpu_s: f64,
    /// `cpu_s` per call, in microseconds.
    pub cpu_us_per_call: f64,
    /// RSS at the window's start, KiB.
    pub rss_kib_start: u64,
    /// RSS at the window's end, KiB.
    pub rss_kib_end: u64,
    /// The resolution of `cpu_s` (`sysconf(_SC_CLK_TCK)`).
    pub clock_ticks_per_s: u64,
}

/// This process over the measured window (`getrusage`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LoadgenUsage {
    /// User + system CPU seconds.
    pub cpu_s: f64,
    /// `cpu_s` per call, in microseconds.
    pub cpu_us_per_call: f64,
}

/// One run's result: the fields of the `rnfs-bench-load` schema 1 JSON
/// object, in its order, then additions.
#[derive(Debug, Clone, Serialize)]
pub struct LoadResult {
    /// Always `rnfs-bench-load`.
    pub tool: &'static str,
    /// Version of this object's layout: 1.
    pub schema: u32,
    /// The caller's label.
    pub label: Option<String>,
    /// The URL as given.
    pub url: String,
    /// The op.
    pub op: LoadOp,
    /// Measured connections.
    pub connections: u32,
    /// Calls in flight per connection.
    pub depth: u32,
    /// READ/WRITE size.
    pub size: u32,
    /// Test file size.
    pub file_size: u64,
    /// Entries of the directory.
    pub dir_entries: u64,
    /// Digits of its entry names (0: unpadded).
    pub name_width: u8,
    /// Idle connections opened.
    pub idle_connections: u64,
    /// Load-generator threads.
    pub threads: u32,
    /// Warm-up seconds.
    pub warmup_s: f64,
    /// Measured seconds.
    pub duration_s: f64,
    /// Calls completed in the window (failed ones included; create-remove:
    /// pairs).
    pub calls: u64,
    /// `calls / duration_s`.
    pub calls_per_s: f64,
    /// READ/WRITE payload, 10^6 bytes per second.
    pub mb_per_s: f64,
    /// Latency summary.
    pub latency_us: LatencyUs,
    /// `[latency_us, fraction of calls at most that slow]`, fraction
    /// ascending to 1.0, at most 200 points.
    pub latency_cdf: Vec<[f64; 2]>,
    /// Failed calls in the window by status name (`NFS3ERR_*`, `RPC_*`,
    /// `GARBAGE_REPLY`, `BAD_RESULTS`).
    pub errors: BTreeMap<String, u64>,
    /// Failed calls in the window.
    pub error_calls: u64,
    /// The server's CPU and memory, with `--server-pid`.
    pub server: Option<ServerUsage>,
    /// The load generator's own CPU.
    pub loadgen: LoadgenUsage,
    /// Whether `/dev/cpu_dma_latency` was held at 0 during the run.
    pub dma_latency_held: bool,
    /// Added: failures outside the window (warm-up, drain) and replies that
    /// matched no call.
    pub errors_outside_window: u64,
    /// Added: RPCs in the window by procedure (mix proportions, COMMITs).
    pub calls_by_proc: BTreeMap<&'static str, u64>,
    /// Added: READDIRPLUS entries returned in the window.
    pub entries: u64,
    /// Added: `entries / duration_s`.
    pub entries_per_s: f64,
    /// Added (readdirplus): mean call latency per entry returned, µs.
    pub us_per_entry: Option<f64>,
    /// Added (readdirplus): server CPU per entry returned, µs.
    pub server_cpu_us_per_entry: Option<f64>,
    /// Added: complete directory listings in the window.
    pub listings: u64,
    /// Added: WRITEs per COMMIT per connection.
    pub commit_every: u32,
    /// Added: READDIRPLUS maxcount (dircount is one eighth).
    pub dir_page: u32,
    /// Added: seconds between the CPU samples at the window's edges (the
    /// CPU figures' real denominator; `duration_s` plus scheduling delay).
    pub cpu_window_s: f64,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// Latency summary in µs (zeros when empty).
pub(crate) fn latency(h: &Histogram<u64>) -> LatencyUs {
    if h.is_empty() {
        return LatencyUs::default();
    }
    LatencyUs {
        min: us(h.min()),
        mean: h.mean() / 1e3,
        p50: us(h.value_at_quantile(0.5)),
        p90: us(h.value_at_quantile(0.9)),
        p99: us(h.value_at_quantile(0.99)),
        p999: us(h.value_at_quantile(0.999)),
        max: us(h.max()),
    }
}

/// At most [`CDF_POINTS`] `[µs, fraction]` points, fraction strictly
/// ascending and ending at 1.0; dense in the tail.
pub(crate) fn cdf(h: &Histogram<u64>) -> Vec<[f64; 2]> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut points: Vec<[f64; 2]> = Vec::new();
    for v in h.iter_quantiles(4) {
        let q = v.quantile();
        if points.last().is_none_or(|last| q > last[1]) {
            points.push([us(v.value_iterated_to()), q]);
        }
    }
    if points.len() > CDF_POINTS {
        let n = points.len();
        let keep = CDF_POINTS - 1;
        let mut thinned: Vec<[f64; 2]> = (0..keep).map(|i| points[i * (n - 1) / keep]).collect();
        thinned.push(points[n - 1]);
        thinned.dedup_by(|b, a| b[1] <= a[1]);
        points = thinned;
    }
    match points.last_mut() {
        Some(last) if last[1] < 1.0 => points.push([us(h.max()), 1.0]),
        Some(last) => last[1] = 1.0,
        None => {}
    }
    points
}

fn per_call(seconds: f64, calls: u64) -> f64 {
    if calls == 0 {
        f64::NAN
    } else {
        seconds * 1e6 / calls as f64
    }
}

/// Assembles the result of a run.
#[allow(clippy::too_many_arguments, reason = "one call site, all distinct")]
pub(crate) fn build(
    p: &LoadParams,
    work: &Workload,
    stats: Stats,
    before: &Sample,
    after: &Sample,
    ticks: u64,
    idle_connections: usize,
    dma_latency_held: bool,
) -> LoadResult {
    let secs = p.duration.as_secs_f64();
    let server = match (p.server_pid, before.server, after.server) {
        (Some(pid), Some((t0, rss0)), Some((t1, rss1))) => {
            let cpu_s = t1.saturating_sub(t0) as f64 / ticks.max(1) as f64;
            Some(ServerUsage {
                pid,
                cpu_s,
                cpu_us_per_call: per_call(cpu_s, stats.calls),
                rss_kib_start: rss0,
                rss_kib_end: rss1,
                clock_ticks_per_s: ticks,
            })
        }
        (Some(pid), ..) => {
            eprintln!("rnfs bench load: cannot read /proc/{pid}/stat: no server CPU figures");
            None
        }
        _ => None,
    };
    let own = (after.own_cpu_s - before.own_cpu_s).max(0.0);
    let lat = latency(&stats.hist);
    let readdir = work.op == LoadOp::Readdirplus && stats.entries > 0;
    LoadResult {
        tool: "rnfs-bench-load",
        schema: 1,
        label: p.label.clone(),
        url: p.url.clone(),
        op: p.op,
        connections: p.connections,
        depth: p.depth,
        size: p.size,
        file_size: p.file_size,
        dir_entries: p.dir_entries,
        name_width: p.name_width,
        idle_connections: idle_connections as u64,
        threads: p.threads,
        warmup_s: p.warmup.as_secs_f64(),
        duration_s: secs,
        calls: stats.calls,
        calls_per_s: stats.calls as f64 / secs,
        mb_per_s: stats.bytes as f64 / secs / 1e6,
        latency_us: lat,
        latency_cdf: cdf(&stats.hist),
        errors: stats
            .errors
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect(),
        error_calls: stats.error_calls,
        server,
        loadgen: LoadgenUsage {
            cpu_s: own,
            cpu_us_per_call: per_call(own, stats.calls),
        },
        dma_latency_held,
        errors_outside_window: stats.errors_outside,
        calls_by_proc: stats
            .by_proc
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (proc_name(i), *n))
            .collect(),
        entries: stats.entries,
        entries_per_s: stats.entries as f64 / secs,
        us_per_entry: readdir.then(|| lat.mean * stats.calls as f64 / stats.entries as f64),
        server_cpu_us_per_entry: server
            .filter(|_| readdir)
            .map(|s| s.cpu_s * 1e6 / stats.entries as f64),
        listings: stats.listings,
        commit_every: p.commit_every,
        dir_page: p.dir_page,
        cpu_window_s: after.at.saturating_duration_since(before.at).as_secs_f64(),
    }
}

impl fmt::Display for LoadResult {
    /// A few lines for people; the JSON has everything.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut head = format!(
            "{} {}x{} ({} thread{}",
            self.op.name(),
            self.connections,
            self.depth,
            self.threads,
            if self.threads == 1 { "" } else { "s" }
        );
        if self.idle_connections > 0 {
            let _ = write!(head, ", {} idle connections", self.idle_connections);
        }
        if let Some(label) = &self.label {
            let _ = write!(head, ", {label}");
        }
        writeln!(
            f,
            "{head}): {:.1} s after {:.1} s warm-up",
            self.duration_s, self.warmup_s
        )?;
        writeln!(
            f,
            "  calls     {} ({:.0}/s), {:.1} MB/s, {} failed",
            self.calls, self.calls_per_s, self.mb_per_s, self.error_calls
        )?;
        let l = &self.latency_us;
        writeln!(
            f,
            "  latency   us: min {:.1}  p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}  mean {:.1}",
            l.min, l.p50, l.p90, l.p99, l.p999, l.max, l.mean
        )?;
        if !self.errors.is_empty() {
            let list: Vec<String> = self
                .errors
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            writeln!(f, "  errors    {}", list.join(", "))?;
        }
        if self.errors_outside_window > 0 {
            writeln!(
                f,
                "  errors    {} outside the measured window",
                self.errors_outside_window
            )?;
        }
        if self.entries > 0 {
            write!(
                f,
                "  entries   {} ({:.0}/s, {} complete listings)",
                self.entries, self.entries_per_s, self.listings
            )?;
            if let Some(us) = self.us_per_entry {
                write!(f, ", {us:.3} us/entry")?;
            }
            if let Some(us) = self.server_cpu_us_per_entry {
                write!(f, ", server CPU {us:.3} us/entry")?;
            }
            writeln!(f)?;
        }
        if self.calls_by_proc.len() > 1 {
            let list: Vec<String> = self
                .calls_by_proc
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            writeln!(f, "  rpcs      {}", list.join(", "))?;
        }
        match &self.server {
            Some(s) => writeln!(
                f,
                "  server    pid {}: {:.2} us CPU/call ({:.2} s), RSS {} -> {} KiB",
                s.pid, s.cpu_us_per_call, s.cpu_s, s.rss_kib_start, s.rss_kib_end
            )?,
            None => writeln!(f, "  server    (no --server-pid)")?,
        }
        writeln!(
            f,
            "  loadgen   {:.2} us CPU/call ({:.2} s)",
            self.loadgen.cpu_us_per_call, self.loadgen.cpu_s
        )?;
        write!(
            f,
            "  /dev/cpu_dma_latency {}",
            if self.dma_latency_held {
                "held at 0"
            } else {
                "not held"
            }
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn cdf_is_ascending_bounded_and_ends_at_one() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
        for i in 1..=100_000u64 {
            h.record(1000 + (i * 7919) % 5_000_000).unwrap();
        }
        let c = cdf(&h);
        assert!(!c.is_empty() && c.len() <= CDF_POINTS);
        assert!(c
            .windows(2)
            .all(|w| w[0][1] < w[1][1] && w[0][0] <= w[1][0]));
        assert_eq!(c.last().unwrap()[1], 1.0);
        let l = latency(&h);
        assert!(l.min <= l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99);
        assert!(l.p99 <= l.p999 && l.p999 <= l.max);
    }
}

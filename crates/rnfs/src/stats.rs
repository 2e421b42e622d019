//! `rnfs stats`: a running server's figures, read from its admin socket and
//! printed like nfsstat (or as JSON); `--watch` redraws them like top.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use rnfs_server::metrics::{ClientSnapshot, ProcedureSnapshot, StatsSnapshot};

use crate::admin::cli::{client_socket_path, report, SOCKET_HELP};
use crate::admin::client::{AdminClient, AdminError};
use crate::admin::protocol::Request;

pub(crate) const STATS_ABOUT: &str = "\
Print a running server's statistics, read from its admin socket: per-procedure \
calls, share of all calls, errors and service-time percentiles (from the record \
being read to the reply being sent, or held for coalescing); bytes read and \
written; connections; and the \
scheduler's own figures: threads per pool, idle threads, threads woken but not yet \
running (now and peak), wake-ups per call, wake-ups that found nothing to do, and \
the hand-off latency (a connection being queued to a thread picking it up) as \
percentiles and as a histogram of 300 ns bins.

Counters are totals since the server started. With --watch SECS the report is \
redrawn every SECS seconds (the screen is cleared when standard output is a \
terminal; otherwise reports follow one another), and per-second rates over the \
last interval are added. Latency percentiles are always since start.

With --json the server's snapshot is printed as one JSON object per line (one per \
interval with --watch); its fields are documented with rnfs_server::metrics::StatsSnapshot.

Exit status: 0 on success; 1 if the server cannot be reached; 2 for bad arguments.";

pub(crate) const STATS_EXAMPLES: &str = "\
Examples:
  rnfs stats                          the report, once
  rnfs stats --watch 1                refresh every second, with rates
  rnfs stats --clients --exports      add per-client and per-export tables
  rnfs stats --json | jq .procedures  machine-readable
  rnfs stats --socket /tmp/rnfs.sock  a server started with --admin-socket";

#[derive(Debug, Args)]
pub(crate) struct StatsArgs {
    #[arg(long, value_name = "PATH", help = SOCKET_HELP)]
    socket: Option<PathBuf>,

    /// Print the snapshot as JSON (one object per line).
    #[arg(long)]
    json: bool,

    /// Redraw every SECS seconds (fractions allowed), with rates, until interrupted.
    #[arg(long, value_name = "SECS", value_parser = parse_interval)]
    watch: Option<f64>,

    /// Add the per-client table.
    #[arg(long)]
    clients: bool,

    /// Add the per-export table.
    #[arg(long)]
    exports: bool,
}

fn parse_interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if t.is_finite() && (0.1..=86_400.0).contains(&t) => Ok(t),
        Ok(_) => Err("must be between 0.1 and 86400".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs `rnfs stats`.
pub(crate) fn run(args: StatsArgs) -> ExitCode {
    let path = client_socket_path(args.socket.clone());
    let fetch = || -> Result<StatsSnapshot, AdminError> {
        AdminClient::connect(&path)?.call(&Request::Stats)
    };
    let Some(interval) = args.watch else {
        return match fetch() {
            Ok(s) => {
                print_snapshot(&args, &s, None);
                ExitCode::SUCCESS
            }
            Err(e) => report("stats", &e),
        };
    };
    let tty = std::io::stdout().is_terminal();
    let mut previous: Option<StatsSnapshot> = None;
    loop {
        let snapshot = match fetch() {
            Ok(s) => s,
            Err(e) => return report("stats", &e),
        };
        if tty && !args.json {
            // Home and clear, as top and watch(1) do.
            print!("\x1b[H\x1b[2J");
        } else if previous.is_some() && !args.json {
            println!();
        }
        print_snapshot(&args, &snapshot, previous.as_ref());
        if std::io::stdout().flush().is_err() {
            return ExitCode::SUCCESS; // the reader went away (e.g. `| head`)
        }
        previous = Some(snapshot);
        std::thread::sleep(Duration::from_secs_f64(interval));
    }
}

fn print_snapshot(args: &StatsArgs, s: &StatsSnapshot, previous: Option<&StatsSnapshot>) {
    if args.json {
        match serde_json::to_string(s) {
            Ok(line) => println!("{line}"),
            Err(e) => eprintln!("rnfs stats: cannot encode the snapshot: {e}"),
        }
        return;
    }
    let options = ReportOptions {
        clients: args.clients,
        exports: args.exports,
    };
    print!("{}", render(s, previous, &options));
}

/// What the text report includes beyond the default sections.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ReportOptions {
    /// The per-client table.
    pub(crate) clients: bool,
    /// The per-export table.
    pub(crate) exports: bool,
}

/// The text report for `s`; with `previous` (an earlier snapshot of the same
/// server run), rates over the interval between them are added.
pub(crate) fn render(
    s: &StatsSnapshot,
    previous: Option<&StatsSnapshot>,
    options: &ReportOptions,
) -> String {
    // A restarted server (uptime went back) has fresh counters: no rates.
    let previous = previous.filter(|p| s.uptime_secs > p.uptime_secs);
    let interval = previous.map(|p| (p, s.uptime_secs - p.uptime_secs));
    let mut out = String::new();
    let t = &s.transport;
    let _ = writeln!(
        out,
        "rnfs {} up {}: {} connection(s) open, {} accepted, {} rejected, {} closed for bad \
         input, {} closed idle, {} throttled",
        s.version,
        human_duration(s.uptime_secs),
        t.connections,
        t.accepted,
        t.rejected,
        t.closed_bad_input,
        t.closed_idle,
        t.throttled
    );
    let _ = write!(
        out,
        "data: {} read, {} written",
        human_bytes(s.bytes_read as f64),
        human_bytes(s.bytes_written as f64)
    );
    if let Some((p, dt)) = interval {
        let _ = write!(
            out,
            " ({}/s read, {}/s written over the last {dt:.1}s)",
            human_bytes(s.bytes_read.saturating_sub(p.bytes_read) as f64 / dt),
            human_bytes(s.bytes_written.saturating_sub(p.bytes_written) as f64 / dt),
        );
    }
    out.push('\n');
    let calls: u64 = s.procedures.iter().map(|p| p.calls).sum();
    let _ = write!(
        out,
        "reply coalescing: {} replies held to share a write ({} of calls)",
        s.replies_held,
        percent(s.replies_held, calls)
    );
    if let Some((p, dt)) = interval {
        let _ = write!(
            out,
            ", {:.0}/s over the last {dt:.1}s",
            s.replies_held.saturating_sub(p.replies_held) as f64 / dt
        );
    }
    out.push('\n');
    out.push('\n');
    render_procedures(&mut out, s, interval);
    out.push('\n');
    render_sched(&mut out, s, interval);
    if let Some(d) = &s.drc {
        let _ = writeln!(
            out,
            "duplicate request cache: {} hits, {} misses, {} entries ({}), {} evicted",
            d.hits,
            d.misses,
            d.entries,
            human_bytes(d.bytes as f64),
            d.evictions
        );
    }
    if options.clients {
        out.push('\n');
        render_clients(&mut out, s);
    }
    if options.exports {
        out.push('\n');
        render_exports(&mut out, s);
    }
    out
}

fn procedure_errors(p: &ProcedureSnapshot) -> u64 {
    p.errors.values().sum()
}

fn render_procedures(out: &mut String, s: &StatsSnapshot, interval: Option<(&StatsSnapshot, f64)>) {
    let total: u64 = s.procedures.iter().map(|p| p.calls).sum();
    let errors: u64 = s.procedures.iter().map(procedure_errors).sum();
    let _ = write!(out, "calls: {total} total, {errors} with errors");
    let previous_calls = |p: &ProcedureSnapshot| -> u64 {
        interval
            .and_then(|(prev, _)| {
                prev.procedures.iter().find(|q| {
                    q.program == p.program && q.version == p.version && q.procedure == p.procedure
                })
            })
            .map_or(0, |q| q.calls)
    };
    if let Some((prev, dt)) = interval {
        let before: u64 = prev.procedures.iter().map(|p| p.calls).sum();
        let _ = write!(out, ", {:.1}/s", total.saturating_sub(before) as f64 / dt);
    }
    out.push('\n');
    if s.procedures.is_empty() {
        return;
    }
    let mut header = vec![
        "PROGRAM",
        "PROCEDURE",
        "CALLS",
        "%",
        "ERRORS",
        "P50 µs",
        "P99 µs",
    ];
    if interval.is_some() {
        header.push("CALLS/s");
    }
    let rows: Vec<Vec<String>> = s
        .procedures
        .iter()
        .map(|p| {
            let mut row = vec![
                format!("{}{}", p.program, p.version),
                p.procedure.clone(),
                p.calls.to_string(),
                percent(p.calls, total),
                procedure_errors(p).to_string(),
                format!("{:.1}", p.latency.p50_us),
                format!("{:.1}", p.latency.p99_us),
            ];
            if let Some((_, dt)) = interval {
                row.push(format!(
                    "{:.1}",
                    p.calls.saturating_sub(previous_calls(p)) as f64 / dt
                ));
            }
            row
        })
        .collect();
    let right = [false, false, true, true, true, true, true, true];
    out.push_str(&format_table(&header, &right[..header.len()], &rows));
    // Errors by status over all procedures, most frequent first.
    let mut by_status = std::collections::BTreeMap::<&str, u64>::new();
    for p in &s.procedures {
        for (status, n) in &p.errors {
            *by_status.entry(status.as_str()).or_default() += n;
        }
    }
    if !by_status.is_empty() {
        let mut statuses: Vec<_> = by_status.into_iter().collect();
        statuses.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let list: Vec<String> = statuses.iter().map(|(st, n)| format!("{st} {n}")).collect();
        let _ = writeln!(out, "errors by status: {}", list.join(", "));
    }
}

fn render_sched(out: &mut String, s: &StatsSnapshot, interval: Option<(&StatsSnapshot, f64)>) {
    let sc = &s.sched;
    let threads: u64 = sc.pools.iter().map(|p| p.threads).sum();
    let bounds = if sc.min_threads == sc.max_threads {
        format!("fixed at {}", sc.min_threads)
    } else {
        format!("min {}, max {}", sc.min_threads, sc.max_threads)
    };
    let _ = writeln!(
        out,
        "scheduler: policy {}, pool mode {}, {} pool(s), {threads} thread(s) ({bounds}), at \
         most {} waking per pool",
        sc.policy,
        sc.pool_mode,
        sc.pools.len(),
        sc.max_waking
    );
    if !sc.pools.is_empty() {
        let rows: Vec<Vec<String>> = sc
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| {
                // Over the interval when watching, else since start.
                let (wakeups, wasted, dispatches) =
                    match interval.and_then(|(prev, _)| prev.sched.pools.get(i)) {
                        Some(q) => (
                            p.wakeups.saturating_sub(q.wakeups),
                            p.wasted_wakeups.saturating_sub(q.wasted_wakeups),
                            p.dispatches.saturating_sub(q.dispatches),
                        ),
                        None => (p.wakeups, p.wasted_wakeups, p.dispatches),
                    };
                vec![
                    i.to_string(),
                    p.threads.to_string(),
                    p.idle.to_string(),
                    format!("{}/{}", p.waking, p.peak_waking),
                    dispatches.to_string(),
                    ratio(wakeups, dispatches),
                    percent(wasted, wakeups),
                ]
            })
            .collect();
        out.push_str(&format_table(
            &[
                "POOL",
                "THREADS",
                "IDLE",
                "WAKING NOW/PEAK",
                if interval.is_some() {
                    "DISPATCHES (interval)"
                } else {
                    "DISPATCHES"
                },
                "WAKE-UPS/CALL",
                "WASTED WAKE-UPS",
            ],
            &[true, true, true, true, true, true, true],
            &rows,
        ));
    }
    let h = &sc.handoff;
    let _ = writeln!(
        out,
        "hand-off (queued to picked up): p50 {:.1} µs, p99 {:.1} µs, mean {:.1} µs, max {:.1} \
         µs over {} dispatches",
        h.p50_us, h.p99_us, h.mean_us, h.max_us, h.count
    );
    if let Some(line) = histogram_line(&sc.handoff_bins_300ns) {
        let _ = writeln!(out, "{line}");
    }
}

/// The 300 ns hand-off bins as a sparkline up to the last non-empty bin, then
/// the share of the first bins and of the rest.
fn histogram_line(bins: &[u64]) -> Option<String> {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    const SHOWN: usize = 48;
    const NAMED: usize = 3;
    let total: u64 = bins.iter().sum();
    let last = bins.iter().rposition(|&n| n > 0)?;
    let max = bins.iter().copied().max().unwrap_or(1).max(1);
    let spark: String = bins[..=last.min(SHOWN - 1)]
        .iter()
        .map(|&n| match n {
            0 => ' ',
            n => BARS[((n * 7) / max) as usize],
        })
        .collect();
    let more = if last >= SHOWN { "…" } else { "" };
    let mut shares: Vec<String> = bins
        .iter()
        .take(NAMED)
        .enumerate()
        .map(|(i, &n)| format!("{}-{} ns {}", 300 * i, 300 * (i + 1), percent(n, total)))
        .collect();
    if bins.len() > NAMED {
        let rest: u64 = bins[NAMED..].iter().sum();
        shares.push(format!(">= {} ns {}", 300 * NAMED, percent(rest, total)));
    }
    Some(format!(
        "hand-off histogram (300 ns bins, last holds the rest): |{spark}{more}| {}",
        shares.join(", ")
    ))
}

fn render_clients(out: &mut String, s: &StatsSnapshot) {
    let _ = writeln!(out, "clients: {}", s.clients.len());
    if !s.clients.is_empty() {
        out.push_str(&clients_table(&s.clients));
    }
}

/// The per-client table of `rnfs stats --clients` and `rnfs admin clients`.
pub(crate) fn clients_table(clients: &[ClientSnapshot]) -> String {
    let rows: Vec<Vec<String>> = clients
        .iter()
        .map(|c| {
            vec![
                c.addr.clone(),
                c.connections.to_string(),
                c.calls.to_string(),
                human_bytes(c.bytes_read as f64),
                human_bytes(c.bytes_written as f64),
                if c.mounts.is_empty() {
                    "-".into()
                } else {
                    c.mounts.join(",")
                },
            ]
        })
        .collect();
    format_table(
        &["CLIENT", "CONNS", "CALLS", "READ", "WRITTEN", "MOUNTS"],
        &[false, true, true, true, true, false],
        &rows,
    )
}

fn render_exports(out: &mut String, s: &StatsSnapshot) {
    let _ = writeln!(out, "exports: {}", s.exports.len());
    let rows: Vec<Vec<String>> = s
        .exports
        .iter()
        .map(|e| {
            vec![
                e.mount_path.clone(),
                e.id.to_string(),
                e.access.clone(),
                e.calls.to_string(),
                human_bytes(e.bytes_read as f64),
                human_bytes(e.bytes_written as f64),
                percent(
                    e.listing_attrs_cached,
                    e.listing_attrs_cached + e.listing_attrs_read,
                ),
                e.path.clone(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&format_table(
            &[
                "MOUNT PATH",
                "ID",
                "ACCESS",
                "CALLS",
                "READ",
                "WRITTEN",
                "LISTED FROM CACHE",
                "PATH",
            ],
            &[false, true, false, true, true, true, true, false],
            &rows,
        ));
    }
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.2}", a as f64 / b as f64)
    }
}

/// `1.5 KiB`, `12.0 MiB`, ... (`512 B` below 1 KiB).
pub(crate) fn human_bytes(n: f64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024.0 {
        return format!("{n:.0} B");
    }
    let mut value = n / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `3d04h05m`, `2h03m04s`, `5m07s`, `12.3s`.
fn human_duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 60.0 {
        return format!("{:.1}s", secs.max(0.0));
    }
    let s = secs as u64;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h) {
        (0, 0) => format!("{m}m{s:02}s"),
        (0, h) => format!("{h}h{m:02}m{s:02}s"),
        (d, h) => format!("{d}d{h:02}h{m:02}m"),
    }
}

/// Columns padded to their widest cell, two spaces apart; `right[i]` aligns
/// column `i` to the right (numbers).
pub(crate) fn format_table(header: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, (cell, &w)) in row.iter().zip(&widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = w.saturating_sub(cell.chars().count());
            if right.get(i).copied().unwrap_or(false) {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Prints [`format_table`] to standard output.
pub(crate) fn print_table(header: &[&str], right: &[bool], rows: &[Vec<String>]) {
    print!("{}", format_table(header, right, rows));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use rnfs_server::metrics::{LatencySnapshot, PoolSnapshot};

    fn snapshot(uptime: f64, getattr_calls: u64, bytes_read: u64) -> StatsSnapshot {
        let mut s = StatsSnapshot {
            uptime_secs: uptime,
            version: "0.1.0".into(),
            bytes_read,
            ..StatsSnapshot::default()
        };
        s.procedures.push(ProcedureSnapshot {
            program: "nfs".into(),
            version: 3,
            procedure: "GETATTR".into(),
            calls: getattr_calls,
            errors: Default::default(),
            latency: LatencySnapshot {
                p50_us: 12.0,
                p99_us: 80.0,
                ..LatencySnapshot::default()
            },
        });
        let mut lookup = s.procedures[0].clone();
        lookup.procedure = "LOOKUP".into();
        lookup.calls = 100;
        lookup.errors.insert("NFS3ERR_NOENT".into(), 25);
        s.procedures.push(lookup);
        s.sched.policy = "lwq".into();
        s.sched.pool_mode = "global".into();
        s.sched.min_threads = 8;
        s.sched.max_threads = 8;
        s.sched.pools.push(PoolSnapshot {
            threads: 8,
            idle: 7,
            waking: 0,
            peak_waking: 1,
            enqueues: 400,
            wakeups: 300,
            wasted_wakeups: 30,
            dispatches: 400,
        });
        s.sched.handoff_bins_300ns = vec![50, 30, 10, 5, 0, 5];
        s
    }

    #[test]
    fn report_shows_calls_shares_errors_and_scheduler_figures() {
        let text = render(&snapshot(61.0, 300, 2048), None, &ReportOptions::default());
        assert!(text.contains("up 1m01s"), "{text}");
        assert!(text.contains("2.0 KiB read"), "{text}");
        assert!(text.contains("calls: 400 total, 25 with errors"), "{text}");
        let getattr = text.lines().find(|l| l.contains("GETATTR")).unwrap();
        assert!(
            getattr.contains("300") && getattr.contains("75.0%"),
            "{getattr}"
        );
        assert!(
            text.contains("errors by status: NFS3ERR_NOENT 25"),
            "{text}"
        );
        let pool = text
            .lines()
            .find(|l| l.trim_start().starts_with("0 "))
            .unwrap();
        // 300 wake-ups for 400 dispatches; 30 of 300 wasted.
        assert!(pool.contains("0.75") && pool.contains("10.0%"), "{pool}");
        assert!(pool.contains("0/1"), "waking now/peak: {pool}");
        assert!(text.contains("0-300 ns 50.0%"), "{text}");
        assert!(text.contains(">= 900 ns 10.0%"), "{text}");
        assert!(
            !text.contains("CALLS/s"),
            "no rates without a previous snapshot"
        );
    }

    #[test]
    fn watching_adds_rates_from_two_snapshots() {
        let before = snapshot(10.0, 100, 0);
        let after = snapshot(12.0, 300, 4 << 20);
        let text = render(&after, Some(&before), &ReportOptions::default());
        assert!(text.contains("CALLS/s"), "{text}");
        // 200 GETATTRs in 2 s; LOOKUP unchanged.
        let getattr = text.lines().find(|l| l.contains("GETATTR")).unwrap();
        assert!(getattr.trim_end().ends_with("100.0"), "{getattr}");
        assert!(text.contains("2.0 MiB/s read"), "{text}");
        assert!(text.contains(", 100.0/s"), "{text}");
        // A restarted server (uptime went back) gets no rates.
        let text = render(&before, Some(&after), &ReportOptions::default());
        assert!(!text.contains("CALLS/s"), "{text}");
    }

    #[test]
    fn units_and_tables() {
        assert_eq!(human_bytes(512.0), "512 B");
        assert_eq!(human_bytes(1536.0), "1.5 KiB");
        assert_eq!(human_bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.0 GiB");
        assert_eq!(human_duration(7384.0), "2h03m04s");
        assert_eq!(human_duration(2.0 * 86_400.0 + 3600.0), "2d01h00m");
        let t = format_table(
            &["A", "N"],
            &[false, true],
            &[
                vec!["xx".into(), "1".into()],
                vec!["y".into(), "100".into()],
            ],
        );
        assert_eq!(t, "A     N\nxx    1\ny   100\n");
        assert_eq!(histogram_line(&[0, 0]), None);
    }
}

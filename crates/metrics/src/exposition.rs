//! Prometheus text exposition (format 0.0.4) of one [`StatsSnapshot`].
//!
//! The families are built from the snapshot on every scrape and handed to the
//! `prometheus` crate's [`TextEncoder`], which writes the `# HELP`/`# TYPE`
//! headers, the sample lines and the label escaping. Nothing is kept between
//! scrapes: the server's counters are already totals, so there is no registry
//! to keep in step with it.
//!
//! Label cardinality is bounded here whatever the snapshot holds: at most
//! [`MAX_CLIENT_SERIES`] client label values (the busiest; the rest are summed
//! into `client="other"`), [`MAX_EXPORT_SERIES`] exports,
//! [`MAX_PROCEDURE_SERIES`] procedures and [`MAX_HANDOFF_BUCKETS`] hand-off
//! buckets. No label ever names a file.

use std::collections::BTreeMap;

use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType, Quantile,
    Summary,
};
use prometheus::TextEncoder;
use rnfs_server::metrics::{ClientSnapshot, LatencySnapshot, StatsSnapshot};

/// Content type of [`render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Most `client` label values exported; the busiest clients keep their own
/// series, the rest are summed into `client="other"` (which counts as one).
pub const MAX_CLIENT_SERIES: usize = 64;

/// Most `export` label values exported; the rest are summed into
/// `export="other"`.
pub const MAX_EXPORT_SERIES: usize = 256;

/// Most procedure rows exported (the server has a few dozen); rows beyond it
/// are left out.
pub const MAX_PROCEDURE_SERIES: usize = 256;

/// Most buckets of `rnfs_sched_handoff_histogram_seconds` (including `+Inf`);
/// later 300 ns bins are counted in `+Inf` only.
pub const MAX_HANDOFF_BUCKETS: usize = 128;

/// The label value that collects the rows beyond a cap.
const OTHER: &str = "other";

/// The quantiles of every summary, with their values in microseconds.
fn quantiles(l: &LatencySnapshot) -> [(f64, f64); 4] {
    [
        (0.5, l.p50_us),
        (0.9, l.p90_us),
        (0.99, l.p99_us),
        (0.999, l.p999_us),
    ]
}

/// Renders `snapshot` in the Prometheus text format ([`CONTENT_TYPE`]).
pub fn render(snapshot: &StatsSnapshot) -> Result<String, prometheus::Error> {
    let families = families(snapshot);
    let mut text = String::with_capacity(16 * 1024);
    TextEncoder::new().encode_utf8(&families, &mut text)?;
    Ok(text)
}

/// Every family of `snapshot`, in a fixed order; families without samples are
/// left out (the encoder rejects them).
fn families(s: &StatsSnapshot) -> Vec<MetricFamily> {
    let mut out = Families::default();
    server(&mut out, s);
    calls(&mut out, s);
    transport(&mut out, s);
    sched(&mut out, s);
    clients(&mut out, &s.clients);
    exports(&mut out, s);
    drc(&mut out, s);
    out.0
}

fn server(out: &mut Families, s: &StatsSnapshot) {
    out.gauge(
        "rnfs_build_info",
        "Always 1; the version label says which rnfs is running.",
        vec![gauge(&[("version", &s.version)], 1.0)],
    );
    out.gauge(
        "rnfs_uptime_seconds",
        "Seconds since the server started.",
        vec![gauge(&[], s.uptime_secs)],
    );
    out.counter(
        "rnfs_read_bytes_total",
        "Bytes of file data returned by READ.",
        vec![counter(&[], s.bytes_read)],
    );
    out.counter(
        "rnfs_written_bytes_total",
        "Bytes of file data accepted by WRITE.",
        vec![counter(&[], s.bytes_written)],
    );
    out.counter(
        "rnfs_replies_held_total",
        "Replies held back to leave in one write with later replies (reply coalescing).",
        vec![counter(&[], s.replies_held)],
    );
}

fn calls(out: &mut Families, s: &StatsSnapshot) {
    // One row per (program, version, procedure); a duplicate row adds to the first.
    let mut rows: BTreeMap<(&str, u32, &str), ProcedureRow<'_>> = BTreeMap::new();
    for p in &s.procedures {
        let key = (p.program.as_str(), p.version, p.procedure.as_str());
        if rows.len() >= MAX_PROCEDURE_SERIES && !rows.contains_key(&key) {
            continue;
        }
        let row = rows.entry(key).or_insert_with(|| ProcedureRow {
            calls: 0,
            errors: BTreeMap::new(),
            latency: &p.latency,
        });
        row.calls = row.calls.saturating_add(p.calls);
        for (status, n) in &p.errors {
            let e = row.errors.entry(status.as_str()).or_insert(0);
            *e = e.saturating_add(*n);
        }
    }
    let mut calls = Vec::with_capacity(rows.len());
    let mut errors = Vec::new();
    let mut latency = Vec::with_capacity(rows.len());
    for ((program, version, procedure), row) in &rows {
        let version = version.to_string();
        let labels = [
            ("program", *program),
            ("version", version.as_str()),
            ("procedure", *procedure),
        ];
        calls.push(counter(&labels, row.calls));
        for (status, n) in &row.errors {
            let mut with_status = labels.to_vec();
            with_status.push(("status", status));
            errors.push(counter(&with_status, *n));
        }
        latency.push(summary(&labels, row.latency));
    }
    out.counter(
        "rnfs_calls_total",
        "RPC calls answered, by program, version and procedure.",
        calls,
    );
    out.counter(
        "rnfs_call_errors_total",
        "Calls whose result was not OK, by procedure and status name.",
        errors,
    );
    out.summary(
        "rnfs_call_latency_seconds",
        "Service time of a call, from its record being read to its reply being sent.",
        latency,
    );
}

/// One procedure's figures, summed over duplicate snapshot rows.
struct ProcedureRow<'a> {
    calls: u64,
    errors: BTreeMap<&'a str, u64>,
    /// The first row's latency (summaries cannot be added).
    latency: &'a LatencySnapshot,
}

fn transport(out: &mut Families, s: &StatsSnapshot) {
    let t = &s.transport;
    out.gauge(
        "rnfs_connections",
        "Client connections open now.",
        vec![gauge(&[], t.connections as f64)],
    );
    let counters: [(&str, &str, u64); 5] = [
        (
            "rnfs_connections_accepted_total",
            "Connections accepted, including those refused at the limit.",
            t.accepted,
        ),
        (
            "rnfs_connections_rejected_total",
            "Connections refused because max_connections was reached.",
            t.rejected,
        ),
        (
            "rnfs_connections_closed_bad_input_total",
            "Connections closed because of a bad record or an undecodable message.",
            t.closed_bad_input,
        ),
        (
            "rnfs_connections_closed_idle_total",
            "Connections closed after the idle timeout without a call.",
            t.closed_idle,
        ),
        (
            "rnfs_connections_throttled_total",
            "Times a connection reached its in-flight cap and reading stopped.",
            t.throttled,
        ),
    ];
    for (name, help, value) in counters {
        out.counter(name, help, vec![counter(&[], value)]);
    }
    out.gauge(
        "rnfs_in_flight_calls",
        "Calls read from a connection and not yet answered, now.",
        vec![gauge(&[], t.in_flight as f64)],
    );
    out.gauge(
        "rnfs_connection_peak_in_flight_calls",
        "Most calls seen in flight at once on any one connection.",
        vec![gauge(&[], t.peak_in_flight as f64)],
    );
    out.gauge(
        "rnfs_connection_peak_output_buffered_bytes",
        "Largest reply backlog (bytes the socket would not take yet) seen on any one connection.",
        vec![gauge(&[], t.peak_output_buffered as f64)],
    );
}

fn sched(out: &mut Families, s: &StatsSnapshot) {
    let sc = &s.sched;
    out.gauge(
        "rnfs_sched_info",
        "Always 1; the labels name the scheduler policy and pool mode.",
        vec![gauge(
            &[("policy", &sc.policy), ("pool_mode", &sc.pool_mode)],
            1.0,
        )],
    );
    out.gauge(
        "rnfs_sched_max_waking_threads",
        "Configured bound on woken-but-not-running threads per pool.",
        vec![gauge(&[], sc.max_waking as f64)],
    );
    out.gauge(
        "rnfs_sched_min_threads",
        "Configured minimum service thread count.",
        vec![gauge(&[], sc.min_threads as f64)],
    );
    out.gauge(
        "rnfs_sched_max_threads",
        "Configured maximum service thread count.",
        vec![gauge(&[], sc.max_threads as f64)],
    );
    let pools: Vec<(String, _)> = sc
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| (i.to_string(), p))
        .collect();
    let per_pool_gauge = |f: fn(&rnfs_server::metrics::PoolSnapshot) -> u64| {
        pools
            .iter()
            .map(|(i, p)| gauge(&[("pool", i)], f(p) as f64))
            .collect::<Vec<_>>()
    };
    out.gauge(
        "rnfs_sched_threads",
        "Live service threads per pool.",
        per_pool_gauge(|p| p.threads),
    );
    out.gauge(
        "rnfs_sched_idle_threads",
        "Idle service threads per pool.",
        per_pool_gauge(|p| p.idle),
    );
    out.gauge(
        "rnfs_sched_waking_threads",
        "Threads woken but not yet running, per pool.",
        per_pool_gauge(|p| p.waking),
    );
    out.gauge(
        "rnfs_sched_peak_waking_threads",
        "Highest number of woken-but-not-running threads seen, per pool.",
        per_pool_gauge(|p| p.peak_waking),
    );
    let per_pool_counter = |f: fn(&rnfs_server::metrics::PoolSnapshot) -> u64| {
        pools
            .iter()
            .map(|(i, p)| counter(&[("pool", i)], f(p)))
            .collect::<Vec<_>>()
    };
    out.counter(
        "rnfs_sched_enqueues_total",
        "Transports queued for a service thread, per pool.",
        per_pool_counter(|p| p.enqueues),
    );
    out.counter(
        "rnfs_sched_wakeups_total",
        "Service threads woken, per pool.",
        per_pool_counter(|p| p.wakeups),
    );
    out.counter(
        "rnfs_sched_wasted_wakeups_total",
        "Wake-ups that found nothing to do, per pool.",
        per_pool_counter(|p| p.wasted_wakeups),
    );
    out.counter(
        "rnfs_sched_dispatches_total",
        "Work items handed to a service thread, per pool.",
        per_pool_counter(|p| p.dispatches),
    );
    out.summary(
        "rnfs_sched_handoff_seconds",
        "Hand-off latency: from a transport being queued to a thread picking it up.",
        vec![summary(&[], &sc.handoff)],
    );
    if let Some(h) = handoff_histogram(&sc.handoff_bins_300ns, sc.handoff.mean_us) {
        out.push(
            "rnfs_sched_handoff_histogram_seconds",
            "Hand-off latency in 300 ns buckets (the same samples as rnfs_sched_handoff_seconds).",
            MetricType::HISTOGRAM,
            vec![h],
        );
    }
}

/// The 300 ns bins as a cumulative histogram: bin `i` ends at `300 * (i + 1)` ns,
/// the last bin (which holds everything beyond) is `+Inf`.
fn handoff_histogram(bins: &[u64], mean_us: f64) -> Option<Metric> {
    if bins.is_empty() {
        return None;
    }
    let total = bins.iter().fold(0u64, |a, b| a.saturating_add(*b));
    let finite = (bins.len() - 1).min(MAX_HANDOFF_BUCKETS - 1);
    let mut cumulative = 0u64;
    let mut buckets = Vec::with_capacity(finite);
    for (i, n) in bins.iter().take(finite).enumerate() {
        cumulative = cumulative.saturating_add(*n);
        let mut b = Bucket::default();
        b.set_upper_bound((300 * (i as u64 + 1)) as f64 / 1e9);
        b.set_cumulative_count(cumulative);
        buckets.push(b);
    }
    // The encoder adds the `+Inf` bucket (= the sample count) itself.
    let mut h = Histogram::default();
    h.set_bucket(buckets);
    h.set_sample_count(total);
    h.set_sample_sum(finite_or_nan(mean_us) * total as f64 / 1e6);
    let mut m = Metric::default();
    m.set_histogram(h);
    Some(m)
}

/// Per-client totals, at most [`MAX_CLIENT_SERIES`] label values.
fn clients(out: &mut Families, rows: &[ClientSnapshot]) {
    let capped = cap_rows(
        rows.iter().map(|c| {
            (
                c.addr.as_str(),
                [c.calls, c.bytes_read, c.bytes_written, c.connections],
            )
        }),
        MAX_CLIENT_SERIES,
    );
    let series = |i: usize| {
        capped
            .iter()
            .map(|(addr, v)| (addr.as_str(), v[i]))
            .collect::<Vec<_>>()
    };
    let counters = |i: usize| {
        series(i)
            .into_iter()
            .map(|(a, v)| counter(&[("client", a)], v))
            .collect()
    };
    out.counter(
        "rnfs_client_calls_total",
        "Calls answered per client address (busiest clients; the rest in client=\"other\").",
        counters(0),
    );
    out.counter(
        "rnfs_client_read_bytes_total",
        "READ bytes per client address.",
        counters(1),
    );
    out.counter(
        "rnfs_client_written_bytes_total",
        "WRITE bytes per client address.",
        counters(2),
    );
    out.gauge(
        "rnfs_client_connections",
        "Connections open now per client address.",
        series(3)
            .into_iter()
            .map(|(a, v)| gauge(&[("client", a)], v as f64))
            .collect(),
    );
}

fn exports(out: &mut Families, s: &StatsSnapshot) {
    let capped = cap_rows(
        s.exports.iter().map(|e| {
            (
                e.mount_path.as_str(),
                [
                    e.calls,
                    e.bytes_read,
                    e.bytes_written,
                    e.listing_attrs_cached,
                    e.listing_attrs_read,
                    e.listing_chunk_calls,
                    e.listing_chunks_read,
                ],
            )
        }),
        MAX_EXPORT_SERIES,
    );
    let counters = |i: usize| {
        capped
            .iter()
            .map(|(export, v)| counter(&[("export", export)], v[i]))
            .collect()
    };
    out.counter(
        "rnfs_export_calls_total",
        "NFS calls on each export's files, by mount path.",
        counters(0),
    );
    out.counter(
        "rnfs_export_read_bytes_total",
        "READ bytes per export.",
        counters(1),
    );
    out.counter(
        "rnfs_export_written_bytes_total",
        "WRITE bytes per export.",
        counters(2),
    );
    out.counter(
        "rnfs_export_readdirplus_cached_attrs_total",
        "READDIRPLUS entries answered from cached attributes, per export.",
        counters(3),
    );
    out.counter(
        "rnfs_export_readdirplus_read_attrs_total",
        "READDIRPLUS entries whose attributes were read from the file system, per export.",
        counters(4),
    );
    out.counter(
        "rnfs_export_cached_listings_total",
        "READDIR and READDIRPLUS calls answered from cached getdents chunks, per export.",
        counters(5),
    );
    out.counter(
        "rnfs_export_listing_chunks_read_total",
        "getdents chunks read into the listing cache, per export.",
        counters(6),
    );
}

fn drc(out: &mut Families, s: &StatsSnapshot) {
    let Some(d) = &s.drc else { return };
    out.counter(
        "rnfs_drc_hits_total",
        "Retransmitted calls answered from the duplicate request cache.",
        vec![counter(&[], d.hits)],
    );
    out.counter(
        "rnfs_drc_misses_total",
        "Calls stored in the duplicate request cache.",
        vec![counter(&[], d.misses)],
    );
    out.counter(
        "rnfs_drc_evictions_total",
        "Duplicate request cache entries evicted.",
        vec![counter(&[], d.evictions)],
    );
    out.counter(
        "rnfs_drc_in_progress_waits_total",
        "Retransmissions that waited for the original call to finish.",
        vec![counter(&[], d.in_progress_waits)],
    );
    out.counter(
        "rnfs_drc_drops_total",
        "Retransmissions of a running call dropped after waiting.",
        vec![counter(&[], d.drops)],
    );
    out.counter(
        "rnfs_drc_overflows_total",
        "Calls run without a cache entry because their cache shard was full.",
        vec![counter(&[], d.overflows)],
    );
    out.gauge(
        "rnfs_drc_entries",
        "Duplicate request cache entries now.",
        vec![gauge(&[], d.entries as f64)],
    );
    out.gauge(
        "rnfs_drc_size_bytes",
        "Bytes held by the duplicate request cache now.",
        vec![gauge(&[], d.bytes as f64)],
    );
}

/// Sums rows by label value and keeps at most `cap` values: the rows with the
/// largest first figure keep their label, the rest (and any row already named
/// [`OTHER`]) are summed into [`OTHER`]. Sorted by label value.
fn cap_rows<'a, const N: usize>(
    rows: impl Iterator<Item = (&'a str, [u64; N])>,
    cap: usize,
) -> Vec<(String, [u64; N])> {
    let mut merged: BTreeMap<&str, [u64; N]> = BTreeMap::new();
    for (label, values) in rows {
        let sums = merged.entry(label).or_insert([0; N]);
        for (sum, v) in sums.iter_mut().zip(values) {
            *sum = sum.saturating_add(v);
        }
    }
    let other = merged.remove(OTHER);
    let mut named: Vec<(&str, [u64; N])> = merged.into_iter().collect();
    let keep = if named.len() + usize::from(other.is_some()) <= cap {
        named.len()
    } else {
        cap.saturating_sub(1)
    };
    // Busiest first (ties by label, so the choice is stable), then cut.
    named.sort_by(|a, b| b.1[0].cmp(&a.1[0]).then(a.0.cmp(b.0)));
    let mut rest = other;
    for (_, values) in named.drain(keep..) {
        let sums = rest.get_or_insert([0; N]);
        for (sum, v) in sums.iter_mut().zip(values) {
            *sum = sum.saturating_add(v);
        }
    }
    let mut out: Vec<(String, [u64; N])> = named
        .into_iter()
        .map(|(label, v)| (label.to_owned(), v))
        .collect();
    if let Some(v) = rest {
        out.push((OTHER.to_owned(), v));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The families built so far.
#[derive(Default)]
struct Families(Vec<MetricFamily>);

impl Families {
    fn push(&mut self, name: &str, help: &str, kind: MetricType, metrics: Vec<Metric>) {
        if metrics.is_empty() {
            return;
        }
        let mut f = MetricFamily::default();
        f.set_name(name.to_owned());
        f.set_help(help.to_owned());
        f.set_field_type(kind);
        f.set_metric(metrics);
        self.0.push(f);
    }

    fn counter(&mut self, name: &str, help: &str, metrics: Vec<Metric>) {
        self.push(name, help, MetricType::COUNTER, metrics);
    }

    fn gauge(&mut self, name: &str, help: &str, metrics: Vec<Metric>) {
        self.push(name, help, MetricType::GAUGE, metrics);
    }

    fn summary(&mut self, name: &str, help: &str, metrics: Vec<Metric>) {
        self.push(name, help, MetricType::SUMMARY, metrics);
    }
}

fn labels(pairs: &[(&str, &str)]) -> Vec<LabelPair> {
    pairs
        .iter()
        .map(|(name, value)| {
            let mut l = LabelPair::default();
            l.set_name((*name).to_owned());
            l.set_value((*value).to_owned());
            l
        })
        .collect()
}

fn counter(pairs: &[(&str, &str)], value: u64) -> Metric {
    let mut c = Counter::default();
    c.set_value(value as f64);
    let mut m = Metric::from_label(labels(pairs));
    m.set_counter(c);
    m
}

fn gauge(pairs: &[(&str, &str)], value: f64) -> Metric {
    let mut g = Gauge::default();
    g.set_value(finite_or_nan(value));
    let mut m = Metric::from_label(labels(pairs));
    m.set_gauge(g);
    m
}

/// A summary in seconds from a latency snapshot in microseconds.
fn summary(pairs: &[(&str, &str)], l: &LatencySnapshot) -> Metric {
    let quantiles = quantiles(l)
        .into_iter()
        .map(|(q, us)| {
            let mut quantile = Quantile::default();
            quantile.set_quantile(q);
            quantile.set_value(finite_or_nan(us) / 1e6);
            quantile
        })
        .collect();
    let mut s = Summary::default();
    s.set_quantile(quantiles);
    s.set_sample_count(l.count);
    s.set_sample_sum(finite_or_nan(l.mean_us) * l.count as f64 / 1e6);
    let mut m = Metric::from_label(labels(pairs));
    m.set_summary(s);
    m
}

/// The text format spells infinities `+Inf`/`-Inf`, which the encoder does not
/// (it would print `inf`); a figure that is not a number is reported as `NaN`.
fn finite_or_nan(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        f64::NAN
    }
}

#[cfg(test)]
mod tests;

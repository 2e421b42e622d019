#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::collections::{BTreeMap, HashMap, HashSet};

use rnfs_server::metrics::{
    ClientSnapshot, DrcSnapshot, ExportSnapshot, LatencySnapshot, PoolSnapshot, ProcedureSnapshot,
    SchedSnapshot, StatsSnapshot, TransportSnapshot,
};

use super::*;

/// One sample line: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A parsed exposition: the `# TYPE` of every family and the samples.
#[derive(Debug, Default)]
struct Exposition {
    types: HashMap<String, String>,
    helps: HashSet<String>,
    samples: Vec<Sample>,
}

impl Exposition {
    fn find(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.samples
            .iter()
            .find(|s| s.name == name && s.labels == want)
            .map(|s| s.value)
    }

    fn series(&self, name: &str) -> Vec<&Sample> {
        self.samples.iter().filter(|s| s.name == name).collect()
    }
}

fn valid_metric_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !n.starts_with("__")
}

/// A strict parser of the text format 0.0.4: panics on any line that is not a
/// `# HELP`/`# TYPE` comment or a well-formed sample.
fn parse(text: &str) -> Exposition {
    let mut out = Exposition::default();
    assert!(text.ends_with('\n'), "exposition must end with a newline");
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let mut parts = comment.splitn(3, ' ');
            let keyword = parts.next().unwrap();
            let name = parts.next().expect("comment without a metric name");
            let rest = parts.next().expect("comment without text");
            assert!(valid_metric_name(name), "bad name in {line:?}");
            match keyword {
                "HELP" => assert!(out.helps.insert(name.to_owned()), "two HELP for {name}"),
                "TYPE" => {
                    assert!(
                        ["counter", "gauge", "summary", "histogram"].contains(&rest),
                        "bad type in {line:?}"
                    );
                    assert!(
                        out.types.insert(name.to_owned(), rest.to_owned()).is_none(),
                        "two TYPE for {name}"
                    );
                }
                _ => panic!("unexpected comment {line:?}"),
            }
            continue;
        }
        out.samples.push(parse_sample(line));
    }
    out
}

fn parse_sample(line: &str) -> Sample {
    let name_end = line.find(['{', ' ']).expect("sample without value");
    let name = &line[..name_end];
    assert!(valid_metric_name(name), "bad metric name in {line:?}");
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices().peekable();
        loop {
            // label name up to '='
            let start = chars.peek().map(|(i, _)| *i).unwrap();
            let mut eq = None;
            for (i, c) in chars.by_ref() {
                if c == '=' {
                    eq = Some(i);
                    break;
                }
            }
            let label = &body[start..eq.expect("label without '='")];
            assert!(
                valid_label_name(label),
                "bad label name {label:?} in {line:?}"
            );
            assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "{line:?}");
            let mut value = String::new();
            loop {
                match chars.next().expect("unterminated label value").1 {
                    '"' => break,
                    '\\' => match chars.next().expect("dangling escape").1 {
                        '\\' => value.push('\\'),
                        '"' => value.push('"'),
                        'n' => value.push('\n'),
                        c => panic!("bad escape \\{c} in {line:?}"),
                    },
                    '\n' => panic!("raw newline in label value"),
                    c => value.push(c),
                }
            }
            assert!(
                labels.insert(label.to_owned(), value).is_none(),
                "label {label} twice in {line:?}"
            );
            match chars.next().expect("labels not closed") {
                (_, ',') => continue,
                (i, '}') => {
                    rest = &body[i + 1..];
                    break;
                }
                (_, c) => panic!("unexpected {c:?} after a label value in {line:?}"),
            }
        }
    }
    let value = rest.strip_prefix(' ').expect("no space before the value");
    assert!(
        !value.contains(' '),
        "timestamp or junk after value: {line:?}"
    );
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("bad value in {line:?}")),
    };
    Sample {
        name: name.to_owned(),
        labels,
        value,
    }
}

/// Checks the rules that hold for every exposition and returns it parsed.
fn check(text: &str) -> Exposition {
    let exp = parse(text);
    let mut seen = HashSet::new();
    for s in &exp.samples {
        let key = format!("{}{:?}", s.name, s.labels);
        assert!(
            seen.insert(key),
            "duplicate series {} {:?}",
            s.name,
            s.labels
        );
        // Every sample belongs to a typed family, with the suffixes its type allows.
        let (family, kind) = exp
            .types
            .iter()
            .filter(|(family, kind)| match kind.as_str() {
                "summary" => [String::new(), "_sum".into(), "_count".into()]
                    .iter()
                    .any(|suffix| s.name == format!("{family}{suffix}")),
                "histogram" => ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|suffix| s.name == format!("{family}{suffix}")),
                _ => s.name == **family,
            })
            .max_by_key(|(family, _)| family.len())
            .unwrap_or_else(|| panic!("sample {} has no # TYPE", s.name));
        assert!(exp.helps.contains(family), "{family} has no # HELP");
        assert!(
            family.starts_with("rnfs_"),
            "{family} lacks the rnfs_ prefix"
        );
        match kind.as_str() {
            "counter" => {
                assert!(
                    family.ends_with("_total"),
                    "counter {family} must end in _total"
                );
                assert!(s.value >= 0.0, "negative counter {}", s.name);
            }
            _ => assert!(
                !family.ends_with("_total"),
                "{kind} {family} ends in _total"
            ),
        }
        if kind == "summary" && s.name == *family {
            assert!(s.labels.contains_key("quantile"), "{}", s.name);
        }
    }
    exp
}

fn latency(p50: f64) -> LatencySnapshot {
    LatencySnapshot {
        count: 1000,
        mean_us: p50 * 1.2,
        p50_us: p50,
        p90_us: p50 * 2.0,
        p99_us: p50 * 4.0,
        p999_us: p50 * 8.0,
        max_us: p50 * 20.0,
    }
}

fn procedure(program: &str, version: u32, name: &str, calls: u64) -> ProcedureSnapshot {
    ProcedureSnapshot {
        program: program.into(),
        version,
        procedure: name.into(),
        calls,
        errors: BTreeMap::new(),
        latency: latency(25.0),
    }
}

fn client(addr: &str, calls: u64) -> ClientSnapshot {
    ClientSnapshot {
        addr: addr.into(),
        connections: 1,
        calls,
        bytes_read: calls * 10,
        bytes_written: calls * 3,
        mounts: vec!["/data".into()],
    }
}

#[allow(
    clippy::needless_update,
    reason = "the snapshot types may gain fields; they keep their defaults here"
)]
fn sample_snapshot() -> StatsSnapshot {
    let mut getattr = procedure("nfs", 3, "GETATTR", 42);
    getattr.latency = latency(12.5);
    let mut lookup = procedure("nfs", 3, "LOOKUP", 17);
    lookup.errors.insert("NFS3ERR_NOENT".into(), 5);
    lookup.errors.insert("NFS3ERR_ACCES".into(), 1);
    StatsSnapshot {
        uptime_secs: 12.5,
        version: "0.1.0".into(),
        transport: TransportSnapshot {
            connections: 3,
            accepted: 9,
            rejected: 1,
            closed_bad_input: 2,
            throttled: 4,
            ..TransportSnapshot::default()
        },
        sched: SchedSnapshot {
            policy: "lwq".into(),
            pool_mode: "global".into(),
            max_waking: 1,
            min_threads: 8,
            max_threads: 8,
            pools: vec![
                PoolSnapshot {
                    threads: 8,
                    idle: 6,
                    waking: 1,
                    peak_waking: 1,
                    enqueues: 100,
                    wakeups: 60,
                    wasted_wakeups: 3,
                    dispatches: 100,
                    ..PoolSnapshot::default()
                },
                PoolSnapshot {
                    threads: 4,
                    ..PoolSnapshot::default()
                },
            ],
            handoff: latency(2.0),
            handoff_bins_300ns: vec![5, 10, 0, 3, 2],
        },
        procedures: vec![
            getattr,
            lookup,
            procedure("mount", 3, "MNT", 2),
            procedure("mount", 1, "MNT", 1),
        ],
        bytes_read: 1 << 20,
        bytes_written: 4096,
        replies_held: 30,
        clients: vec![client("10.0.0.7", 50), client("::1", 9)],
        exports: vec![ExportSnapshot {
            id: 1,
            mount_path: "/data".into(),
            path: "/srv/data".into(),
            access: "rw".into(),
            calls: 59,
            bytes_read: 1 << 20,
            bytes_written: 4096,
            listing_attrs_cached: 830,
            listing_attrs_read: 170,
            listing_chunk_calls: 6,
            listing_chunks_read: 4,
        }],
        drc: Some(DrcSnapshot {
            hits: 2,
            misses: 30,
            entries: 28,
            bytes: 9000,
            evictions: 2,
            ..DrcSnapshot::default()
        }),
    }
}

#[test]
fn renders_every_figure_of_a_snapshot() {
    let text = render(&sample_snapshot()).unwrap();
    let exp = check(&text);
    let nfs_getattr = [
        ("program", "nfs"),
        ("version", "3"),
        ("procedure", "GETATTR"),
    ];
    assert_eq!(exp.find("rnfs_calls_total", &nfs_getattr), Some(42.0));
    assert_eq!(exp.types["rnfs_calls_total"], "counter");
    assert_eq!(
        exp.find(
            "rnfs_call_errors_total",
            &[
                ("program", "nfs"),
                ("version", "3"),
                ("procedure", "LOOKUP"),
                ("status", "NFS3ERR_NOENT")
            ]
        ),
        Some(5.0)
    );
    // MNT of MOUNT v1 and v3 are two series, told apart by `version`.
    assert_eq!(exp.series("rnfs_calls_total").len(), 4);
    let mut q99 = nfs_getattr.to_vec();
    q99.push(("quantile", "0.99"));
    assert_eq!(exp.find("rnfs_call_latency_seconds", &q99), Some(50e-6));
    assert_eq!(
        exp.find("rnfs_call_latency_seconds_count", &nfs_getattr),
        Some(1000.0)
    );
    let sum = exp
        .find("rnfs_call_latency_seconds_sum", &nfs_getattr)
        .unwrap();
    assert!((sum - 1000.0 * 15e-6).abs() < 1e-12, "{sum}");
    assert_eq!(exp.find("rnfs_read_bytes_total", &[]), Some(1048576.0));
    assert_eq!(exp.find("rnfs_written_bytes_total", &[]), Some(4096.0));
    assert_eq!(exp.find("rnfs_replies_held_total", &[]), Some(30.0));
    assert_eq!(exp.find("rnfs_connections", &[]), Some(3.0));
    assert_eq!(exp.find("rnfs_connections_accepted_total", &[]), Some(9.0));
    assert_eq!(exp.find("rnfs_connections_throttled_total", &[]), Some(4.0));
    assert_eq!(exp.find("rnfs_sched_threads", &[("pool", "1")]), Some(4.0));
    assert_eq!(
        exp.find("rnfs_sched_idle_threads", &[("pool", "0")]),
        Some(6.0)
    );
    assert_eq!(
        exp.find("rnfs_sched_waking_threads", &[("pool", "0")]),
        Some(1.0)
    );
    assert_eq!(
        exp.find("rnfs_sched_wakeups_total", &[("pool", "0")]),
        Some(60.0)
    );
    assert_eq!(
        exp.find("rnfs_sched_wasted_wakeups_total", &[("pool", "0")]),
        Some(3.0)
    );
    assert_eq!(
        exp.find("rnfs_sched_handoff_seconds", &[("quantile", "0.5")]),
        Some(2e-6)
    );
    assert_eq!(
        exp.find(
            "rnfs_sched_info",
            &[("policy", "lwq"), ("pool_mode", "global")]
        ),
        Some(1.0)
    );
    assert_eq!(
        exp.find("rnfs_client_calls_total", &[("client", "10.0.0.7")]),
        Some(50.0)
    );
    assert_eq!(
        exp.find("rnfs_client_read_bytes_total", &[("client", "::1")]),
        Some(90.0)
    );
    assert_eq!(
        exp.find("rnfs_export_calls_total", &[("export", "/data")]),
        Some(59.0)
    );
    assert_eq!(exp.find("rnfs_drc_hits_total", &[]), Some(2.0));
    assert_eq!(exp.find("rnfs_drc_size_bytes", &[]), Some(9000.0));
    assert_eq!(
        exp.find("rnfs_build_info", &[("version", "0.1.0")]),
        Some(1.0)
    );
}

#[test]
fn handoff_bins_become_a_cumulative_histogram() {
    let exp = check(&render(&sample_snapshot()).unwrap());
    let name = "rnfs_sched_handoff_histogram_seconds_bucket";
    let buckets: Vec<(String, f64)> = exp
        .series(name)
        .iter()
        .map(|s| (s.labels["le"].clone(), s.value))
        .collect();
    // Bins [5, 10, 0, 3, 2]: the last bin holds everything beyond 1.2 µs.
    let want = [
        ("0.0000003", 5.0),
        ("0.0000006", 15.0),
        ("0.0000009", 15.0),
        ("0.0000012", 18.0),
        ("+Inf", 20.0),
    ];
    let want: Vec<(String, f64)> = want.iter().map(|(l, v)| ((*l).into(), *v)).collect();
    assert_eq!(buckets, want);
    assert_eq!(
        exp.find("rnfs_sched_handoff_histogram_seconds_count", &[]),
        Some(20.0)
    );
}

#[test]
fn too_many_handoff_bins_are_folded_into_inf() {
    let mut s = sample_snapshot();
    s.sched.handoff_bins_300ns = vec![1; 1000];
    let exp = check(&render(&s).unwrap());
    let buckets = exp.series("rnfs_sched_handoff_histogram_seconds_bucket");
    assert_eq!(buckets.len(), MAX_HANDOFF_BUCKETS);
    assert_eq!(buckets.last().unwrap().labels["le"], "+Inf");
    assert_eq!(buckets.last().unwrap().value, 1000.0);
}

#[test]
fn label_values_are_escaped() {
    let mut s = sample_snapshot();
    let nasty = "/ex\"port\\with\nnewline} x=\"1\"";
    s.exports[0].mount_path = nasty.into();
    s.clients[0].addr = "a\"b".into();
    let text = render(&s).unwrap();
    assert!(
        text.contains(r#"export="/ex\"port\\with\nnewline} x=\"1\"""#),
        "{text}"
    );
    let exp = check(&text);
    assert_eq!(
        exp.find("rnfs_export_calls_total", &[("export", nasty)]),
        Some(59.0)
    );
    assert_eq!(
        exp.find("rnfs_client_calls_total", &[("client", "a\"b")]),
        Some(50.0)
    );
}

#[test]
fn client_labels_are_capped_and_nothing_is_lost() {
    let mut s = sample_snapshot();
    // 1000 clients (the server caps its rows, but the exporter must not rely on it),
    // plus the server's own overflow row.
    s.clients = (0..1000u64)
        .map(|i| client(&format!("10.1.{}.{}", i / 256, i % 256), i + 1))
        .collect();
    s.clients.push(client("other", 7));
    let total: u64 = s.clients.iter().map(|c| c.calls).sum();
    let exp = check(&render(&s).unwrap());
    let series = exp.series("rnfs_client_calls_total");
    assert_eq!(series.len(), MAX_CLIENT_SERIES);
    let sum: f64 = series.iter().map(|s| s.value).sum();
    assert_eq!(sum, total as f64, "calls were lost by the cap");
    // The busiest clients keep their label: client i has i+1 calls.
    assert_eq!(
        exp.find("rnfs_client_calls_total", &[("client", "10.1.3.231")]),
        Some(1000.0)
    );
    assert_eq!(
        exp.find("rnfs_client_calls_total", &[("client", "10.1.0.0")]),
        None
    );
    let other = exp
        .find("rnfs_client_calls_total", &[("client", "other")])
        .unwrap();
    let kept: u64 = (1000 - (MAX_CLIENT_SERIES as u64 - 1) + 1..=1000).sum();
    assert_eq!(other, (total - kept) as f64);
    for name in [
        "rnfs_client_read_bytes_total",
        "rnfs_client_written_bytes_total",
        "rnfs_client_connections",
    ] {
        assert_eq!(exp.series(name).len(), MAX_CLIENT_SERIES, "{name}");
    }
}

#[test]
fn duplicate_rows_are_summed_not_repeated() {
    let mut s = sample_snapshot();
    s.procedures.push(procedure("nfs", 3, "GETATTR", 8));
    s.clients.push(client("10.0.0.7", 5));
    let exp = check(&render(&s).unwrap());
    assert_eq!(
        exp.find(
            "rnfs_calls_total",
            &[
                ("program", "nfs"),
                ("version", "3"),
                ("procedure", "GETATTR")
            ]
        ),
        Some(50.0)
    );
    assert_eq!(
        exp.find("rnfs_client_calls_total", &[("client", "10.0.0.7")]),
        Some(55.0)
    );
}

#[test]
fn empty_snapshot_renders_and_non_finite_figures_are_nan() {
    let exp = check(&render(&StatsSnapshot::default()).unwrap());
    assert_eq!(exp.find("rnfs_connections", &[]), Some(0.0));
    assert!(exp.series("rnfs_calls_total").is_empty());
    assert!(exp.series("rnfs_drc_hits_total").is_empty());

    let mut s = sample_snapshot();
    s.uptime_secs = f64::INFINITY;
    s.sched.handoff.p99_us = f64::NAN;
    let exp = check(&render(&s).unwrap());
    assert!(exp.find("rnfs_uptime_seconds", &[]).unwrap().is_nan());
    assert!(exp
        .find("rnfs_sched_handoff_seconds", &[("quantile", "0.99")])
        .unwrap()
        .is_nan());
}

#[test]
fn every_family_is_documented_in_the_readme() {
    let readme = include_str!("../../README.md");
    let mut s = sample_snapshot();
    s.drc = Some(DrcSnapshot::default());
    let exp = check(&render(&s).unwrap());
    let mut missing: Vec<&String> = exp
        .types
        .keys()
        .filter(|name| !readme.contains(&format!("`{name}`")))
        .collect();
    missing.sort();
    assert!(missing.is_empty(), "not in README.md: {missing:?}");
}

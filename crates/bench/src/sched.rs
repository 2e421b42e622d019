//! `rnfs bench sched`: reproduces the hand-off study of seed 001 for every
//! scheduler policy and thread count, side by side in one run.
//!
//! Two modes:
//! - **in-process**: synthetic transports. One "poller" thread per pool plays
//!   the network: when a call completes it immediately makes the transport
//!   readable again (closed loop, `connections` calls in flight). Measures
//!   the scheduler alone.
//! - **loopback**: a real `rnfs` server on 127.0.0.1 and client threads doing
//!   NULL calls over `connections` TCP connections, closed loop.
//!
//! Per run: hand-off latency (enqueue to a thread picking the task up)
//! min/mean/p50/p99/max and in 300 ns bins, calls/s, wake-ups per call,
//! wasted wake-ups, peak woken-but-not-running, and context switches per
//! call (process-wide: in loopback mode they include the client threads).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rnfs_sched::{Claim, Config, Handler, Policy, PoolMode, SchedStats, Scheduler};
use serde::Serialize;

use crate::report::{bins_300ns, Bin, ContextSwitches, Summary};

/// Which harness to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Synthetic transports, scheduler only.
    InProcess,
    /// Real server, NULL calls over loopback TCP.
    Loopback,
}

impl Mode {
    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::InProcess => "inproc",
            Mode::Loopback => "loopback",
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Params {
    /// Harnesses.
    pub modes: Vec<Mode>,
    /// Policies, compared side by side.
    pub policies: Vec<Policy>,
    /// Service thread counts.
    pub threads: Vec<usize>,
    /// Transports (connections), each with one call in flight.
    pub connections: usize,
    /// Measured time per run.
    pub duration: Duration,
    /// Unmeasured time before each run.
    pub warmup: Duration,
    /// Repetitions of the whole matrix; runs alternate policies, and the
    /// report gives per-run rows (medians are taken by the caller/report).
    pub repeat: usize,
    /// CPU work per call in the in-process mode (busy loop).
    pub work: Duration,
    /// lwq's bound on woken-but-not-running threads.
    pub max_waking: usize,
    /// Pool mode.
    pub pool_mode: PoolMode,
    /// Loopback client threads (0: one per 16 connections, at most 4).
    pub client_threads: usize,
}

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Harness.
    pub mode: &'static str,
    /// Policy.
    pub policy: Policy,
    /// Service threads.
    pub threads: usize,
    /// Transports.
    pub connections: usize,
    /// Repetition index.
    pub run: usize,
    /// Calls completed in the measured window.
    pub calls: u64,
    /// Calls per second.
    pub calls_per_sec: f64,
    /// Hand-off latency summary (ns).
    pub handoff: Summary,
    /// Hand-off latency in the seed's 300 ns bins.
    pub handoff_bins: Vec<Bin>,
    /// Threads woken per dispatched task.
    pub wakeups_per_call: f64,
    /// Wake-ups that found nothing to do, as a percentage of wake-ups.
    pub wasted_wakeup_pct: f64,
    /// Highest number of threads woken but not yet running.
    pub peak_waking: u64,
    /// The configured bound (lwq).
    pub max_waking: u64,
    /// Voluntary context switches per call (whole process).
    pub voluntary_csw_per_call: f64,
    /// Involuntary context switches per call (whole process).
    pub involuntary_csw_per_call: f64,
    /// Client-side round trip (loopback only), ns.
    pub client_rtt: Option<Summary>,
}

/// A benchmark could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The scheduler refused to start.
    #[error(transparent)]
    Sched(#[from] rnfs_sched::StartError),
    /// The server refused to start.
    #[error(transparent)]
    Server(#[from] rnfs_server::ServerError),
    /// Client I/O failed.
    #[error("loopback client: {0}")]
    Io(#[from] io::Error),
    /// The server answered something other than a successful NULL reply.
    #[error("loopback client: bad reply: {0}")]
    BadReply(String),
}

/// Runs the whole matrix, calling `progress` after each run.
pub fn run(params: &Params, mut progress: impl FnMut(&Row)) -> Result<Vec<Row>, BenchError> {
    let mut rows = Vec::new();
    for run in 0..params.repeat {
        for &mode in &params.modes {
            for &threads in &params.threads {
                // Alternate the policy order between repetitions (A/B/C, C/B/A)
                // so drift in machine state does not favour one policy.
                let mut policies = params.policies.clone();
                if run % 2 == 1 {
                    policies.reverse();
                }
                for policy in policies {
                    let row = match mode {
                        Mode::InProcess => in_process(params, policy, threads, run)?,
                        Mode::Loopback => loopback(params, policy, threads, run)?,
                    };
                    progress(&row);
                    rows.push(row);
                }
            }
        }
    }
    Ok(rows)
}

fn sched_config(params: &Params, policy: Policy, threads: usize) -> Config {
    Config {
        name: format!("bench-{policy}"),
        policy,
        pool_mode: params.pool_mode,
        max_waking: params.max_waking,
        ..Config::fixed(threads)
    }
}

/// Which cell of the matrix a run is.
#[derive(Debug, Clone, Copy)]
struct RunKey {
    mode: Mode,
    policy: Policy,
    threads: usize,
    run: usize,
}

fn row(
    key: RunKey,
    params: &Params,
    elapsed: Duration,
    stats: &SchedStats,
    csw: ContextSwitches,
    client_rtt: Option<Summary>,
) -> Row {
    let RunKey {
        mode,
        policy,
        threads,
        run,
    } = key;
    let total = stats.total();
    let calls = total.dispatches.max(1) as f64;
    Row {
        mode: mode.name(),
        policy,
        threads,
        connections: params.connections,
        run,
        calls: total.dispatches,
        calls_per_sec: total.dispatches as f64 / elapsed.as_secs_f64(),
        handoff: Summary::of(&stats.handoff_ns),
        handoff_bins: bins_300ns(&stats.handoff_ns),
        wakeups_per_call: total.wakeups as f64 / calls,
        wasted_wakeup_pct: total.wasted_wakeups as f64 * 100.0 / total.wakeups.max(1) as f64,
        peak_waking: total.peak_waking,
        max_waking: stats.max_waking,
        voluntary_csw_per_call: csw.voluntary as f64 / calls,
        involuntary_csw_per_call: csw.involuntary as f64 / calls,
        client_rtt,
    }
}

/// A synthetic transport: which poller "receives" its next call.
#[derive(Debug)]
struct Synthetic {
    id: usize,
    poller: usize,
}

#[derive(Debug)]
struct SyntheticHandler {
    work: Duration,
    /// One channel per pool's poller; set once the scheduler has started and
    /// the pool count is known (no call arrives before that).
    completions: OnceLock<Vec<crossbeam_channel::Sender<usize>>>,
}

impl Handler for SyntheticHandler {
    type Item = Synthetic;
    type ThreadState = ();

    fn thread_state(&self, _pool: usize) {}

    fn handle(&self, claim: Claim<'_, Synthetic>, _: &mut ()) {
        claim.take_data();
        let (id, poller) = (claim.id, claim.poller);
        // One record read: release before "processing", as the server does.
        claim.release(false);
        if !self.work.is_zero() {
            let start = Instant::now();
            while start.elapsed() < self.work {
                std::hint::spin_loop();
            }
        }
        // The reply goes out; the client's next call arrives at the poller.
        if let Some(tx) = self.completions.get().and_then(|c| c.get(poller)) {
            let _ = tx.send(id);
        }
    }
}

fn in_process(
    params: &Params,
    policy: Policy,
    threads: usize,
    run: usize,
) -> Result<Row, BenchError> {
    let sched = Scheduler::start(
        sched_config(params, policy, threads),
        SyntheticHandler {
            work: params.work,
            completions: OnceLock::new(),
        },
    )?;
    let pools = sched.pools();
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..pools).map(|_| crossbeam_channel::unbounded()).unzip();
    let _ = sched.handler().completions.set(senders);
    let tasks: Arc<Vec<_>> = Arc::new(
        (0..params.connections)
            .map(|id| {
                let pool = id % pools;
                sched.new_task(Synthetic { id, poller: pool }, pool)
            })
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let pollers: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(p, rx)| {
            let (enq, tasks, stop) = (
                sched.enqueuer().clone(),
                Arc::clone(&tasks),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                for t in tasks.iter().filter(|t| t.poller == p) {
                    enq.notify(t);
                }
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(id) = rx.recv_timeout(Duration::from_millis(50)) {
                        enq.notify(&tasks[id]);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(params.warmup);
    sched.reset_stats();
    let csw0 = ContextSwitches::now();
    let t0 = Instant::now();
    std::thread::sleep(params.duration);
    let stats = sched.stats();
    let elapsed = t0.elapsed();
    let csw = ContextSwitches::now().since(csw0);
    stop.store(true, Ordering::Relaxed);
    for p in pollers {
        let _ = p.join();
    }
    sched.shutdown();
    let key = RunKey {
        mode: Mode::InProcess,
        policy,
        threads,
        run,
    };
    Ok(row(key, params, elapsed, &stats, csw, None))
}

/// A NULL call (NFS program 100003 v3, AUTH_NONE), record-marked.
fn null_call(xid: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    rnfs_rpc::encode_call(xid, 100_003, 3, 0, &rnfs_rpc::Auth::None, &[], &mut out);
    out
}

fn read_reply(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(), BenchError> {
    let mut mark = [0u8; 4];
    stream.read_exact(&mut mark)?;
    let mark = u32::from_be_bytes(mark);
    let len = (mark & 0x7fff_ffff) as usize;
    if mark & 0x8000_0000 == 0 || len > 1 << 20 {
        return Err(BenchError::BadReply(format!(
            "unexpected record mark {mark:#x}"
        )));
    }
    buf.resize(len, 0);
    stream.read_exact(buf)?;
    match rnfs_rpc::decode_reply(buf) {
        Ok(r) if r.header.status == rnfs_rpc::ReplyStatus::Success => Ok(()),
        Ok(r) => Err(BenchError::BadReply(format!("{:?}", r.header.status))),
        Err(e) => Err(BenchError::BadReply(e.to_string())),
    }
}

fn loopback(
    params: &Params,
    policy: Policy,
    threads: usize,
    run: usize,
) -> Result<Row, BenchError> {
    let mut config = rnfs_server::ServerConfig::new(vec![SocketAddr::from(([127, 0, 0, 1], 0))]);
    config.sched = sched_config(params, policy, threads);
    let server = rnfs_server::Server::start(config)?;
    let addr = server.local_addrs()[0];
    let clients = if params.client_threads > 0 {
        params.client_threads
    } else {
        params.connections.div_ceil(16).clamp(1, 4)
    };
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for c in 0..clients {
        let share = params.connections / clients + usize::from(c < params.connections % clients);
        let (stop, measuring, calls) = (
            Arc::clone(&stop),
            Arc::clone(&measuring),
            Arc::clone(&calls),
        );
        handles.push(std::thread::spawn(
            move || -> Result<Histogram<u64>, BenchError> {
                let mut rtt = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 2)
                    .map_err(|e| BenchError::BadReply(e.to_string()))?;
                let mut conns = (0..share)
                    .map(|_| {
                        let s = TcpStream::connect(addr)?;
                        s.set_nodelay(true)?;
                        Ok(s)
                    })
                    .collect::<io::Result<Vec<_>>>()?;
                let mut buf = Vec::new();
                let mut xid = (c as u32) << 24;
                let mut sent = vec![Instant::now(); conns.len()];
                while !stop.load(Ordering::Relaxed) {
                    for (s, at) in conns.iter_mut().zip(sent.iter_mut()) {
                        xid = xid.wrapping_add(1);
                        *at = Instant::now();
                        s.write_all(&null_call(xid))?;
                    }
                    for (s, at) in conns.iter_mut().zip(sent.iter()) {
                        read_reply(s, &mut buf)?;
                        if measuring.load(Ordering::Relaxed) {
                            rtt.saturating_record(
                                u64::try_from(at.elapsed().as_nanos()).unwrap_or(u64::MAX),
                            );
                            calls.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Ok(rtt)
            },
        ));
    }
    std::thread::sleep(params.warmup);
    server.scheduler().reset_stats();
    let csw0 = ContextSwitches::now();
    measuring.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    std::thread::sleep(params.duration);
    let stats = server.scheduler().stats();
    let elapsed = t0.elapsed();
    let csw = ContextSwitches::now().since(csw0);
    measuring.store(false, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let mut rtt = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 2)
        .map_err(|e| BenchError::BadReply(e.to_string()))?;
    for h in handles {
        match h.join() {
            Ok(Ok(h)) => {
                let _ = rtt.add(&h);
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(BenchError::BadReply("client thread panicked".into())),
        }
    }
    server.shutdown();
    let key = RunKey {
        mode: Mode::Loopback,
        policy,
        threads,
        run,
    };
    let mut r = row(key, params, elapsed, &stats, csw, Some(Summary::of(&rtt)));
    // Calls seen by clients are the end-to-end figure.
    r.calls = calls.load(Ordering::Relaxed);
    r.calls_per_sec = r.calls as f64 / elapsed.as_secs_f64();
    Ok(r)
}

/// A fixed-width table of `rows`.
pub fn table(rows: &[Row]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<8} {:<8} {:>5} {:>5} {:>3} {:>10} {:>6} {:>8} {:>6} {:>7} {:>9} {:>7} {:>6} {:>5} {:>6} {:>6} {:>9}",
        "mode", "policy", "thr", "conn", "run", "calls/s", "min", "mean", "p50", "p99", "max", "wake/c", "waste%", "peak", "vcsw/c", "icsw/c", "rtt p99"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<8} {:<8} {:>5} {:>5} {:>3} {:>10.0} {:>6} {:>8.0} {:>6} {:>7} {:>9} {:>7.3} {:>6.2} {:>5} {:>6.2} {:>6.2} {:>9}",
            r.mode,
            r.policy.name(),
            r.threads,
            r.connections,
            r.run,
            r.calls_per_sec,
            r.handoff.min,
            r.handoff.mean,
            r.handoff.p50,
            r.handoff.p99,
            r.handoff.max,
            r.wakeups_per_call,
            r.wasted_wakeup_pct,
            r.peak_waking,
            r.voluntary_csw_per_call,
            r.involuntary_csw_per_call,
            r.client_rtt.map_or("-".to_owned(), |s| s.p99.to_string()),
        );
    }
    out
}

/// The 300 ns histogram of each row, as percentages (seed 001's format).
pub fn histogram_table(rows: &[Row]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("hand-off histogram, % of calls per 300 ns bin (centre ns)\n");
    let _ = write!(out, "{:<8} {:<8} {:>5}", "mode", "policy", "thr");
    for i in 0..crate::report::BINS {
        let _ = write!(
            out,
            " {:>6}",
            i * crate::report::BIN_NS + crate::report::BIN_NS / 2
        );
    }
    let _ = writeln!(out, " {:>6}", ">3000");
    for r in rows {
        let _ = write!(out, "{:<8} {:<8} {:>5}", r.mode, r.policy.name(), r.threads);
        for b in &r.handoff_bins {
            let _ = write!(out, " {:>6.2}", b.percent);
        }
        out.push('\n');
    }
    out
}

/// Medians over repetitions, and the ratios the requirements ask for: each
/// policy's mean hand-off at the largest thread count over the smallest, and
/// lwq's calls/s and p99 against each baseline at the largest count.
pub fn summary(rows: &[Row]) -> String {
    use std::fmt::Write as _;

    use crate::report::median;

    let mut out = String::from("medians over repetitions\n");
    let mut modes: Vec<&str> = Vec::new();
    for r in rows {
        if !modes.contains(&r.mode) {
            modes.push(r.mode);
        }
    }
    let mut threads: Vec<usize> = rows.iter().map(|r| r.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    let mut policies: Vec<Policy> = Vec::new();
    for r in rows {
        if !policies.contains(&r.policy) {
            policies.push(r.policy);
        }
    }
    let med = |mode: &str, p: Policy, t: usize, f: &dyn Fn(&Row) -> f64| {
        let mut v: Vec<f64> = rows
            .iter()
            .filter(|r| r.mode == mode && r.policy == p && r.threads == t)
            .map(f)
            .collect();
        median(&mut v)
    };
    for mode in &modes {
        let _ = writeln!(
            out,
            "{:<8} {:<8} {:>5} {:>10} {:>9} {:>8} {:>8} {:>7} {:>7}",
            "mode", "policy", "thr", "calls/s", "mean ns", "p50 ns", "p99 ns", "wake/c", "waste%"
        );
        for &p in &policies {
            for &t in &threads {
                let _ = writeln!(
                    out,
                    "{:<8} {:<8} {:>5} {:>10.0} {:>9.0} {:>8.0} {:>8.0} {:>7.3} {:>7.2}",
                    mode,
                    p.name(),
                    t,
                    med(mode, p, t, &|r| r.calls_per_sec),
                    med(mode, p, t, &|r| r.handoff.mean),
                    med(mode, p, t, &|r| r.handoff.p50 as f64),
                    med(mode, p, t, &|r| r.handoff.p99 as f64),
                    med(mode, p, t, &|r| r.wakeups_per_call),
                    med(mode, p, t, &|r| r.wasted_wakeup_pct),
                );
            }
        }
        if let (Some(&lo), Some(&hi)) = (threads.first(), threads.last()) {
            for &p in &policies {
                let ratio =
                    med(mode, p, hi, &|r| r.handoff.mean) / med(mode, p, lo, &|r| r.handoff.mean);
                let _ = writeln!(
                    out,
                    "{mode} {}: mean hand-off {hi} thr / {lo} thr = {ratio:.2}x",
                    p.name()
                );
            }
            for &p in policies.iter().filter(|&&p| p != Policy::Lwq) {
                let calls = med(mode, Policy::Lwq, hi, &|r| r.calls_per_sec)
                    / med(mode, p, hi, &|r| r.calls_per_sec);
                let p99 = |r: &Row| r.client_rtt.map_or(r.handoff.p99 as f64, |s| s.p99 as f64);
                let p99_ratio = med(mode, p, hi, &p99) / med(mode, Policy::Lwq, hi, &p99);
                let _ = writeln!(
                    out,
                    "{mode} at {hi} thr: lwq calls/s = {calls:.2}x {}; {} p99 = {p99_ratio:.2}x lwq's",
                    p.name(),
                    p.name()
                );
            }
        }
        out.push('\n');
    }
    out
}

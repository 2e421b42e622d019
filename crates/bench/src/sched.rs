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
//! A third kind of policy, `tokio`, runs only in-process: each call is
//! spawned as a task on a tokio multi-thread runtime with as many workers as
//! service threads (no busy flag, no waking bound, no counters of its own),
//! so the question "why not tokio?" has a number beside the answer.
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

/// A policy under test: one of the scheduler's, or the tokio baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchPolicy {
    /// An `rnfs_sched` policy.
    Sched(Policy),
    /// Each call spawned on a tokio multi-thread runtime (in-process only).
    Tokio,
}

impl BenchPolicy {
    /// Name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            BenchPolicy::Sched(p) => p.name(),
            BenchPolicy::Tokio => "tokio",
        }
    }

    /// Whether `mode` can run it (the server has no tokio policy).
    pub fn runs_in(self, mode: Mode) -> bool {
        !(self == BenchPolicy::Tokio && mode == Mode::Loopback)
    }
}

impl std::fmt::Display for BenchPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for BenchPolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Params {
    /// Harnesses.
    pub modes: Vec<Mode>,
    /// Policies, compared side by side.
    pub policies: Vec<BenchPolicy>,
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
    pub policy: BenchPolicy,
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
    /// Threads woken per dispatched task (NaN, `null` in JSON, for tokio,
    /// which does not count them).
    pub wakeups_per_call: f64,
    /// Wake-ups that found nothing to do, as a percentage of wake-ups (NaN
    /// for tokio).
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
    /// The tokio runtime would not start.
    #[error("tokio runtime: {0}")]
    Runtime(#[source] io::Error),
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
                for policy in policies.into_iter().filter(|p| p.runs_in(mode)) {
                    let row = match (mode, policy) {
                        (Mode::InProcess, BenchPolicy::Sched(p)) => {
                            in_process(params, p, threads, run)?
                        }
                        (Mode::InProcess, BenchPolicy::Tokio) => {
                            in_process_tokio(params, threads, run)?
                        }
                        (Mode::Loopback, BenchPolicy::Sched(p)) => {
                            loopback(params, p, threads, run)?
                        }
                        (Mode::Loopback, BenchPolicy::Tokio) => continue,
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
        policy: BenchPolicy::Sched(policy),
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

/// Figures of one tokio worker thread, merged into the run's totals when the
/// worker stops (tokio's own counters say nothing of hand-off latency).
struct TokioTally {
    calls: u64,
    handoff_ns: Histogram<u64>,
    /// Where this worker's calls report completion (the poller's channel).
    completions: Option<crossbeam_channel::Sender<usize>>,
}

thread_local! {
    static TOKIO_TALLY: std::cell::RefCell<Option<TokioTally>> =
        const { std::cell::RefCell::new(None) };
}

/// Whether a tokio baseline run is in its measured window (runs are
/// sequential, so one flag serves them all).
static TOKIO_MEASURING: AtomicBool = AtomicBool::new(false);

#[allow(
    clippy::expect_used,
    reason = "constant bounds that hdrhistogram accepts"
)]
fn handoff_histogram() -> Histogram<u64> {
    // As the scheduler's: 1 ns to 10 s, two significant digits.
    Histogram::new_with_bounds(1, 10_000_000_000, 2).expect("valid histogram bounds")
}

/// The in-process harness with each call spawned on a tokio multi-thread
/// runtime of `threads` workers instead of queued for a service thread.
fn in_process_tokio(params: &Params, threads: usize, run: usize) -> Result<Row, BenchError> {
    let (tx, rx) = crossbeam_channel::unbounded::<usize>();
    let totals = Arc::new(std::sync::Mutex::new((0u64, handoff_histogram())));
    let (start_tx, stop_totals) = (tx.clone(), Arc::clone(&totals));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("bench-tokio")
        .on_thread_start(move || {
            let completions = Some(start_tx.clone());
            TOKIO_TALLY.with(|t| {
                *t.borrow_mut() = Some(TokioTally {
                    calls: 0,
                    handoff_ns: handoff_histogram(),
                    completions,
                });
            });
        })
        .on_thread_stop(move || {
            if let Some(tally) = TOKIO_TALLY.with(|t| t.borrow_mut().take()) {
                let mut totals = stop_totals.lock().unwrap_or_else(|e| e.into_inner());
                totals.0 += tally.calls;
                let _ = totals.1.add(&tally.handoff_ns);
            }
        })
        .build()
        .map_err(BenchError::Runtime)?;
    drop(tx);
    let work = params.work;
    let spawn_call = move |handle: &tokio::runtime::Handle, id: usize| {
        let enqueued = Instant::now();
        handle.spawn(async move {
            let handoff = enqueued.elapsed();
            if !work.is_zero() {
                let start = Instant::now();
                while start.elapsed() < work {
                    std::hint::spin_loop();
                }
            }
            TOKIO_TALLY.with(|t| {
                if let Some(tally) = t.borrow_mut().as_mut() {
                    if TOKIO_MEASURING.load(Ordering::Relaxed) {
                        tally.calls += 1;
                        let ns = u64::try_from(handoff.as_nanos()).unwrap_or(u64::MAX);
                        tally.handoff_ns.saturating_record(ns.max(1));
                    }
                    if let Some(tx) = &tally.completions {
                        let _ = tx.send(id);
                    }
                }
            });
        });
    };
    let stop = Arc::new(AtomicBool::new(false));
    let poller = {
        let (handle, stop, connections) = (
            runtime.handle().clone(),
            Arc::clone(&stop),
            params.connections,
        );
        std::thread::spawn(move || {
            for id in 0..connections {
                spawn_call(&handle, id);
            }
            while !stop.load(Ordering::Relaxed) {
                if let Ok(id) = rx.recv_timeout(Duration::from_millis(50)) {
                    spawn_call(&handle, id);
                }
            }
        })
    };
    std::thread::sleep(params.warmup);
    TOKIO_MEASURING.store(true, Ordering::Relaxed);
    let csw0 = ContextSwitches::now();
    let t0 = Instant::now();
    std::thread::sleep(params.duration);
    TOKIO_MEASURING.store(false, Ordering::Relaxed);
    let elapsed = t0.elapsed();
    let csw = ContextSwitches::now().since(csw0);
    stop.store(true, Ordering::Relaxed);
    let _ = poller.join();
    // Joins the workers, whose `on_thread_stop` adds their tallies.
    runtime.shutdown_timeout(Duration::from_secs(10));
    let (calls, handoff_ns) = {
        let totals = totals.lock().unwrap_or_else(|e| e.into_inner());
        (totals.0, totals.1.clone())
    };
    let per_call = calls.max(1) as f64;
    Ok(Row {
        mode: Mode::InProcess.name(),
        policy: BenchPolicy::Tokio,
        threads,
        connections: params.connections,
        run,
        calls,
        calls_per_sec: calls as f64 / elapsed.as_secs_f64(),
        handoff: Summary::of(&handoff_ns),
        handoff_bins: bins_300ns(&handoff_ns),
        wakeups_per_call: f64::NAN,
        wasted_wakeup_pct: f64::NAN,
        peak_waking: 0,
        max_waking: 0,
        voluntary_csw_per_call: csw.voluntary as f64 / per_call,
        involuntary_csw_per_call: csw.involuntary as f64 / per_call,
        client_rtt: None,
    })
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

/// `v` with `prec` decimals, or `-` where the policy has no such figure.
fn figure(v: f64, prec: usize) -> String {
    if v.is_nan() {
        "-".to_owned()
    } else {
        format!("{v:.prec$}")
    }
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
            "{:<8} {:<8} {:>5} {:>5} {:>3} {:>10.0} {:>6} {:>8.0} {:>6} {:>7} {:>9} {:>7} {:>6} {:>5} {:>6.2} {:>6.2} {:>9}",
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
            figure(r.wakeups_per_call, 3),
            figure(r.wasted_wakeup_pct, 2),
            if r.policy == BenchPolicy::Tokio {
                "-".to_owned()
            } else {
                r.peak_waking.to_string()
            },
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
    let mut all_policies: Vec<BenchPolicy> = Vec::new();
    for r in rows {
        if !all_policies.contains(&r.policy) {
            all_policies.push(r.policy);
        }
    }
    let lwq = BenchPolicy::Sched(Policy::Lwq);
    let med = |mode: &str, p: BenchPolicy, t: usize, f: &dyn Fn(&Row) -> f64| {
        let mut v: Vec<f64> = rows
            .iter()
            .filter(|r| r.mode == mode && r.policy == p && r.threads == t)
            .map(f)
            .collect();
        median(&mut v)
    };
    for mode in &modes {
        let policies: Vec<BenchPolicy> = all_policies
            .iter()
            .copied()
            .filter(|&p| rows.iter().any(|r| r.mode == *mode && r.policy == p))
            .collect();
        let _ = writeln!(
            out,
            "{:<8} {:<8} {:>5} {:>10} {:>9} {:>8} {:>8} {:>7} {:>7}",
            "mode", "policy", "thr", "calls/s", "mean ns", "p50 ns", "p99 ns", "wake/c", "waste%"
        );
        for &p in &policies {
            for &t in &threads {
                let _ = writeln!(
                    out,
                    "{:<8} {:<8} {:>5} {:>10.0} {:>9.0} {:>8.0} {:>8.0} {:>7} {:>7}",
                    mode,
                    p.name(),
                    t,
                    med(mode, p, t, &|r| r.calls_per_sec),
                    med(mode, p, t, &|r| r.handoff.mean),
                    med(mode, p, t, &|r| r.handoff.p50 as f64),
                    med(mode, p, t, &|r| r.handoff.p99 as f64),
                    figure(med(mode, p, t, &|r| r.wakeups_per_call), 3),
                    figure(med(mode, p, t, &|r| r.wasted_wakeup_pct), 2),
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
            let others = policies.iter().filter(|&&p| p != lwq);
            for &p in others.filter(|_| policies.contains(&lwq)) {
                let calls = med(mode, lwq, hi, &|r| r.calls_per_sec)
                    / med(mode, p, hi, &|r| r.calls_per_sec);
                let p99 = |r: &Row| r.client_rtt.map_or(r.handoff.p99 as f64, |s| s.p99 as f64);
                let p99_ratio = med(mode, p, hi, &p99) / med(mode, lwq, hi, &p99);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn params(modes: Vec<Mode>, policies: Vec<BenchPolicy>) -> Params {
        Params {
            modes,
            policies,
            threads: vec![2],
            connections: 2,
            duration: Duration::from_millis(200),
            warmup: Duration::from_millis(50),
            repeat: 1,
            work: Duration::ZERO,
            max_waking: 1,
            pool_mode: PoolMode::Global,
            client_threads: 0,
        }
    }

    #[test]
    fn tokio_baseline_runs_beside_lwq_in_process() {
        let lwq = BenchPolicy::Sched(Policy::Lwq);
        let p = params(vec![Mode::InProcess], vec![lwq, BenchPolicy::Tokio]);
        let rows = run(&p, |_| {}).unwrap();
        assert_eq!(rows.len(), 2);
        let tokio = rows
            .iter()
            .find(|r| r.policy == BenchPolicy::Tokio)
            .unwrap();
        assert!(tokio.calls > 0, "{tokio:?}");
        // Every measured call recorded its hand-off, and nothing else did.
        let recorded: u64 = tokio.handoff_bins.iter().map(|b| b.count).sum();
        assert_eq!(recorded, tokio.calls);
        assert!(tokio.handoff.min > 0 && tokio.handoff.max >= tokio.handoff.p50);
        assert!(tokio.wakeups_per_call.is_nan() && tokio.wasted_wakeup_pct.is_nan());
        let json = serde_json::to_value(tokio).unwrap();
        assert_eq!(json["policy"], "tokio");
        assert!(json["wakeups_per_call"].is_null());
        let summary = summary(&rows);
        assert!(summary.contains("lwq calls/s ="), "{summary}");
        assert!(summary.contains(" tokio "), "{summary}");
        assert!(table(&rows)
            .lines()
            .any(|l| l.contains("tokio") && l.contains(" - ")));
    }

    #[test]
    fn tokio_baseline_is_skipped_over_loopback() {
        // No server is started for a matrix with nothing to run.
        let p = params(vec![Mode::Loopback], vec![BenchPolicy::Tokio]);
        assert!(run(&p, |_| {}).unwrap().is_empty());
        assert!(!BenchPolicy::Tokio.runs_in(Mode::Loopback));
        assert!(BenchPolicy::Tokio.runs_in(Mode::InProcess));
        assert!(BenchPolicy::Sched(Policy::Lwq).runs_in(Mode::Loopback));
    }
}

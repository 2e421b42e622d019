//! Draining and shutting down: every call the server read gets its reply before
//! its connection closes, calls it did not read get none, new connections are
//! refused, and the wait is for exactly the calls in flight.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use common::*;
use rnfs_rpc::{CallContext, Dispatcher, Service, ServiceError};
use rnfs_sched::{Config, PoolMode};
use rnfs_server::{DrainOutcome, Server, ServerConfig};
use rnfs_xdr::{Reader, Writer};
use socket2::{Domain, Socket, Type};

/// The test program (in the range RFC 5531 leaves to users).
const PROG: u32 = 0x2000_0D1A;
/// Procedures of [`Probe`].
const FAST: u32 = 0;
const SLOW: u32 = 1;
const GATED: u32 = 2;
const BIG: u32 = 3;
/// How long a SLOW call runs.
const SLOW_CALL: Duration = Duration::from_millis(50);
/// How long a GATED call waits for its gate at most.
const GATE_MAX: Duration = Duration::from_secs(10);
/// Bytes of results of a BIG call.
const BIG_REPLY: usize = 256 << 10;

/// The test service: records the xid of every call it starts, then FAST
/// returns, SLOW sleeps, GATED waits for [`Probe::open_gate`], BIG returns
/// [`BIG_REPLY`] bytes.
#[derive(Default)]
struct Probe {
    started: Mutex<Vec<u32>>,
    gate: Mutex<bool>,
    gate_opened: Condvar,
}

impl Probe {
    fn started(&self) -> Vec<u32> {
        self.started.lock().unwrap().clone()
    }

    fn started_count(&self) -> usize {
        self.started.lock().unwrap().len()
    }

    fn open_gate(&self) {
        *self.gate.lock().unwrap() = true;
        self.gate_opened.notify_all();
    }
}

struct ProbeService(Arc<Probe>);

impl Service for ProbeService {
    fn program(&self) -> u32 {
        PROG
    }
    fn versions(&self) -> (u32, u32) {
        (1, 1)
    }
    fn name(&self) -> &'static str {
        "drain-probe"
    }
    fn call(
        &self,
        ctx: &CallContext<'_>,
        _args: &mut Reader<'_>,
        reply: &mut Writer<'_>,
    ) -> Result<(), ServiceError> {
        self.0.started.lock().unwrap().push(ctx.xid);
        match ctx.proc_ {
            FAST => {}
            SLOW => std::thread::sleep(SLOW_CALL),
            GATED => {
                let gate = self.0.gate.lock().unwrap();
                let _open = self
                    .0
                    .gate_opened
                    .wait_timeout_while(gate, GATE_MAX, |open| !*open)
                    .unwrap();
            }
            BIG => reply.write_fixed_opaque(&vec![0xA5; BIG_REPLY]),
            _ => return Err(ServiceError::ProcUnavail),
        }
        Ok(())
    }
}

/// A loopback config with `threads` fixed service threads in one pool.
fn config_with(threads: usize) -> ServerConfig {
    let mut c = config();
    let mut sched = Config::fixed(threads);
    sched.name = "rnfs-drain".into();
    sched.pool_mode = PoolMode::Global;
    sched.pin_threads = false;
    c.sched = sched;
    c
}

fn start_probe(config: ServerConfig) -> (Server, Arc<Probe>) {
    let probe = Arc::new(Probe::default());
    let mut d = Dispatcher::new();
    d.register(Arc::new(ProbeService(Arc::clone(&probe))))
        .unwrap();
    let server = Server::start_with_dispatcher(config, Arc::new(d)).unwrap();
    (server, probe)
}

fn xid_of(record: &[u8]) -> u32 {
    u32::from_be_bytes(record[..4].try_into().unwrap())
}

/// Whether `e` is the server closing the connection (not a timeout).
fn is_close(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
    )
}

fn assert_refused(addr: SocketAddr) {
    match TcpStream::connect(addr) {
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}"),
        Ok(_) => panic!("a new connection was accepted after the drain began"),
    }
}

/// What one client connection saw.
#[derive(Debug, Default)]
struct ClientLog {
    sent: BTreeSet<u32>,
    replied: BTreeSet<u32>,
}

/// A client that keeps `depth` calls of `proc_` outstanding: it sends `depth`,
/// then one more for each reply, until the server closes the connection.
fn busy_client(addr: SocketAddr, conn: u32, depth: u32, proc_: u32) -> JoinHandle<ClientLog> {
    // Connected before returning: the drain must find every client connected.
    let mut s = connect(addr);
    std::thread::spawn(move || {
        let mut log = ClientLog::default();
        let mut seq = 0;
        let mut send = |s: &mut TcpStream, log: &mut ClientLog| {
            let xid = (conn << 20) | seq;
            seq += 1;
            let ok = s.write_all(&call_bytes(xid, PROG, 1, proc_)).is_ok();
            if ok {
                log.sent.insert(xid);
            }
            ok
        };
        let mut writable = (0..depth).all(|_| send(&mut s, &mut log));
        loop {
            match read_record(&mut s) {
                Ok(record) => {
                    log.replied.insert(xid_of(&record));
                    if writable {
                        writable = send(&mut s, &mut log);
                    }
                }
                Err(e) if is_close(&e) => return log,
                Err(e) => panic!("connection {conn}: the server neither answered nor closed: {e}"),
            }
        }
    })
}

/// Checks what the clients saw against what the service started: every call
/// started was answered before its connection closed, and no other.
fn assert_answered_exactly_the_calls_started(probe: &Probe, logs: &[ClientLog]) {
    let started: BTreeSet<u32> = probe.started().into_iter().collect();
    let mut replied = BTreeSet::new();
    let mut unanswered = 0;
    for (conn, log) in logs.iter().enumerate() {
        assert!(
            log.replied.is_subset(&log.sent),
            "connection {conn}: a reply to a call never sent"
        );
        unanswered += log.sent.len() - log.replied.len();
        replied.extend(&log.replied);
    }
    let lost: Vec<_> = started.difference(&replied).collect();
    assert!(lost.is_empty(), "started but never answered: {lost:?}");
    assert_eq!(replied, started);
    // Each client's last reply made it send a call the server did not read.
    assert!(unanswered > 0);
}

/// Drains a server under `CONNS` busy clients of `proc_`, each `depth` deep.
fn drain_under_load(threads: usize, depth: u32, proc_: u32) -> DrainOutcome {
    const CONNS: u32 = 8;
    let (server, probe) = start_probe(config_with(threads));
    let addr = addr(&server);
    let clients: Vec<_> = (0..CONNS)
        .map(|c| busy_client(addr, c, depth, proc_))
        .collect();
    // Let the load run (SLOW: 16 threads finish about 320 calls a second).
    assert!(wait_until(Duration::from_secs(10), || probe
        .started_count()
        >= 100));

    let outcome = server.drain(Duration::from_secs(10));
    eprintln!("drain under load ({threads} threads, {CONNS}x{depth}, proc {proc_}): {outcome:?}");
    assert_eq!(outcome.remaining, 0, "{outcome:?}");
    assert!(
        outcome.in_flight_at_start <= u64::from(CONNS * depth),
        "{outcome:?}"
    );
    // Calls take 50 ms at most; the timeout is 10 s (a loaded machine may
    // take seconds, not the whole timeout).
    assert!(outcome.elapsed < Duration::from_secs(5), "{outcome:?}");
    assert_eq!(server.in_flight(), 0);
    assert_eq!(server.stats_snapshot().transport.in_flight, 0);
    assert_refused(addr);
    // Nothing more is read, though the clients keep sending.
    let started_at_drain = probe.started_count();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(probe.started_count(), started_at_drain);
    assert_eq!(server.in_flight(), 0);

    server.shutdown();
    let logs: Vec<ClientLog> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    assert_answered_exactly_the_calls_started(&probe, &logs);
    outcome
}

#[test]
fn drain_under_slow_load_answers_every_call_read_and_no_other() {
    let outcome = drain_under_load(16, 4, SLOW);
    // Every thread was running a 50 ms call.
    assert!(outcome.in_flight_at_start > 0, "{outcome:?}");
}

#[test]
fn drain_under_fast_load_answers_every_call_read_and_no_other() {
    drain_under_load(THREADS, 16, FAST);
}

#[test]
fn drain_gives_up_at_the_timeout_with_the_call_still_running() {
    let (server, probe) = start_probe(config_with(2));
    let mut s = connect(addr(&server));
    s.write_all(&call_bytes(7, PROG, 1, GATED)).unwrap();
    assert!(wait_until(Duration::from_secs(10), || probe
        .started_count()
        == 1));
    assert_eq!(server.in_flight(), 1);
    assert_eq!(server.stats_snapshot().transport.in_flight, 1);

    let timeout = Duration::from_millis(300);
    let outcome = server.drain(timeout);
    assert_eq!(outcome.in_flight_at_start, 1, "{outcome:?}");
    assert_eq!(outcome.remaining, 1, "{outcome:?}");
    assert!(outcome.elapsed >= timeout, "{outcome:?}");
    // Well before the gated call would end (GATE_MAX), even on a loaded machine.
    assert!(
        outcome.elapsed < timeout + Duration::from_secs(5),
        "{outcome:?}"
    );
    assert_refused(addr(&server));

    // The connection stays open until shutdown: the late reply still arrives.
    probe.open_gate();
    assert_eq!(xid_of(&read_record(&mut s).unwrap()), 7);
    assert!(wait_until(Duration::from_secs(10), || server.in_flight() == 0));
    let again = server.drain(Duration::from_secs(1));
    assert_eq!((again.in_flight_at_start, again.remaining), (0, 0));
    server.shutdown();
    assert_closed_by_server(&mut s);
}

/// Writes `calls` pipelined calls of `proc_` in one go, from xid 1.
fn burst(s: &mut TcpStream, calls: u32, proc_: u32) {
    let bytes: Vec<u8> = (1..=calls)
        .flat_map(|xid| call_bytes(xid, PROG, 1, proc_))
        .collect();
    s.write_all(&bytes).unwrap();
}

/// Reads replies until the server closes the connection.
fn replies_until_closed(s: &mut TcpStream) -> BTreeSet<u32> {
    let mut replied = BTreeSet::new();
    loop {
        match read_record(s) {
            Ok(record) => assert!(replied.insert(xid_of(&record)), "a second reply"),
            Err(e) if is_close(&e) => return replied,
            Err(e) => panic!("the server neither answered nor closed: {e}"),
        }
    }
}

#[test]
fn shutdown_right_after_a_burst_is_read_loses_no_reply() {
    let (server, probe) = start_probe(config_with(THREADS));
    let mut s = connect(addr(&server));
    burst(&mut s, 64, FAST);
    // Every call has started; some replies may not have been written yet.
    assert!(wait_until(Duration::from_secs(10), || probe
        .started_count()
        == 64));
    server.shutdown();
    let replied = replies_until_closed(&mut s);
    assert_eq!(replied, (1..=64).collect());
}

#[test]
fn shutdown_during_a_burst_answers_exactly_the_calls_read() {
    let (server, probe) = start_probe(config_with(THREADS));
    let mut s = connect(addr(&server));
    burst(&mut s, 64, SLOW);
    // The first calls are running (each takes 50 ms); most are unread.
    assert!(wait_until(Duration::from_secs(10), || probe
        .started_count()
        >= THREADS));
    server.shutdown();
    let replied = replies_until_closed(&mut s);
    let started: BTreeSet<u32> = probe.started().into_iter().collect();
    assert!(started.len() >= THREADS);
    assert!(started.len() < 64, "shutdown read every call of the burst");
    assert_eq!(replied, started);
}

/// Connects with a tiny receive buffer, so replies back up in the server.
fn connect_small_rcvbuf(addr: SocketAddr) -> TcpStream {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    let s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

#[test]
fn drain_waits_for_buffered_replies_to_be_written() {
    const CALLS: u32 = 8;
    let mut config = config_with(THREADS);
    config.send_buffer_size = Some(4096);
    let (server, probe) = start_probe(config);
    let addr = addr(&server);
    let mut s = connect_small_rcvbuf(addr);
    burst(&mut s, CALLS, BIG);
    // Every call ran; their 2 MiB of replies cannot all fit in the sockets.
    assert!(wait_until(Duration::from_secs(10), || probe
        .started_count()
        == CALLS as usize
        && server.stats().peak_output_buffered > 0));
    std::thread::sleep(Duration::from_millis(50));
    assert!(server.in_flight() > 0);

    let server = Arc::new(server);
    let drain = {
        let server = Arc::clone(&server);
        std::thread::spawn(move || server.drain(Duration::from_secs(10)))
    };
    // Refused once the drain has begun (a connection made before that is simply
    // never read).
    assert!(wait_until(Duration::from_secs(10), || TcpStream::connect(
        addr
    )
    .is_err()));
    assert_refused(addr);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !drain.is_finished(),
        "the drain ended with replies unwritten"
    );

    let mut sizes = Vec::new();
    for _ in 0..CALLS {
        sizes.push(read_record(&mut s).unwrap().len());
    }
    let outcome = drain.join().unwrap();
    assert_eq!(outcome.remaining, 0, "{outcome:?}");
    assert!(outcome.in_flight_at_start > 0, "{outcome:?}");
    // xid, REPLY, accepted, verifier (flavor, length), SUCCESS, then the data.
    assert!(sizes.iter().all(|&n| n == 24 + BIG_REPLY), "{sizes:?}");
    Arc::into_inner(server).unwrap().shutdown();
    assert_closed_by_server(&mut s);
}

#[test]
fn replies_buffered_for_a_vanished_client_stop_counting() {
    let mut config = config_with(THREADS);
    config.send_buffer_size = Some(4096);
    let (server, probe) = start_probe(config);
    let mut s = connect_small_rcvbuf(addr(&server));
    burst(&mut s, 8, BIG);
    assert!(wait_until(Duration::from_secs(10), || probe
        .started_count()
        == 8
        && server.stats().peak_output_buffered > 0));
    assert!(server.in_flight() > 0);
    // Closing with replies unread resets the connection; the server drops it
    // with its replies, which no longer count as in flight.
    drop(s);
    assert!(
        wait_until(Duration::from_secs(10), || server.in_flight() == 0),
        "{} call(s) still counted",
        server.in_flight()
    );
    let outcome = server.drain(Duration::from_secs(10));
    assert_eq!((outcome.in_flight_at_start, outcome.remaining), (0, 0));
}

#[test]
fn stats_report_the_thread_bounds_in_force() {
    let mut config = config_with(2);
    config.sched.max_threads = 6;
    let (server, _probe) = start_probe(config);
    let bounds = |server: &Server| {
        let s = server.stats_snapshot().sched;
        (s.min_threads, s.max_threads)
    };
    assert_eq!(server.scheduler().limits(), (2, 6));
    assert_eq!(bounds(&server), (2, 6));
    server.scheduler().set_limits(3, 9).unwrap();
    assert_eq!(server.scheduler().limits(), (3, 9));
    assert_eq!(bounds(&server), (3, 9));
    server.scheduler().set_threads(4).unwrap();
    assert_eq!(bounds(&server), (4, 4));
}

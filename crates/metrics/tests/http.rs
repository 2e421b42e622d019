//! The HTTP endpoint over real sockets: routes, status codes, content types,
//! the JSON round trip, and the limits.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{exchange, request, snapshot_at};
use rnfs_metrics::{HttpLimits, MetricsError, MetricsServer, StatsSnapshot};

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn fixed_source() -> Arc<dyn Fn() -> StatsSnapshot + Send + Sync> {
    let snapshot = snapshot_at(7);
    Arc::new(move || snapshot.clone())
}

#[test]
fn routes_answer_with_their_content_types() {
    let server = MetricsServer::start(any_port(), fixed_source()).unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);

    let page = request(addr, "GET", "/");
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(csp.contains("connect-src 'self'"), "{csp}");
    let html = page.text();
    assert!(html.contains("<canvas id=\"g-calls\""), "not the dashboard");
    assert_eq!(html, request(addr, "GET", "/?interval_ms=100").text());

    let metrics = request(addr, "GET", "/metrics");
    assert_eq!(metrics.status, 200);
    let content_type = metrics.header("content-type").unwrap();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    assert_eq!(metrics.header("cache-control"), Some("no-store"));
    let text = metrics.text();
    assert!(text.contains("# TYPE rnfs_calls_total counter\n"), "{text}");
    assert!(
        text.contains("rnfs_calls_total{program=\"nfs\",version=\"3\",procedure=\"GETATTR\"} "),
        "{text}"
    );

    let stats = request(addr, "GET", "/api/stats");
    assert_eq!(stats.status, 200);
    assert_eq!(stats.header("content-type"), Some("application/json"));
    let back: StatsSnapshot = serde_json::from_slice(&stats.body).unwrap();
    assert_eq!(back, snapshot_at(7));

    // The query string does not change the route.
    assert_eq!(request(addr, "GET", "/api/stats?x=1").body, stats.body);
    server.shutdown();
}

#[test]
fn unknown_paths_get_404_and_other_methods_405() {
    let server = MetricsServer::start(any_port(), fixed_source()).unwrap();
    let addr = server.local_addr();
    for path in ["/nope", "/metrics/", "/api", "/api/stats/x", "/favicon.ico"] {
        let r = request(addr, "GET", path);
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    }
    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        for path in ["/", "/metrics", "/api/stats"] {
            let r = request(addr, method, path);
            assert_eq!(r.status, 405, "{method} {path}");
            assert_eq!(r.header("allow"), Some("GET, HEAD"));
        }
    }
    let post = exchange(
        addr,
        b"POST /metrics HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\nhello",
    );
    assert_eq!(post.status, 405);
    // HEAD: the headers of GET without the body.
    let head = request(addr, "HEAD", "/metrics");
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    server.shutdown();
}

#[test]
fn every_request_reads_a_fresh_snapshot() {
    let server = MetricsServer::start(any_port(), common::growing_source()).unwrap();
    let addr = server.local_addr();
    let uptime = |r: common::Reply| serde_json::from_slice::<StatsSnapshot>(&r.body).unwrap();
    let a = uptime(request(addr, "GET", "/api/stats"));
    let b = uptime(request(addr, "GET", "/api/stats"));
    assert!(b.uptime_secs > a.uptime_secs);
    // The dashboard page itself does not ask the source.
    request(addr, "GET", "/");
    let c = uptime(request(addr, "GET", "/api/stats"));
    assert_eq!(c.uptime_secs, b.uptime_secs + 1.0);
    server.shutdown();
}

#[test]
fn garbage_and_oversized_requests_are_refused() {
    let server = MetricsServer::start(any_port(), fixed_source()).unwrap();
    let addr = server.local_addr();
    let bad = exchange(addr, b"this is not http\r\n\r\n");
    assert_eq!(bad.status, 400);
    // A request head larger than the 8 KiB buffer.
    let mut big = b"GET /metrics HTTP/1.1\r\nhost: x\r\n".to_vec();
    for i in 0..400 {
        big.extend_from_slice(format!("x-filler-{i}: {}\r\n", "a".repeat(40)).as_bytes());
    }
    big.extend_from_slice(b"\r\n");
    let r = exchange(addr, &big);
    assert_eq!(r.status, 431);
    // The server is still serving.
    assert_eq!(request(addr, "GET", "/metrics").status, 200);
    server.shutdown();
}

#[test]
fn connections_are_capped_and_slow_ones_time_out() {
    let timeout = Duration::from_millis(600);
    let limits = HttpLimits {
        max_connections: 2,
        request_timeout: timeout,
    };
    let server = MetricsServer::start_with_limits(any_port(), fixed_source(), limits).unwrap();
    let addr = server.local_addr();
    // Two clients that send half a request hold both connection slots.
    let start = Instant::now();
    let mut slow: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    // A third is not served until the timeout cuts one of them off.
    let third = request(addr, "GET", "/metrics");
    let waited = start.elapsed();
    assert_eq!(third.status, 200);
    assert!(
        waited >= timeout - Duration::from_millis(50),
        "served after {waited:?}, before a slot was free"
    );
    // Bounds in seconds: a loaded machine may be slow to serve it.
    assert!(waited < timeout * 8, "served only after {waited:?}");
    // The slow ones were closed, with at most a 408 and no metrics.
    for s in &mut slow {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        let text = String::from_utf8_lossy(&buf);
        assert!(!text.contains("rnfs_"), "{text}");
    }
    assert!(start.elapsed() < timeout * 8);
    server.shutdown();
}

#[test]
fn shutdown_closes_the_port_and_a_taken_port_is_an_error() {
    let server = MetricsServer::start(any_port(), fixed_source()).unwrap();
    let addr = server.local_addr();
    match MetricsServer::start(addr, fixed_source()) {
        Err(MetricsError::Bind { addr: a, .. }) => assert_eq!(a, addr),
        other => panic!("second bind of {addr}: {other:?}"),
    }
    // An idle connection does not hold shutdown up.
    let _idle = TcpStream::connect(addr).unwrap();
    let start = Instant::now();
    server.shutdown();
    // Not the 10 s request timeout, with room for a loaded machine.
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(TcpStream::connect(addr).is_err(), "still listening");
}

#[test]
fn dashboard_loads_nothing_from_elsewhere() {
    let html = include_str!("../assets/dashboard.html");
    for needle in ["http://", "https://", "src=", "<link", "@import", "url("] {
        assert!(!html.contains(needle), "dashboard.html contains {needle:?}");
    }
    // The page fetches only its own relative API path.
    assert!(html.contains("fetch(\"api/stats\""));
}

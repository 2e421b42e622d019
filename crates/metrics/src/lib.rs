//! rnfs statistics over HTTP: a Prometheus endpoint, the same figures as JSON,
//! and a live dashboard page.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use rnfs_server::metrics::StatsSnapshot;
//! let source = Arc::new(StatsSnapshot::default);
//! let metrics = rnfs_metrics::MetricsServer::start("127.0.0.1:9400".parse().unwrap(), source)?;
//! // ... curl http://127.0.0.1:9400/metrics
//! metrics.shutdown();
//! # Ok::<(), rnfs_metrics::MetricsError>(())
//! ```
//!
//! | route | answer |
//! |---|---|
//! | `GET /metrics` | Prometheus text format 0.0.4 ([`exposition`]); metric names in `README.md` |
//! | `GET /api/stats` | the [`StatsSnapshot`] as JSON (the admin socket's `stats` result) |
//! | `GET /` | the dashboard: one self-contained HTML page that polls `/api/stats` |
//! | other paths | 404; other methods than GET and HEAD on these paths: 405 |
//!
//! # Design
//!
//! **Where the numbers come from.** The server already keeps totals (calls,
//! bytes, wake-ups) and latency quantiles from HDR histograms, and builds a
//! [`StatsSnapshot`] on request. Each scrape asks the `source` closure for one
//! and renders it; this crate keeps no state of its own, so `/metrics`,
//! `/api/stats`, `rnfs stats` and the dashboard always agree.
//!
//! **Encoding.** [`exposition::render`] builds the `prometheus` crate's
//! `MetricFamily` values from the snapshot and lets its `TextEncoder` write
//! them (names, `# HELP`/`# TYPE`, label escaping). That crate (TiKV's,
//! maintained) speaks the classic text format 0.0.4 and has summaries, which
//! fit the quantiles the server already computes; `prometheus-client` only
//! writes OpenMetrics text and has no summary type. Built without its
//! `protobuf` feature, it pulls in no code generator.
//!
//! **HTTP.** hyper's HTTP/1 server on a current-thread tokio runtime, on one
//! thread named `rnfs-metrics`. It is bounded: at most
//! [`HttpLimits::max_connections`] connections at once (more wait in the
//! kernel's listen backlog), one request per connection (no keep-alive), a
//! fixed 8 KiB read buffer per connection (a larger request head gets 431), and
//! [`HttpLimits::request_timeout`] from accept to the last byte written. The
//! snapshot is taken and encoded on that thread, between reading the request
//! and writing the response. (The simpler `tiny_http` starts a thread per
//! connection, unbounded, and has no read timeout; its last release is from
//! 2022.)
//!
//! **Dashboard.** `assets/dashboard.html`, compiled in with `include_str!`: HTML,
//! CSS and JavaScript inline, no external asset (the response's
//! Content-Security-Policy forbids any). It polls `api/stats` every second
//! (`?interval_ms=N` changes that, for tests), keeps five minutes of samples,
//! computes rates from counter differences over the server's uptime, and
//! draws line graphs and the hand-off histogram on `<canvas>` elements. It
//! writes what it drew (each canvas's box and point count) into
//! `<pre id="test-report">`, which `tests/dashboard.rs` reads back from
//! headless Chromium before checking the screenshot's pixels.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod exposition;
mod server;

pub use rnfs_server::metrics::StatsSnapshot;
pub use server::{HttpLimits, MetricsServer};

/// The endpoint could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// The address could not be bound (in use, not local, or privileged).
    #[error("metrics: cannot listen on {addr}: {cause}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why.
        cause: std::io::Error,
    },
    /// The runtime or its thread could not be created.
    #[error("metrics: cannot start the HTTP thread: {0}")]
    Start(std::io::Error),
}

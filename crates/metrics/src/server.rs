//! The HTTP endpoint: routing, limits, and the thread that runs it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rnfs_server::metrics::StatsSnapshot;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Semaphore};

use crate::{exposition, MetricsError};

/// The dashboard page, self-contained (inline CSS and JavaScript).
const DASHBOARD: &str = include_str!("../assets/dashboard.html");

/// What the dashboard may load: only itself and `/api/stats` (the page uses no
/// other asset, and the policy makes sure a browser fetches none).
const DASHBOARD_CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; \
    style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; \
    base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Read buffer per connection (hyper's minimum); a request head that does not
/// fit is refused with 431.
const MAX_REQUEST_BUFFER: usize = 8 * 1024;

/// Pause after a failed `accept` (out of descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Bounds on the HTTP endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections served at once; each carries exactly one request (no
    /// keep-alive). Further connections are not accepted until one ends: they
    /// wait in the kernel's listen backlog (bounded), as with any busy server.
    pub max_connections: usize,
    /// Longest a connection may take from being accepted to the response being
    /// written (request head read, snapshot, encoding, write).
    pub request_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_connections: 16,
            request_timeout: Duration::from_secs(10),
        }
    }
}

/// A running metrics endpoint. Dropping it stops it, as [`MetricsServer::shutdown`] does.
pub struct MetricsServer {
    local_addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl MetricsServer {
    /// Listens on `addr` (port 0 picks a free port) and serves `GET /metrics`,
    /// `GET /api/stats` and `GET /` from a thread of its own, with the default
    /// [`HttpLimits`]. `source` is called once per `/metrics` or `/api/stats`
    /// request, on that thread; it should take at most a few milliseconds.
    pub fn start(
        addr: SocketAddr,
        source: Arc<dyn Fn() -> StatsSnapshot + Send + Sync>,
    ) -> Result<Self, MetricsError> {
        Self::start_with_limits(addr, source, HttpLimits::default())
    }

    /// [`MetricsServer::start`] with explicit limits.
    pub fn start_with_limits(
        addr: SocketAddr,
        source: Arc<dyn Fn() -> StatsSnapshot + Send + Sync>,
        limits: HttpLimits,
    ) -> Result<Self, MetricsError> {
        let bind = |cause| MetricsError::Bind { addr, cause };
        let std_listener = std::net::TcpListener::bind(addr).map_err(bind)?;
        std_listener.set_nonblocking(true).map_err(bind)?;
        let local_addr = std_listener.local_addr().map_err(bind)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(MetricsError::Start)?;
        let listener = {
            let _context = runtime.enter();
            TcpListener::from_std(std_listener).map_err(bind)?
        };
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("rnfs-metrics".into())
            .spawn(move || runtime.block_on(accept_loop(listener, source, limits, stopped)))
            .map_err(MetricsError::Start)?;
        tracing::info!("metrics: serving http://{local_addr}/ (dashboard) and /metrics");
        Ok(Self {
            local_addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, drops the connections being served and joins the thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(stop) = self.stop.take() {
            // Err: the loop has already ended.
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::warn!("metrics: the HTTP thread panicked");
            }
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Accepts until `stopped` fires; each connection is one task holding one
/// permit, and nothing is accepted while no permit is free. Returning drops the
/// runtime's remaining tasks, so in-flight connections end with it.
async fn accept_loop(
    listener: TcpListener,
    source: Arc<dyn Fn() -> StatsSnapshot + Send + Sync>,
    limits: HttpLimits,
    mut stopped: oneshot::Receiver<()>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let permit = tokio::select! {
            _ = &mut stopped => return,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_closed) => return,
            },
        };
        let stream = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    tracing::warn!("metrics: accept failed: {e}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let source = Arc::clone(&source);
        tokio::spawn(async move {
            serve_connection(stream, source, limits.request_timeout).await;
            drop(permit);
        });
    }
}

/// Serves the one request of a connection within `timeout`.
async fn serve_connection(
    stream: TcpStream,
    source: Arc<dyn Fn() -> StatsSnapshot + Send + Sync>,
    timeout: Duration,
) {
    let service = service_fn(move |request: Request<Incoming>| {
        let response = respond(request.method(), request.uri().path(), &*source);
        async move { Ok::<_, Infallible>(response) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(timeout)
        .keep_alive(false)
        .max_buf_size(MAX_REQUEST_BUFFER)
        .serve_connection(TokioIo::new(stream), service);
    match tokio::time::timeout(timeout, connection).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!("metrics: connection error: {e}"),
        Err(_) => tracing::debug!("metrics: connection timed out after {timeout:?}"),
    }
}

/// The response to `method path`.
pub(crate) fn respond(
    method: &Method,
    path: &str,
    source: &(dyn Fn() -> StatsSnapshot + Send + Sync),
) -> Response<Full<Bytes>> {
    let route = match path {
        "/" | "/index.html" => Route::Dashboard,
        "/metrics" => Route::Metrics,
        "/api/stats" => Route::Stats,
        _ => return plain(StatusCode::NOT_FOUND, "not found\n"),
    };
    if method != Method::GET && method != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match route {
        Route::Dashboard => {
            let mut r = body(
                StatusCode::OK,
                "text/html; charset=utf-8",
                Bytes::from_static(DASHBOARD.as_bytes()),
            );
            r.headers_mut().insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(DASHBOARD_CSP),
            );
            r
        }
        Route::Metrics => match exposition::render(&source()) {
            Ok(text) => body(StatusCode::OK, exposition::CONTENT_TYPE, Bytes::from(text)),
            Err(e) => {
                tracing::warn!("metrics: cannot encode: {e}");
                plain(StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n")
            }
        },
        Route::Stats => match serde_json::to_vec(&source()) {
            Ok(json) => body(StatusCode::OK, "application/json", Bytes::from(json)),
            Err(e) => {
                tracing::warn!("metrics: cannot encode stats: {e}");
                plain(StatusCode::INTERNAL_SERVER_ERROR, "cannot encode stats\n")
            }
        },
    }
}

enum Route {
    Dashboard,
    Metrics,
    Stats,
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    body(
        status,
        "text/plain; charset=utf-8",
        Bytes::from_static(text.as_bytes()),
    )
}

fn body(status: StatusCode, content_type: &'static str, data: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(data));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

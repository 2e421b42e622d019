//! Serves the dashboard and `/metrics` with synthetic, moving figures, to look
//! at them without running an NFS server:
//!
//! ```text
//! cargo run -p rnfs-metrics --example demo -- 127.0.0.1:9400
//! cargo run -p rnfs-metrics --example demo -- 127.0.0.1:9400 --per-request
//! ```
//!
//! With `--per-request` every request advances the synthetic server by one
//! second, so a page polling fast (`/?interval_ms=100`) fills its graphs in
//! seconds; it is how `docs/img/dashboard.png` was taken.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "example")]

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Instant;

use rnfs_metrics::StatsSnapshot;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let per_request = args.iter().any(|a| a == "--per-request");
    let addr = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map_or("127.0.0.1:9400", String::as_str)
        .parse()
        .expect("usage: demo [ADDR:PORT] [--per-request]");
    let source: Arc<dyn Fn() -> StatsSnapshot + Send + Sync> = if per_request {
        common::growing_source()
    } else {
        let start = Instant::now();
        Arc::new(move || common::snapshot_at(start.elapsed().as_secs() + 1))
    };
    let server = rnfs_metrics::MetricsServer::start(addr, source).expect("cannot start");
    println!("dashboard: http://{}/", server.local_addr());
    loop {
        std::thread::park();
    }
}

//! The duplicate request cache's cost per call, alone: `begin` and `finish`
//! of NFSv3 WRITE-shaped calls with the default limits, 256 calls in flight
//! (16 connections x 16 deep), in a cache kept full so every call evicts.
//! Between calls it streams through a buffer, as a call's 4 KiB payload does,
//! so the cache's lines are as cold as a server finds them.
//!
//! `cargo run --release -p rnfs-server --example drc_cost [CALLS [ROUNDS [stream-only]]]`
//! prints nanoseconds per call for each round and their median; `stream-only`
//! skips the cache, for the streaming's own share. Under
//! `valgrind --tool=cachegrind` (one round) it counts instructions and misses.

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Instant;

use rnfs_server::drc::{DrcBegin, DrcGuard, DrcKey, DrcLimits, DuplicateRequestCache};

const IN_FLIGHT: usize = 256;
/// A WRITE reply: header, wcc data, count, stable, verifier.
const REPLY: [u8; 164] = [7; 164];
/// Bytes streamed between calls (a call's payload through recv and pwrite).
const STREAM: usize = 8 * 1024;

fn main() {
    let mut args = std::env::args().skip(1);
    let calls: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let stream_only = args.next().is_some_and(|a| a == "stream-only");
    let drc = DuplicateRequestCache::new(DrcLimits::default());
    let peers: Vec<SocketAddr> = (0..16)
        .map(|i| SocketAddr::from(([127, 0, 0, 1], 700 + i)))
        .collect();
    let mut stream = vec![0u8; 4 << 20];
    let mut xid = 0u32;
    let mut round_ns = Vec::new();
    // Fill the cache first, so every measured call evicts.
    let warm = DrcLimits::DEFAULT_MAX_ENTRIES * 2;
    for round in 0..=rounds {
        let n = if round == 0 { warm } else { calls };
        let mut in_flight: Vec<DrcGuard<'_>> = Vec::with_capacity(IN_FLIGHT);
        let mut at = 0;
        let start = Instant::now();
        for i in 0..n {
            xid = xid.wrapping_add(1);
            let peer = peers[xid as usize % peers.len()];
            let args = xid.wrapping_mul(0x9E37_79B9).to_be_bytes();
            let key = DrcKey::new(peer, xid, 100_003, 3, 7, &args);
            if stream_only {
                black_box(key);
            } else {
                match drc.begin(key) {
                    DrcBegin::Run(guard) => {
                        if in_flight.len() < IN_FLIGHT {
                            in_flight.push(guard);
                        } else {
                            let done = std::mem::replace(&mut in_flight[i % IN_FLIGHT], guard);
                            done.finish(black_box(&REPLY));
                        }
                    }
                    other => panic!("a new xid was not run: {other:?}"),
                }
            }
            // Stream through the buffer as a call's payload would.
            let chunk = &mut stream[at..at + STREAM];
            chunk[0] = chunk[STREAM - 1].wrapping_add(1);
            black_box(chunk.iter().step_by(64).fold(0u8, |a, &b| a ^ b));
            at = (at + STREAM) % stream.len();
        }
        let ns = start.elapsed().as_nanos() as f64 / n as f64;
        for guard in in_flight.drain(..) {
            guard.finish(&REPLY);
        }
        if round > 0 {
            println!("round {round}: {ns:.1} ns per call");
            round_ns.push(ns);
        }
    }
    round_ns.sort_by(f64::total_cmp);
    if let Some(median) = round_ns.get(round_ns.len() / 2) {
        println!("median: {median:.1} ns per call ({calls} calls a round)");
    }
    let st = drc.stats();
    assert!(
        stream_only || st.evictions > 0,
        "the cache never filled: {st:?}"
    );
}

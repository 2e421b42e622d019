//! The workload of `bench/clock-cache`: the vfs crate's ClockCache (its source
//! included from a checkout, `@CACHE_RS@`) filled with 50,000 handles, then
//! ROUNDS rounds of OP, each 50,000 operations:
//! - `get`: look every handle up (all hits);
//! - `insert`: insert 50,000 new handles (each evicts one).
//!
//! Usage: clock-cache-bench get|insert ROUNDS
use std::hint::black_box;

pub use rnfs_vfs::BackendHandle;

#[allow(dead_code, reason = "only new, insert and get are driven")]
#[path = "@CACHE_RS@"]
mod cache;

const KEYS: u64 = 50_000;

/// A handle shaped like the local backend's on tmpfs: a type byte, then the
/// inode and generation numbers (13 bytes).
fn handle(i: u64) -> BackendHandle {
    let mut bytes = [0; 13];
    bytes[0] = 1;
    bytes[1..9].copy_from_slice(&i.to_le_bytes());
    bytes[9..].copy_from_slice(&0x5eed_u32.to_le_bytes());
    BackendHandle::new(&bytes).expect("13 bytes fit")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(op), Some(rounds)) = (args.next(), args.next().and_then(|r| r.parse::<u64>().ok()))
    else {
        eprintln!("usage: clock-cache-bench get|insert ROUNDS");
        std::process::exit(2);
    };
    let cache = cache::ClockCache::<u64>::new(1 << 16);
    for i in 0..KEYS {
        cache.insert(handle(i), i);
    }
    let mut hits = 0;
    for round in 0..rounds {
        match op.as_str() {
            "get" => {
                for i in 0..KEYS {
                    hits += u64::from(cache.get(black_box(&handle(i))).is_some());
                }
            }
            "insert" => {
                for i in 0..KEYS {
                    let key = handle((round + 1) * KEYS + i);
                    black_box(cache.insert(black_box(key), i));
                }
            }
            _ => {
                eprintln!("clock-cache-bench: unknown operation {op}");
                std::process::exit(2);
            }
        }
    }
    println!("{op} {rounds} rounds, {hits} hits");
}

//! A record mark claiming a huge record, followed by a few bytes and then
//! nothing, costs the server memory in proportion to the bytes received, not
//! to the size the mark claims (it once cost ~1 MiB per connection, held
//! until the connection closed).
//!
//! Memory is counted by a global allocator that tracks live heap bytes (the
//! process's RSS would not show untouched allocations), so this file holds one
//! test: nothing else allocates in the process while it measures.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a test failure"
)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;

/// The system allocator, counting the bytes it has live.
struct Counting;

/// Heap bytes allocated and not yet freed. Relaxed: a statistic read after
/// waits on other signals; no other memory is published through it, and a
/// count a few allocations stale only shifts the measure by those bytes.
static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments, so
// `System`'s guarantees hold; the counting touches only an atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract, forwarded as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` and `layout` come from this allocator, i.e. `System`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` and `layout` come from `System`; the caller upholds
        // `realloc`'s contract for `new_size`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

const CONNECTIONS: usize = 64;
/// Body bytes sent after each mark: enough to be read straight into the
/// record, so the allocation for that is made.
const SENT: usize = 5000;

#[test]
fn forged_marks_cost_what_arrived() {
    let server = start();
    let addr = addr(&server);
    let mut conns: Vec<_> = (0..CONNECTIONS).map(|_| connect(addr)).collect();
    // Each connection served a call: its buffers and the server's state for
    // it exist before the baseline.
    for (i, c) in conns.iter_mut().enumerate() {
        null_ok(c, i as u32 + 1, NFS);
    }
    assert!(wait_until(Duration::from_secs(5), || all_threads_idle(
        &server
    )));
    let before = LIVE.load(Ordering::Relaxed);

    // A last fragment of just under the default 1 MiB + 64 KiB limit, of
    // which only `SENT` bytes ever come.
    let mut forged = 0x8010_FFFFu32.to_be_bytes().to_vec();
    forged.resize(4 + SENT, 0xA5);
    for c in &mut conns {
        c.write_all(&forged).unwrap();
    }
    // The server copies each connection's `SENT` bytes into its record: a
    // sign that it has read them all (and, before the fix, reserved the
    // claimed size for the rest).
    let grown = || LIVE.load(Ordering::Relaxed).saturating_sub(before);
    assert!(
        wait_until(Duration::from_secs(10), || grown() >= CONNECTIONS * SENT),
        "the server read the forged records: {} bytes grown",
        grown()
    );
    assert!(wait_until(Duration::from_secs(5), || all_threads_idle(
        &server
    )));
    std::thread::sleep(Duration::from_millis(100));
    // What arrived, a 64 KiB chunk to read more into, and slack; the mark
    // claims 1 MiB more per connection.
    let per_conn = grown() / CONNECTIONS;
    println!("{per_conn} bytes per connection for {SENT} received");
    assert!(
        per_conn <= SENT + 64 * 1024 + 32 * 1024,
        "{per_conn} bytes per connection for {SENT} received"
    );
    assert_eq!(server.stats().connections, CONNECTIONS as u64);
    drop(conns);
    assert!(wait_until(Duration::from_secs(5), || server
        .stats()
        .connections
        == 0));
}

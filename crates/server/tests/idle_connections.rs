//! 10,000 idle connections hold no service thread.
//!
//! The client side of the connections lives in a child process (this test binary,
//! re-run as [`hold_connections_helper`]), so each process needs only ~10,000
//! descriptors: common hard limits (20,000 here) cannot hold both ends in one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a test failure"
)]

#[path = "../../../tests/support/cannot_run.rs"]
mod cannot_run;
mod common;
use cannot_run::cannot_run;

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use nix::sys::resource::{getrlimit, setrlimit, Resource};

const CONNECTIONS: u64 = 10_000;
/// Descriptors beyond the connections: listeners, epolls, wakers, stdio, tests.
const SPARE_FDS: u64 = 200;
const HELPER_ENV: &str = "RNFS_TEST_HOLD_CONNECTIONS";

/// Raises the soft descriptor limit to the hard one; false if that is too low.
fn raise_nofile(need: u64) -> Result<(), String> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(|e| e.to_string())?;
    if hard < need {
        return Err(format!("RLIMIT_NOFILE hard limit {hard} < {need} needed"));
    }
    if soft < need {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The helper process; on drop its stdin closes, so it exits, and is reaped.
struct Helper(Child);

impl Drop for Helper {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

#[test]
fn ten_thousand_idle_connections_hold_no_thread() {
    if let Err(why) = raise_nofile(CONNECTIONS + SPARE_FDS) {
        cannot_run(&why);
        return;
    }
    let server = start();
    let addr = addr(&server);

    let mut child = Helper(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "hold_connections_helper",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(HELPER_ENV, format!("{addr} {CONNECTIONS}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let held = loop {
        let line = lines.next().expect("helper exited early").unwrap();
        // libtest prints "test NAME ... " before the helper's own output.
        if let Some((_, n)) = line.split_once("HELD ") {
            break n.trim().parse::<u64>().unwrap();
        }
        if let Some((_, why)) = line.split_once("SKIP ") {
            cannot_run(&format!("helper cannot open the connections: {why}"));
            return;
        }
    };
    assert_eq!(held, CONNECTIONS);

    assert!(
        wait_until(Duration::from_secs(15), || server.stats().connections
            == CONNECTIONS),
        "{:?}",
        server.stats()
    );
    assert!(
        wait_until(Duration::from_secs(5), || all_threads_idle(&server)),
        "idle connections hold threads: {:?}",
        server.scheduler().stats()
    );
    // A new client is served at once.
    null_ok(&mut connect(addr), 1, NFS);

    // The helper exits (its stdin closes) and every connection is torn down.
    drop(child.0.stdin.take());
    assert!(child.0.wait().unwrap().success());
    assert!(
        wait_until(Duration::from_secs(15), || server.stats().connections == 0),
        "{:?}",
        server.stats()
    );
    assert!(wait_until(Duration::from_secs(5), || all_threads_idle(
        &server
    )));
}

/// Not a test: the child process of [`ten_thousand_idle_connections_hold_no_thread`].
/// Opens the connections, reports `HELD n`, and holds them until stdin closes.
#[test]
#[ignore = "helper process, run by ten_thousand_idle_connections_hold_no_thread"]
fn hold_connections_helper() {
    let Ok(spec) = std::env::var(HELPER_ENV) else {
        return;
    };
    let (addr, count) = spec.split_once(' ').unwrap();
    let (addr, count): (std::net::SocketAddr, u64) =
        (addr.parse().unwrap(), count.parse().unwrap());
    if let Err(why) = raise_nofile(count + SPARE_FDS) {
        println!("SKIP {why}");
        return;
    }
    let conns: Vec<TcpStream> = (0..count)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    println!("HELD {}", conns.len());
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    drop(conns);
}

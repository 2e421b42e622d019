//! The `rnfs` binary: serve, answer a NULL call, stop cleanly on SIGTERM; and clear
//! errors for bad arguments.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a test failure"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rnfs_rpc::{decode_reply, encode_call, Auth, ReplyStatus};

mod common;
use common::{rnfs, TempDir};

/// Kills the child if the test fails before stopping it.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_exit(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "rnfs did not exit within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn null_call(addr: SocketAddr, prog: u32) -> ReplyStatus {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut call = Vec::new();
    encode_call(1, prog, 3, 0, &Auth::None, &[], &mut call);
    s.write_all(&call).unwrap();
    let mut mark = [0; 4];
    s.read_exact(&mut mark).unwrap();
    let mut body = vec![0; (u32::from_be_bytes(mark) & 0x7FFF_FFFF) as usize];
    s.read_exact(&mut body).unwrap();
    decode_reply(&body).unwrap().header.status
}

/// `rnfs serve ARGS... DIR` (a fresh DIR, its state inside it) with its
/// stderr read line by line into the returned channel. `--threads 2` unless
/// ARGS size the threads themselves.
fn spawn_serve(args: &[&str]) -> (TempDir, Running, mpsc::Receiver<String>) {
    let dir = TempDir::new("serve");
    let sized = args
        .iter()
        .any(|a| ["--threads", "--min-threads", "--max-threads"].contains(a));
    let mut child = Running(
        rnfs()
            .arg("serve")
            .args(["--threads", "2"].iter().filter(|_| !sized))
            .args(
                ["--log", "info"]
                    .iter()
                    .filter(|_| !args.contains(&"--log")),
            )
            .args(args)
            .arg(&dir.0)
            .arg("--state-dir")
            .arg(dir.0.join(".state"))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (dir, child, rx)
}

/// The address a server from `spawn_serve` listens on, from its startup
/// line ("... serving on 127.0.0.1:PORT (...").
fn serving_address(rx: &mpsc::Receiver<String>) -> SocketAddr {
    let mut log = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("no startup line; stderr so far: {log:#?}"));
        if let Some((_, rest)) = line.split_once("serving on ") {
            return rest.split_whitespace().next().unwrap().parse().unwrap();
        }
        log.push(line);
    }
}

#[test]
fn serve_answers_null_and_stops_on_sigterm() {
    let (_dir, mut child, rx) = spawn_serve(&["--listen", "127.0.0.1:0"]);
    let addr = serving_address(&rx);
    assert_eq!(null_call(addr, 100_003), ReplyStatus::Success);
    assert_eq!(null_call(addr, 100_005), ReplyStatus::Success);
    assert_eq!(null_call(addr, 100_227), ReplyStatus::ProgUnavail);

    kill(Pid::from_raw(child.0.id() as i32), Signal::SIGTERM).unwrap();
    let status = wait_exit(&mut child.0, Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// `--pool-mode percpu` with only `--max-threads`: the default minimum is one
/// thread per pool (it was 1, which the scheduler refused with more than one
/// CPU: "1 thread(s) cannot serve 2 pool(s)").
#[test]
fn percpu_pools_with_only_max_threads_start_and_answer() {
    let (_dir, mut child, rx) = spawn_serve(&[
        "--listen",
        "127.0.0.1:0",
        "--pool-mode",
        "percpu",
        "--max-threads",
        "8",
    ]);
    let addr = serving_address(&rx);
    assert_eq!(null_call(addr, 100_003), ReplyStatus::Success);
    kill(Pid::from_raw(child.0.id() as i32), Signal::SIGTERM).unwrap();
    let status = wait_exit(&mut child.0, Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// The log lines of `rnfs serve ARGS... DIR` until a second after it
/// started serving; the server is then stopped.
fn startup_log(args: &[&str]) -> Vec<String> {
    let (_dir, mut child, rx) = spawn_serve(args);
    let mut log = Vec::new();
    let mut until = Instant::now() + Duration::from_secs(10);
    let mut serving = false;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        let Ok(line) = rx.recv_timeout(left) else {
            break;
        };
        if !serving && line.contains("serving on ") {
            serving = true;
            until = Instant::now() + Duration::from_secs(1);
        }
        log.push(line);
    }
    assert!(serving, "no startup line: {log:#?}");
    kill(Pid::from_raw(child.0.id() as i32), Signal::SIGTERM).unwrap();
    wait_exit(&mut child.0, Duration::from_secs(10));
    log
}

#[test]
fn a_read_write_export_open_to_the_network_is_warned_about() {
    let warned = |log: &[String]| {
        log.iter()
            .any(|l| l.contains("WARN") && l.contains("is read-write for any host"))
    };
    let log = startup_log(&["--listen", "0.0.0.0:0"]);
    assert!(warned(&log), "{log:#?}");
    // Restricted, read-only, or on loopback only: no warning.
    for args in [
        &["--listen", "0.0.0.0:0", "--client", "127.0.0.0/8"][..],
        &["--listen", "0.0.0.0:0", "--read-only"],
        &["--listen", "127.0.0.1:0"],
    ] {
        let log = startup_log(args);
        assert!(!warned(&log), "{args:?}: {log:#?}");
    }
}

fn run_fail(args: &[&str]) -> (i32, String) {
    let Output { status, stderr, .. } = rnfs().args(args).output().unwrap();
    (
        status.code().unwrap(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

#[test]
fn zero_threads_is_a_usage_error() {
    let (code, err) = run_fail(&["serve", "--listen", "127.0.0.1:0", "--threads", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--threads"), "{err}");
}

#[test]
fn missing_export_dir_is_a_usage_error() {
    let (code, err) = run_fail(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "/nonexistent/rnfs-export",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/rnfs-export"), "{err}");
    // A file is not a directory either.
    let exe = env!("CARGO_BIN_EXE_rnfs");
    let (code, err) = run_fail(&["serve", "--listen", "127.0.0.1:0", exe]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a directory"), "{err}");
}

#[test]
fn a_misspelt_log_level_is_a_usage_error() {
    let (code, err) = run_fail(&["serve", "--listen", "127.0.0.1:0", "--log", "wran"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("`wran` is not a log level"), "{err}");
}

#[test]
fn a_log_directive_for_one_target_keeps_the_others_at_info() {
    // Without `info` beneath it, `rnfs_server=debug` alone silenced the
    // startup line (another target) and every error outside the server crate.
    let log = startup_log(&["--listen", "127.0.0.1:0", "--log", "rnfs_server=debug"]);
    assert!(log.iter().any(|l| l.contains("serving on ")), "{log:#?}");
}

#[test]
fn an_error_names_its_cause_once() {
    let dir = TempDir::new("cause");
    let missing = dir.0.join("missing.toml");
    let (code, err) = run_fail(&["serve", "--config", missing.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    let key_dir = dir.0.join("state");
    std::fs::create_dir(&key_dir).unwrap();
    std::fs::set_permissions(&key_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let key = key_dir.join("handle.key");
    std::fs::write(&key, [0u8; 32]).unwrap();
    // Readable by others: refused, with the remedy.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, err) = run_fail(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--state-dir",
        key_dir.to_str().unwrap(),
        dir.0.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("chmod").count(), 1, "{err}");
}

#[test]
fn a_port_mapper_port_that_cannot_be_had_says_what_to_do() {
    // As root, hold port 111 (or find it held, by rpcbind say); otherwise
    // the port is privileged.
    let root = nix::unistd::geteuid().is_root();
    let _held = root.then(|| TcpListener::bind("127.0.0.1:111"));
    let dir = TempDir::new("pmap");
    let (code, err) = run_fail(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--portmap",
        "--state-dir",
        dir.0.join(".state").to_str().unwrap(),
        dir.0.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    let hint = if root {
        "use --register instead of --portmap"
    } else {
        "--portmap needs root"
    };
    assert!(err.contains(hint), "{err}");
}

#[test]
fn bad_listen_address_is_a_usage_error() {
    let (code, err) = run_fail(&["serve", "--listen", "localhost-ish:99999"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--listen"), "{err}");
}

#[test]
fn conflicting_thread_options_are_usage_errors() {
    let (code, err) = run_fail(&["serve", "--threads", "4", "--max-threads", "8"]);
    assert_eq!(code, 2, "{err}");
    let (code, err) = run_fail(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--min-threads",
        "8",
        "--max-threads",
        "2",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--min-threads"), "{err}");
}

#[test]
fn address_in_use_fails_with_exit_status_1() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = TempDir::new("inuse");
    let state = dir.0.join(".state");
    let (code, err) = run_fail(&[
        "serve",
        "--listen",
        &addr,
        "--state-dir",
        state.to_str().unwrap(),
        dir.0.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
}

#[test]
fn help_describes_the_server_and_lists_serve() {
    let out = rnfs().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("userspace NFSv3 server"), "{help}");
    assert!(help.contains("serve"), "{help}");
    let out = rnfs().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("20490"), "{help}");
    for word in [
        "EXPORT_DIR",
        "--config",
        "--read-only",
        "--squash",
        "--portmap",
    ] {
        assert!(help.contains(word), "{word} missing from {help}");
    }
}

#[test]
fn export_dir_or_config_is_required() {
    let (code, err) = run_fail(&["serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("EXPORT_DIR") || err.contains("--config"),
        "{err}"
    );
}

#[test]
fn bad_config_file_names_the_file_and_line() {
    let dir = TempDir::new("badcfg");
    let cfg = dir.0.join("rnfs.toml");
    std::fs::write(&cfg, "[[export]]\npath = \"/tmp\"\nsquash = \"maybe\"\n").unwrap();
    let (code, err) = run_fail(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("rnfs.toml") && err.contains("line 3"), "{err}");
}

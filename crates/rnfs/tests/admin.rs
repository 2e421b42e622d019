//! `rnfs serve` run as a service: the admin socket (`rnfs stats`, `rnfs admin`),
//! bad admin requests, live export changes, graceful shutdown with a call in
//! flight, file handles across a restart, one server per admin socket.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a test failure"
)]

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rnfs_client::{ClientOptions, Credential, NfsClient, NfsError, RpcClient};
use rnfs_nfs3::{CreateHow3, FileHandle, Nfsstat3, Sattr3, StableHow};
use rnfs_server::metrics::StatsSnapshot;
use serde_json::{json, Value};

mod common;
use common::{rnfs, TempDir};

/// A running `rnfs serve`, killed on drop if the test did not stop it.
struct Serve {
    child: Child,
    addr: SocketAddr,
    socket: PathBuf,
    log: Arc<Mutex<Vec<String>>>,
}

impl Serve {
    /// Starts `rnfs serve` with `args` plus a free port and the given admin socket
    /// and state directory, and waits for its startup line.
    fn start(args: &[&str], socket: &Path, state: &Path) -> Serve {
        let mut child = rnfs()
            .arg("serve")
            .args(args)
            .args(["--listen", "127.0.0.1:0", "--log", "info"])
            .arg("--admin-socket")
            .arg(socket)
            .arg("--state-dir")
            .arg(state)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    log.lock().unwrap().push(line.clone());
                    let _ = tx.send(line);
                }
            });
        }
        let addr = loop {
            let line = rx
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no startup line; stderr: {:#?}", log.lock().unwrap()));
            if let Some((_, rest)) = line.split_once("serving on ") {
                break rest.split_whitespace().next().unwrap().parse().unwrap();
            }
        };
        // The admin socket is served right after the startup line.
        let deadline = Instant::now() + Duration::from_secs(10);
        while UnixStream::connect(socket).is_err() {
            assert!(Instant::now() < deadline, "admin socket never answered");
            std::thread::sleep(Duration::from_millis(10));
        }
        Serve {
            child,
            addr,
            socket: socket.to_owned(),
            log,
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// Sends `signal` and waits for the exit; panics after `timeout`.
    fn stop(&mut self, signal: Signal, timeout: Duration) -> (ExitStatus, Duration) {
        let start = Instant::now();
        kill(self.pid(), signal).unwrap();
        self.wait_exit(start, timeout)
    }

    /// Waits for the exit; panics `timeout` after `start`.
    fn wait_exit(&mut self, start: Instant, timeout: Duration) -> (ExitStatus, Duration) {
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, start.elapsed());
            }
            assert!(
                start.elapsed() < timeout,
                "rnfs did not exit within {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Waits (up to 10 s) until the server's log contains `text`: its stderr is
    /// read by another thread, so a line logged before a reply may arrive after.
    fn wait_for_log(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.log_text().contains(text) {
            assert!(
                Instant::now() < deadline,
                "no {text:?} in the log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// An NFS/MOUNT client that fails fast instead of retrying.
    fn client(&self) -> NfsClient {
        self.client_with_timeout(Duration::from_secs(20))
    }

    /// As [`client`](Self::client), giving up on a call after `timeout`.
    fn client_with_timeout(&self, timeout: Duration) -> NfsClient {
        let options = ClientOptions {
            timeout,
            retrans: 0,
            connect_timeout: Duration::from_secs(5),
            ..ClientOptions::default()
        };
        NfsClient::new(
            RpcClient::connect(self.addr, options).unwrap(),
            Credential::root(),
        )
    }

    /// Runs `rnfs ARGS --socket SOCKET`.
    fn cli(&self, args: &[&str]) -> Output {
        rnfs()
            .args(args)
            .arg("--socket")
            .arg(&self.socket)
            .output()
            .unwrap()
    }

    fn stats(&self) -> StatsSnapshot {
        let out = self.cli(&["stats", "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A raw admin connection: one JSON line out, one back.
struct Admin(BufReader<UnixStream>);

impl Admin {
    fn connect(path: &Path) -> Admin {
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Admin(BufReader::new(s))
    }

    fn send_line(&mut self, line: &str) -> Value {
        self.0.get_mut().write_all(line.as_bytes()).unwrap();
        self.0.get_mut().write_all(b"\n").unwrap();
        let mut reply = String::new();
        self.0.read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply:?}"))
    }

    fn ok(&mut self, request: Value) -> Value {
        let reply = self.send_line(&request.to_string());
        assert_eq!(reply["ok"], json!(true), "{request} -> {reply}");
        reply["result"].clone()
    }

    /// The error message of a refused request.
    fn refused(&mut self, line: &str) -> String {
        let reply = self.send_line(line);
        assert_eq!(reply["ok"], json!(false), "{line} -> {reply}");
        assert!(reply.get("result").is_none(), "{reply}");
        reply["error"].as_str().unwrap().to_owned()
    }
}

fn total_threads(s: &StatsSnapshot) -> u64 {
    s.sched.pools.iter().map(|p| p.threads).sum()
}

fn calls(s: &StatsSnapshot, procedure: &str) -> u64 {
    s.procedures
        .iter()
        .filter(|p| p.program == "nfs" && p.procedure == procedure)
        .map(|p| p.calls)
        .sum()
}

/// Polls `rnfs stats` until `done` holds (shrinking is asynchronous).
fn wait_for_stats(server: &Serve, what: &str, done: impl Fn(&StatsSnapshot) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = server.stats();
        if done(&s) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {s:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `rnfs serve --async` serves its export as exports(5) `async`, and says so.
#[test]
fn serve_async_exports_async() {
    let dir = TempDir::new("async");
    for (flags, sync) in [(&[][..], true), (&["--async"][..], false)] {
        let server = Serve::start(
            &[&[dir.arg()][..], flags].concat(),
            &dir.path("admin.sock"),
            &dir.path("state"),
        );
        let mut admin = Admin::connect(&server.socket);
        let rows = admin.ok(json!({"cmd": "exports"}));
        assert_eq!(rows[0]["sync"], json!(sync), "{flags:?}: {rows}");
    }
}

#[test]
fn stats_show_the_calls_made_and_parse_as_json() {
    let dir = TempDir::new("stats");
    let server = Serve::start(
        &[
            dir.arg(),
            "--backend",
            "memory",
            "--mount-path",
            "/m",
            "--threads",
            "2",
        ],
        &dir.path("admin.sock"),
        &dir.path("state"),
    );
    let nfs = server.client();
    let root = nfs.mnt(b"/m").unwrap();
    for _ in 0..5 {
        nfs.getattr(&root).unwrap();
    }
    let missing = nfs.lookup(&root, b"no-such-file").unwrap_err();
    assert!(
        matches!(missing, NfsError::Status(Nfsstat3::Noent)),
        "{missing}"
    );

    let s = server.stats();
    assert_eq!(calls(&s, "GETATTR"), 5, "{:#?}", s.procedures);
    let lookup = s
        .procedures
        .iter()
        .find(|p| p.program == "nfs" && p.procedure == "LOOKUP")
        .unwrap();
    assert_eq!(lookup.calls, 1);
    assert_eq!(lookup.errors.get("NFS3ERR_NOENT"), Some(&1), "{lookup:?}");
    assert!(s.procedures.iter().any(|p| p.procedure == "MNT"));
    assert_eq!(total_threads(&s), 2);
    assert_eq!(s.transport.connections, 1);
    assert!(s.uptime_secs > 0.0 && !s.version.is_empty());

    // The text report names the procedures with their counts and the scheduler.
    let out = server.cli(&["stats", "--clients", "--exports"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let getattr = text.lines().find(|l| l.contains("GETATTR")).unwrap();
    assert!(getattr.contains(" 5 "), "{getattr}");
    assert!(text.contains("NFS3ERR_NOENT 1"), "{text}");
    assert!(text.contains("scheduler: policy lwq"), "{text}");
    assert!(text.contains("127.0.0.1"), "client row: {text}");
    assert!(text.contains("/m"), "export row: {text}");

    // Clients with their mounts.
    let out = server.cli(&["admin", "clients"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let row = stdout(&out);
    let row = row.lines().find(|l| l.starts_with("127.0.0.1")).unwrap();
    assert!(row.ends_with("/m"), "{row}");

    // --watch prints successive reports (stdout is not a terminal here).
    let mut watch = rnfs()
        .args(["stats", "--json", "--watch", "0.2", "--socket"])
        .arg(&server.socket)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let first: StatsSnapshot = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let second: StatsSnapshot = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(second.uptime_secs > first.uptime_secs);
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn threads_set_changes_the_thread_count_seen_in_stats() {
    let dir = TempDir::new("threads");
    let server = Serve::start(
        &[
            dir.arg(),
            "--backend",
            "memory",
            "--mount-path",
            "/m",
            "--threads",
            "4",
        ],
        &dir.path("admin.sock"),
        &dir.path("state"),
    );
    // Stats count threads once they run (register), which may follow the
    // server's start by a moment on a loaded machine.
    wait_for_stats(&server, "4 threads", |s| total_threads(s) == 4);

    let out = server.cli(&["admin", "threads", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("fixed at 2"), "{}", stdout(&out));
    wait_for_stats(&server, "2 threads", |s| {
        total_threads(s) == 2 && s.sched.min_threads == 2 && s.sched.max_threads == 2
    });

    let out = server.cli(&["admin", "threads", "6"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_for_stats(&server, "6 threads", |s| total_threads(s) == 6);

    // Dynamic bounds: the count moves into them.
    let mut admin = Admin::connect(&server.socket);
    let r = admin.ok(json!({"cmd": "threads", "min": 1, "max": 3}));
    assert_eq!((r["min"].clone(), r["max"].clone()), (json!(1), json!(3)));
    wait_for_stats(&server, "at most 3 threads", |s| {
        total_threads(s) <= 3 && s.sched.min_threads == 1 && s.sched.max_threads == 3
    });
    // Only one bound: the other stays.
    let r = admin.ok(json!({"cmd": "threads", "max": 5}));
    assert_eq!((r["min"].clone(), r["max"].clone()), (json!(1), json!(5)));
    server.wait_for_log("service thread limits changed");
}

#[test]
fn bad_requests_get_clear_errors_and_change_nothing() {
    let dir = TempDir::new("bad");
    let server = Serve::start(
        &[
            dir.arg(),
            "--backend",
            "memory",
            "--mount-path",
            "/m",
            "--threads",
            "3",
        ],
        &dir.path("admin.sock"),
        &dir.path("state"),
    );
    let mut admin = Admin::connect(&server.socket);
    let exports_before = admin.ok(json!({"cmd": "exports"}));
    let before = server.stats();

    let e = admin.refused(r#"{"cmd":"frobnicate"}"#);
    assert!(e.contains("unknown command \"frobnicate\""), "{e}");
    let e = admin.refused(r#"{"cmd":"threads","set":0}"#);
    assert!(e.contains("at least 1"), "{e}");
    let e = admin.refused(r#"{"cmd":"threads","min":5,"max":2}"#);
    assert!(e.contains("min (5) is above max (2)"), "{e}");
    let e = admin.refused(r#"{"cmd":"threads","set":2,"max":4}"#);
    assert!(e.contains("not both"), "{e}");
    let e = admin.refused(r#"{"cmd":"threads","set":100000}"#);
    assert!(e.contains("cannot change the thread count"), "{e}");
    let e = admin.refused(r#"{"cmd":"threads", "set": 2"#);
    assert!(e.starts_with("malformed JSON"), "{e}");
    let e = admin.refused("not json at all");
    assert!(e.starts_with("malformed JSON"), "{e}");
    let e = admin.refused(r#"{"cmd":"export-remove","mount_path":"/nope"}"#);
    assert!(
        e.contains("no export is mounted as /nope") && e.contains("/m"),
        "{e}"
    );
    let e = admin.refused(r#"{"cmd":"export-remove","mount_path":"/m"}"#);
    assert!(e.contains("only export"), "{e}");
    let e = admin.refused(r#"{"cmd":"export-add","path":"/no/such/dir"}"#);
    assert!(e.contains("/no/such/dir"), "{e}");
    let e =
        admin.refused(r#"{"cmd":"export-add","path":"/x","backend":"memory","mount_path":"/m"}"#);
    assert!(e.contains("already mounted as /m"), "{e}");
    let e = admin.refused(r#"{"cmd":"reload"}"#);
    assert!(e.contains("without --config"), "{e}");
    let e = admin.refused(&"x".repeat(70_000));
    assert!(e.contains("longer than"), "{e}");

    // The connection is still usable, and nothing changed.
    assert_eq!(admin.ok(json!({"cmd": "exports"})), exports_before);
    let after = server.stats();
    assert_eq!(total_threads(&after), total_threads(&before));
    assert_eq!(
        (after.sched.min_threads, after.sched.max_threads),
        (before.sched.min_threads, before.sched.max_threads)
    );
    assert_eq!(after.exports.len(), before.exports.len());

    // The CLI: a refused request prints the server's message and exits 1; a bad
    // argument is a usage error (2); no server is exit status 1 with a hint.
    let out = server.cli(&["admin", "export", "remove", "/nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("rnfs admin: no export is mounted as /nope"),
        "{}",
        stderr(&out)
    );
    let out = server.cli(&["admin", "threads", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = rnfs()
        .args(["stats", "--socket"])
        .arg(dir.path("nobody.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let msg = stderr(&out);
    assert!(
        msg.starts_with("rnfs: cannot reach the server's admin socket")
            && msg.contains("nobody.sock")
            && msg.contains("(is rnfs serve running?")
            && msg.contains("give that path with --socket"),
        "{msg}"
    );
}

#[test]
fn exports_added_can_be_mounted_and_removed_ones_cannot() {
    let dir = TempDir::new("exports");
    std::fs::create_dir(dir.path("extra")).unwrap();
    let server = Serve::start(
        &[
            dir.arg(),
            "--backend",
            "memory",
            "--mount-path",
            "/m",
            "--squash",
            "none",
        ],
        &dir.path("admin.sock"),
        &dir.path("state"),
    );
    let nfs = server.client();
    let m_root = nfs.mnt(b"/m").unwrap();
    let created = nfs
        .create(&m_root, b"kept", CreateHow3::Unchecked(Sattr3::default()))
        .unwrap();
    let kept = created.handle.unwrap();

    let extra = dir.path("extra");
    let out = server.cli(&[
        "admin",
        "export",
        "add",
        extra.to_str().unwrap(),
        "--mount-path",
        "/extra",
        "--ro",
        "--async",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("added /extra (id ") && stdout(&out).contains(", ro,async, "),
        "{}",
        stdout(&out)
    );
    assert!(stderr(&out).is_empty(), "no note without --config");
    let out = server.cli(&["admin", "exports"]);
    assert!(stdout(&out).contains("/extra") && stdout(&out).contains("ro"));

    let extra_root = nfs.mnt(b"/extra").unwrap();
    nfs.getattr(&extra_root).unwrap();
    let e = nfs
        .create(&extra_root, b"f", CreateHow3::Unchecked(Sattr3::default()))
        .unwrap_err();
    assert!(matches!(e, NfsError::Status(Nfsstat3::Rofs)), "{e}");

    let out = server.cli(&["admin", "export", "remove", "/extra"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("removed /extra"));
    let e = nfs.mnt(b"/extra").unwrap_err();
    assert!(matches!(e, NfsError::Mount(_)), "{e}");
    let e = nfs.getattr(&extra_root).unwrap_err();
    assert!(matches!(e, NfsError::Status(Nfsstat3::Stale)), "{e}");
    // The other export's client carries on with its handles.
    nfs.getattr(&kept).unwrap();
    server.wait_for_log("export reloaded");
    server.wait_for_log("change=\"removed\"");
}

/// An export made read-write for everyone by `rnfs admin export add` on a
/// server reachable from other hosts is warned about, as at start.
#[test]
fn an_export_added_open_to_the_network_is_warned_about() {
    let dir = TempDir::new("open-export");
    std::fs::create_dir(dir.path("extra")).unwrap();
    let server = Serve::start(
        &[
            dir.arg(),
            "--backend",
            "memory",
            "--mount-path",
            "/m",
            "--read-only",
            "--listen",
            "0.0.0.0:0",
        ],
        &dir.path("admin.sock"),
        &dir.path("state"),
    );
    let extra = dir.path("extra");
    let out = server.cli(&[
        "admin",
        "export",
        "add",
        extra.to_str().unwrap(),
        "--mount-path",
        "/open",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    server.wait_for_log("export /open is read-write for any host");
    assert!(
        !server.log_text().contains("export /m is read-write"),
        "{}",
        server.log_text()
    );
}

#[test]
fn export_changes_say_they_are_not_saved_and_reload_rereads_the_file() {
    let dir = TempDir::new("config");
    let config = dir.path("rnfs.toml");
    let write_config = |extra: &str| {
        std::fs::write(
            &config,
            format!("[[export]]\npath = \"/a\"\nbackend = \"memory\"\naccess = \"rw\"\n{extra}"),
        )
        .unwrap();
    };
    write_config("");
    let server = Serve::start(
        &["--config", config.to_str().unwrap()],
        &dir.path("admin.sock"),
        &dir.path("state"),
    );
    let mut admin = Admin::connect(&server.socket);
    let r = admin.ok(json!({"cmd": "export-add", "path": "/b", "backend": "memory"}));
    assert_eq!(r["exports"], json!(2));
    let note = r["note"].as_str().unwrap();
    assert!(
        note.contains("not written to") && note.contains("rnfs.toml"),
        "{note}"
    );

    write_config("[[export]]\npath = \"/c\"\nbackend = \"memory\"\n");
    let out = server.cli(&["admin", "reload"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("added /c") && text.contains("removed /b"),
        "{text}"
    );
    let rows = admin.ok(json!({"cmd": "exports"}));
    let paths: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["mount_path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/a", "/c"]);

    // A broken file keeps the table, over the socket and on SIGHUP.
    std::fs::write(&config, "[[export]]\npath = ").unwrap();
    let e = admin.refused(r#"{"cmd":"reload"}"#);
    assert!(
        e.contains("keeping the old exports") && e.contains("rnfs.toml"),
        "{e}"
    );
    write_config("");
    kill(server.pid(), Signal::SIGHUP).unwrap();
    server.wait_for_log("SIGHUP: reloaded");
    server.wait_for_log("export=/c change=\"removed\"");
    assert_eq!(
        admin
            .ok(json!({"cmd": "exports"}))
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // What only a restart applies is said, not silently ignored.
    let moved = dir.path("elsewhere");
    std::fs::write(
        &config,
        format!(
            "[server]\nstate_dir = {moved:?}\n[[export]]\npath = \"/a\"\nbackend = \"memory\"\n"
        ),
    )
    .unwrap();
    let out = server.cli(&["admin", "reload"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("note: the [server] section changed"),
        "{}",
        stderr(&out)
    );
    // export add takes serve's spellings and the max age too.
    let out = server.cli(&[
        "admin",
        "export",
        "add",
        "/d",
        "--backend",
        "memory",
        "--read-only",
        "--attr-cache-max-age",
        "0",
        "--async",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = admin.ok(json!({"cmd": "exports"}));
    let row = |path: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["mount_path"] == path)
            .unwrap()
            .clone()
    };
    let d = row("/d");
    assert_eq!(
        (&d["access"], &d["attr_cache_max_age"], &d["sync"]),
        (&json!("ro"), &json!(0), &json!(false)),
        "{d}"
    );
    assert_eq!(row("/a")["sync"], json!(true), "sync is the default");
    // The table says which exports answer before committing.
    let out = server.cli(&["admin", "exports"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = |path: &str| {
        listed
            .lines()
            .find(|l| l.starts_with(path))
            .unwrap_or_else(|| panic!("{path} not in {listed}"))
            .to_owned()
    };
    assert!(line("/d ").contains(" ro,async "), "{listed}");
    assert!(!line("/a ").contains("async"), "{listed}");
}

#[test]
fn an_empty_client_list_is_refused_in_the_file_and_over_the_socket() {
    let dir = TempDir::new("noclients");
    let config = dir.path("rnfs.toml");
    let export = "[[export]]\npath = \"/a\"\nbackend = \"memory\"\n";
    std::fs::write(&config, export).unwrap();
    let server = Serve::start(
        &["--config", config.to_str().unwrap()],
        &dir.path("admin.sock"),
        &dir.path("state"),
    );
    let mut admin = Admin::connect(&server.socket);
    let nobody =
        "`clients = []` admits nobody; remove the export, or omit `clients` to admit everyone";

    // Emptying the list in the file does not open the export to everyone.
    std::fs::write(&config, format!("{export}clients = []\n")).unwrap();
    let e = admin.refused(r#"{"cmd":"reload"}"#);
    assert!(e.contains(&format!("export /a: {nobody}")), "{e}");
    let e = admin.refused(
        &json!({"cmd": "export-add", "path": "/b", "backend": "memory", "clients": []}).to_string(),
    );
    assert!(e.contains(&format!("export /b: {nobody}")), "{e}");
    let rows = admin.ok(json!({"cmd": "exports"}));
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["clients"], json!([]), "still everyone: {rows}");
    // `rnfs admin export add` without --client admits everyone.
    let out = server.cli(&["admin", "export", "add", "/c", "--backend", "memory"]);
    assert!(out.status.success(), "{}", stderr(&out));
    server.client().mnt(b"/c").unwrap();
}

#[test]
fn drain_stops_serving_and_keeps_answering_stats() {
    let dir = TempDir::new("drain");
    let mut server = Serve::start(
        &[dir.arg(), "--backend", "memory", "--mount-path", "/m"],
        &dir.path("admin.sock"),
        &dir.path("state"),
    );
    let nfs = server.client();
    let root = nfs.mnt(b"/m").unwrap();
    nfs.getattr(&root).unwrap();
    let mut idle = std::net::TcpStream::connect(server.addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();

    let out = server.cli(&["admin", "drain", "--timeout", "5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("0 remaining"), "{}", stdout(&out));
    // No new connections, and the old one is closed.
    assert!(std::net::TcpStream::connect(server.addr).is_err());
    let mut byte = [0u8; 1];
    assert_eq!(std::io::Read::read(&mut idle, &mut byte).unwrap_or(0), 0);
    // The last figures stay available; a second drain has nothing to do.
    assert_eq!(calls(&server.stats(), "GETATTR"), 1);
    let out = server.cli(&["admin", "drain"]);
    assert!(stdout(&out).contains("already drained"), "{}", stdout(&out));
    let out = server.cli(&["admin", "threads", "3"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("drained"), "{}", stderr(&out));
    // Nor do the exports change any more.
    let more = dir.path("more");
    std::fs::create_dir(&more).unwrap();
    let out = server.cli(&["admin", "export", "add", more.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("drained"), "{}", stderr(&out));

    let (status, _) = server.stop(Signal::SIGTERM, Duration::from_secs(15));
    assert!(status.success(), "{status:?}");
}

/// A 1 MiB block whose bytes depend on its index.
fn block(i: u64) -> Vec<u8> {
    (0..1u64 << 20)
        .map(|j| (j.wrapping_mul(31) ^ i.wrapping_mul(131)) as u8)
        .collect()
}

#[test]
fn sigterm_lets_calls_in_flight_finish_then_exits_zero() {
    const BLOCKS: u64 = 64;
    const SHUTDOWN_TIMEOUT: u64 = 10;
    let dir = TempDir::new("sigterm");
    let export = dir.path("export");
    std::fs::create_dir(&export).unwrap();
    let mut server = Serve::start(
        &[
            export.to_str().unwrap(),
            "--mount-path",
            "/e",
            "--squash",
            "none",
            "--threads",
            "4",
            "--shutdown-timeout",
            &SHUTDOWN_TIMEOUT.to_string(),
        ],
        &dir.path("admin.sock"),
        &dir.path("state"),
    );
    // Writes the server had not read at SIGTERM are never answered: give up
    // on them after a few seconds.
    let nfs = server.client_with_timeout(Duration::from_secs(3));
    let root = nfs.mnt(b"/e").unwrap();
    let fh = nfs
        .create(&root, b"data", CreateHow3::Unchecked(Sattr3::default()))
        .unwrap()
        .handle
        .unwrap();
    let blocks: Vec<Vec<u8>> = (0..BLOCKS).map(block).collect();
    let mut pending: Vec<_> = blocks
        .iter()
        .enumerate()
        .map(|(i, data)| {
            nfs.start_write(&fh, (i as u64) << 20, data, StableHow::FileSync)
                .unwrap()
        })
        .collect();
    // Once the first reply is in, the rest are queued or being written (each
    // FILE_SYNC write takes a while: an fsync).
    let rest = pending.split_off(1);
    pending.pop().unwrap().wait().unwrap();
    let signalled = Instant::now();
    kill(server.pid(), Signal::SIGTERM).unwrap();
    let (status, took) = server.wait_exit(signalled, Duration::from_secs(SHUTDOWN_TIMEOUT + 5));
    let mut answered = vec![0u64];
    for (i, p) in rest.into_iter().enumerate() {
        match p.wait() {
            Ok(w) => {
                assert_eq!(w.count, 1 << 20);
                answered.push(i as u64 + 1);
            }
            // Calls never read before the connection closed fail at the transport.
            Err(e) => assert!(matches!(e, NfsError::Client(_)), "block {}: {e}", i + 1),
        }
    }
    assert!(status.success(), "{status:?}\n{}", server.log_text());
    assert!(took < Duration::from_secs(SHUTDOWN_TIMEOUT), "{took:?}");
    assert!(
        answered.len() >= 2,
        "a call in flight at SIGTERM was answered: {answered:?}\n{}",
        server.log_text()
    );
    // A write is in the file exactly when it was acknowledged: no call was cut
    // off after doing its work but before its reply went out.
    let on_disk = std::fs::read(export.join("data")).unwrap();
    for (i, data) in blocks.iter().enumerate() {
        let at = i << 20;
        let written = on_disk.get(at..at + (1 << 20)) == Some(&data[..]);
        let acknowledged = answered.contains(&(i as u64));
        assert_eq!(
            written, acknowledged,
            "block {i}: in the file {written}, acknowledged {acknowledged}"
        );
    }
    let log = server.log_text();
    assert!(log.contains("SIGTERM: shutting down"), "{log}");
    assert!(log.contains("file system(s) flushed"), "{log}");
    assert!(
        !dir.path("admin.sock").exists(),
        "admin socket removed at exit"
    );
}

#[test]
fn file_handles_survive_a_restart_with_the_same_state_dir() {
    let dir = TempDir::new("restart");
    let export = dir.path("export");
    std::fs::create_dir(&export).unwrap();
    std::fs::write(export.join("file"), b"hello").unwrap();
    let args = [export.to_str().unwrap(), "--mount-path", "/e"];
    let mut first = Serve::start(&args, &dir.path("admin.sock"), &dir.path("state"));
    let (fh, attr): (FileHandle, _) = {
        let nfs = first.client();
        let root = nfs.mnt(b"/e").unwrap();
        let (fh, attr) = nfs.lookup(&root, b"file").unwrap();
        (fh, attr.unwrap())
    };
    let (status, _) = first.stop(Signal::SIGTERM, Duration::from_secs(15));
    assert!(status.success());

    let second = Serve::start(&args, &dir.path("admin.sock"), &dir.path("state"));
    let nfs = second.client();
    let again = nfs.getattr(&fh).unwrap();
    assert_eq!((again.fileid, again.size), (attr.fileid, 5));
}

#[test]
fn a_second_server_on_the_same_admin_socket_refuses_to_start() {
    let dir = TempDir::new("twice");
    let socket = dir.path("run/admin.sock");
    let first = Serve::start(
        &[dir.arg(), "--backend", "memory", "--mount-path", "/m"],
        &socket,
        &dir.path("state"),
    );
    let out = rnfs()
        .args([
            "serve",
            dir.arg(),
            "--backend",
            "memory",
            "--mount-path",
            "/m",
        ])
        .args(["--listen", "127.0.0.1:0", "--admin-socket"])
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.path("state2"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let msg = stderr(&out);
    assert!(
        msg.contains(&format!(
            "another rnfs serve is running ({})",
            socket.display()
        )),
        "{msg}"
    );
    // The first server's socket is untouched and still answers.
    let mut admin = Admin::connect(&first.socket);
    admin.ok(json!({"cmd": "stats"}));
    // Without an admin socket, a second server runs (on its own port).
    let mut third = rnfs()
        .args([
            "serve",
            dir.arg(),
            "--backend",
            "memory",
            "--mount-path",
            "/m",
        ])
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-socket",
            "none",
            "--state-dir",
        ])
        .arg(dir.path("state3"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(third.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("serving on"), "{line}");
    let _ = third.kill();
    let _ = third.wait();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

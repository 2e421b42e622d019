//! The client commands as processes against `rnfs serve` on a temporary
//! directory: output, files on disk, exit codes and messages.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, UNIX_EPOCH};

#[path = "../../../tests/support/cannot_run.rs"]
mod cannot_run;
mod common;
use cannot_run::cannot_run;
use common::{rnfs, TempDir};

/// `rnfs serve` on a temporary export; killed on drop.
struct Server {
    child: Child,
    export: TempDir,
    _state: TempDir,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(tag: &str) -> Server {
        Self::start_in(tag, rnfs())
    }

    /// A server that cannot write files past `blocks` 512-byte blocks
    /// (RLIMIT_FSIZE; its SIGXFSZ ignored, so a WRITE past it fails EFBIG).
    fn start_limited(tag: &str, blocks: u32) -> Server {
        let mut sh = std::process::Command::new("sh");
        sh.env_remove("RUST_LOG").env("TZ", "UTC").args([
            "-c",
            &format!("trap '' XFSZ; ulimit -f {blocks} && exec \"$0\" \"$@\""),
            env!("CARGO_BIN_EXE_rnfs"),
        ]);
        Self::start_in(tag, sh)
    }

    /// `rnfs serve` run as `cmd` (the binary, or a shell that execs it).
    fn start_in(tag: &str, cmd: std::process::Command) -> Server {
        let export = TempDir::new(tag);
        let args = vec!["--squash".into(), "none".into(), export.0.clone().into()];
        Self::spawn(cmd, export, tag, args)
    }

    /// `rnfs serve` with the exports `config` (TOML) gives, given a fresh
    /// directory (the server's `export`) to put them in.
    fn start_config(tag: &str, config: impl FnOnce(&Path) -> String) -> Server {
        let export = TempDir::new(tag);
        let file = export.path("rnfs.toml");
        fs::write(&file, config(&export.0)).unwrap();
        Self::spawn(rnfs(), export, tag, vec!["--config".into(), file.into()])
    }

    /// `cmd serve` with the common options and then `args`.
    fn spawn(
        mut cmd: std::process::Command,
        export: TempDir,
        tag: &str,
        args: Vec<std::ffi::OsString>,
    ) -> Server {
        let state = TempDir::new(&format!("{tag}-state"));
        let mut child = cmd
            .args(["serve", "--listen", "127.0.0.1:0", "--threads", "4"])
            .args(["--log", "info"])
            .args(args)
            .arg("--state-dir")
            .arg(&state.0)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let port = loop {
            let line = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("no startup line from rnfs serve");
            if let Some((_, rest)) = line.split_once("serving on ") {
                let addr: std::net::SocketAddr =
                    rest.split_whitespace().next().unwrap().parse().unwrap();
                break addr.port();
            }
        };
        Server {
            child,
            export,
            _state: state,
            port,
        }
    }

    /// The URL of `rel` (relative to the export; "" for the root).
    fn url(&self, rel: &str) -> String {
        let root = format!("nfs://127.0.0.1:{}{}", self.port, self.export.0.display());
        if rel.is_empty() {
            root
        } else {
            format!("{root}/{rel}")
        }
    }

    /// The URL of `rel` through a second session of the same server (the
    /// URL names the MOUNT port, so the client does not share the first
    /// URL's session).
    fn url2(&self, rel: &str) -> String {
        format!("{}?mountport={}", self.url(rel), self.port)
    }

    /// The host path of `rel`.
    fn path(&self, rel: &str) -> PathBuf {
        self.export.0.join(rel)
    }
}

struct Run {
    code: i32,
    out: String,
    err: String,
}

fn run(args: &[&str]) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = rnfs().args(args).output().unwrap();
    Run {
        code: status.code().unwrap(),
        out: String::from_utf8_lossy(&stdout).into_owned(),
        err: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// Runs and asserts success.
fn ok(args: &[&str]) -> String {
    let r = run(args);
    assert_eq!(r.code, 0, "rnfs {args:?}: stderr: {}", r.err);
    r.out
}

/// Deterministic pseudo-random bytes (xorshift).
fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn write(path: &Path, bytes: &[u8], mode: u32) {
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn set_mtime(path: &Path, secs: u64) {
    let t = UNIX_EPOCH + Duration::from_secs(secs);
    let f = fs::File::options().write(true).open(path).unwrap();
    f.set_times(fs::FileTimes::new().set_modified(t).set_accessed(t))
        .unwrap();
}

/// Asserts two trees hold the same names, file bytes and link targets.
fn assert_same_tree(a: &Path, b: &Path) {
    let mut names_a: Vec<_> = fs::read_dir(a)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let mut names_b: Vec<_> = fs::read_dir(b)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names_a.sort();
    names_b.sort();
    assert_eq!(names_a, names_b, "{} vs {}", a.display(), b.display());
    for name in names_a {
        let (pa, pb) = (a.join(&name), b.join(&name));
        let (ma, mb) = (
            fs::symlink_metadata(&pa).unwrap(),
            fs::symlink_metadata(&pb).unwrap(),
        );
        assert_eq!(ma.file_type(), mb.file_type(), "{}", pb.display());
        if ma.is_dir() {
            assert_same_tree(&pa, &pb);
        } else if ma.file_type().is_symlink() {
            assert_eq!(fs::read_link(&pa).unwrap(), fs::read_link(&pb).unwrap());
        } else {
            assert!(
                fs::read(&pa).unwrap() == fs::read(&pb).unwrap(),
                "{}",
                pb.display()
            );
        }
    }
}

#[test]
fn ls_lists_like_gnu_ls() {
    let s = Server::start("ls");
    write(&s.path("a.txt"), b"hello", 0o644);
    write(&s.path(".hidden"), b"", 0o600);
    write(&s.path("big"), &[7; 1536], 0o640);
    fs::create_dir(s.path("sub")).unwrap();
    write(&s.path("sub/inner"), b"x", 0o644);
    std::os::unix::fs::symlink("a.txt", s.path("link")).unwrap();
    // 2001-02-03 04:05:06 UTC: older than six months, shown with its year.
    set_mtime(&s.path("a.txt"), 981_173_106);

    let root = s.url("");
    assert_eq!(ok(&["ls", &root]), "a.txt\nbig\nlink\nsub\n");
    assert_eq!(
        ok(&["ls", "-1", "-A", &root]),
        ".hidden\na.txt\nbig\nlink\nsub\n"
    );
    let all = ok(&["ls", "-a", &root]);
    assert!(all.starts_with(".\n..\n.hidden\n"), "{all}");

    let long = ok(&["ls", "-l", &root]);
    let lines: Vec<&str> = long.lines().collect();
    assert!(lines[0].starts_with("total "), "{long}");
    assert_eq!(lines.len(), 5, "{long}");
    let a = lines[1];
    assert!(a.starts_with("-rw-r--r-- 1 "), "{a}");
    assert!(a.ends_with(" 5 Feb  3  2001 a.txt"), "{a}");
    assert!(
        lines[2].starts_with("-rw-r----- 1 ") && lines[2].contains(" 1536 "),
        "{}",
        lines[2]
    );
    let link = lines[3];
    assert!(
        link.starts_with("lrwxrwxrwx ") && link.ends_with(" link -> a.txt"),
        "{link}"
    );
    // A recent time is shown with hours and minutes: "Mon DD HH:MM name".
    let sub = lines[4];
    assert!(sub.starts_with("drwx"), "{sub}");
    let time = &sub[sub.len() - "Jan 01 12:34 sub".len()..sub.len() - " sub".len()];
    assert_eq!(time.as_bytes()[9], b':', "{sub}");
    // Columns line up: every name starts at the same place for same-width times.
    assert_eq!(a.len() - "a.txt".len(), lines[2].len() - "big".len());

    let human = ok(&["ls", "-lh", &s.url("big")]);
    assert!(human.contains(" 1.5K "), "{human}");
    assert!(human.trim_end().ends_with(&s.url("big")), "{human}");

    let dir = ok(&["ls", "-ld", &s.url("sub")]);
    assert!(
        dir.starts_with('d') && dir.trim_end().ends_with(&s.url("sub")),
        "{dir}"
    );

    let rec = ok(&["ls", "-R", &root]);
    assert_eq!(
        rec,
        format!("{root}:\na.txt\nbig\nlink\nsub\n\n{root}/sub:\ninner\n")
    );

    // Files first, then each directory under a header.
    let mixed = ok(&["ls", &s.url("a.txt"), &s.url("sub")]);
    assert_eq!(
        mixed,
        format!("{}\n\n{}:\ninner\n", s.url("a.txt"), s.url("sub"))
    );
}

#[test]
fn ls_exit_codes_follow_gnu_ls() {
    let s = Server::start("lserr");
    write(&s.path("f"), b"1", 0o644);
    let missing = s.url("nope");
    let r = run(&["ls", &missing, &s.url("f")]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert_eq!(
        r.err,
        format!("rnfs ls: cannot access '{missing}': No such file or directory\n")
    );
    assert_eq!(r.out, format!("{}\n", s.url("f")));

    // A path through a regular file.
    let r = run(&["ls", &s.url("f/x")]);
    assert_eq!(r.code, 2);
    assert!(r.err.ends_with("Not a directory\n"), "{}", r.err);

    // Nothing listens on port 1.
    let r = run(&["ls", "--timeout", "5", "nfs://127.0.0.1:1/x"]);
    assert_eq!(r.code, 2);
    assert!(
        r.err
            .starts_with("rnfs ls: cannot access 'nfs://127.0.0.1:1/x': Connection refused"),
        "{}",
        r.err
    );
}

#[test]
fn bad_arguments_are_usage_errors() {
    for args in [
        &["ls", "http://h/x"][..],
        &["ls", "nfs://h:0/x"],
        &["ls", "nfs:///x"],
        &["cat", "nfs://h/x?version=4"],
        &["ls"],
        &["cp", "ftp://h/x", "/tmp"],
        &["mkdir", "-m", "u+x", "nfs://h/e/d"],
        &["ls", "--nconnect", "0", "nfs://h/e"],
    ] {
        let r = run(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.err);
        assert!(r.err.starts_with("error: "), "{args:?}: {}", r.err);
    }
    let r = run(&["ls", "http://h/x"]);
    assert!(r.err.contains("not an nfs:// URL"), "{}", r.err);
    let r = run(&["cp", "nfs://h/e/a"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.err,
        "rnfs cp: missing destination file operand after 'nfs://h/e/a'\n"
    );
    let help = ok(&["cp", "--help"]);
    assert!(
        help.contains("Examples:") && help.contains("--jobs"),
        "{help}"
    );
    let help = ok(&["ls", "--help"]);
    assert!(help.contains("-h, --human-readable"), "{help}");
}

#[test]
fn stat_prints_gnu_stat_format() {
    let s = Server::start("stat");
    write(&s.path("f"), b"hello", 0o640);
    std::os::unix::fs::symlink("f", s.path("l")).unwrap();
    let url = s.url("f");
    let out = ok(&["stat", &url]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("  File: {url}"));
    assert!(
        lines[1].starts_with("  Size: 5         \tBlocks: "),
        "{out}"
    );
    assert!(lines[1].ends_with(" regular file"), "{out}");
    let ino = fs::metadata(s.path("f")).unwrap().ino();
    assert!(
        lines[2].contains(&format!("\tInode: {ino:<11} Links: 1")),
        "{out}"
    );
    assert!(
        lines[3].starts_with("Access: (0640/-rw-r-----)  Uid: ("),
        "{out}"
    );
    assert!(
        lines[4].starts_with("Access: 20") && lines[4].ends_with(" +0000"),
        "{out}"
    );
    assert!(lines[5].starts_with("Modify: ") && lines[6].starts_with("Change: "));

    let out = ok(&["stat", &s.url("l")]);
    assert!(
        out.starts_with(&format!("  File: {} -> f\n", s.url("l"))),
        "{out}"
    );
    assert!(out.contains("symbolic link"), "{out}");
    let out = ok(&["stat", "-L", &s.url("l")]);
    assert!(out.contains("regular file"), "{out}");

    let r = run(&["stat", &s.url("nope")]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.err,
        format!(
            "rnfs stat: cannot stat '{}': No such file or directory\n",
            s.url("nope")
        )
    );
}

#[test]
fn cat_streams_files_in_order() {
    let s = Server::start("cat");
    write(&s.path("a"), b"first\n", 0o644);
    let big = data(3 << 20, 7);
    write(&s.path("b"), &big, 0o644);
    let out = rnfs()
        .args(["cat", &s.url("a"), &s.url("b")])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(&out.stdout[..6], b"first\n");
    assert!(out.stdout[6..] == big[..], "cat of a 3 MiB file differs");

    fs::create_dir(s.path("d")).unwrap();
    let r = run(&["cat", &s.url("d"), &s.url("nope"), &s.url("a")]);
    assert_eq!(r.code, 1);
    assert_eq!(r.out, "first\n");
    assert_eq!(
        r.err,
        format!(
            "rnfs cat: {}: Is a directory\nrnfs cat: {}: No such file or directory\n",
            s.url("d"),
            s.url("nope")
        )
    );
}

#[test]
fn cp_round_trips_a_large_file() {
    let s = Server::start("cpbig");
    let local = TempDir::new("cpbig-local");
    let bytes = data((12 << 20) + 12_345, 42);
    let src = local.0.join("src.bin");
    write(&src, &bytes, 0o640);
    set_mtime(&src, 1_000_000_000);

    // local -> NFS, into a directory.
    ok(&["cp", src.to_str().unwrap(), &s.url("")]);
    let on_server = fs::read(s.path("src.bin")).unwrap();
    assert_eq!(on_server.len(), bytes.len());
    assert!(on_server == bytes, "uploaded bytes differ");
    // Without -p: the mode less the umask, a new mtime.
    let meta = fs::metadata(s.path("src.bin")).unwrap();
    assert_ne!(meta.mtime(), 1_000_000_000);

    // NFS -> local under a new name, NFS -> NFS, and back.
    let back = local.0.join("back.bin");
    ok(&["cp", &s.url("src.bin"), back.to_str().unwrap()]);
    assert!(fs::read(&back).unwrap() == bytes, "downloaded bytes differ");
    ok(&["cp", &s.url("src.bin"), &s.url("copy.bin")]);
    assert!(
        fs::read(s.path("copy.bin")).unwrap() == bytes,
        "server copy differs"
    );

    // Overwriting a longer file truncates it.
    write(&s.path("short"), &data(20 << 20, 3), 0o644);
    ok(&["cp", src.to_str().unwrap(), &s.url("short")]);
    assert!(fs::read(s.path("short")).unwrap() == bytes);

    // -p keeps mode and times, both directions.
    ok(&["cp", "-p", src.to_str().unwrap(), &s.url("kept.bin")]);
    let meta = fs::metadata(s.path("kept.bin")).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o640);
    assert_eq!(meta.mtime(), 1_000_000_000);
    let kept = local.0.join("kept.bin");
    ok(&["cp", "-p", &s.url("kept.bin"), kept.to_str().unwrap()]);
    let meta = fs::metadata(&kept).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o640);
    assert_eq!(meta.mtime(), 1_000_000_000);
    assert!(fs::read(&kept).unwrap() == bytes);

    // Forced progress on a non-terminal: plain lines on stderr.
    let r = run(&["cp", "--progress", src.to_str().unwrap(), &s.url("p.bin")]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.err.contains("1/1 files"), "{}", r.err);
}

#[test]
fn cp_copies_trees_in_parallel() {
    let s = Server::start("cptree");
    let local = TempDir::new("cptree-local");
    let tree = local.0.join("tree");
    for d in ["a/b/c", "a/e", "empty"] {
        fs::create_dir_all(tree.join(d)).unwrap();
    }
    for i in 0..24 {
        let dir = ["a", "a/b", "a/b/c", "a/e"][i % 4];
        write(
            &tree.join(dir).join(format!("f{i}")),
            &data(i * 50_000, i as u64),
            0o644,
        );
    }
    std::os::unix::fs::symlink("../f0", tree.join("a/b/rel")).unwrap();
    fs::set_permissions(tree.join("a/e"), fs::Permissions::from_mode(0o750)).unwrap();

    // Without -r a directory is skipped.
    let r = run(&["cp", tree.to_str().unwrap(), &s.url("")]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.err,
        format!(
            "rnfs cp: -r not specified; omitting directory '{}'\n",
            tree.display()
        )
    );

    // DEST does not exist: the tree is copied as DEST.
    ok(&["cp", "-r", "-j", "8", tree.to_str().unwrap(), &s.url("up")]);
    assert_same_tree(&tree, &s.path("up"));
    let mode = fs::metadata(s.path("up/a/e")).unwrap().mode() & 0o7777;
    assert_eq!(mode & 0o700, 0o700);
    assert_eq!(mode & 0o007, 0, "mode {mode:o}");

    // DEST is a directory: the tree goes into it.
    let down = local.0.join("down");
    fs::create_dir(&down).unwrap();
    ok(&["cp", "-r", &s.url("up"), down.to_str().unwrap()]);
    assert_same_tree(&tree, &down.join("up"));

    // NFS to NFS, then into itself.
    ok(&["cp", "-R", &s.url("up"), &s.url("up2")]);
    assert_same_tree(&tree, &s.path("up2"));
    let r = run(&["cp", "-r", &s.url("up"), &s.url("up/a")]);
    assert_eq!(r.code, 1);
    assert!(r.err.contains("into itself"), "{}", r.err);

    // Several sources need a directory.
    let r = run(&[
        "cp",
        &s.url("up/a/f0"),
        &s.url("up/a/f4"),
        &s.url("up/a/f0"),
    ]);
    assert_eq!(r.code, 1);
    assert!(r.err.ends_with("is not a directory\n"), "{}", r.err);
    let r = run(&["cp", &s.url("up/a/f0"), &s.url("up/a/f0")]);
    assert_eq!(r.code, 1);
    assert!(r.err.ends_with("are the same file\n"), "{}", r.err);
    let r = run(&["cp", &s.url("missing"), down.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.err,
        format!(
            "rnfs cp: cannot stat '{}': No such file or directory\n",
            s.url("missing")
        )
    );
}

#[test]
fn mv_renames_or_copies_then_removes() {
    let s = Server::start("mv");
    let local = TempDir::new("mv-local");
    write(&s.path("a"), b"aaa", 0o644);
    fs::create_dir(s.path("dir")).unwrap();

    // Within the export: RENAME, into a directory.
    let ino = fs::metadata(s.path("a")).unwrap().ino();
    ok(&["mv", &s.url("a"), &s.url("dir")]);
    assert!(!s.path("a").exists());
    assert_eq!(fs::metadata(s.path("dir/a")).unwrap().ino(), ino);
    ok(&["mv", &s.url("dir"), &s.url("renamed")]);
    assert!(s.path("renamed/a").exists());

    // NFS -> local: copied, then removed from the server.
    let dst = local.0.join("got");
    ok(&["mv", &s.url("renamed"), dst.to_str().unwrap()]);
    assert_eq!(fs::read(dst.join("a")).unwrap(), b"aaa");
    assert!(!s.path("renamed").exists());

    // local -> NFS.
    ok(&["mv", dst.to_str().unwrap(), &s.url("back")]);
    assert_eq!(fs::read(s.path("back/a")).unwrap(), b"aaa");
    assert!(!dst.exists());

    let r = run(&["mv", &s.url("nope"), &s.url("x")]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.err,
        format!(
            "rnfs mv: cannot stat '{}': No such file or directory\n",
            s.url("nope")
        )
    );
}

/// Runs `rnfs CMD a b` where `a` and `b` are one file: as GNU cp and mv,
/// refused, exit 1, the file untouched.
fn assert_same_file_refused(cmd: &str, a: &str, b: &str, file: &Path, bytes: &[u8]) {
    let r = run(&[cmd, a, b]);
    assert_eq!(
        (r.code, r.err.as_str()),
        (
            1,
            format!("rnfs {cmd}: '{a}' and '{b}' are the same file\n").as_str()
        ),
        "rnfs {cmd} {a} {b}"
    );
    assert_eq!(fs::read(file).unwrap(), bytes, "rnfs {cmd} {a} {b}");
}

#[test]
fn cp_and_mv_refuse_one_file_under_two_names() {
    let s = Server::start("same");
    let bytes = data(100_000, 7);
    write(&s.path("f"), &bytes, 0o644);
    let local = s.path("f");
    let local = local.to_str().unwrap();
    for cmd in ["mv", "cp"] {
        // Two sessions of one server.
        assert_same_file_refused(cmd, &s.url("f"), &s.url2("f"), &s.path("f"), &bytes);
        assert_same_file_refused(cmd, &s.url2("f"), &s.url("f"), &s.path("f"), &bytes);
        // The local path the server exports, and its URL.
        assert_same_file_refused(cmd, local, &s.url("f"), &s.path("f"), &bytes);
        assert_same_file_refused(cmd, &s.url("f"), local, &s.path("f"), &bytes);
    }
    // Other files across sessions are still copied and moved.
    ok(&["cp", &s.url("f"), &s.url2("g")]);
    assert_eq!(fs::read(s.path("g")).unwrap(), bytes);
    ok(&["mv", &s.url("g"), &s.url2("h")]);
    assert_eq!(fs::read(s.path("h")).unwrap(), bytes);
    assert!(!s.path("g").exists());
    ok(&["mv", &s.url("h"), &s.url2("f")]);
    assert_eq!(fs::read(s.path("f")).unwrap(), bytes);
    assert!(!s.path("h").exists());
}

#[test]
fn mv_replaces_a_destination_only_with_a_whole_copy() {
    // The server cannot write past 1 KiB: the copy of a larger file fails.
    let s = Server::start_limited("mvkeep", 2);
    let local = TempDir::new("mvkeep-local");
    let bytes = data(100_000, 5);
    write(&local.path("f"), &bytes, 0o644);
    write(&s.path("f"), b"the old destination", 0o644);
    let src = local.path("f");
    let r = run(&["mv", src.to_str().unwrap(), &s.url("f")]);
    assert_eq!(r.code, 1, "stderr: {}", r.err);
    assert_eq!(fs::read(&src).unwrap(), bytes);
    assert_eq!(fs::read(s.path("f")).unwrap(), b"the old destination");
    let names: Vec<_> = fs::read_dir(&s.export.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["f"], "a partial copy was left");

    // A copy that fits replaces it.
    write(&src, b"new", 0o600);
    ok(&["mv", src.to_str().unwrap(), &s.url("f")]);
    assert_eq!(fs::read(s.path("f")).unwrap(), b"new");
    assert_eq!(fs::metadata(s.path("f")).unwrap().mode() & 0o777, 0o600);
    assert!(!src.exists());
}

#[test]
fn mkdir_and_rm_behave_like_coreutils() {
    let s = Server::start("mkrm");
    ok(&["mkdir", "-p", &s.url("a/b/c")]);
    assert!(s.path("a/b/c").is_dir());
    ok(&["mkdir", "-p", &s.url("a/b")]);
    ok(&["mkdir", "-m", "700", &s.url("private")]);
    assert_eq!(
        fs::metadata(s.path("private")).unwrap().mode() & 0o7777,
        0o700
    );

    let r = run(&["mkdir", &s.url("a")]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.err,
        format!(
            "rnfs mkdir: cannot create directory '{}': File exists\n",
            s.url("a")
        )
    );
    let r = run(&["mkdir", &s.url("x/y")]);
    assert_eq!(r.code, 1);
    assert!(r.err.ends_with("No such file or directory\n"), "{}", r.err);

    write(&s.path("a/b/c/f"), b"1", 0o644);
    write(&s.path("a/top"), b"2", 0o644);
    let r = run(&["rm", &s.url("a")]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.err,
        format!("rnfs rm: cannot remove '{}': Is a directory\n", s.url("a"))
    );
    ok(&["rm", &s.url("a/top")]);
    assert!(!s.path("a/top").exists());
    let r = run(&["rm", "-d", &s.url("a")]);
    assert_eq!(r.code, 1);
    assert!(r.err.ends_with("Directory not empty\n"), "{}", r.err);
    ok(&["rm", "-d", &s.url("private")]);
    assert!(!s.path("private").exists());
    // `dir/.` is refused, as by GNU rm: the URL's normal form is `dir`.
    for dot in ["a/.", "a/./"] {
        let r = run(&["rm", "-rf", &s.url(dot)]);
        assert_eq!(
            (r.code, r.err),
            (
                1,
                format!(
                    "rnfs rm: refusing to remove '.' or '..' directory: skipping '{}'\n",
                    s.url(dot)
                )
            )
        );
        assert!(s.path("a/b/c/f").exists());
    }
    ok(&["rm", "-r", &s.url("a")]);
    assert!(!s.path("a").exists());

    let r = run(&["rm", &s.url("gone")]);
    assert_eq!(r.code, 1);
    assert!(r.err.ends_with("No such file or directory\n"), "{}", r.err);
    let r = run(&["rm", "-f", &s.url("gone")]);
    assert_eq!((r.code, r.err.as_str()), (0, ""));
    let r = run(&["rm", "-r", &s.url("")]);
    assert_eq!(r.code, 1);
    assert!(s.export.0.is_dir());
}

#[test]
fn rm_rf_takes_what_vanishes_meanwhile_as_removed() {
    let s = Server::start("rmrace");
    // Several rounds: each races `rnfs rm -rf` against a local removal of
    // the files of the same tree, so rm finds names listed but gone.
    for round in 0..3 {
        let top = format!("t{round}");
        for d in 0..8 {
            fs::create_dir_all(s.path(&format!("{top}/d{d}/sub"))).unwrap();
            for f in 0..60 {
                fs::write(s.path(&format!("{top}/d{d}/f{f}")), b"x").unwrap();
                fs::write(s.path(&format!("{top}/d{d}/sub/f{f}")), b"x").unwrap();
            }
        }
        let child = rnfs()
            .args(["rm", "-rf", &s.url(&top)])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Once rm is removing (it lists a directory whole, then removes
        // each name), the names it has listed go from under it.
        let count = |rel: String| fs::read_dir(s.path(&rel)).map_or(0, Iterator::count);
        let started = || {
            (0..8)
                .any(|d| count(format!("{top}/d{d}")) < 61 || count(format!("{top}/d{d}/sub")) < 60)
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !started() {
            assert!(std::time::Instant::now() < deadline, "rm did not start");
            std::thread::sleep(Duration::from_millis(1));
        }
        for d in 0..8 {
            for f in 0..60 {
                let _ = fs::remove_file(s.path(&format!("{top}/d{d}/sub/f{f}")));
                let _ = fs::remove_file(s.path(&format!("{top}/d{d}/f{f}")));
            }
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            (out.status.code(), err.as_ref()),
            (Some(0), ""),
            "round {round}"
        );
        assert!(!s.path(&top).exists(), "round {round}");
    }
}

#[test]
fn df_prints_gnu_df_columns() {
    let s = Server::start("df");
    let root = s.url("");
    let out = ok(&["df", &root]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with("Filesystem") && lines[0].ends_with("Use% Mounted on"),
        "{out}"
    );
    assert!(
        lines[0].contains("1K-blocks") && lines[0].contains("Available"),
        "{out}"
    );
    let fields: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(fields[0], format!("127.0.0.1:{}", s.export.0.display()));
    assert_eq!(fields[5], root);
    let (size, used, avail): (u64, u64, u64) = (
        fields[1].parse().unwrap(),
        fields[2].parse().unwrap(),
        fields[3].parse().unwrap(),
    );
    assert!(size > 0 && used <= size && avail <= size, "{out}");
    assert!(fields[4].ends_with('%'), "{out}");

    let out = ok(&["df", "-h", &root]);
    assert!(
        out.starts_with("Filesystem") && out.contains("  Size  Used Avail Use% Mounted on\n"),
        "{out}"
    );
    let out = ok(&["df", "-i", &root]);
    assert!(out.contains("Inodes") && out.contains("IUse%"), "{out}");

    let r = run(&["df", &s.url("nope")]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.err,
        format!("rnfs df: {}: No such file or directory\n", s.url("nope"))
    );
}

#[test]
fn uid_and_gid_choose_the_identity() {
    let s = Server::start("ids");
    let me = fs::metadata("/proc/self").unwrap().uid();
    let ids = ["--uid", "4242", "--gid", "4343"];
    if me == 0 {
        // The server runs as root and acts as the caller: uid 4242 may not
        // write to root's 0755 export, and owns what it makes in a 1777 one.
        let r = run(&[&["mkdir"][..], &ids, &[&s.url("denied")]].concat());
        assert_eq!(r.code, 1);
        assert!(r.err.ends_with("': Permission denied\n"), "{}", r.err);
        fs::set_permissions(&s.export.0, fs::Permissions::from_mode(0o1777)).unwrap();
        ok(&[&["mkdir"][..], &ids, &[&s.url("mine")]].concat());
        let meta = fs::metadata(s.path("mine")).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (4242, 4343));
        let out = ok(&["ls", "-ld", &s.url("mine")]);
        assert!(out.contains(" 4242 4343 "), "{out}");
    } else {
        // As another user the server acts as itself whatever the credential
        // says: the directory is ours.
        ok(&[&["mkdir"][..], &ids, &[&s.url("mine")]].concat());
        assert_eq!(fs::metadata(s.path("mine")).unwrap().uid(), me);
    }
}

/// Whether this process can mount FUSE file systems (`/dev/fuse` and root).
fn fuse_mountable() -> bool {
    let dev = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse");
    dev.is_ok() && nix::unistd::geteuid().is_root()
}

/// A FUSE daemon, killed on drop, its mount detached if it is left.
/// Killing the daemon ends its connection, so no descriptor on its mount can
/// then hang.
struct MountProcess<'a> {
    child: Child,
    mountpoint: &'a Path,
}

impl Drop for MountProcess<'_> {
    fn drop(&mut self) {
        // A no-op once the child has been reaped: never a reused pid.
        let _ = self.child.kill();
        let _ = self.child.wait();
        if rnfs_fuse::is_fuse_mounted(self.mountpoint) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(self.mountpoint)
                .status();
        }
    }
}

#[test]
fn mount_gives_up_on_a_gone_server_at_the_second_signal() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    use std::io::Write;
    if !fuse_mountable() {
        cannot_run("FUSE mounts need /dev/fuse and root here");
        return;
    }
    let server = Server::start("giveup");
    let mnt = TempDir::new("giveup-mnt");
    // Declared before `mount`, so it drops after the daemon is gone.
    let mut f;
    let mut mount = MountProcess {
        child: rnfs()
            .args(["mount", &server.url(""), mnt.arg(), "-o", "hard"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        mountpoint: &mnt.0,
    };
    let pid = Pid::from_raw(mount.child.id() as i32);
    let stderr = mount.child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut log = Vec::new();
    while !log.iter().any(|l: &String| l.contains("mounted")) {
        log.push(
            rx.recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("rnfs mount did not mount: {log:?}")),
        );
    }
    // Dirty data held by write-behind (less than a chunk), on an open file.
    f = fs::File::create(mnt.path("f")).unwrap();
    f.write_all(&[b'x'; 100_000]).unwrap();
    drop(server);

    kill(pid, Signal::SIGTERM).unwrap();
    // A hard mount writes back first, and waits for ever for a gone server.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        mount.child.try_wait().unwrap().is_none(),
        "exited at the first signal"
    );
    kill(pid, Signal::SIGTERM).unwrap();
    let mut status = None;
    for _ in 0..200 {
        status = mount.child.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = status.expect("rnfs mount still running 20 s after the second signal");
    log.extend(rx.try_iter());
    let log = log.join("\n");
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("data not written back was lost"), "{log}");
    assert!(!rnfs_fuse::is_fuse_mounted(&mnt.0), "still mounted:\n{log}");
    // The descriptor outlived its mount: closing it must not hang.
    drop(f);
}

#[test]
fn cp_and_mv_fail_when_a_local_copy_is_not_written_back() {
    if !fuse_mountable() {
        cannot_run("FUSE mounts need /dev/fuse and root here");
        return;
    }
    // Writes held by the mount's write-behind go to the server at close,
    // and fail there: the server cannot write past 1 KiB.
    let server = Server::start_limited("closefail", 2);
    let mnt = TempDir::new("closefail-mnt");
    let mut mount = MountProcess {
        child: rnfs()
            .args(["mount", &server.url(""), mnt.arg()])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        mountpoint: &mnt.0,
    };
    let stderr = mount.child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut log = Vec::new();
    while !log.iter().any(|l: &String| l.contains("mounted")) {
        log.push(
            rx.recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("rnfs mount did not mount: {log:?}")),
        );
    }
    let local = TempDir::new("closefail-src");
    let bytes = data(100_000, 3);
    write(&local.path("f"), &bytes, 0o644);
    let (src, dst) = (local.path("f"), mnt.path("f"));
    let (src, dst) = (src.to_str().unwrap(), dst.to_str().unwrap());

    // cp: the failure is told at close.
    let r = run(&["cp", src, dst]);
    assert_eq!(
        (r.code, r.err.as_str()),
        (
            1,
            format!("rnfs cp: failed to close '{dst}': File too large\n").as_str()
        )
    );

    // mv (local -> local across file systems: rename fails EXDEV, so mv
    // copies): setting the times writes back first but, as on a kernel NFS
    // mount (nfs_setattr), leaves the error to close, which tells it; the
    // source is kept.
    let r = run(&["mv", src, dst]);
    assert_eq!(
        (r.code, r.err.as_str()),
        (
            1,
            format!("rnfs mv: failed to close '{dst}': File too large\n").as_str()
        )
    );
    assert_eq!(fs::read(src).unwrap(), bytes, "the source was removed");
    drop(mount);
}

/// `-v` into a pipe that was closed ends the output, not the command: the
/// copy is whole and the status is a SIGPIPE's (141), as `cp -v | head -1`
/// expects. `println!` once panicked there (status 101).
#[test]
fn verbose_output_into_a_closed_pipe_does_not_panic() {
    let s = Server::start("vpipe");
    fs::create_dir(s.path("v")).unwrap();
    for i in 0..20 {
        write(&s.path(&format!("v/f{i}")), b"x", 0o644);
    }
    let mut child = rnfs()
        .args(["cp", "-rv", &s.url("v"), &s.url("w")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the pipe's read end before rnfs writes to it.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(141), "{err}");
    for i in 0..20 {
        assert!(s.path(&format!("w/f{i}")).exists(), "w/f{i}");
    }
}

/// As GNU cp and mv: a DEST ending in `/` that does not exist names a
/// directory to make, never a file (a URL's path is normalized, so the
/// slash must be read from what was typed).
#[test]
fn a_trailing_slash_names_a_directory() {
    let s = Server::start("slash");
    let local = TempDir::new("slash-local");
    write(&s.path("f"), b"data", 0o644);
    write(&local.path("f"), b"data", 0o644);
    fs::create_dir(s.path("d")).unwrap();
    std::os::unix::fs::symlink("f", s.path("lnk")).unwrap();
    let lf = local.path("f");
    let lf = lf.to_str().unwrap();

    // A file to NFS (from NFS or local), and to a local path.
    let not_dir = |cmd: &str, what: &str, dst: &str| {
        format!("rnfs {cmd}: cannot create {what} '{dst}': Not a directory\n")
    };
    for src in [s.url("f"), lf.to_owned()] {
        let dst = s.url("missing/");
        let r = run(&["cp", &src, &dst]);
        assert_eq!(
            (r.code, r.err.as_str()),
            (1, not_dir("cp", "regular file", &dst).as_str())
        );
        assert!(!s.path("missing").exists(), "cp {src} {dst} made a file");
    }
    let dst = format!("{}/", local.path("missing").display());
    let r = run(&["cp", &s.url("f"), &dst]);
    assert_eq!(
        (r.code, r.err.as_str()),
        (1, not_dir("cp", "regular file", &dst).as_str())
    );
    assert!(!local.path("missing").exists());

    // A symbolic link (-r copies it as a link): symlink(2)'s ENOENT.
    let dst = s.url("missing/");
    let r = run(&["cp", "-r", &s.url("lnk"), &dst]);
    assert_eq!(
        (r.code, r.err.as_str()),
        (
            1,
            format!("rnfs cp: cannot create symbolic link '{dst}': No such file or directory\n")
                .as_str()
        )
    );
    assert!(fs::symlink_metadata(s.path("missing")).is_err());

    // An existing file is not a directory either: left as it is.
    let dst = s.url("f/");
    let r = run(&["cp", lf, &dst]);
    assert_eq!(
        (r.code, r.err.as_str()),
        (
            1,
            format!("rnfs cp: cannot stat '{dst}': Not a directory\n").as_str()
        )
    );

    // mv, as rename(2) refuses it.
    let dst = s.url("missing/");
    let r = run(&["mv", &s.url("f"), &dst]);
    assert_eq!(
        (r.code, r.err.as_str()),
        (
            1,
            format!(
                "rnfs mv: cannot move '{}' to '{dst}': Not a directory\n",
                s.url("f")
            )
            .as_str()
        )
    );
    assert_eq!(fs::read(s.path("f")).unwrap(), b"data");
    assert!(!s.path("missing").exists());

    // A directory is made there.
    ok(&["cp", "-r", &s.url("d"), &s.url("newdir/")]);
    assert!(s.path("newdir").is_dir());
    ok(&["mv", &s.url("newdir"), &s.url("moved/")]);
    assert!(s.path("moved").is_dir());
}

/// Names are the server's bytes: on a terminal (as GNU ls, whose default
/// there is -q) no control character in them reaches it, so a hostile
/// server cannot drive the terminal; -q and --show-control-chars choose.
#[test]
fn ls_hides_control_characters_from_terminals() {
    use std::os::unix::ffi::OsStrExt;
    let s = Server::start("lsctl");
    let name = |n: &[u8]| s.export.0.join(std::ffi::OsStr::from_bytes(n));
    write(&name(b"a\x1b[2Jb"), b"", 0o644);
    write(&name(b"tab\tname"), b"", 0o644);
    write(&name(b"bad\xff"), b"", 0o644);
    fs::create_dir(name(b"d\x1bx")).unwrap();
    write(&name(b"d\x1bx/in"), b"", 0o644);
    std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(b"t\x1b[0m"), name(b"lnk")).unwrap();

    // Not a terminal: as they are (invalid UTF-8 replaced).
    let raw = "a\x1b[2Jb\nbad\u{fffd}\nd\x1bx\nlnk\ntab\tname\n";
    assert_eq!(ok(&["ls", &s.url("")]), raw);
    let hidden = "a?[2Jb\nbad?\nd?x\nlnk\ntab?name\n";
    assert_eq!(ok(&["ls", "-q", &s.url("")]), hidden);
    assert_eq!(ok(&["ls", "--hide-control-chars", &s.url("")]), hidden);
    // The last of -q and --show-control-chars wins.
    assert_eq!(ok(&["ls", "-q", "--show-control-chars", &s.url("")]), raw);
    assert_eq!(
        ok(&["ls", "--show-control-chars", "-1q", &s.url("")]),
        hidden
    );
    // Link targets and -R's headers too.
    let out = ok(&["ls", "-lq", &s.url("lnk")]);
    assert!(out.ends_with(" -> t?[0m\n"), "{out:?}");
    let out = ok(&["ls", "-Rq", &s.url("")]);
    assert!(
        out.contains(&format!("\n{}/d?x:\nin\n", s.url(""))),
        "{out:?}"
    );
    assert!(!out.contains('\x1b'), "{out:?}");

    // On a terminal (a pseudo-terminal from script(1), where there is one).
    let script = std::process::Command::new("script")
        .env("TZ", "UTC")
        .env("COLUMNS", "200")
        .args(["-qec"])
        .arg(format!(
            "'{}' ls '{}'",
            env!("CARGO_BIN_EXE_rnfs"),
            s.url("")
        ))
        .arg("/dev/null")
        .stdin(Stdio::null())
        .output();
    // Skipped only where script(1) is not installed; `script -e` exits with the
    // command's status, so a failing `rnfs ls` on a terminal fails here.
    let out = match script {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            cannot_run(&format!("no script(1) for a pseudo-terminal: {e}"));
            return;
        }
        other => other.expect("running script(1)"),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {text:?} {:?}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("a?[2Jb"), "{text:?}");
    assert!(text.contains("tab?name"), "{text:?}");
    assert!(!text.contains('\x1b'), "{text:?}");
}

/// As GNU cp -p: a copy whose owner and group cannot be made the source's
/// loses the set-uid and set-gid bits (and a file its sticky bit), lest a
/// set-uid program come to run as whoever the copy belongs to; one whose
/// owner is kept keeps them.
#[test]
fn cp_p_drops_set_id_bits_when_the_owner_is_not_kept() {
    use std::os::unix::fs::chown;
    if fs::metadata("/proc/self").unwrap().uid() != 0 {
        cannot_run("needs root, to act as other users");
        return;
    }
    let s = Server::start("setid");
    fs::set_permissions(&s.export.0, fs::Permissions::from_mode(0o1777)).unwrap();
    let local = TempDir::new("setid-local");
    write(&local.path("root"), b"#!/bin/sh\n", 0o6755);
    write(&local.path("theirs"), b"#!/bin/sh\n", 0o6755);
    chown(local.path("theirs"), Some(4242), Some(4343)).unwrap();
    fs::set_permissions(local.path("theirs"), fs::Permissions::from_mode(0o6755)).unwrap();
    fs::create_dir(local.path("dir")).unwrap();
    fs::set_permissions(local.path("dir"), fs::Permissions::from_mode(0o3777)).unwrap();
    let ids = ["--uid", "4242", "--gid", "4343"];
    let mode = |p: PathBuf| {
        let m = fs::metadata(p).unwrap();
        (m.uid(), m.gid(), m.mode() & 0o7777)
    };

    // Calling as 4242: root's file and directory become 4242's.
    let src = local.path("root");
    ok(&[
        &["cp", "-p"][..],
        &ids,
        &[src.to_str().unwrap(), &s.url("f")],
    ]
    .concat());
    assert_eq!(mode(s.path("f")), (4242, 4343, 0o755));
    let src = local.path("dir");
    ok(&[
        &["cp", "-rp"][..],
        &ids,
        &[src.to_str().unwrap(), &s.url("d")],
    ]
    .concat());
    assert_eq!(mode(s.path("d")), (4242, 4343, 0o1777));
    // 4242's own file keeps them.
    let src = local.path("theirs");
    ok(&[
        &["cp", "-p"][..],
        &ids,
        &[src.to_str().unwrap(), &s.url("t")],
    ]
    .concat());
    assert_eq!(mode(s.path("t")), (4242, 4343, 0o6755));
    // As root the owner is set, and the bits kept.
    let src = local.path("root");
    ok(&["cp", "-p", src.to_str().unwrap(), &s.url("r")]);
    assert_eq!(mode(s.path("r")), (0, 0, 0o6755));

    // A local copy made by another user (where setpriv(1) can run as one).
    let out = TempDir::new("setid-out");
    fs::set_permissions(&out.0, fs::Permissions::from_mode(0o777)).unwrap();
    let dst = out.path("f");
    let as_4242 = || {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=4242", "--regid=4343", "--clear-groups"]);
        c
    };
    if !as_4242().arg("true").status().is_ok_and(|s| s.success()) {
        cannot_run("setpriv(1) cannot run as another user here");
        return;
    }
    let r = as_4242()
        .arg(env!("CARGO_BIN_EXE_rnfs"))
        .args(["cp", "-p", &s.url("r"), dst.to_str().unwrap()])
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(mode(dst), (4242, 4343, 0o755));
}

/// As GNU cp: `cp -r SRC/. DIR` copies SRC's contents into DIR (DIR/. is
/// DIR), not SRC into DIR/SRC; `NAME/.` and `NAME/` name directories only.
#[test]
fn cp_r_dir_dot_copies_the_contents() {
    let s = Server::start("dot");
    let local = TempDir::new("dot-local");
    for root in [s.path("src"), local.path("src")] {
        fs::create_dir_all(root.join("sub")).unwrap();
        write(&root.join("x"), b"x", 0o644);
        write(&root.join("sub/y"), b"y", 0o644);
    }
    write(&s.path("file"), b"f", 0o644);
    fs::create_dir(s.path("dst")).unwrap();
    fs::create_dir(local.path("dst")).unwrap();
    let names = |p: PathBuf| {
        let mut n: Vec<_> = fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        n.sort();
        n
    };

    // NFS -> NFS, local -> NFS (where dst already holds x), NFS -> local.
    let out = ok(&["cp", "-rv", &s.url("src/."), &s.url("dst")]);
    assert_eq!(names(s.path("dst")), ["sub", "x"]);
    assert_same_tree(&s.path("src"), &s.path("dst"));
    assert!(
        out.contains(&format!(
            "'{}' -> '{}'\n",
            s.url("src/./x"),
            s.url("dst/./x")
        )),
        "{out}"
    );
    let src = format!("{}/.", local.path("src").display());
    ok(&["cp", "-r", &src, &s.url("dst")]);
    assert_eq!(names(s.path("dst")), ["sub", "x"]);
    ok(&[
        "cp",
        "-r",
        &s.url("src/./"),
        local.path("dst").to_str().unwrap(),
    ]);
    assert_same_tree(&s.path("src"), &local.path("dst"));
    // A DEST that does not exist is made, as without the dot.
    ok(&["cp", "-r", &s.url("src/."), &s.url("new")]);
    assert_same_tree(&s.path("src"), &s.path("new"));

    // Into itself.
    let r = run(&["cp", "-r", &s.url("src/."), &s.url("src/sub")]);
    assert_eq!(r.code, 1);
    assert!(r.err.contains("into itself"), "{}", r.err);
    assert_eq!(names(s.path("src/sub")), ["y"]);

    // A file is not a directory.
    for src in [s.url("file/."), s.url("file/")] {
        let r = run(&["cp", "-r", &src, &s.url("dst")]);
        assert_eq!(
            (r.code, r.err.as_str()),
            (
                1,
                format!("rnfs cp: cannot stat '{src}': Not a directory\n").as_str()
            )
        );
    }
    assert!(!s.path("dst/file").exists());

    // mv, as rename(2) of DIR/. fails.
    let r = run(&["mv", &s.url("src/."), &s.url("dst")]);
    assert_eq!(
        (r.code, r.err.as_str()),
        (
            1,
            format!(
                "rnfs mv: cannot move '{}' to '{}': Device or resource busy\n",
                s.url("src/."),
                s.url("dst/.")
            )
            .as_str()
        )
    );
    assert_eq!(names(s.path("src")), ["sub", "x"]);
}

/// As GNU cp and mv: a directory is not copied (or moved) into itself,
/// whatever the destination's spelling: a symbolic link on the way, or
/// another session of the server, is seen through (by file identity).
#[test]
fn cp_r_into_itself_is_refused_through_links_and_sessions() {
    let s = Server::start("itself");
    let local = TempDir::new("itself-local");
    for root in [s.export.0.as_path(), local.0.as_path()] {
        fs::create_dir_all(root.join("a/b")).unwrap();
        write(&root.join("a/f"), b"f", 0o644);
        std::os::unix::fs::symlink("a", root.join("l")).unwrap();
    }
    let tree_is_intact = |root: &Path| {
        let mut names: Vec<_> = fs::read_dir(root.join("a/b")).unwrap().collect();
        assert!(names.is_empty(), "{:?}", names.pop());
        assert_eq!(fs::read(root.join("a/f")).unwrap(), b"f");
    };
    let lb = local.path("l/b/c");
    let la = local.path("a");
    let cases = [
        (s.url("a"), s.url("l/b/c")),
        (s.url("a"), s.url2("a/b/c")),
        (s.url("a"), s.url2("l/b")),
        (s.url("a"), s.url("l")),
        (
            la.to_str().unwrap().to_owned(),
            lb.to_str().unwrap().to_owned(),
        ),
    ];
    for (src, dst) in &cases {
        let r = run(&["cp", "-r", src, dst]);
        assert_eq!(r.code, 1, "cp -r {src} {dst}: {}", r.err);
        assert!(
            r.err.starts_with(&format!(
                "rnfs cp: cannot copy a directory, '{src}', into itself, '"
            )),
            "{}",
            r.err
        );
        let r = run(&["mv", src, dst]);
        assert_eq!(r.code, 1, "mv {src} {dst}: {}", r.err);
        assert!(
            r.err.starts_with(&format!(
                "rnfs mv: cannot move '{src}' to a subdirectory of itself, '"
            )),
            "{}",
            r.err
        );
    }
    tree_is_intact(&s.export.0);
    tree_is_intact(&local.0);

    // What is not inside is copied.
    ok(&["cp", "-r", &s.url("a/b"), &s.url("l/c")]);
    assert!(s.path("a/c").is_dir());
}

/// As GNU cp and mv: two sources of one name into one directory do not
/// both go to DIR/NAME (copied -j at a time, their data once mingled in
/// one file): the second is refused, the first kept whole.
#[test]
fn two_sources_of_one_name_are_not_both_copied_to_it() {
    let s = Server::start("twice");
    let local = TempDir::new("twice-local");
    let (one, two) = (data(3 << 20, 1), data(3 << 20, 2));
    for root in [s.export.0.as_path(), local.0.as_path()] {
        for (dir, bytes) in [("a", &one), ("b", &two)] {
            fs::create_dir_all(root.join(dir).join("d")).unwrap();
            write(&root.join(dir).join("x"), bytes, 0o644);
            write(&root.join(dir).join("d/f"), bytes, 0o644);
        }
        write(&root.join("a/y"), b"file", 0o644);
        fs::create_dir(root.join("b/y")).unwrap();
        fs::create_dir(root.join("into")).unwrap();
    }
    let (la, lb) = (local.path("a"), local.path("b"));
    let (la, lb) = (la.to_str().unwrap(), lb.to_str().unwrap());

    // local -> NFS and NFS -> local, 4 files at a time.
    let into = local.path("into");
    let into = into.to_str().unwrap();
    for (a, b, dir) in [
        (la.to_owned(), lb.to_owned(), s.url("into")),
        (s.url("a"), s.url("b"), into.to_owned()),
    ] {
        let (x1, x2) = (format!("{a}/x"), format!("{b}/x"));
        let r = run(&["cp", "-j", "4", &x1, &x2, &dir]);
        assert_eq!(
            (r.code, r.err.as_str()),
            (
                1,
                format!("rnfs cp: will not overwrite just-created '{dir}/x' with '{x2}'\n")
                    .as_str()
            )
        );
        // Directories merge; a file in both is refused the second time.
        let (d1, d2) = (format!("{a}/d"), format!("{b}/d"));
        let r = run(&["cp", "-r", "-j", "4", &d1, &d2, &dir]);
        assert_eq!(
            (r.code, r.err.as_str()),
            (
                1,
                format!("rnfs cp: will not overwrite just-created '{dir}/d/f' with '{d2}/f'\n")
                    .as_str()
            )
        );
        // A directory where a file was just made.
        let (y1, y2) = (format!("{a}/y"), format!("{b}/y"));
        let r = run(&["cp", "-r", &y1, &y2, &dir]);
        let msg = format!("cannot overwrite non-directory '{dir}/y' with directory '{y2}'");
        assert_eq!(
            (r.code, r.err.as_str()),
            (1, format!("rnfs cp: {msg}\n").as_str())
        );
    }
    for root in [s.path("into"), local.path("into")] {
        assert!(
            fs::read(root.join("x")).unwrap() == one,
            "{}",
            root.display()
        );
        assert!(
            fs::read(root.join("d/f")).unwrap() == one,
            "{}",
            root.display()
        );
    }

    // mv: the second stays where it is.
    let r = run(&["mv", &s.url("a/x"), &s.url("b/x"), &s.url("")]);
    assert_eq!(
        (r.code, r.err.as_str()),
        (
            1,
            format!(
                "rnfs mv: will not overwrite just-created '{}/x' with '{}'\n",
                s.url(""),
                s.url("b/x")
            )
            .as_str()
        )
    );
    assert!(fs::read(s.path("x")).unwrap() == one);
    assert!(fs::read(s.path("b/x")).unwrap() == two);
}

/// Two destination names of one file (`D/x` a symbolic link to `y`, or
/// hard links) are not both written (at once, with -j, their bytes would
/// mingle): the second is refused, as GNU cp refuses it.
#[test]
fn two_destination_names_of_one_file_are_not_both_written() {
    let s = Server::start("onefile");
    let local = TempDir::new("onefile-local");
    let (big, small) = (data(20 << 20, 31), data(3 << 20, 32));
    for dir in ["s1", "s2"] {
        fs::create_dir(local.path(dir)).unwrap();
    }
    write(&local.path("s1/x"), &big, 0o644);
    write(&local.path("s2/y"), &small, 0o644);
    let (x, y) = (local.path("s1/x"), local.path("s2/y"));
    let (x, y) = (x.to_str().unwrap(), y.to_str().unwrap());
    let local_d = local.path("D");
    let local_d = local_d.to_str().unwrap().to_owned();
    for (root, d) in [
        (local.0.as_path(), local_d),
        (s.export.0.as_path(), s.url("D")),
    ] {
        for link in ["symlink", "hard link"] {
            let dir = root.join("D");
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir(&dir).unwrap();
            write(&dir.join("y"), b"old\n", 0o644);
            if link == "symlink" {
                std::os::unix::fs::symlink("y", dir.join("x")).unwrap();
            } else {
                fs::hard_link(dir.join("y"), dir.join("x")).unwrap();
            }
            let r = run(&["cp", "-j", "2", x, y, &format!("{d}/")]);
            assert_eq!(r.code, 1, "{d} ({link}): {}", r.err);
            assert_eq!(
                r.err,
                format!("rnfs cp: will not overwrite just-created '{d}/y' with '{y}'\n"),
                "{link}"
            );
            let got = fs::read(dir.join("y")).unwrap();
            assert!(got == big, "{d} ({link}): D/y is not s1/x");
        }
    }
}

/// A file of `len` bytes with `head` at its start and `tail` at its end,
/// holes between.
fn write_sparse(path: &Path, len: u64, head: &[u8], tail: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = fs::File::create(path).unwrap();
    f.write_all(head).unwrap();
    f.set_len(len).unwrap();
    f.seek(SeekFrom::Start(len - tail.len() as u64)).unwrap();
    f.write_all(tail).unwrap();
}

/// Bytes allocated to `path`.
fn allocated(path: &Path) -> u64 {
    fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn cp_keeps_the_holes_of_sparse_files() {
    let s = Server::start("sparse");
    let local = TempDir::new("sparse-local");
    const LEN: u64 = 64 << 20;
    let (head, tail) = (data(100_000, 5), data(70_000, 6));
    let src = local.path("sparse.img");
    write_sparse(&src, LEN, &head, &tail);
    // Where holes cannot be made, the test cannot tell anything.
    assert!(allocated(&src) < 1 << 20, "no holes in {}", src.display());
    // A file ending in a hole: the copy's size is set, not written.
    let open_end = local.path("open-end.img");
    write_sparse(&open_end, LEN, &head, &[]);
    // Blocks of zeros among data, in a file with holes.
    let mut mixed = data(1 << 20, 8);
    mixed[4096..3 * 4096].fill(0);
    let mixed_src = local.path("mixed.img");
    write_sparse(&mixed_src, LEN, &mixed, &tail);
    // A file without holes stays without, zeros and all (GNU --sparse=auto).
    let dense = local.path("dense.img");
    write(&dense, &vec![0; 1 << 20], 0o644);

    for name in ["sparse.img", "open-end.img", "mixed.img", "dense.img"] {
        let from = local.path(name);
        let bytes = fs::read(&from).unwrap();
        // Overwriting a file without holes, too.
        write(&s.path(name), &data(2 << 20, 9), 0o644);
        ok(&["cp", from.to_str().unwrap(), &s.url(name)]);
        let up = s.path(name);
        assert!(
            fs::read(&up).unwrap() == bytes,
            "{name}: uploaded bytes differ"
        );
        let back = local.path(&format!("back-{name}"));
        ok(&["cp", &s.url(name), back.to_str().unwrap()]);
        assert!(
            fs::read(&back).unwrap() == bytes,
            "{name}: downloaded bytes differ"
        );
        let copy = format!("copy-{name}");
        ok(&["cp", &s.url(name), &s.url(&copy)]);
        assert!(
            fs::read(s.path(&copy)).unwrap() == bytes,
            "{name}: server copy differs"
        );
        for (what, p) in [
            ("upload", up),
            ("download", back),
            ("server copy", s.path(&copy)),
        ] {
            let used = allocated(&p);
            if name == "dense.img" {
                assert!(used >= 1 << 20, "{name}: {what} has holes: {used}");
            } else {
                assert!(used < 4 << 20, "{name}: {what} filled in: {used} bytes");
            }
        }
    }
}

/// A sparse file copied to a destination that is not a regular file (GNU
/// cp makes holes only in regular files): its zeros are written, not
/// skipped by seeking (which /dev/null refuses, a FIFO cannot do, and a
/// block device would answer by keeping its old bytes).
#[test]
fn cp_writes_zeros_densely_where_the_destination_is_not_a_regular_file() {
    let s = Server::start("sparse-special");
    let local = TempDir::new("sparse-special-local");
    const LEN: u64 = 8 << 20;
    let (head, tail) = (data(100_000, 15), data(70_000, 16));
    let src = local.path("sparse.img");
    write_sparse(&src, LEN, &head, &tail);
    assert!(allocated(&src) < 1 << 20, "no holes in {}", src.display());
    write_sparse(&s.path("sparse.img"), LEN, &head, &tail);
    let bytes = fs::read(&src).unwrap();

    ok(&["cp", src.to_str().unwrap(), "/dev/null"]);
    ok(&["cp", &s.url("sparse.img"), "/dev/null"]);

    for from in [src.to_str().unwrap().to_owned(), s.url("sparse.img")] {
        let fifo = local.path("fifo");
        let _ = fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(fifo).unwrap())
        };
        let r = run(&["cp", &from, fifo.to_str().unwrap()]);
        let got = reader.join().unwrap();
        assert_eq!(r.code, 0, "cp {from} to a FIFO: {}", r.err);
        assert!(got.len() as u64 == LEN, "{from}: {} bytes read", got.len());
        assert!(got == bytes, "{from}: the FIFO delivered other bytes");
    }
}

/// The type and device numbers of `path`, as `ls -l` shows them.
fn special_kind(path: &Path) -> String {
    use std::os::unix::fs::FileTypeExt;
    let m = fs::symlink_metadata(path).unwrap();
    let ft = m.file_type();
    let dev = m.rdev();
    // Linux's encoding of major and minor numbers.
    let (major, minor) = ((dev >> 8) & 0xfff, (dev & 0xff) | ((dev >> 12) & 0xfff00));
    if ft.is_fifo() {
        "fifo".into()
    } else if ft.is_socket() {
        "socket".into()
    } else if ft.is_char_device() {
        format!("char {major},{minor}")
    } else if ft.is_block_device() {
        format!("block {major},{minor}")
    } else {
        format!("{ft:?}")
    }
}

#[test]
fn cp_r_and_mv_make_special_files_anew() {
    let s = Server::start("special");
    let local = TempDir::new("special-local");
    let tree = local.path("tree");
    fs::create_dir(&tree).unwrap();
    let mkfifo = |p: &Path| {
        let st = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .unwrap();
        assert!(st.success());
    };
    mkfifo(&tree.join("fifo"));
    fs::set_permissions(tree.join("fifo"), fs::Permissions::from_mode(0o640)).unwrap();
    let _sock = std::os::unix::net::UnixListener::bind(tree.join("sock")).unwrap();
    write(&tree.join("file"), b"data", 0o644);
    let root = rustix::process::geteuid().is_root();
    if root {
        let st = std::process::Command::new("mknod")
            .arg(tree.join("null"))
            .args(["c", "1", "3"])
            .status()
            .unwrap();
        assert!(st.success());
    }
    let mut want = vec![("fifo", "fifo".to_owned()), ("sock", "socket".to_owned())];
    if root {
        want.push(("null", "char 1,3".to_owned()));
    }

    // local -> NFS, NFS -> local (-p), NFS -> NFS.
    ok(&["cp", "-r", tree.to_str().unwrap(), &s.url("up")]);
    let back = local.path("back");
    ok(&["cp", "-rp", &s.url("up"), back.to_str().unwrap()]);
    ok(&["cp", "-r", &s.url("up"), &s.url("copy")]);
    for (name, kind) in &want {
        for dir in [s.path("up"), back.clone(), s.path("copy")] {
            assert_eq!(&special_kind(&dir.join(name)), kind, "{}", dir.display());
        }
    }
    assert_eq!(fs::read(back.join("file")).unwrap(), b"data");
    let fifo = fs::metadata(back.join("fifo")).unwrap();
    assert_eq!(fifo.mode() & 0o7777, 0o640);
    let up = fs::metadata(s.path("up/fifo")).unwrap();
    assert_eq!(
        (fifo.mtime(), fifo.mtime_nsec()),
        (up.mtime(), up.mtime_nsec())
    );

    // Over an existing file, it is replaced.
    write(&s.path("over"), b"old", 0o644);
    ok(&[
        "cp",
        "-r",
        tree.join("fifo").to_str().unwrap(),
        &s.url("over"),
    ]);
    assert_eq!(special_kind(&s.path("over")), "fifo");

    // mv between file systems moves them, both ways.
    ok(&["mv", &s.url("copy"), local.path("moved").to_str().unwrap()]);
    assert!(!s.path("copy").exists());
    ok(&["mv", back.to_str().unwrap(), &s.url("moved")]);
    assert!(!back.exists());
    for (name, kind) in &want {
        assert_eq!(&special_kind(&local.path("moved").join(name)), kind);
        assert_eq!(&special_kind(&s.path("moved").join(name)), kind);
    }

    // Without -r, one on NFS cannot be read: refused.
    let r = run(&["cp", &s.url("up/fifo"), &s.url("plain")]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(!s.path("plain").exists());

    // Who may not make a device is told so, as GNU cp tells it; the rest
    // is copied.
    if root && Path::new("/usr/bin/setpriv").exists() {
        let open = local.path("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let dest = open.join("t");
        let out = std::process::Command::new("/usr/bin/setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_rnfs"))
            .args(["cp", "-r", &s.url("up"), dest.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(
            err,
            format!(
                "rnfs cp: cannot create special file '{}/null': Operation not permitted\n",
                dest.display()
            )
        );
        assert_eq!(special_kind(&dest.join("fifo")), "fifo");
        assert_eq!(fs::read(dest.join("file")).unwrap(), b"data");
    }
}

#[test]
fn mv_between_file_systems_keeps_hard_links() {
    let s = Server::start("mvlinks");
    let local = TempDir::new("mvlinks-local");
    let t = local.path("t");
    fs::create_dir_all(t.join("sub")).unwrap();
    write(&t.join("a"), &data(300_000, 1), 0o644);
    fs::hard_link(t.join("a"), t.join("b")).unwrap();
    fs::hard_link(t.join("a"), t.join("sub/c")).unwrap();
    // A second source, another name of the same file.
    fs::hard_link(t.join("a"), local.path("x")).unwrap();
    write(&t.join("lone"), b"lone", 0o644);
    let names = ["t/a", "t/b", "t/sub/c", "x"];
    let ino = |root: &Path| -> Vec<(u64, u64)> {
        names
            .iter()
            .map(|n| {
                let m = fs::metadata(root.join(n)).unwrap();
                (m.ino(), m.nlink())
            })
            .collect()
    };

    // cp -r copies each name apart, as GNU cp without -a.
    ok(&["cp", "-r", t.to_str().unwrap(), &s.url("cp")]);
    assert_ne!(
        fs::metadata(s.path("cp/a")).unwrap().ino(),
        fs::metadata(s.path("cp/b")).unwrap().ino()
    );

    // x first, over a file there: it is copied beside it and renamed
    // over it; t's names are links to it.
    fs::create_dir(s.path("dest")).unwrap();
    write(&s.path("dest/x"), b"old", 0o644);
    ok(&[
        "mv",
        local.path("x").to_str().unwrap(),
        t.to_str().unwrap(),
        &s.url("dest"),
    ]);
    assert!(!t.exists() && !local.path("x").exists());
    let on_server = ino(&s.path("dest"));
    assert!(
        on_server.iter().all(|i| *i == (on_server[0].0, 4)),
        "{on_server:?}"
    );
    assert_eq!(fs::read(s.path("dest/x")).unwrap(), data(300_000, 1));
    assert_eq!(fs::metadata(s.path("dest/t/lone")).unwrap().nlink(), 1);

    // And back, NFS -> local.
    let back = local.path("back");
    fs::create_dir(&back).unwrap();
    ok(&[
        "mv",
        &s.url("dest/t"),
        &s.url("dest/x"),
        back.to_str().unwrap(),
    ]);
    let here = ino(&back);
    assert!(here.iter().all(|i| *i == (here[0].0, 4)), "{here:?}");
    assert_eq!(fs::read(back.join("t/sub/c")).unwrap(), data(300_000, 1));
}

/// mv of two names of one NFS file to a local directory, the first copy
/// failing (past the client's RLIMIT_FSIZE): the second name is not made
/// a link to the partial copy, and its source is kept.
#[test]
fn mv_does_not_link_to_a_failed_copy() {
    let s = Server::start("mvlinkfail");
    let local = TempDir::new("mvlinkfail-local");
    let bytes = data(300_000, 21);
    write(&s.path("a"), &bytes, 0o644);
    fs::hard_link(s.path("a"), s.path("b")).unwrap();
    let out_dir = local.path("out");
    fs::create_dir(&out_dir).unwrap();
    // 100 blocks of 512 bytes: the copy of 300 000 bytes fails EFBIG.
    let out = std::process::Command::new("sh")
        .env_remove("RUST_LOG")
        .args([
            "-c",
            "trap '' XFSZ; ulimit -f 100 && exec \"$0\" \"$@\"",
            env!("CARGO_BIN_EXE_rnfs"),
            "mv",
            &s.url("a"),
            &s.url("b"),
            out_dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error writing"), "{err}");
    // Both sources are kept, whole.
    assert_eq!(fs::read(s.path("a")).unwrap(), bytes);
    assert_eq!(fs::read(s.path("b")).unwrap(), bytes, "{err}");
    // b was not made a link to a's partial copy.
    if let (Ok(a), Ok(b)) = (
        fs::metadata(out_dir.join("a")),
        fs::metadata(out_dir.join("b")),
    ) {
        assert_ne!(a.ino(), b.ino(), "out/b is linked to out/a: {err}");
    }
}

/// mv of `LINK/`, a symbolic link to a directory, is refused as rename(2)
/// refuses it (GNU mv): neither the directory's contents nor the link
/// are moved.
#[test]
fn mv_of_a_symlink_with_a_trailing_slash_is_refused() {
    let s = Server::start("mvslash");
    let local = TempDir::new("mvslash-local");
    for root in [s.export.0.as_path(), local.0.as_path()] {
        fs::create_dir(root.join("realdir")).unwrap();
        write(&root.join("realdir/f"), b"f", 0o644);
        std::os::unix::fs::symlink("realdir", root.join("lnk")).unwrap();
        fs::create_dir(root.join("out2")).unwrap();
    }
    let local_lnk = format!("{}/", local.path("lnk").display());
    let local_out = local.path("out2");
    let local_out = local_out.to_str().unwrap();
    for (src, dst) in [
        (s.url("lnk/"), format!("{local_out}/")),
        (s.url("lnk/"), s.url("out2/")),
        (local_lnk.clone(), s.url("out2/")),
        (local_lnk, format!("{local_out}/")),
    ] {
        let r = run(&["mv", &src, &dst]);
        assert_eq!(r.code, 1, "mv {src} {dst}: {}", r.err);
        assert_eq!(
            r.err,
            format!("rnfs mv: cannot move '{src}' to '{dst}lnk': Not a directory\n")
        );
    }
    for root in [s.export.0.as_path(), local.0.as_path()] {
        assert_eq!(fs::read(root.join("realdir/f")).unwrap(), b"f");
        assert!(fs::symlink_metadata(root.join("lnk")).unwrap().is_symlink());
        assert_eq!(fs::read_dir(root.join("out2")).unwrap().count(), 0);
    }
}

#[test]
fn local_operands_need_not_be_utf8() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let s = Server::start("nonutf8");
    let local = TempDir::new("nonutf8-local");
    let name = OsStr::from_bytes(b"a\xffb");
    let src = local.0.join(name);
    write(&src, b"bytes", 0o644);

    // Local -> NFS, into a directory: the name's bytes are kept.
    let out = rnfs().arg("cp").arg(&src).arg(s.url("")).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read(s.path("").join(name)).unwrap(), b"bytes");
    let out = rnfs().args(["ls", &s.url("")]).output().unwrap();
    assert!(out.status.success());
    // ls shows invalid UTF-8 replaced (format::ls_name).
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a\u{fffd}b\n");

    // And back into a local directory of that name, with mv.
    let dir = local.0.join(OsStr::from_bytes(b"d\xfe"));
    fs::create_dir(&dir).unwrap();
    fs::create_dir(s.path("sub")).unwrap();
    fs::rename(s.path("").join(name), s.path("sub").join(name)).unwrap();
    let out = rnfs()
        .args(["mv", "-t"])
        .arg(&dir)
        .arg(s.url("sub"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read(dir.join("sub").join(name)).unwrap(), b"bytes");
    assert!(!s.path("sub").exists());

    // A URL spells other bytes with percent-escapes: raw ones are refused.
    let out = rnfs()
        .arg("cp")
        .arg(&src)
        .arg(OsStr::from_bytes(b"nfs://h/e/\xff"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_nested_export_is_reached_through_its_own_session() {
    // /data, and inside it /data/sub (its directory, read-only) and
    // /data/other (another directory).
    let s = Server::start_config("nested", |base| {
        for d in ["data/sub", "elsewhere"] {
            fs::create_dir_all(base.join(d)).unwrap();
        }
        let export = |path: &str, mount: &str, access: &str| {
            format!(
                "[[export]]\npath = \"{}\"\nmount_path = \"{mount}\"\naccess = \"{access}\"\n\
                 squash = \"none\"\n",
                base.join(path).display()
            )
        };
        [
            export("data", "/data", "rw"),
            export("data/sub", "/data/sub", "ro"),
            export("elsewhere", "/data/other", "rw"),
        ]
        .concat()
    });
    write(&s.path("data/f"), b"f", 0o644);

    write(&s.path("data/sub/x"), b"x", 0o644);
    let url = |p: &str| format!("nfs://127.0.0.1:{}{p}", s.port);

    // The destination is opened first: a session of /data, then
    // /data/sub/x. Through /data it would be renamed out of the
    // read-only export; through /data/sub it is copied, and not removed.
    let r = run(&["mv", &url("/data/sub/x"), &url("/data/y")]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(
        r.err.contains("cannot remove") && r.err.contains("Read-only file system"),
        "{}",
        r.err
    );
    assert_eq!(fs::read(s.path("data/sub/x")).unwrap(), b"x");
    // /data/other is another directory than /data's "other" (which
    // does not exist).
    ok(&["cp", &url("/data/f"), &url("/data/other/g")]);
    assert_eq!(fs::read(s.path("elsewhere/g")).unwrap(), b"f");
    ok(&["cp", &url("/data/other/g"), &url("/data/h")]);
    assert_eq!(fs::read(s.path("data/h")).unwrap(), b"f");
    // Writing into the read-only one fails, whichever session is first.
    let r = run(&["cp", &url("/data/f"), &url("/data/sub/g")]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(r.err.contains("Read-only file system"), "{}", r.err);
}

/// A copy into itself is seen where the destination is under an export
/// nested in the source's (/data and /data/sub of one tree): refused, not
/// recursed into until the stack overflows.
#[test]
fn cp_r_into_itself_is_refused_through_a_nested_export() {
    let s = Server::start_config("nested-itself", |base| {
        fs::create_dir_all(base.join("data/sub")).unwrap();
        let export = |path: &str, mount: &str| {
            format!(
                "[[export]]\npath = \"{}\"\nmount_path = \"{mount}\"\naccess = \"rw\"\n\
                 squash = \"none\"\n",
                base.join(path).display()
            )
        };
        [export("data", "/data"), export("data/sub", "/data/sub")].concat()
    });
    write(&s.path("data/f"), b"f", 0o644);
    let url = |p: &str| format!("nfs://127.0.0.1:{}{p}", s.port);
    // As a new name, and into the nested export's root.
    for (dst, made) in [
        ("/data/sub/copy", "/data/sub/copy"),
        ("/data/sub", "/data/sub/data"),
    ] {
        let (src, dst) = (url("/data"), url(dst));
        let r = run(&["cp", "-r", &src, &dst]);
        assert_eq!(r.code, 1, "cp -r {src} {dst}: {}", r.err);
        assert_eq!(
            r.err,
            format!(
                "rnfs cp: cannot copy a directory, '{src}', into itself, '{}'\n",
                url(made)
            )
        );
        let r = run(&["mv", &src, &dst]);
        assert_eq!(r.code, 1, "mv {src} {dst}: {}", r.err);
        assert!(
            r.err.starts_with(&format!(
                "rnfs mv: cannot move '{src}' to a subdirectory of itself, '"
            )),
            "{}",
            r.err
        );
    }
    let left: Vec<_> = fs::read_dir(s.path("data/sub")).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(fs::read(s.path("data/f")).unwrap(), b"f");
}

#[test]
fn names_with_control_characters_are_quoted_in_messages() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let s = Server::start("quote");
    let local = TempDir::new("quote-local");
    fs::create_dir(s.path("d")).unwrap();
    // What a hostile server could name a file to drive a terminal.
    let evil = OsStr::from_bytes(b"a\x1b[2Jb");
    write(&s.path("d").join(evil), b"x", 0o644);
    let q = r"a'$'\033''[2Jb";

    // cp -v: the name from the server is quoted, as GNU cp -v quotes it.
    let dest = local.path("copy");
    let r = run(&["cp", "-rv", &s.url("d"), dest.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(!r.out.contains('\x1b'), "{:?}", r.out);
    assert!(
        r.out.contains(&format!(
            "'{}/{q}' -> '{}/{q}'\n",
            s.url("d"),
            dest.display()
        )),
        "{}",
        r.out
    );
    assert_eq!(fs::read(dest.join(evil)).unwrap(), b"x");

    // Errors too.
    let blocked = local.path("blocked");
    fs::create_dir_all(blocked.join(evil)).unwrap();
    let r = run(&[
        "cp",
        "-r",
        &format!("{}/.", s.url("d")),
        blocked.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1);
    assert!(!r.err.contains('\x1b'), "{:?}", r.err);
    assert!(
        r.err.contains(&format!(
            "cannot overwrite directory '{}/./{q}' with non-directory",
            blocked.display()
        )),
        "{}",
        r.err
    );

    // And rm -v.
    let r = run(&["rm", "-rv", &s.url("d")]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(!r.out.contains('\x1b'), "{:?}", r.out);
    assert!(
        r.out.contains(&format!("removed '{}/{q}'\n", s.url("d"))),
        "{}",
        r.out
    );
}

#[test]
fn cp_without_r_reads_a_local_fifo_or_device() {
    let s = Server::start("readspecial");
    let local = TempDir::new("readspecial-local");
    // cp /dev/null FILE: an empty file, over one with data too.
    write(&s.path("empty"), b"old data", 0o644);
    ok(&["cp", "/dev/null", &s.url("empty")]);
    let m = fs::symlink_metadata(s.path("empty")).unwrap();
    assert!(m.is_file() && m.len() == 0, "{m:?}");

    // A FIFO: what its writer writes.
    let fifo = local.path("fifo");
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(st.success());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::write(fifo, b"through the pipe").unwrap())
    };
    ok(&["cp", fifo.to_str().unwrap(), &s.url("piped")]);
    writer.join().unwrap();
    assert_eq!(fs::read(s.path("piped")).unwrap(), b"through the pipe");
    assert!(fs::symlink_metadata(s.path("piped")).unwrap().is_file());
}

#[test]
fn an_unreadable_source_leaves_the_destination_alone() {
    if fs::metadata("/proc/self").unwrap().uid() != 0 {
        return; // the server must act as the caller to refuse a read
    }
    let s = Server::start("unreadable");
    let local = TempDir::new("unreadable-dst");
    fs::create_dir(s.path("tree")).unwrap();
    fs::write(s.path("tree/secret"), b"for root only").unwrap();
    fs::set_permissions(s.path("tree/secret"), fs::Permissions::from_mode(0o600)).unwrap();
    let keep = local.path("keep");
    fs::write(&keep, b"precious").unwrap();
    let nobody = ["--uid", "65534", "--gid", "65534"];
    let src = s.url("tree/secret");
    for dst in [keep.to_str().unwrap().to_owned(), s.url2("kept")] {
        if dst.starts_with("nfs:") {
            fs::write(s.path("kept"), b"precious").unwrap();
            fs::set_permissions(s.path("kept"), fs::Permissions::from_mode(0o666)).unwrap();
        }
        let r = run(&[&["cp"][..], &nobody, &[&src, &dst]].concat());
        assert_eq!(r.code, 1, "{}", r.err);
        assert!(
            r.err.ends_with(&format!(
                "cannot open '{src}' for reading: Permission denied\n"
            )),
            "{}",
            r.err
        );
    }
    assert_eq!(fs::read(&keep).unwrap(), b"precious");
    assert_eq!(fs::read(s.path("kept")).unwrap(), b"precious");
    // Recursively: no empty copy is left behind.
    let out = local.path("out");
    let r = run(&[
        &["cp", "-r"][..],
        &nobody,
        &[&s.url("tree"), out.to_str().unwrap()],
    ]
    .concat());
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(!out.join("secret").exists(), "{}", r.err);
}

#[test]
fn a_trailing_slash_on_a_file_is_not_a_directory() {
    let s = Server::start("slash");
    fs::write(s.path("f"), b"data").unwrap();
    std::os::unix::fs::symlink("f", s.path("lnk")).unwrap();
    fs::create_dir(s.path("d")).unwrap();
    std::os::unix::fs::symlink("d", s.path("dlnk")).unwrap();
    for name in ["f/", "lnk/"] {
        let url = s.url(name);
        // GNU's messages and exit codes.
        for (cmd, code, err) in [
            (
                "rm",
                1,
                format!("rnfs rm: cannot remove '{url}': Not a directory\n"),
            ),
            (
                "ls",
                2,
                format!("rnfs ls: cannot access '{url}': Not a directory\n"),
            ),
            (
                "stat",
                1,
                format!("rnfs stat: cannot stat '{url}': Not a directory\n"),
            ),
            ("cat", 1, format!("rnfs cat: {url}: Not a directory\n")),
        ] {
            let r = run(&[cmd, &url]);
            assert_eq!(
                (r.code, r.err.as_str()),
                (code, err.as_str()),
                "{cmd} {name}"
            );
        }
    }
    assert!(s.path("f").exists() && s.path("lnk").symlink_metadata().is_ok());
    // A link to a directory, with the slash, is the directory.
    assert_eq!(ok(&["ls", &s.url("dlnk/")]), "");
    assert!(ok(&["stat", &s.url("dlnk/")]).contains("directory"));
}

//! The FUSE mount against an in-process rnfs server: the POSIX surface
//! through `std::fs`, the data on the server afterwards, close-to-open, and
//! real programs (`cp -a`, `tar`, `git`, `fio`). Runs as root in CI; elsewhere
//! it skips (saying why) when FUSE cannot be mounted (or fio is not installed);
//! under CI that is a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;
#[path = "../../client/tests/support/jukebox_proxy.rs"]
mod jukebox_proxy;

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::cannot_run::cannot_run;
use common::{sh, skip, skip_unless_root, AbortOnPanic, TestMount};
use jukebox_proxy::{jukebox_proxy, JukeboxPlan};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

#[test]
fn files_read_write_append_truncate() {
    if skip("files_read_write_append_truncate") {
        return;
    }
    let t = TestMount::new();
    let data = pattern(3 << 20, 7);
    fs::write(t.m("big"), &data).unwrap();
    assert_eq!(fs::read(t.m("big")).unwrap(), data);
    // On the server byte for byte once closed.
    assert_eq!(fs::read(t.e("big")).unwrap(), data);

    let mut f = OpenOptions::new().append(true).open(t.m("big")).unwrap();
    f.write_all(b"tail").unwrap();
    drop(f);
    let mut want = data.clone();
    want.extend_from_slice(b"tail");
    assert_eq!(fs::read(t.e("big")).unwrap(), want);

    // Overwrite in the middle, read back through the same descriptor.
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(t.m("big"))
        .unwrap();
    f.seek(SeekFrom::Start(1000)).unwrap();
    f.write_all(&[0xee; 5000]).unwrap();
    want[1000..6000].fill(0xee);
    f.seek(SeekFrom::Start(0)).unwrap();
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    assert_eq!(back, want);
    // Truncate down and up: the hole reads as zeros.
    f.set_len(4096).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 4096);
    f.set_len(10_000).unwrap();
    drop(f);
    want.truncate(4096);
    want.resize(10_000, 0);
    assert_eq!(fs::read(t.m("big")).unwrap(), want);
    assert_eq!(fs::read(t.e("big")).unwrap(), want);

    // Writing past the end leaves a hole.
    let mut f = OpenOptions::new().write(true).open(t.m("big")).unwrap();
    f.seek(SeekFrom::Start(20_000)).unwrap();
    f.write_all(b"x").unwrap();
    drop(f);
    want.resize(20_000, 0);
    want.push(b'x');
    assert_eq!(fs::read(t.e("big")).unwrap(), want);

    // O_TRUNC.
    fs::write(t.m("big"), b"short").unwrap();
    assert_eq!(fs::read(t.e("big")).unwrap(), b"short");
    assert_eq!(fs::metadata(t.m("big")).unwrap().len(), 5);
}

#[test]
fn names_links_and_metadata() {
    if skip("names_links_and_metadata") {
        return;
    }
    let t = TestMount::new();
    fs::create_dir(t.m("d")).unwrap();
    fs::create_dir_all(t.m("d/e/f")).unwrap();
    assert!(t.e("d/e/f").is_dir());
    fs::write(t.m("d/a"), b"aaa").unwrap();

    // O_EXCL on an existing name fails; without it the file is opened.
    let excl = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(t.m("d/a"));
    assert_eq!(excl.unwrap_err().kind(), ErrorKind::AlreadyExists);
    drop(
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(t.m("d/a"))
            .unwrap(),
    );
    assert_eq!(fs::read(t.m("d/a")).unwrap(), b"aaa");

    // Rename, within and across directories, over an existing file.
    fs::rename(t.m("d/a"), t.m("d/b")).unwrap();
    assert!(!t.e("d/a").exists());
    fs::rename(t.m("d/b"), t.m("d/e/c")).unwrap();
    fs::write(t.m("d/x"), b"x").unwrap();
    fs::rename(t.m("d/x"), t.m("d/e/c")).unwrap();
    assert_eq!(fs::read(t.e("d/e/c")).unwrap(), b"x");
    // RENAME_NOREPLACE refuses an existing target.
    fs::write(t.m("d/y"), b"y").unwrap();
    let (from, to) = (cstr(&t.m("d/y")), cstr(&t.m("d/e/c")));
    // SAFETY: two valid NUL-terminated paths; AT_FDCWD for both directories.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    assert_eq!(r, -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EEXIST)
    );

    // Hard links share the inode and the link count follows.
    fs::hard_link(t.m("d/y"), t.m("d/y2")).unwrap();
    let (a, b) = (
        fs::metadata(t.m("d/y")).unwrap(),
        fs::metadata(t.m("d/y2")).unwrap(),
    );
    assert_eq!(a.ino(), b.ino());
    assert_eq!(a.nlink(), 2);
    assert_eq!(a.ino(), fs::metadata(t.e("d/y")).unwrap().ino());
    fs::remove_file(t.m("d/y2")).unwrap();
    assert_eq!(fs::metadata(t.m("d/y")).unwrap().nlink(), 1);

    // Symbolic links.
    std::os::unix::fs::symlink("e/c", t.m("d/link")).unwrap();
    assert_eq!(fs::read_link(t.m("d/link")).unwrap(), Path::new("e/c"));
    assert_eq!(fs::read(t.m("d/link")).unwrap(), b"x");
    assert!(fs::symlink_metadata(t.e("d/link")).unwrap().is_symlink());

    // chmod, chown (root: to another owner), utimes.
    fs::set_permissions(t.m("d/y"), fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(t.e("d/y")).unwrap().mode() & 0o7777, 0o640);
    assert_eq!(fs::metadata(t.m("d/y")).unwrap().mode() & 0o7777, 0o640);
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(t.m("d/y"), Some(1234), Some(5678)).unwrap();
        let m = fs::metadata(t.e("d/y")).unwrap();
        assert_eq!((m.uid(), m.gid()), (1234, 5678));
    }
    let when = UNIX_EPOCH + Duration::new(1_500_000_000, 123_456_789);
    File::options()
        .write(true)
        .open(t.m("d/y"))
        .unwrap()
        .set_modified(when)
        .unwrap();
    assert_eq!(fs::metadata(t.e("d/y")).unwrap().modified().unwrap(), when);
    assert_eq!(fs::metadata(t.m("d/y")).unwrap().modified().unwrap(), when);
    // utimensat(UTIME_NOW): the server's clock.
    let p = cstr(&t.m("d/y"));
    let now = [libc::timespec {
        tv_sec: 0,
        tv_nsec: libc::UTIME_NOW,
    }; 2];
    // SAFETY: a valid path and a two-element timespec array.
    assert_eq!(
        unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), now.as_ptr(), 0) },
        0
    );
    let age = SystemTime::now()
        .duration_since(fs::metadata(t.e("d/y")).unwrap().modified().unwrap())
        .unwrap_or_default();
    assert!(
        age < Duration::from_secs(60),
        "mtime not set to now: {age:?}"
    );

    // rmdir: a non-empty directory refuses, an empty one goes.
    let err = fs::remove_dir(t.m("d/e")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTEMPTY), "{err}");
    fs::remove_dir(t.m("d/e/f")).unwrap();
    assert!(!t.e("d/e/f").exists());

    // A FIFO works as one.
    let fifo = cstr(&t.m("d/fifo"));
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    assert!(fs::metadata(t.e("d/fifo")).unwrap().file_type().is_fifo());
    let path = t.m("d/fifo");
    let writer = std::thread::spawn(move || fs::write(path, b"through the pipe").unwrap());
    assert_eq!(fs::read(t.m("d/fifo")).unwrap(), b"through the pipe");
    writer.join().unwrap();

    // statfs.
    let st = cstr(&t.mnt);
    // SAFETY: zeroed statvfs is a valid out-parameter.
    let mut sv: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid path and a valid out-parameter.
    assert_eq!(unsafe { libc::statvfs(st.as_ptr(), &mut sv) }, 0);
    assert!(sv.f_blocks > 0 && sv.f_bsize > 0);
    assert_eq!(sv.f_namemax, 255);

    // Errors map to the right errno.
    assert_eq!(
        fs::read(t.m("nope")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        fs::create_dir(t.m("d")).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

#[test]
fn large_directory_listing() {
    if skip("large_directory_listing") {
        return;
    }
    let t = TestMount::new();
    fs::create_dir(t.e("many")).unwrap();
    for i in 0..2000 {
        fs::write(t.e(&format!("many/file-{i:05}")), i.to_string()).unwrap();
    }
    let mut names: Vec<String> = fs::read_dir(t.m("many"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let want: Vec<String> = (0..2000).map(|i| format!("file-{i:05}")).collect();
    assert_eq!(names, want);
    // Read again in small pieces (4 KiB `getdents64` buffers: many of the
    // kernel's reads per cached page of entries). Each read goes on where
    // the last one stopped, found without searching the page: a search per
    // read is quadratic in the page's entries.
    let searches = t.handle.as_ref().unwrap().listing_searches();
    assert_eq!(getdents_in_small_reads(&t.m("many")), 2002);
    let searches = t.handle.as_ref().unwrap().listing_searches() - searches;
    assert!(searches <= 2, "{searches} reads searched the page");
    // READDIRPLUS filled the cache: stat and read every entry.
    for i in (0..2000).step_by(97) {
        let p = t.m(&format!("many/file-{i:05}"));
        assert_eq!(fs::read_to_string(&p).unwrap(), i.to_string());
        assert_eq!(
            fs::metadata(&p).unwrap().ino(),
            fs::metadata(t.e(&format!("many/file-{i:05}")))
                .unwrap()
                .ino()
        );
    }
    // Listing through the mount creates the same names on the server.
    fs::create_dir(t.m("made")).unwrap();
    for i in 0..300 {
        fs::write(t.m(&format!("made/{i}")), b"").unwrap();
    }
    assert_eq!(fs::read_dir(t.e("made")).unwrap().count(), 300);
    assert_eq!(fs::read_dir(t.m("made")).unwrap().count(), 300);
}

/// How many entries (`.` and `..` included) `dir` lists when read with
/// `getdents64` into a 4 KiB buffer.
fn getdents_in_small_reads(dir: &Path) -> usize {
    let dir = File::open(dir).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut entries = 0;
    loop {
        // SAFETY: `buf` is writable for its length, and the descriptor is
        // an open directory for the whole call.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        assert!(n >= 0, "getdents64: {}", std::io::Error::last_os_error());
        if n == 0 {
            return entries;
        }
        let mut at = 0;
        while at < n as usize {
            // d_ino (8), d_off (8), d_reclen (2), d_type, d_name.
            let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]);
            at += usize::from(reclen);
            entries += 1;
        }
    }
}

/// `.` and `..` are listed, as directories, with the node ids `stat` shows,
/// though the server sends `..` with no handle or attributes (a handle would
/// cost it a walk up to the export root on every listing).
#[test]
fn dot_entries_are_listed_with_their_node_ids() {
    if skip("dot_entries_are_listed_with_their_node_ids") {
        return;
    }
    let t = TestMount::new();
    fs::create_dir_all(t.e("a/b/c")).unwrap();
    let ino = |rel: &str| fs::metadata(t.m(rel)).unwrap().ino();
    for (dir, parent) in [("a/b/c", "a/b"), ("a/b", "a"), ("a", "")] {
        let want = [
            (".".to_owned(), ino(dir), libc::DT_DIR),
            ("..".to_owned(), ino(parent), libc::DT_DIR),
        ];
        assert_eq!(dot_entries(&t.m(dir)), want, "{dir}");
    }
}

/// The `.` and `..` entries `readdir(3)` returns for `dir`: name, `d_ino`
/// and `d_type`.
fn dot_entries(dir: &Path) -> Vec<(String, u64, u8)> {
    let path = cstr(dir);
    let mut out = Vec::new();
    // SAFETY: `path` is a C string; the stream is read until its end, each
    // entry before the next call, and closed once.
    unsafe {
        let d = libc::opendir(path.as_ptr());
        assert!(
            !d.is_null(),
            "opendir {dir:?}: {}",
            std::io::Error::last_os_error()
        );
        loop {
            let e = libc::readdir(d);
            if e.is_null() {
                break;
            }
            let name = std::ffi::CStr::from_ptr((*e).d_name.as_ptr());
            let name = name.to_string_lossy().into_owned();
            if name == "." || name == ".." {
                out.push((name, (*e).d_ino, (*e).d_type));
            }
        }
        libc::closedir(d);
    }
    out.sort();
    out
}

/// A file system mounted inside the export: the server lists it without a
/// handle and refuses its LOOKUP (XDEV); the listing goes on without it
/// (it once failed whole with EXDEV).
#[test]
fn a_mount_point_inside_the_export_does_not_fail_its_listing() {
    if skip("a_mount_point_inside_the_export_does_not_fail_its_listing") {
        return;
    }
    let t = TestMount::new();
    fs::create_dir(t.e("mnt")).unwrap();
    fs::write(t.e("a"), b"a").unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "rnfs-test"])
        .arg(t.e("mnt"))
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        cannot_run("cannot mount a tmpfs here");
        return;
    }
    let listed = fs::read_dir(t.m("")).map(|d| {
        d.map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect::<Vec<_>>()
    });
    let _ = Command::new("umount").arg("-l").arg(t.e("mnt")).status();
    assert_eq!(listed.unwrap(), ["a"]);
}

/// Data written to a file that then stays open and idle reaches the server
/// by itself once it expires (`wb_expire`), as the kernel's flusher writes
/// back dirty pages: it once stayed in the mount until the next operation.
#[test]
fn an_idle_open_files_data_is_written_back_when_it_expires() {
    if skip("an_idle_open_files_data_is_written_back_when_it_expires") {
        return;
    }
    let t = TestMount::with_options("wb_expire=1");
    let data = pattern(10_000, 7);
    let mut f = File::create(t.m("idle")).unwrap();
    f.write_all(&data).unwrap();
    // Less than one WRITE: nothing is sent early.
    assert_eq!(fs::metadata(t.e("idle")).unwrap().len(), 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while fs::read(t.e("idle")).unwrap() != data {
        assert!(
            std::time::Instant::now() < deadline,
            "not written back while the file stays open"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(f);
}

/// The errno of the last failed libc call.
fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

/// A WRITE that fails in the background (here NFS3ERR_NOSPC, from a proxy)
/// reaches the writer's fsync though other descriptors of its open were
/// closed first, as Linux's errseq has it: every close(2) (a dup, a forked
/// child's exit) is a FUSE flush, which reports the error without consuming
/// it, and every open learns of it at its fsync. The first flush once took
/// it, and the writer's fsync and close returned 0 with its data lost.
#[test]
fn a_write_back_error_reaches_fsync_after_other_descriptors_close() {
    if skip("a_write_back_error_reaches_fsync_after_other_descriptors_close") {
        return;
    }
    const WRITE: u32 = 7;
    const NFS3ERR_NOSPC: u32 = 28;
    let plan = JukeboxPlan::failing(NFS3ERR_NOSPC, &[(WRITE, u32::MAX)]);
    let t = TestMount::through_proxy("", |server| jukebox_proxy(server, Arc::clone(&plan)));
    let mut f = File::create(t.m("full")).unwrap();
    // Another open of the file, from before the error.
    let other = OpenOptions::new().write(true).open(t.m("full")).unwrap();
    // Less than a write-behind chunk: nothing is sent before a flush.
    f.write_all(&[b'z'; 64 << 10]).unwrap();
    assert_eq!(plan.answered(WRITE), 0);
    let fd = f.as_raw_fd();
    // SAFETY: plain descriptor calls on a descriptor this test owns.
    let dup = unsafe { libc::dup(fd) };
    assert!(dup >= 0);
    // SAFETY: `dup` is ours and closed once.
    let closed = unsafe { libc::close(dup) };
    assert!(plan.answered(WRITE) > 0, "close(dup(fd)) wrote back");
    assert_eq!((closed, errno()), (-1, libc::ENOSPC), "close reports it");
    // SAFETY: the child only exits (closing its copy of `fd`).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: async-signal-safe, in the child.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    let err = f
        .sync_all()
        .expect_err("the writer's fsync reports the loss");
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    f.sync_all().expect("reported once to each open");
    let err = other.sync_all().expect_err("the other open's fsync too");
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    drop((f, other));
}

#[test]
fn close_to_open_sees_other_writers() {
    if skip("close_to_open_sees_other_writers") {
        return;
    }
    let t = TestMount::new();
    fs::write(t.m("f"), b"version one").unwrap();
    assert_eq!(fs::read(t.m("f")).unwrap(), b"version one");
    // Another client (here: the server's own directory) changes it.
    fs::write(t.e("f"), b"version two, longer").unwrap();
    assert_eq!(fs::read(t.m("f")).unwrap(), b"version two, longer");
    // Same size, different bytes, a different mtime.
    fs::write(t.e("f"), b"VERSION TWO, LONGER").unwrap();
    File::options()
        .write(true)
        .open(t.e("f"))
        .unwrap()
        .set_modified(UNIX_EPOCH + Duration::from_secs(1_000_000))
        .unwrap();
    assert_eq!(fs::read(t.m("f")).unwrap(), b"VERSION TWO, LONGER");
    // A new file made on the server is found by name at once.
    fs::write(t.e("new"), b"fresh").unwrap();
    assert_eq!(fs::read(t.m("new")).unwrap(), b"fresh");
    fs::remove_file(t.e("new")).unwrap();
    assert_eq!(
        fs::read(t.m("new")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

/// A file another client changes while this mount holds it open: a new
/// open revalidates it (close-to-open) and reads all of it, though every
/// open of the node shares one `NfsFile`, which once kept the size it had
/// when first opened and read the grown file short.
#[test]
fn close_to_open_sees_the_new_size_of_a_file_held_open() {
    if skip("close_to_open_sees_the_new_size_of_a_file_held_open") {
        return;
    }
    let t = TestMount::new();
    fs::write(t.m("f"), pattern(1000, 1)).unwrap();
    let mut held = File::open(t.m("f")).unwrap();
    let mut old = Vec::new();
    held.read_to_end(&mut old).unwrap();
    assert_eq!(old, pattern(1000, 1));
    // Another client (here: the server's own directory) grows it, then
    // shrinks it, while `held` keeps it open here.
    fs::write(t.e("f"), pattern(5000, 2)).unwrap();
    let grown = fs::read(t.m("f")).unwrap();
    assert_eq!(grown.len(), 5000, "a new open reads the grown file whole");
    assert_eq!(grown, pattern(5000, 2));
    fs::write(t.e("f"), pattern(300, 3)).unwrap();
    assert_eq!(fs::read(t.m("f")).unwrap(), pattern(300, 3));
    drop(held);
}

/// Close-to-open keeps the kernel's pages of a file nobody changed: reading
/// it again after a new open costs no READ (the open answers with
/// FOPEN_KEEP_CACHE). Once another client changed it, the next open drops
/// them and reads the new bytes.
#[test]
fn an_unchanged_file_is_read_again_from_the_kernels_pages() {
    if skip("an_unchanged_file_is_read_again_from_the_kernels_pages") {
        return;
    }
    const READ: u32 = 6;
    let plan = JukeboxPlan::failing(5, &[]);
    let t = TestMount::through_proxy("", |server| jukebox_proxy(server, Arc::clone(&plan)));
    fs::write(t.e("f"), pattern(1 << 20, 1)).unwrap();
    assert_eq!(fs::read(t.m("f")).unwrap(), pattern(1 << 20, 1));
    let reads = plan.seen(READ);
    assert!(reads > 0);
    assert_eq!(fs::read(t.m("f")).unwrap(), pattern(1 << 20, 1));
    assert_eq!(plan.seen(READ), reads, "an unchanged file was read again");
    // Another client (here: the server's own directory) changes it.
    fs::write(t.e("f"), pattern(1 << 20, 2)).unwrap();
    assert_eq!(fs::read(t.m("f")).unwrap(), pattern(1 << 20, 2));
    assert!(plan.seen(READ) > reads);
}

/// Another client changes a file this mount holds open and has read ahead
/// of: once the attributes time out and show the change, a read on the held
/// descriptor and a new open both see the new bytes. The open file's
/// read-ahead once outlived the change (only its own writes and the last
/// close dropped it), and the next open, comparing with attributes already
/// refreshed, let the kernel keep pages filled from it.
#[test]
fn a_change_seen_in_fresh_attributes_drops_the_read_ahead_of_a_held_file() {
    if skip("a_change_seen_in_fresh_attributes_drops_the_read_ahead_of_a_held_file") {
        return;
    }
    use std::os::unix::fs::FileExt;
    let t = TestMount::with_options("acregmin=1,acregmax=1");
    fs::write(t.m("f"), vec![b'a'; 6 << 20]).unwrap();
    let held = File::open(t.m("f")).unwrap();
    // No kernel read-ahead: the mount sees these reads, in order, and
    // reads ahead of them itself (past 3 MiB).
    // SAFETY: advice on a descriptor this test owns.
    let advised = unsafe { libc::posix_fadvise(held.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    assert_eq!(advised, 0);
    let mut buf = vec![0; 128 << 10];
    for at in (0..1 << 20).step_by(buf.len()) {
        held.read_exact_at(&mut buf, at).unwrap();
    }
    // Another client (here: the server's own directory) writes at 3 MiB.
    let other = OpenOptions::new().write(true).open(t.e("f")).unwrap();
    other.write_all_at(b"NEWDATA!", 3 << 20).unwrap();
    drop(other);
    std::thread::sleep(Duration::from_millis(1500));
    let mut got = [0; 8];
    held.read_exact_at(&mut got, 3 << 20).unwrap();
    assert_eq!(&got, b"NEWDATA!", "the held descriptor reads the new bytes");
    let reopened = File::open(t.m("f")).unwrap();
    reopened.read_exact_at(&mut got, 3 << 20).unwrap();
    assert_eq!(&got, b"NEWDATA!", "a new open reads the new bytes");
    drop((held, reopened));
}

/// Another client grows a file this mount holds open: once a lookup (a
/// `stat` by name) shows the new size, the held descriptor reads all of it.
/// A lookup once refreshed the table and the kernel but not the size of
/// the node's open file, so `stat` showed the grown size while `read`
/// returned end of file until the attributes timed out.
#[test]
fn a_lookup_that_sees_a_grown_file_lets_held_opens_read_it() {
    if skip("a_lookup_that_sees_a_grown_file_lets_held_opens_read_it") {
        return;
    }
    let t = TestMount::with_options("acregmin=1,acregmax=1");
    fs::write(t.m("f"), pattern(1000, 1)).unwrap();
    let mut held = File::open(t.m("f")).unwrap();
    let mut old = Vec::new();
    held.read_to_end(&mut old).unwrap();
    assert_eq!(old, pattern(1000, 1));
    // Another client (here: the server's own directory) grows it.
    fs::write(t.e("f"), pattern(5000, 2)).unwrap();
    // The kernel's entry expires: the next stat by name is a LOOKUP.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(fs::metadata(t.m("f")).unwrap().len(), 5000);
    held.seek(SeekFrom::Start(0)).unwrap();
    let mut grown = Vec::new();
    held.read_to_end(&mut grown).unwrap();
    assert_eq!(
        grown.len(),
        5000,
        "the held descriptor reads the grown file"
    );
    assert_eq!(grown, pattern(5000, 2));
    drop(held);
}

/// An append through this mount after another client appended lands after
/// the other client's data. The kernel (no writeback cache) appends at its
/// own size, which it does not revalidate before a write: an open for
/// appending once let it keep the size of the last `stat`, and the append
/// overwrote the other client's.
#[test]
fn an_append_lands_after_another_clients_append() {
    if skip("an_append_lands_after_another_clients_append") {
        return;
    }
    let t = TestMount::new();
    fs::write(t.m("log"), b"hello\n").unwrap();
    assert_eq!(fs::metadata(t.m("log")).unwrap().len(), 6);
    // Another client (here: the server's own directory) appends.
    let mut other = OpenOptions::new().append(true).open(t.e("log")).unwrap();
    other.write_all(b"OTHER\n").unwrap();
    drop(other);
    let mut f = OpenOptions::new().append(true).open(t.m("log")).unwrap();
    f.write_all(b"world\n").unwrap();
    drop(f);
    assert_eq!(
        String::from_utf8(fs::read(t.e("log")).unwrap()).unwrap(),
        "hello\nOTHER\nworld\n"
    );
}

#[test]
fn unlinked_open_file_stays_readable() {
    if skip("unlinked_open_file_stays_readable") {
        return;
    }
    let t = TestMount::new();
    fs::write(t.m("tmp"), b"still here").unwrap();
    let mut f = File::open(t.m("tmp")).unwrap();
    fs::remove_file(t.m("tmp")).unwrap();
    assert!(!t.m("tmp").exists());
    let mut s = String::new();
    f.read_to_string(&mut s).unwrap();
    assert_eq!(s, "still here");
    drop(f);
    // The silly-renamed file goes with the last release, which the kernel
    // sends after close(2) returns.
    wait_until_empty(&t.export);
}

/// A user's file unlinked while open goes with its last close though the
/// server squashes root: the silly-renamed name is removed as the user who
/// unlinked it. It was removed with the RELEASE request's credential, which
/// the kernel sends as root, squashed to nobody: refused, the `.rnfs*` file
/// stayed in the user's directory.
#[test]
fn a_silly_renamed_file_goes_as_its_unlinker_under_root_squash() {
    if skip_unless_root("a_silly_renamed_file_goes_as_its_unlinker_under_root_squash") {
        return;
    }
    let t = TestMount::with_squash("", rnfs_server::nfs::exports::Squash::Root);
    let home = t.e("home");
    fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(4242), Some(4242)).unwrap();
    fs::set_permissions(&home, fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=4242", "--regid=4242", "--clear-groups", "sh", "-c"])
        .arg("cd \"$0\" && echo data > f && exec 3<f && rm f && cat <&3 && exec 3<&-")
        .arg(t.m("home"))
        .output();
    let Ok(out) = out else {
        cannot_run("a_silly_renamed_file_goes_as_its_unlinker_under_root_squash: no setpriv");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"data\n", "readable after its unlink");
    // The release comes after close(2) returns.
    wait_until_empty(&home);
}

#[test]
fn parallel_writers_and_stat() {
    if skip("parallel_writers_and_stat") {
        return;
    }
    let t = TestMount::new();
    let writers: Vec<_> = (0..4u8)
        .map(|w| {
            let p = t.m(&format!("w{w}"));
            std::thread::spawn(move || {
                let mut f = File::create(&p).unwrap();
                let chunk = pattern(256 << 10, w);
                let mut last = 0;
                for _ in 0..16 {
                    f.write_all(&chunk).unwrap();
                    // The size never goes backwards while writes are in flight.
                    let size = fs::metadata(&p).unwrap().len();
                    assert!(size >= last, "size went from {last} to {size}");
                    last = size;
                }
                f.sync_all().unwrap();
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    for w in 0..4u8 {
        let got = fs::read(t.e(&format!("w{w}"))).unwrap();
        assert_eq!(got.len(), 16 * (256 << 10));
        assert!(got.chunks(256 << 10).all(|c| c == pattern(256 << 10, w)));
    }
    assert_eq!(t.handle().open_files(), 0);
}

#[test]
fn stat_of_a_file_being_written_shows_what_was_written() {
    if skip("stat_of_a_file_being_written_shows_what_was_written") {
        return;
    }
    // Several WRITEs in flight, bounded by bytes.
    let t = TestMount::with_options("wsize=65536,wb_max_outstanding_kb=192");
    let p = t.m("growing");
    let mut f = File::create(&p).unwrap();
    let chunk = pattern(100_000, 7);
    for i in 1..=12u64 {
        f.write_all(&chunk).unwrap();
        if i == 6 {
            fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        }
        let on_mount = fs::metadata(&p).unwrap();
        assert_eq!(on_mount.len(), i * 100_000);
        // The stat waited for every byte written before it: the server has
        // them, and its mtime is the one reported.
        let on_server = fs::metadata(t.e("growing")).unwrap();
        assert_eq!(on_server.len(), i * 100_000);
        assert_eq!(
            (on_mount.mtime(), on_mount.mtime_nsec()),
            (on_server.mtime(), on_server.mtime_nsec())
        );
        if i >= 6 {
            assert_eq!(
                on_mount.mode() & 0o777,
                0o640,
                "a chmod while writing shows"
            );
        }
    }
    drop(f);
    assert_eq!(fs::read(t.e("growing")).unwrap(), chunk.repeat(12));
}

#[test]
fn link_count_of_a_file_being_written_follows_its_links_and_unlinks() {
    if skip("link_count_of_a_file_being_written_follows_its_links_and_unlinks") {
        return;
    }
    // Several WRITEs in flight around each link and unlink. Unlinking a name
    // of the open file that is not its last link removes it (no silly
    // rename), as POSIX and the Linux client have it.
    let t = TestMount::with_options("wsize=65536,wb_max_outstanding_kb=192");
    let p = t.m("linked");
    let mut f = File::create(&p).unwrap();
    let chunk = pattern(100_000, 3);
    for i in 0..5 {
        f.write_all(&chunk).unwrap();
        fs::hard_link(&p, t.m(&format!("link{i}"))).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().nlink(), i + 2, "after link {i}");
    }
    for i in 0..5 {
        fs::remove_file(t.m(&format!("link{i}"))).unwrap();
        f.write_all(&chunk).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().nlink(), 5 - i, "after unlink {i}");
    }
}

#[test]
fn unmount_writes_back_and_leaves_nothing_mounted() {
    if skip("unmount_writes_back_and_leaves_nothing_mounted") {
        return;
    }
    let mut t = TestMount::with_options("wb_max_outstanding=4");
    assert!(rnfs_fuse::is_fuse_mounted(&t.mnt));
    fs::write(t.m("kept"), b"kept").unwrap();
    t.unmount();
    assert_eq!(fs::read(t.e("kept")).unwrap(), b"kept");
    assert!(fs::read_dir(&t.mnt).unwrap().next().is_none());

    // Busy (a file open, data not yet closed): detached, written back.
    let mut t = TestMount::new();
    let mut f = File::create(t.m("open")).unwrap();
    f.write_all(b"written before unmount").unwrap();
    let u = t.handle().unmounter();
    assert!(matches!(
        u.unmount().unwrap(),
        rnfs_fuse::Unmounted::Detached { .. }
    ));
    assert!(!rnfs_fuse::is_fuse_mounted(&t.mnt));
    t.handle.take().unwrap().join().unwrap();
    assert_eq!(fs::read(t.e("open")).unwrap(), b"written before unmount");
    drop(f);
}

#[test]
fn write_behind_writes_in_chunks_of_at_most_256_kib_by_default() {
    if skip("write_behind_writes_in_chunks_of_at_most_256_kib_by_default") {
        return;
    }
    // st_blksize is the mount's WRITE size; the test server prefers 1 MiB.
    let blksize = |options: &str| {
        let t = TestMount::with_options(options);
        fs::write(t.m("f"), b"x").unwrap();
        fs::metadata(t.m("f")).unwrap().blksize()
    };
    assert_eq!(blksize(""), 256 << 10);
    assert_eq!(blksize("wsize=1048576"), 1 << 20);
    assert_eq!(blksize("wb_max_outstanding=0"), 1 << 20);
    assert_eq!(blksize("wsize=65536"), 64 << 10);
}

#[test]
fn giving_up_on_a_server_that_is_gone_ends_a_hard_mount() {
    if skip("giving_up_on_a_server_that_is_gone_ends_a_hard_mount") {
        return;
    }
    let mut t = TestMount::with_options("hard");
    let mut f = File::create(t.m("f")).unwrap();
    // Should give_up not work, the mount waits for ever: a failing assert
    // below must abort it, or closing `f` would hang the test.
    let _abort = AbortOnPanic::new(&t.mnt);
    t.stop_server();
    // Dirty data the server never gets; the open file makes the mount busy.
    f.write_all(b"lost").unwrap();
    let handle = t.handle.take().unwrap();
    let unmounter = handle.unmounter();
    let (done, finished) = std::sync::mpsc::channel();
    let first = unmounter.clone();
    std::thread::spawn(move || {
        let unmounted = first.unmount();
        let joined = handle.join();
        let _ = done.send((unmounted.is_ok(), joined.is_ok()));
    });
    // Busy: the unmount writes back first, and a hard mount waits for ever.
    assert!(finished.recv_timeout(Duration::from_millis(500)).is_err());
    unmounter.give_up();
    let (unmounted, joined) = finished
        .recv_timeout(Duration::from_secs(20))
        .expect("the mount did not end 20 s after give_up");
    assert!(unmounted && joined);
    assert!(!rnfs_fuse::is_fuse_mounted(&t.mnt));
    // The descriptor outlived its mount: closing it reports nothing useful,
    // but must not hang.
    drop(f);
}

/// fstab's generic options: `noexec` is applied to the mount (programs on it
/// cannot run), and the options an fstab line usually carries are accepted.
#[test]
fn noexec_and_fstab_options() {
    if skip("noexec_and_fstab_options") {
        return;
    }
    let script = b"#!/bin/sh\necho ran\n";
    let t = TestMount::with_options("defaults,noatime,nofail,_netdev,x-systemd.automount,noexec");
    fs::write(t.e("tool"), script).unwrap();
    fs::set_permissions(t.e("tool"), fs::Permissions::from_mode(0o755)).unwrap();
    let e = Command::new(t.m("tool")).output().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mnt = t.mnt.to_str().unwrap();
    let line = mountinfo
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(mnt))
        .unwrap();
    let options: Vec<&str> = line.split(' ').nth(5).unwrap().split(',').collect();
    for want in ["noexec", "nosuid", "nodev"] {
        assert!(options.contains(&want), "{want} missing: {line}");
    }

    let t = TestMount::new();
    fs::write(t.e("tool"), script).unwrap();
    fs::set_permissions(t.e("tool"), fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(t.m("tool")).output().unwrap();
    assert_eq!(out.stdout, b"ran\n");
}

#[test]
fn read_only_and_noac_mounts() {
    if skip("read_only_and_noac_mounts") {
        return;
    }
    let t = TestMount::with_options("ro");
    fs::write(t.e("r"), b"r").unwrap();
    assert_eq!(fs::read(t.m("r")).unwrap(), b"r");
    let e = fs::write(t.m("w"), b"w").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));

    let t = TestMount::with_options("noac");
    fs::write(t.m("n"), b"1").unwrap();
    assert_eq!(fs::metadata(t.m("n")).unwrap().len(), 1);
    fs::write(t.e("n"), b"22").unwrap();
    // No attribute cache: the new size shows at once, without an open.
    assert_eq!(fs::metadata(t.m("n")).unwrap().len(), 2);
}

#[test]
fn permissions_are_the_servers() {
    if skip_unless_root("permissions_are_the_servers") {
        return;
    }
    let t = TestMount::new();
    fs::write(t.m("secret"), b"s").unwrap();
    fs::set_permissions(t.m("secret"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::create_dir(t.m("pub")).unwrap();
    fs::set_permissions(t.m("pub"), fs::Permissions::from_mode(0o777)).unwrap();
    // As uid/gid 4242 (a child process, so this process keeps its ids).
    let out = Command::new("setpriv")
        .args(["--reuid=4242", "--regid=4242", "--clear-groups", "sh", "-c"])
        .arg(format!(
            "cat {s} 2>/dev/null && echo READ; echo hi > {p}/mine && stat -c %u {p}/mine",
            s = t.m("secret").display(),
            p = t.m("pub").display()
        ))
        .output();
    let Ok(out) = out else {
        cannot_run("permissions_are_the_servers: no setpriv");
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("READ"), "{stdout}");
    assert_eq!(stdout.trim(), "4242");
    assert_eq!(fs::metadata(t.e("pub/mine")).unwrap().uid(), 4242);
}

#[test]
fn a_truncate_is_its_callers_while_another_user_holds_the_file_open() {
    if skip_unless_root("a_truncate_is_its_callers_while_another_user_holds_the_file_open") {
        return;
    }
    let t = TestMount::new();
    // Root holds the file open with data not yet written back: every open
    // of the node shares one file, which writes as root.
    let mut f = File::create(t.m("kept")).unwrap();
    f.write_all(b"root's data").unwrap();
    fs::set_permissions(t.m("kept"), fs::Permissions::from_mode(0o644)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=4242", "--regid=4242", "--clear-groups", "sh", "-c"])
        .arg(format!(
            "perl -e 'print(truncate($ARGV[0], 0) ? \"TRUNCATED\" : \"$!\")' {k}",
            k = t.m("kept").display()
        ))
        .output();
    let Ok(out) = out else {
        cannot_run("a_truncate_is_its_callers_while_another_user_holds_the_file_open: no setpriv");
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    // truncate(2) by path: no open, so only the SETATTR can refuse it.
    assert_eq!(
        stdout.trim(),
        "Permission denied",
        "uid 4242 may not truncate root's 0644 file"
    );
    drop(f);
    assert_eq!(fs::read(t.e("kept")).unwrap(), b"root's data");
    // Root itself still may.
    OpenOptions::new()
        .write(true)
        .open(t.m("kept"))
        .unwrap()
        .set_len(4)
        .unwrap();
    assert_eq!(fs::read(t.e("kept")).unwrap(), b"root");
}

/// A file created read-only (0444) stays writable through the descriptor
/// that created it, ftruncate included, as on a local file system and on
/// knfsd (its owner override): tar, cp -p and git do this.
#[test]
fn the_owner_writes_and_ftruncates_a_file_it_created_read_only() {
    if skip_unless_root("the_owner_writes_and_ftruncates_a_file_it_created_read_only") {
        return;
    }
    let t = TestMount::new();
    fs::create_dir(t.m("pub")).unwrap();
    fs::set_permissions(t.m("pub"), fs::Permissions::from_mode(0o777)).unwrap();
    let out = Command::new("setpriv")
        .args([
            "--reuid=4242",
            "--regid=4242",
            "--clear-groups",
            "perl",
            "-e",
        ])
        .arg(
            "use Fcntl; use IO::Handle; \
             sysopen(my $f, $ARGV[0], O_CREAT|O_WRONLY|O_EXCL, 0444) or die \"open: $!\"; \
             syswrite($f, \"0123456789\") == 10 or die \"write: $!\"; \
             $f->sync or die \"fsync: $!\"; \
             truncate($f, 4) or die \"ftruncate: $!\"; \
             syswrite($f, \"AB\") == 2 or die \"write after: $!\"; \
             close($f) or die \"close: $!\"; print \"DONE\"",
        )
        .arg(t.m("pub/ro"))
        .output();
    let Ok(out) = out else {
        cannot_run("the_owner_writes_and_ftruncates_a_file_it_created_read_only: no setpriv");
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "DONE", "{stderr}");
    // The write after the truncate went at the old offset, 10: a hole between.
    assert_eq!(fs::read(t.e("pub/ro")).unwrap(), b"0123\0\0\0\0\0\0AB");
    let meta = fs::metadata(t.e("pub/ro")).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (4242, 0o444));
}

#[test]
fn a_writer_writes_as_itself_while_a_reader_holds_the_file_open() {
    if skip_unless_root("a_writer_writes_as_itself_while_a_reader_holds_the_file_open") {
        return;
    }
    let t = TestMount::new();
    fs::write(t.e("owned"), b"old\n").unwrap();
    rustix::fs::chown(
        t.e("owned").as_path(),
        Some(rustix::process::Uid::from_raw(4242)),
        Some(rustix::process::Gid::from_raw(4242)),
    )
    .unwrap();
    fs::set_permissions(t.e("owned"), fs::Permissions::from_mode(0o644)).unwrap();
    // uid 4343 opens the file first, read-only, and keeps it open while its
    // owner, uid 4242, writes it: the owner's WRITEs must go out as 4242.
    let f = t.m("owned").display().to_string();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "setpriv --reuid=4343 --regid=4343 --clear-groups sh -c 'exec 3< {f}; sleep 3' & \
             sleep 1; \
             setpriv --reuid=4242 --regid=4242 --clear-groups sh -c 'echo new > {f}' && echo WROTE; \
             wait"
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("setpriv: not found") {
        cannot_run("a_writer_writes_as_itself_while_a_reader_holds_the_file_open: no setpriv");
        return;
    }
    assert_eq!(stdout.trim(), "WROTE", "{stderr}");
    assert_eq!(fs::read(t.e("owned")).unwrap(), b"new\n");
}

#[test]
fn cp_tar_and_git_run_on_the_mount() {
    if skip("cp_tar_and_git_run_on_the_mount") {
        return;
    }
    let t = TestMount::new();
    let src = tempfile::tempdir().unwrap();
    let s = src.path().display().to_string();
    // A small tree: nested directories, a big file, a symlink, a hard link,
    // odd modes and times.
    sh(&format!(
        "mkdir -p {s}/tree/a/b/c {s}/tree/empty && \
         head -c 3000000 /dev/urandom > {s}/tree/a/big && echo deep > {s}/tree/a/b/c/deep && \
         for i in $(seq 1 50); do echo $i > {s}/tree/a/b/f$i; done && \
         ln -s ../big {s}/tree/a/b/link && ln {s}/tree/a/b/f1 {s}/tree/a/hard && \
         chmod 0751 {s}/tree/a/b && chmod 0600 {s}/tree/a/b/f2 && \
         touch -d '2001-02-03 04:05:06' {s}/tree/a/b/f3"
    ));
    let m = t.mnt.display().to_string();
    // cp -a in, compare, and out again.
    sh(&format!("cp -a {s}/tree {m}/cp && diff -r {s}/tree {m}/cp"));
    sh(&format!(
        "cp -a {m}/cp {s}/back && diff -r {s}/tree {s}/back && \
         test \"$(stat -c %a:%Y {s}/tree/a/b/f3)\" = \"$(stat -c %a:%Y {s}/back/a/b/f3)\" && \
         test \"$(stat -c %a {m}/cp/a/b)\" = 751 && \
         test \"$(stat -c %i {m}/cp/a/hard)\" = \"$(stat -c %i {m}/cp/a/b/f1)\""
    ));
    // tar round trip.
    sh(&format!(
        "mkdir {m}/tarred && tar -C {s} -cf - tree | tar -C {m}/tarred -xf - && \
         diff -r {s}/tree {m}/tarred/tree && \
         tar -C {m} -cf {s}/out.tar tarred && mkdir {s}/untar && tar -C {s}/untar -xf {s}/out.tar && \
         diff -r {s}/tree {s}/untar/tarred/tree"
    ));
    // git clone of a local repository, then fsck and a clean status.
    sh(&format!(
        "cd {s} && git init -q repo && cp -r tree/a repo/ && cd repo && git add . && \
         git -c user.email=t@t -c user.name=t commit -qm one && \
         echo more >> a/b/f4 && git -c user.email=t@t -c user.name=t commit -qam two && git gc -q"
    ));
    sh(&format!(
        "git clone -q {s}/repo {m}/clone && cd {m}/clone && git fsck --full --strict && \
         test -z \"$(git status --porcelain)\" && git log --oneline | wc -l | grep -qx 2 && \
         diff -r {s}/repo/a {m}/clone/a"
    ));
    // rm -rf through the mount empties it.
    sh(&format!("rm -rf {m}/cp {m}/tarred {m}/clone"));
    assert_eq!(fs::read_dir(&t.export).unwrap().count(), 0);
}

/// Runs fio with `args` and its JSON report; returns each job's name, error,
/// and bytes written and read.
fn fio(args: &str) -> Vec<(String, i64, u64, u64)> {
    let out = sh(&format!("fio --output-format=json {args}"));
    // fio may print notes before the JSON.
    let json = &out[out.find('{').unwrap_or(0)..];
    let report: serde_json::Value = serde_json::from_str(json).unwrap();
    report["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["jobname"].as_str().unwrap().to_owned(),
                j["error"].as_i64().unwrap(),
                j["write"]["io_bytes"].as_u64().unwrap(),
                j["read"]["io_bytes"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// fio checks every block it wrote with its own checksums: sequential and
/// random writers in parallel (two of each, a file each; the random ones
/// fsync every 64 writes), each reading its file back to verify it once
/// written; then, from a second invocation, the same files verified again
/// after they were closed, so the data comes back from the server.
#[test]
fn fio_verifies_its_writes_on_the_mount() {
    if skip("fio_verifies_its_writes_on_the_mount") {
        return;
    }
    if Command::new("fio").arg("--version").output().is_err() {
        cannot_run(
            "fio_verifies_its_writes_on_the_mount: fio is not installed (ci/deps.sh installs it)",
        );
        return;
    }
    let t = TestMount::new();
    const SIZE: u64 = 4 << 20;
    // Options before the first --name are every job's; after it, that job's.
    let global = format!(
        "--directory={} --ioengine=psync --size={SIZE} --verify=crc32c --verify_fatal=1 \
         --verify_state_save=0",
        t.mnt.display()
    );
    let jobs = "--name=seq --rw=write --bs=64k --numjobs=2 \
                --name=rand --rw=randwrite --bs=4k --numjobs=2 --fsync=64";
    let written = fio(&format!("{global} {jobs}"));
    assert_eq!(written.len(), 4, "{written:?}");
    for (name, error, wrote, read) in &written {
        assert_eq!(*error, 0, "{name}: {written:?}");
        assert_eq!(*wrote, SIZE, "{name} wrote: {written:?}");
        assert_eq!(*read, SIZE, "{name} verified: {written:?}");
    }
    for job in ["seq", "rand"] {
        for n in 0..2 {
            let len = fs::metadata(t.e(&format!("{job}.{n}.0"))).unwrap().len();
            assert_eq!(len, SIZE, "{job}.{n}.0 on the server");
        }
    }
    let verified = fio(&format!("{global} --verify_only=1 {jobs}"));
    assert_eq!(verified.len(), 4, "{verified:?}");
    // (fio counts the writes it only replays to know what to expect.)
    for (name, error, _, read) in &verified {
        assert_eq!(*error, 0, "{name}: {verified:?}");
        assert_eq!(*read, SIZE, "{name} verified again: {verified:?}");
    }
}

#[test]
fn mount_of_an_unreachable_server_fails() {
    let mut o = rnfs_fuse::MountOptions::default();
    assert!(o.apply("hard,nconnect=2,wb_max_outstanding=0").is_ok());
    if skip("mount_of_an_unreachable_server_fails") {
        return;
    }
    let mnt = tempfile::tempdir().unwrap();
    let url = rnfs_client::NfsUrl::parse("nfs://127.0.0.1:1/export").unwrap();
    assert!(rnfs_fuse::spawn(&url, mnt.path(), o).is_err());
    assert!(!rnfs_fuse::is_fuse_mounted(
        &mnt.path().canonicalize().unwrap()
    ));
}

#[test]
fn mode_bits_of_created_files() {
    if skip("mode_bits_of_created_files") {
        return;
    }
    let t = TestMount::new();
    // git's pattern: create 0444, then write through the descriptor.
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(t.m("ro"))
        .unwrap();
    f.write_all(b"written to a 0444 file").unwrap();
    drop(f);
    assert_eq!(fs::read(t.e("ro")).unwrap(), b"written to a 0444 file");
    assert_eq!(fs::metadata(t.m("ro")).unwrap().mode() & 0o777, 0o444);
}

/// Waits up to 10 s for `dir` to be empty (a silly-renamed file goes with a
/// RELEASE the kernel sends after close(2) returns).
fn wait_until_empty(dir: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<_> = fs::read_dir(dir).unwrap().collect();
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left behind: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

//! Per-thread file-system identity, so permission checks are the kernel's own.
//!
//! When the server runs as root it switches the calling service thread's fsuid,
//! fsgid and supplementary groups to the caller's before each call, as knfsd does.
//! All three are per-thread on Linux at the system-call level; the C library's
//! `setgroups` wrapper, however, broadcasts to every thread (POSIX semantics), so
//! the raw system call is used. The current identity is cached per thread, so a run
//! of calls from one user costs no system call at all.
//!
//! Switching fsuid away from 0 also drops the file-system capabilities
//! (`CAP_DAC_READ_SEARCH` among them, which `open_by_handle_at` needs).
//! [`as_fs_root`] runs a closure with fsuid and fsgid 0 and restores the caller's
//! identity afterwards; backends use it for handle resolution only, never for the
//! operation itself.

use std::cell::Cell;

use crate::Cred;

thread_local! {
    /// The identity this thread currently has, if it was ever switched (and
    /// its groups fit the record).
    static CURRENT: Cell<Option<Applied>> = const { Cell::new(None) };
}

/// Most supplementary groups a thread's record of its identity holds. AUTH_SYS
/// carries at most 16; an identity with more is applied on every call.
const RECORDED_GROUPS: usize = 16;

/// A thread's record of the identity it has, inline, with no heap
/// allocation to reach: it is compared with the caller's on every call
/// (the comparison with a `Cred` record was 3% of a 4 KiB WRITE's user cycles
/// in `perf`).
#[derive(Debug, Clone, Copy)]
struct Applied {
    uid: u32,
    gid: u32,
    groups_len: usize,
    groups: [u32; RECORDED_GROUPS],
}

impl Applied {
    /// The record of `cred`; `None` if its groups do not fit.
    fn of(cred: &Cred) -> Option<Self> {
        let mut groups = [0; RECORDED_GROUPS];
        groups
            .get_mut(..cred.groups.len())?
            .copy_from_slice(&cred.groups);
        Some(Self {
            uid: cred.uid,
            gid: cred.gid,
            groups_len: cred.groups.len(),
            groups,
        })
    }

    fn is(&self, cred: &Cred) -> bool {
        // A plain loop over at most 16 ids: slice equality would call
        // `memcmp`, which for a few words costs more than the comparison (3%
        // of a GETATTR's user cycles in `perf`).
        self.uid == cred.uid
            && self.gid == cred.gid
            && self.groups_len == cred.groups.len()
            && self.groups.iter().zip(&cred.groups).all(|(a, b)| a == b)
    }
}

/// The identity could not be applied. The call must not run: it would run with the
/// wrong permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cannot switch the thread's identity to uid {uid} gid {gid}: errno {errno}")]
pub struct IdentityError {
    /// Requested uid.
    pub uid: u32,
    /// Requested gid.
    pub gid: u32,
    /// The failing system call's errno.
    pub errno: i32,
}

/// Whether this process can switch identities (effective uid 0).
pub fn can_switch() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn set_fsuid(uid: u32) -> bool {
    // SAFETY: setfsuid only changes this thread's credentials. It returns the
    // previous value and reports no error, so the effect is read back with the
    // invalid id -1, which changes nothing.
    unsafe {
        libc::setfsuid(uid);
        libc::setfsuid(u32::MAX) as u32 == uid
    }
}

fn set_fsgid(gid: u32) -> bool {
    // SAFETY: as `set_fsuid`.
    unsafe {
        libc::setfsgid(gid);
        libc::setfsgid(u32::MAX) as u32 == gid
    }
}

fn set_groups(groups: &[u32]) -> Result<(), i32> {
    // SAFETY: the raw system call (not the libc wrapper, which would change every
    // thread) reads `groups.len()` gids from a live slice; gid_t is u32 on Linux.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_setgroups,
            groups.len() as libc::size_t,
            groups.as_ptr(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EPERM))
    }
}

/// `CAP_SYS_RESOURCE`: lets writes use a file system's reserved blocks
/// (ext4 keeps 5% for root) and go past disk quotas.
const CAP_SYS_RESOURCE: u32 = 24;

/// Raises (`keep`, if permitted) or drops capability `cap` (below 32) in
/// this thread's effective set.
fn set_effective(cap: u32, keep: bool) -> Result<(), i32> {
    /// `struct __user_cap_header_struct`.
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    /// `struct __user_cap_data_struct`.
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EPERM)
    };
    // pid 0: the calling thread (capabilities are per thread on Linux).
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: version 3 makes capget write two `Data` records, which the
    // live array holds; both structs have the kernel's layout.
    if unsafe { libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) } != 0 {
        return Err(errno());
    }
    let bit = 1u32 << cap;
    let effective = if keep {
        data[0].effective | (data[0].permitted & bit)
    } else {
        data[0].effective & !bit
    };
    if effective == data[0].effective {
        return Ok(());
    }
    data[0].effective = effective;
    // SAFETY: as above; capset reads the two records and changes only this
    // thread's effective set, within its permitted set.
    if unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) } != 0 {
        return Err(errno());
    }
    Ok(())
}

/// Applies `cred`; `was_root`: whether the identity this replaces was
/// root's (`None`: unknown), to skip the capability calls when that does
/// not change.
fn apply(cred: &Cred, was_root: Option<bool>) -> Result<(), IdentityError> {
    let fail = |errno| IdentityError {
        uid: cred.uid,
        gid: cred.gid,
        errno,
    };
    // Groups and gid first: once fsuid is not 0, CAP_SETGID is still held
    // (setgroups checks the effective, not the fs, capabilities), but keeping this
    // order mirrors knfsd and leaves the uid switch last.
    set_groups(&cred.groups).map_err(fail)?;
    if !set_fsgid(cred.gid) {
        return Err(fail(libc::EPERM));
    }
    if !set_fsuid(cred.uid) {
        return Err(fail(libc::EPERM));
    }
    let root = cred.uid == 0;
    // knfsd drops CAP_SYS_RESOURCE with the file-system capabilities for
    // every caller but root (`CAP_NFSD_SET`); `setfsuid` drops only the
    // latter, so a client could otherwise fill the blocks reserved for root
    // and ignore its quota.
    if was_root != Some(root) {
        set_effective(CAP_SYS_RESOURCE, root).map_err(fail)?;
    }
    Ok(())
}

/// Makes the calling thread's file-system identity `cred` (no system call if it
/// already is). Only meaningful when [`can_switch`]; otherwise an error for any
/// identity other than the process's own.
pub fn switch_to(cred: &Cred) -> Result<(), IdentityError> {
    CURRENT.with(|current| {
        let previous = current.get();
        if previous.is_some_and(|applied| applied.is(cred)) {
            return Ok(());
        }
        // Forget the cached identity first: if `apply` fails half-way the thread's
        // real state is unknown and the next call must apply everything again.
        current.set(None);
        apply(cred, previous.map(|p| p.uid == 0))?;
        current.set(Applied::of(cred));
        Ok(())
    })
}

/// The calling thread's fsuid: from the record [`switch_to`] keeps (no system
/// call), else read from the kernel.
pub fn fs_uid() -> u32 {
    let known = CURRENT.with(|current| current.get().map(|c| c.uid));
    known.unwrap_or_else(|| {
        // SAFETY: setfsuid with the invalid id -1 changes nothing and returns
        // the current value.
        unsafe { libc::setfsuid(u32::MAX) as u32 }
    })
}

/// Runs `f` with fsuid and fsgid 0 (the file-system capabilities back), then
/// restores the thread's previous fsuid and fsgid, even if `f` panics. A thread
/// whose identity [`switch_to`] set trusts that record (no system call at all if
/// it is root's); otherwise it reads the thread's real ids, so a thread that
/// inherited a switched identity from its creator is handled too.
pub fn as_fs_root<T>(f: impl FnOnce() -> T) -> T {
    let known = CURRENT.with(|current| current.get().map(|c| (c.uid, c.gid)));
    let (uid, gid) = known.unwrap_or_else(|| {
        // SAFETY: setfsuid/setfsgid with the invalid id -1 change nothing and
        // return the current value.
        unsafe {
            (
                libc::setfsuid(u32::MAX) as u32,
                libc::setfsgid(u32::MAX) as u32,
            )
        }
    });
    if uid == 0 && gid == 0 {
        return f();
    }
    /// Puts the previous ids back: a thread left with fsuid 0 would run later
    /// calls of a cached user identity as root.
    struct Restore(libc::uid_t, libc::gid_t);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: only this thread's credentials change.
            unsafe {
                libc::setfsgid(self.1);
                libc::setfsuid(self.0);
            }
        }
    }
    let _restore = Restore(uid, gid);
    // Raising fsuid to 0 cannot fail for a process whose effective uid is 0
    // (the only kind that switches identities).
    // SAFETY: only this thread's credentials change.
    unsafe {
        libc::setfsgid(0);
        libc::setfsuid(0);
    }
    f()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use crate::cannot_run::cannot_run;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn switching_changes_permission_checks_on_this_thread_only() {
        if !can_switch() {
            cannot_run("not root");
            return;
        }
        let dir = std::env::temp_dir().join(format!("rnfs-ident-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let secret = dir.join("secret");
        std::fs::write(&secret, b"x").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();

        let s2 = secret.clone();
        std::thread::spawn(move || {
            let user = Cred {
                uid: 4242,
                gid: 4242,
                groups: vec![4243],
            };
            switch_to(&user).unwrap();
            let e = std::fs::read(&s2).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
            // Back to root on this thread.
            as_fs_root(|| std::fs::read(&s2).unwrap());
            assert!(
                std::fs::read(&s2).is_err(),
                "identity restored after as_fs_root"
            );
            switch_to(&Cred::root()).unwrap();
            std::fs::read(&s2).unwrap();
        })
        .join()
        .unwrap();
        // The other thread's switch never affected this one.
        std::fs::read(&secret).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Whether this thread's effective set holds capability `cap`.
    fn has_effective(cap: u32) -> bool {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let eff = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .unwrap();
        u64::from_str_radix(eff.trim(), 16).unwrap() & (1 << cap) != 0
    }

    fn has_sys_resource() -> bool {
        has_effective(CAP_SYS_RESOURCE)
    }

    /// `set_effective` drops and raises a capability of this thread only
    /// (tried on CAP_NET_BIND_SERVICE, which root here holds even where
    /// CAP_SYS_RESOURCE is withheld, as in some containers).
    #[test]
    fn effective_capabilities_change_per_thread() {
        const CAP_NET_BIND_SERVICE: u32 = 10;
        if !has_effective(CAP_NET_BIND_SERVICE) {
            cannot_run("no CAP_NET_BIND_SERVICE");
            return;
        }
        std::thread::spawn(|| {
            set_effective(CAP_NET_BIND_SERVICE, false).unwrap();
            assert!(!has_effective(CAP_NET_BIND_SERVICE));
            set_effective(CAP_NET_BIND_SERVICE, true).unwrap();
            assert!(has_effective(CAP_NET_BIND_SERVICE));
            set_effective(CAP_NET_BIND_SERVICE, false).unwrap();
        })
        .join()
        .unwrap();
        assert!(has_effective(CAP_NET_BIND_SERVICE));
    }

    /// Set for the copy of the test binary that
    /// [`rerun_in_a_user_namespace`] starts.
    const IN_USERNS: &str = "RNFS_IDENTITY_TEST_IN_USERNS";

    /// Runs test `name` (of this module) again in a child process that is root
    /// of a new user namespace, with ids 0-65535 mapped to the same ones outside.
    /// Root there holds every capability, CAP_SYS_RESOURCE included, even where
    /// this process's bounding set lacks it (as in many containers). `unshare -U`
    /// makes the namespace; the child waits (`read`) until this process, root
    /// outside, has written its id maps, and only then execs the test binary, so
    /// that the exec runs as a mapped root and keeps the full capability set.
    fn rerun_in_a_user_namespace(name: &str) {
        use std::io::Write;
        use std::process::{Command, Stdio};
        use std::time::{Duration, Instant};
        let test = format!("{}::{name}", module_path!().split_once("::").unwrap().1);
        let spawned = Command::new("unshare")
            .args(["-U", "sh", "-c", r#"read -r _ && exec "$0" "$@""#])
            .arg(std::env::current_exe().unwrap())
            .args([&test, "--exact", "--nocapture", "--test-threads=1"])
            .env(IN_USERNS, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => return cannot_run(&format!("no CAP_SYS_RESOURCE, and no unshare(1): {e}")),
        };
        let pid = child.id();
        let user_ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/user")).ok();
        let ours = user_ns("self");
        let start = Instant::now();
        while user_ns(&pid.to_string()) == ours
            && child.try_wait().unwrap().is_none()
            && start.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mapped = user_ns(&pid.to_string()).is_some_and(|ns| Some(ns) != ours)
            && ["uid_map", "gid_map"]
                .iter()
                .all(|map| std::fs::write(format!("/proc/{pid}/{map}"), "0 0 65536\n").is_ok());
        if !mapped {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            return cannot_run(&format!(
                "no CAP_SYS_RESOURCE, and no user namespace to get it in: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains(IN_USERNS) && stdout.contains(" 1 passed"),
            "{test} in a user namespace: {}\n{stdout}\n{stderr}",
            out.status
        );
    }

    /// Where CAP_SYS_RESOURCE is withheld (CI's container), this runs in a user
    /// namespace rather than being skipped.
    #[test]
    fn callers_other_than_root_lose_cap_sys_resource_as_on_knfsd() {
        if !can_switch() {
            cannot_run("not root");
            return;
        }
        let in_userns = std::env::var_os(IN_USERNS).is_some();
        if !has_sys_resource() {
            assert!(!in_userns, "no CAP_SYS_RESOURCE even in a user namespace");
            return rerun_in_a_user_namespace(
                "callers_other_than_root_lose_cap_sys_resource_as_on_knfsd",
            );
        }
        std::thread::spawn(|| {
            let user = Cred {
                uid: 4242,
                gid: 4242,
                groups: vec![],
            };
            switch_to(&user).unwrap();
            assert!(!has_sys_resource());
            let other = Cred {
                uid: 4343,
                ..user.clone()
            };
            switch_to(&other).unwrap();
            assert!(!has_sys_resource());
            switch_to(&Cred::root()).unwrap();
            assert!(has_sys_resource());
            switch_to(&user).unwrap();
            assert!(!has_sys_resource());
        })
        .join()
        .unwrap();
        // Other threads keep it.
        assert!(has_sys_resource());
        if in_userns {
            println!("{IN_USERNS}: ran with CAP_SYS_RESOURCE");
        }
    }

    #[test]
    fn a_change_of_groups_alone_is_applied() {
        if !can_switch() {
            cannot_run("not root");
            return;
        }
        let dir = std::env::temp_dir().join(format!("rnfs-ident-groups-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("group-only");
        std::fs::write(&file, b"x").unwrap();
        // Readable by group 5150 only.
        std::os::unix::fs::chown(&file, Some(0), Some(5150)).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o040)).unwrap();
        let f2 = file.clone();
        std::thread::spawn(move || {
            let with = |groups: Vec<u32>| Cred {
                uid: 4242,
                gid: 4242,
                groups,
            };
            let readable = |cred: &Cred| {
                switch_to(cred).unwrap();
                std::fs::read(&f2).is_ok()
            };
            // Same uid and gid each time: only the groups tell them apart.
            assert!(!readable(&with(vec![4243])));
            assert!(readable(&with(vec![4243, 5150])));
            assert!(!readable(&with(vec![5151])));
            assert!(readable(&with(vec![5150])));
            // More groups than the thread's record holds: applied every time.
            let many: Vec<u32> = (6000..6000 + RECORDED_GROUPS as u32 + 4).collect();
            assert!(!readable(&with(many.clone())));
            let mut many_with = many.clone();
            many_with.push(5150);
            assert!(readable(&with(many_with)));
            assert!(!readable(&with(many)));
            switch_to(&Cred::root()).unwrap();
        })
        .join()
        .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn as_fs_root_restores_an_identity_it_has_no_record_of() {
        if !can_switch() {
            cannot_run("not root");
            return;
        }
        std::thread::spawn(|| {
            // Switched behind the module's back, as a thread created by a
            // switched thread starts: no record in CURRENT.
            // SAFETY: only this thread's credentials change.
            unsafe {
                libc::setfsgid(4242);
                libc::setfsuid(4242);
            }
            let inside = as_fs_root(|| {
                // SAFETY: -1 changes nothing and returns the current value.
                unsafe { (libc::setfsuid(u32::MAX), libc::setfsgid(u32::MAX)) }
            });
            assert_eq!(inside, (0, 0));
            // SAFETY: as above.
            let after = unsafe { (libc::setfsuid(u32::MAX), libc::setfsgid(u32::MAX)) };
            assert_eq!(after, (4242, 4242));
        })
        .join()
        .unwrap();
    }
}

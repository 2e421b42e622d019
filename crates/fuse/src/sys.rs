//! Mount-table helpers: unmounting, finding a mount's FUSE connection, and
//! aborting that connection through `fusectl`.

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::mount::{MountFlags, UnmountFlags};

const FUSECTL: &str = "/sys/fs/fuse/connections";

/// The generic mount flags asked for (`ro`, `noexec`, `suid`, `dev`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct VfsFlags {
    pub(crate) read_only: bool,
    pub(crate) exec: bool,
    pub(crate) suid: bool,
    pub(crate) dev: bool,
}

/// Mounts a FUSE file system of type `fuse.rnfs` on `mountpoint` with
/// mount(2) (root only) and returns the `/dev/fuse` descriptor that serves
/// it. `source` is what the mount table shows as the device.
pub(crate) fn mount_fuse(
    mountpoint: &Path,
    source: &str,
    vfs: VfsFlags,
    allow_other: bool,
) -> io::Result<OwnedFd> {
    let dev = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")?;
    let rootmode = std::fs::metadata(mountpoint)?.mode() & libc::S_IFMT;
    let mut data = format!(
        "fd={},rootmode={rootmode:o},user_id={},group_id={}",
        dev.as_raw_fd(),
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    if allow_other {
        data.push_str(",allow_other");
    }
    let mut flags = MountFlags::empty();
    for (set, flag) in [
        (vfs.read_only, MountFlags::RDONLY),
        (!vfs.exec, MountFlags::NOEXEC),
        (!vfs.suid, MountFlags::NOSUID),
        (!vfs.dev, MountFlags::NODEV),
    ] {
        if set {
            flags |= flag;
        }
    }
    let data = CString::new(data).map_err(io::Error::other)?;
    rustix::mount::mount(source, mountpoint, "fuse.rnfs", flags, data.as_c_str())?;
    Ok(dev.into())
}

/// `umount2(path)`; `lazy`: `MNT_DETACH`.
pub(crate) fn unmount(path: &Path, lazy: bool) -> io::Result<()> {
    let flags = if lazy {
        UnmountFlags::DETACH
    } else {
        UnmountFlags::empty()
    };
    rustix::mount::unmount(path, flags).map_err(io::Error::from)
}

/// Undoes `/proc/self/mountinfo`'s octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (b[i], octal) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `(major:minor, fstype)` of the topmost mount on `path`, if any.
fn mount_of(path: &Path) -> Option<(String, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = path.to_string_lossy();
    let mut found = None;
    for line in info.lines() {
        let mut fields = line.split(' ');
        let dev = fields.nth(2)?;
        let mountpoint = fields.nth(1)?;
        if unescape(mountpoint) != want {
            continue;
        }
        let fstype = line.split(" - ").nth(1)?.split(' ').next()?;
        found = Some((dev.to_owned(), fstype.to_owned()));
    }
    found
}

/// Whether a FUSE file system is mounted on `path` (as written in the mount
/// table: pass a canonical path).
pub fn is_fuse_mounted(path: &Path) -> bool {
    mount_of(path).is_some_and(|(_, t)| t == "fuse" || t.starts_with("fuse."))
}

/// The FUSE connection number (the minor device) of the mount on `path`.
pub(crate) fn connection_of(path: &Path) -> Option<u32> {
    let (dev, _) = mount_of(path)?;
    dev.split_once(':')?.1.parse().ok()
}

/// Aborts FUSE connection `conn`: its session loop ends and every request
/// still waiting fails (what `umount -f` does for NFS). Mounts `fusectl` if
/// it is not mounted yet.
pub(crate) fn abort(conn: u32) -> io::Result<()> {
    let dir = Path::new(FUSECTL);
    if !dir.join(conn.to_string()).exists() && dir.is_dir() {
        rustix::mount::mount("fusectl", dir, "fusectl", MountFlags::empty(), None)
            .map_err(io::Error::from)?;
    }
    std::fs::write(dir.join(conn.to_string()).join("abort"), b"1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_mount_table() {
        assert_eq!(unescape(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape(r"/x\\y"), r"/x\\y");
        assert!(mount_of(Path::new("/proc")).is_some_and(|(_, t)| t == "proc"));
        assert!(!is_fuse_mounted(Path::new("/proc")));
    }
}

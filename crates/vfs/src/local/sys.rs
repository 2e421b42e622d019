//! The few system calls rustix does not wrap, each behind a safe function. This is
//! the only file of the local backend with `unsafe`.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use rustix::fs::{self as rfs, AtFlags, Stat, StatxFlags};
use rustix::io::Errno;

/// `MAX_HANDLE_SZ` from `<linux/exportfs.h>`: the largest kernel file handle.
pub(super) const MAX_HANDLE_SZ: usize = 128;

/// `struct file_handle` with room for the largest handle.
#[repr(C)]
struct RawFileHandle {
    handle_bytes: u32,
    handle_type: i32,
    f_handle: [u8; MAX_HANDLE_SZ],
}

/// A kernel file handle as `name_to_handle_at` returns it.
#[derive(Clone, Copy)]
pub(super) struct KernelHandle {
    /// The file system's handle type (`FILEID_*`).
    pub(super) handle_type: i32,
    /// The id of the mount the name resolved on (as in `/proc/self/mountinfo`).
    pub(super) mount_id: i32,
    len: usize,
    bytes: [u8; MAX_HANDLE_SZ],
}

impl KernelHandle {
    /// The handle bytes (`f_handle`).
    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

fn last_errno() -> Errno {
    Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO)
}

/// `name_to_handle_at(dirfd, name, flags)`: the kernel's handle for `name` under
/// `dirfd` (or `dirfd` itself with `""` and `AT_EMPTY_PATH`). Without
/// `AT_SYMLINK_FOLLOW` a final symlink is not followed; a mount on `name` is
/// entered (`mount_id` tells).
pub(super) fn name_to_handle(
    dirfd: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
) -> Result<KernelHandle, Errno> {
    let mut raw = RawFileHandle {
        handle_bytes: MAX_HANDLE_SZ as u32,
        handle_type: 0,
        f_handle: [0; MAX_HANDLE_SZ],
    };
    let mut mount_id: libc::c_int = 0;
    // SAFETY: `raw` is a `struct file_handle` whose `handle_bytes` says how much
    // room follows it (MAX_HANDLE_SZ, the kernel's own upper bound); `name` is
    // NUL-terminated; `mount_id` is a live int. The kernel writes only within them.
    let rc = unsafe {
        libc::name_to_handle_at(
            dirfd.as_raw_fd(),
            name.as_ptr(),
            (&raw mut raw).cast::<libc::file_handle>(),
            &mut mount_id,
            flags,
        )
    };
    if rc != 0 {
        return Err(last_errno());
    }
    let len = raw.handle_bytes as usize;
    if len > MAX_HANDLE_SZ {
        return Err(Errno::OVERFLOW);
    }
    Ok(KernelHandle {
        handle_type: raw.handle_type,
        mount_id,
        len,
        bytes: raw.f_handle,
    })
}

/// `open_by_handle_at(mount_fd, handle, flags)`. Needs `CAP_DAC_READ_SEARCH`.
pub(super) fn open_by_handle(
    mount_fd: BorrowedFd<'_>,
    handle_type: i32,
    bytes: &[u8],
    flags: libc::c_int,
) -> Result<OwnedFd, Errno> {
    if bytes.len() > MAX_HANDLE_SZ {
        return Err(Errno::INVAL);
    }
    let mut raw = RawFileHandle {
        handle_bytes: bytes.len() as u32,
        handle_type,
        f_handle: [0; MAX_HANDLE_SZ],
    };
    raw.f_handle[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: `raw` is a valid `struct file_handle` holding `handle_bytes` bytes;
    // the kernel only reads it.
    let fd = unsafe {
        libc::open_by_handle_at(
            mount_fd.as_raw_fd(),
            (&raw mut raw).cast::<libc::file_handle>(),
            flags | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(last_errno());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `faccessat2(fd, "", mode, AT_EMPTY_PATH | AT_EACCESS)`: may this thread's
/// file-system identity (fsuid, fsgid, groups) access `fd`'s object with `mode`
/// (`R_OK`/`W_OK`/`X_OK`)? `ENOSYS` before Linux 5.8.
pub(super) fn access_fd(fd: BorrowedFd<'_>, mode: libc::c_int) -> Result<(), Errno> {
    // SAFETY: plain integer arguments and a static NUL-terminated empty path.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_faccessat2,
            fd.as_raw_fd(),
            c"".as_ptr(),
            mode,
            libc::AT_EMPTY_PATH | libc::AT_EACCESS,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(last_errno())
    }
}

/// `fchmodat2(fd, "", mode, AT_EMPTY_PATH)`: chmod the object `fd` refers to
/// (works on `O_PATH` descriptors, which `fchmod` refuses). `ENOSYS` before Linux
/// 6.6; `EINVAL` where `AT_EMPTY_PATH` is not accepted.
pub(super) fn chmod_fd(fd: BorrowedFd<'_>, mode: u32) -> Result<(), Errno> {
    // SAFETY: plain integer arguments and a static NUL-terminated empty path.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_fchmodat2,
            fd.as_raw_fd(),
            c"".as_ptr(),
            mode,
            libc::AT_EMPTY_PATH,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(last_errno())
    }
}

/// `fpathconf(fd, _PC_LINK_MAX)`, if the C library knows it for this file system.
pub(super) fn link_max(fd: BorrowedFd<'_>) -> Option<u32> {
    // SAFETY: fpathconf only reads the descriptor's file system facts.
    let max = unsafe { libc::fpathconf(fd.as_raw_fd(), libc::_PC_LINK_MAX) };
    u32::try_from(max).ok().filter(|&m| m > 0)
}

/// [`pread_append`] that never waits for storage (`preadv2` with
/// `RWF_NOWAIT`): `Ok(None)`, with `out` as it was, when some of the bytes are
/// not in the page cache. `OPNOTSUPP` where the file system cannot tell.
pub(super) fn pread_append_nowait(
    fd: BorrowedFd<'_>,
    offset: u64,
    want: usize,
    out: &mut Vec<u8>,
) -> Result<Option<usize>, Errno> {
    let start = out.len();
    out.reserve(want);
    let mut done = 0;
    while done < want {
        let spare = &mut out.spare_capacity_mut()[..want - done];
        let iov = libc::iovec {
            iov_base: spare.as_mut_ptr().cast(),
            iov_len: spare.len(),
        };
        let at = libc::off_t::try_from(offset + done as u64).map_err(|_| Errno::INVAL)?;
        // SAFETY: `iov` describes `spare`, writable memory we own for the
        // call's duration; the kernel only writes into it (uninitialised bytes
        // are never read as `u8` on our side), and `fd` is a live descriptor.
        let n = unsafe { libc::preadv2(fd.as_raw_fd(), &iov, 1, at, libc::RWF_NOWAIT) };
        let n = match usize::try_from(n) {
            Ok(n) => n,
            Err(_) => match Errno::from_io_error(&std::io::Error::last_os_error()) {
                Some(Errno::INTR) => continue,
                Some(Errno::AGAIN) => {
                    out.truncate(start);
                    return Ok(None);
                }
                e => {
                    out.truncate(start);
                    return Err(e.unwrap_or(Errno::IO));
                }
            },
        };
        if n == 0 {
            break;
        }
        // SAFETY: `preadv2` initialised the first `n` bytes of the spare
        // capacity, which `reserve(want)` made at least `want - done >= n` long.
        unsafe { out.set_len(out.len() + n) };
        done += n;
    }
    Ok(Some(done))
}

/// Appends up to `want` bytes read at `offset` to `out` (several `pread`s if the
/// kernel returns short counts) without zero-filling first. Returns the count;
/// less than `want` only at end of file.
pub(super) fn pread_append(
    fd: BorrowedFd<'_>,
    offset: u64,
    want: usize,
    out: &mut Vec<u8>,
) -> Result<usize, Errno> {
    out.reserve(want);
    let mut done = 0;
    while done < want {
        let spare = &mut out.spare_capacity_mut()[..want - done];
        let (filled, _) = rustix::io::pread(fd, spare, offset + done as u64)?;
        let n = filled.len();
        if n == 0 {
            break;
        }
        // SAFETY: `pread` initialised the first `n` bytes of the spare capacity,
        // which `reserve(want)` made at least `want - done >= n` long.
        unsafe { out.set_len(out.len() + n) };
        done += n;
    }
    Ok(done)
}

/// `statx(dirfd, name, AT_SYMLINK_NOFOLLOW)` with the mount id: the stat of
/// `name` (a final symlink is not followed; a mount on `name` is entered)
/// and the id of the mount it resolved on, the id `name_to_handle_at`
/// reports. `ENOSYS` where the kernel leaves out a basic field or the mount
/// id (before Linux 5.8).
pub(super) fn stat_with_mount(dirfd: BorrowedFd<'_>, name: &CStr) -> Result<(Stat, u64), Errno> {
    let want = StatxFlags::BASIC_STATS | StatxFlags::MNT_ID;
    let x = rfs::statx(dirfd, name, AtFlags::SYMLINK_NOFOLLOW, want)?;
    if !StatxFlags::from_bits_retain(x.stx_mask).contains(want) {
        return Err(Errno::NOSYS);
    }
    // SAFETY: `Stat` is a C struct of integers and padding, for which all
    // zero bits are a valid value.
    let mut st: Stat = unsafe { std::mem::zeroed() };
    // `as _`: the field types differ between architectures; each value fits.
    st.st_dev = rfs::makedev(x.stx_dev_major, x.stx_dev_minor) as _;
    st.st_ino = x.stx_ino as _;
    st.st_nlink = x.stx_nlink as _;
    st.st_mode = x.stx_mode.into();
    st.st_uid = x.stx_uid;
    st.st_gid = x.stx_gid;
    st.st_rdev = rfs::makedev(x.stx_rdev_major, x.stx_rdev_minor) as _;
    st.st_size = x.stx_size as _;
    st.st_blksize = x.stx_blksize as _;
    st.st_blocks = x.stx_blocks as _;
    st.st_atime = x.stx_atime.tv_sec as _;
    st.st_atime_nsec = x.stx_atime.tv_nsec as _;
    st.st_mtime = x.stx_mtime.tv_sec as _;
    st.st_mtime_nsec = x.stx_mtime.tv_nsec as _;
    st.st_ctime = x.stx_ctime.tv_sec as _;
    st.st_ctime_nsec = x.stx_ctime.tv_nsec as _;
    Ok((st, x.stx_mnt_id))
}

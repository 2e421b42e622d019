//! The local backend's handle format: the kernel's own file handle.
//!
//! ```text
//! byte 0      handle_type (FILEID_*, 1..=254)
//! bytes 1..   f_handle, a whole number of 32-bit words (at most 39 bytes)
//! ```
//!
//! ext4 gives type 1 with 8 bytes (inode, generation), xfs 8-24, btrfs 20, tmpfs
//! 12: all fit. The kernel encodes handles in 32-bit words, so any other length
//! could never have been issued and is [`FsError::BadHandle`].

use super::sys::KernelHandle;
use crate::{BackendHandle, FsError, FsResult};

/// The largest `f_handle` that fits next to the type byte.
pub(super) const MAX_KERNEL_BYTES: usize = BackendHandle::MAX_LEN - 1;

/// The backend handle for a kernel handle; `None` if it does not fit.
pub(super) fn encode(kernel: &KernelHandle) -> Option<BackendHandle> {
    let bytes = kernel.bytes();
    let handle_type = u8::try_from(kernel.handle_type).ok()?;
    if !valid_shape(handle_type, bytes.len()) {
        return None;
    }
    let mut out = [0u8; BackendHandle::MAX_LEN];
    out[0] = handle_type;
    out[1..=bytes.len()].copy_from_slice(bytes);
    BackendHandle::new(&out[..=bytes.len()])
}

/// The kernel handle type and bytes inside `fh`, or `BadHandle` if `fh` could
/// never have come from [`encode`].
pub(super) fn decode(fh: &BackendHandle) -> FsResult<(i32, &[u8])> {
    let (&handle_type, bytes) = fh.as_bytes().split_first().ok_or(FsError::BadHandle)?;
    if !valid_shape(handle_type, bytes.len()) {
        return Err(FsError::BadHandle);
    }
    Ok((i32::from(handle_type), bytes))
}

/// Type 0 (`FILEID_ROOT`) and 255 (`FILEID_INVALID`) are never returned by
/// `name_to_handle_at`; lengths are whole words.
fn valid_shape(handle_type: u8, len: usize) -> bool {
    handle_type != 0 && handle_type != 0xff && len > 0 && len % 4 == 0 && len <= MAX_KERNEL_BYTES
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn decode_refuses_what_encode_never_makes() {
        for bad in [
            &[][..],
            &[1],
            &[1, 2, 3, 4],
            &[0, 1, 2, 3, 4],
            &[0xff, 1, 2, 3, 4],
            &[1, 1, 2, 3, 4, 5],
        ] {
            let fh = BackendHandle::new(bad).unwrap();
            assert_eq!(decode(&fh), Err(FsError::BadHandle), "{bad:?}");
        }
        let fh = BackendHandle::new(&[1, 9, 8, 7, 6, 5, 4, 3, 2]).unwrap();
        assert_eq!(decode(&fh), Ok((1, &[9, 8, 7, 6, 5, 4, 3, 2][..])));
        let longest = [7u8; 40];
        assert!(decode(&BackendHandle::new(&longest).unwrap()).is_err()); // 39 bytes
        let mut fits = [7u8; 37];
        fits[0] = 1;
        assert!(decode(&BackendHandle::new(&fits).unwrap()).is_ok()); // 36 bytes
    }
}

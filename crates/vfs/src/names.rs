//! Name rules shared by every backend (see the crate docs).

use crate::{FsError, FsResult};

/// Longest name in bytes.
pub const NAME_MAX: usize = 255;

/// A name to look up: `Inval` for `""` and names with `/` or NUL,
/// `NameTooLong` past [`NAME_MAX`] bytes. `.` and `..` are allowed.
pub fn check_lookup_name(name: &[u8]) -> FsResult<()> {
    if name.is_empty() || name.iter().any(|&b| b == b'/' || b == 0) {
        return Err(FsError::Inval);
    }
    if name.len() > NAME_MAX {
        return Err(FsError::NameTooLong);
    }
    Ok(())
}

/// A name to create or remove: as [`check_lookup_name`], and `.` and `..` are
/// refused with `dots` (`Exist` for create-like calls, `Inval` for removals).
pub fn check_name(name: &[u8], dots: FsError) -> FsResult<()> {
    check_lookup_name(name)?;
    if name == b"." || name == b".." {
        return Err(dots);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert_eq!(check_lookup_name(b"caf\xe9"), Ok(()));
        assert_eq!(check_lookup_name(b".."), Ok(()));
        assert_eq!(check_lookup_name(b""), Err(FsError::Inval));
        assert_eq!(check_lookup_name(b"a/b"), Err(FsError::Inval));
        assert_eq!(check_lookup_name(b"a\0"), Err(FsError::Inval));
        assert_eq!(check_lookup_name(&[b'x'; 255]), Ok(()));
        assert_eq!(check_lookup_name(&[b'x'; 256]), Err(FsError::NameTooLong));
        assert_eq!(check_name(b".", FsError::Exist), Err(FsError::Exist));
        assert_eq!(check_name(b"..", FsError::Inval), Err(FsError::Inval));
    }
}

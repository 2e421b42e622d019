//! A mount made by a test, undone on drop.

use std::path::Path;

/// Unmounts on drop (lazily, so a failing test never leaves it busy).
pub(crate) struct Mounted<'a>(pub(crate) &'a Path);

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.0)
            .status();
    }
}

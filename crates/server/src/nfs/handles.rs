//! NFS file handles: what the client holds, and how the server checks it.
//!
//! Wire layout (at most 61 of the 64 bytes NFSv3 allows):
//!
//! ```text
//! [0]        format version (1)
//! [1..5]     export id, big-endian
//! [5..5+n]   backend handle (n <= 40, opaque to the server)
//! [5+n..]    MAC: SipHash-2-4-128 over bytes [0..5+n] under the server's key
//! ```
//!
//! The MAC is what keeps a client inside its export: without the key a client
//! cannot produce a handle naming another export, or an object the server never
//! handed out (for the local backend, a kernel handle of any file on the same
//! disk). The key is persisted in the state directory, so handles survive restarts.
//! Decoding is O(1) and needs no table.

use std::fs;
use std::hash::Hasher;
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rnfs_nfs3::FileHandle;
use rnfs_vfs::BackendHandle;
use siphasher::sip128::{Hasher128, SipHasher24};

/// Current handle format.
const VERSION: u8 = 1;
/// Version byte plus export id.
const PREFIX: usize = 5;
/// MAC length in bytes.
const MAC_LEN: usize = 16;
/// Smallest valid handle: a zero-length backend handle.
const MIN_LEN: usize = PREFIX + MAC_LEN;
/// Largest handle this server produces (61 bytes).
pub const MAX_LEN: usize = PREFIX + BackendHandle::MAX_LEN + MAC_LEN;

/// Why a client's handle was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HandleError {
    /// Not a handle this server could have made (wrong size, version or MAC):
    /// NFS3ERR_BADHANDLE.
    #[error("malformed or forged file handle")]
    Bad,
}

/// The secret that signs handles.
#[derive(Clone)]
pub struct HandleKey {
    key: [u8; 16],
}

impl std::fmt::Debug for HandleKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HandleKey(..)")
    }
}

impl HandleKey {
    /// File name of the key inside the state directory.
    pub const FILE_NAME: &'static str = "handle.key";

    /// A key from raw bytes (tests, or keys managed elsewhere).
    pub fn from_bytes(key: [u8; 16]) -> Self {
        Self { key }
    }

    /// A fresh random key that is not persisted: handles die with the process.
    pub fn ephemeral() -> io::Result<Self> {
        let mut key = [0; 16];
        fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
        Ok(Self { key })
    }

    /// Loads `dir/handle.key`, creating the directory (0700) and a random key
    /// (0600) on first use. A key file of the wrong size is an error rather than
    /// silently replaced: replacing it would make every client's handles stale.
    pub fn load_or_create(dir: &Path) -> Result<Self, KeyError> {
        let path = dir.join(Self::FILE_NAME);
        let err = |source| KeyError {
            path: path.clone(),
            source,
        };
        match fs::read(&path) {
            Ok(bytes) => {
                let key: [u8; 16] = bytes.as_slice().try_into().map_err(|_| {
                    err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("expected 16 bytes, found {}", bytes.len()),
                    ))
                })?;
                Ok(Self { key })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(dir).map_err(|e| KeyError {
                    path: dir.to_owned(),
                    source: e,
                })?;
                let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
                let fresh = Self::ephemeral().map_err(err)?;
                // Write to a temporary name and rename, so a crash never leaves a
                // short key behind.
                let tmp = dir.join(".handle.key.tmp");
                let mut f = fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&tmp)
                    .map_err(err)?;
                f.write_all(&fresh.key).map_err(err)?;
                f.sync_all().map_err(err)?;
                fs::rename(&tmp, &path).map_err(err)?;
                Ok(fresh)
            }
            Err(e) => Err(err(e)),
        }
    }

    fn mac(&self, data: &[u8]) -> [u8; MAC_LEN] {
        let mut h = SipHasher24::new_with_key(&self.key);
        h.write(data);
        h.finish128().as_bytes()
    }

    /// The wire handle for `backend` in export `export_id`.
    pub fn seal(&self, export_id: u32, backend: &BackendHandle) -> FileHandle {
        let b = backend.as_bytes();
        let mut buf = [0; MAX_LEN];
        buf[0] = VERSION;
        buf[1..PREFIX].copy_from_slice(&export_id.to_be_bytes());
        let body = PREFIX + b.len();
        buf[PREFIX..body].copy_from_slice(b);
        let mac = self.mac(&buf[..body]);
        buf[body..body + MAC_LEN].copy_from_slice(&mac);
        // At most MAX_LEN = 61 bytes, within NFSv3's 64: `new` cannot fail.
        FileHandle::new(&buf[..body + MAC_LEN]).unwrap_or_default()
    }

    /// Checks a client's handle and splits it into export id and backend handle.
    pub fn open(&self, wire: &[u8]) -> Result<(u32, BackendHandle), HandleError> {
        if wire.len() < MIN_LEN || wire.len() > MAX_LEN || wire[0] != VERSION {
            return Err(HandleError::Bad);
        }
        let body = wire.len() - MAC_LEN;
        let expected = self.mac(&wire[..body]);
        // Constant time, so response timing does not reveal a MAC prefix.
        let diff = expected
            .iter()
            .zip(&wire[body..])
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff != 0 {
            return Err(HandleError::Bad);
        }
        let mut id = [0; 4];
        id.copy_from_slice(&wire[1..PREFIX]);
        let backend = BackendHandle::new(&wire[PREFIX..body]).ok_or(HandleError::Bad)?;
        Ok((u32::from_be_bytes(id), backend))
    }
}

/// The handle key could not be read or created.
#[derive(Debug, thiserror::Error)]
#[error("handle key {}: {source}", path.display())]
pub struct KeyError {
    /// The file or directory involved.
    pub path: PathBuf,
    /// What went wrong.
    #[source]
    pub source: io::Error,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn key() -> HandleKey {
        HandleKey::from_bytes(*b"0123456789abcdef")
    }

    #[test]
    fn seal_then_open_round_trips() {
        let b = BackendHandle::new(&[7; 40]).unwrap();
        let h = key().seal(42, &b);
        assert_eq!(h.as_bytes().len(), 61);
        assert!(h.as_bytes().len() <= 64);
        assert_eq!(key().open(h.as_bytes()), Ok((42, b)));
    }

    #[test]
    fn every_flipped_bit_is_refused() {
        let b = BackendHandle::new(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let h = key().seal(1, &b);
        for i in 0..h.as_bytes().len() * 8 {
            let mut bytes = h.as_bytes().to_vec();
            bytes[i / 8] ^= 1 << (i % 8);
            assert_eq!(key().open(&bytes), Err(HandleError::Bad), "bit {i}");
        }
    }

    #[test]
    fn other_key_and_bad_sizes_are_refused() {
        let b = BackendHandle::new(&[9; 12]).unwrap();
        let h = key().seal(3, &b);
        let other = HandleKey::from_bytes([0; 16]);
        assert_eq!(other.open(h.as_bytes()), Err(HandleError::Bad));
        assert_eq!(key().open(&[]), Err(HandleError::Bad));
        assert_eq!(key().open(&[1; 64]), Err(HandleError::Bad));
        assert_eq!(key().open(&h.as_bytes()[..20]), Err(HandleError::Bad));
    }

    #[test]
    fn key_file_persists_and_wrong_size_is_an_error() {
        let dir = std::env::temp_dir().join(format!("rnfs-key-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let a = HandleKey::load_or_create(&dir).unwrap();
        let b = HandleKey::load_or_create(&dir).unwrap();
        assert_eq!(a.key, b.key);
        let mode = fs::metadata(dir.join(HandleKey::FILE_NAME))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        fs::write(dir.join(HandleKey::FILE_NAME), b"short").unwrap();
        assert!(HandleKey::load_or_create(&dir).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}

//! NFS file handles: what the client holds, and how the server checks it.
//!
//! Wire layout (at most 64 bytes, NFSv3's limit):
//!
//! ```text
//! [0]        format version (2)
//! [1..5]     export id, big-endian
//! [5..8]     root tag: 24 bits of a hash of the export root's backend handle
//! [8..8+n]   backend handle (n <= 40, opaque to the server)
//! [8+n..]    MAC: SipHash-2-4-128 over bytes [0..8+n] under the server's key
//! ```
//!
//! The MAC is what keeps a client inside its export: without the key a client
//! cannot produce a handle naming another export, or an object the server never
//! handed out (for the local backend, a kernel handle of any file on the same
//! disk). The key is persisted in the state directory, so handles survive restarts.
//! Decoding is O(1) and needs no table.
//!
//! The root tag ties a handle to the directory its export had when the
//! handle was issued. An export whose `path` is changed by a reload while it
//! keeps its id (narrowed to a subdirectory, say) has another root: the
//! handles issued before are then STALE, as knfsd's are after `exportfs -r`
//! moves an export, instead of still opening objects outside the new root
//! (and `..` from the old root climbing above it). Version 1 handles (no tag,
//! 5-byte prefix) were issued before tags existed; they are accepted only
//! for an export whose root has not changed since the server started
//! ([`Export::accepts_untagged`](super::exports::Export::accepts_untagged)).

use std::fs;
use std::hash::Hasher;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rnfs_nfs3::FileHandle;
use rnfs_vfs::BackendHandle;
use siphasher::sip128::{Hasher128, SipHasher24};

/// Current handle format.
const VERSION: u8 = 2;
/// The format before root tags.
const VERSION_UNTAGGED: u8 = 1;
/// Version byte, export id and root tag.
const PREFIX: usize = 8;
/// Version byte and export id (version 1).
const PREFIX_UNTAGGED: usize = 5;
/// MAC length in bytes.
const MAC_LEN: usize = 16;
/// Largest handle this server produces (64 bytes).
pub const MAX_LEN: usize = PREFIX + BackendHandle::MAX_LEN + MAC_LEN;

/// The 24-bit tag of an export root: a hash of its backend handle (no key:
/// it is covered by the MAC, so no client can choose it).
pub fn root_tag(root: &BackendHandle) -> u32 {
    let mut h = siphasher::sip::SipHasher24::new_with_keys(0, 0);
    h.write(root.as_bytes());
    (h.finish() & 0x00ff_ffff) as u32
}

/// The export a handle is sealed for: its id and the tag of its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportStamp {
    /// The export id.
    pub id: u32,
    /// [`root_tag`] of the export's root.
    pub root_tag: u32,
}

/// What a handle that passed its MAC says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    /// The export id.
    pub export_id: u32,
    /// The root tag; `None` for a version 1 handle, which has none.
    pub root_tag: Option<u32>,
    /// The backend's handle.
    pub backend: BackendHandle,
}

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
    /// The directory must belong to the server's user (or root) and be
    /// writable by nobody else, and the key must be a regular file only that
    /// user can read: whoever reads the key can forge handles, and whoever
    /// can write the directory can swap the key.
    pub fn load_or_create(dir: &Path) -> Result<Self, KeyError> {
        let path = dir.join(Self::FILE_NAME);
        let err = |cause| KeyError {
            path: path.clone(),
            cause,
        };
        let dir_err = |cause| KeyError {
            path: dir.to_owned(),
            cause,
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(dir_err)?;
        check_private(&fs::metadata(dir).map_err(dir_err)?, Private::StateDir).map_err(dir_err)?;
        // O_NONBLOCK: a FIFO put there opens at once (and is then refused)
        // instead of hanging the start.
        let no_follow = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
        let opened = fs::OpenOptions::new()
            .read(true)
            .custom_flags(no_follow.bits() as i32)
            .open(&path);
        match opened {
            Ok(mut file) => {
                check_private(&file.metadata().map_err(err)?, Private::KeyFile).map_err(err)?;
                let mut bytes = Vec::with_capacity(16);
                // One byte more than a key, to tell "too long" without reading
                // an arbitrary file whole.
                (&mut file).take(17).read_to_end(&mut bytes).map_err(err)?;
                let key: [u8; 16] = bytes.as_slice().try_into().map_err(|_| {
                    err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        if bytes.len() > 16 {
                            "expected 16 bytes, found more".to_owned()
                        } else {
                            format!("expected 16 bytes, found {}", bytes.len())
                        },
                    ))
                })?;
                Ok(Self { key })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let fresh = Self::ephemeral().map_err(err)?;
                if !fresh.install(dir, &path).map_err(err)? {
                    // Another server starting on this directory installed
                    // its key first: use that one, as that server does.
                    return Self::load_or_create(dir);
                }
                // The new name, and the state directory if this start made
                // it, must reach the disk too: a power cut losing them would
                // start the next server with a new key, and every client's
                // handles would be stale.
                let sync_dir = |d: &Path| fs::File::open(d).and_then(|d| d.sync_all());
                sync_dir(dir).map_err(dir_err)?;
                // Best effort: the parent may not be ours to read (0711).
                if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                    let _ = sync_dir(parent);
                }
                Ok(fresh)
            }
            Err(e) => Err(err(e)),
        }
    }

    /// Writes this key as `path` (in `dir`) unless a key is there already:
    /// `false` when one is. Written to a temporary name of this process's
    /// own, synced, then linked to `path` (which fails if `path` exists), so
    /// a crash never leaves a short key behind and two servers starting
    /// together agree on one key (a rename would let the second replace
    /// the first's, which that server already signs handles with). Where
    /// the file system has no hard links, a rename.
    fn install(&self, dir: &Path, path: &Path) -> io::Result<bool> {
        static ATTEMPT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        // `Relaxed`: only uniqueness matters.
        let n = ATTEMPT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".handle.key.{}.{n}.tmp", std::process::id()));
        // A leftover of an earlier process with this pid.
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        // Created new (O_EXCL, which follows no link).
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let written = f.write_all(&self.key).and_then(|()| f.sync_all());
        let installed = written.and_then(|()| match fs::hard_link(&tmp, path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e)
                if matches!(
                    rustix::io::Errno::from_io_error(&e),
                    Some(rustix::io::Errno::PERM | rustix::io::Errno::OPNOTSUPP)
                ) =>
            {
                fs::rename(&tmp, path).map(|()| true)
            }
            Err(e) => Err(e),
        });
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => installed.and(Err(e)),
            _ => installed,
        }
    }

    fn mac(&self, data: &[u8]) -> [u8; MAC_LEN] {
        let mut h = SipHasher24::new_with_key(&self.key);
        h.write(data);
        h.finish128().as_bytes()
    }

    /// The wire handle for `backend` in `export`.
    pub fn seal(&self, export: ExportStamp, backend: &BackendHandle) -> FileHandle {
        let b = backend.as_bytes();
        let mut buf = [0; MAX_LEN];
        buf[0] = VERSION;
        buf[1..5].copy_from_slice(&export.id.to_be_bytes());
        buf[5..PREFIX].copy_from_slice(&export.root_tag.to_be_bytes()[1..]);
        let body = PREFIX + b.len();
        buf[PREFIX..body].copy_from_slice(b);
        let mac = self.mac(&buf[..body]);
        buf[body..body + MAC_LEN].copy_from_slice(&mac);
        // At most MAX_LEN = 64 bytes, NFSv3's limit: `new` cannot fail.
        FileHandle::new(&buf[..body + MAC_LEN]).unwrap_or_default()
    }

    /// Checks a client's handle (its size, version and MAC) and splits it.
    pub fn open(&self, wire: &[u8]) -> Result<Opened, HandleError> {
        let prefix = match wire.first() {
            Some(&VERSION) => PREFIX,
            Some(&VERSION_UNTAGGED) => PREFIX_UNTAGGED,
            _ => return Err(HandleError::Bad),
        };
        if wire.len() < prefix + MAC_LEN || wire.len() > prefix + BackendHandle::MAX_LEN + MAC_LEN {
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
        id.copy_from_slice(&wire[1..5]);
        let root_tag = (prefix == PREFIX).then(|| {
            let mut tag = [0; 4];
            tag[1..].copy_from_slice(&wire[5..PREFIX]);
            u32::from_be_bytes(tag)
        });
        let backend = BackendHandle::new(&wire[prefix..body]).ok_or(HandleError::Bad)?;
        Ok(Opened {
            export_id: u32::from_be_bytes(id),
            root_tag,
            backend,
        })
    }
}

/// What [`check_private`] checks.
#[derive(Clone, Copy)]
enum Private {
    /// `handle.key`: whoever reads it can forge handles.
    KeyFile,
    /// Its directory: whoever writes it can swap the key.
    StateDir,
}

/// Refuses a key file or state directory that someone other than the
/// server could read or replace, as ssh does with a private key: it must be
/// of the right type, owned by the server's user or root, and without the
/// permission bits that would let others read the key (key file) or
/// replace it (directory).
fn check_private(meta: &fs::Metadata, what: Private) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: String| Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
    let (right_type, not_it, name, forbidden) = match what {
        Private::KeyFile => (meta.is_file(), "not a regular file", "the key file", 0o077),
        Private::StateDir => (
            meta.is_dir(),
            "not a directory",
            "the state directory",
            0o022,
        ),
    };
    if !right_type {
        return refuse(not_it.to_owned());
    }
    let euid = rustix::process::geteuid().as_raw();
    if meta.uid() != euid && meta.uid() != 0 {
        return refuse(format!(
            "{name} is owned by uid {}, not by the server's user (uid {euid}) or \
             root: its owner could replace the handle key",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & forbidden != 0 {
        return refuse(match what {
            Private::KeyFile => format!(
                "permissions {mode:04o} are too open: whoever reads the key can forge \
                 handles to any exported file; run `chmod 600` on it"
            ),
            Private::StateDir => format!(
                "the state directory's permissions {mode:04o} let others replace the \
                 handle key; run `chmod go-w` on it, or use another --state-dir"
            ),
        });
    }
    Ok(())
}

/// The handle key could not be read or created.
#[derive(Debug, thiserror::Error)]
#[error("handle key {}: {cause}", path.display())]
pub struct KeyError {
    /// The file or directory involved.
    pub path: PathBuf,
    /// What went wrong.
    pub cause: io::Error,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn key() -> HandleKey {
        HandleKey::from_bytes(*b"0123456789abcdef")
    }

    fn stamp(id: u32) -> ExportStamp {
        ExportStamp {
            id,
            root_tag: 0x00ab_cdef,
        }
    }

    #[test]
    fn seal_then_open_round_trips() {
        let b = BackendHandle::new(&[7; 40]).unwrap();
        let h = key().seal(stamp(42), &b);
        assert_eq!(h.as_bytes().len(), 64);
        assert_eq!(
            key().open(h.as_bytes()),
            Ok(Opened {
                export_id: 42,
                root_tag: Some(0x00ab_cdef),
                backend: b
            })
        );
    }

    /// A handle from before root tags (version 1: version, id, backend,
    /// MAC) still opens, with no tag.
    #[test]
    fn untagged_version_1_handles_open_without_a_tag() {
        let b = BackendHandle::new(&[5; 40]).unwrap();
        let mut v1 = vec![1, 0, 0, 0, 42];
        v1.extend_from_slice(b.as_bytes());
        let mac = key().mac(&v1);
        v1.extend_from_slice(&mac);
        assert_eq!(v1.len(), 61);
        let opened = key().open(&v1).unwrap();
        assert_eq!((opened.export_id, opened.root_tag), (42, None));
        assert_eq!(opened.backend, b);
        v1[6] ^= 1;
        assert_eq!(key().open(&v1), Err(HandleError::Bad));
    }

    #[test]
    fn root_tags_differ_with_the_root() {
        let a = root_tag(&BackendHandle::new(&[1; 8]).unwrap());
        let b = root_tag(&BackendHandle::new(&[2; 8]).unwrap());
        assert_ne!(a, b);
        assert!(a <= 0x00ff_ffff && b <= 0x00ff_ffff);
    }

    #[test]
    fn every_flipped_bit_is_refused() {
        let b = BackendHandle::new(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let h = key().seal(stamp(1), &b);
        for i in 0..h.as_bytes().len() * 8 {
            let mut bytes = h.as_bytes().to_vec();
            bytes[i / 8] ^= 1 << (i % 8);
            assert_eq!(key().open(&bytes), Err(HandleError::Bad), "bit {i}");
        }
    }

    #[test]
    fn other_key_and_bad_sizes_are_refused() {
        let b = BackendHandle::new(&[9; 12]).unwrap();
        let h = key().seal(stamp(3), &b);
        let other = HandleKey::from_bytes([0; 16]);
        assert_eq!(other.open(h.as_bytes()), Err(HandleError::Bad));
        assert_eq!(key().open(&[]), Err(HandleError::Bad));
        assert_eq!(key().open(&[1; 64]), Err(HandleError::Bad));
        assert_eq!(key().open(&[2; 65]), Err(HandleError::Bad));
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
        fs::write(dir.join(HandleKey::FILE_NAME), [7u8; 40]).unwrap();
        let e = HandleKey::load_or_create(&dir).unwrap_err().to_string();
        assert!(e.contains("found more"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Servers starting together on one state directory end up with one
    /// key, the one in the file: none signs handles with a key that another
    /// replaced. No temporary file is left behind.
    #[test]
    fn concurrent_first_starts_agree_on_one_key() {
        let base = std::env::temp_dir().join(format!("rnfs-key-race-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        for round in 0..40 {
            let dir = base.join(round.to_string());
            let keys: Vec<[u8; 16]> = std::thread::scope(|s| {
                let starts: Vec<_> = (0..8)
                    .map(|_| s.spawn(|| HandleKey::load_or_create(&dir).unwrap().key))
                    .collect();
                starts.into_iter().map(|t| t.join().unwrap()).collect()
            });
            let on_disk = HandleKey::load_or_create(&dir).unwrap().key;
            assert!(
                keys.iter().all(|k| *k == on_disk),
                "round {round}: a start kept a key the file no longer holds"
            );
            let names: Vec<_> = fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(names, [HandleKey::FILE_NAME], "round {round}");
        }
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_key_file_others_can_read_is_refused() {
        let dir = std::env::temp_dir().join(format!("rnfs-key-open-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let a = HandleKey::load_or_create(&dir).unwrap();
        let file = dir.join(HandleKey::FILE_NAME);
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        let e = HandleKey::load_or_create(&dir).unwrap_err();
        assert_eq!(e.cause.kind(), io::ErrorKind::PermissionDenied);
        assert!(
            e.to_string().contains("permissions 0644 are too open"),
            "{e}"
        );
        fs::set_permissions(&file, fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(HandleKey::load_or_create(&dir).unwrap().key, a.key);
        // A symlink to a key is not followed: its target's mode says nothing
        // about who can swap the link.
        let link = dir.join("link");
        fs::create_dir(&link).unwrap();
        std::os::unix::fs::symlink(&file, link.join(HandleKey::FILE_NAME)).unwrap();
        assert!(HandleKey::load_or_create(&link).is_err());
        // A FIFO in its place is refused at once, not waited on.
        let fifo = dir.join("fifo");
        fs::create_dir(&fifo).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            fifo.join(HandleKey::FILE_NAME),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let e = HandleKey::load_or_create(&fifo).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_state_directory_others_can_write_is_refused_and_its_leftovers_not_trusted() {
        let dir = std::env::temp_dir().join(format!("rnfs-key-dir-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        // Planted before the first start: a temporary file another user
        // could read, and nothing must be written into it.
        let planted = dir.join(".handle.key.tmp");
        fs::write(&planted, b"").unwrap();
        fs::set_permissions(&planted, fs::Permissions::from_mode(0o666)).unwrap();
        let e = HandleKey::load_or_create(&dir).unwrap_err();
        assert_eq!(e.cause.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("permissions 0777"), "{e}");
        assert!(!dir.join(HandleKey::FILE_NAME).exists());
        assert_eq!(fs::read(&planted).unwrap(), b"", "nothing written to it");

        // Made private, the directory is used, and the leftover is replaced
        // by a file of our own, not written through.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        let outside = dir.join("outside");
        fs::write(&outside, b"not a key").unwrap();
        fs::remove_file(&planted).unwrap();
        std::os::unix::fs::symlink(&outside, &planted).unwrap();
        HandleKey::load_or_create(&dir).unwrap();
        assert_eq!(fs::read(&outside).unwrap(), b"not a key");
        let mode = fs::metadata(dir.join(HandleKey::FILE_NAME))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        fs::remove_dir_all(&dir).unwrap();
    }
}

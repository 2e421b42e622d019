//! Sessions shared by the arguments of one command, path resolution inside an
//! export (with or without following symbolic links) and directory listing.

use std::fmt;
use std::io;
use std::sync::{Arc, Mutex};

use rnfs_client::{
    ClientError, ClientOptions, Credential, DirPlusEntry, DirtyBudget, NfsError, NfsUrl, Session,
};
use rnfs_nfs3::{Fattr3, FileHandle, Ftype3, Nfsstat3};

use super::format::msg_name;
use super::UrlArg;

/// Symbolic links followed in one path before giving up with ELOOP, as Linux.
const MAX_SYMLINKS: usize = 40;

/// Why an operation failed, printed the way coreutils prints errno.
#[derive(Debug)]
pub(crate) enum Error {
    /// An NFS, MOUNT or RPC failure.
    Nfs(NfsError),
    /// A local file system failure.
    Io(io::Error),
    /// Only an errno.
    Errno(i32),
}

impl Error {
    /// The errno this error stands for.
    pub(crate) fn errno(&self) -> i32 {
        match self {
            Self::Nfs(e) => e.errno(),
            Self::Io(e) => e.raw_os_error().unwrap_or(libc_eio()),
            Self::Errno(n) => *n,
        }
    }
}

fn libc_eio() -> i32 {
    nix::errno::Errno::EIO as i32
}

/// `strerror`, without Rust's "(os error N)" suffix.
pub(crate) fn strerror(errno: i32) -> &'static str {
    nix::errno::Errno::from_raw(errno).desc()
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Nfs(NfsError::Client(ClientError::Io(e))) | Self::Io(e) => {
                match e.raw_os_error() {
                    Some(n) => f.write_str(strerror(n)),
                    None => write!(f, "{e}"),
                }
            }
            Self::Nfs(e @ (NfsError::Status(_) | NfsError::Mount(_))) => {
                f.write_str(strerror(e.errno()))
            }
            Self::Nfs(e) => write!(f, "{e}"),
            Self::Errno(n) => f.write_str(strerror(*n)),
        }
    }
}

impl From<NfsError> for Error {
    fn from(e: NfsError) -> Self {
        Self::Nfs(e)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<Nfsstat3> for Error {
    fn from(s: Nfsstat3) -> Self {
        Self::Nfs(NfsError::Status(s))
    }
}

/// A path inside an export: the session and the path relative to its root
/// (`/`-separated, no leading `/`; empty for the root).
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The mounted export.
    pub(crate) session: Arc<Session>,
    /// The path below the export's root.
    pub(crate) path: String,
    /// The URL of the export's root (for df's "Mounted on").
    pub(crate) export_url: NfsUrl,
}

impl Target {
    /// The handle and attributes of the path, the last component's symbolic
    /// link followed when `follow` (intermediate ones always are).
    pub(crate) fn resolve(&self, follow: bool) -> Result<Resolved, Error> {
        resolve(&self.session, &self.path, follow)
    }

    /// The parent directory's path and the last component's name; `None` for
    /// the export's root.
    pub(crate) fn split(&self) -> Option<(&str, &str)> {
        split_path(&self.path)
    }

    /// The same export, at `path`.
    pub(crate) fn with_path(&self, path: String) -> Self {
        Self {
            session: Arc::clone(&self.session),
            path,
            export_url: self.export_url.clone(),
        }
    }
}

/// `a/b/c` -> (`a/b`, `c`); `c` -> (``, `c`); `` -> None.
pub(crate) fn split_path(path: &str) -> Option<(&str, &str)> {
    if path.is_empty() {
        return None;
    }
    Some(match path.rfind('/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    })
}

/// `DIR/NAME` for messages: `dir` as shown (a trailing `/` dropped) and
/// `name` quoted as GNU quotes control characters and bytes that are not
/// UTF-8 ([`msg_name`]).
pub(crate) fn child_shown(dir: &str, name: &[u8]) -> String {
    format!("{}/{}", dir.trim_end_matches('/'), msg_name(name))
}

/// `dir` + `/` + `name`, for paths below an export's root.
pub(crate) fn join_path(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// A resolved object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resolved {
    /// Its handle.
    pub(crate) fh: FileHandle,
    /// Its attributes.
    pub(crate) attr: Fattr3,
}

/// Resolves `path` (relative to the export root) component by component,
/// following symbolic links in every component but the last, and in the last
/// when `follow`. An absolute link target is taken as a path on the server:
/// it can be followed only if it lies inside this export.
pub(crate) fn resolve(session: &Session, path: &str, follow: bool) -> Result<Resolved, Error> {
    let nfs = session.nfs();
    // Components still to walk, the next one last.
    let mut todo: Vec<String> = components(path).rev().map(str::to_owned).collect();
    let mut stack: Vec<FileHandle> = vec![session.root()];
    let mut links = 0;
    let mut current = Resolved {
        fh: session.root(),
        attr: nfs.getattr(&session.root())?,
    };
    while let Some(name) = todo.pop() {
        if current.attr.ftype != Ftype3::Dir {
            return Err(Nfsstat3::Notdir.into());
        }
        if name == ".." {
            // The server's ".." of the root is the root itself.
            if stack.len() > 1 {
                stack.pop();
            }
            let fh = *stack.last().unwrap_or(&current.fh);
            current = Resolved {
                fh,
                attr: nfs.getattr(&fh)?,
            };
            continue;
        }
        let (fh, attr) = lookup(session, &current.fh, name.as_bytes())?;
        let last = todo.is_empty();
        if attr.ftype == Ftype3::Lnk && (follow || !last) {
            links += 1;
            if links > MAX_SYMLINKS {
                return Err(Error::Errno(nix::errno::Errno::ELOOP as i32));
            }
            let target = nfs.readlink(&fh)?;
            let target = String::from_utf8(target).map_err(|_| Error::from(Nfsstat3::Noent))?;
            if let Some(abs) = target.strip_prefix('/') {
                let export = session.export().trim_matches('/');
                let inside = if export.is_empty() {
                    Some(abs)
                } else {
                    abs.strip_prefix(export)
                        .filter(|r| r.is_empty() || r.starts_with('/'))
                };
                // A target outside the export cannot be reached through it.
                let inside = inside.ok_or(Error::from(Nfsstat3::Noent))?;
                stack.truncate(1);
                current = Resolved {
                    fh: session.root(),
                    attr: nfs.getattr(&session.root())?,
                };
                todo.extend(components(inside).rev().map(str::to_owned));
            } else {
                todo.extend(components(&target).rev().map(str::to_owned));
            }
            continue;
        }
        stack.push(fh);
        current = Resolved { fh, attr };
    }
    Ok(current)
}

/// LOOKUP of `name` in `dir`, with a GETATTR when the reply has no attributes.
pub(crate) fn lookup(
    session: &Session,
    dir: &FileHandle,
    name: &[u8],
) -> Result<(FileHandle, Fattr3), NfsError> {
    let nfs = session.nfs();
    let (fh, attr) = nfs.lookup(dir, name)?;
    let attr = match attr {
        Some(a) => a,
        None => nfs.getattr(&fh)?,
    };
    Ok((fh, attr))
}

fn components(path: &str) -> impl DoubleEndedIterator<Item = &str> {
    path.split('/').filter(|c| !c.is_empty() && *c != ".")
}

/// One directory entry with its handle and attributes.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The name (bytes; not necessarily UTF-8).
    pub(crate) name: Vec<u8>,
    /// Its handle.
    pub(crate) fh: FileHandle,
    /// Its attributes.
    pub(crate) attr: Fattr3,
}

impl Entry {
    /// The name for display and for paths (invalid UTF-8 replaced).
    pub(crate) fn name_str(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

/// Every entry of directory `dir` but `.` and `..`, in the server's order:
/// READDIRPLUS pages (READDIR and LOOKUP where the server has no READDIRPLUS),
/// with a LOOKUP for any entry the server sent without handle or attributes.
pub(crate) fn read_dir(session: &Session, dir: &FileHandle) -> Result<Vec<Entry>, Error> {
    let nfs = session.nfs();
    let dircount = session.dsize();
    let maxcount = (dircount.saturating_mul(8)).min(session.rsize().max(dircount));
    let mut out = Vec::new();
    let mut cookie = 0;
    let mut verf = [0; 8];
    loop {
        let page = match nfs.readdirplus(dir, cookie, verf, dircount, maxcount) {
            Ok(p) => p,
            Err(NfsError::Status(Nfsstat3::Notsupp)) => return read_dir_plain(session, dir),
            Err(e) => return Err(e.into()),
        };
        if page.entries.is_empty() && !page.eof {
            // No progress and no end: the server is broken; do not spin.
            return Err(Nfsstat3::Serverfault.into());
        }
        for e in page.entries {
            cookie = e.cookie;
            if let Some(entry) = complete(session, dir, e)? {
                out.push(entry);
            }
        }
        verf = page.cookieverf;
        if page.eof {
            return Ok(out);
        }
    }
}

fn complete(session: &Session, dir: &FileHandle, e: DirPlusEntry) -> Result<Option<Entry>, Error> {
    if e.name == b"." || e.name == b".." {
        return Ok(None);
    }
    let (fh, attr) = match (e.handle, e.attr) {
        (Some(fh), Some(attr)) => (fh, attr),
        _ => match session.nfs().lookup(dir, &e.name) {
            Ok((fh, Some(attr))) => (fh, attr),
            Ok((fh, None)) => (fh, session.nfs().getattr(&fh)?),
            // Removed since the listing: skip it, as readdir(3) users do.
            Err(NfsError::Status(Nfsstat3::Noent)) => return Ok(None),
            Err(err) => return Err(err.into()),
        },
    };
    Ok(Some(Entry {
        name: e.name,
        fh,
        attr,
    }))
}

fn read_dir_plain(session: &Session, dir: &FileHandle) -> Result<Vec<Entry>, Error> {
    let nfs = session.nfs();
    let mut out = Vec::new();
    let mut cookie = 0;
    let mut verf = [0; 8];
    loop {
        let page = nfs.readdir(dir, cookie, verf, session.dsize())?;
        if page.entries.is_empty() && !page.eof {
            return Err(Nfsstat3::Serverfault.into());
        }
        for e in page.entries {
            cookie = e.cookie;
            let plus = DirPlusEntry {
                fileid: e.fileid,
                name: e.name,
                cookie: e.cookie,
                attr: None,
                handle: None,
            };
            if let Some(entry) = complete(session, dir, plus)? {
                out.push(entry);
            }
        }
        verf = page.cookieverf;
        if page.eof {
            return Ok(out);
        }
    }
}

/// The sessions one command has opened, one per server and export, and what
/// they are opened with.
#[derive(Debug)]
pub(crate) struct Remotes {
    options: ClientOptions,
    cred: Credential,
    sessions: Mutex<Vec<(SessionKey, Arc<Session>)>>,
    /// Unstable bytes all files written by this command may hold.
    budget: Arc<DirtyBudget>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct SessionKey {
    host: String,
    nfs_port: Option<u16>,
    mount_port: Option<u16>,
}

impl Remotes {
    /// Opens sessions with `options` as `cred`.
    pub(crate) fn new(options: ClientOptions, cred: Credential) -> Self {
        Self {
            options,
            cred,
            sessions: Mutex::new(Vec::new()),
            budget: DirtyBudget::new(DirtyBudget::DEFAULT_MAX_BYTES),
        }
    }

    /// The write-behind budget shared by every file this command writes.
    pub(crate) fn budget(&self) -> &Arc<DirtyBudget> {
        &self.budget
    }

    /// The export and path that `url` names, mounting the export unless an
    /// open session of the same server already holds the path.
    pub(crate) fn open(&self, url: &NfsUrl) -> Result<Target, Error> {
        let key = SessionKey {
            host: url.host.clone(),
            nfs_port: url.nfs_port,
            mount_port: url.mount_port,
        };
        let mut sessions = self.sessions.lock().map_err(|_| Error::Errno(libc_eio()))?;
        let of_server = || sessions.iter().filter(|(k, _)| *k == key).map(|(_, s)| s);
        // The export a new session would mount: the longest the server
        // lists that holds the path. An open session of a shorter one
        // would reach the path, but not as the server exports it (a
        // nested export's own options, read-only among them, apply to
        // handles obtained through it).
        let listed = of_server().find_map(|s| s.listed_exports());
        let found = match listed {
            Some(exports) => rnfs_client::longest_export(exports, &url.path).and_then(|best| {
                of_server()
                    .find(|s| s.export() == best)
                    .and_then(|s| rest_below(&url.path, s.export()).map(|r| (s, r)))
            }),
            None => of_server()
                .filter_map(|s| rest_below(&url.path, s.export()).map(|r| (s, r)))
                .max_by_key(|(s, _)| s.export().len()),
        };
        let (session, path) = match found {
            Some((s, rest)) => (Arc::clone(s), rest),
            None => {
                let (session, rest) =
                    Session::connect(url, self.options.clone(), self.cred.clone())?;
                let session = Arc::new(session);
                sessions.push((key, Arc::clone(&session)));
                (session, rest)
            }
        };
        let mut export_url = url.clone();
        export_url.path = if session.export().is_empty() {
            "/".to_owned()
        } else {
            session.export().to_owned()
        };
        Ok(Target {
            session,
            path,
            export_url,
        })
    }

    /// [`Remotes::open`], then the path resolved (see [`Target::resolve`]).
    /// A trailing `/` resolves a final symbolic link and must end at a
    /// directory (ENOTDIR otherwise), as path resolution does in the kernel.
    pub(crate) fn open_resolved(
        &self,
        arg: &UrlArg,
        follow: bool,
    ) -> Result<(Resolved, Target), Error> {
        let target = self.open(&arg.url)?;
        let dir_only = arg.trailing_slash();
        let resolved = target.resolve(follow || dir_only)?;
        if dir_only && resolved.attr.ftype != Ftype3::Dir {
            return Err(Error::Errno(nix::errno::Errno::ENOTDIR as i32));
        }
        Ok((resolved, target))
    }

    /// Unmounts every session (advisory, as umount(8)).
    pub(crate) fn unmount_all(&self) {
        if let Ok(sessions) = self.sessions.lock() {
            for (_, s) in sessions.iter() {
                s.unmount();
            }
        }
    }
}

/// The part of `path` below `export`, if `export` holds it.
fn rest_below(path: &str, export: &str) -> Option<String> {
    let export = export.trim_end_matches('/');
    let rest = path.strip_prefix(export)?;
    if !rest.is_empty() && !rest.starts_with('/') {
        return None;
    }
    Some(rest.trim_start_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_and_join() {
        assert_eq!(split_path("a/b/c"), Some(("a/b", "c")));
        assert_eq!(split_path("c"), Some(("", "c")));
        assert_eq!(split_path(""), None);
        assert_eq!(join_path("", "x"), "x");
        assert_eq!(join_path("a", "x"), "a/x");
        assert_eq!(rest_below("/e/a/b", "/e").as_deref(), Some("a/b"));
        assert_eq!(rest_below("/e", "/e").as_deref(), Some(""));
        assert_eq!(rest_below("/ex/a", "/e"), None);
        assert_eq!(rest_below("/x/y", "/").as_deref(), Some("x/y"));
    }

    #[test]
    fn errors_print_like_strerror() {
        assert_eq!(
            Error::from(Nfsstat3::Noent).to_string(),
            "No such file or directory"
        );
        assert_eq!(
            Error::Io(io::Error::from_raw_os_error(13)).to_string(),
            "Permission denied"
        );
    }
}

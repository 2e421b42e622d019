//! `rnfs cp` and `rnfs mv`: between local paths and `nfs://` URLs, in any
//! direction.
//!
//! A copy runs in two phases. The walk (one thread) stats the sources,
//! creates the directories and symbolic links and lists the regular files;
//! then `-j` threads copy the files, each streaming one file at a time; last,
//! directories get their final mode (and with -p their times), deepest first.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::{self, File, FileTimes, OpenOptions};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use indicatif::ProgressBar;
use nix::errno::Errno;
use rnfs_client::{DirtyBudget, NfsError};
use rnfs_nfs3::{
    CreateHow3, Devicedata3, Fattr3, FileHandle, Ftype3, Mknoddata3, Nfsstat3, Nfstime3, Sattr3,
    SetTime, Specdata3, ACCESS3_READ,
};

use super::format::umask;
use super::remote::{child_shown, join_path, lookup, read_dir, resolve, Error, Target};
use super::transfer::{chunk_size, open_nfs, pump, Reader, Side, Writer};
use super::{progress, ConnArgs, Ctx, PathArg};

pub(crate) const CP_ABOUT: &str = concat!(
    "Copy SOURCE to DEST, or each SOURCE into DIRECTORY. Each operand is an \
     nfs:// URL or a local path, so files go local -> NFS, NFS -> local or NFS -> \
     NFS (between exports or servers). As GNU cp: a directory is copied only \
     with -r, into DEST if DEST does not exist, else into DEST/NAME; existing \
     files are overwritten, keeping their mode; new files get the source's mode \
     less the umask, and with -p the source's exact mode and times, and its \
     owner and group where they may be set (as root); where they are not, the \
     set-uid and set-gid bits are dropped (and a file's sticky bit). With -r \
     symbolic links are copied as links; without it they are followed, and \
     a local FIFO or device file is read as a file is (cp /dev/null FILE \
     makes an empty FILE); with it FIFOs, sockets and device files are made \
     anew (device files only where the caller may make them: as root). A file with holes (fewer blocks \
     than its size needs) is copied with holes, as GNU cp --sparse=auto: its \
     holes and its blocks of zeros are not written.

Regular files are copied -j at a time (4 by default), each with reads and \
     writes kept in flight; NFS writes are UNSTABLE and committed when the file \
     is complete. A progress bar (bytes, rate, ETA) is drawn on standard error \
     when it is a terminal; --progress prints it as plain lines otherwise.

Exit status: 0 if everything was copied, 1 otherwise.",
    url_help!()
);

pub(crate) const CP_USAGE: &str = "\
rnfs cp [OPTIONS] SOURCE DEST
       rnfs cp [OPTIONS] SOURCE... DIRECTORY
       rnfs cp [OPTIONS] -t DIRECTORY SOURCE...";

pub(crate) const CP_EXAMPLES: &str = "\
Examples:
  rnfs cp ./report.pdf nfs://server/srv/data/                upload a file
  rnfs cp nfs://server/srv/data/report.pdf .                 download it
  rnfs cp -r ./site nfs://server/srv/www/site                upload a tree
  rnfs cp -rp -j 16 nfs://server/srv/data/photos /backup/    download, 16 files at a time
  rnfs cp nfs://a/srv/x.img nfs://b:20490/srv/y.img          server to server
  rnfs cp -t nfs://server/srv/data a.txt b.txt c.txt";

pub(crate) const MV_ABOUT: &str = concat!(
    "Rename SOURCE to DEST, or move each SOURCE into DIRECTORY. Within one \
     export this is one RENAME (atomic; replaces an existing DEST as rename(2) \
     does). Across exports, servers, or between NFS and local paths, mv copies \
     the tree with its modes and times, and the hard links among the files \
     moved, then removes the source, as mv between \
     file systems does; the source is kept if any part of the copy failed.

Exit status: 0 if everything was moved, 1 otherwise.",
    url_help!()
);

pub(crate) const MV_USAGE: &str = "\
rnfs mv [OPTIONS] SOURCE DEST
       rnfs mv [OPTIONS] SOURCE... DIRECTORY
       rnfs mv [OPTIONS] -t DIRECTORY SOURCE...";

pub(crate) const MV_EXAMPLES: &str = "\
Examples:
  rnfs mv nfs://server/srv/data/a.txt nfs://server/srv/data/b.txt
  rnfs mv nfs://server/srv/data/a.txt nfs://server/srv/data/archive/
  rnfs mv ./upload.tar nfs://server/srv/data/           upload, then delete locally
  rnfs mv nfs://server/srv/data/x nfs://server/srv/backup/x   across exports";

/// `rnfs cp` arguments.
#[derive(Debug, Args)]
pub(crate) struct CpArgs {
    /// SOURCE... DEST: nfs://HOST[:PORT]/EXPORT/PATH URLs or local paths.
    #[arg(value_name = "PATH", required = true, value_parser = super::path_arg_parser())]
    paths: Vec<PathArg>,

    /// Copy directories recursively.
    #[arg(short = 'r', short_alias = 'R', long = "recursive")]
    recursive: bool,

    /// Preserve mode and times, and owner and group where they may be set
    /// (as root; else set-uid and set-gid bits are dropped).
    #[arg(short = 'p')]
    preserve: bool,

    /// Copy every SOURCE into DIRECTORY.
    #[arg(short = 't', long = "target-directory", value_name = "DIRECTORY",
          value_parser = super::path_arg_parser())]
    target_directory: Option<PathArg>,

    /// Copy up to N files at a time.
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    jobs: u32,

    /// Show progress even when standard error is not a terminal.
    #[arg(long)]
    progress: bool,

    /// Explain what is being done.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,

    #[command(flatten)]
    pub(crate) conn: ConnArgs,
}

/// `rnfs mv` arguments.
#[derive(Debug, Args)]
pub(crate) struct MvArgs {
    /// SOURCE... DEST: nfs://HOST[:PORT]/EXPORT/PATH URLs or local paths.
    #[arg(value_name = "PATH", required = true, value_parser = super::path_arg_parser())]
    paths: Vec<PathArg>,

    /// Move every SOURCE into DIRECTORY.
    #[arg(short = 't', long = "target-directory", value_name = "DIRECTORY",
          value_parser = super::path_arg_parser())]
    target_directory: Option<PathArg>,

    /// Copy up to N files at a time when moving between file systems.
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    jobs: u32,

    /// Show progress even when standard error is not a terminal.
    #[arg(long)]
    progress: bool,

    /// Explain what is being done.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,

    #[command(flatten)]
    pub(crate) conn: ConnArgs,
}

/// Where an object is.
#[derive(Debug, Clone)]
enum Node {
    Local(PathBuf),
    Nfs { target: Target, fh: FileHandle },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket or device: made anew by a recursive copy.
    Special(Special),
    /// A type not known here.
    Other,
}

/// A special file, as mknod(2) makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    Fifo,
    Socket,
    /// A character device: major and minor numbers.
    Char(u32, u32),
    /// A block device: major and minor numbers.
    Block(u32, u32),
}

impl Special {
    /// What GNU cp calls it in "cannot create ..." messages.
    fn what(self) -> &'static str {
        match self {
            Self::Fifo => "fifo",
            _ => "special file",
        }
    }

    fn of_local(m: &fs::Metadata) -> Option<Self> {
        use std::os::unix::fs::FileTypeExt;
        let ft = m.file_type();
        let dev = || {
            let rdev = m.rdev();
            let num = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
            (
                num(nix::sys::stat::major(rdev)),
                num(nix::sys::stat::minor(rdev)),
            )
        };
        if ft.is_fifo() {
            Some(Self::Fifo)
        } else if ft.is_socket() {
            Some(Self::Socket)
        } else if ft.is_char_device() {
            let (major, minor) = dev();
            Some(Self::Char(major, minor))
        } else if ft.is_block_device() {
            let (major, minor) = dev();
            Some(Self::Block(major, minor))
        } else {
            None
        }
    }
}

/// What cp needs of an object's attributes, local or NFS.
#[derive(Debug, Clone, Copy)]
struct Meta {
    kind: Kind,
    mode: u32,
    size: u64,
    /// Bytes allocated (st_blocks * 512, an NFS file's `used`).
    used: u64,
    /// Names the object has (hard links).
    nlink: u32,
    uid: u32,
    gid: u32,
    atime: SystemTime,
    mtime: SystemTime,
    /// Device (or fsid) and inode (or fileid): "the same file" test.
    id: (u64, u64),
}

impl Meta {
    fn of_attr(a: &Fattr3) -> Self {
        let time = |t: Nfstime3| {
            UNIX_EPOCH + Duration::new(u64::from(t.seconds), t.nseconds.min(999_999_999))
        };
        Self {
            kind: match a.ftype {
                Ftype3::Reg => Kind::File,
                Ftype3::Dir => Kind::Dir,
                Ftype3::Lnk => Kind::Symlink,
                Ftype3::Fifo => Kind::Special(Special::Fifo),
                Ftype3::Sock => Kind::Special(Special::Socket),
                Ftype3::Chr => Kind::Special(Special::Char(a.rdev.specdata1, a.rdev.specdata2)),
                Ftype3::Blk => Kind::Special(Special::Block(a.rdev.specdata1, a.rdev.specdata2)),
            },
            mode: a.mode & 0o7777,
            size: a.size,
            used: a.used,
            nlink: a.nlink,
            uid: a.uid,
            gid: a.gid,
            atime: time(a.atime),
            mtime: time(a.mtime),
            id: (a.fsid, a.fileid),
        }
    }

    fn of_local(m: &fs::Metadata) -> Self {
        let ft = m.file_type();
        Self {
            kind: if ft.is_file() {
                Kind::File
            } else if ft.is_dir() {
                Kind::Dir
            } else if ft.is_symlink() {
                Kind::Symlink
            } else {
                Special::of_local(m).map_or(Kind::Other, Kind::Special)
            },
            mode: m.mode() & 0o7777,
            size: m.len(),
            used: m.blocks().saturating_mul(512),
            nlink: u32::try_from(m.nlink()).unwrap_or(u32::MAX),
            uid: m.uid(),
            gid: m.gid(),
            atime: m.accessed().unwrap_or(UNIX_EPOCH),
            mtime: m.modified().unwrap_or(UNIX_EPOCH),
            id: (m.dev(), m.ino()),
        }
    }

    /// Whether the file has fewer blocks than its size needs: it has
    /// holes, which its copy keeps (GNU cp's `--sparse=auto` heuristic).
    fn probably_sparse(&self) -> bool {
        self.used / 512 < self.size / 512
    }
}

/// An object found: where, what, and how to name it in messages.
#[derive(Debug, Clone)]
struct Obj {
    node: Node,
    meta: Meta,
    shown: String,
    /// An NFS object's attributes (to open it).
    attr: Option<Fattr3>,
}

impl Obj {
    /// Whether `self` and `other` may be one file, reached by two names.
    /// Two sessions may reach one server (another host name, port or
    /// export), and a local path may be the file an NFS URL names (a local
    /// server, a mount): when sameness cannot be ruled out the answer is
    /// yes, for overwriting (or removing) the other is then losing the
    /// source.
    fn same_file(&self, other: &Obj) -> bool {
        let (a, b) = (&self.meta, &other.meta);
        let same_object = |x: &Meta, y: &Meta| {
            x.id.1 == y.id.1
                && x.size == y.size
                && x.mtime.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).ok()
                    == y.mtime.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).ok()
        };
        match (&self.node, &other.node) {
            (Node::Local(_), Node::Local(_)) => a.id == b.id,
            (Node::Nfs { target: ta, fh: fa }, Node::Nfs { target: tb, fh: fb }) => {
                if Arc::ptr_eq(&ta.session, &tb.session) {
                    a.id == b.id
                } else {
                    // One server through two sessions (or two exports of
                    // it): the same handle, or the same (fsid, fileid).
                    fa.as_bytes() == fb.as_bytes() || a.id == b.id
                }
            }
            // The fsid a server reports need not be the local device: the
            // file number, size and modification second must match.
            _ => same_object(a, b),
        }
    }
}

/// A name to create an object at: a directory and a name in it.
#[derive(Debug, Clone)]
enum Place {
    Local(PathBuf),
    Nfs {
        dir: Target,
        dir_fh: FileHandle,
        name: Vec<u8>,
    },
}

fn is_noent(e: &Error) -> bool {
    e.errno() == Errno::ENOENT as i32
}

impl Place {
    fn key(&self) -> PlaceKey {
        match self {
            Self::Local(p) => PlaceKey::Local(p.clone()),
            Self::Nfs { dir, dir_fh, name } => PlaceKey::Nfs(
                Arc::as_ptr(&dir.session).addr(),
                dir_fh.as_bytes().to_vec(),
                name.clone(),
            ),
        }
    }

    /// The object at this name, not following a symbolic link.
    fn lstat(&self, shown: &str) -> Result<Option<Obj>, Error> {
        match self {
            Self::Local(p) => match fs::symlink_metadata(p) {
                Ok(m) => Ok(Some(Obj {
                    node: Node::Local(p.clone()),
                    meta: Meta::of_local(&m),
                    shown: shown.to_owned(),
                    attr: None,
                })),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e.into()),
            },
            Self::Nfs { dir, dir_fh, name } => match lookup(&dir.session, dir_fh, name) {
                Ok((fh, attr)) => Ok(Some(Obj {
                    node: Node::Nfs {
                        target: dir.with_path(self.nfs_path()),
                        fh,
                    },
                    meta: Meta::of_attr(&attr),
                    shown: shown.to_owned(),
                    attr: Some(attr),
                })),
                Err(NfsError::Status(Nfsstat3::Noent)) => Ok(None),
                Err(e) => Err(e.into()),
            },
        }
    }

    /// The object a symbolic link at this name leads to.
    fn follow(&self, shown: &str) -> Result<Obj, Error> {
        match self {
            Self::Local(p) => Ok(Obj {
                node: Node::Local(p.clone()),
                meta: Meta::of_local(&fs::metadata(p)?),
                shown: shown.to_owned(),
                attr: None,
            }),
            Self::Nfs { dir, .. } => {
                let path = self.nfs_path();
                let res = resolve(&dir.session, &path, true)?;
                Ok(Obj {
                    node: Node::Nfs {
                        target: dir.with_path(path),
                        fh: res.fh,
                    },
                    meta: Meta::of_attr(&res.attr),
                    shown: shown.to_owned(),
                    attr: Some(res.attr),
                })
            }
        }
    }

    fn nfs_path(&self) -> String {
        match self {
            Self::Local(p) => p.display().to_string(),
            Self::Nfs { dir, name, .. } => join_path(&dir.path, &String::from_utf8_lossy(name)),
        }
    }

    fn mkdir(&self, mode: u32) -> Result<Node, Error> {
        match self {
            Self::Local(p) => {
                fs::DirBuilder::new().mode(mode).create(p)?;
                Ok(Node::Local(p.clone()))
            }
            Self::Nfs { dir, dir_fh, name } => {
                let nfs = dir.session.nfs();
                let attrs = Sattr3 {
                    mode: Some(mode),
                    ..Sattr3::default()
                };
                let created = nfs.mkdir(dir_fh, name, &attrs)?;
                let fh = match created.handle {
                    Some(fh) => fh,
                    None => nfs.lookup(dir_fh, name)?.0,
                };
                Ok(Node::Nfs {
                    target: dir.with_path(self.nfs_path()),
                    fh,
                })
            }
        }
    }

    fn symlink(&self, to: &[u8]) -> Result<(), Error> {
        match self {
            Self::Local(p) => Ok(std::os::unix::fs::symlink(OsStr::from_bytes(to), p)?),
            Self::Nfs { dir, dir_fh, name } => {
                dir.session
                    .nfs()
                    .symlink(dir_fh, name, to, &Sattr3::default())?;
                Ok(())
            }
        }
    }

    /// Makes this name a hard link to the object at `first`.
    fn link_to(&self, first: &Place) -> Result<(), Error> {
        match (self, first) {
            (Self::Local(p), Self::Local(f)) => Ok(fs::hard_link(f, p)?),
            (
                Self::Nfs { dir, dir_fh, name },
                Self::Nfs {
                    dir: first_dir,
                    dir_fh: first_dir_fh,
                    name: first_name,
                },
            ) if Arc::ptr_eq(&dir.session, &first_dir.session) => {
                let (fh, _) = dir.session.nfs().lookup(first_dir_fh, first_name)?;
                dir.session.nfs().link(&fh, dir_fh, name)?;
                Ok(())
            }
            _ => Err(Error::Errno(Errno::EXDEV as i32)),
        }
    }

    /// Makes the special file `what` at this name with permissions `mode`.
    fn mknod(&self, what: Special, mode: u32) -> Result<Node, Error> {
        match self {
            Self::Local(p) => {
                use nix::sys::stat::{makedev, mknod, Mode, SFlag};
                let perm = Mode::from_bits_truncate(mode & 0o777);
                let made = match what {
                    Special::Fifo => nix::unistd::mkfifo(p.as_path(), perm),
                    Special::Socket => mknod(p.as_path(), SFlag::S_IFSOCK, perm, 0),
                    Special::Char(major, minor) => mknod(
                        p.as_path(),
                        SFlag::S_IFCHR,
                        perm,
                        makedev(major.into(), minor.into()),
                    ),
                    Special::Block(major, minor) => mknod(
                        p.as_path(),
                        SFlag::S_IFBLK,
                        perm,
                        makedev(major.into(), minor.into()),
                    ),
                };
                made.map_err(|e| Error::Errno(e as i32))?;
                Ok(Node::Local(p.clone()))
            }
            Self::Nfs { dir, dir_fh, name } => {
                let nfs = dir.session.nfs();
                let attrs = Sattr3 {
                    mode: Some(mode & 0o777),
                    ..Sattr3::default()
                };
                let device = |major, minor| Devicedata3 {
                    dev_attributes: attrs,
                    spec: Specdata3 {
                        specdata1: major,
                        specdata2: minor,
                    },
                };
                let data = match what {
                    Special::Fifo => Mknoddata3::Fifo(attrs),
                    Special::Socket => Mknoddata3::Sock(attrs),
                    Special::Char(major, minor) => Mknoddata3::Chr(device(major, minor)),
                    Special::Block(major, minor) => Mknoddata3::Blk(device(major, minor)),
                };
                let created = nfs.mknod(dir_fh, name, data)?;
                let fh = match created.handle {
                    Some(fh) => fh,
                    None => nfs.lookup(dir_fh, name)?.0,
                };
                Ok(Node::Nfs {
                    target: dir.with_path(self.nfs_path()),
                    fh,
                })
            }
        }
    }

    /// A name beside this one (in the same directory) to make a
    /// replacement at, before renaming it over this one.
    fn beside(&self) -> Place {
        let hidden = |name: &[u8]| {
            let mut n = b".".to_vec();
            n.extend_from_slice(name);
            n.extend_from_slice(format!(".rnfs-mv-{}", std::process::id()).as_bytes());
            n
        };
        match self {
            Self::Local(p) => {
                let name = p.file_name().map_or(&b""[..], OsStrExt::as_bytes);
                Self::Local(p.with_file_name(OsStr::from_bytes(&hidden(name))))
            }
            Self::Nfs { dir, dir_fh, name } => Self::Nfs {
                dir: dir.clone(),
                dir_fh: *dir_fh,
                name: hidden(name),
            },
        }
    }

    /// Renames the object at this name to `to`, in the same directory.
    fn rename_onto(&self, to: &Place) -> Result<(), Error> {
        match (self, to) {
            (Self::Local(a), Self::Local(b)) => Ok(fs::rename(a, b)?),
            (
                Self::Nfs { dir, dir_fh, name },
                Self::Nfs {
                    dir_fh: to_fh,
                    name: to_name,
                    ..
                },
            ) => {
                dir.session.nfs().rename(dir_fh, name, to_fh, to_name)?;
                Ok(())
            }
            _ => Err(Error::Errno(Errno::EXDEV as i32)),
        }
    }

    /// Removes the non-directory at this name.
    fn remove(&self) -> Result<(), Error> {
        match self {
            Self::Local(p) => Ok(fs::remove_file(p)?),
            Self::Nfs { dir, dir_fh, name } => {
                dir.session.nfs().remove(dir_fh, name)?;
                Ok(())
            }
        }
    }

    /// Opens the regular file at this name for writing from its start:
    /// `existing` truncated, else created with `mode`. Also its owner and
    /// group, where known, and whether it is a regular file (which may be
    /// given holes).
    fn create(
        &self,
        existing: Option<&Obj>,
        mode: u32,
        budget: &Arc<DirtyBudget>,
    ) -> Result<(Writer, Node, Option<Owner>, bool), Error> {
        match self {
            Self::Local(p) => {
                let path = match existing {
                    Some(Obj {
                        node: Node::Local(e),
                        ..
                    }) => e.clone(),
                    _ => p.clone(),
                };
                let f = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(mode)
                    .open(&path)?;
                let meta = f.metadata().ok();
                let owner = meta.as_ref().map(|m| (m.uid(), m.gid()));
                // Holes only in a regular file: a device, FIFO or
                // /dev/null opened here cannot seek past zeros (or keeps
                // its old bytes there), as GNU cp.
                let regular = meta.is_some_and(|m| m.is_file());
                Ok((Writer::Local(f), Node::Local(path), owner, regular))
            }
            Self::Nfs { dir, dir_fh, name } => {
                let nfs = dir.session.nfs();
                let truncate = Sattr3 {
                    size: Some(0),
                    ..Sattr3::default()
                };
                let (target, fh, attr) = match existing {
                    Some(Obj {
                        node: Node::Nfs { target, fh },
                        ..
                    }) => {
                        let wcc = nfs.setattr(fh, &truncate, None)?;
                        (target.clone(), *fh, wcc.after)
                    }
                    _ => {
                        let how = CreateHow3::Guarded(Sattr3 {
                            mode: Some(mode),
                            ..Sattr3::default()
                        });
                        let (fh, attr) = match nfs.create(dir_fh, name, how) {
                            Ok(c) => match c.handle {
                                Some(fh) => (fh, c.attr),
                                None => nfs.lookup(dir_fh, name)?,
                            },
                            // Created meanwhile by someone else: overwrite it.
                            Err(NfsError::Status(Nfsstat3::Exist)) => {
                                let (fh, _) = nfs.lookup(dir_fh, name)?;
                                (fh, nfs.setattr(&fh, &truncate, None)?.after)
                            }
                            Err(e) => return Err(e.into()),
                        };
                        (dir.with_path(self.nfs_path()), fh, attr)
                    }
                };
                let attr = match attr {
                    Some(a) => a,
                    None => nfs.getattr(&fh)?,
                };
                let file = open_nfs(&target.session, fh, &attr, budget);
                let owner = Some((attr.uid, attr.gid));
                let regular = attr.ftype == Ftype3::Reg;
                Ok((
                    Writer::Nfs(Box::new(file), 0),
                    Node::Nfs { target, fh },
                    owner,
                    regular,
                ))
            }
        }
    }
}

/// A regular file to copy.
#[derive(Debug)]
struct FileJob {
    src: Obj,
    dst: Place,
    dst_shown: String,
    /// The regular file already at `dst` (a symbolic link there followed).
    existing: Option<Obj>,
}

/// A directory whose mode and times are set once its contents are copied.
#[derive(Debug)]
struct DirFix {
    node: Node,
    shown: String,
    src: Meta,
    new: bool,
    /// An existing directory's owner and group.
    owner: Option<Owner>,
}

/// A user and group id.
type Owner = (u32, u32);

/// The mode -p gives a copy of `src`: the source's, but when the copy's
/// owner and group could not be made the source's, without the set-uid
/// and set-gid bits (and, on a non-directory, the sticky bit), as GNU cp
/// does: a set-uid program must not come to run as whoever the copy
/// belongs to.
fn preserved_mode(src: &Meta, owner_kept: bool) -> u32 {
    let mode = src.mode & 0o7777;
    match (owner_kept, src.kind) {
        (true, _) => mode,
        (false, Kind::Dir) => mode & !0o6000,
        (false, _) => mode & !0o7000,
    }
}

#[derive(Debug, Default)]
struct Plan {
    files: Vec<FileJob>,
    /// Names made as hard links once the files are copied.
    links: Vec<LinkJob>,
    dirs: Vec<DirFix>,
    bytes: u64,
    /// Where non-directories are made (or to be): GNU cp will not
    /// overwrite a file it has just created with another source.
    made: HashSet<PlaceKey>,
    /// Where this plan copies sources with other names to, when hard
    /// links are kept: kept for later operands only once the plan has
    /// been carried out whole ([`Copier::keep_copies`]), so that no later
    /// name is linked to a copy that failed.
    copies: HashMap<SourceId, (Place, String)>,
    /// How many directories deep the walk is.
    depth: usize,
    /// The files already at destinations that are written (as
    /// [`Copier::source_id`] tells them): two names of one file (a
    /// symbolic link to another destination, hard links) are not both
    /// written, as GNU cp's check of the files it has seen.
    made_ids: HashSet<SourceId>,
}

/// How many directories deep a tree is copied: deeper is refused rather
/// than overflowing the stack (say on a loop a server makes).
const MAX_TREE_DEPTH: usize = 4096;

/// A place, by its directory and name, to tell two sources that go to
/// one name apart.
#[derive(Debug, PartialEq, Eq, Hash)]
enum PlaceKey {
    Local(PathBuf),
    /// The session (its address), the directory's handle, the name.
    Nfs(usize, Vec<u8>, Vec<u8>),
}

/// One cp or mv run's settings.
struct Copier<'a> {
    ctx: &'a Ctx,
    recursive: bool,
    preserve: bool,
    jobs: usize,
    progress: bool,
    verbose: bool,
    umask: u32,
    /// Hard links among the sources are kept (mv, as GNU mv): where the
    /// first name of each source with several names was copied to.
    links: Option<Mutex<HashMap<SourceId, (Place, String)>>>,
}

/// Which object a source is, across the command's sources: the server
/// (empty for a local file) and (fsid, fileid) or (dev, ino).
type SourceId = (String, (u64, u64));

/// A name to make as a hard link to a copy made before.
#[derive(Debug)]
struct LinkJob {
    /// Where the first name was copied to, and how it is shown.
    first: (Place, String),
    dst: Place,
    dst_shown: String,
    /// The non-directory at `dst`, to replace.
    existing: Option<Obj>,
}

/// Splits operands into sources and destination (`-t` or the last one).
fn operands<'p>(
    ctx: &Ctx,
    paths: &'p [PathArg],
    target_dir: Option<&'p PathArg>,
) -> Option<(&'p [PathArg], &'p PathArg)> {
    match target_dir {
        Some(t) => Some((paths, t)),
        None => match paths {
            [only] => {
                ctx.fail(
                    1,
                    format_args!("missing destination file operand after '{}'", only.text()),
                );
                None
            }
            [srcs @ .., dest] => Some((srcs, dest)),
            [] => None,
        },
    }
}

/// The name an operand is copied under inside a directory.
fn basename(arg: &PathArg) -> Option<Vec<u8>> {
    match arg {
        PathArg::Local(p) => p.file_name().map(|n| n.as_bytes().to_vec()).or_else(|| {
            fs::canonicalize(p)
                .ok()?
                .file_name()
                .map(|n| n.as_bytes().to_vec())
        }),
        PathArg::Nfs(u) => u.url.components().last().map(|c| c.as_bytes().to_vec()),
    }
}

impl Copier<'_> {
    fn fail(&self, msg: impl std::fmt::Display) {
        self.ctx.fail(1, msg);
    }

    /// Whether `arg` ends in `/` and names a symbolic link (which the `/`
    /// follows).
    fn symlink_with_slash(&self, arg: &PathArg) -> bool {
        if !arg.trailing_slash() {
            return false;
        }
        match arg {
            PathArg::Local(p) => {
                let raw = p.as_os_str().as_bytes();
                let end = raw.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
                end > 0
                    && fs::symlink_metadata(Path::new(OsStr::from_bytes(&raw[..end])))
                        .is_ok_and(|m| m.file_type().is_symlink())
            }
            PathArg::Nfs(u) => self
                .ctx
                .remotes
                .open(&u.url)
                .and_then(|t| t.resolve(false))
                .is_ok_and(|r| r.attr.ftype == Ftype3::Lnk),
        }
    }

    /// Stats an operand, following a final symbolic link when `follow`.
    fn stat(&self, arg: &PathArg, follow: bool) -> Result<Obj, Error> {
        match arg {
            PathArg::Local(p) => {
                let m = if follow {
                    fs::metadata(p)?
                } else {
                    fs::symlink_metadata(p)?
                };
                Ok(Obj {
                    node: Node::Local(p.clone()),
                    meta: Meta::of_local(&m),
                    shown: arg.text(),
                    attr: None,
                })
            }
            PathArg::Nfs(u) => {
                let target = self.ctx.remotes.open(&u.url)?;
                // `NAME/` and `NAME/.` name a directory, as a local path
                // does: a link there is followed, a non-directory refused.
                let dir_only = arg.trailing_slash() || arg.names_dot();
                let res = target.resolve(follow || dir_only)?;
                if dir_only && res.attr.ftype != Ftype3::Dir {
                    return Err(Nfsstat3::Notdir.into());
                }
                Ok(Obj {
                    node: Node::Nfs { target, fh: res.fh },
                    meta: Meta::of_attr(&res.attr),
                    shown: arg.text(),
                    attr: Some(res.attr),
                })
            }
        }
    }

    /// The place an operand names (its parent must exist).
    fn place_of(&self, arg: &PathArg) -> Result<Place, Error> {
        match arg {
            PathArg::Local(p) => Ok(Place::Local(p.clone())),
            PathArg::Nfs(u) => {
                let target = self.ctx.remotes.open(&u.url)?;
                let Some((parent, name)) = target.split() else {
                    return Err(Nfsstat3::Exist.into());
                };
                let dir = resolve(&target.session, parent, true)?;
                if dir.attr.ftype != Ftype3::Dir {
                    return Err(Nfsstat3::Notdir.into());
                }
                Ok(Place::Nfs {
                    name: name.as_bytes().to_vec(),
                    dir: target.with_path(parent.to_owned()),
                    dir_fh: dir.fh,
                })
            }
        }
    }

    /// The destination of each source: `(place, shown)`; `None` after an
    /// error (reported) that stops the whole command.
    fn destination(&self, srcs: &[PathArg], dest: &PathArg, must_be_dir: bool) -> Option<Dest> {
        let dest_obj = match self.stat(dest, true) {
            Ok(o) => Some(o),
            Err(e) if is_noent(&e) => None,
            Err(e) => {
                self.fail(format_args!("cannot stat '{}': {e}", dest.text()));
                return None;
            }
        };
        match dest_obj {
            Some(o) if o.meta.kind == Kind::Dir => Some(Dest::Into(Box::new(o))),
            _ if srcs.len() > 1 || must_be_dir => {
                self.fail(format_args!("target '{}' is not a directory", dest.text()));
                None
            }
            _ => Some(Dest::As(dest.clone())),
        }
    }

    /// Where `src` goes under `dest`.
    fn target_for(&self, src: &PathArg, dest: &Dest) -> Result<(Place, String), Error> {
        match dest {
            Dest::Into(dir) => {
                let name = basename(src).ok_or(Error::Errno(Errno::EINVAL as i32))?;
                let shown = child_shown(&dir.shown, &name);
                Ok((child_place(&dir.node, &name), shown))
            }
            Dest::As(arg) => Ok((self.place_of(arg)?, arg.text())),
        }
    }

    /// [`Self::walk`] on a thread whose stack holds [`MAX_TREE_DEPTH`]
    /// levels of it (unoptimized builds take over 10 KiB a level).
    fn walk_tree(&self, src: &Obj, dst: &Place, dst_shown: &str, plan: &mut Plan) -> bool {
        const STACK: usize = 256 << 20;
        std::thread::scope(|scope| {
            let walker = std::thread::Builder::new()
                .name("walk".into())
                .stack_size(STACK)
                .spawn_scoped(scope, || self.walk(src, dst, dst_shown, plan));
            match walker {
                Ok(walker) => walker.join().unwrap_or(false),
                Err(e) => {
                    self.fail(format_args!(
                        "cannot copy '{}': {}",
                        src.shown,
                        Error::Io(e)
                    ));
                    false
                }
            }
        })
    }

    /// Whether the non-directory `src` may replace `existing` at
    /// `dst_shown`: not a directory, nor `src` itself (reported as GNU cp
    /// does).
    fn may_replace(&self, src: &Obj, existing: &Obj, dst_shown: &str) -> bool {
        if existing.meta.kind == Kind::Dir {
            self.fail(format_args!(
                "cannot overwrite directory '{dst_shown}' with non-directory"
            ));
            return false;
        }
        if existing.same_file(src) {
            self.fail(format_args!(
                "'{}' and '{dst_shown}' are the same file",
                src.shown
            ));
            return false;
        }
        true
    }

    /// Walks `src` into `plan`: creates directories and links at `dst`,
    /// lists regular files. False if anything failed (reported).
    fn walk(&self, src: &Obj, dst: &Place, dst_shown: &str, plan: &mut Plan) -> bool {
        // Two sources to one name (`cp a/x b/x DIR`): the second would
        // overwrite (or, copied at once, mingle with) the first.
        let key = dst.key();
        if plan.made.contains(&key) {
            if src.meta.kind == Kind::Dir {
                self.fail(format_args!(
                    "cannot overwrite non-directory '{dst_shown}' with directory '{}'",
                    src.shown
                ));
            } else {
                self.fail(format_args!(
                    "will not overwrite just-created '{dst_shown}' with '{}'",
                    src.shown
                ));
            }
            return false;
        }
        let existing = match dst.lstat(dst_shown) {
            Ok(e) => e,
            Err(e) => {
                self.fail(format_args!("cannot stat '{dst_shown}': {e}"));
                return false;
            }
        };
        if src.meta.kind != Kind::Dir {
            if let Some(first) = self.first_copy(src, plan) {
                if existing.as_ref().is_some_and(|e| e.meta.kind == Kind::Dir) {
                    self.fail(format_args!(
                        "cannot overwrite directory '{dst_shown}' with non-directory"
                    ));
                    return false;
                }
                plan.made.insert(key);
                plan.links.push(LinkJob {
                    first,
                    dst: dst.clone(),
                    dst_shown: dst_shown.to_owned(),
                    existing,
                });
                return true;
            }
        }
        let made = match src.meta.kind {
            Kind::Dir => return self.walk_dir(src, dst, dst_shown, existing, plan),
            // Without -r, a local FIFO or device is read as GNU cp reads
            // it (`cp /dev/null FILE` makes an empty file).
            Kind::File | Kind::Special(_)
                if src.meta.kind == Kind::File
                    || (!self.recursive && matches!(src.node, Node::Local(_))) =>
            {
                let existing = match existing {
                    Some(e) if e.meta.kind == Kind::Symlink => match dst.follow(dst_shown) {
                        Ok(to) => Some(to),
                        Err(_) => {
                            self.fail(format_args!(
                                "not writing through dangling symlink '{dst_shown}'"
                            ));
                            return false;
                        }
                    },
                    other => other,
                };
                if let Some(e) = &existing {
                    if !self.may_replace(src, e, dst_shown) {
                        return false;
                    }
                    if !plan.made_ids.insert(Self::source_id(e)) {
                        self.fail(format_args!(
                            "will not overwrite just-created '{dst_shown}' with '{}'",
                            src.shown
                        ));
                        return false;
                    }
                }
                plan.bytes += src.meta.size;
                plan.made.insert(key);
                plan.files.push(FileJob {
                    src: src.clone(),
                    dst: dst.clone(),
                    dst_shown: dst_shown.to_owned(),
                    existing,
                });
                true
            }
            Kind::Symlink => {
                let made = self.copy_link(src, dst, dst_shown, existing);
                if made {
                    plan.made.insert(key);
                }
                made
            }
            Kind::Special(what) if self.recursive => {
                let made = self.copy_special(src, what, dst, dst_shown, existing);
                if made {
                    plan.made.insert(key);
                }
                made
            }
            Kind::File | Kind::Special(_) | Kind::Other => {
                self.fail(format_args!(
                    "cannot copy special file '{}': {}",
                    src.shown,
                    Error::Errno(Errno::EOPNOTSUPP as i32)
                ));
                false
            }
        };
        if made {
            self.remember_copy(src, dst, dst_shown, plan);
        }
        made
    }

    /// The identity of `src` among the sources of this command.
    fn source_id(src: &Obj) -> SourceId {
        let origin = match &src.node {
            Node::Local(_) => String::new(),
            Node::Nfs { target, .. } => format!(
                "{}:{:?}",
                target.export_url.host, target.export_url.nfs_port
            ),
        };
        (origin, src.meta.id)
    }

    /// Where a source with other names was copied to before, when hard
    /// links are kept: `src` is then made a link to it. Looked up whatever
    /// `src`'s link count, as GNU mv: its other name may already have been
    /// moved (copied, then removed).
    /// Looked up in `plan` (copies to be made) and then among the copies
    /// earlier plans made.
    fn first_copy(&self, src: &Obj, plan: &Plan) -> Option<(Place, String)> {
        let links = self.links.as_ref()?;
        let id = Self::source_id(src);
        if let Some(first) = plan.copies.get(&id) {
            return Some(first.clone());
        }
        links.lock().ok()?.get(&id).cloned()
    }

    /// Records in `plan` that `src`, a non-directory with other names, is
    /// copied to `dst`, when hard links are kept.
    fn remember_copy(&self, src: &Obj, dst: &Place, dst_shown: &str, plan: &mut Plan) {
        if self.links.is_none() || src.meta.kind == Kind::Dir || src.meta.nlink < 2 {
            return;
        }
        plan.copies
            .insert(Self::source_id(src), (dst.clone(), dst_shown.to_owned()));
    }

    /// Keeps the `copies` of a plan carried out whole, for later operands
    /// to link to.
    fn keep_copies(&self, copies: HashMap<SourceId, (Place, String)>) {
        if let Some(Ok(mut links)) = self.links.as_ref().map(Mutex::lock) {
            links.extend(copies);
        }
    }

    /// Says that the copy made at `from` was renamed to `to`.
    fn copy_renamed(&self, from: &Place, to: &Place) {
        if let Some(Ok(mut links)) = self.links.as_ref().map(Mutex::lock) {
            let from = from.key();
            for (place, _) in links.values_mut() {
                if place.key() == from {
                    *place = to.clone();
                }
            }
        }
    }

    /// Makes a planned hard link. False if it failed (reported).
    fn make_link(&self, job: &LinkJob) -> bool {
        let (first, first_shown) = &job.first;
        if job.existing.is_some() {
            if let Err(e) = job.dst.remove() {
                self.fail(format_args!("cannot remove '{}': {e}", job.dst_shown));
                return false;
            }
        }
        match job.dst.link_to(first) {
            Ok(()) => true,
            Err(e) => {
                self.fail(format_args!(
                    "cannot create hard link '{}' to '{first_shown}': {e}",
                    job.dst_shown
                ));
                false
            }
        }
    }

    fn walk_dir(
        &self,
        src: &Obj,
        dst: &Place,
        dst_shown: &str,
        existing: Option<Obj>,
        plan: &mut Plan,
    ) -> bool {
        if !self.recursive {
            self.fail(format_args!(
                "-r not specified; omitting directory '{}'",
                src.shown
            ));
            return false;
        }
        if plan.depth >= MAX_TREE_DEPTH {
            self.fail(format_args!(
                "cannot copy '{}': directory tree too deep",
                src.shown
            ));
            return false;
        }
        let (node, new, owner) = match existing {
            Some(e) if e.meta.kind == Kind::Dir => (e.node, false, Some((e.meta.uid, e.meta.gid))),
            Some(_) => {
                self.fail(format_args!(
                    "cannot overwrite non-directory '{dst_shown}' with directory '{}'",
                    src.shown
                ));
                return false;
            }
            // Writable by us until its contents are in; the mode is set last.
            None => match dst.mkdir((src.meta.mode & 0o777) | 0o700) {
                Ok(node) => (node, true, None),
                Err(e) => {
                    self.fail(format_args!("cannot create directory '{dst_shown}': {e}"));
                    return false;
                }
            },
        };
        if self.verbose {
            self.ctx
                .say(format_args!("'{}' -> '{dst_shown}'", src.shown));
        }
        let children = match children(src) {
            Ok(c) => c,
            Err(e) => {
                self.fail(format_args!("cannot access '{}': {e}", src.shown));
                return false;
            }
        };
        let mut ok = true;
        plan.depth += 1;
        for (name, child) in children {
            let place = child_place(&node, &name);
            let shown = child_shown(dst_shown, &name);
            ok &= self.walk(&child, &place, &shown, plan);
        }
        plan.depth -= 1;
        plan.dirs.push(DirFix {
            node,
            shown: dst_shown.to_owned(),
            src: src.meta,
            new,
            owner,
        });
        ok
    }

    fn copy_link(&self, src: &Obj, dst: &Place, dst_shown: &str, existing: Option<Obj>) -> bool {
        let to = match read_link(&src.node) {
            Ok(t) => t,
            Err(e) => {
                self.fail(format_args!(
                    "cannot read symbolic link '{}': {e}",
                    src.shown
                ));
                return false;
            }
        };
        if let Some(e) = existing {
            if e.meta.kind == Kind::Dir {
                self.fail(format_args!(
                    "cannot overwrite directory '{dst_shown}' with non-directory"
                ));
                return false;
            }
            if let Err(e) = dst.remove() {
                self.fail(format_args!("cannot remove '{dst_shown}': {e}"));
                return false;
            }
        }
        match dst.symlink(&to) {
            Ok(()) => {
                if self.verbose {
                    self.ctx
                        .say(format_args!("'{}' -> '{dst_shown}'", src.shown));
                }
                true
            }
            Err(e) => {
                self.fail(format_args!(
                    "cannot create symbolic link '{dst_shown}': {e}"
                ));
                false
            }
        }
    }

    /// Makes the special file `src` (a FIFO, socket or device) anew at
    /// `dst`, as GNU cp -R does: a non-directory there is removed first.
    fn copy_special(
        &self,
        src: &Obj,
        what: Special,
        dst: &Place,
        dst_shown: &str,
        existing: Option<Obj>,
    ) -> bool {
        if let Some(e) = existing {
            if !self.may_replace(src, &e, dst_shown) {
                return false;
            }
            if let Err(e) = dst.remove() {
                self.fail(format_args!("cannot remove '{dst_shown}': {e}"));
                return false;
            }
        }
        let node = match dst.mknod(what, self.new_file_mode(&src.meta)) {
            Ok(node) => node,
            Err(e) => {
                self.fail(format_args!(
                    "cannot create {} '{dst_shown}': {e}",
                    what.what()
                ));
                return false;
            }
        };
        if self.verbose {
            self.ctx
                .say(format_args!("'{}' -> '{dst_shown}'", src.shown));
        }
        if self.preserve {
            return self.set_attrs(&node, dst_shown, &src.meta, false, None);
        }
        true
    }

    /// Copies the planned files, `jobs` at a time, then fixes directories.
    /// False if anything failed.
    fn execute(&self, plan: Plan) -> bool {
        let total_files = plan.files.len();
        let bar = progress::bar(plan.bytes, total_files, self.progress);
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let ok = AtomicBool::new(true);
        let workers = self.jobs.min(total_files).max(1);
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    while let Some(job) = plan.files.get(next.fetch_add(1, Ordering::Relaxed)) {
                        if !self.copy_file(job, &bar) {
                            ok.store(false, Ordering::Relaxed);
                        }
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        bar.set_prefix(format!("{n}/{total_files} files"));
                    }
                });
            }
        });
        if self.progress && !bar.is_hidden() && !io::IsTerminal::is_terminal(&io::stderr()) {
            bar.finish();
        } else {
            bar.finish_and_clear();
        }
        let mut ok = ok.into_inner();
        for link in &plan.links {
            ok &= self.make_link(link);
        }
        // Children were pushed before their parents: deepest first.
        for dir in &plan.dirs {
            ok &= self.fix_dir(dir);
        }
        ok
    }

    fn new_file_mode(&self, src: &Meta) -> u32 {
        if self.preserve {
            src.mode & 0o7777
        } else {
            src.mode & 0o777 & !self.umask
        }
    }

    fn copy_file(&self, job: &FileJob, bar: &ProgressBar) -> bool {
        let src = &job.src;
        let dst = &job.dst_shown;
        let (src_session, dst_session) = (session_of(&src.node), place_session(&job.dst));
        let chunk = chunk_size(src_session, dst_session);
        let budget = self.ctx.remotes.budget();
        let mut reader = match &src.node {
            Node::Local(p) => match File::open(p) {
                Ok(f) => Reader::Local(f),
                Err(e) => {
                    self.fail(format_args!(
                        "cannot open '{}' for reading: {}",
                        src.shown,
                        Error::Io(e)
                    ));
                    return false;
                }
            },
            Node::Nfs { target, fh } => {
                let attr = match src.attr {
                    Some(a) => a,
                    None => match target.session.nfs().getattr(fh) {
                        Ok(a) => a,
                        Err(e) => {
                            self.fail(format_args!(
                                "cannot stat '{}': {}",
                                src.shown,
                                Error::from(e)
                            ));
                            return false;
                        }
                    },
                };
                // As open(2) on a kernel mount asks ACCESS: an unreadable
                // (or vanished) source must fail before the destination
                // is created or truncated.
                let readable = target
                    .session
                    .nfs()
                    .access(fh, ACCESS3_READ)
                    .map_err(Error::from)
                    .and_then(|(granted, _)| match granted & ACCESS3_READ {
                        0 => Err(Error::Errno(Errno::EACCES as i32)),
                        _ => Ok(()),
                    });
                if let Err(e) = readable {
                    self.fail(format_args!("cannot open '{}' for reading: {e}", src.shown));
                    return false;
                }
                Reader::Nfs(Box::new(open_nfs(&target.session, *fh, &attr, budget)), 0)
            }
        };
        // The set-uid, set-gid and sticky bits come last, with the owner.
        let mode = self.new_file_mode(&src.meta) & 0o777;
        let (mut writer, node, owner, regular) =
            match job.dst.create(job.existing.as_ref(), mode, budget) {
                Ok(w) => w,
                Err(e) => {
                    // open(2) of a missing `name/` with O_CREAT fails EISDIR;
                    // GNU cp tells it as ENOTDIR, the name not being one.
                    let e = if e.errno() == Errno::EISDIR as i32 && dst.ends_with('/') {
                        Error::Errno(Errno::ENOTDIR as i32)
                    } else {
                        e
                    };
                    self.fail(format_args!("cannot create regular file '{dst}': {e}"));
                    return false;
                }
            };
        let mut buf = vec![0; chunk];
        // Holes only where the destination is a regular file: elsewhere
        // (a block device, a FIFO, /dev/null) zeros are written densely.
        let holes = regular && src.meta.probably_sparse();
        match pump(&mut reader, &mut writer, &mut buf, holes, |n| bar.inc(n)) {
            Ok(()) => {}
            Err(Side::Read(e)) => {
                self.fail(format_args!("error reading '{}': {e}", src.shown));
                return false;
            }
            Err(Side::Write(e)) => {
                self.fail(format_args!("error writing '{dst}': {e}"));
                return false;
            }
        }
        if self.preserve {
            if let Writer::Local(f) = &writer {
                let times = FileTimes::new()
                    .set_accessed(src.meta.atime)
                    .set_modified(src.meta.mtime);
                // On a network or FUSE file system this may write back the
                // data first, and fail for it: the copy has then failed.
                if let Err(e) = f.set_times(times) {
                    self.fail(format_args!(
                        "preserving times for '{dst}': {}",
                        Error::Io(e)
                    ));
                    return false;
                }
            }
        }
        let local = writer.is_local();
        if let Err(e) = writer.finish() {
            if local {
                self.fail(format_args!("failed to close '{dst}': {e}"));
            } else {
                self.fail(format_args!("error writing '{dst}': {e}"));
            }
            return false;
        }
        if self.verbose {
            bar.suspend(|| self.ctx.say(format_args!("'{}' -> '{dst}'", src.shown)));
        }
        if self.preserve {
            return self.set_attrs(&node, dst, &src.meta, true, owner);
        }
        true
    }

    /// Sets the mode of `node`, and with -p its owner (where it may be
    /// set), its times and the source's mode (see [`preserved_mode`]);
    /// `times_done` when a local file's times were set through its writer,
    /// `owner` the copy's owner and group where known.
    fn set_attrs(
        &self,
        node: &Node,
        shown: &str,
        src: &Meta,
        times_done: bool,
        owner: Option<Owner>,
    ) -> bool {
        match node {
            Node::Local(p) => {
                let mode = if self.preserve {
                    preserved_mode(src, set_owner_local(p, src, owner))
                } else {
                    self.new_file_mode(src)
                };
                if self.preserve && !times_done {
                    // By name: opening a FIFO would wait for a writer.
                    if let Err(e) = set_times_at(p, [src.atime, src.mtime]) {
                        self.fail(format_args!(
                            "preserving times for '{shown}': {}",
                            Error::Io(e)
                        ));
                        return false;
                    }
                }
                if let Err(e) = fs::set_permissions(p, fs::Permissions::from_mode(mode)) {
                    self.fail(format_args!(
                        "preserving permissions for '{shown}': {}",
                        Error::Io(e)
                    ));
                    return false;
                }
                true
            }
            Node::Nfs { target, fh } => {
                let nfs = target.session.nfs();
                let mode = if self.preserve {
                    preserved_mode(src, set_owner_nfs(nfs, fh, src, owner))
                } else {
                    self.new_file_mode(src)
                };
                let client_time = |t: SystemTime| {
                    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
                    SetTime::SetToClientTime(Nfstime3 {
                        seconds: u32::try_from(d.as_secs()).unwrap_or(u32::MAX),
                        nseconds: d.subsec_nanos(),
                    })
                };
                let mut attrs = Sattr3 {
                    mode: Some(mode),
                    ..Sattr3::default()
                };
                if self.preserve {
                    attrs.atime = client_time(src.atime);
                    attrs.mtime = client_time(src.mtime);
                }
                if let Err(e) = nfs.setattr(fh, &attrs, None) {
                    self.fail(format_args!(
                        "preserving permissions for '{shown}': {}",
                        Error::from(e)
                    ));
                    return false;
                }
                true
            }
        }
    }

    fn fix_dir(&self, dir: &DirFix) -> bool {
        // New directories get their final mode; -p also sets existing ones'.
        if !dir.new && !self.preserve {
            return true;
        }
        self.set_attrs(&dir.node, &dir.shown, &dir.src, false, dir.owner)
    }
}

/// Sets the access and modification times of the object at `p` (a
/// symbolic link followed) by name, without opening it.
fn set_times_at(p: &Path, [atime, mtime]: [SystemTime; 2]) -> io::Result<()> {
    use nix::sys::stat::{utimensat, UtimensatFlags};
    use nix::sys::time::TimeSpec;
    let spec = |t: SystemTime| TimeSpec::from(t.duration_since(UNIX_EPOCH).unwrap_or_default());
    utimensat(
        nix::fcntl::AT_FDCWD,
        p,
        &spec(atime),
        &spec(mtime),
        UtimensatFlags::FollowSymlink,
    )
    .map_err(io::Error::from)
}

/// Gives the local copy `p` the owner and group of `src`, as GNU cp -p:
/// tried whatever our uid (the group alone may then be set), failures
/// ignored. Whether the copy has both.
fn set_owner_local(p: &Path, src: &Meta, owner: Option<Owner>) -> bool {
    use std::os::unix::fs::chown;
    let owner = match owner {
        Some(o) => o,
        None => match fs::metadata(p) {
            Ok(m) => (m.uid(), m.gid()),
            Err(_) => return false,
        },
    };
    if owner == (src.uid, src.gid) {
        return true;
    }
    if chown(p, Some(src.uid), Some(src.gid)).is_ok() {
        return true;
    }
    if owner.1 != src.gid {
        let _ = chown(p, None, Some(src.gid));
    }
    false
}

/// [`set_owner_local`] for the NFS copy `fh`.
fn set_owner_nfs(
    nfs: &rnfs_client::NfsClient,
    fh: &FileHandle,
    src: &Meta,
    owner: Option<Owner>,
) -> bool {
    let owner = match owner {
        Some(o) => o,
        None => match nfs.getattr(fh) {
            Ok(a) => (a.uid, a.gid),
            Err(_) => return false,
        },
    };
    if owner == (src.uid, src.gid) {
        return true;
    }
    let both = Sattr3 {
        uid: Some(src.uid),
        gid: Some(src.gid),
        ..Sattr3::default()
    };
    if nfs.setattr(fh, &both, None).is_ok() {
        return true;
    }
    if owner.1 != src.gid {
        let group = Sattr3 {
            gid: Some(src.gid),
            ..Sattr3::default()
        };
        let _ = nfs.setattr(fh, &group, None);
    }
    false
}

/// Where cp/mv sends the sources.
#[derive(Debug)]
enum Dest {
    /// Into this directory, under each source's name.
    Into(Box<Obj>),
    /// To this name (one source).
    As(PathArg),
}

fn session_of(node: &Node) -> Option<&rnfs_client::Session> {
    match node {
        Node::Local(_) => None,
        Node::Nfs { target, .. } => Some(&target.session),
    }
}

fn place_session(place: &Place) -> Option<&rnfs_client::Session> {
    match place {
        Place::Local(_) => None,
        Place::Nfs { dir, .. } => Some(&dir.session),
    }
}

fn child_place(dir: &Node, name: &[u8]) -> Place {
    match dir {
        Node::Local(p) => Place::Local(p.join(OsStr::from_bytes(name))),
        Node::Nfs { target, fh } => Place::Nfs {
            dir: target.clone(),
            dir_fh: *fh,
            name: name.to_vec(),
        },
    }
}

fn read_link(node: &Node) -> Result<Vec<u8>, Error> {
    match node {
        Node::Local(p) => Ok(fs::read_link(p)?.into_os_string().into_vec()),
        Node::Nfs { target, fh } => Ok(target.session.nfs().readlink(fh)?),
    }
}

/// A directory's entries, sorted by name.
fn children(dir: &Obj) -> Result<Vec<(Vec<u8>, Obj)>, Error> {
    let mut out = Vec::new();
    match &dir.node {
        Node::Local(p) => {
            for entry in fs::read_dir(p)? {
                let entry = entry?;
                let name = entry.file_name().into_vec();
                let meta = entry.metadata()?;
                let shown = child_shown(&dir.shown, &name);
                out.push((
                    name,
                    Obj {
                        node: Node::Local(entry.path()),
                        meta: Meta::of_local(&meta),
                        shown,
                        attr: None,
                    },
                ));
            }
        }
        Node::Nfs { target, fh } => {
            for e in read_dir(&target.session, fh)? {
                let shown = child_shown(&dir.shown, &e.name);
                let path = join_path(&target.path, &e.name_str());
                out.push((
                    e.name,
                    Obj {
                        node: Node::Nfs {
                            target: target.with_path(path),
                            fh: e.fh,
                        },
                        meta: Meta::of_attr(&e.attr),
                        shown,
                        attr: Some(e.attr),
                    },
                ));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Whether a copy made at `place` would be inside the directory `src`
/// (copying or moving a directory into itself): whether `src` is the
/// directory `place` is in (for `DIR/.`, DIR), or one above it. Told by
/// identity, (fsid, fileid) or (dev, ino), walking up from that directory,
/// so that symbolic links on the way and other sessions of the server are
/// seen through. Between a local path and a URL it cannot be told: no.
fn inside(src: &Obj, place: &Place) -> bool {
    match (&src.node, place) {
        (Node::Nfs { target: s, .. }, Place::Nfs { dir, dir_fh, .. }) => {
            let one_server = Arc::ptr_eq(&s.session, &dir.session)
                || (s.export_url.host == dir.export_url.host
                    && s.export_url.nfs_port == dir.export_url.nfs_port);
            one_server
                && nfs_ancestry_holds(
                    (&dir.session, &dir.export_url.path),
                    *dir_fh,
                    (&s.session, &s.export_url.path),
                    src.meta.id,
                )
        }
        (Node::Local(_), Place::Local(d)) => {
            let raw = d.as_os_str().as_bytes();
            let dir = if raw == b"." || raw.ends_with(b"/.") {
                d.as_path()
            } else {
                d.parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new("."))
            };
            let Ok(dir) = fs::canonicalize(dir) else {
                return false;
            };
            dir.ancestors()
                .any(|a| fs::metadata(a).is_ok_and(|m| (m.dev(), m.ino()) == src.meta.id))
        }
        _ => false,
    }
}

/// Whether directory `dir` of the destination's session, or one above it
/// up to the export's root, is the object `id` (fsid, fileid): the
/// source's, which is of the same server. Where the destination's export
/// is nested in the source's, the walk goes on up through the source's.
fn nfs_ancestry_holds(
    (dst_session, dst_export): (&Arc<rnfs_client::Session>, &str),
    dir: FileHandle,
    (src_session, src_export): (&Arc<rnfs_client::Session>, &str),
    id: (u64, u64),
) -> bool {
    // A server's `..` need not lead to the root: bounded.
    const MAX_DEPTH: usize = 4096;
    let mut session = dst_session;
    let Ok(mut attr) = session.nfs().getattr(&dir) else {
        return false;
    };
    let mut fh = dir;
    for _ in 0..MAX_DEPTH {
        if (attr.fsid, attr.fileid) == id {
            return true;
        }
        if fh == session.root() {
            // The top of the destination's export: where it is nested in
            // the source's (exports /data and /data/sub), on up through
            // the source's session.
            if Arc::ptr_eq(session, src_session) {
                return false;
            }
            let Some(rel) = export_below(src_export, dst_export) else {
                return false;
            };
            match resolve(src_session, rel, true) {
                // The same directory: the source's export goes on above.
                Ok(r) if (r.attr.fsid, r.attr.fileid) == (attr.fsid, attr.fileid) => {
                    session = src_session;
                    fh = r.fh;
                    attr = r.attr;
                    continue;
                }
                _ => return false,
            }
        }
        match lookup(session, &fh, b"..") {
            Ok((up, up_attr))
                if up != fh && (up_attr.fsid, up_attr.fileid) != (attr.fsid, attr.fileid) =>
            {
                fh = up;
                attr = up_attr;
            }
            // The top (the root's `..` is the root), or no way up.
            _ => return false,
        }
    }
    false
}

/// Where the export path `inner` is below the export path `outer` (a path
/// below `outer`'s root; "" for the same path); `None` if not below it.
fn export_below<'a>(outer: &str, inner: &'a str) -> Option<&'a str> {
    let outer = outer.trim_end_matches('/');
    let rest = inner.strip_prefix(outer)?;
    if rest.is_empty() {
        return Some("");
    }
    rest.strip_prefix('/')
}

/// `rnfs cp`.
pub(crate) fn run_cp(ctx: &Ctx, args: &CpArgs) {
    let copier = Copier {
        ctx,
        recursive: args.recursive,
        preserve: args.preserve,
        jobs: args.jobs as usize,
        progress: args.progress,
        verbose: args.verbose,
        umask: umask(),
        links: None,
    };
    let Some((srcs, dest)) = operands(ctx, &args.paths, args.target_directory.as_ref()) else {
        return;
    };
    let Some(dest) = copier.destination(srcs, dest, args.target_directory.is_some()) else {
        return;
    };
    let mut plan = Plan::default();
    for src in srcs {
        // As GNU cp: symbolic links on the command line are followed unless
        // copying recursively.
        let obj = match copier.stat(src, !args.recursive) {
            Ok(o) => o,
            Err(e) => {
                copier.fail(format_args!("cannot stat '{}': {e}", src.text()));
                continue;
            }
        };
        // `DIR/.` into a directory: DIR's contents, into it (GNU cp copies
        // to `DEST/.`, which is DEST).
        if let (Dest::Into(dir), true, Kind::Dir) = (&dest, src.names_dot(), obj.meta.kind) {
            if args.recursive {
                let place = child_place(&dir.node, b".");
                let shown = child_shown(&dir.shown, b".");
                if inside(&obj, &place) {
                    copier.fail(format_args!(
                        "cannot copy a directory, '{}', into itself, '{shown}'",
                        obj.shown
                    ));
                    continue;
                }
                // DEST is there: merged into, not looked up again.
                copier.walk_dir(&obj, &place, &shown, Some((**dir).clone()), &mut plan);
                continue;
            }
        }
        let (place, shown) = match copier.target_for(src, &dest) {
            Ok(t) => t,
            Err(e) => {
                let what = if obj.meta.kind == Kind::Dir {
                    "directory"
                } else {
                    "regular file"
                };
                copier.fail(format_args!(
                    "cannot create {what} '{}': {e}",
                    dest_text(&dest)
                ));
                continue;
            }
        };
        if let Some(e) = slash_refuses(&dest, &place, obj.meta.kind) {
            let what = match obj.meta.kind {
                Kind::Symlink => "symbolic link",
                Kind::Special(what) => what.what(),
                _ => "regular file",
            };
            copier.fail(format_args!("cannot create {what} '{shown}': {e}"));
            continue;
        }
        if obj.meta.kind == Kind::Dir && args.recursive && inside(&obj, &place) {
            copier.fail(format_args!(
                "cannot copy a directory, '{}', into itself, '{shown}'",
                obj.shown
            ));
            continue;
        }
        copier.walk_tree(&obj, &place, &shown, &mut plan);
    }
    copier.execute(plan);
}

/// Why a `src` of `kind` cannot be created at `place`, named by a missing
/// DEST with a trailing `/`: only a directory can be, as the kernel decides
/// for a local path (open(2) then fails EISDIR, told as GNU cp tells it:
/// ENOTDIR). A URL's path is normalized, so the server would create a file
/// where the user asked for a directory.
fn slash_refuses(dest: &Dest, place: &Place, kind: Kind) -> Option<Error> {
    let Dest::As(arg) = dest else { return None };
    if !arg.trailing_slash() || matches!(place, Place::Local(_)) {
        return None;
    }
    match kind {
        Kind::File => Some(Error::Errno(Errno::ENOTDIR as i32)),
        // symlink(2) fails so on a name ending in `/`.
        Kind::Symlink | Kind::Special(_) => Some(Error::Errno(Errno::ENOENT as i32)),
        Kind::Dir | Kind::Other => None,
    }
}

fn dest_text(dest: &Dest) -> String {
    match dest {
        Dest::Into(o) => o.shown.clone(),
        Dest::As(a) => a.text(),
    }
}

/// `rnfs mv`.
pub(crate) fn run_mv(ctx: &Ctx, args: &MvArgs) {
    let copier = Copier {
        ctx,
        recursive: true,
        preserve: true,
        jobs: args.jobs as usize,
        progress: args.progress,
        verbose: false,
        umask: umask(),
        links: Some(Mutex::default()),
    };
    let Some((srcs, dest)) = operands(ctx, &args.paths, args.target_directory.as_ref()) else {
        return;
    };
    let Some(dest) = copier.destination(srcs, dest, args.target_directory.is_some()) else {
        return;
    };
    // Where non-directories were moved to, as GNU mv: one source does not
    // replace another just moved there.
    let mut made = HashSet::new();
    for src in srcs {
        let obj = match copier.stat(src, false) {
            Ok(o) => o,
            Err(e) => {
                copier.fail(format_args!("cannot stat '{}': {e}", src.text()));
                continue;
            }
        };
        if src.names_dot() {
            // rename(2) of `DIR/.` fails so.
            let to = match &dest {
                Dest::Into(dir) => child_shown(&dir.shown, b"."),
                Dest::As(arg) => arg.text(),
            };
            copier.fail(format_args!(
                "cannot move '{}' to '{to}': {}",
                obj.shown,
                Error::Errno(Errno::EBUSY as i32)
            ));
            continue;
        }
        let (place, shown) = match copier.target_for(src, &dest) {
            Ok(t) => t,
            Err(e) => {
                copier.fail(format_args!(
                    "cannot move '{}' to '{}': {e}",
                    obj.shown,
                    dest_text(&dest)
                ));
                continue;
            }
        };
        // rename(2) of `LINK/`, a symbolic link to a directory, fails so
        // (GNU mv): neither the link nor the directory is moved.
        if copier.symlink_with_slash(src) {
            copier.fail(format_args!(
                "cannot move '{}' to '{shown}': {}",
                obj.shown,
                Error::Errno(Errno::ENOTDIR as i32)
            ));
            continue;
        }
        // rename(2) refuses a non-directory to a name ending in `/`.
        if let (Dest::As(arg), false) = (&dest, obj.meta.kind == Kind::Dir) {
            if arg.trailing_slash() {
                copier.fail(format_args!(
                    "cannot move '{}' to '{shown}': {}",
                    obj.shown,
                    Error::Errno(Errno::ENOTDIR as i32)
                ));
                continue;
            }
        }
        if obj.meta.kind == Kind::Dir && inside(&obj, &place) {
            copier.fail(format_args!(
                "cannot move '{}' to a subdirectory of itself, '{shown}'",
                obj.shown
            ));
            continue;
        }
        let key = (obj.meta.kind != Kind::Dir).then(|| place.key());
        if key.as_ref().is_some_and(|k| made.contains(k)) {
            copier.fail(format_args!(
                "will not overwrite just-created '{shown}' with '{}'",
                obj.shown
            ));
            continue;
        }
        match rename(&obj, &place) {
            Ok(()) => {
                made.extend(key);
                if args.verbose {
                    ctx.say(format_args!("renamed '{}' -> '{shown}'", obj.shown));
                }
            }
            Err(e) if e.errno() == Errno::EXDEV as i32 => {
                if move_by_copy(&copier, &obj, &place, &shown) {
                    made.extend(key);
                    if args.verbose {
                        ctx.say(format_args!(
                            "copied '{}' -> '{shown}', removed '{}'",
                            obj.shown, obj.shown
                        ));
                    }
                }
            }
            Err(e) => copier.fail(format_args!(
                "cannot move '{}' to '{shown}': {e}",
                obj.shown
            )),
        }
    }
}

/// A rename within one file system; EXDEV when `src` and `dst` are not on
/// the same one.
fn rename(src: &Obj, dst: &Place) -> Result<(), Error> {
    match (&src.node, dst) {
        (Node::Local(s), Place::Local(d)) => Ok(fs::rename(s, d)?),
        (Node::Nfs { target, .. }, Place::Nfs { dir, dir_fh, name })
            if Arc::ptr_eq(&target.session, &dir.session) =>
        {
            let Some((parent, sname)) = target.split() else {
                return Err(Error::Errno(Errno::EBUSY as i32));
            };
            let from = resolve(&target.session, parent, true)?;
            target
                .session
                .nfs()
                .rename(&from.fh, sname.as_bytes(), dir_fh, name)?;
            Ok(())
        }
        _ => Err(Error::Errno(Errno::EXDEV as i32)),
    }
}

/// mv between file systems: copy with modes and times, then remove the
/// source if every part of the copy succeeded.
fn move_by_copy(copier: &Copier<'_>, src: &Obj, dst: &Place, shown: &str) -> bool {
    let existing = match dst.lstat(shown) {
        Ok(e) => e,
        Err(e) => {
            copier.fail(format_args!("cannot stat '{shown}': {e}"));
            return false;
        }
    };
    if let Some(e) = &existing {
        // As GNU mv: nothing is touched, for removing the destination (or
        // the source after copying onto it) would lose the only copy.
        if e.same_file(src) {
            copier.fail(format_args!(
                "'{}' and '{shown}' are the same file",
                src.shown
            ));
            return false;
        }
        let not_moved = |why: &dyn std::fmt::Display| {
            format!("cannot move '{}' to '{shown}': {why}", src.shown)
        };
        let problem = match (src.meta.kind == Kind::Dir, e.meta.kind == Kind::Dir) {
            (true, true) => match children(e) {
                Ok(c) if c.is_empty() => None,
                Ok(_) => Some(not_moved(&Error::Errno(Errno::ENOTEMPTY as i32))),
                Err(err) => Some(not_moved(&err)),
            },
            (false, true) => Some(format!(
                "cannot overwrite directory '{shown}' with non-directory"
            )),
            (true, false) => Some(format!(
                "cannot overwrite non-directory '{shown}' with directory '{}'",
                src.shown
            )),
            // rename(2) replaces a non-directory, a symbolic link included:
            // the copy is made beside it, then renamed over it.
            (false, false) => None,
        };
        if let Some(msg) = problem {
            copier.fail(msg);
            return false;
        }
    }
    // A destination replaced stays whole until its replacement is.
    let replace = existing.is_some_and(|e| e.meta.kind != Kind::Dir);
    let to = if replace { dst.beside() } else { dst.clone() };
    let mut plan = Plan::default();
    let walked = copier.walk_tree(src, &to, shown, &mut plan);
    // Copies a later operand may link to, once they are all made.
    let copies = std::mem::take(&mut plan.copies);
    if !walked || !copier.execute(plan) {
        if replace {
            let _ = to.remove();
        }
        return false;
    }
    if replace {
        if let Err(e) = to.rename_onto(dst) {
            copier.fail(format_args!(
                "cannot move '{}' to '{shown}': {e}",
                src.shown
            ));
            let _ = to.remove();
            return false;
        }
    }
    copier.keep_copies(copies);
    if replace {
        copier.copy_renamed(&to, dst);
    }
    let removed = match &src.node {
        Node::Local(p) if src.meta.kind == Kind::Dir => {
            fs::remove_dir_all(p).map(|()| true).map_err(Error::from)
        }
        Node::Local(p) => fs::remove_file(p).map(|()| true).map_err(Error::from),
        Node::Nfs { target, fh } => remove_nfs(copier, target, fh, src),
    };
    match removed {
        Ok(done) => done,
        Err(e) => {
            copier.fail(format_args!("cannot remove '{}': {e}", src.shown));
            false
        }
    }
}

/// Removes an NFS source after its copy; `Ok(false)` when a failure below
/// it was already reported.
fn remove_nfs(
    copier: &Copier<'_>,
    target: &Target,
    fh: &FileHandle,
    src: &Obj,
) -> Result<bool, Error> {
    let Some((parent, name)) = target.split() else {
        return Err(Error::Errno(Errno::EBUSY as i32));
    };
    let session = &target.session;
    if src.meta.kind == Kind::Dir {
        let fail =
            |shown: &str, e: &Error| copier.fail(format_args!("cannot remove '{shown}': {e}"));
        if !super::rm::remove_tree(session, fh, &src.shown, &fail, false, false) {
            return Ok(false);
        }
    }
    let dir = resolve(session, parent, true)?;
    if src.meta.kind == Kind::Dir {
        session.nfs().rmdir(&dir.fh, name.as_bytes())?;
    } else {
        session.nfs().remove(&dir.fh, name.as_bytes())?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(kind: Kind, mode: u32) -> Meta {
        Meta {
            kind,
            mode,
            size: 0,
            used: 0,
            nlink: 1,
            uid: 0,
            gid: 0,
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
            id: (0, 0),
        }
    }

    #[test]
    fn set_id_bits_are_kept_only_with_the_owner() {
        let file = meta(Kind::File, 0o7755);
        assert_eq!(preserved_mode(&file, true), 0o7755);
        assert_eq!(preserved_mode(&file, false), 0o755);
        // A directory keeps its sticky bit (GNU cp's rule for directories).
        let dir = meta(Kind::Dir, 0o7775);
        assert_eq!(preserved_mode(&dir, true), 0o7775);
        assert_eq!(preserved_mode(&dir, false), 0o1775);
        assert_eq!(preserved_mode(&meta(Kind::File, 0o640), false), 0o640);
    }
}

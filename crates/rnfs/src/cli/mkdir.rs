//! `rnfs mkdir`: make directories on a server.

use clap::Args;
use nix::errno::Errno;
use rnfs_client::{NfsError, NfsUrl, Session};
use rnfs_nfs3::{FileHandle, Ftype3, Nfsstat3, Sattr3};

use super::format::umask;
use super::remote::{join_path, lookup, resolve, Error, Resolved};
use super::{ConnArgs, Ctx, UrlArg};

pub(crate) const ABOUT: &str = concat!(
    "Create each directory URL. Its parent must exist unless -p, which also \
     creates missing parents (with mode u+wx added to the default) and accepts \
     directories that already exist. The mode is -m MODE (octal, used as given), \
     else 0777 less this process's umask: the server applies no umask.

Exit status: 0 if every directory was made (or existed, with -p), 1 otherwise.",
    url_help!()
);

pub(crate) const EXAMPLES: &str = "\
Examples:
  rnfs mkdir nfs://server/srv/data/new
  rnfs mkdir -p nfs://server/srv/data/a/b/c
  rnfs mkdir -m 0700 nfs://server/srv/data/private";

/// `rnfs mkdir` arguments.
#[derive(Debug, Args)]
pub(crate) struct MkdirArgs {
    /// Directories to create: nfs://HOST[:PORT]/EXPORT/PATH.
    #[arg(value_name = "URL", required = true, value_parser = super::parse_url)]
    urls: Vec<UrlArg>,

    /// No error if existing, make parent directories as needed.
    #[arg(short = 'p', long = "parents")]
    parents: bool,

    /// Set the mode (octal, e.g. 0755), not 0777 less the umask.
    #[arg(short = 'm', long = "mode", value_name = "MODE", value_parser = parse_mode)]
    mode: Option<u32>,

    /// Print a message for each created directory.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,

    #[command(flatten)]
    pub(crate) conn: ConnArgs,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    match u32::from_str_radix(s, 8) {
        Ok(m) if m <= 0o7777 => Ok(m),
        _ => Err(format!(
            "invalid mode '{s}' (octal, at most 7777; symbolic modes are not supported)"
        )),
    }
}

/// Makes every directory.
pub(crate) fn run(ctx: &Ctx, args: &MkdirArgs) {
    let default = 0o777 & !umask();
    let mode = args.mode.unwrap_or(default);
    // As GNU mkdir -p: parents get the default mode plus u+wx.
    let parent_mode = default | 0o300;
    for arg in &args.urls {
        let target = match ctx.remotes.open(&arg.url) {
            Ok(t) => t,
            Err(e) => {
                ctx.fail(
                    1,
                    format_args!("cannot create directory '{}': {e}", arg.text),
                );
                continue;
            }
        };
        let made = if args.parents {
            make_parents(&target.session, &target.path, mode, parent_mode, |path| {
                if args.verbose {
                    let mut url: NfsUrl = target.export_url.clone();
                    url.path = format!("{}/{path}", url.path.trim_end_matches('/'));
                    ctx.say(format_args!("rnfs mkdir: created directory '{url}'"));
                }
            })
        } else {
            make_one(&target.session, &target.path, mode).map(|()| {
                if args.verbose {
                    ctx.say(format_args!("rnfs mkdir: created directory '{}'", arg.text));
                }
            })
        };
        if let Err(e) = made {
            ctx.fail(
                1,
                format_args!("cannot create directory '{}': {e}", arg.text),
            );
        }
    }
}

fn attrs(mode: u32) -> Sattr3 {
    Sattr3 {
        mode: Some(mode),
        ..Sattr3::default()
    }
}

fn make_one(session: &Session, path: &str, mode: u32) -> Result<(), Error> {
    let Some((parent, name)) = super::remote::split_path(path) else {
        return Err(Nfsstat3::Exist.into());
    };
    let dir = resolve(session, parent, true)?;
    if dir.attr.ftype != Ftype3::Dir {
        return Err(Nfsstat3::Notdir.into());
    }
    session
        .nfs()
        .mkdir(&dir.fh, name.as_bytes(), &attrs(mode))?;
    Ok(())
}

/// `mkdir -p`: each missing component of `path` is created; `created` is
/// told each path made.
fn make_parents(
    session: &Session,
    path: &str,
    mode: u32,
    parent_mode: u32,
    mut created: impl FnMut(&str),
) -> Result<(), Error> {
    let nfs = session.nfs();
    let names: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let mut dir: FileHandle = session.root();
    let mut so_far = String::new();
    for (i, name) in names.iter().enumerate() {
        so_far = join_path(&so_far, name);
        let last = i + 1 == names.len();
        let existing = match lookup(session, &dir, name.as_bytes()) {
            // A symbolic link is followed (from the root: it may be relative).
            Ok((_, attr)) if attr.ftype == Ftype3::Lnk => Some(resolve(session, &so_far, true)?),
            Ok((fh, attr)) => Some(Resolved { fh, attr }),
            Err(NfsError::Status(Nfsstat3::Noent)) => None,
            Err(e) => return Err(e.into()),
        };
        dir = match existing {
            Some(found) if found.attr.ftype == Ftype3::Dir => found.fh,
            Some(_) if last => return Err(Nfsstat3::Exist.into()),
            Some(_) => return Err(Error::Errno(Errno::ENOTDIR as i32)),
            None => {
                let m = if last { mode } else { parent_mode };
                match nfs.mkdir(&dir, name.as_bytes(), &attrs(m)) {
                    Ok(c) => {
                        created(&so_far);
                        match c.handle {
                            Some(fh) => fh,
                            None => nfs.lookup(&dir, name.as_bytes())?.0,
                        }
                    }
                    // Made by someone else meanwhile: fine for -p.
                    Err(NfsError::Status(Nfsstat3::Exist)) => {
                        let found = resolve(session, &so_far, true)?;
                        if found.attr.ftype != Ftype3::Dir {
                            return Err(Nfsstat3::Exist.into());
                        }
                        found.fh
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_octal() {
        assert_eq!(parse_mode("755"), Ok(0o755));
        assert_eq!(parse_mode("0700"), Ok(0o700));
        assert!(parse_mode("u+x").is_err());
        assert!(parse_mode("17777").is_err());
    }
}

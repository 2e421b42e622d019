//! `rnfs rm`: remove files and directory trees on a server.

use std::io::Write;

use clap::Args;
use nix::errno::Errno;
use rnfs_client::Session;
use rnfs_nfs3::{FileHandle, Ftype3};

use super::remote::{child_shown, lookup, read_dir, resolve, Error};
use super::{ConnArgs, Ctx, UrlArg};

pub(crate) const ABOUT: &str = concat!(
    "Remove each URL. Directories are removed only with -r (with everything \
     below them, depth first) or, when empty, with -d. Symbolic links are removed, \
     not followed. An export's root is never removed. As GNU rm, -f ignores URLs \
     that do not exist; nothing is ever asked.

Exit status: 0 if every URL was removed (or did not exist, with -f), 1 otherwise.",
    url_help!()
);

pub(crate) const EXAMPLES: &str = "\
Examples:
  rnfs rm nfs://server/srv/data/old.log
  rnfs rm -r nfs://server/srv/data/build
  rnfs rm -rf nfs://server/srv/data/maybe-there
  rnfs rm -d nfs://server/srv/data/empty-dir";

/// `rnfs rm` arguments.
#[derive(Debug, Args)]
pub(crate) struct RmArgs {
    /// What to remove: nfs://HOST[:PORT]/EXPORT/PATH.
    #[arg(value_name = "URL", required_unless_present = "force", value_parser = super::parse_url)]
    urls: Vec<UrlArg>,

    /// Remove directories and their contents recursively.
    #[arg(short = 'r', short_alias = 'R', long = "recursive")]
    recursive: bool,

    /// Remove empty directories.
    #[arg(short = 'd', long = "dir")]
    dir: bool,

    /// Ignore nonexistent files and arguments.
    #[arg(short = 'f', long = "force")]
    force: bool,

    /// Explain what is being done.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,

    #[command(flatten)]
    pub(crate) conn: ConnArgs,
}

/// Removes every URL.
pub(crate) fn run(ctx: &Ctx, args: &RmArgs) {
    for arg in &args.urls {
        remove_one(ctx, args, arg);
    }
}

/// Whether the operand's last component is `.` or `..`, which GNU rm
/// refuses: the URL's normal form drops a `.`, and would name the
/// directory itself.
fn names_dot(text: &str) -> bool {
    let path = text.split(['?', '#']).next().unwrap_or(text);
    let path = path.trim_end_matches('/');
    path.ends_with("/.") || path.ends_with("/..")
}

fn remove_one(ctx: &Ctx, args: &RmArgs, arg: &UrlArg) {
    if names_dot(&arg.text) {
        ctx.fail(
            1,
            format_args!(
                "refusing to remove '.' or '..' directory: skipping '{}'",
                arg.text
            ),
        );
        return;
    }
    let missing_ok = |e: &Error| args.force && e.errno() == Errno::ENOENT as i32;
    let report = |e: Error| {
        if !missing_ok(&e) {
            ctx.fail(1, format_args!("cannot remove '{}': {e}", arg.text));
        }
    };
    let target = match ctx.remotes.open(&arg.url) {
        Ok(t) => t,
        Err(e) => return report(e),
    };
    let Some((parent, name)) = target.split() else {
        if args.recursive {
            ctx.fail(
                1,
                format_args!(
                    "it is dangerous to operate recursively on '{}' (an export's root)",
                    arg.text
                ),
            );
        } else {
            report(Error::Errno(Errno::EBUSY as i32));
        }
        return;
    };
    let session = &target.session;
    let found = resolve(session, parent, true).and_then(|dir| {
        let (fh, attr) = lookup(session, &dir.fh, name.as_bytes())?;
        Ok((dir.fh, fh, attr.ftype))
    });
    let (dir, fh, ftype) = match found {
        Ok(f) => f,
        Err(e) => return report(e),
    };
    if ftype != Ftype3::Dir {
        // `name/` names a directory: a file, or a symbolic link (which
        // unlink(2) would not follow), is not one.
        if arg.trailing_slash() {
            return report(Error::Errno(Errno::ENOTDIR as i32));
        }
        match session.nfs().remove(&dir, name.as_bytes()) {
            Ok(_) => verbose(args.verbose, format_args!("removed '{}'", arg.text)),
            Err(e) => report(e.into()),
        }
        return;
    }
    if !args.recursive && !args.dir {
        return report(Error::Errno(Errno::EISDIR as i32));
    }
    if args.recursive {
        let fail = |shown: &str, e: &Error| {
            ctx.fail(1, format_args!("cannot remove '{shown}': {e}"));
        };
        let shown = arg.text.trim_end_matches('/');
        if !remove_tree(session, &fh, shown, &fail, args.verbose, args.force) {
            return;
        }
    }
    match session.nfs().rmdir(&dir, name.as_bytes()) {
        Ok(_) => verbose(
            args.verbose,
            format_args!("removed directory '{}'", arg.text),
        ),
        Err(e) => report(e.into()),
    }
}

fn verbose(on: bool, msg: std::fmt::Arguments<'_>) {
    if on {
        let _ = writeln!(std::io::stdout(), "{msg}");
    }
}

/// Removes everything below directory `dir` (shown as `shown`), depth first,
/// reporting each failure through `fail`; true if it is now empty. A
/// directory whose contents could not all be removed is left in place.
/// With `force`, as GNU rm -f, what is already gone (removed meanwhile by
/// someone else: ENOENT, or ESTALE for a directory's handle) is no failure.
pub(crate) fn remove_tree(
    session: &Session,
    dir: &FileHandle,
    shown: &str,
    fail: &dyn Fn(&str, &Error),
    verbose_on: bool,
    force: bool,
) -> bool {
    let gone = |e: &Error| {
        force && (e.errno() == Errno::ENOENT as i32 || e.errno() == Errno::ESTALE as i32)
    };
    let nfs = session.nfs();
    // The whole listing first: removing while paging may move cookies.
    let entries = match read_dir(session, dir) {
        Ok(e) => e,
        Err(e) if gone(&e) => return true,
        Err(e) => {
            fail(shown, &e);
            return false;
        }
    };
    let mut ok = true;
    for e in entries {
        let child = child_shown(shown, &e.name);
        if e.attr.ftype == Ftype3::Dir {
            if !remove_tree(session, &e.fh, &child, fail, verbose_on, force) {
                ok = false;
                continue;
            }
            match nfs.rmdir(dir, &e.name).map_err(Error::from) {
                Ok(_) => verbose(verbose_on, format_args!("removed directory '{child}'")),
                Err(err) if gone(&err) => {}
                Err(err) => {
                    fail(&child, &err);
                    ok = false;
                }
            }
        } else {
            match nfs.remove(dir, &e.name).map_err(Error::from) {
                Ok(_) => verbose(verbose_on, format_args!("removed '{child}'")),
                Err(err) if gone(&err) => {}
                Err(err) => {
                    fail(&child, &err);
                    ok = false;
                }
            }
        }
    }
    ok
}

//! `rnfs stat`: GNU stat's default format for files on a server.

use std::io::{self, Write};

use clap::Args;
use nix::unistd::{Gid, Group, Uid, User};
use rnfs_nfs3::{Fattr3, Ftype3};

use super::format::{dev_split, mode_string, stat_time, type_name};
use super::{ConnArgs, Ctx, UrlArg};

pub(crate) const ABOUT: &str = concat!(
    "Display the status of each URL in GNU stat's default format: name, size, \
     blocks (512-byte units of space used), I/O block (the server's preferred \
     write size), type, device (from the NFS fsid), inode (fileid), links, access \
     mode, owner and group (the numeric ids the server sent, with this host's \
     names for them), and the access, modify and change times. NFSv3 has no \
     birth time. A symbolic link is described itself unless -L.

Exit status: 0 if every URL was described, 1 otherwise.",
    url_help!()
);

pub(crate) const EXAMPLES: &str = "\
Examples:
  rnfs stat nfs://server/srv/data/file.txt
  rnfs stat -L nfs://server/srv/data/current      (where the link points)";

/// `rnfs stat` arguments.
#[derive(Debug, Args)]
pub(crate) struct StatArgs {
    /// Files to describe: nfs://HOST[:PORT]/EXPORT/PATH.
    #[arg(value_name = "URL", required = true, value_parser = super::parse_url)]
    urls: Vec<UrlArg>,

    /// Follow symbolic links.
    #[arg(short = 'L', long = "dereference")]
    dereference: bool,

    #[command(flatten)]
    pub(crate) conn: ConnArgs,
}

/// Describes every URL.
pub(crate) fn run(ctx: &Ctx, args: &StatArgs) {
    let mut out = io::stdout().lock();
    for arg in &args.urls {
        let (res, target) = match ctx.remotes.open_resolved(arg, args.dereference) {
            Ok(f) => f,
            Err(e) => {
                let _ = out.flush();
                ctx.fail(1, format_args!("cannot stat '{}': {e}", arg.text));
                continue;
            }
        };
        let link = if res.attr.ftype == Ftype3::Lnk {
            target
                .session
                .nfs()
                .readlink(&res.fh)
                .ok()
                .map(|t| String::from_utf8_lossy(&t).into_owned())
        } else {
            None
        };
        let text = describe(
            &arg.text,
            link.as_deref(),
            &res.attr,
            target.session.wsize(),
        );
        if let Err(e) = out.write_all(text.as_bytes()) {
            ctx.stdout_failed(&e);
            return;
        }
    }
}

/// The default `stat` text for `attr` (coreutils 9).
fn describe(name: &str, link: Option<&str>, attr: &Fattr3, io_block: u32) -> String {
    let shown = match link {
        Some(t) => format!("{name} -> {t}"),
        None => name.to_owned(),
    };
    let (major, minor) = dev_split(attr.fsid);
    let user = User::from_uid(Uid::from_raw(attr.uid))
        .ok()
        .flatten()
        .map_or_else(|| "UNKNOWN".to_owned(), |u| u.name);
    let group = Group::from_gid(Gid::from_raw(attr.gid))
        .ok()
        .flatten()
        .map_or_else(|| "UNKNOWN".to_owned(), |g| g.name);
    let device_line = match attr.ftype {
        Ftype3::Chr | Ftype3::Blk => format!(
            "Device: {major},{minor}\tInode: {:<11} Links: {:<5} Device type: {},{}",
            attr.fileid, attr.nlink, attr.rdev.specdata1, attr.rdev.specdata2
        ),
        _ => format!(
            "Device: {major},{minor}\tInode: {:<11} Links: {}",
            attr.fileid, attr.nlink
        ),
    };
    format!(
        "  File: {shown}\n  Size: {:<10}\tBlocks: {:<10} IO Block: {io_block:<6} {}\n\
         {device_line}\n\
         Access: ({:04o}/{})  Uid: ({:>5}/{user:>8})   Gid: ({:>5}/{group:>8})\n\
         Access: {}\nModify: {}\nChange: {}\n Birth: -\n",
        attr.size,
        attr.used.div_ceil(512),
        type_name(attr),
        attr.mode & 0o7777,
        mode_string(attr.ftype, attr.mode),
        attr.uid,
        attr.gid,
        stat_time(attr.atime),
        stat_time(attr.mtime),
        stat_time(attr.ctime),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnfs_nfs3::{Nfstime3, Specdata3};

    #[test]
    fn layout_matches_gnu_stat() {
        let attr = Fattr3 {
            ftype: Ftype3::Reg,
            mode: 0o644,
            nlink: 1,
            uid: 4_000_000,
            gid: 4_000_000,
            size: 1320,
            used: 4096,
            fsid: 0xfe00,
            fileid: 1_196_082,
            atime: Nfstime3::default(),
            mtime: Nfstime3::default(),
            ctime: Nfstime3::default(),
            rdev: Specdata3::default(),
        };
        let text = describe("nfs://h/e/passwd", None, &attr, 4096);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "  File: nfs://h/e/passwd");
        assert_eq!(
            lines[1],
            "  Size: 1320      \tBlocks: 8          IO Block: 4096   regular file"
        );
        assert_eq!(lines[2], "Device: 254,0\tInode: 1196082     Links: 1");
        assert_eq!(
            lines[3],
            "Access: (0644/-rw-r--r--)  Uid: (4000000/ UNKNOWN)   Gid: (4000000/ UNKNOWN)"
        );
        assert!(lines[4].starts_with("Access: 19"), "{}", lines[4]);
        assert_eq!(lines[7], " Birth: -");
    }
}

//! `rnfs cat`: files on a server to standard output.

use std::io::{self, Write};

use clap::Args;
use rnfs_nfs3::Ftype3;

use super::transfer::{chunk_size, open_nfs, Reader};
use super::{ConnArgs, Ctx, UrlArg};

pub(crate) const ABOUT: &str = concat!(
    "Write each URL's contents to standard output, in order. Files are streamed \
     (reads kept in flight ahead of the output), so any size works. Symbolic \
     links are followed. A file that cannot be read is reported and skipped.

Exit status: 0 if every URL was printed, 1 otherwise.",
    url_help!()
);

pub(crate) const EXAMPLES: &str = "\
Examples:
  rnfs cat nfs://server/srv/data/notes.txt
  rnfs cat nfs://server/srv/data/a nfs://server/srv/data/b > both
  rnfs cat nfs://server/srv/data/big.img | sha256sum";

/// `rnfs cat` arguments.
#[derive(Debug, Args)]
pub(crate) struct CatArgs {
    /// Files to print: nfs://HOST[:PORT]/EXPORT/PATH.
    #[arg(value_name = "URL", required = true, value_parser = super::parse_url)]
    urls: Vec<UrlArg>,

    #[command(flatten)]
    pub(crate) conn: ConnArgs,
}

/// Prints every URL.
pub(crate) fn run(ctx: &Ctx, args: &CatArgs) {
    let mut out = io::stdout().lock();
    for arg in &args.urls {
        let (res, target) = match ctx.remotes.open_resolved(arg, true) {
            Ok(f) => f,
            Err(e) => {
                ctx.fail(1, format_args!("{}: {e}", arg.text));
                continue;
            }
        };
        if res.attr.ftype == Ftype3::Dir {
            ctx.fail(1, format_args!("{}: Is a directory", arg.text));
            continue;
        }
        let chunk = chunk_size(Some(&target.session), None);
        let file = open_nfs(&target.session, res.fh, &res.attr, ctx.remotes.budget());
        let mut reader = Reader::Nfs(Box::new(file), 0);
        let mut buf = vec![0; chunk];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if let Err(e) = out.write_all(&buf[..n]) {
                        ctx.stdout_failed(&e);
                        return;
                    }
                }
                Err(e) => {
                    let _ = out.flush();
                    ctx.fail(1, format_args!("{}: {e}", arg.text));
                    break;
                }
            }
        }
    }
    if let Err(e) = out.flush() {
        ctx.stdout_failed(&e);
    }
}

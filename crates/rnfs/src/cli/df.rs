//! `rnfs df`: space and file counts of exports (FSSTAT), as GNU df prints them.

use std::io::Write;

use clap::{ArgAction, Args};

use super::format::human;
use super::{ConnArgs, Ctx, UrlArg};

pub(crate) const ABOUT: &str = concat!(
    "Show the space of the file system holding each URL, from the server's \
     FSSTAT, in GNU df's columns: Filesystem (HOST:/EXPORT), total size in 1 KiB \
     blocks (or -h: powers of 1024), used, available to this user, use% (used \
     over used + available, rounded up) and the export's URL. With -i, file \
     counts instead of space.

Exit status: 0 if every URL was reported, 1 otherwise.",
    url_help!()
);

pub(crate) const EXAMPLES: &str = "\
Examples:
  rnfs df nfs://server/srv/data
  rnfs df -h nfs://server/srv/data nfs://server/srv/backup
  rnfs df -i nfs://server/srv/data";

/// `rnfs df` arguments.
#[derive(Debug, Args)]
pub(crate) struct DfArgs {
    /// File systems to report: nfs://HOST[:PORT]/EXPORT[/PATH].
    #[arg(value_name = "URL", required = true, value_parser = super::parse_url)]
    urls: Vec<UrlArg>,

    /// Print sizes in powers of 1024 (e.g. 1023M).
    #[arg(short = 'h', long = "human-readable")]
    human: bool,

    /// List file (inode) counts instead of block usage.
    #[arg(short = 'i', long = "inodes")]
    inodes: bool,

    /// Print help.
    #[arg(long, action = ArgAction::Help)]
    help: Option<bool>,

    #[command(flatten)]
    pub(crate) conn: ConnArgs,
}

/// Reports every URL.
pub(crate) fn run(ctx: &Ctx, args: &DfArgs) {
    let header: [&str; 6] = match (args.inodes, args.human) {
        (true, _) => [
            "Filesystem",
            "Inodes",
            "IUsed",
            "IFree",
            "IUse%",
            "Mounted on",
        ],
        (false, true) => ["Filesystem", "Size", "Used", "Avail", "Use%", "Mounted on"],
        (false, false) => [
            "Filesystem",
            "1K-blocks",
            "Used",
            "Available",
            "Use%",
            "Mounted on",
        ],
    };
    let mut rows: Vec<[String; 6]> = vec![header.map(str::to_owned)];
    for arg in &args.urls {
        let found = ctx
            .remotes
            .open_resolved(arg, true)
            .and_then(|(res, t)| Ok((t.session.nfs().fsstat(&res.fh)?, t)));
        let (st, target) = match found {
            Ok(f) => f,
            Err(e) => {
                ctx.fail(1, format_args!("{}: {e}", arg.text));
                continue;
            }
        };
        let (total, used, avail) = if args.inodes {
            (st.tfiles, st.tfiles.saturating_sub(st.ffiles), st.ffiles)
        } else {
            (st.tbytes, st.tbytes.saturating_sub(st.fbytes), st.abytes)
        };
        let num = |n: u64| {
            if args.inodes {
                n.to_string()
            } else if args.human {
                human(n)
            } else {
                n.div_ceil(1024).to_string()
            }
        };
        let host = if target.export_url.host.contains(':') {
            format!("[{}]", target.export_url.host)
        } else {
            target.export_url.host.clone()
        };
        rows.push([
            format!("{host}:{}", target.export_url.path),
            num(total),
            num(used),
            num(avail),
            percent(used, avail),
            target.export_url.to_string(),
        ]);
    }
    if rows.len() > 1 {
        let text = table(&rows);
        if let Err(e) = std::io::stdout().lock().write_all(text.as_bytes()) {
            ctx.stdout_failed(&e);
        }
    }
}

/// `used / (used + avail)` in percent, rounded up; `-` when both are 0.
fn percent(used: u64, avail: u64) -> String {
    let whole = u128::from(used) + u128::from(avail);
    if whole == 0 {
        return "-".to_owned();
    }
    format!("{}%", (u128::from(used) * 100).div_ceil(whole))
}

/// GNU df's layout: the first column left-aligned (at least 14 wide), the
/// numbers right-aligned (at least 5, the percentage 4), the last as it is.
fn table(rows: &[[String; 6]]) -> String {
    const MIN: [usize; 6] = [14, 5, 5, 5, 4, 0];
    let mut widths = MIN;
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        out.push_str(&format!("{:<w$}", row[0], w = widths[0]));
        for (cell, w) in row[1..5].iter().zip(&widths[1..5]) {
            out.push_str(&format!(" {cell:>w$}"));
        }
        out.push_str(&format!(" {}\n", row[5]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_gnu_df() {
        let rows = [
            ["Filesystem", "Size", "Used", "Avail", "Use%", "Mounted on"].map(str::to_owned),
            ["h:/e", "98G", "40G", "54G", "43%", "nfs://h/e"].map(str::to_owned),
        ];
        assert_eq!(
            table(&rows),
            "Filesystem      Size  Used Avail Use% Mounted on\n\
             h:/e             98G   40G   54G  43% nfs://h/e\n"
        );
        assert_eq!(percent(1, 2), "34%");
        assert_eq!(percent(0, 0), "-");
        assert_eq!(percent(5, 0), "100%");
    }
}

//! `rnfs ls`: GNU ls's listing of directories on a server.

use std::io::{self, BufWriter, IsTerminal, StdoutLock, Write};
use std::sync::Arc;
use std::time::SystemTime;

use clap::{ArgAction, Args};
use rnfs_client::Session;
use rnfs_nfs3::{Fattr3, FileHandle, Ftype3};

use super::format::{human, ls_name, ls_time, mode_string};
use super::remote::{read_dir, Resolved};
use super::{ConnArgs, Ctx, UrlArg};

pub(crate) const ABOUT: &str = concat!(
    "List information about each URL: the entries of a directory, else the file \
     itself, sorted by name (byte order, as in the C locale). As GNU ls: names that \
     begin with '.' are hidden unless -a or -A; one name per line when standard \
     output is not a terminal, columns when it is (unless -1). With -l each line \
     holds the mode, the number of links, owner and group (numeric ids: NFSv3 \
     carries no names), the size, the modification time (\"Mon DD HH:MM\" within \
     the last six months, \"Mon DD  YYYY\" otherwise) and the name, with \
     \"-> TARGET\" for a symbolic link; a directory's listing starts with its \
     total size in 1 KiB blocks. Names (and link targets) are the server's \
     bytes: on a terminal each control character in them, and each byte that \
     is not UTF-8, is printed as '?' (-q), so that no name can drive the \
     terminal; elsewhere they are printed as they are (--show-control-chars), \
     with U+FFFD for bytes that are not UTF-8.

Exit status: 0 if OK, 1 if minor problems (e.g. cannot open a subdirectory), 2 if \
     serious trouble (e.g. cannot access a command-line argument).",
    url_help!()
);

pub(crate) const EXAMPLES: &str = "\
Examples:
  rnfs ls nfs://server/srv/data
  rnfs ls -l nfs://server/srv/data/logs
  rnfs ls -lah nfs://server:20490/srv/data          (rnfs serve as a user)
  rnfs ls -R nfs://server/srv/data/tree
  rnfs ls -ld nfs://server/srv/data/dir
  rnfs ls --uid 1000 --gid 1000 nfs://server/home/alice";

/// `rnfs ls` arguments.
#[derive(Debug, Args)]
pub(crate) struct LsArgs {
    /// What to list: nfs://HOST[:PORT]/EXPORT/PATH.
    #[arg(value_name = "URL", required = true, value_parser = super::parse_url)]
    urls: Vec<UrlArg>,

    /// Use a long listing format.
    #[arg(short = 'l')]
    long: bool,

    /// Do not hide entries starting with '.' (and list '.' and '..').
    #[arg(short = 'a', long = "all")]
    all: bool,

    /// Like -a, but without '.' and '..'.
    #[arg(short = 'A', long = "almost-all")]
    almost_all: bool,

    /// List subdirectories recursively.
    #[arg(short = 'R', long = "recursive")]
    recursive: bool,

    /// List directories themselves, not their contents.
    #[arg(short = 'd', long = "directory")]
    directory: bool,

    /// With -l, print sizes like 1.5K, 234M, 2.0G (powers of 1024).
    #[arg(short = 'h', long = "human-readable")]
    human: bool,

    /// List one name per line.
    #[arg(short = '1')]
    one_per_line: bool,

    /// Print '?' instead of control characters and bytes that are not
    /// UTF-8 in names [default when standard output is a terminal].
    #[arg(
        short = 'q',
        long = "hide-control-chars",
        overrides_with = "show_control_chars"
    )]
    hide_control_chars: bool,

    /// Print names as they are, control characters included (bytes that
    /// are not UTF-8 as U+FFFD) [default when standard output is not a
    /// terminal].
    #[arg(long = "show-control-chars", overrides_with = "hide_control_chars")]
    show_control_chars: bool,

    /// Print help.
    #[arg(long, action = ArgAction::Help)]
    help: Option<bool>,

    #[command(flatten)]
    pub(crate) conn: ConnArgs,
}

impl LsArgs {
    /// Whether names are printed with control characters as `?` (-q): as
    /// GNU ls, the last of -q and --show-control-chars, else whether
    /// standard output is a terminal.
    fn hide_control_chars(&self, tty: bool) -> bool {
        if self.hide_control_chars {
            true
        } else if self.show_control_chars {
            false
        } else {
            tty
        }
    }
}

/// One name to print.
#[derive(Debug)]
struct Item {
    /// As the server sent it (or the URL as typed).
    name: Vec<u8>,
    attr: Fattr3,
    /// A symbolic link's target, for -l.
    link: Option<Vec<u8>>,
}

/// A directory to list.
#[derive(Debug)]
struct Dir {
    /// The URL as typed, then `/NAME` for each level below it.
    shown: Vec<u8>,
    session: Arc<Session>,
    fh: FileHandle,
    attr: Fattr3,
}

struct Lister<'a> {
    ctx: &'a Ctx,
    args: &'a LsArgs,
    out: BufWriter<StdoutLock<'static>>,
    tty: bool,
    /// Control characters in names are printed as `?`.
    hide: bool,
    now: SystemTime,
    /// Something was printed: the next directory header needs a blank line.
    printed: bool,
}

/// Lists every URL; the exit status is raised on failures.
pub(crate) fn run(ctx: &Ctx, args: &LsArgs) {
    let stdout = io::stdout();
    let tty = stdout.is_terminal();
    let mut ls = Lister {
        ctx,
        args,
        tty,
        hide: args.hide_control_chars(tty),
        out: BufWriter::new(stdout.lock()),
        now: SystemTime::now(),
        printed: false,
    };
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for arg in &args.urls {
        let (res, target) = match ctx.remotes.open_resolved(arg, false) {
            Ok(f) => f,
            Err(e) => {
                ls.fail(2, format_args!("cannot access '{}': {e}", arg.text));
                continue;
            }
        };
        // Without -l or -d a symbolic link to a directory on the command
        // line is listed as the directory, as GNU ls does.
        let res = if res.attr.ftype == Ftype3::Lnk && !args.long && !args.directory {
            match target.resolve(true) {
                Ok(to) if to.attr.ftype == Ftype3::Dir => to,
                _ => res,
            }
        } else {
            res
        };
        if res.attr.ftype == Ftype3::Dir && !args.directory {
            dirs.push(Dir {
                shown: arg.text.clone().into_bytes(),
                session: Arc::clone(&target.session),
                fh: res.fh,
                attr: res.attr,
            });
        } else {
            files.push(ls.item(&target.session, arg.text.clone().into_bytes(), res));
        }
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    dirs.sort_by(|a, b| a.shown.cmp(&b.shown));
    if !files.is_empty() {
        ls.print(&files, None);
        ls.printed = true;
    }
    let headers = args.urls.len() > 1 || args.recursive;
    for dir in dirs {
        if ls.ctx.stdout_closed() {
            break;
        }
        ls.list(&dir, headers, true);
    }
    if let Err(e) = ls.out.flush() {
        ctx.stdout_failed(&e);
    }
}

impl Lister<'_> {
    fn fail(&mut self, code: u8, msg: impl std::fmt::Display) {
        // Keep standard output and the message in order on a terminal.
        let _ = self.out.flush();
        self.ctx.fail(code, msg);
    }

    fn item(&self, session: &Session, name: Vec<u8>, res: Resolved) -> Item {
        let link = (self.args.long && res.attr.ftype == Ftype3::Lnk)
            .then(|| session.nfs().readlink(&res.fh).ok())
            .flatten();
        Item {
            name,
            attr: res.attr,
            link,
        }
    }

    /// Lists one directory, then (with -R) its subdirectories.
    fn list(&mut self, dir: &Dir, header: bool, top: bool) {
        if header {
            let blank = if self.printed { "\n" } else { "" };
            let shown = ls_name(&dir.shown, self.hide);
            self.write(format_args!("{blank}{shown}:\n"));
            self.printed = true;
        }
        let entries = match read_dir(&dir.session, &dir.fh) {
            Ok(e) => e,
            Err(e) => {
                let code = if top { 2 } else { 1 };
                self.fail(
                    code,
                    // A terminal's, in all likelihood: never raw.
                    format_args!("cannot open directory '{}': {e}", ls_name(&dir.shown, true)),
                );
                return;
            }
        };
        let show_hidden = self.args.all || self.args.almost_all;
        let mut items = Vec::with_capacity(entries.len() + 2);
        let mut subdirs = Vec::new();
        if self.args.all {
            items.push(Item {
                name: b".".to_vec(),
                attr: dir.attr,
                link: None,
            });
            if let Ok((_, Some(attr))) = dir.session.nfs().lookup(&dir.fh, b"..") {
                items.push(Item {
                    name: b"..".to_vec(),
                    attr,
                    link: None,
                });
            }
        }
        for e in entries {
            if !show_hidden && e.name.first() == Some(&b'.') {
                continue;
            }
            if self.args.recursive && e.attr.ftype == Ftype3::Dir {
                let mut shown = dir.shown.clone();
                while shown.last() == Some(&b'/') {
                    shown.pop();
                }
                shown.push(b'/');
                shown.extend_from_slice(&e.name);
                subdirs.push(Dir {
                    shown,
                    session: Arc::clone(&dir.session),
                    fh: e.fh,
                    attr: e.attr,
                });
            }
            items.push(self.item(
                &dir.session,
                e.name,
                Resolved {
                    fh: e.fh,
                    attr: e.attr,
                },
            ));
        }
        items.sort_by(|a, b| a.name.cmp(&b.name));
        let blocks: u64 = items.iter().map(|i| i.attr.used.div_ceil(512)).sum();
        self.print(&items, Some(blocks));
        self.printed = true;
        subdirs.sort_by(|a, b| a.shown.cmp(&b.shown));
        for sub in subdirs {
            if self.ctx.stdout_closed() {
                return;
            }
            self.list(&sub, true, false);
        }
    }

    fn write(&mut self, text: std::fmt::Arguments<'_>) {
        if self.ctx.stdout_closed() {
            return;
        }
        if let Err(e) = self.out.write_fmt(text) {
            self.ctx.stdout_failed(&e);
        }
    }

    /// Prints `items`; `blocks` (512-byte units) is a directory's total.
    fn print(&mut self, items: &[Item], blocks: Option<u64>) {
        if self.args.long {
            self.print_long(items, blocks);
        } else if self.tty && !self.args.one_per_line {
            let names: Vec<_> = items.iter().map(|i| ls_name(&i.name, self.hide)).collect();
            let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
            let text = columns(&names, terminal_width());
            self.write(format_args!("{text}"));
        } else {
            for i in items {
                let name = ls_name(&i.name, self.hide);
                self.write(format_args!("{name}\n"));
            }
        }
    }

    fn size(&self, attr: &Fattr3) -> String {
        match attr.ftype {
            Ftype3::Chr | Ftype3::Blk => {
                format!("{}, {}", attr.rdev.specdata1, attr.rdev.specdata2)
            }
            _ if self.args.human => human(attr.size),
            _ => attr.size.to_string(),
        }
    }

    fn print_long(&mut self, items: &[Item], blocks: Option<u64>) {
        if let Some(blocks) = blocks {
            let total = if self.args.human {
                human(blocks * 512)
            } else {
                blocks.div_ceil(2).to_string()
            };
            self.write(format_args!("total {total}\n"));
        }
        let sizes: Vec<String> = items.iter().map(|i| self.size(&i.attr)).collect();
        let width = |f: &dyn Fn(&Fattr3) -> u32| {
            items
                .iter()
                .map(|i| f(&i.attr).to_string().len())
                .max()
                .unwrap_or(1)
        };
        let nlink_w = width(&|a| a.nlink);
        let uid_w = width(&|a| a.uid);
        let gid_w = width(&|a| a.gid);
        let size_w = sizes.iter().map(String::len).max().unwrap_or(1);
        for (item, size) in items.iter().zip(&sizes) {
            let a = &item.attr;
            let line = format!(
                "{} {:>nlink_w$} {:>uid_w$} {:>gid_w$} {size:>size_w$} {} {}",
                mode_string(a.ftype, a.mode),
                a.nlink,
                a.uid,
                a.gid,
                ls_time(a.mtime, self.now),
                ls_name(&item.name, self.hide),
            );
            match &item.link {
                Some(t) => {
                    let t = ls_name(t, self.hide);
                    self.write(format_args!("{line} -> {t}\n"));
                }
                None => self.write(format_args!("{line}\n")),
            }
        }
    }
}

/// The terminal's width: `COLUMNS`, else the terminal's, else 80.
fn terminal_width() -> usize {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    rustix::termios::tcgetwinsize(io::stdout())
        .ok()
        .map(|w| usize::from(w.ws_col))
        .filter(|n| *n > 0)
        .unwrap_or(80)
}

/// GNU ls's vertical columns: the most columns that fit in `width`, names
/// running down each column, two spaces between columns.
fn columns(names: &[&str], width: usize) -> String {
    let n = names.len();
    if n == 0 {
        return String::new();
    }
    let lens: Vec<usize> = names.iter().map(|s| s.chars().count()).collect();
    let mut layout = (1, vec![lens.iter().copied().max().unwrap_or(0)]);
    for cols in (2..=(width / 3).clamp(1, n)).rev() {
        let rows = n.div_ceil(cols);
        if n.div_ceil(rows) != cols {
            continue; // This many columns would leave the last one empty.
        }
        let mut widths = vec![0; cols];
        for (i, len) in lens.iter().enumerate() {
            let c = i / rows;
            let gap = if c + 1 == cols { 0 } else { 2 };
            widths[c] = widths[c].max(len + gap);
        }
        if widths.iter().sum::<usize>() < width {
            layout = (cols, widths);
            break;
        }
    }
    let (cols, widths) = layout;
    let rows = n.div_ceil(cols);
    let mut out = String::new();
    for r in 0..rows {
        for (c, w) in widths.iter().enumerate() {
            let i = c * rows + r;
            let Some(name) = names.get(i) else { break };
            out.push_str(name);
            if i + rows < n {
                out.extend(std::iter::repeat_n(' ', w.saturating_sub(lens[i])));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fill_down_then_across() {
        let names = ["a", "bb", "ccc", "d", "eeeee"];
        assert_eq!(columns(&names, 80), "a  bb  ccc  d  eeeee\n");
        assert_eq!(columns(&names, 12), "a    d\nbb   eeeee\nccc\n");
        assert_eq!(columns(&names, 3), "a\nbb\nccc\nd\neeeee\n");
        assert_eq!(columns(&[], 80), "");
    }

    #[test]
    fn control_chars_are_hidden_on_a_terminal_unless_asked() {
        #[derive(clap::Parser)]
        #[command(disable_help_flag = true)]
        struct Cmd {
            #[command(flatten)]
            ls: LsArgs,
        }
        let hide = |flags: &[&str], tty: bool| {
            let argv = [&["ls"][..], flags, &["nfs://h/e"]].concat();
            <Cmd as clap::Parser>::try_parse_from(argv)
                .map(|c| c.ls.hide_control_chars(tty))
                .ok()
        };
        assert_eq!(hide(&[], true), Some(true));
        assert_eq!(hide(&[], false), Some(false));
        assert_eq!(hide(&["-q"], false), Some(true));
        assert_eq!(hide(&["--hide-control-chars"], false), Some(true));
        assert_eq!(hide(&["--show-control-chars"], true), Some(false));
        // The last one given wins, as in GNU ls.
        assert_eq!(hide(&["-q", "--show-control-chars"], true), Some(false));
        assert_eq!(hide(&["--show-control-chars", "-lq"], false), Some(true));
    }
}

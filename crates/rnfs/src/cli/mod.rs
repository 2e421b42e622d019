//! The client commands (`ls`, `stat`, `cat`, `cp`, `mv`, `rm`, `mkdir`, `df`)
//! on `nfs://` URLs, with coreutils' output, messages and exit codes.
//!
//! Each command has its module with an `Args` struct (clap derive) and a `run`
//! function taking a [`Ctx`]: the sessions opened so far (one per server and
//! export, shared by all arguments) and the exit status. Errors are printed
//! as `rnfs CMD: ...` where they happen and the command goes on with its next
//! argument, as coreutils do.

/// The paragraph on URLs every command's `--help` ends its description with.
macro_rules! url_help {
    () => {
        "\n\nURLs follow libnfs: nfs://HOST[:PORT]/EXPORT/PATH[?version=3&nfsport=N&mountport=N]. \
         PORT (or nfsport) is the NFS port and mountport the MOUNT port; a port not given \
         is asked of the server's port mapper, else 2049 (rnfs serves MOUNT on its NFS \
         port). IPv6 hosts go in brackets. The export is the longest one the server \
         lists that holds the path. Calls are made with AUTH_SYS as your uid, gid and \
         groups unless --uid/--gid say otherwise."
    };
}

mod cat;
mod copy;
mod df;
mod format;
mod ls;
mod mkdir;
mod progress;
mod remote;
mod rm;
mod stat;
mod transfer;

use std::fmt::Display;
use std::io;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use clap::Args;
use rnfs_client::{ClientOptions, Credential, NfsUrl, UrlError};

use remote::Remotes;

/// The client subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ClientCommand {
    /// List directory contents (like ls).
    #[command(long_about = ls::ABOUT, after_long_help = ls::EXAMPLES, disable_help_flag = true)]
    Ls(ls::LsArgs),
    /// Display file status (like stat).
    #[command(long_about = stat::ABOUT, after_long_help = stat::EXAMPLES)]
    Stat(stat::StatArgs),
    /// Print files to standard output (like cat).
    #[command(long_about = cat::ABOUT, after_long_help = cat::EXAMPLES)]
    Cat(cat::CatArgs),
    /// Copy files and directories between NFS and local paths (like cp).
    #[command(long_about = copy::CP_ABOUT, after_long_help = copy::CP_EXAMPLES,
              override_usage = copy::CP_USAGE)]
    Cp(copy::CpArgs),
    /// Move or rename files (like mv).
    #[command(long_about = copy::MV_ABOUT, after_long_help = copy::MV_EXAMPLES,
              override_usage = copy::MV_USAGE)]
    Mv(copy::MvArgs),
    /// Remove files or directories (like rm).
    #[command(long_about = rm::ABOUT, after_long_help = rm::EXAMPLES)]
    Rm(rm::RmArgs),
    /// Make directories (like mkdir).
    #[command(long_about = mkdir::ABOUT, after_long_help = mkdir::EXAMPLES)]
    Mkdir(mkdir::MkdirArgs),
    /// Report file system space usage (like df).
    #[command(long_about = df::ABOUT, after_long_help = df::EXAMPLES, disable_help_flag = true)]
    Df(df::DfArgs),
}

/// Options every client command takes.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Connection options")]
pub(crate) struct ConnArgs {
    /// AUTH_SYS user id to call as [default: yours]. With --uid or --gid, no
    /// supplementary groups are sent.
    #[arg(long, value_name = "UID")]
    uid: Option<u32>,

    /// AUTH_SYS group id to call as [default: yours].
    #[arg(long, value_name = "GID")]
    gid: Option<u32>,

    /// Seconds to wait for a connection, and for each reply (a call is sent
    /// up to 3 times before it fails).
    #[arg(long, value_name = "SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    timeout: u64,

    /// TCP connections to each server, used round-robin (like the Linux
    /// nconnect mount option).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=16))]
    nconnect: u32,
}

impl ConnArgs {
    fn remotes(&self) -> Remotes {
        let options = ClientOptions {
            timeout: Duration::from_secs(self.timeout),
            connect_timeout: Duration::from_secs(self.timeout),
            connections: self.nconnect,
            ..ClientOptions::default()
        };
        let me = Credential::current();
        let cred = if self.uid.is_none() && self.gid.is_none() {
            me
        } else {
            Credential::new(
                self.uid.unwrap_or(me.uid),
                self.gid.unwrap_or(me.gid),
                Vec::new(),
            )
        };
        Remotes::new(options, cred)
    }
}

/// An `nfs://` URL argument, with the text the user typed (for messages).
#[derive(Debug, Clone)]
pub(crate) struct UrlArg {
    /// As typed.
    text: String,
    /// Parsed.
    url: NfsUrl,
}

impl UrlArg {
    /// Whether the URL's path was typed with a trailing `/`: it names a
    /// directory (a symbolic link is followed to one), read from what was
    /// typed since the parsed path is normalized.
    pub(crate) fn trailing_slash(&self) -> bool {
        let path = self
            .text
            .split_once('?')
            .map_or(self.text.as_str(), |(p, _)| p);
        path.ends_with('/')
    }
}

/// clap's parser for `nfs://` URL arguments: a bad URL is a usage error.
fn parse_url(s: &str) -> Result<UrlArg, UrlError> {
    Ok(UrlArg {
        text: s.to_owned(),
        url: NfsUrl::parse(s)?,
    })
}

/// A `cp`/`mv` operand: an `nfs://` URL or a local path.
#[derive(Debug, Clone)]
pub(crate) enum PathArg {
    /// On a server.
    Nfs(UrlArg),
    /// On this host.
    Local(PathBuf),
}

impl PathArg {
    /// As the user typed it, for messages (control characters and bytes
    /// that are not UTF-8 quoted as GNU quotes them).
    fn text(&self) -> String {
        use std::os::unix::ffi::OsStrExt;
        match self {
            Self::Nfs(u) => format::msg_name(u.text.as_bytes()).into_owned(),
            Self::Local(p) => format::msg_name(p.as_os_str().as_bytes()).into_owned(),
        }
    }

    /// Whether the operand ends in `/`: it names a directory, and a
    /// non-directory cannot be created at it (a URL's path is normalized,
    /// so this is read from what was typed).
    fn trailing_slash(&self) -> bool {
        use std::os::unix::ffi::OsStrExt;
        match self {
            Self::Nfs(u) => u.trailing_slash(),
            Self::Local(p) => p.as_os_str().as_bytes().ends_with(b"/"),
        }
    }

    /// Whether the operand's last component is `.` (`DIR/.`, `.`): it
    /// names the directory itself, so copying it into a directory copies
    /// its contents there, as GNU cp does. Read from what was typed, for a
    /// URL's path is normalized.
    fn names_dot(&self) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let path: &[u8] = match self {
            Self::Nfs(u) => {
                let text = u.text.split_once('?').map_or(u.text.as_str(), |(p, _)| p);
                // The path: what follows the authority.
                let rest = text.strip_prefix("nfs://").unwrap_or(text);
                match rest.find('/') {
                    Some(i) => &rest.as_bytes()[i..],
                    None => return false,
                }
            }
            Self::Local(p) => p.as_os_str().as_bytes(),
        };
        let mut path = path;
        while let [head @ .., b'/'] = path {
            path = head;
        }
        let last = path.rsplit(|&b| b == b'/').next().unwrap_or_default();
        last == b"." || (matches!(self, Self::Nfs(_)) && last.eq_ignore_ascii_case(b"%2e"))
    }
}

/// clap's parser for operands that may be local (see [`parse_path_arg`]):
/// a local path need not be UTF-8, as file names on Unix need not be.
fn path_arg_parser() -> impl clap::builder::TypedValueParser<Value = PathArg> {
    use clap::builder::TypedValueParser;
    clap::builder::OsStringValueParser::new().try_map(|s: std::ffi::OsString| {
        match s.to_str() {
            Some(text) => parse_path_arg(text),
            // Not UTF-8: a URL is refused for its scheme (a URL spells other
            // bytes with percent-escapes), anything else is a local path.
            None => {
                use std::os::unix::ffi::OsStrExt;
                let bytes = s.as_bytes();
                let scheme_end = bytes.windows(3).position(|w| w == b"://");
                match scheme_end {
                    Some(i) if i > 0 && bytes[..i].iter().all(u8::is_ascii_alphanumeric) => {
                        Err(UrlError::Scheme(s.to_string_lossy().into_owned()))
                    }
                    _ if bytes.starts_with(b"nfs:") => {
                        Err(UrlError::Path(s.to_string_lossy().into_owned()))
                    }
                    _ => Ok(PathArg::Local(PathBuf::from(s))),
                }
            }
        }
    })
}

/// clap's parser for operands that may be local: `nfs://...` is a URL,
/// another `scheme://` is refused, anything else is a local path.
fn parse_path_arg(s: &str) -> Result<PathArg, UrlError> {
    if s.starts_with("nfs:") {
        return parse_url(s).map(PathArg::Nfs);
    }
    match s.split_once("://") {
        Some((scheme, _))
            if !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            Err(UrlError::Scheme(s.to_owned()))
        }
        _ => Ok(PathArg::Local(PathBuf::from(s))),
    }
}

/// What one command shares: its name (for messages), its sessions and the
/// exit status so far. `Sync`, so parallel copies report through it.
#[derive(Debug)]
pub(crate) struct Ctx {
    cmd: &'static str,
    remotes: Remotes,
    status: AtomicU8,
    /// Standard output was closed (EPIPE): stop quietly.
    broken_pipe: AtomicBool,
}

impl Ctx {
    fn new(cmd: &'static str, conn: &ConnArgs) -> Self {
        Self {
            cmd,
            remotes: conn.remotes(),
            status: AtomicU8::new(0),
            broken_pipe: AtomicBool::new(false),
        }
    }

    /// Prints `rnfs CMD: msg` to standard error and raises the exit status
    /// to at least `code`.
    pub(crate) fn fail(&self, code: u8, msg: impl Display) {
        eprintln!("rnfs {}: {msg}", self.cmd);
        self.status.fetch_max(code, Ordering::Relaxed);
    }

    /// Records a failure writing standard output: a closed pipe ends the
    /// command quietly (as SIGPIPE ends coreutils), anything else is reported.
    pub(crate) fn stdout_failed(&self, e: &io::Error) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            self.broken_pipe.store(true, Ordering::Relaxed);
        } else if !self.broken_pipe.load(Ordering::Relaxed) {
            self.fail(
                1,
                format_args!("write error: {}", remote::Error::Io(clone_io(e))),
            );
        }
    }

    /// Prints `msg` and a newline to standard output (`-v`); a closed pipe
    /// ends the output quietly instead of panicking, as `println!` would.
    pub(crate) fn say(&self, msg: impl Display) {
        use std::io::Write;
        if self.stdout_closed() {
            return;
        }
        if let Err(e) = writeln!(io::stdout(), "{msg}") {
            self.stdout_failed(&e);
        }
    }

    /// Whether standard output was closed.
    pub(crate) fn stdout_closed(&self) -> bool {
        self.broken_pipe.load(Ordering::Relaxed)
    }

    /// The status failures have raised so far.
    pub(crate) fn status(&self) -> u8 {
        self.status.load(Ordering::Relaxed)
    }

    fn finish(self) -> ExitCode {
        self.remotes.unmount_all();
        if self.broken_pipe.load(Ordering::Relaxed) {
            // What a shell reports for a process killed by SIGPIPE.
            return ExitCode::from(141);
        }
        ExitCode::from(self.status())
    }
}

fn clone_io(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(n) => io::Error::from_raw_os_error(n),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// Runs one client command; the exit code follows coreutils.
pub(crate) fn run(cmd: ClientCommand) -> ExitCode {
    match cmd {
        ClientCommand::Ls(a) => run_with("ls", &a.conn, |ctx| ls::run(ctx, &a)),
        ClientCommand::Stat(a) => run_with("stat", &a.conn, |ctx| stat::run(ctx, &a)),
        ClientCommand::Cat(a) => run_with("cat", &a.conn, |ctx| cat::run(ctx, &a)),
        ClientCommand::Cp(a) => run_with("cp", &a.conn, |ctx| copy::run_cp(ctx, &a)),
        ClientCommand::Mv(a) => run_with("mv", &a.conn, |ctx| copy::run_mv(ctx, &a)),
        ClientCommand::Rm(a) => run_with("rm", &a.conn, |ctx| rm::run(ctx, &a)),
        ClientCommand::Mkdir(a) => run_with("mkdir", &a.conn, |ctx| mkdir::run(ctx, &a)),
        ClientCommand::Df(a) => run_with("df", &a.conn, |ctx| df::run(ctx, &a)),
    }
}

/// Runs `body` with a fresh [`Ctx`] for command `cmd`, then unmounts.
fn run_with(cmd: &'static str, conn: &ConnArgs, body: impl FnOnce(&Ctx)) -> ExitCode {
    let ctx = Ctx::new(cmd, conn);
    body(&ctx);
    ctx.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_are_urls_or_local_paths() {
        assert!(matches!(parse_path_arg("nfs://h/e/x"), Ok(PathArg::Nfs(_))));
        assert!(matches!(parse_path_arg("./a:b"), Ok(PathArg::Local(_))));
        assert!(matches!(parse_path_arg("/tmp/x"), Ok(PathArg::Local(_))));
        assert!(parse_path_arg("http://h/x").is_err());
        assert!(parse_path_arg("nfs:/h").is_err());
        let slash = |s: &str| parse_path_arg(s).map(|a| a.trailing_slash()).ok();
        assert_eq!(slash("nfs://h/e/x/"), Some(true));
        assert_eq!(slash("nfs://h/e/x/?mountport=1"), Some(true));
        assert_eq!(slash("nfs://h/e/x?mountport=1"), Some(false));
        assert_eq!(slash("dir/"), Some(true));
        assert_eq!(slash("dir"), Some(false));
        let dot = |s: &str| parse_path_arg(s).map(|a| a.names_dot()).ok();
        assert_eq!(dot("nfs://h/e/d/."), Some(true));
        assert_eq!(dot("nfs://h/e/d/./"), Some(true));
        assert_eq!(dot("nfs://h/e/d/%2E?mountport=1"), Some(true));
        assert_eq!(dot("nfs://h/."), Some(true));
        assert_eq!(dot("nfs://h/e/d.?version=3"), Some(false));
        assert_eq!(dot("nfs://h/e/.d"), Some(false));
        assert_eq!(dot("."), Some(true));
        assert_eq!(dot("./"), Some(true));
        assert_eq!(dot("d/."), Some(true));
        assert_eq!(dot("d/.."), Some(false));
        assert_eq!(dot("d"), Some(false));
    }
}

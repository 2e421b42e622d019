//! The client commands (`ls`, `stat`, `cat`, `cp`, `mv`, `rm`, `mkdir`, `df`) on
//! `nfs://` URLs (being built).

use std::process::ExitCode;

/// The client subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ClientCommand {}

/// Runs one client command; the exit code follows coreutils.
pub(crate) fn run(cmd: ClientCommand) -> ExitCode {
    match cmd {}
}

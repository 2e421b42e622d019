//! cp's progress bar: drawn on standard error when it is a terminal, or as
//! one plain line a second with `--progress` when it is not (a log file).

use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};

/// A bar for `total` bytes in `files` files; hidden unless standard error is
/// a terminal or `force`.
pub(crate) fn bar(total: u64, files: usize, force: bool) -> ProgressBar {
    let tty = io::stderr().is_terminal();
    let target = if tty {
        ProgressDrawTarget::stderr_with_hz(10)
    } else if force {
        ProgressDrawTarget::term_like_with_hz(Box::new(PlainStderr), 1)
    } else {
        return ProgressBar::hidden();
    };
    let template = if tty {
        "{prefix} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}"
    } else {
        "{prefix} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta} {msg}"
    };
    let style = ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    let bar = ProgressBar::with_draw_target(Some(total), target).with_style(style);
    bar.set_prefix(format!("0/{files} files"));
    bar.enable_steady_tick(Duration::from_millis(if tty { 200 } else { 1000 }));
    bar
}

/// Plain lines on standard error: every redraw is one line, no cursor moves.
#[derive(Debug)]
struct PlainStderr;

impl TermLike for PlainStderr {
    fn width(&self) -> u16 {
        100
    }

    fn move_cursor_up(&self, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn move_cursor_down(&self, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn move_cursor_right(&self, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn move_cursor_left(&self, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn write_line(&self, s: &str) -> io::Result<()> {
        writeln!(io::stderr(), "{}", s.trim_end())
    }

    fn write_str(&self, s: &str) -> io::Result<()> {
        if s.trim().is_empty() {
            return Ok(());
        }
        self.write_line(s)
    }

    fn clear_line(&self) -> io::Result<()> {
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        io::stderr().flush()
    }
}

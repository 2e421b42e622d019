//! How coreutils prints modes, times, sizes and device numbers.

use std::borrow::Cow;
use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Local, TimeZone};
use rnfs_nfs3::{Fattr3, Ftype3, Nfstime3};

/// Half a Gregorian year in seconds: GNU ls's limit for a "recent" time.
const SIX_MONTHS: i64 = 31_556_952 / 2;

/// `-rw-r--r--`, as `ls -l` and `stat` print it.
pub(crate) fn mode_string(ftype: Ftype3, mode: u32) -> String {
    let kind = match ftype {
        Ftype3::Reg => '-',
        Ftype3::Dir => 'd',
        Ftype3::Blk => 'b',
        Ftype3::Chr => 'c',
        Ftype3::Lnk => 'l',
        Ftype3::Sock => 's',
        Ftype3::Fifo => 'p',
    };
    let bit = |mask: u32, c: char| if mode & mask != 0 { c } else { '-' };
    let special = |exec: bool, set: bool, on: char, off: char| match (exec, set) {
        (true, true) => on,
        (false, true) => off,
        (true, false) => 'x',
        (false, false) => '-',
    };
    let mut s = String::with_capacity(10);
    s.push(kind);
    s.push(bit(0o400, 'r'));
    s.push(bit(0o200, 'w'));
    s.push(special(mode & 0o100 != 0, mode & 0o4000 != 0, 's', 'S'));
    s.push(bit(0o040, 'r'));
    s.push(bit(0o020, 'w'));
    s.push(special(mode & 0o010 != 0, mode & 0o2000 != 0, 's', 'S'));
    s.push(bit(0o004, 'r'));
    s.push(bit(0o002, 'w'));
    s.push(special(mode & 0o001 != 0, mode & 0o1000 != 0, 't', 'T'));
    s
}

/// stat's `%F`.
pub(crate) fn type_name(attr: &Fattr3) -> &'static str {
    match attr.ftype {
        Ftype3::Reg if attr.size == 0 => "regular empty file",
        Ftype3::Reg => "regular file",
        Ftype3::Dir => "directory",
        Ftype3::Blk => "block special file",
        Ftype3::Chr => "character special file",
        Ftype3::Lnk => "symbolic link",
        Ftype3::Sock => "socket",
        Ftype3::Fifo => "fifo",
    }
}

fn local(t: Nfstime3) -> Option<DateTime<Local>> {
    Local
        .timestamp_opt(i64::from(t.seconds), t.nseconds.min(999_999_999))
        .single()
}

/// ls's time column: `Mon DD HH:MM` within the last six months,
/// `Mon DD  YYYY` otherwise (older, or in the future).
pub(crate) fn ls_time(t: Nfstime3, now: SystemTime) -> String {
    let now = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let when = i64::from(t.seconds);
    let recent = now - SIX_MONTHS < when && when <= now;
    match local(t) {
        Some(dt) if recent => dt.format("%b %e %H:%M").to_string(),
        Some(dt) => dt.format("%b %e  %Y").to_string(),
        None => t.seconds.to_string(),
    }
}

/// stat's time: `2024-01-05 14:03:22.123456789 +0100`.
pub(crate) fn stat_time(t: Nfstime3) -> String {
    match local(t) {
        Some(dt) => dt.format("%Y-%m-%d %H:%M:%S%.9f %z").to_string(),
        None => t.seconds.to_string(),
    }
}

/// `ls -h`/`df -h` sizes: powers of 1024, rounded up, one decimal below 10
/// (`1.5K`, `10K`, `123M`), bytes below 1024 as they are.
pub(crate) fn human(n: u64) -> String {
    const UNITS: [char; 6] = ['K', 'M', 'G', 'T', 'P', 'E'];
    if n < 1024 {
        return n.to_string();
    }
    let n = u128::from(n);
    let mut base: u128 = 1;
    for unit in UNITS {
        base *= 1024;
        if n < 10 * base {
            let tenths = n.saturating_mul(10).div_ceil(base);
            if tenths < 100 {
                return format!("{}.{}{unit}", tenths / 10, tenths % 10);
            }
            return format!("10{unit}");
        }
        let whole = n.div_ceil(base);
        if whole < 1024 {
            return format!("{whole}{unit}");
        }
    }
    format!("{}E", n.div_ceil(base))
}

/// A name (bytes from the server, not necessarily UTF-8) as ls prints it.
/// With `hide` (GNU ls's `-q`, its default on a terminal) each control
/// character (C0, DEL, C1: ESC and CSI among them, which a terminal would
/// obey) and each byte that is not UTF-8 is printed as `?`; without,
/// invalid UTF-8 is replaced by U+FFFD and the rest printed as it is.
pub(crate) fn ls_name(name: &[u8], hide: bool) -> Cow<'_, str> {
    if !hide {
        return String::from_utf8_lossy(name);
    }
    let clean = |s: &str| !s.chars().any(char::is_control);
    match std::str::from_utf8(name) {
        Ok(s) if clean(s) => return Cow::Borrowed(s),
        _ => {}
    }
    let mut out = String::with_capacity(name.len());
    for chunk in name.utf8_chunks() {
        out.extend(
            chunk
                .valid()
                .chars()
                .map(|c| if c.is_control() { '?' } else { c }),
        );
        out.extend(std::iter::repeat_n('?', chunk.invalid().len()));
    }
    Cow::Owned(out)
}

/// A name (bytes, not necessarily UTF-8) for a message, where it is shown
/// between single quotes (`'{}'`): each run of control characters (C0,
/// DEL, C1) and bytes that are not UTF-8 is spelt as GNU's shell-escape
/// quoting spells it, closing the quote, `$'...'` with C escapes, and
/// opening it again: `a<ESC>b` becomes `a'$'\033''b`, which quoted is
/// GNU's `'a'$'\033''b'` (at the end of a name GNU leaves out the empty
/// `''` this has). Nothing a terminal would obey reaches it.
pub(crate) fn msg_name(name: &[u8]) -> Cow<'_, str> {
    use std::fmt::Write;
    match std::str::from_utf8(name) {
        Ok(s) if !s.chars().any(char::is_control) => return Cow::Borrowed(s),
        _ => {}
    }
    let mut out = String::with_capacity(name.len() + 16);
    // Whether a `$'...'` run is open.
    let mut escaping = false;
    let escape = |out: &mut String, escaping: &mut bool, bytes: &[u8]| {
        if !*escaping {
            out.push_str("'$'");
            *escaping = true;
        }
        for &b in bytes {
            match b {
                0x07 => out.push_str("\\a"),
                0x08 => out.push_str("\\b"),
                0x09 => out.push_str("\\t"),
                0x0a => out.push_str("\\n"),
                0x0b => out.push_str("\\v"),
                0x0c => out.push_str("\\f"),
                0x0d => out.push_str("\\r"),
                _ => {
                    let _ = write!(out, "\\{b:03o}");
                }
            }
        }
    };
    let end_escape = |out: &mut String, escaping: &mut bool| {
        if *escaping {
            out.push_str("''");
            *escaping = false;
        }
    };
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                let mut buf = [0; 4];
                escape(&mut out, &mut escaping, c.encode_utf8(&mut buf).as_bytes());
            } else {
                end_escape(&mut out, &mut escaping);
                out.push(c);
            }
        }
        if !chunk.invalid().is_empty() {
            escape(&mut out, &mut escaping, chunk.invalid());
        }
    }
    end_escape(&mut out, &mut escaping);
    Cow::Owned(out)
}

/// A Linux `dev_t` (or NFS fsid) as (major, minor), glibc's `gnu_dev_major/minor`.
pub(crate) fn dev_split(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major, minor)
}

/// The process's umask (read by setting it and setting it back).
pub(crate) fn umask() -> u32 {
    use rustix::fs::Mode;
    let old = rustix::process::umask(Mode::from_raw_mode(0o022));
    rustix::process::umask(old);
    old.as_raw_mode()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_print_like_ls() {
        assert_eq!(mode_string(Ftype3::Reg, 0o644), "-rw-r--r--");
        assert_eq!(mode_string(Ftype3::Dir, 0o755), "drwxr-xr-x");
        assert_eq!(mode_string(Ftype3::Lnk, 0o777), "lrwxrwxrwx");
        assert_eq!(mode_string(Ftype3::Reg, 0o4755), "-rwsr-xr-x");
        assert_eq!(mode_string(Ftype3::Reg, 0o2644), "-rw-r-Sr--");
        assert_eq!(mode_string(Ftype3::Dir, 0o1777), "drwxrwxrwt");
        assert_eq!(mode_string(Ftype3::Dir, 0o1770), "drwxrwx--T");
    }

    #[test]
    fn human_sizes_round_up_like_gnu() {
        assert_eq!(human(0), "0");
        assert_eq!(human(1023), "1023");
        assert_eq!(human(1024), "1.0K");
        assert_eq!(human(1025), "1.1K");
        assert_eq!(human(1536), "1.5K");
        assert_eq!(human(10 * 1024 - 1), "10K");
        assert_eq!(human(10 * 1024), "10K");
        assert_eq!(human(10 * 1024 + 1), "11K");
        assert_eq!(human(1024 * 1024 - 1), "1.0M");
        assert_eq!(human(5 * 1024 * 1024 * 1024), "5.0G");
        assert_eq!(human(u64::MAX), "16E");
    }

    #[test]
    fn ls_time_switches_to_the_year_after_six_months() {
        let now = UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let recent = Nfstime3 {
            seconds: 1_700_000_000 - 3600,
            nseconds: 0,
        };
        let old = Nfstime3 {
            seconds: 1_700_000_000 - 200 * 86_400,
            nseconds: 0,
        };
        let future = Nfstime3 {
            seconds: 1_700_000_000 + 86_400,
            nseconds: 0,
        };
        let r = ls_time(recent, now);
        assert_eq!(r.len(), 12, "{r}");
        assert!(r.contains(':'), "{r}");
        let o = ls_time(old, now);
        assert_eq!(o.len(), 12, "{o}");
        assert!(o.ends_with(" 2023"), "{o}");
        assert!(ls_time(future, now).ends_with(" 2023"));
    }

    #[test]
    fn ls_names_hide_control_characters() {
        // What a hostile server could name a file to drive a terminal.
        let evil = b"a\x1b]0;owned\x07b\x1b[2Jc\r\n\t\x7f\xc2\x9bd";
        assert_eq!(ls_name(evil, true), "a?]0;owned?b?[2Jc?????d");
        assert_eq!(ls_name(b"bad\xff\xfe", true), "bad??");
        assert_eq!(
            ls_name("caf\u{e9} \u{1f600}".as_bytes(), true),
            "caf\u{e9} \u{1f600}"
        );
        assert!(matches!(ls_name(b"plain", true), Cow::Borrowed("plain")));
        // Shown as they are (GNU's --show-control-chars), invalid UTF-8
        // replaced.
        assert_eq!(ls_name(b"a\x1b[2Jb", false), "a\x1b[2Jb");
        assert_eq!(ls_name(b"bad\xff", false), "bad\u{fffd}");
    }

    #[test]
    fn message_names_are_quoted_like_gnu() {
        let quoted = |n: &[u8]| format!("'{}'", msg_name(n));
        assert_eq!(quoted(b"plain"), "'plain'");
        assert_eq!(quoted(b"a\x1bb"), r"'a'$'\033''b'");
        assert_eq!(quoted(b"\x1b[2J"), r"''$'\033''[2J'");
        assert_eq!(quoted(b"a\n\tb\x7f"), r"'a'$'\n\t''b'$'\177'''");
        assert_eq!(quoted(b"bad\xff\xfe"), r"'bad'$'\377\376'''");
        assert_eq!(quoted("x\u{9b}y".as_bytes()), r"'x'$'\302\233''y'");
        assert_eq!(quoted("caf\u{e9}".as_bytes()), "'caf\u{e9}'");
        assert!(matches!(msg_name(b"plain"), Cow::Borrowed("plain")));
    }

    #[test]
    fn devices_split_like_glibc() {
        assert_eq!(dev_split(0xfe00), (254, 0));
        assert_eq!(dev_split(0x803), (8, 3));
    }
}

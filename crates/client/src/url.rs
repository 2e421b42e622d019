//! `nfs://` URLs, as libnfs spells them:
//! `nfs://host[:port]/export/path[?version=3&nfsport=N&mountport=N]`.
//!
//! `port` (or `nfsport`) is the NFS port and `mountport` the MOUNT port; a
//! port not given is asked of the server's portmapper. IPv6 hosts go in
//! brackets. Percent-escapes in the path are decoded.

use std::fmt;

/// A parsed `nfs://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NfsUrl {
    /// Host name or address (without brackets).
    pub host: String,
    /// The NFS port, if given.
    pub nfs_port: Option<u16>,
    /// The MOUNT port, if given.
    pub mount_port: Option<u16>,
    /// The path: the export followed by the path inside it. Always starts
    /// with `/`, has no empty, `.` or `..` components, and no trailing `/`
    /// (except the root itself).
    pub path: String,
}

/// Why a URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// Not an `nfs://` URL.
    #[error("not an nfs:// URL: {0}")]
    Scheme(String),
    /// No host.
    #[error("no server host in URL: {0}")]
    NoHost(String),
    /// A port that is not a number in 1..=65535.
    #[error("bad port {0:?}")]
    Port(String),
    /// `version=` other than 3.
    #[error("NFS version {0} is not supported (only version=3)")]
    Version(String),
    /// An unknown `?name=` parameter.
    #[error("unknown URL parameter {0:?} (known: version, nfsport, mountport)")]
    Parameter(String),
    /// A bad percent-escape or a `..` component.
    #[error("bad path in URL: {0}")]
    Path(String),
}

fn parse_port(s: &str) -> Result<u16, UrlError> {
    match s.parse::<u16>() {
        Ok(p) if p != 0 => Ok(p),
        _ => Err(UrlError::Port(s.to_owned())),
    }
}

fn percent_decode(s: &str) -> Result<String, UrlError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| UrlError::Path(s.to_owned()))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| UrlError::Path(s.to_owned()))
}

impl NfsUrl {
    /// Parses `s`.
    pub fn parse(s: &str) -> Result<Self, UrlError> {
        let rest = s
            .strip_prefix("nfs://")
            .ok_or_else(|| UrlError::Scheme(s.to_owned()))?;
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        // Drop `user@`, which libnfs allows and NFSv3 AUTH_SYS ignores.
        let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| UrlError::NoHost(s.to_owned()))?;
            let port = match after.strip_prefix(':') {
                Some(p) => Some(parse_port(p)?),
                None if after.is_empty() => None,
                None => return Err(UrlError::NoHost(s.to_owned())),
            };
            (h.to_owned(), port)
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h.to_owned(), Some(parse_port(p)?)),
                None => (authority.to_owned(), None),
            }
        };
        if host.is_empty() {
            return Err(UrlError::NoHost(s.to_owned()));
        }
        let mut url = Self {
            host,
            nfs_port: port,
            mount_port: None,
            path: normalize(&percent_decode(path)?)?,
        };
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            if pair.is_empty() {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "version" if v == "3" => {}
                "version" => return Err(UrlError::Version(v.to_owned())),
                "nfsport" => url.nfs_port = Some(parse_port(v)?),
                "mountport" => url.mount_port = Some(parse_port(v)?),
                _ => return Err(UrlError::Parameter(k.to_owned())),
            }
        }
        Ok(url)
    }

    /// This URL with `child` (a relative path) appended.
    pub fn join(&self, child: &str) -> Result<Self, UrlError> {
        let mut url = self.clone();
        url.path = normalize(&format!("{}/{}", self.path, child))?;
        Ok(url)
    }

    /// The path's components.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.path.split('/').filter(|c| !c.is_empty())
    }
}

/// `/a//b/./c/` -> `/a/b/c`; `..` is refused (the server decides what a
/// parent is, not the URL).
fn normalize(path: &str) -> Result<String, UrlError> {
    let mut out = String::with_capacity(path.len() + 1);
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err(UrlError::Path(path.to_owned())),
            c => {
                out.push('/');
                out.push_str(c);
            }
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

impl fmt::Display for NfsUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "nfs://[{}]", self.host)?;
        } else {
            write!(f, "nfs://{}", self.host)?;
        }
        if let Some(p) = self.nfs_port {
            write!(f, ":{p}")?;
        }
        f.write_str(&self.path)?;
        if let Some(p) = self.mount_port {
            write!(f, "?mountport={p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn parses_libnfs_forms() {
        let u = NfsUrl::parse("nfs://srv/export/dir/file").unwrap();
        assert_eq!(u.host, "srv");
        assert_eq!(u.nfs_port, None);
        assert_eq!(u.path, "/export/dir/file");
        let u = NfsUrl::parse("nfs://127.0.0.1:2049/e?mountport=635&version=3").unwrap();
        assert_eq!(u.nfs_port, Some(2049));
        assert_eq!(u.mount_port, Some(635));
        let u = NfsUrl::parse("nfs://[::1]:20490/a//b/./c/?nfsport=1").unwrap();
        assert_eq!(u.host, "::1");
        assert_eq!(u.nfs_port, Some(1));
        assert_eq!(u.path, "/a/b/c");
        assert_eq!(NfsUrl::parse("nfs://h").unwrap().path, "/");
        assert_eq!(NfsUrl::parse("nfs://h/a%20b").unwrap().path, "/a b");
        assert_eq!(NfsUrl::parse("nfs://me@h/x").unwrap().host, "h");
        assert_eq!(
            NfsUrl::parse("nfs://h:1/x?mountport=2")
                .unwrap()
                .to_string(),
            "nfs://h:1/x?mountport=2"
        );
    }

    #[test]
    fn refuses_bad_urls() {
        assert!(matches!(
            NfsUrl::parse("http://h/x"),
            Err(UrlError::Scheme(_))
        ));
        assert!(matches!(
            NfsUrl::parse("nfs:///x"),
            Err(UrlError::NoHost(_))
        ));
        assert!(matches!(
            NfsUrl::parse("nfs://h:0/x"),
            Err(UrlError::Port(_))
        ));
        assert!(matches!(
            NfsUrl::parse("nfs://h:99999/x"),
            Err(UrlError::Port(_))
        ));
        assert!(matches!(
            NfsUrl::parse("nfs://h/x?version=4"),
            Err(UrlError::Version(_))
        ));
        assert!(matches!(
            NfsUrl::parse("nfs://h/x?bogus=1"),
            Err(UrlError::Parameter(_))
        ));
        assert!(matches!(
            NfsUrl::parse("nfs://h/a/../b"),
            Err(UrlError::Path(_))
        ));
        assert!(matches!(
            NfsUrl::parse("nfs://h/a%2"),
            Err(UrlError::Path(_))
        ));
    }

    #[test]
    fn join_appends_relative_paths() {
        let u = NfsUrl::parse("nfs://h/e").unwrap();
        assert_eq!(u.join("a/b").unwrap().path, "/e/a/b");
        assert!(u.join("../x").is_err());
    }
}

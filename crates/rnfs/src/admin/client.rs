//! The client side of the admin socket, for `rnfs stats` and `rnfs admin`.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;

use super::protocol::{Request, Response};

/// How long to wait for a reply. Long enough for a `drain`, which waits for
/// calls in flight (its own timeout is shorter).
const REPLY_TIMEOUT: Duration = Duration::from_secs(600);

/// Why an admin request failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdminError {
    /// No server listens on the socket.
    #[error("cannot reach the server's admin socket {}: {} (is rnfs serve running? \
             a server started with its own --admin-socket or --state-dir logs its \
             socket at start: give that path with --socket)",
            path.display(), plain(source))]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The connection failed midway.
    #[error("admin socket {}: {}", path.display(), plain(source))]
    Io {
        /// The socket path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The server refused the request; its message.
    #[error("{0}")]
    Refused(String),
    /// The server's answer is not what this version of rnfs expects.
    #[error("unexpected answer from the server: {0}")]
    BadReply(String),
}

/// `e`'s message without the " (os error N)" suffix, as coreutils print it.
fn plain(e: &io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_owned(),
        _ => text,
    }
}

/// A connection to a running server's admin socket.
#[derive(Debug)]
pub(crate) struct AdminClient {
    path: PathBuf,
    reader: BufReader<UnixStream>,
}

impl AdminClient {
    /// Connects to the socket at `path`.
    pub(crate) fn connect(path: &Path) -> Result<Self, AdminError> {
        let stream = UnixStream::connect(path).map_err(|source| AdminError::Connect {
            path: path.to_owned(),
            source,
        })?;
        stream
            .set_read_timeout(Some(REPLY_TIMEOUT))
            .map_err(|source| AdminError::Io {
                path: path.to_owned(),
                source,
            })?;
        Ok(Self {
            path: path.to_owned(),
            reader: BufReader::new(stream),
        })
    }

    /// Sends `request` and returns the server's result value.
    pub(crate) fn request(&mut self, request: &Request) -> Result<serde_json::Value, AdminError> {
        let mut line =
            serde_json::to_string(request).map_err(|e| AdminError::BadReply(e.to_string()))?;
        line.push('\n');
        let io_err = |source| AdminError::Io {
            path: self.path.clone(),
            source,
        };
        self.reader
            .get_mut()
            .write_all(line.as_bytes())
            .map_err(io_err)?;
        let mut reply = String::new();
        let n = self.reader.read_line(&mut reply).map_err(io_err)?;
        if n == 0 {
            return Err(io_err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            )));
        }
        let response: Response =
            serde_json::from_str(&reply).map_err(|e| AdminError::BadReply(format!("{e}")))?;
        match (response.ok, response.result, response.error) {
            (true, Some(result), _) => Ok(result),
            (true, None, _) => Ok(serde_json::Value::Null),
            (false, _, Some(message)) => Err(AdminError::Refused(message)),
            (false, _, None) => Err(AdminError::Refused("request refused".into())),
        }
    }

    /// [`request`](Self::request), with the result decoded as `T`.
    pub(crate) fn call<T: DeserializeOwned>(&mut self, request: &Request) -> Result<T, AdminError> {
        let value = self.request(request)?;
        serde_json::from_value(value).map_err(|e| AdminError::BadReply(e.to_string()))
    }
}

//! The server side of the admin socket: binding (mode 0600, parent directory
//! created 0700, a stale socket replaced, a live one refused), a peer check on
//! every connection (only root and the server's own user, by `SO_PEERCRED`),
//! one thread per connection up to [`MAX_CONNECTIONS`], bounded request lines.
//!
//! The file mode alone is not enough: the socket exists with the umask's mode
//! between `bind` and the `chmod`, a parent directory that already existed
//! keeps its own mode, and an administrator may loosen either. The peer check
//! does not depend on any of them.

use std::fs::DirBuilder;
use std::io::{self, BufRead, BufReader, ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::protocol::{Request, Response, MAX_REQUEST_LINE};

/// Admin connections served at once; more are told so and closed.
pub(crate) const MAX_CONNECTIONS: usize = 16;

/// An admin connection that sends nothing for this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// Answers one parsed request.
pub(crate) type RequestHandler = dyn Fn(Request) -> Response + Send + Sync;

/// Why the admin socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SocketError {
    /// A server answers on the socket already.
    #[error("another rnfs serve is running ({})", .0.display())]
    InUse(PathBuf),
    /// Something other than a socket has the name.
    #[error("{} exists and is not a socket", .0.display())]
    NotASocket(PathBuf),
    /// The OS refused.
    #[error("cannot create the admin socket {}: {cause}", path.display())]
    Io {
        /// The socket path.
        path: PathBuf,
        /// Why.
        cause: io::Error,
    },
}

/// An admin socket bound but not served yet: binding first lets `rnfs serve`
/// refuse to start before it opens any port. Dropping it removes the file.
#[derive(Debug)]
pub(crate) struct BoundSocket {
    listener: Option<UnixListener>,
    path: PathBuf,
    /// (device, inode) of the socket file we created: only that file is removed
    /// at exit, never one a later server put in its place.
    file_id: (u64, u64),
}

impl BoundSocket {
    /// Creates the parent directory (0700) if missing, replaces a stale socket,
    /// refuses a live one, binds, and restricts the socket to its owner (0600).
    pub(crate) fn bind(path: &Path) -> Result<Self, SocketError> {
        let listener = bind(path)?;
        let meta = std::fs::metadata(path).map_err(|cause| SocketError::Io {
            path: path.to_owned(),
            cause,
        })?;
        Ok(BoundSocket {
            listener: Some(listener),
            path: path.to_owned(),
            file_id: (meta.dev(), meta.ino()),
        })
    }

    /// The socket's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Starts answering requests with `handler` on a thread of its own.
    pub(crate) fn serve(
        mut self,
        handler: Arc<RequestHandler>,
    ) -> Result<AdminSocket, SocketError> {
        let listener = self.listener.take().ok_or_else(|| SocketError::Io {
            path: self.path.clone(),
            cause: io::Error::other("socket already served"),
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("rnfs-admin".into())
                .spawn(move || accept_loop(&listener, &stop, &handler))
                .map_err(|cause| SocketError::Io {
                    path: self.path.clone(),
                    cause,
                })?
        };
        // The file now belongs to the AdminSocket.
        let file_id = std::mem::take(&mut self.file_id);
        Ok(AdminSocket {
            path: std::mem::take(&mut self.path),
            file_id,
            stop,
            acceptor: Some(acceptor),
        })
    }
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            remove_if_ours(&self.path, self.file_id);
        }
    }
}

/// Removes the socket file at `path` if it is still the one we created.
fn remove_if_ours(path: &Path, file_id: (u64, u64)) {
    let ours = std::fs::symlink_metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == file_id);
    if ours {
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!("cannot remove the admin socket {}: {e}", path.display());
        }
    }
}

/// A listening admin socket, served by its own threads until
/// [`AdminSocket::shutdown`] (or drop), which also removes the socket file.
#[derive(Debug)]
pub(crate) struct AdminSocket {
    path: PathBuf,
    /// (device, inode) of the socket file we created: only that file is removed
    /// at exit, never one a later server put in its place.
    file_id: (u64, u64),
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl AdminSocket {
    /// Binds `path` and serves it with `handler`.
    #[cfg(test)]
    pub(crate) fn start(path: &Path, handler: Arc<RequestHandler>) -> Result<Self, SocketError> {
        BoundSocket::bind(path)?.serve(handler)
    }

    /// Stops accepting and removes the socket file. Connections being served
    /// finish their current request on their own threads.
    pub(crate) fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept with a connection of our own.
        if UnixStream::connect(&self.path).is_ok() {
            let _ = acceptor.join();
        }
        remove_if_ours(&self.path, self.file_id);
    }
}

impl Drop for AdminSocket {
    fn drop(&mut self) {
        self.stop();
    }
}

fn bind(path: &Path) -> Result<UnixListener, SocketError> {
    let io_err = |cause| SocketError::Io {
        path: path.to_owned(),
        cause,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(io_err)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => match UnixStream::connect(path) {
            Ok(_) => return Err(SocketError::InUse(path.to_owned())),
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                tracing::info!("removing the stale admin socket {}", path.display());
                std::fs::remove_file(path).map_err(io_err)?;
            }
            Err(e) => return Err(io_err(e)),
        },
        Ok(_) => return Err(SocketError::NotASocket(path.to_owned())),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(e)),
    }
    let listener = UnixListener::bind(path).map_err(|e| match e.kind() {
        // Another server bound it between our check and our bind.
        ErrorKind::AddrInUse => SocketError::InUse(path.to_owned()),
        _ => io_err(e),
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io_err)?;
    Ok(listener)
}

fn accept_loop(listener: &UnixListener, stop: &AtomicBool, handler: &Arc<RequestHandler>) {
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            break;
        }
        let mut stream = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("admin socket: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if let Err(why) = check_peer(&stream) {
            tracing::warn!("admin socket: refused a connection: {why}");
            let refusal = Response::error(format!("permission denied: {why}"));
            let _ = writeln!(stream, "{}", refusal.to_line());
            continue;
        }
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::AcqRel);
            let refusal = Response::error(format!(
                "too many admin connections (at most {MAX_CONNECTIONS}); try again later"
            ));
            let _ = writeln!(stream, "{}", refusal.to_line());
            continue;
        }
        let handler = Arc::clone(handler);
        let slot = Arc::clone(&active);
        let spawned = std::thread::Builder::new()
            .name("rnfs-admin-conn".into())
            .spawn(move || {
                if let Err(e) = serve_connection(stream, &*handler) {
                    tracing::debug!("admin connection ended: {e}");
                }
                slot.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            active.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!("admin socket: cannot start a connection thread: {e}");
        }
    }
}

/// Admits only root and the server's own effective user, as the kernel saw
/// the peer when it connected (`SO_PEERCRED`).
fn check_peer(stream: &UnixStream) -> Result<(), String> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let peer = getsockopt(stream, PeerCredentials)
        .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    let own = nix::unistd::geteuid().as_raw();
    if peer.uid() == 0 || peer.uid() == own {
        Ok(())
    } else {
        Err(format!(
            "uid {} (pid {}) is neither root nor the server's user (uid {own})",
            peer.uid(),
            peer.pid()
        ))
    }
}

/// Answers request lines until the peer closes, goes quiet, or fails.
fn serve_connection(stream: UnixStream, handler: &RequestHandler) -> io::Result<()> {
    stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        let response = match read_line(&mut reader, &mut line, MAX_REQUEST_LINE)? {
            Line::Eof => return Ok(()),
            Line::TooLong => {
                Response::error(format!("request line longer than {MAX_REQUEST_LINE} bytes"))
            }
            Line::Complete => match std::str::from_utf8(&line) {
                Ok(text) if text.trim().is_empty() => continue,
                Ok(text) => match Request::parse(text) {
                    Ok(request) => handler(request),
                    Err(message) => Response::error(message),
                },
                Err(_) => Response::error("malformed JSON request: not UTF-8"),
            },
        };
        let mut out = response.to_line();
        out.push('\n');
        writer.write_all(out.as_bytes())?;
    }
}

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A line is in the buffer (without its newline).
    Complete,
    /// The line exceeded the limit; it was read and discarded up to its newline.
    TooLong,
    /// The peer closed with no partial line pending.
    Eof,
}

/// Reads one `\n`-terminated line into `line`, holding at most `limit` bytes:
/// a longer line is skipped, so the next request on the connection still works.
fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>, limit: usize) -> io::Result<Line> {
    line.clear();
    let mut too_long = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Complete,
            });
        }
        let (chunk, found_newline) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], true),
            None => (available, false),
        };
        if !too_long && line.len() + chunk.len() <= limit {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line.clear();
        }
        let used = chunk.len() + usize::from(found_newline);
        reader.consume(used);
        if found_newline {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]
    use super::*;

    #[test]
    fn lines_over_the_limit_are_skipped_and_the_next_one_is_read() {
        let input = b"{\"cmd\":\"stats\"}\nxxxxxxxxxxxxxxxxxxxx\nabc\npartial";
        let mut reader = BufReader::with_capacity(4, &input[..]);
        let mut line = Vec::new();
        assert_eq!(
            read_line(&mut reader, &mut line, 16).unwrap(),
            Line::Complete
        );
        assert_eq!(line, b"{\"cmd\":\"stats\"}");
        assert_eq!(
            read_line(&mut reader, &mut line, 16).unwrap(),
            Line::TooLong
        );
        assert!(line.is_empty());
        assert_eq!(
            read_line(&mut reader, &mut line, 16).unwrap(),
            Line::Complete
        );
        assert_eq!(line, b"abc");
        assert_eq!(
            read_line(&mut reader, &mut line, 16).unwrap(),
            Line::Complete
        );
        assert_eq!(line, b"partial");
        assert_eq!(read_line(&mut reader, &mut line, 16).unwrap(), Line::Eof);
    }

    fn temp_socket(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rnfs-admin-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("sub").join("admin.sock")
    }

    fn echo_handler() -> Arc<RequestHandler> {
        Arc::new(|r: Request| match r {
            Request::Stats => Response::ok(serde_json::json!("stats")),
            _ => Response::error("only stats here"),
        })
    }

    fn ask(stream: &mut BufReader<UnixStream>, line: &str) -> Response {
        stream.get_mut().write_all(line.as_bytes()).unwrap();
        let mut reply = String::new();
        stream.read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap()
    }

    #[test]
    fn serves_lines_refuses_a_second_server_and_replaces_a_stale_socket() {
        let path = temp_socket("lifecycle");
        let socket = AdminSocket::start(&path, echo_handler()).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let parent = std::fs::metadata(path.parent().unwrap()).unwrap();
        assert_eq!(parent.permissions().mode() & 0o777, 0o700);

        let mut conn = BufReader::new(UnixStream::connect(&path).unwrap());
        assert_eq!(
            ask(&mut conn, "{\"cmd\":\"stats\"}\n").result,
            Some(serde_json::json!("stats"))
        );
        let bad = ask(&mut conn, "{\"cmd\":\"nope\"}\n");
        assert!(!bad.ok && bad.error.unwrap().contains("unknown command"));
        let long = format!("{}\n", "x".repeat(MAX_REQUEST_LINE + 1));
        let too_long = ask(&mut conn, &long);
        assert!(too_long.error.unwrap().contains("longer than"));
        assert!(ask(&mut conn, "{\"cmd\":\"stats\"}\n").ok, "still usable");

        let err = AdminSocket::start(&path, echo_handler()).unwrap_err();
        assert!(matches!(err, SocketError::InUse(_)), "{err}");
        assert!(err.to_string().contains("another rnfs serve is running"));

        socket.shutdown();
        assert!(!path.exists(), "removed at exit");

        // A socket file nobody listens on (a crashed server's) is replaced.
        drop(UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let socket = AdminSocket::start(&path, echo_handler()).unwrap();
        let mut conn = BufReader::new(UnixStream::connect(&path).unwrap());
        assert!(ask(&mut conn, "{\"cmd\":\"stats\"}\n").ok);
        drop(socket);
        assert!(!path.exists());

        std::fs::write(&path, b"not a socket").unwrap();
        let err = AdminSocket::start(&path, echo_handler()).unwrap_err();
        assert!(matches!(err, SocketError::NotASocket(_)), "{err}");
        let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
    }

    /// Connects and asks for `stats` from a thread running as `uid` (Linux
    /// credentials are per thread: the raw `setresuid` changes only this one,
    /// which ends with the call).
    fn stats_as(path: &Path, uid: u32) -> String {
        let path = path.to_owned();
        std::thread::spawn(move || {
            let uid = rustix::process::Uid::from_raw(uid);
            rustix::thread::set_thread_res_uid(uid, uid, uid).unwrap();
            let mut conn = BufReader::new(UnixStream::connect(&path).unwrap());
            conn.get_ref()
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            // A refused connection may be closed before the request is sent.
            let _ = conn.get_mut().write_all(b"{\"cmd\":\"stats\"}\n");
            let mut reply = String::new();
            conn.read_line(&mut reply).unwrap();
            let mut rest = String::new();
            // Closed: EOF, or a reset when the server closed with our request
            // unread. Still open: the read timed out.
            let closed = match conn.read_line(&mut rest) {
                Ok(n) => n == 0,
                Err(e) => e.kind() == ErrorKind::ConnectionReset,
            };
            format!("{reply}{}", if closed { "<closed>" } else { "<open>" })
        })
        .join()
        .unwrap()
    }

    #[test]
    fn connections_from_other_users_are_refused_whatever_the_file_mode() {
        if !nix::unistd::geteuid().is_root() {
            crate::cannot_run::cannot_run("needs root, to connect as another uid");
            return;
        }
        let path = temp_socket("peer");
        let socket = AdminSocket::start(&path, echo_handler()).unwrap();
        // The file mode as a permissive umask would leave it before the chmod,
        // or as an administrator might loosen it.
        for dir in [
            path.parent().unwrap(),
            path.parent().unwrap().parent().unwrap(),
        ] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();

        let reply = stats_as(&path, 65534);
        assert!(
            reply.contains("permission denied: uid 65534")
                && reply.contains("neither root nor the server's user")
                && reply.ends_with("<closed>"),
            "{reply}"
        );
        // Root (the server's own user here) is served.
        let mut conn = BufReader::new(UnixStream::connect(&path).unwrap());
        assert!(ask(&mut conn, "{\"cmd\":\"stats\"}\n").ok);
        socket.shutdown();
        let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
    }

    #[test]
    fn connections_beyond_the_cap_are_refused_with_a_message() {
        let path = temp_socket("cap");
        let socket = AdminSocket::start(&path, echo_handler()).unwrap();
        let mut held: Vec<_> = (0..MAX_CONNECTIONS)
            .map(|_| BufReader::new(UnixStream::connect(&path).unwrap()))
            .collect();
        // Each held connection is being served once it has answered.
        for conn in &mut held {
            assert!(ask(conn, "{\"cmd\":\"stats\"}\n").ok);
        }
        let mut extra = BufReader::new(UnixStream::connect(&path).unwrap());
        let mut reply = String::new();
        extra.read_line(&mut reply).unwrap();
        assert!(reply.contains("too many admin connections"), "{reply}");
        drop(held);
        // Slots are freed as the held connections' threads see EOF.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let mut conn = BufReader::new(UnixStream::connect(&path).unwrap());
            conn.get_mut().write_all(b"{\"cmd\":\"stats\"}\n").unwrap();
            let mut reply = String::new();
            conn.read_line(&mut reply).unwrap();
            if reply.contains("\"ok\":true") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{reply}");
            std::thread::sleep(Duration::from_millis(20));
        }
        socket.shutdown();
        let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
    }
}

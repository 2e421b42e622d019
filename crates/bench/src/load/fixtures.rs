//! Setup through the rnfs client library (never used for measured calls):
//! the server's ports, MNT, and the fixtures under `rnfs-bench-load/` in the
//! URL's directory, created once and reused:
//! - `file-<N>`: the test file of N bytes, sized by SETATTR (sparse);
//! - `dir-<K>/`: K empty files `f0` .. `f<K-1>`, created with many CREATEs
//!   in flight; a rerun lists the directory and creates only what is missing
//!   (`dir-<K>-w<W>/` with `name_width` W: `f` and W digits, zero-padded);
//! - `cr-<conn>/`: one scratch directory per connection for create-remove.

use std::collections::VecDeque;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use rnfs_client::{ClientError, ClientOptions, Credential, NfsError, NfsUrl, RpcClient, Session};
use rnfs_nfs3::{
    CreateArgs, CreateHow3, CreateRes, DirOpArgs3, FileHandle, NfsProc3, Nfsstat3, Sattr3,
    NFS_PROGRAM, NFS_V3,
};
use rnfs_xdr::{Decode, DecodeError, Encode, Reader, Writer};

use super::ops::{self, Name};
use super::{LoadError, LoadOp, LoadParams};

/// The fixtures' directory under the URL's path.
pub(crate) const TOP: &str = "rnfs-bench-load";
/// CREATEs in flight while filling a directory.
const CREATE_WINDOW: usize = 256;
/// How often progress is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// Where the measured connections go, and the setup session.
#[derive(Debug)]
pub(crate) struct Target {
    /// The server's NFS address.
    pub(crate) nfs_addr: SocketAddr,
    /// The credential of every call.
    pub(crate) cred: Credential,
    session: Option<(Session, FileHandle)>,
}

/// The handles the ops use.
#[derive(Debug, Default)]
pub(crate) struct Fixtures {
    pub(crate) file: Option<FileHandle>,
    pub(crate) dir: Option<FileHandle>,
    pub(crate) cr_dirs: Vec<FileHandle>,
}

/// A failed setup call; the message names the NFS status when there is one.
fn setup_err(what: impl Into<String>) -> impl FnOnce(NfsError) -> LoadError {
    let mut what = what.into();
    move |source| {
        if let Some(status) = source.status() {
            what = format!("{what} failed with {}", ops::nfsstat_name(status));
            if matches!(status, Nfsstat3::Acces | Nfsstat3::Perm | Nfsstat3::Rofs) {
                what.push_str(
                    " (the fixtures need a directory under the URL's path that this \
                     user may write; root is squashed to nobody on most exports)",
                );
            }
        }
        LoadError::Setup { what, source }
    }
}

/// Removes `nomount=1` from the URL's query (the client's URL parser does
/// not know it) and says whether it was there.
pub(crate) fn strip_nomount(url: &str) -> (String, bool) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), false);
    };
    let mut nomount = false;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.split_once('=').unwrap_or((kv, "1")) {
            ("nomount", v) => {
                nomount = v != "0";
                false
            }
            _ => true,
        })
        .collect();
    if kept.iter().all(|kv| kv.is_empty()) {
        (base.to_owned(), nomount)
    } else {
        (format!("{base}?{}", kept.join("&")), nomount)
    }
}

/// Finds the server and, unless `?nomount=1`, mounts the export.
pub(crate) fn connect(url: &str, op: LoadOp) -> Result<Target, LoadError> {
    let (url, nomount) = strip_nomount(url);
    let url = NfsUrl::parse(&url)?;
    let cred = Credential::current();
    let host = (url.host.as_str(), 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| LoadError::Io {
            what: "resolving the server's host name",
            source: std::io::ErrorKind::NotFound.into(),
        })?;
    if nomount {
        if op != LoadOp::Null {
            return Err(LoadError::NoMountNeedsNull);
        }
        let port = match url.nfs_port {
            Some(p) => p,
            None => getport(host.ip(), &cred).unwrap_or(2049),
        };
        return Ok(Target {
            nfs_addr: SocketAddr::new(host.ip(), port),
            cred,
            session: None,
        });
    }
    let options = ClientOptions {
        connections: 4,
        timeout: Duration::from_secs(30),
        ..ClientOptions::default()
    };
    let (session, rest) = Session::connect(&url, options, cred.clone()).map_err(|e| match e {
        NfsError::Mount(status) => LoadError::Mount {
            path: url.path.clone(),
            status,
        },
        source => LoadError::Setup {
            what: format!("mounting {url}"),
            source,
        },
    })?;
    let (base, _) = session
        .resolve(&rest)
        .map_err(setup_err(format!("looking up {rest:?} in the export")))?;
    Ok(Target {
        nfs_addr: session.nfs().rpc().peer(),
        cred,
        session: Some((session, base)),
    })
}

/// Asks the portmapper on `ip` for NFSv3 over TCP.
fn getport(ip: std::net::IpAddr, cred: &Credential) -> Option<u16> {
    struct Mapping;
    impl Encode for Mapping {
        fn encode(&self, w: &mut Writer<'_>) {
            w.write_u32(NFS_PROGRAM);
            w.write_u32(NFS_V3);
            w.write_u32(6); // IPPROTO_TCP
            w.write_u32(0);
        }
    }
    let options = ClientOptions {
        retrans: 0,
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    let rpc = RpcClient::connect(SocketAddr::new(ip, 111), options).ok()?;
    let port = rpc
        .call(cred, 100_000, 2, 3, &Mapping, |r| r.read_u32())
        .ok()?;
    u16::try_from(port).ok().filter(|p| *p != 0)
}

/// Creates (or reuses) the fixtures `p.op` needs.
pub(crate) fn prepare(t: &Target, p: &LoadParams) -> Result<Fixtures, LoadError> {
    let mut fx = Fixtures::default();
    let Some((session, base)) = &t.session else {
        return Ok(fx);
    };
    if p.op == LoadOp::Null {
        return Ok(fx);
    }
    let top = mkdir_p(session, base, TOP)?;
    if p.op.needs_file() {
        fx.file = Some(test_file(session, &top, p.file_size)?);
    }
    if p.op.needs_dir() {
        fx.dir = Some(entries_dir(session, &top, p.dir_entries, p.name_width)?);
    }
    if p.op == LoadOp::CreateRemove {
        for c in 0..p.connections {
            fx.cr_dirs.push(mkdir_p(session, &top, &format!("cr-{c}"))?);
        }
    }
    Ok(fx)
}

/// The directory `name` in `dir`, made if missing.
fn mkdir_p(s: &Session, dir: &FileHandle, name: &str) -> Result<FileHandle, LoadError> {
    let nfs = s.nfs();
    match nfs.lookup(dir, name.as_bytes()) {
        Ok((fh, _)) => return Ok(fh),
        Err(NfsError::Status(Nfsstat3::Noent)) => {}
        Err(e) => return Err(setup_err(format!("LOOKUP {name}"))(e)),
    }
    let attrs = Sattr3 {
        mode: Some(0o755),
        ..Sattr3::default()
    };
    match nfs.mkdir(dir, name.as_bytes(), &attrs) {
        Ok(rnfs_client::Created {
            handle: Some(fh), ..
        }) => Ok(fh),
        Ok(_) | Err(NfsError::Status(Nfsstat3::Exist)) => nfs
            .lookup(dir, name.as_bytes())
            .map(|(fh, _)| fh)
            .map_err(setup_err(format!("LOOKUP {name}"))),
        Err(e) => Err(setup_err(format!("MKDIR {name}"))(e)),
    }
}

/// `file-<size>`: created if missing, then sized with SETATTR if its size
/// differs (sparse).
fn test_file(s: &Session, dir: &FileHandle, size: u64) -> Result<FileHandle, LoadError> {
    let nfs = s.nfs();
    let name = format!("file-{size}");
    let fh = match nfs.lookup(dir, name.as_bytes()) {
        Ok((fh, _)) => fh,
        Err(NfsError::Status(Nfsstat3::Noent)) => {
            let how = CreateHow3::Unchecked(Sattr3 {
                mode: Some(0o644),
                ..Sattr3::default()
            });
            let created = nfs
                .create(dir, name.as_bytes(), how)
                .map_err(setup_err(format!("CREATE {name}")))?;
            match created.handle {
                Some(fh) => fh,
                None => {
                    nfs.lookup(dir, name.as_bytes())
                        .map_err(setup_err(format!("LOOKUP {name}")))?
                        .0
                }
            }
        }
        Err(e) => return Err(setup_err(format!("LOOKUP {name}"))(e)),
    };
    let attr = nfs
        .getattr(&fh)
        .map_err(setup_err(format!("GETATTR {name}")))?;
    if attr.size != size {
        let attrs = Sattr3 {
            size: Some(size),
            ..Sattr3::default()
        };
        nfs.setattr(&fh, &attrs, None)
            .map_err(setup_err(format!("SETATTR size of {name}")))?;
    }
    Ok(fh)
}

/// `dir-<k>` with the entries `f0` .. `f<k-1>` (`width` digits: see
/// [`ops::entries_dir_name`]): lists what is there and creates what is
/// missing, many CREATEs in flight.
fn entries_dir(s: &Session, top: &FileHandle, k: u64, width: u8) -> Result<FileHandle, LoadError> {
    let name = ops::entries_dir_name(k, width);
    let dir = mkdir_p(s, top, &name)?;
    let mut present = vec![0u64; k.div_ceil(64) as usize];
    let (found, other) = list_entries(s, &dir, (k, width), &name, &mut present)?;
    if other > 0 {
        let last = Name::entry(k - 1, width);
        let last = String::from_utf8_lossy(last.as_bytes());
        eprintln!("rnfs bench load: {name} also holds {other} entries not named f0..{last}");
    }
    if found < k {
        let missing = (0..k).filter(|i| present[(i / 64) as usize] & (1 << (i % 64)) == 0);
        create_entries(s, &dir, (&name, width), missing, k - found)?;
    }
    Ok(dir)
}

/// Lists `dir`, marking the entries `f<i>` (i < k, `width` digits) in
/// `present`; returns the number marked and the number of other names.
fn list_entries(
    s: &Session,
    dir: &FileHandle,
    (k, width): (u64, u8),
    name: &str,
    present: &mut [u64],
) -> Result<(u64, u64), LoadError> {
    let nfs = s.nfs();
    let (mut cookie, mut verf) = (0, [0u8; 8]);
    let (mut found, mut other) = (0u64, 0u64);
    let started = Instant::now();
    let mut last_note = started;
    loop {
        let page = nfs
            .readdirplus(dir, cookie, verf, 16 << 10, 128 << 10)
            .map_err(setup_err(format!("READDIRPLUS {name}")))?;
        for e in &page.entries {
            cookie = e.cookie;
            let index = ops::parse_entry(&e.name, width).filter(|i| *i < k);
            match index {
                Some(i) if present[(i / 64) as usize] & (1 << (i % 64)) == 0 => {
                    present[(i / 64) as usize] |= 1 << (i % 64);
                    found += 1;
                }
                Some(_) => {}
                None if e.name == b"." || e.name == b".." => {}
                None => other += 1,
            }
        }
        verf = page.cookieverf;
        if page.eof || page.entries.is_empty() {
            return Ok((found, other));
        }
        if last_note.elapsed() >= PROGRESS_EVERY {
            last_note = Instant::now();
            eprintln!(
                "rnfs bench load: listing {name}: {found} entries ({:.0} s)",
                started.elapsed().as_secs_f64()
            );
        }
    }
}

/// CREATE3res, decoded for any reply lifetime (what `PendingCall::wait`
/// asks for; `CreateRes::decode` alone is tied to one).
fn decode_create(r: &mut Reader<'_>) -> Result<CreateRes, DecodeError> {
    CreateRes::decode(r)
}

/// CREATEs `f<i>` (`width` digits) for every `i` of `missing`,
/// `CREATE_WINDOW` in flight.
fn create_entries(
    s: &Session,
    dir: &FileHandle,
    (name, width): (&str, u8),
    missing: impl Iterator<Item = u64>,
    count: u64,
) -> Result<(), LoadError> {
    let nfs = s.nfs();
    let how = CreateHow3::Unchecked(Sattr3 {
        mode: Some(0o644),
        ..Sattr3::default()
    });
    let show = |i| String::from_utf8_lossy(Name::entry(i, width).as_bytes()).into_owned();
    let wait = |call: rnfs_client::PendingCall, i: u64| -> Result<(), LoadError> {
        let res = call
            .wait(decode_create)
            .map_err(|e| setup_err(format!("CREATE {name}/{}", show(i)))(NfsError::Client(e)))?;
        match res {
            CreateRes::Ok(_) => Ok(()),
            CreateRes::Fail { status, .. } => Err(setup_err(format!("CREATE {name}/{}", show(i)))(
                NfsError::Status(status),
            )),
        }
    };
    eprintln!("rnfs bench load: creating {count} entries in {name}");
    let started = Instant::now();
    let mut last_note = started;
    let mut pending = VecDeque::with_capacity(CREATE_WINDOW);
    let mut done = 0u64;
    for i in missing {
        let entry = Name::entry(i, width);
        let args = CreateArgs {
            where_: DirOpArgs3 {
                dir: dir.as_fh3(),
                name: entry.as_bytes(),
            },
            how,
        };
        let call = nfs
            .rpc()
            .submit(
                nfs.credential(),
                NFS_PROGRAM,
                NFS_V3,
                u32::from(NfsProc3::Create),
                &args,
            )
            .map_err(|e: ClientError| setup_err(format!("CREATE {name}/{}", show(i)))(e.into()))?;
        pending.push_back((call, i));
        if pending.len() >= CREATE_WINDOW {
            if let Some((call, i)) = pending.pop_front() {
                wait(call, i)?;
                done += 1;
            }
        }
        if last_note.elapsed() >= PROGRESS_EVERY {
            last_note = Instant::now();
            let secs = started.elapsed().as_secs_f64();
            eprintln!(
                "rnfs bench load: {name}: {done}/{count} created ({secs:.0} s, {:.0}/s)",
                done as f64 / secs
            );
        }
    }
    while let Some((call, i)) = pending.pop_front() {
        wait(call, i)?;
    }
    eprintln!(
        "rnfs bench load: {name}: {count} entries created in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nomount_is_taken_out_of_the_query() {
        assert_eq!(
            strip_nomount("nfs://h/e?nfsport=1&nomount=1&mountport=2"),
            ("nfs://h/e?nfsport=1&mountport=2".to_owned(), true)
        );
        assert_eq!(
            strip_nomount("nfs://h/e?nomount=1"),
            ("nfs://h/e".to_owned(), true)
        );
        assert_eq!(
            strip_nomount("nfs://h/e?nomount=0"),
            ("nfs://h/e".to_owned(), false)
        );
        assert_eq!(strip_nomount("nfs://h/e"), ("nfs://h/e".to_owned(), false));
    }
}

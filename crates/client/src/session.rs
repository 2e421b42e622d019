//! A mounted export: finds the ports, mounts the export an `nfs://` URL names
//! and resolves paths inside it.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use rnfs_nfs3::{Fattr3, FileHandle, FsinfoResOk, Mountstat3, MOUNT_PROGRAM, MOUNT_V3};
use rnfs_nfs3::{NFS_PROGRAM, NFS_V3};
use rnfs_xdr::{Encode, Writer};

use crate::error::{ClientError, NfsError};
use crate::nfs::NfsClient;
use crate::transport::{ClientOptions, Credential, RpcClient};
use crate::url::NfsUrl;

const PORTMAP_PROGRAM: u32 = 100_000;
const PORTMAP_PORT: u16 = 111;
const IPPROTO_TCP: u32 = 6;
/// Where rnfs listens when no portmapper answers: NFS and MOUNT share it.
const DEFAULT_NFS_PORT: u16 = 2049;
/// How long the advisory UMNT at unmount may take, connecting included, on
/// a connection of its own: a server that is gone must not hold up an
/// unmount (a hard mount would retry for ever), and umount(8) does not wait
/// for one either.
const UMNT_PATIENCE: Duration = Duration::from_secs(2);

struct Mapping {
    prog: u32,
    vers: u32,
}

impl Encode for Mapping {
    fn encode(&self, w: &mut Writer<'_>) {
        w.write_u32(self.prog);
        w.write_u32(self.vers);
        w.write_u32(IPPROTO_TCP);
        w.write_u32(0);
    }
}

/// Asks the portmapper at `host:111` for `prog`/`vers` over TCP.
fn getport(host: SocketAddr, prog: u32, vers: u32, options: &ClientOptions) -> Option<u16> {
    let pm = SocketAddr::new(host.ip(), PORTMAP_PORT);
    let mut opts = options.clone();
    opts.connections = 1;
    opts.retrans = 0;
    let rpc = RpcClient::connect(pm, opts).ok()?;
    let port = rpc
        .call(
            &Credential::root(),
            PORTMAP_PROGRAM,
            2,
            3,
            &Mapping { prog, vers },
            |r| r.read_u32(),
        )
        .ok()?;
    u16::try_from(port).ok().filter(|p| *p != 0)
}

/// An export mounted from one server.
#[derive(Debug, Clone)]
pub struct Session {
    nfs: NfsClient,
    root: FileHandle,
    export: String,
    fsinfo: FsinfoResOk,
    /// Where MOUNT is served (for the UMNT at unmount).
    mount_addr: SocketAddr,
    /// The server's EXPORT list when mounted (its UTF-8 paths, trailing
    /// `/` dropped); `None` if it gave none.
    exports: Option<Vec<String>>,
}

impl Session {
    /// Mounts the export that holds `url.path`, and returns the session with
    /// the rest of the path (relative to the export's root, may be empty).
    ///
    /// The export is the longest one the server's EXPORT list has that is a
    /// prefix of the path; if the list is unavailable, MNT is tried on the
    /// path and then on each shorter prefix.
    pub fn connect(
        url: &NfsUrl,
        options: ClientOptions,
        cred: Credential,
    ) -> Result<(Self, String), NfsError> {
        let host = (url.host.as_str(), 0)
            .to_socket_addrs()
            .map_err(ClientError::Io)?
            .next()
            .ok_or_else(|| {
                ClientError::Io(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("cannot resolve host {}", url.host),
                ))
            })?;
        let nfs_port = match url.nfs_port {
            Some(p) => p,
            None => getport(host, NFS_PROGRAM, NFS_V3, &options).unwrap_or(DEFAULT_NFS_PORT),
        };
        let mount_port = match url.mount_port {
            Some(p) => p,
            // rnfs serves MOUNT on its NFS port; ask the portmapper only if
            // the URL named neither port.
            None if url.nfs_port.is_some() => nfs_port,
            None => getport(host, MOUNT_PROGRAM, MOUNT_V3, &options).unwrap_or(nfs_port),
        };
        let nfs_addr = SocketAddr::new(host.ip(), nfs_port);
        let mount_addr = SocketAddr::new(host.ip(), mount_port);
        let rpc = RpcClient::connect(nfs_addr, options.clone())?;
        let mount_rpc = if mount_port == nfs_port {
            rpc.clone()
        } else {
            let mut opts = options;
            opts.connections = 1;
            RpcClient::connect(mount_addr, opts)?
        };
        let mountd = NfsClient::new(mount_rpc, cred.clone());
        let (export, root, exports) = mount_longest_prefix(&mountd, &url.path)?;
        let rest = url.path[export.len()..].trim_start_matches('/').to_owned();
        let nfs = NfsClient::new(rpc, cred);
        let fsinfo = nfs.fsinfo(&root)?;
        Ok((
            Self {
                nfs,
                root,
                export,
                fsinfo,
                mount_addr,
                exports,
            },
            rest,
        ))
    }

    /// The typed NFS calls, as this session's credential.
    pub fn nfs(&self) -> &NfsClient {
        &self.nfs
    }

    /// The export's root handle.
    pub fn root(&self) -> FileHandle {
        self.root
    }

    /// The export's path on the server.
    pub fn export(&self) -> &str {
        &self.export
    }

    /// The paths of the server's EXPORT list when this session was
    /// mounted; `None` if the server gave no list.
    pub fn listed_exports(&self) -> Option<&[String]> {
        self.exports.as_deref()
    }

    /// The server's FSINFO for the export.
    pub fn fsinfo(&self) -> &FsinfoResOk {
        &self.fsinfo
    }

    /// The READ size to use: the server's preferred size, at most 1 MiB.
    pub fn rsize(&self) -> u32 {
        clamp_io(self.fsinfo.rtpref, self.fsinfo.rtmax)
    }

    /// The WRITE size to use: the server's preferred size, at most 1 MiB.
    pub fn wsize(&self) -> u32 {
        clamp_io(self.fsinfo.wtpref, self.fsinfo.wtmax)
    }

    /// The READDIR size to use.
    pub fn dsize(&self) -> u32 {
        self.fsinfo.dtpref.clamp(4096, 1 << 20)
    }

    /// Looks `path` (relative to the export root, `/`-separated) up one
    /// component at a time. Symbolic links are not followed.
    pub fn resolve(&self, path: &str) -> Result<(FileHandle, Fattr3), NfsError> {
        let mut fh = self.root;
        let mut attr = None;
        for name in path.split('/').filter(|c| !c.is_empty() && *c != ".") {
            let (child, child_attr) = self.nfs.lookup(&fh, name.as_bytes())?;
            fh = child;
            attr = child_attr;
        }
        let attr = match attr {
            Some(a) => a,
            None => self.nfs.getattr(&fh)?,
        };
        Ok((fh, attr))
    }

    /// Tells the server's MOUNT service that the export is no longer mounted.
    /// Advisory, as with umount(8): errors are ignored, and the call gets
    /// 2 s on a connection of its own, soft, whatever the session's
    /// options, so it returns within a few seconds even if the server is
    /// gone.
    pub fn unmount(&self) {
        let options = ClientOptions {
            timeout: UMNT_PATIENCE,
            retrans: 0,
            hard: false,
            connections: 1,
            connect_timeout: UMNT_PATIENCE,
            ..self.nfs.rpc().options().clone()
        };
        if let Ok(rpc) = RpcClient::connect(self.mount_addr, options) {
            let mountd = NfsClient::new(rpc, self.nfs.credential().clone());
            let _ = mountd.umnt(self.export.as_bytes());
        }
    }
}

fn clamp_io(pref: u32, max: u32) -> u32 {
    let max = if max == 0 { 1 << 20 } else { max.min(1 << 20) };
    let pref = if pref == 0 { max } else { pref };
    pref.min(max).max(512)
}

/// The longest of `exports` (paths without a trailing `/`) that holds
/// `path`: the export a session for `path` mounts.
pub fn longest_export<'a>(exports: &'a [String], path: &str) -> Option<&'a str> {
    let is_prefix = |export: &str| {
        export.is_empty()
            || path == export
            || (path.starts_with(export) && path.as_bytes().get(export.len()) == Some(&b'/'))
    };
    exports
        .iter()
        .map(String::as_str)
        .filter(|e| is_prefix(e))
        .max_by_key(|e| e.len())
}

/// MNTs the longest export that is a prefix of `path`; also the server's
/// export list, if it gave one.
fn mount_longest_prefix(
    mountd: &NfsClient,
    path: &str,
) -> Result<(String, FileHandle, Option<Vec<String>>), NfsError> {
    if let Ok(exports) = mountd.exports() {
        let raw: Vec<&str> = exports
            .iter()
            .filter_map(|e| std::str::from_utf8(&e.path).ok())
            .collect();
        let listed: Vec<String> = raw
            .iter()
            .map(|e| e.trim_end_matches('/').to_owned())
            .collect();
        if let Some(i) =
            longest_export(&listed, path).and_then(|best| listed.iter().position(|e| e == best))
        {
            // Asked for as the server lists it (the root export as `/`).
            let fh = mountd.mnt(raw[i].as_bytes())?;
            return Ok((listed[i].clone(), fh, Some(listed)));
        }
    }
    // No EXPORT list: try the path, then each shorter prefix.
    let mut candidate = path;
    loop {
        match mountd.mnt(candidate.as_bytes()) {
            Ok(fh) => return Ok((candidate.to_owned(), fh, None)),
            Err(NfsError::Mount(_)) if candidate.len() > 1 => {
                candidate = match candidate.rfind('/') {
                    Some(0) => "/",
                    Some(i) => &candidate[..i],
                    None => return Err(NfsError::Mount(Mountstat3::Noent)),
                };
            }
            Err(e) => return Err(e),
        }
    }
}

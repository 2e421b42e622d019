//! A blocking RPC connection: one call in flight, a read timeout, typed results.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use rnfs_nfs3::{
    FileHandle, MntArgs, MountProc3, Mountres3, Mountstat3, NfsProc3, MOUNT_PROGRAM, MOUNT_V3,
    NFS_PROGRAM, NFS_V3,
};
use rnfs_rpc::{decode_reply, encode_call, Auth, AuthSys, Gids, RecordDecoder, ReplyStatus};
use rnfs_xdr::{Decode, Encode, Reader, Writer};

/// Largest reply accepted: a 1 MiB READ plus headers.
const MAX_REPLY: usize = (1 << 20) + (64 << 10);

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The socket failed or timed out.
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    /// The reply could not be decoded.
    #[error("bad reply: {0}")]
    BadReply(String),
    /// The server answered with an RPC-level error (not SUCCESS).
    #[error("rpc error: {0:?}")]
    Rpc(ReplyStatus),
    /// MNT failed.
    #[error("mount failed: {0:?}")]
    Mount(Mountstat3),
}

/// A blocking connection to one RPC server.
#[derive(Debug)]
pub struct SyncConnection {
    stream: TcpStream,
    decoder: RecordDecoder,
    xid: u32,
    uid: u32,
    gid: u32,
    out: Vec<u8>,
    args: Vec<u8>,
}

impl SyncConnection {
    /// Connects to `addr`, calling as uid/gid 0 (AUTH_SYS) with a 30 s timeout.
    pub fn connect(addr: impl ToSocketAddrs) -> Result<Self, CallError> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Self {
            stream,
            decoder: RecordDecoder::new(MAX_REPLY),
            xid: 0x5eed_0000,
            uid: 0,
            gid: 0,
            out: Vec::new(),
            args: Vec::new(),
        })
    }

    /// The server's address.
    pub fn peer(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    /// Calls as `uid`/`gid` from now on.
    pub fn set_identity(&mut self, uid: u32, gid: u32) {
        self.uid = uid;
        self.gid = gid;
    }

    /// The next call uses transaction id `xid` (then `xid + 1`, ...): to test a
    /// server's handling of retransmissions.
    pub fn set_next_xid(&mut self, xid: u32) {
        self.xid = xid.wrapping_sub(1);
    }

    /// Sends one call with raw argument bytes and returns the raw result bytes
    /// (after the accepted-SUCCESS reply header).
    pub fn call_raw(
        &mut self,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &[u8],
    ) -> Result<Vec<u8>, CallError> {
        self.xid = self.xid.wrapping_add(1);
        let xid = self.xid;
        let sys = AuthSys {
            stamp: 0,
            machine_name: b"rnfs-client",
            uid: self.uid,
            gid: self.gid,
            gids: Gids::new(&[]).unwrap_or_default(),
        };
        self.out.clear();
        encode_call(xid, prog, vers, proc_, &Auth::Sys(sys), args, &mut self.out);
        self.stream.write_all(&self.out)?;
        loop {
            if let Some(record) = self
                .decoder
                .next_record()
                .map_err(|e| CallError::BadReply(e.to_string()))?
            {
                let reply =
                    decode_reply(&record).map_err(|e| CallError::BadReply(e.to_string()))?;
                if reply.header.xid != xid {
                    // A late reply to an earlier, timed-out call.
                    continue;
                }
                if reply.header.status != ReplyStatus::Success {
                    return Err(CallError::Rpc(reply.header.status));
                }
                return Ok(reply.results.to_vec());
            }
            let buf = self.decoder.read_buf();
            let n = self.stream.read(buf)?;
            if n == 0 {
                return Err(CallError::Io(io::ErrorKind::UnexpectedEof.into()));
            }
            self.decoder.advance(n);
        }
    }

    /// A typed call: encodes `args`, decodes `R` from the results.
    pub fn call<A: Encode, R: for<'a> Decode<'a>>(
        &mut self,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
    ) -> Result<R, CallError> {
        let bytes = self.call_encoded(prog, vers, proc_, args)?;
        R::decode(&mut Reader::new(&bytes)).map_err(|e| CallError::BadReply(e.to_string()))
    }

    /// [`call_raw`](Self::call_raw) with `args` encoded into a reused buffer.
    fn call_encoded<A: Encode>(
        &mut self,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
    ) -> Result<Vec<u8>, CallError> {
        let mut buf = std::mem::take(&mut self.args);
        buf.clear();
        args.encode(&mut Writer::new(&mut buf));
        let result = self.call_raw(prog, vers, proc_, &buf);
        self.args = buf;
        result
    }

    /// An NFSv3 call whose result owns its data (everything except READ,
    /// READLINK, READDIR and READDIRPLUS; use [`call_raw`](Self::call_raw) and
    /// decode those in place).
    pub fn nfs<A: Encode, R: for<'a> Decode<'a>>(
        &mut self,
        proc_: NfsProc3,
        args: &A,
    ) -> Result<R, CallError> {
        self.call(NFS_PROGRAM, NFS_V3, u32::from(proc_), args)
    }

    /// An NFSv3 call returning the raw result bytes.
    pub fn nfs_raw<A: Encode>(&mut self, proc_: NfsProc3, args: &A) -> Result<Vec<u8>, CallError> {
        self.call_encoded(NFS_PROGRAM, NFS_V3, u32::from(proc_), args)
    }

    /// MOUNT v3 MNT: the root handle of the export mounted as `path`.
    pub fn mount(&mut self, path: &str) -> Result<FileHandle, CallError> {
        let res: Mountres3 = self.call(
            MOUNT_PROGRAM,
            MOUNT_V3,
            u32::from(MountProc3::Mnt),
            &MntArgs {
                dirpath: path.as_bytes(),
            },
        )?;
        match res {
            Mountres3::Ok(ok) => Ok(ok.fhandle),
            Mountres3::Fail(status) => Err(CallError::Mount(status)),
        }
    }
}

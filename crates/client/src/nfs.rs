//! Typed NFSv3 and MOUNT v3 calls over an [`RpcClient`]: one method per
//! procedure, owned results, the NFS status turned into [`NfsError`].

use rnfs_nfs3::{
    AccessArgs, AccessRes, AccessResOk, CommitArgs, CommitRes, CommitResOk, CookieVerf3,
    CreateArgs, CreateHow3, CreateRes, CreateResOk, DirOpArgs3, ExportRes, Fattr3, FileHandle,
    FsinfoArgs, FsinfoRes, FsinfoResOk, FsstatArgs, FsstatRes, FsstatResOk, GetattrArgs,
    GetattrRes, GetattrResOk, LinkArgs, LinkRes, LinkResOk, LookupArgs, LookupRes, LookupResOk,
    MkdirArgs, MkdirRes, MknodArgs, MknodRes, Mknoddata3, MntArgs, MountProc3, Mountres3, NfsProc3,
    Nfsstat3, Nfstime3, PathconfArgs, PathconfRes, PathconfResOk, PostOpAttr, ReadArgs, ReadRes,
    ReaddirArgs, ReaddirRes, ReaddirplusArgs, ReaddirplusRes, ReadlinkArgs, ReadlinkRes,
    RemoveArgs, RemoveRes, RemoveResOk, RenameArgs, RenameRes, RenameResOk, RmdirArgs, RmdirRes,
    Sattr3, SetattrArgs, SetattrRes, SetattrResOk, StableHow, SymlinkArgs, SymlinkRes,
    Symlinkdata3, UmntArgs, WccData, WriteArgs, WriteRes, WriteResOk, WriteVerf3, MOUNT_PROGRAM,
    MOUNT_V3, NFS_PROGRAM, NFS_V3,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rnfs_xdr::{Decode, DecodeError, Encode, Reader};

use crate::error::{ClientError, NfsError};
use crate::transport::{ClientOptions, Credential, PendingCall, RpcClient};

/// The first pause before a call the server answered with NFS3ERR_JUKEBOX
/// ("try again later") is sent again; it doubles per retry.
const JUKEBOX_FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between retries: Linux's fixed NFSv3 pause
/// (`NFS_JUKEBOX_RETRY_TIME`).
const JUKEBOX_MAX_PAUSE: Duration = Duration::from_secs(5);

/// Retries of one call the server answers with NFS3ERR_JUKEBOX.
///
/// The server did nothing and asks to be asked again later (it is short of
/// memory, or the file is on its way back from slower storage), so the call
/// is sent again, as a new call, after a pause that grows from 100 ms to 5 s:
/// for ever when `hard`, as Linux does, and while the soft time limit
/// (`timeout` x (`retrans` + 1)) lasts otherwise, after which the caller gets
/// the status (`ETIMEDOUT` as an errno, as a soft timeout). A hard client's
/// write-behind loses no data to it.
#[derive(Debug)]
struct Jukebox {
    pause: Duration,
    /// `None`: hard.
    give_up_at: Option<Instant>,
}

impl Jukebox {
    fn new(options: &ClientOptions) -> Self {
        let patience = options
            .timeout
            .saturating_mul(options.retrans.saturating_add(1));
        Self {
            pause: JUKEBOX_FIRST_PAUSE,
            give_up_at: (!options.hard).then(|| Instant::now() + patience),
        }
    }

    /// The pause before the next try, or `None` once a soft client gives up.
    fn next_pause(&mut self) -> Option<Duration> {
        let pause = self.pause;
        if self
            .give_up_at
            .is_some_and(|at| Instant::now() + pause > at)
        {
            return None;
        }
        self.pause = (pause * 2).min(JUKEBOX_MAX_PAUSE);
        Some(pause)
    }
}

/// Decodes an NFS result with `decode`, unless it is NFS3ERR_JUKEBOX (the
/// first word of every NFSv3 result) and `jukebox` allows another try:
/// then the pause before it. `jukebox` starts at the first JUKEBOX, so
/// other calls never read the clock.
fn unless_jukebox<T>(
    r: &mut Reader<'_>,
    jukebox: &mut Option<Jukebox>,
    options: &ClientOptions,
    decode: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
) -> Result<Result<T, Duration>, DecodeError> {
    if matches!(Nfsstat3::decode(&mut r.clone()), Ok(Nfsstat3::Jukebox)) {
        if let Some(pause) = jukebox
            .get_or_insert_with(|| Jukebox::new(options))
            .next_pause()
        {
            return Ok(Err(pause));
        }
    }
    decode(r).map(Ok)
}

/// The result of a READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOutcome {
    /// Bytes placed at the start of the caller's buffer.
    pub count: usize,
    /// The server says the read reached the end of the file.
    pub eof: bool,
    /// The file's attributes after the read, when the server sent them.
    pub attr: Option<Fattr3>,
}

/// The result of a WRITE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Bytes the server wrote (may be fewer than sent).
    pub count: u32,
    /// How stable the data now is.
    pub committed: StableHow,
    /// The server's write verifier: if it changes before a COMMIT, uncommitted
    /// data must be sent again.
    pub verf: WriteVerf3,
    /// The file's attributes before and after.
    pub wcc: WccData,
}

/// A created object: its handle and attributes, when the server sent them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    /// The new object's handle (NFSv3 lets a server omit it: then LOOKUP it).
    pub handle: Option<FileHandle>,
    /// The new object's attributes.
    pub attr: Option<Fattr3>,
    /// The directory's attributes before and after.
    pub dir_wcc: WccData,
}

/// One export, from MOUNT's EXPORT procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// The path to mount.
    pub path: Vec<u8>,
    /// Who may mount it (host or netgroup names; empty: everyone).
    pub groups: Vec<Vec<u8>>,
}

/// One READDIR entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// File number.
    pub fileid: u64,
    /// Name (bytes, not necessarily UTF-8).
    pub name: Vec<u8>,
    /// Cookie to resume after this entry.
    pub cookie: u64,
}

/// One READDIRPLUS entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirPlusEntry {
    /// File number.
    pub fileid: u64,
    /// Name (bytes, not necessarily UTF-8).
    pub name: Vec<u8>,
    /// Cookie to resume after this entry.
    pub cookie: u64,
    /// Attributes, when the server sent them.
    pub attr: Option<Fattr3>,
    /// Handle, when the server sent it.
    pub handle: Option<FileHandle>,
}

/// One page of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirPage<E> {
    /// The entries, in directory order.
    pub entries: Vec<E>,
    /// The verifier to send with the next page's cookie.
    pub cookieverf: CookieVerf3,
    /// Whether this page ends the directory.
    pub eof: bool,
    /// The directory's attributes.
    pub dir_attr: Option<Fattr3>,
}

/// A WRITE sent by [`NfsClient::start_write`], not yet collected.
#[derive(Debug)]
pub struct PendingWrite(WriteState);

#[derive(Debug)]
enum WriteState {
    /// In flight, holding a background slot.
    Sent(PendingCall, Resend),
    /// Answered NFS3ERR_JUKEBOX: to be sent again, not before `at`.
    Paused {
        request: Arc<Vec<u8>>,
        at: Instant,
        resend: Resend,
    },
    /// Made synchronously: the background slots were all held.
    Done(Result<WriteOutcome, NfsError>),
}

/// What [`PendingWrite::try_collect`] found.
#[derive(Debug)]
pub enum CollectedWrite {
    /// The WRITE's result.
    Done(Result<WriteOutcome, NfsError>),
    /// The server answered NFS3ERR_JUKEBOX: [`wait`](PendingWrite::wait)
    /// for the WRITE later, which pauses and sends it again.
    Again(PendingWrite),
}

/// What sending an answered call again needs.
#[derive(Debug)]
struct Resend {
    rpc: RpcClient,
    jukebox: Option<Jukebox>,
}

impl PendingWrite {
    /// Whether the reply has arrived ([`wait`](Self::wait) will not block,
    /// unless the reply is NFS3ERR_JUKEBOX: see
    /// [`try_collect`](Self::try_collect)).
    pub fn is_ready(&self) -> bool {
        match &self.0 {
            WriteState::Sent(call, _) => call.is_ready(),
            WriteState::Paused { .. } => false,
            WriteState::Done(_) => true,
        }
    }

    /// Waits for the reply. A NFS3ERR_JUKEBOX reply is retried (see
    /// [`NfsClient`]), so this may pause and send the WRITE again.
    pub fn wait(self) -> Result<WriteOutcome, NfsError> {
        let mut write = self;
        loop {
            match write.step() {
                CollectedWrite::Done(outcome) => return outcome,
                CollectedWrite::Again(again) => write = again,
            }
        }
    }

    /// The result of a WRITE whose reply arrived ([`is_ready`](Self::is_ready)),
    /// without pausing: when the server answered NFS3ERR_JUKEBOX, the WRITE
    /// comes back, to be [`wait`](Self::wait)ed for later (which pauses and
    /// sends it again). On a WRITE not ready, blocks until its reply.
    pub fn try_collect(self) -> CollectedWrite {
        match self.0 {
            paused @ WriteState::Paused { .. } => CollectedWrite::Again(Self(paused)),
            state => Self(state).step(),
        }
    }

    /// Waits for the reply, or pauses and sends the WRITE again.
    fn step(self) -> CollectedWrite {
        let (got, request, resend) = match self.0 {
            WriteState::Sent(call, mut resend) => {
                let request = call.request();
                let got = call.wait(|r| {
                    unless_jukebox(
                        r,
                        &mut resend.jukebox,
                        resend.rpc.options(),
                        decoded::<WriteRes>,
                    )
                });
                (got, request, resend)
            }
            WriteState::Paused {
                request,
                at,
                mut resend,
            } => {
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                let got = resend.rpc.call_again(&request, |r| {
                    unless_jukebox(
                        r,
                        &mut resend.jukebox,
                        resend.rpc.options(),
                        decoded::<WriteRes>,
                    )
                });
                (got, request, resend)
            }
            WriteState::Done(outcome) => return CollectedWrite::Done(outcome),
        };
        match got {
            Ok(Ok(res)) => CollectedWrite::Done(res.into_ok().map(write_outcome).map_err(fail)),
            Ok(Err(pause)) => CollectedWrite::Again(Self(WriteState::Paused {
                request,
                at: Instant::now() + pause,
                resend,
            })),
            Err(e) => CollectedWrite::Done(Err(e.into())),
        }
    }

    /// Whether the WRITE was made synchronously because background calls
    /// held their share of the connection's slots
    /// ([`RpcClient::submit_background`](crate::RpcClient::submit_background)).
    pub fn was_synchronous(&self) -> bool {
        matches!(self.0, WriteState::Done(_))
    }
}

fn write_outcome(ok: WriteResOk) -> WriteOutcome {
    WriteOutcome {
        count: ok.count,
        committed: ok.committed,
        verf: ok.verf,
        wcc: ok.file_wcc,
    }
}

/// A READ sent by [`NfsClient::start_read`], not yet collected.
#[derive(Debug)]
pub struct PendingRead(PendingCall, Resend);

impl PendingRead {
    /// Whether the reply has arrived ([`wait_into`](Self::wait_into) will not
    /// block, unless the reply is NFS3ERR_JUKEBOX).
    pub fn is_ready(&self) -> bool {
        self.0.is_ready()
    }

    /// Waits for the reply and copies its data into `buf`. A NFS3ERR_JUKEBOX
    /// reply is retried (see [`NfsClient`]), so this may pause and send the
    /// READ again.
    pub fn wait_into(self, buf: &mut [u8]) -> Result<ReadOutcome, NfsError> {
        let Self(call, mut resend) = self;
        let request = call.request();
        let options = resend.rpc.options().clone();
        let mut got =
            call.wait(|r| unless_jukebox(r, &mut resend.jukebox, &options, |r| read_into(r, buf)))?;
        loop {
            match got {
                Ok(outcome) => return outcome,
                Err(pause) => {
                    std::thread::sleep(pause);
                    got = resend.rpc.call_again(&request, |r| {
                        unless_jukebox(r, &mut resend.jukebox, &options, |r| read_into(r, buf))
                    })?;
                }
            }
        }
    }
}

fn read_into(
    r: &mut Reader<'_>,
    buf: &mut [u8],
) -> Result<Result<ReadOutcome, NfsError>, DecodeError> {
    Ok(match ReadRes::decode(r)? {
        ReadRes::Ok(ok) => {
            if ok.data.len() > buf.len() {
                return Err(DecodeError::LengthLimit {
                    type_name: "READ3resok data",
                    len: ok.data.len() as u64,
                    max: buf.len() as u64,
                });
            }
            buf[..ok.data.len()].copy_from_slice(ok.data);
            Ok(ReadOutcome {
                count: ok.data.len(),
                eof: ok.eof,
                attr: ok.file_attributes,
            })
        }
        ReadRes::Fail { status, .. } => Err(fail(status)),
    })
}

/// Typed NFSv3 and MOUNT v3 calls as one credential. Cloning is cheap.
///
/// A call the server answers with NFS3ERR_JUKEBOX ("try again later": it did
/// nothing) is sent again as a new call after a pause that doubles from
/// 100 ms to 5 s: for ever on a `hard` client, as Linux does, and until the
/// soft time limit (`timeout` x (`retrans` + 1)) on a soft one, which then
/// fails with the status. Asynchronous calls do the same when collected.
#[derive(Debug, Clone)]
pub struct NfsClient {
    rpc: RpcClient,
    cred: Credential,
}

fn decoded<T: for<'a> Decode<'a>>(r: &mut Reader<'_>) -> Result<T, DecodeError> {
    T::decode(r)
}

fn fail(status: Nfsstat3) -> NfsError {
    NfsError::Status(status)
}

/// A procedure result that owns its data (the `nfs_res!` shape): its
/// `resok` struct, or the failure status.
trait OwnedRes: for<'a> Decode<'a> {
    type Ok;
    fn into_ok(self) -> Result<Self::Ok, Nfsstat3>;
}

macro_rules! owned_res {
    ($($res:ident => $ok:ident),* $(,)?) => {$(
        impl OwnedRes for $res {
            type Ok = $ok;
            fn into_ok(self) -> Result<$ok, Nfsstat3> {
                match self {
                    Self::Ok(ok) => Ok(ok),
                    Self::Fail { status, .. } => Err(status),
                }
            }
        }
    )*};
}

owned_res! {
    GetattrRes => GetattrResOk,
    SetattrRes => SetattrResOk,
    LookupRes => LookupResOk,
    AccessRes => AccessResOk,
    WriteRes => WriteResOk,
    CreateRes => CreateResOk,
    MkdirRes => CreateResOk,
    SymlinkRes => CreateResOk,
    MknodRes => CreateResOk,
    RemoveRes => RemoveResOk,
    RmdirRes => RemoveResOk,
    RenameRes => RenameResOk,
    LinkRes => LinkResOk,
    FsstatRes => FsstatResOk,
    FsinfoRes => FsinfoResOk,
    PathconfRes => PathconfResOk,
    CommitRes => CommitResOk,
}

fn read_args(fh: &FileHandle, offset: u64, count: u32) -> ReadArgs<'_> {
    ReadArgs {
        file: fh.as_fh3(),
        offset,
        count,
    }
}

fn write_args<'a>(
    fh: &'a FileHandle,
    offset: u64,
    data: &'a [u8],
    stable: StableHow,
) -> WriteArgs<'a> {
    WriteArgs {
        file: fh.as_fh3(),
        offset,
        count: u32::try_from(data.len()).unwrap_or(u32::MAX),
        stable,
        data,
    }
}

impl NfsClient {
    /// Calls through `rpc` as `cred`.
    pub fn new(rpc: RpcClient, cred: Credential) -> Self {
        Self { rpc, cred }
    }

    /// The same connection, calling as `cred`.
    pub fn with_credential(&self, cred: Credential) -> Self {
        Self {
            rpc: self.rpc.clone(),
            cred,
        }
    }

    /// The credential calls are made as.
    pub fn credential(&self) -> &Credential {
        &self.cred
    }

    /// The transport.
    pub fn rpc(&self) -> &RpcClient {
        &self.rpc
    }

    /// An NFS call, sent again while the server answers NFS3ERR_JUKEBOX
    /// (see [`NfsClient`]).
    fn nfs<A, T, F>(&self, proc_: NfsProc3, args: &A, mut decode: F) -> Result<T, NfsError>
    where
        A: Encode + ?Sized,
        F: FnMut(&mut Reader<'_>) -> Result<T, DecodeError>,
    {
        let mut jukebox = None;
        loop {
            let got = self.rpc.call(
                &self.cred,
                NFS_PROGRAM,
                NFS_V3,
                u32::from(proc_),
                args,
                |r| unless_jukebox(r, &mut jukebox, self.rpc.options(), &mut decode),
            )?;
            match got {
                Ok(res) => return Ok(res),
                Err(pause) => std::thread::sleep(pause),
            }
        }
    }

    fn resend(&self) -> Resend {
        Resend {
            rpc: self.rpc.clone(),
            jukebox: None,
        }
    }

    /// An NFS call whose result owns its data: the `resok` struct, or the
    /// status as [`NfsError::Status`].
    fn nfs_ok<R: OwnedRes>(
        &self,
        proc_: NfsProc3,
        args: &(impl Encode + ?Sized),
    ) -> Result<R::Ok, NfsError> {
        self.nfs(proc_, args, decoded::<R>)?.into_ok().map_err(fail)
    }

    /// Sends an NFS call without waiting for it.
    fn nfs_submit(
        &self,
        proc_: NfsProc3,
        args: &(impl Encode + ?Sized),
    ) -> Result<PendingCall, ClientError> {
        self.rpc
            .submit(&self.cred, NFS_PROGRAM, NFS_V3, u32::from(proc_), args)
    }

    /// CREATE, MKDIR, SYMLINK or MKNOD: the same result shape.
    fn create_like<R: OwnedRes<Ok = CreateResOk>>(
        &self,
        proc_: NfsProc3,
        args: &(impl Encode + ?Sized),
    ) -> Result<Created, NfsError> {
        let ok = self.nfs_ok::<R>(proc_, args)?;
        Ok(Created {
            handle: ok.obj,
            attr: ok.obj_attributes,
            dir_wcc: ok.dir_wcc,
        })
    }

    fn mountd<A, T, F>(&self, proc_: MountProc3, args: &A, decode: F) -> Result<T, ClientError>
    where
        A: Encode + ?Sized,
        F: FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
    {
        self.rpc.call(
            &self.cred,
            MOUNT_PROGRAM,
            MOUNT_V3,
            u32::from(proc_),
            args,
            decode,
        )
    }

    // ----- MOUNT -----

    /// MNT: the root handle of the export `path`.
    pub fn mnt(&self, path: &[u8]) -> Result<FileHandle, NfsError> {
        let res: Mountres3 = self.mountd(MountProc3::Mnt, &MntArgs { dirpath: path }, decoded)?;
        match res {
            Mountres3::Ok(ok) => Ok(ok.fhandle),
            Mountres3::Fail(status) => Err(NfsError::Mount(status)),
        }
    }

    /// UMNT: tells the server `path` is no longer mounted (advisory).
    pub fn umnt(&self, path: &[u8]) -> Result<(), NfsError> {
        self.mountd(MountProc3::Umnt, &UmntArgs { dirpath: path }, |_| Ok(()))?;
        Ok(())
    }

    /// EXPORT: the server's exports.
    pub fn exports(&self) -> Result<Vec<Export>, NfsError> {
        Ok(self.mountd(MountProc3::Export, &(), |r| {
            let res = ExportRes::decode(r)?;
            Ok(res
                .exports
                .iter()
                .map(|e| Export {
                    path: e.dir.to_vec(),
                    groups: e.groups.iter().map(|g| g.to_vec()).collect(),
                })
                .collect())
        })?)
    }

    // ----- NFS -----

    /// NULL: a round trip that does nothing.
    pub fn null(&self) -> Result<(), NfsError> {
        self.nfs(NfsProc3::Null, &(), |_| Ok(()))
    }

    /// GETATTR.
    pub fn getattr(&self, fh: &FileHandle) -> Result<Fattr3, NfsError> {
        let args = GetattrArgs {
            object: fh.as_fh3(),
        };
        self.nfs_ok::<GetattrRes>(NfsProc3::Getattr, &args)
            .map(|ok| ok.obj_attributes)
    }

    /// SETATTR, optionally guarded by the object's ctime.
    pub fn setattr(
        &self,
        fh: &FileHandle,
        attrs: &Sattr3,
        guard: Option<Nfstime3>,
    ) -> Result<WccData, NfsError> {
        let args = SetattrArgs {
            object: fh.as_fh3(),
            new_attributes: *attrs,
            guard,
        };
        self.nfs_ok::<SetattrRes>(NfsProc3::Setattr, &args)
            .map(|ok| ok.obj_wcc)
    }

    /// LOOKUP: `name`'s handle and attributes in `dir`.
    pub fn lookup(
        &self,
        dir: &FileHandle,
        name: &[u8],
    ) -> Result<(FileHandle, Option<Fattr3>), NfsError> {
        let args = LookupArgs {
            what: DirOpArgs3 {
                dir: dir.as_fh3(),
                name,
            },
        };
        self.nfs_ok::<LookupRes>(NfsProc3::Lookup, &args)
            .map(|ok| (ok.object, ok.obj_attributes))
    }

    /// ACCESS: which of the `mask` bits the caller has.
    pub fn access(&self, fh: &FileHandle, mask: u32) -> Result<(u32, PostOpAttr), NfsError> {
        let args = AccessArgs {
            object: fh.as_fh3(),
            access: mask,
        };
        self.nfs_ok::<AccessRes>(NfsProc3::Access, &args)
            .map(|ok| (ok.access, ok.obj_attributes))
    }

    /// READLINK: the target of a symbolic link.
    pub fn readlink(&self, fh: &FileHandle) -> Result<Vec<u8>, NfsError> {
        let args = ReadlinkArgs {
            symlink: fh.as_fh3(),
        };
        self.nfs(NfsProc3::Readlink, &args, |r| {
            Ok(match ReadlinkRes::decode(r)? {
                ReadlinkRes::Ok(ok) => Ok(ok.data.to_vec()),
                ReadlinkRes::Fail { status, .. } => Err(fail(status)),
            })
        })?
    }

    /// READ: up to `buf.len()` bytes at `offset`, copied straight from the
    /// reply into `buf`.
    pub fn read(
        &self,
        fh: &FileHandle,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<ReadOutcome, NfsError> {
        let count = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        let args = read_args(fh, offset, count);
        self.nfs(NfsProc3::Read, &args, |r| read_into(r, buf))?
    }

    /// Sends a READ of `count` bytes at `offset` without waiting for it.
    pub fn start_read(
        &self,
        fh: &FileHandle,
        offset: u64,
        count: u32,
    ) -> Result<PendingRead, NfsError> {
        let args = read_args(fh, offset, count);
        Ok(PendingRead(
            self.nfs_submit(NfsProc3::Read, &args)?,
            self.resend(),
        ))
    }

    /// [`start_read`](Self::start_read) only if the transport has a free
    /// slot now (`None` otherwise): for read-ahead, which must never wait.
    pub fn try_start_read(
        &self,
        fh: &FileHandle,
        offset: u64,
        count: u32,
    ) -> Result<Option<PendingRead>, NfsError> {
        let args = read_args(fh, offset, count);
        Ok(self
            .rpc
            .try_submit(
                &self.cred,
                NFS_PROGRAM,
                NFS_V3,
                u32::from(NfsProc3::Read),
                &args,
            )?
            .map(|call| PendingRead(call, self.resend())))
    }

    /// Sends a WRITE without waiting for it, as a background call
    /// ([`RpcClient::submit_background`](crate::RpcClient::submit_background)):
    /// when background calls already hold their share of the connection's
    /// slots, makes it synchronously instead, and the result is ready.
    pub fn start_write(
        &self,
        fh: &FileHandle,
        offset: u64,
        data: &[u8],
        stable: StableHow,
    ) -> Result<PendingWrite, NfsError> {
        let args = write_args(fh, offset, data, stable);
        let proc_ = u32::from(NfsProc3::Write);
        match self
            .rpc
            .submit_background(&self.cred, NFS_PROGRAM, NFS_V3, proc_, &args)?
        {
            Some(call) => Ok(PendingWrite(WriteState::Sent(call, self.resend()))),
            None => Ok(PendingWrite(WriteState::Done(
                self.nfs_ok::<WriteRes>(NfsProc3::Write, &args)
                    .map(write_outcome),
            ))),
        }
    }

    /// WRITE `data` at `offset`.
    pub fn write(
        &self,
        fh: &FileHandle,
        offset: u64,
        data: &[u8],
        stable: StableHow,
    ) -> Result<WriteOutcome, NfsError> {
        let args = write_args(fh, offset, data, stable);
        self.nfs_ok::<WriteRes>(NfsProc3::Write, &args)
            .map(write_outcome)
    }

    /// CREATE a regular file.
    pub fn create(
        &self,
        dir: &FileHandle,
        name: &[u8],
        how: CreateHow3,
    ) -> Result<Created, NfsError> {
        let args = CreateArgs {
            where_: DirOpArgs3 {
                dir: dir.as_fh3(),
                name,
            },
            how,
        };
        self.create_like::<CreateRes>(NfsProc3::Create, &args)
    }

    /// MKDIR.
    pub fn mkdir(
        &self,
        dir: &FileHandle,
        name: &[u8],
        attrs: &Sattr3,
    ) -> Result<Created, NfsError> {
        let args = MkdirArgs {
            where_: DirOpArgs3 {
                dir: dir.as_fh3(),
                name,
            },
            attributes: *attrs,
        };
        self.create_like::<MkdirRes>(NfsProc3::Mkdir, &args)
    }

    /// SYMLINK `name` -> `target`.
    pub fn symlink(
        &self,
        dir: &FileHandle,
        name: &[u8],
        target: &[u8],
        attrs: &Sattr3,
    ) -> Result<Created, NfsError> {
        let args = SymlinkArgs {
            where_: DirOpArgs3 {
                dir: dir.as_fh3(),
                name,
            },
            symlink: Symlinkdata3 {
                symlink_attributes: *attrs,
                symlink_data: target,
            },
        };
        self.create_like::<SymlinkRes>(NfsProc3::Symlink, &args)
    }

    /// MKNOD a device, socket or FIFO.
    pub fn mknod(
        &self,
        dir: &FileHandle,
        name: &[u8],
        what: Mknoddata3,
    ) -> Result<Created, NfsError> {
        let args = MknodArgs {
            where_: DirOpArgs3 {
                dir: dir.as_fh3(),
                name,
            },
            what,
        };
        self.create_like::<MknodRes>(NfsProc3::Mknod, &args)
    }

    /// REMOVE a non-directory.
    pub fn remove(&self, dir: &FileHandle, name: &[u8]) -> Result<WccData, NfsError> {
        let args = RemoveArgs {
            object: DirOpArgs3 {
                dir: dir.as_fh3(),
                name,
            },
        };
        self.nfs_ok::<RemoveRes>(NfsProc3::Remove, &args)
            .map(|ok| ok.dir_wcc)
    }

    /// RMDIR an empty directory.
    pub fn rmdir(&self, dir: &FileHandle, name: &[u8]) -> Result<WccData, NfsError> {
        let args = RmdirArgs {
            object: DirOpArgs3 {
                dir: dir.as_fh3(),
                name,
            },
        };
        self.nfs_ok::<RmdirRes>(NfsProc3::Rmdir, &args)
            .map(|ok| ok.dir_wcc)
    }

    /// RENAME `from_dir/from_name` to `to_dir/to_name`.
    pub fn rename(
        &self,
        from_dir: &FileHandle,
        from_name: &[u8],
        to_dir: &FileHandle,
        to_name: &[u8],
    ) -> Result<(WccData, WccData), NfsError> {
        let args = RenameArgs {
            from: DirOpArgs3 {
                dir: from_dir.as_fh3(),
                name: from_name,
            },
            to: DirOpArgs3 {
                dir: to_dir.as_fh3(),
                name: to_name,
            },
        };
        self.nfs_ok::<RenameRes>(NfsProc3::Rename, &args)
            .map(|ok| (ok.fromdir_wcc, ok.todir_wcc))
    }

    /// LINK: a new name `dir/name` for `file`.
    pub fn link(
        &self,
        file: &FileHandle,
        dir: &FileHandle,
        name: &[u8],
    ) -> Result<PostOpAttr, NfsError> {
        let args = LinkArgs {
            file: file.as_fh3(),
            link: DirOpArgs3 {
                dir: dir.as_fh3(),
                name,
            },
        };
        self.nfs_ok::<LinkRes>(NfsProc3::Link, &args)
            .map(|ok| ok.file_attributes)
    }

    /// READDIR: one page of names after `cookie`, at most `count` bytes.
    pub fn readdir(
        &self,
        dir: &FileHandle,
        cookie: u64,
        cookieverf: CookieVerf3,
        count: u32,
    ) -> Result<DirPage<DirEntry>, NfsError> {
        let args = ReaddirArgs {
            dir: dir.as_fh3(),
            cookie,
            cookieverf,
            count,
        };
        self.nfs(NfsProc3::Readdir, &args, |r| {
            Ok(match ReaddirRes::decode(r)? {
                ReaddirRes::Ok(ok) => Ok(DirPage {
                    entries: ok
                        .entries
                        .iter()
                        .map(|e| DirEntry {
                            fileid: e.fileid,
                            name: e.name.to_vec(),
                            cookie: e.cookie,
                        })
                        .collect(),
                    cookieverf: ok.cookieverf,
                    eof: ok.eof,
                    dir_attr: ok.dir_attributes,
                }),
                ReaddirRes::Fail { status, .. } => Err(fail(status)),
            })
        })?
    }

    /// READDIRPLUS: one page of names with attributes and handles.
    pub fn readdirplus(
        &self,
        dir: &FileHandle,
        cookie: u64,
        cookieverf: CookieVerf3,
        dircount: u32,
        maxcount: u32,
    ) -> Result<DirPage<DirPlusEntry>, NfsError> {
        let args = ReaddirplusArgs {
            dir: dir.as_fh3(),
            cookie,
            cookieverf,
            dircount,
            maxcount,
        };
        self.nfs(NfsProc3::Readdirplus, &args, |r| {
            Ok(match ReaddirplusRes::decode(r)? {
                ReaddirplusRes::Ok(ok) => Ok(DirPage {
                    entries: ok
                        .entries
                        .iter()
                        .map(|e| DirPlusEntry {
                            fileid: e.fileid,
                            name: e.name.to_vec(),
                            cookie: e.cookie,
                            attr: e.name_attributes,
                            handle: e.name_handle,
                        })
                        .collect(),
                    cookieverf: ok.cookieverf,
                    eof: ok.eof,
                    dir_attr: ok.dir_attributes,
                }),
                ReaddirplusRes::Fail { status, .. } => Err(fail(status)),
            })
        })?
    }

    /// FSSTAT: space and file counts.
    pub fn fsstat(&self, root: &FileHandle) -> Result<FsstatResOk, NfsError> {
        let args = FsstatArgs {
            fsroot: root.as_fh3(),
        };
        self.nfs_ok::<FsstatRes>(NfsProc3::Fsstat, &args)
    }

    /// FSINFO: transfer sizes and properties.
    pub fn fsinfo(&self, root: &FileHandle) -> Result<FsinfoResOk, NfsError> {
        let args = FsinfoArgs {
            fsroot: root.as_fh3(),
        };
        self.nfs_ok::<FsinfoRes>(NfsProc3::Fsinfo, &args)
    }

    /// PATHCONF: name and link limits.
    pub fn pathconf(&self, fh: &FileHandle) -> Result<PathconfResOk, NfsError> {
        let args = PathconfArgs {
            object: fh.as_fh3(),
        };
        self.nfs_ok::<PathconfRes>(NfsProc3::Pathconf, &args)
    }

    /// COMMIT `count` bytes at `offset` (0, 0: the whole file) to stable
    /// storage; returns the write verifier to compare with the WRITEs'.
    pub fn commit(
        &self,
        fh: &FileHandle,
        offset: u64,
        count: u32,
    ) -> Result<(WriteVerf3, WccData), NfsError> {
        let args = CommitArgs {
            file: fh.as_fh3(),
            offset,
            count,
        };
        self.nfs_ok::<CommitRes>(NfsProc3::Commit, &args)
            .map(|ok| (ok.verf, ok.file_wcc))
    }
}

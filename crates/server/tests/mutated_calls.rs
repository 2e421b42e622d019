//! Well-framed NFSv3 and MOUNT calls whose arguments were mutated, through the
//! whole server (transport, DRC, dispatch, handlers, the local and the memory
//! backend): every call gets a reply within a bound, no handler panics,
//! nothing outside the export is read or changed, and the server ends idle and
//! answering. (It found a LINK into a regular file that deadlocked the memory
//! backend's service thread.)
//!
//! The calls are the fuzz corpus's hand-made `seed-*` arguments of every
//! procedure, with their placeholder handle replaced by a real one (the
//! export's root, a file, a directory) and then edited by
//! `rnfs_xdr::fuzzing::mutate`. One call in 16 reuses a recent xid, as a
//! retransmission would; one in 8 has its header mutated too, and then only
//! the server's answer to a NULL behind it is checked. The decoders are
//! fuzzed on their own in `rnfs-nfs3`; this reaches what the handlers do with
//! arguments that decode but ask odd things (offsets near 2^63, counts past
//! any limit, names with `/` or `..`, sizes and times at their extremes).
//!
//! `MUTATION_SEED` and `MUTATION_CALLS` (default 3000) override the run.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;
#[path = "../../../fuzz/replay.rs"]
mod replay;

use std::fs;
use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use common::{all_threads_idle, lookup, opener, wait_until, MOUNT, NFS};
use rnfs_client::{CallError, SyncConnection};
use rnfs_nfs3::*;
use rnfs_rpc::{encode_call, encode_record, Auth, AuthSys, Gids};
use rnfs_server::nfs::exports::{Access, BackendKind, Squash};
use rnfs_server::nfs::{self, ExportConfig, Exports, HandleKey};
use rnfs_server::{Metrics, MetricsConfig, Server};
use rnfs_xdr::fuzzing::{env_or, mutate, Edit, XorShift};
use rnfs_xdr::{Encode, Writer};

/// Every call must be answered well within this.
const BOUND: Duration = Duration::from_secs(10);
/// The placeholder handle in the corpus seeds, as encoded there.
const SEED_HANDLE: &[u8] = b"\x00\x00\x00\x14\x01\x00\x00\x00rnfs-root-handle";
/// The xid of the first mutated call (the ones before are the fixture's).
const XID_BASE: u32 = 0x4000_0000;
/// Bytes that must never leave the server: the content and the name of a file
/// next to the export.
const SECRET: &[u8] = b"outside-the-export-4f1e9c";
const SECRET_NAME: &str = "secret-name-8b2d71";

/// `(program, procedure, arguments)` of every hand-made seed of `target`.
fn seeds(target: &str, program: u32, procs: &[u32]) -> Vec<(u32, u32, Vec<u8>)> {
    replay::corpus_files(target)
        .into_iter()
        .filter(|(path, _)| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("seed-")
        })
        .filter_map(|(_, data)| {
            let (&selector, args) = data.split_first()?;
            let proc_ = procs[usize::from(selector) % procs.len()];
            Some((program, proc_, args.to_vec()))
        })
        .collect()
}

fn encoded(fh: &FileHandle) -> Vec<u8> {
    let mut out = Vec::new();
    fh.encode(&mut Writer::new(&mut out));
    out
}

/// `args` with each placeholder handle replaced by one of `handles`.
fn with_real_handles(args: &[u8], handles: &[Vec<u8>], rng: &mut XorShift) -> Vec<u8> {
    let mut out = Vec::with_capacity(args.len() + 64);
    let mut rest = args;
    while let Some(at) = rest
        .windows(SEED_HANDLE.len())
        .position(|w| w == SEED_HANDLE)
    {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(&handles[rng.below(handles.len() as u64) as usize]);
        rest = &rest[at + SEED_HANDLE.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// Creates, through NFS (so it works on every backend), what the calls work
/// on, again after mutated REMOVEs, RENAMEs and SETATTRs; returns the handles
/// of the root, `file` and `dir`. Best effort: other connections' mutated
/// calls may undo any step, and a missing object's handle is the root's.
fn fixture(c: &mut SyncConnection, root: &FileHandle) -> Vec<Vec<u8>> {
    let dirop = |name| DirOpArgs3 {
        dir: root.as_fh3(),
        name,
    };
    let object = |c: &mut SyncConnection, name: &'static [u8], want: Ftype3| {
        let found = match lookup(c, root, name) {
            LookupRes::Ok(ok) => Some(ok.obj_attributes.map(|a| a.ftype) == Some(want)),
            LookupRes::Fail { .. } => None,
        };
        if found == Some(false) {
            let object = dirop(name);
            let _: Result<RemoveRes, _> = c.nfs(NfsProc3::Remove, &RemoveArgs { object });
            let _: Result<RmdirRes, _> = c.nfs(NfsProc3::Rmdir, &RmdirArgs { object });
        }
        if found != Some(true) {
            let attributes = Sattr3 {
                mode: Some(0o755),
                ..Sattr3::default()
            };
            let where_ = dirop(name);
            if want == Ftype3::Dir {
                let _: Result<MkdirRes, _> =
                    c.nfs(NfsProc3::Mkdir, &MkdirArgs { where_, attributes });
            } else {
                let how = CreateHow3::Unchecked(attributes);
                let _: Result<CreateRes, _> = c.nfs(NfsProc3::Create, &CreateArgs { where_, how });
            }
        }
        match lookup(c, root, name) {
            LookupRes::Ok(ok) => ok.object,
            LookupRes::Fail { .. } => *root,
        }
    };
    let file = object(c, b"file", Ftype3::Reg);
    let data = vec![0x5a; 64 << 10];
    let args = WriteArgs {
        file: file.as_fh3(),
        offset: 0,
        count: data.len() as u32,
        stable: StableHow::Unstable,
        data: &data,
    };
    let _: Result<WriteRes, _> = c.nfs(NfsProc3::Write, &args);
    let dir = object(c, b"dir", Ftype3::Dir);
    for name in [&b"e0"[..], b"e1", b"e2", b"e3", b"e4"] {
        let how = CreateHow3::Unchecked(Sattr3::default());
        let where_ = DirOpArgs3 {
            dir: dir.as_fh3(),
            name,
        };
        let _: Result<CreateRes, _> = c.nfs(NfsProc3::Create, &CreateArgs { where_, how });
    }
    vec![encoded(root), encoded(&file), encoded(&dir)]
}

/// Panics anywhere in this test binary (the scheduler catches a handler's
/// panic and carries on, so the hook is where one shows).
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::Relaxed);
            default_hook(info);
        }));
    });
}

#[test]
fn mutated_arguments_are_answered_and_stay_inside_the_export() {
    run(BackendKind::Local, 1);
}

#[test]
fn mutated_arguments_are_answered_by_the_memory_backend() {
    run(BackendKind::Memory, 1);
}

/// Four connections at once: handlers race on the same objects (lock order,
/// renames against links and removes, the DRC under concurrent calls).
#[test]
fn concurrent_mutated_arguments_local() {
    run(BackendKind::Local, 4);
}

#[test]
fn concurrent_mutated_arguments_memory() {
    run(BackendKind::Memory, 4);
}

fn run(backend: BackendKind, connections: u32) {
    count_panics();
    let top = tempfile::tempdir().unwrap();
    let export = top.path().join("export");
    fs::create_dir(&export).unwrap();
    fs::write(top.path().join(SECRET_NAME), SECRET).unwrap();
    let listing = || {
        let mut names: Vec<_> = fs::read_dir(top.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let outside_before = listing();

    let path = export.to_str().unwrap().to_owned();
    let mut config = ExportConfig::new(&path);
    config.access = Access::Rw;
    config.squash = Squash::None;
    config.backend = backend;
    let exports = Arc::new(Exports::new(&[config], Box::new(opener)).unwrap());
    let dispatcher = nfs::dispatcher(exports, HandleKey::ephemeral().unwrap()).unwrap();
    let mut server_config = common::config();
    server_config.drc = Some(nfs::drc_config());
    // Per-call metrics on, as `rnfs serve` runs by default: they key on the
    // (program, version, procedure) and the client of every call.
    server_config.metrics = Some(Arc::new(Metrics::new(MetricsConfig::default())));
    let server = Server::start_with_dispatcher(server_config, Arc::new(dispatcher)).unwrap();
    let calls_ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_calls(&server, &path, connections);
    }));
    if let Err(failure) = calls_ran {
        // A service thread may be stuck: stopping the server would wait for
        // it forever, so leave it running and report the failure.
        std::mem::forget(server);
        std::panic::resume_unwind(failure);
    }
    // Nothing next to the export was created, removed or changed.
    assert_eq!(listing(), outside_before);
    assert_eq!(fs::read(top.path().join(SECRET_NAME)).unwrap(), SECRET);
}

/// The calls, on `connections` connections at once to `server`, which
/// exports `path`; the first connection also keeps the fixture up.
fn run_calls(server: &Server, path: &str, connections: u32) {
    let nfs_procs: Vec<u32> = NfsProc3::ALL.iter().map(|&p| u32::from(p)).collect();
    let mount_procs: Vec<u32> = MountProc3::ALL.iter().map(|&p| u32::from(p)).collect();
    let mut calls = seeds("nfs3_args", NFS, &nfs_procs);
    calls.extend(seeds("mount_args", MOUNT, &mount_procs));
    assert!(calls.len() > 40, "{} seeds", calls.len());

    let mut c = SyncConnection::connect(server.local_addrs()[0]).unwrap();
    let root = c.mount(path).unwrap();
    let handles = Mutex::new(fixture(&mut c, &root));
    let (answered, refused) = (AtomicU32::new(0), AtomicU32::new(0));
    let per_connection = env_or("MUTATION_CALLS", 3000) / u64::from(connections);
    let seed = env_or("MUTATION_SEED", 0x5eed_c0de);
    std::thread::scope(|scope| {
        for k in 0..connections {
            let (calls, handles, root) = (&calls, &handles, &root);
            let (answered, refused) = (&answered, &refused);
            let mut c = SyncConnection::connect(server.local_addrs()[0]).unwrap();
            let addr = server.local_addrs()[0];
            scope.spawn(move || {
                let mut raw = common::connect(addr);
                let mut rng = XorShift::new(seed.wrapping_add(u64::from(k) << 32));
                for i in 0..per_connection {
                    if k == 0 && i % 200 == 0 {
                        let fresh = fixture(&mut c, root);
                        *handles.lock().unwrap() = fresh;
                    }
                    let handles = handles.lock().unwrap().clone();
                    if rng.below(8) == 0 {
                        whole_record_mutated(&mut raw, addr, &mut rng, calls, &handles, k, i);
                        continue;
                    }
                    if one_call(&mut c, &mut rng, calls, &handles, k, i) {
                        answered.fetch_add(1, Ordering::Relaxed);
                    } else {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let (answered, refused) = (answered.into_inner(), refused.into_inner());
    println!("{answered} calls answered, {refused} refused at the RPC level");
    assert!(
        answered > 1000 && refused > 100,
        "{answered} answered, {refused} refused"
    );
    assert_eq!(PANICS.load(Ordering::Relaxed), 0, "a handler panicked");
    // The server is idle and still answers.
    assert!(wait_until(BOUND, || all_threads_idle(server)));
    c.call_raw(NFS, 3, 0, &[]).unwrap();
}

/// Call `i` of connection `k`, with its header mutated too (program,
/// version, procedure, credential, record length), sent on the raw
/// connection `raw` and followed by a NULL call: the NULL must be answered,
/// or the connection closed by the server (its answer to a record that is
/// not a call), never left hanging. Replies to the mutated call itself are
/// skipped: it may get one, or none.
fn whole_record_mutated(
    raw: &mut TcpStream,
    addr: SocketAddr,
    rng: &mut XorShift,
    calls: &[(u32, u32, Vec<u8>)],
    handles: &[Vec<u8>],
    k: u32,
    i: u64,
) {
    let (program, proc_, args) = &calls[rng.below(calls.len() as u64) as usize];
    let args = with_real_handles(args, handles, rng);
    let mut record = Vec::new();
    encode_call(
        0x7000_0000 | i as u32,
        *program,
        3,
        *proc_,
        &Auth::Sys(root_cred()),
        &args,
        &mut record,
    );
    let body = record.split_off(4);
    let edits: Vec<Edit> = (0..1 + rng.below(3)).map(|_| Edit::random(rng)).collect();
    let mut framed = Vec::new();
    encode_record(&mutate(&body, &args, &edits), &mut framed);
    let null_xid = 0x7800_0000 | i as u32;
    let mut null = Vec::new();
    encode_call(null_xid, NFS, 3, 0, &Auth::None, &[], &mut null);
    let what = format!("connection {k}, call {i} (mutated header)");
    if raw
        .write_all(&framed)
        .and_then(|()| raw.write_all(&null))
        .is_err()
    {
        *raw = common::connect(addr);
        return;
    }
    let start = Instant::now();
    loop {
        match common::read_record(raw) {
            Ok(reply) => {
                if reply.get(..4) == Some(&null_xid.to_be_bytes()[..]) {
                    return;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!(
                    "{what}: no answer to the NULL after it in {:?}",
                    start.elapsed()
                )
            }
            // Closed by the server: a new connection for the next one.
            Err(_) => {
                *raw = common::connect(addr);
                return;
            }
        }
    }
}

fn root_cred() -> AuthSys<'static> {
    AuthSys {
        stamp: 0,
        machine_name: b"mutated",
        uid: 0,
        gid: 0,
        gids: Gids::new(&[]).unwrap(),
    }
}

/// Call `i` of connection `k`: a seed with real handles, mutated, sometimes
/// under a recent xid. Whether the server answered it (`false`: refused at
/// the RPC level, GARBAGE_ARGS and the like, an answer too); panics if it
/// took longer than [`BOUND`], failed otherwise, or leaked what is outside.
fn one_call(
    c: &mut SyncConnection,
    rng: &mut XorShift,
    calls: &[(u32, u32, Vec<u8>)],
    handles: &[Vec<u8>],
    k: u32,
    i: u64,
) -> bool {
    let (program, proc_, args) = &calls[rng.below(calls.len() as u64) as usize];
    let args = with_real_handles(args, handles, rng);
    let edits: Vec<Edit> = (0..rng.below(4)).map(|_| Edit::random(rng)).collect();
    let args = mutate(&args, &handles[rng.below(3) as usize], &edits);
    // One call in 16 reuses a recent xid, as a retransmission does (with
    // other arguments, too): the duplicate request cache answers it from
    // memory or runs it as new, never leaves it unanswered.
    let fresh = XID_BASE.wrapping_add(i as u32);
    let reused = rng.below(16) == 0 && i > 8;
    c.set_next_xid(if reused {
        fresh.wrapping_sub(1 + rng.below(8) as u32)
    } else {
        fresh
    });
    let start = Instant::now();
    let reply = c.call_raw(*program, 3, *proc_, &args);
    let took = start.elapsed();
    let what = format!("connection {k}, call {i} (program {program}, procedure {proc_})");
    assert!(took < BOUND, "{what} took {took:?}");
    match reply {
        Ok(results) => {
            let leaked = results.windows(SECRET.len()).any(|w| w == SECRET)
                || results
                    .windows(SECRET_NAME.len())
                    .any(|w| w == SECRET_NAME.as_bytes());
            assert!(!leaked, "{what} answered with what is outside the export");
            true
        }
        Err(CallError::Rpc(_)) => false,
        Err(e) => panic!("{what}: {e}"),
    }
}

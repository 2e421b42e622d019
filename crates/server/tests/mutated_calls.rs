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
//! `rnfs_xdr::fuzzing::mutate`; one call in 16 reuses a recent xid, as a
//! retransmission would. The decoders are fuzzed on their own in
//! `rnfs-nfs3`; this reaches what the handlers do with arguments that decode
//! but ask odd things (offsets near 2^63, counts past any limit, names with
//! `/` or `..`, sizes and times at their extremes).
//!
//! `MUTATION_SEED` and `MUTATION_CALLS` (default 3000) override the run.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use common::{all_threads_idle, lookup, opener, wait_until, MOUNT, NFS};
use rnfs_client::{CallError, SyncConnection};
use rnfs_nfs3::*;
use rnfs_server::nfs::exports::{Access, BackendKind, Squash};
use rnfs_server::nfs::{self, ExportConfig, Exports, HandleKey};
use rnfs_server::Server;
use rnfs_xdr::fuzzing::{mutate, Edit};
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

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `(program, procedure, arguments)` of every hand-made seed of `target`.
fn seeds(target: &str, program: u32, procs: &[u32]) -> Vec<(u32, u32, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("seed-"))
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|n| {
            let data = fs::read(dir.join(n)).unwrap();
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
fn with_real_handles(args: &[u8], handles: &[Vec<u8>], rng: &mut Rng) -> Vec<u8> {
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
/// of the root, `file` and `dir`.
fn fixture(c: &mut SyncConnection, root: &FileHandle) -> Vec<Vec<u8>> {
    let entry = |c: &mut SyncConnection, dir: &FileHandle, name: &[u8]| match lookup(c, dir, name) {
        LookupRes::Ok(ok) => Some((ok.object, ok.obj_attributes.map(|a| a.ftype))),
        LookupRes::Fail { .. } => None,
    };
    let mut handles = vec![encoded(root)];
    let dirop = |name| DirOpArgs3 {
        dir: root.as_fh3(),
        name,
    };
    // A regular file of 64 KiB.
    let file = match entry(c, root, b"file") {
        Some((fh, Some(Ftype3::Reg))) => fh,
        other => {
            if other.is_some() {
                let _: RemoveRes = c
                    .nfs(
                        NfsProc3::Remove,
                        &RemoveArgs {
                            object: dirop(b"file"),
                        },
                    )
                    .unwrap();
                let _: RmdirRes = c
                    .nfs(
                        NfsProc3::Rmdir,
                        &RmdirArgs {
                            object: dirop(b"file"),
                        },
                    )
                    .unwrap();
            }
            let how = CreateHow3::Unchecked(Sattr3 {
                mode: Some(0o644),
                ..Sattr3::default()
            });
            let res: CreateRes = c
                .nfs(
                    NfsProc3::Create,
                    &CreateArgs {
                        where_: dirop(b"file"),
                        how,
                    },
                )
                .unwrap();
            let CreateRes::Ok(CreateResOk { obj: Some(fh), .. }) = res else {
                panic!("fixture: CREATE file: {res:?}")
            };
            fh
        }
    };
    let data = vec![0x5a; 64 << 10];
    let res: WriteRes = c
        .nfs(
            NfsProc3::Write,
            &WriteArgs {
                file: file.as_fh3(),
                offset: 0,
                count: data.len() as u32,
                stable: StableHow::Unstable,
                data: &data,
            },
        )
        .unwrap();
    assert!(
        matches!(res, WriteRes::Ok(_)),
        "fixture: WRITE file: {res:?}"
    );
    handles.push(encoded(&file));
    // A directory of five entries.
    let dir = match entry(c, root, b"dir") {
        Some((fh, Some(Ftype3::Dir))) => fh,
        other => {
            if other.is_some() {
                let _: RemoveRes = c
                    .nfs(
                        NfsProc3::Remove,
                        &RemoveArgs {
                            object: dirop(b"dir"),
                        },
                    )
                    .unwrap();
            }
            let res: MkdirRes = c
                .nfs(
                    NfsProc3::Mkdir,
                    &MkdirArgs {
                        where_: dirop(b"dir"),
                        attributes: Sattr3 {
                            mode: Some(0o755),
                            ..Sattr3::default()
                        },
                    },
                )
                .unwrap();
            let MkdirRes::Ok(CreateResOk { obj: Some(fh), .. }) = res else {
                panic!("fixture: MKDIR dir: {res:?}")
            };
            fh
        }
    };
    for name in [&b"e0"[..], b"e1", b"e2", b"e3", b"e4"] {
        let how = CreateHow3::Unchecked(Sattr3::default());
        let _: CreateRes = c
            .nfs(
                NfsProc3::Create,
                &CreateArgs {
                    where_: DirOpArgs3 {
                        dir: dir.as_fh3(),
                        name,
                    },
                    how,
                },
            )
            .unwrap();
    }
    handles.push(encoded(&dir));
    handles
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
    run(BackendKind::Local);
}

#[test]
fn mutated_arguments_are_answered_by_the_memory_backend() {
    run(BackendKind::Memory);
}

fn run(backend: BackendKind) {
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
    let server = Server::start_with_dispatcher(server_config, Arc::new(dispatcher)).unwrap();
    let calls_ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_calls(&server, &path);
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

/// The calls, on one connection to `server`, which exports `path`.
fn run_calls(server: &Server, path: &str) {
    let mut c = SyncConnection::connect(server.local_addrs()[0]).unwrap();
    let root = c.mount(path).unwrap();

    let nfs_procs: Vec<u32> = NfsProc3::ALL.iter().map(|&p| u32::from(p)).collect();
    let mount_procs: Vec<u32> = MountProc3::ALL.iter().map(|&p| u32::from(p)).collect();
    let mut calls = seeds("nfs3_args", NFS, &nfs_procs);
    calls.extend(seeds("mount_args", MOUNT, &mount_procs));
    assert!(calls.len() > 40, "{} seeds", calls.len());

    let mut rng = Rng(env_or("MUTATION_SEED", 0x5eed_c0de) | 1);
    let mut handles = fixture(&mut c, &root);
    let (mut answered, mut refused) = (0u32, 0u32);
    for i in 0..env_or("MUTATION_CALLS", 3000) {
        if i % 200 == 0 {
            handles = fixture(&mut c, &root);
        }
        let (program, proc_, args) = &calls[rng.below(calls.len() as u64) as usize];
        let args = with_real_handles(args, &handles, &mut rng);
        let edits: Vec<Edit> = (0..rng.below(4))
            .map(|_| Edit {
                kind: rng.next() as u8,
                at: rng.next() as u32,
                value: rng.next() as u32,
            })
            .collect();
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
        assert!(
            took < BOUND,
            "call {i} (program {program}, procedure {proc_}) took {took:?}"
        );
        match reply {
            Ok(results) => {
                answered += 1;
                assert!(
                    !results.windows(SECRET.len()).any(|w| w == SECRET)
                        && !results
                            .windows(SECRET_NAME.len())
                            .any(|w| w == SECRET_NAME.as_bytes()),
                    "call {i} (procedure {proc_}) answered with what is outside the export"
                );
            }
            // GARBAGE_ARGS and the like: an answer too.
            Err(CallError::Rpc(_)) => refused += 1,
            Err(e) => panic!("call {i} (program {program}, procedure {proc_}): {e}"),
        }
    }
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

//! Well-framed NFSv3 and MOUNT calls whose arguments were mutated, against a
//! local export, through the whole server (transport, DRC, dispatch, handlers,
//! the local backend): every call gets a reply within a bound, no handler
//! panics, nothing outside the export is read or changed, and the server ends
//! idle and answering.
//!
//! The calls are the fuzz corpus's hand-made `seed-*` arguments of every
//! procedure, with their placeholder handle replaced by a real one (the
//! export's root, a file, a directory) and then edited by
//! `rnfs_xdr::fuzzing::mutate`. The decoders are fuzzed on their own in
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
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{all_threads_idle, lookup, opener, wait_until, MOUNT, NFS};
use rnfs_client::{CallError, SyncConnection};
use rnfs_nfs3::{FileHandle, LookupRes, MountProc3, NfsProc3};
use rnfs_server::nfs::exports::{Access, Squash};
use rnfs_server::nfs::{self, ExportConfig, Exports, HandleKey};
use rnfs_server::Server;
use rnfs_xdr::fuzzing::{mutate, Edit};
use rnfs_xdr::{Encode, Writer};

/// Every call must be answered well within this.
const BOUND: Duration = Duration::from_secs(10);
/// The placeholder handle in the corpus seeds, as encoded there.
const SEED_HANDLE: &[u8] = b"\x00\x00\x00\x14\x01\x00\x00\x00rnfs-root-handle";
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

/// Creates what the calls work on (again, after mutated REMOVEs and RENAMEs)
/// and returns the handles of the root, `file` and `dir`.
fn fixture(export: &Path, c: &mut SyncConnection, root: &FileHandle) -> Vec<Vec<u8>> {
    let file = export.join("file");
    if !file.is_file() {
        let _ = fs::remove_dir_all(&file);
        fs::write(&file, vec![0x5a; 64 << 10]).unwrap();
    }
    let dir = export.join("dir");
    if !dir.is_dir() {
        let _ = fs::remove_file(&dir);
        fs::create_dir(&dir).unwrap();
        for i in 0..5 {
            fs::write(dir.join(format!("e{i}")), b"x").unwrap();
        }
    }
    let mut handles = vec![encoded(root)];
    for name in [&b"file"[..], b"dir"] {
        let LookupRes::Ok(ok) = lookup(c, root, name) else {
            panic!("fixture {name:?} missing")
        };
        handles.push(encoded(&ok.object));
    }
    handles
}

#[test]
fn mutated_arguments_are_answered_and_stay_inside_the_export() {
    static PANICS: AtomicUsize = AtomicUsize::new(0);
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::Relaxed);
        default_hook(info);
    }));

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
    let exports = Arc::new(Exports::new(&[config], Box::new(opener)).unwrap());
    let dispatcher = nfs::dispatcher(exports, HandleKey::ephemeral().unwrap()).unwrap();
    let mut server_config = common::config();
    server_config.drc = Some(nfs::drc_config());
    let server = Server::start_with_dispatcher(server_config, Arc::new(dispatcher)).unwrap();
    let mut c = SyncConnection::connect(server.local_addrs()[0]).unwrap();
    let root = c.mount(&path).unwrap();

    let nfs_procs: Vec<u32> = NfsProc3::ALL.iter().map(|&p| u32::from(p)).collect();
    let mount_procs: Vec<u32> = MountProc3::ALL.iter().map(|&p| u32::from(p)).collect();
    let mut calls = seeds("nfs3_args", NFS, &nfs_procs);
    calls.extend(seeds("mount_args", MOUNT, &mount_procs));
    assert!(calls.len() > 40, "{} seeds", calls.len());

    let mut rng = Rng(env_or("MUTATION_SEED", 0x5eed_c0de) | 1);
    let mut handles = fixture(&export, &mut c, &root);
    let (mut answered, mut refused) = (0u32, 0u32);
    for i in 0..env_or("MUTATION_CALLS", 3000) {
        if i % 200 == 0 {
            handles = fixture(&export, &mut c, &root);
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

    // Nothing next to the export was created, removed or changed.
    assert_eq!(listing(), outside_before);
    assert_eq!(fs::read(top.path().join(SECRET_NAME)).unwrap(), SECRET);
    // The server is idle and still answers.
    assert!(wait_until(BOUND, || all_threads_idle(&server)));
    c.call_raw(NFS, 3, 0, &[]).unwrap();
}

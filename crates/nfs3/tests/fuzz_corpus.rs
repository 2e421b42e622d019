//! Replays every input in `fuzz/corpus/{nfs3,mount}_{args,res}/` through its
//! fuzz target, so CI exercises all four without nightly or cargo-fuzz, then runs
//! each target on mutated corpus inputs (`FUZZ_CASES` per target, 512 by default;
//! proptest shrinks a failure to the fewest edits).
//!
//! `regenerate_seed_corpus` (ignored) rewrites the `seed-*` inputs: hand-made
//! arguments of every procedure, plus truncated and malformed ones, and results
//! of every procedure drawn from the round-trip tests' strategies with a fixed
//! seed.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod strategies;

#[path = "../../../fuzz/replay.rs"]
mod replay;

use std::fs;
use std::sync::LazyLock;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use rnfs_nfs3::fuzzing;
use rnfs_nfs3::*;
use rnfs_xdr::{Encode, Reader, Writer};

#[test]
fn nfs3_args_corpus() {
    assert!(replay::replay("nfs3_args", fuzzing::nfs3_args) >= 30);
}

#[test]
fn mount_args_corpus() {
    assert!(replay::replay("mount_args", fuzzing::mount_args) >= 10);
}

#[test]
fn nfs3_res_corpus() {
    assert!(replay::replay("nfs3_res", fuzzing::nfs3_res) >= 44);
}

#[test]
fn mount_res_corpus() {
    assert!(replay::replay("mount_res", fuzzing::mount_res) >= 12);
}

/// Every target's corpus, loaded once for the mutated-input tests.
static CORPORA: LazyLock<[Vec<Vec<u8>>; 4]> =
    LazyLock::new(|| ["nfs3_args", "nfs3_res", "mount_args", "mount_res"].map(replay::corpus));

proptest! {
    #![proptest_config(ProptestConfig::with_cases(replay::fuzz_cases()))]

    #[test]
    fn mutated_nfs3_args(pick in any::<Index>(), other in any::<Index>(), e in replay::edits()) {
        replay::check_mutated(&CORPORA[0], fuzzing::nfs3_args, pick, other, &e);
    }

    #[test]
    fn mutated_nfs3_results(pick in any::<Index>(), other in any::<Index>(), e in replay::edits()) {
        replay::check_mutated(&CORPORA[1], fuzzing::nfs3_res, pick, other, &e);
    }

    #[test]
    fn mutated_mount_args(pick in any::<Index>(), other in any::<Index>(), e in replay::edits()) {
        replay::check_mutated(&CORPORA[2], fuzzing::mount_args, pick, other, &e);
    }

    #[test]
    fn mutated_mount_results(pick in any::<Index>(), other in any::<Index>(), e in replay::edits()) {
        replay::check_mutated(&CORPORA[3], fuzzing::mount_res, pick, other, &e);
    }
}

fn encode(v: &impl Encode) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode(&mut Writer::new(&mut out));
    out
}

/// A fuzz input: the procedure selector byte, then the body.
fn input(proc_: u32, body: &[u8]) -> Vec<u8> {
    [&[proc_ as u8][..], body].concat()
}

const FH: &[u8] = b"\x01\x00\x00\x00rnfs-root-handle";
const VERF: [u8; 8] = *b"cookieve";

fn fh() -> NfsFh3<'static> {
    NfsFh3::new(FH).unwrap()
}

fn dirop(name: &'static [u8]) -> DirOpArgs3<'static> {
    DirOpArgs3 { dir: fh(), name }
}

fn sattr() -> Sattr3 {
    Sattr3 {
        mode: Some(0o755),
        uid: Some(1000),
        gid: None,
        size: Some(0),
        atime: SetTime::SetToServerTime,
        mtime: SetTime::SetToClientTime(Nfstime3 {
            seconds: 1_700_000_000,
            nseconds: 5,
        }),
    }
}

/// Valid arguments of every procedure (some procedures more than once).
fn valid_args() -> Vec<(&'static str, NfsArgs<'static>)> {
    vec![
        ("null", NfsArgs::Null),
        ("getattr", NfsArgs::Getattr(GetattrArgs { object: fh() })),
        (
            "setattr-guarded",
            NfsArgs::Setattr(SetattrArgs {
                object: fh(),
                new_attributes: sattr(),
                guard: Some(Nfstime3 {
                    seconds: 1,
                    nseconds: 2,
                }),
            }),
        ),
        (
            "setattr-truncate",
            NfsArgs::Setattr(SetattrArgs {
                object: fh(),
                new_attributes: Sattr3 {
                    size: Some(4096),
                    ..Sattr3::default()
                },
                guard: None,
            }),
        ),
        (
            "lookup",
            NfsArgs::Lookup(LookupArgs {
                what: dirop(b"file.txt"),
            }),
        ),
        (
            "lookup-dotdot",
            NfsArgs::Lookup(LookupArgs { what: dirop(b"..") }),
        ),
        (
            "access",
            NfsArgs::Access(AccessArgs {
                object: fh(),
                access: 0x3f,
            }),
        ),
        (
            "readlink",
            NfsArgs::Readlink(ReadlinkArgs { symlink: fh() }),
        ),
        (
            "read",
            NfsArgs::Read(ReadArgs {
                file: fh(),
                offset: 1 << 40,
                count: 1 << 20,
            }),
        ),
        (
            "write-unstable",
            NfsArgs::Write(WriteArgs {
                file: fh(),
                offset: 4096,
                count: 5,
                stable: StableHow::Unstable,
                data: b"hello",
            }),
        ),
        (
            "write-filesync",
            NfsArgs::Write(WriteArgs {
                file: fh(),
                offset: 0,
                count: 8,
                stable: StableHow::FileSync,
                data: b"12345678",
            }),
        ),
        (
            "create-unchecked",
            NfsArgs::Create(CreateArgs {
                where_: dirop(b"new"),
                how: CreateHow3::Unchecked(sattr()),
            }),
        ),
        (
            "create-exclusive",
            NfsArgs::Create(CreateArgs {
                where_: dirop(b"excl"),
                how: CreateHow3::Exclusive(*b"createvf"),
            }),
        ),
        (
            "mkdir",
            NfsArgs::Mkdir(MkdirArgs {
                where_: dirop(b"dir"),
                attributes: sattr(),
            }),
        ),
        (
            "symlink",
            NfsArgs::Symlink(SymlinkArgs {
                where_: dirop(b"link"),
                symlink: Symlinkdata3 {
                    symlink_attributes: Sattr3::default(),
                    symlink_data: b"../target/path",
                },
            }),
        ),
        (
            "mknod-chr",
            NfsArgs::Mknod(MknodArgs {
                where_: dirop(b"null"),
                what: Mknoddata3::Chr(Devicedata3 {
                    dev_attributes: sattr(),
                    spec: Specdata3 {
                        specdata1: 1,
                        specdata2: 3,
                    },
                }),
            }),
        ),
        (
            "mknod-fifo",
            NfsArgs::Mknod(MknodArgs {
                where_: dirop(b"fifo"),
                what: Mknoddata3::Fifo(Sattr3::default()),
            }),
        ),
        (
            "mknod-reg",
            NfsArgs::Mknod(MknodArgs {
                where_: dirop(b"reg"),
                what: Mknoddata3::Other(Ftype3::Reg),
            }),
        ),
        (
            "remove",
            NfsArgs::Remove(RemoveArgs {
                object: dirop(b"old"),
            }),
        ),
        (
            "rmdir",
            NfsArgs::Rmdir(RmdirArgs {
                object: dirop(b"dir"),
            }),
        ),
        (
            "rename",
            NfsArgs::Rename(RenameArgs {
                from: dirop(b"a"),
                to: dirop(b"b-longer-name"),
            }),
        ),
        (
            "link",
            NfsArgs::Link(LinkArgs {
                file: fh(),
                link: dirop(b"hard"),
            }),
        ),
        (
            "readdir",
            NfsArgs::Readdir(ReaddirArgs {
                dir: fh(),
                cookie: 0,
                cookieverf: [0; 8],
                count: 4096,
            }),
        ),
        (
            "readdirplus",
            NfsArgs::Readdirplus(ReaddirplusArgs {
                dir: fh(),
                cookie: 17,
                cookieverf: VERF,
                dircount: 4096,
                maxcount: 32768,
            }),
        ),
        ("fsstat", NfsArgs::Fsstat(FsstatArgs { fsroot: fh() })),
        ("fsinfo", NfsArgs::Fsinfo(FsinfoArgs { fsroot: fh() })),
        ("pathconf", NfsArgs::Pathconf(PathconfArgs { object: fh() })),
        (
            "commit",
            NfsArgs::Commit(CommitArgs {
                file: fh(),
                offset: 0,
                count: 0,
            }),
        ),
    ]
}

fn nfs3_args_seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, args) in valid_args() {
        let proc_ = u32::from(args.procedure());
        let body = encode(&args);
        if name == "write-filesync" || name == "lookup" || name == "readdirplus" {
            // Truncated copies: mid-way and one byte short.
            seeds.push((
                format!("{name}-truncated-half"),
                input(proc_, &body[..body.len() / 2]),
            ));
            seeds.push((
                format!("{name}-truncated-1"),
                input(proc_, &body[..body.len() - 1]),
            ));
        }
        seeds.push((name.to_string(), input(proc_, &body)));
    }
    let be = |words: &[u32]| -> Vec<u8> { words.iter().flat_map(|w| w.to_be_bytes()).collect() };
    // Malformed: handle of 65 bytes, huge lengths, bad discriminants.
    let mut long_fh = be(&[65]);
    long_fh.extend_from_slice(&[0; 68]);
    seeds.push(("getattr-fh-65".into(), input(1, &long_fh)));
    seeds.push((
        "lookup-name-huge".into(),
        input(3, &be(&[0, 0xffff_ffff, 0])),
    ));
    let mut long_name = be(&[0, 1025]);
    long_name.extend_from_slice(&[b'n'; 1028]);
    seeds.push(("lookup-name-1025".into(), input(3, &long_name)));
    seeds.push((
        "write-data-huge".into(),
        input(7, &be(&[0, 0, 0, 0, 0, 0x7fff_ffff])),
    ));
    seeds.push((
        "create-bad-mode".into(),
        input(8, &be(&[0, 1, 0x6100_0000, 3])),
    ));
    seeds.push((
        "setattr-bad-time-how".into(),
        input(2, &be(&[0, 0, 0, 0, 0, 7])),
    ));
    seeds.push(("mknod-bad-type".into(), input(11, &be(&[0, 0, 9]))));
    seeds.push((
        "access-bad-padding".into(),
        input(4, &be(&[1, 0xffff_ffff, 0x1f])),
    ));
    seeds.push((
        "proc-wraps-22".into(),
        input(22 + 1, &encode(&GetattrArgs { object: fh() })),
    ));
    seeds.push(("empty".into(), Vec::new()));
    seeds
}

fn mount_args_seeds() -> Vec<(String, Vec<u8>)> {
    let mnt = encode(&MntArgs {
        dirpath: b"/export/home",
    });
    let be = |words: &[u32]| -> Vec<u8> { words.iter().flat_map(|w| w.to_be_bytes()).collect() };
    let mut long = be(&[1025]);
    long.extend_from_slice(&[b'/'; 1028]);
    let mut max = be(&[1024]);
    max.extend_from_slice(&[b'/'; 1024]);
    vec![
        ("empty".into(), Vec::new()),
        ("null".into(), vec![0]),
        ("mnt".into(), input(1, &mnt)),
        (
            "mnt-root".into(),
            input(1, &encode(&MntArgs { dirpath: b"/" })),
        ),
        ("mnt-truncated".into(), input(1, &mnt[..mnt.len() - 2])),
        ("mnt-1024".into(), input(1, &max)),
        ("mnt-1025".into(), input(1, &long)),
        ("mnt-huge-len".into(), input(1, &be(&[0xffff_ffff]))),
        ("dump".into(), vec![2]),
        (
            "umnt".into(),
            input(
                3,
                &encode(&UmntArgs {
                    dirpath: b"/export",
                }),
            ),
        ),
        ("umntall".into(), vec![4]),
        ("export".into(), vec![5]),
        ("proc-wraps-6".into(), input(7, &mnt)),
    ]
}

/// `per_proc` results of each of `procs` procedures, drawn from `strategy`
/// with a fixed seed: the selector byte, then the encoded results.
fn result_seeds<T: Encode + std::fmt::Debug>(
    strategy: impl Strategy<Value = T>,
    procedure: impl Fn(&T) -> u32,
    procs: usize,
    per_proc: usize,
) -> Vec<(String, Vec<u8>)> {
    let mut runner = TestRunner::deterministic();
    let mut count = vec![0; procs];
    let mut seeds = Vec::new();
    for _ in 0..100_000 {
        let res = strategy.new_tree(&mut runner).unwrap().current();
        let p = procedure(&res);
        let n = &mut count[p as usize];
        if *n < per_proc {
            seeds.push((format!("res-{p}-{n}"), input(p, &encode(&res))));
            *n += 1;
        }
        if seeds.len() == procs * per_proc {
            break;
        }
    }
    assert_eq!(seeds.len(), procs * per_proc, "every procedure drawn");
    seeds
}

fn nfs3_res_seeds() -> Vec<(String, Vec<u8>)> {
    result_seeds(strategies::nfs_res(), |r| u32::from(r.procedure()), 22, 3)
}

fn mount_res_seeds() -> Vec<(String, Vec<u8>)> {
    result_seeds(strategies::mount_res(), |r| u32::from(r.procedure()), 6, 2)
}

#[test]
#[ignore = "writes fuzz/corpus; run by hand after changing the seeds"]
fn regenerate_seed_corpus() {
    for (target, seeds) in [
        ("nfs3_args", nfs3_args_seeds()),
        ("mount_args", mount_args_seeds()),
        ("nfs3_res", nfs3_res_seeds()),
        ("mount_res", mount_res_seeds()),
    ] {
        let dir = replay::corpus_dir(target);
        fs::create_dir_all(&dir).unwrap();
        for (name, data) in seeds {
            fs::write(dir.join(format!("seed-{name}")), data).unwrap();
        }
    }
}

/// The valid seeds cover all 22 procedures and decode to what was encoded; the
/// malformed ones fail to decode (spot checks, so a seed edit cannot silently
/// stop covering its case).
#[test]
fn seeds_are_what_their_names_say() {
    let valid = valid_args();
    let mut seen = [false; 22];
    for (_, args) in &valid {
        seen[u32::from(args.procedure()) as usize] = true;
    }
    assert_eq!(seen, [true; 22]);
    let seeds = nfs3_args_seeds();
    let decode = |name: &str| {
        let (_, data) = seeds.iter().find(|(n, _)| n == name).unwrap();
        let proc_ = NfsProc3::ALL[usize::from(data[0]) % 22];
        NfsArgs::decode(proc_, &mut Reader::new(&data[1..])).map(|a| a.procedure())
    };
    for (name, args) in &valid {
        assert_eq!(decode(name), Ok(args.procedure()), "{name}");
    }
    assert_eq!(decode("proc-wraps-22"), Ok(NfsProc3::Getattr));
    for bad in [
        "getattr-fh-65",
        "lookup-name-huge",
        "lookup-name-1025",
        "write-data-huge",
        "create-bad-mode",
        "setattr-bad-time-how",
        "mknod-bad-type",
        "write-filesync-truncated-1",
        "readdirplus-truncated-half",
    ] {
        assert!(decode(bad).is_err(), "{bad} decodes");
    }
    assert!(
        decode("access-bad-padding").is_ok(),
        "padding is not checked"
    );
    for (name, data) in seeds.iter().chain(&mount_args_seeds()) {
        // Every seed runs through both targets without panicking.
        fuzzing::nfs3_args(data);
        fuzzing::mount_args(data);
        fuzzing::nfs3_res(data);
        fuzzing::mount_res(data);
        let _ = name;
    }
}

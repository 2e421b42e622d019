//! Replays every input in `fuzz/corpus/<target>/` through its fuzz target, so CI
//! exercises all four targets on every change without nightly or cargo-fuzz, then
//! runs each target on mutated corpus inputs (`FUZZ_CASES` per target, 512 by
//! default; proptest shrinks a failure to the fewest edits).
//!
//! `regenerate_seed_corpus` (ignored) rewrites the hand-made `seed-*` inputs.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a panic is the failure report"
)]

#[path = "../../../fuzz/replay.rs"]
mod replay;

use std::fs;
use std::sync::LazyLock;

use proptest::prelude::*;
use proptest::sample::Index;
use rnfs_rpc::fuzzing::fuzz_dispatcher;
use rnfs_rpc::{encode_call, encode_record, Auth, AuthSys, DispatchOutcome, Gids};

#[test]
fn xdr_reader_corpus() {
    assert!(replay::replay("xdr_reader", rnfs_xdr::fuzzing::xdr_reader) >= 10);
}

#[test]
fn record_deframer_corpus() {
    assert!(replay::replay("record_deframer", rnfs_rpc::fuzzing::record_deframer) >= 10);
}

#[test]
fn rpc_call_corpus() {
    assert!(replay::replay("rpc_call", rnfs_rpc::fuzzing::rpc_call) >= 10);
}

#[test]
fn rpc_reply_corpus() {
    assert!(replay::replay("rpc_reply", rnfs_rpc::fuzzing::rpc_reply) >= 10);
}

/// Every target's corpus, loaded once for the mutated-input tests.
static CORPORA: LazyLock<[Vec<Vec<u8>>; 4]> = LazyLock::new(|| {
    ["xdr_reader", "record_deframer", "rpc_call", "rpc_reply"].map(replay::corpus)
});

proptest! {
    #![proptest_config(ProptestConfig::with_cases(replay::fuzz_cases()))]

    #[test]
    fn mutated_xdr_reader_inputs(pick in any::<Index>(), other in any::<Index>(), e in replay::edits()) {
        replay::check_mutated(&CORPORA[0], rnfs_xdr::fuzzing::xdr_reader, pick, other, &e);
    }

    #[test]
    fn mutated_record_streams(pick in any::<Index>(), other in any::<Index>(), e in replay::edits()) {
        replay::check_mutated(&CORPORA[1], rnfs_rpc::fuzzing::record_deframer, pick, other, &e);
    }

    #[test]
    fn mutated_calls(pick in any::<Index>(), other in any::<Index>(), e in replay::edits()) {
        replay::check_mutated(&CORPORA[2], rnfs_rpc::fuzzing::rpc_call, pick, other, &e);
    }

    #[test]
    fn mutated_replies(pick in any::<Index>(), other in any::<Index>(), e in replay::edits()) {
        replay::check_mutated(&CORPORA[3], rnfs_rpc::fuzzing::rpc_reply, pick, other, &e);
    }
}

fn be(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// A call record without its mark.
fn call(xid: u32, prog: u32, vers: u32, proc_: u32, auth: &Auth<'_>, args: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_call(xid, prog, vers, proc_, auth, args, &mut out);
    out.split_off(4)
}

fn auth_sys<'a>(name: &'a [u8], gids: &[u32]) -> Auth<'a> {
    Auth::Sys(AuthSys {
        stamp: 0x4a5b_6c7d,
        machine_name: name,
        uid: 1000,
        gid: 100,
        gids: Gids::new(gids).unwrap(),
    })
}

fn xdr_reader_seeds() -> Vec<(&'static str, Vec<u8>)> {
    // RFC 4506 §7 `file` example.
    let file = be(&[
        9,
        0x7369_6c6c,
        0x7970_726f,
        0x6700_0000,
        2,
        4,
        0x6c69_7370,
        4,
        0x6a6f_686e,
        6,
        0x2871_7569,
        0x7429_0000,
    ]);
    let script = |ops: &[u8], data: &[u8]| cat(&[&[ops.len() as u8], ops, data]);
    vec![
        ("empty", vec![]),
        (
            "rfc4506-file",
            script(&[0xF7, 0x0C, 0x77, 0x47, 0x26, 0x0D], &file),
        ),
        (
            "integers",
            script(
                &[0x00, 0x01, 0x02, 0x03, 0x04, 0x04],
                &be(&[1, 0xFFFF_FFFF, 0, 2, 0x8000_0000, 0, 1, 0]),
            ),
        ),
        ("bad-bool", script(&[0x04], &be(&[2]))),
        (
            "fixed-opaque",
            script(
                &[0x05, 0x15, 0x25, 0x35, 0x45],
                &be(&[0x6100_0000, 0x6162_0000, 0x6162_6300, 0x6162_6364]),
            ),
        ),
        (
            "opaque-padding",
            script(
                &[0x16, 0x16, 0x16],
                &be(&[1, 0x61ff_ffff, 3, 0x6162_6300, 4, 0x6162_6364]),
            ),
        ),
        ("opaque-huge-len", script(&[0xF6], &be(&[0xFFFF_FFFF, 0]))),
        ("string-over-max", script(&[0x27], &be(&[3, 0x6162_6300]))),
        ("array", script(&[0x38, 0x3A], &be(&[3, 1, 2, 3, 2, 7, 8]))),
        (
            "array-huge-count",
            script(&[0xF8, 0xFA], &be(&[0xFFFF_FFFF, 0])),
        ),
        ("optional", script(&[0x09, 0x09, 0x09], &be(&[1, 42, 0, 5]))),
        ("sub-finish", script(&[0x2B, 0x0D, 0x0E], &be(&[1, 2, 3]))),
        ("truncated", script(&[0x02], &[0, 0, 0, 1, 0])),
        ("trailing", script(&[0x00, 0x0D], &[0, 0, 0, 1, 9])),
    ]
}

fn framed(records: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        encode_record(r, &mut out);
    }
    out
}

fn record_deframer_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let null = call(1, 100_003, 3, 0, &Auth::None, &[]);
    let fragments = be(&[3, 0x6162_6300, 0x8000_0002, 0x6465_0000]);
    let stream = |seed: u8, bytes: &[u8]| cat(&[&[seed], bytes]);
    vec![
        ("empty", vec![]),
        ("one-record", stream(1, &framed(&[b"hello"]))),
        ("null-call", stream(7, &framed(&[&null]))),
        ("two-records", stream(3, &framed(&[b"abc", b"defgh"]))),
        ("empty-record", stream(5, &be(&[0x8000_0000]))),
        (
            "multi-fragment",
            stream(9, &cat(&[&be(&[3]), b"abc", &be(&[0, 0x8000_0002]), b"de"])),
        ),
        ("fragments-padded", stream(2, &fragments)),
        ("empty-fragment-flood", stream(4, &be(&[0; 1100]))),
        ("oversized-mark", stream(6, &be(&[0x8000_1001]))),
        (
            "oversized-accumulated",
            stream(8, &cat(&[&be(&[4000]), &[0; 4000], &be(&[0x8000_0100])])),
        ),
        ("max-record", stream(11, &framed(&[&[0x5A; 4096]]))),
        ("max-fragment-mark", stream(13, &be(&[0xFFFF_FFFF]))),
        ("truncated-mark", stream(15, &[0x80, 0])),
        ("truncated-body", stream(17, &be(&[0x8000_0010, 1, 2]))),
    ]
}

fn rpc_call_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let none = Auth::None;
    let sys = auth_sys(b"client", &[100, 10]);
    let mut gss = call(1, 100_003, 3, 0, &none, &[]);
    gss[27] = 6; // cred flavor RPCSEC_GSS
    let mut bad_verf = call(1, 100_003, 3, 0, &none, &[]);
    bad_verf[35] = 1; // verifier flavor AUTH_SYS
    let mut big_cred = be(&[1, 0, 2, 100_003, 3, 0, 1, 404]);
    big_cred.extend_from_slice(&[0; 404]);
    big_cred.extend_from_slice(&be(&[0, 0]));
    let null = call(9, 100_003, 3, 0, &none, &[]);
    vec![
        ("empty", vec![]),
        ("null-auth-none", null.clone()),
        ("null-auth-sys", call(2, 100_003, 3, 0, &sys, &[])),
        ("echo", call(3, 100_003, 3, 1, &sys, &be(&[3, 0x6162_6300]))),
        ("echo-garbage", call(4, 100_003, 3, 1, &none, &be(&[65]))),
        ("system-err", call(5, 100_003, 3, 2, &none, &[])),
        ("proc-unavail", call(6, 100_003, 3, 99, &none, &[])),
        ("prog-unavail", call(7, 100_021, 4, 0, &none, &[])),
        ("prog-mismatch", call(8, 100_005, 2, 0, &none, &[])),
        ("mount-v3", call(8, 100_005, 3, 0, &none, &[])),
        ("rpc-mismatch", be(&[10, 0, 3])),
        ("reply", be(&[11, 1, 0, 0, 0, 0])),
        ("truncated-header", null[..16].to_vec()),
        ("truncated-xid", null[..3].to_vec()),
        (
            "auth-sys-17-gids",
            call(12, 100_003, 3, 0, &auth_sys(b"c", &[]), &[]),
        ),
        (
            "auth-sys-long-name",
            call(13, 100_003, 3, 0, &auth_sys(&[b'm'; 255], &[1; 16]), &[]),
        ),
        ("auth-rpcsec-gss", gss),
        ("bad-verifier", bad_verf),
        ("cred-over-400", big_cred),
    ]
    .into_iter()
    .map(|(name, mut data)| {
        if name == "auth-sys-17-gids" {
            // 17 gids: patch the count, add the gids and grow the body length.
            data[55] = 17;
            data.splice(56..56, be(&[1; 17]));
            data[31] += 68;
        }
        (name, data)
    })
    .collect()
}

/// What a client may get back: the fuzz dispatcher's reply to every call seed
/// (each status), and hand-made replies it never sends.
fn rpc_reply_seeds() -> Vec<(String, Vec<u8>)> {
    let d = fuzz_dispatcher();
    let mut seeds: Vec<(String, Vec<u8>)> = rpc_call_seeds()
        .into_iter()
        .filter_map(|(name, call)| {
            let mut out = Vec::new();
            match d.dispatch(&call, None, &mut out) {
                DispatchOutcome::Replied { .. } => Some((format!("to-{name}"), out.split_off(4))),
                _ => None,
            }
        })
        .collect();
    let mut verf_sys = be(&[20, 1, 0, 1, 5]);
    verf_sys.extend_from_slice(b"abcde\0\0\0");
    verf_sys.extend_from_slice(&be(&[0, 7, 8]));
    let mut verf_401 = be(&[21, 1, 0, 0, 401]);
    verf_401.extend_from_slice(&[0; 404]);
    verf_401.extend_from_slice(&be(&[0]));
    for (name, data) in [
        ("accepted-verifier-5-bytes", verf_sys),
        ("accepted-verifier-401-bytes", verf_401),
        ("prog-mismatch-inverted", be(&[22, 1, 0, 0, 0, 2, 9, 1])),
        ("denied-auth-tooweak", be(&[23, 1, 1, 1, 5])),
        ("denied-auth-unknown-stat", be(&[24, 1, 1, 1, 99])),
        ("denied-rpc-mismatch", be(&[25, 1, 1, 0, 2, 2])),
        ("bad-reply-stat", be(&[26, 1, 2])),
        ("bad-accept-stat", be(&[27, 1, 0, 0, 0, 6])),
        ("bad-reject-stat", be(&[28, 1, 1, 2])),
        ("a-call", be(&[29, 0, 2, 100_003, 3, 0, 0, 0, 0, 0])),
        ("truncated-verifier", be(&[30, 1, 0, 0, 8, 1])),
        ("empty", Vec::new()),
    ] {
        seeds.push((name.to_owned(), data));
    }
    seeds
}

#[test]
#[ignore = "writes fuzz/corpus; run by hand after changing the seeds"]
fn regenerate_seed_corpus() {
    let named = |seeds: Vec<(&str, Vec<u8>)>| -> Vec<(String, Vec<u8>)> {
        seeds.into_iter().map(|(n, d)| (n.to_owned(), d)).collect()
    };
    for (target, seeds) in [
        ("xdr_reader", named(xdr_reader_seeds())),
        ("record_deframer", named(record_deframer_seeds())),
        ("rpc_call", named(rpc_call_seeds())),
        ("rpc_reply", rpc_reply_seeds()),
    ] {
        let dir = replay::corpus_dir(target);
        fs::create_dir_all(&dir).unwrap();
        for (name, data) in seeds {
            fs::write(dir.join(format!("seed-{name}")), data).unwrap();
        }
    }
}

/// The reply seeds decode to what their names say.
#[test]
fn reply_seeds_are_what_their_names_say() {
    use rnfs_rpc::{decode_reply, AuthStat, ReplyStatus};
    let seeds = rpc_reply_seeds();
    let decode = |name: &str| {
        let (_, data) = seeds.iter().find(|(n, _)| n == name).unwrap();
        decode_reply(data).map(|r| r.header.status)
    };
    assert_eq!(decode("to-null-auth-sys"), Ok(ReplyStatus::Success));
    assert_eq!(decode("to-proc-unavail"), Ok(ReplyStatus::ProcUnavail));
    assert_eq!(
        decode("to-auth-sys-17-gids"),
        Ok(ReplyStatus::AuthError(AuthStat::BadCred))
    );
    assert_eq!(
        decode("accepted-verifier-5-bytes"),
        Ok(ReplyStatus::Success)
    );
    assert_eq!(
        decode("prog-mismatch-inverted"),
        Ok(ReplyStatus::ProgMismatch { low: 9, high: 1 })
    );
    assert_eq!(
        decode("denied-rpc-mismatch"),
        Ok(ReplyStatus::RpcMismatch { low: 2, high: 2 })
    );
    for bad in [
        "accepted-verifier-401-bytes",
        "denied-auth-unknown-stat",
        "bad-reply-stat",
        "bad-accept-stat",
        "bad-reject-stat",
        "a-call",
        "truncated-verifier",
        "empty",
    ] {
        assert!(decode(bad).is_err(), "{bad} decodes");
    }
}

/// The seeds are what their names say (spot checks, so a seed edit cannot silently
/// stop covering its case).
#[test]
fn seeds_reach_their_statuses() {
    use rnfs_rpc::{AuthStat, ReplyStatus};
    let d = fuzz_dispatcher();
    let status = |name: &str| {
        let (_, data) = rpc_call_seeds()
            .into_iter()
            .find(|(n, _)| *n == name)
            .unwrap();
        match d.dispatch(&data, None, &mut Vec::new()) {
            DispatchOutcome::Replied { status, .. } => Some(status),
            _ => None,
        }
    };
    assert_eq!(status("null-auth-sys"), Some(ReplyStatus::Success));
    assert_eq!(status("auth-sys-long-name"), Some(ReplyStatus::Success));
    assert_eq!(
        status("auth-sys-17-gids"),
        Some(ReplyStatus::AuthError(AuthStat::BadCred))
    );
    assert_eq!(
        status("auth-rpcsec-gss"),
        Some(ReplyStatus::AuthError(AuthStat::BadCred))
    );
    assert_eq!(
        status("cred-over-400"),
        Some(ReplyStatus::AuthError(AuthStat::BadCred))
    );
    assert_eq!(
        status("bad-verifier"),
        Some(ReplyStatus::AuthError(AuthStat::BadVerf))
    );
    assert_eq!(status("echo-garbage"), Some(ReplyStatus::GarbageArgs));
    assert_eq!(status("system-err"), Some(ReplyStatus::SystemErr));
    assert_eq!(
        status("prog-mismatch"),
        Some(ReplyStatus::ProgMismatch { low: 1, high: 3 })
    );
    assert_eq!(
        status("rpc-mismatch"),
        Some(ReplyStatus::RpcMismatch { low: 2, high: 2 })
    );
    assert_eq!(status("truncated-header"), Some(ReplyStatus::GarbageArgs));
    assert_eq!(status("reply"), None);
}

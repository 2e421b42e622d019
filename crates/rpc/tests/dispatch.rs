//! Every reply the dispatcher can produce, from crafted call records.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a panic is the failure report"
)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use hex_literal::hex;
use rnfs_rpc::fuzzing::{fuzz_dispatcher, NullService};
use rnfs_rpc::{
    decode_reply, encode_call, Auth, AuthStat, AuthSys, CallContext, DispatchOutcome, Dispatcher,
    DropReason, Gids, Pace, RegisterError, ReplyStatus, Service, ServiceError,
};
use rnfs_xdr::{Reader, Writer};

const NFS: u32 = 100_003;
const MOUNT: u32 = 100_005;

/// A call record body (no record mark) with raw header fields
/// `[xid, rpcvers, prog, vers, proc]`.
fn call(
    [xid, rpcvers, prog, vers, proc_]: [u32; 5],
    cred: &[u8],
    verf: &[u8],
    args: &[u8],
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    for v in [xid, 0, rpcvers, prog, vers, proc_] {
        w.write_u32(v);
    }
    w.write_fixed_opaque(cred);
    w.write_fixed_opaque(verf);
    w.write_fixed_opaque(args);
    out
}

const AUTH_NONE: [u8; 8] = [0; 8];

fn null_call(xid: u32, prog: u32, vers: u32, proc_: u32) -> Vec<u8> {
    call([xid, 2, prog, vers, proc_], &AUTH_NONE, &AUTH_NONE, &[])
}

/// Dispatches and checks the record mark, the outcome and the decoded reply agree.
fn dispatch(d: &Dispatcher, record: &[u8]) -> (DispatchOutcome, Vec<u8>) {
    let mut out = Vec::new();
    let outcome = d.dispatch(record, None, &mut out);
    if let DispatchOutcome::Replied { xid, status, .. } = outcome {
        let mark = u32::from_be_bytes(out[..4].try_into().unwrap());
        assert_eq!(mark as usize, 0x8000_0000 | (out.len() - 4));
        let reply = decode_reply(&out[4..]).unwrap();
        assert_eq!((reply.header.xid, reply.header.status), (xid, status));
    } else {
        assert!(out.is_empty());
    }
    (outcome, out)
}

fn status(d: &Dispatcher, record: &[u8]) -> ReplyStatus {
    match dispatch(d, record).0 {
        DispatchOutcome::Replied { status, .. } => status,
        other => panic!("dropped: {other:?}"),
    }
}

#[test]
fn null_call_gets_success_bytes() {
    let (outcome, out) = dispatch(&fuzz_dispatcher(), &null_call(0x1234_5678, NFS, 3, 0));
    assert_eq!(
        outcome,
        DispatchOutcome::Replied {
            xid: 0x1234_5678,
            prog: NFS,
            vers: 3,
            proc_: 0,
            status: ReplyStatus::Success
        }
    );
    assert_eq!(
        out,
        hex!("80000018 12345678 00000001 00000000 00000000 00000000 00000000")
    );
}

#[test]
fn results_follow_the_header() {
    let (_, out) = dispatch(
        &fuzz_dispatcher(),
        &call(
            [1, 2, NFS, 3, 1],
            &AUTH_NONE,
            &AUTH_NONE,
            &hex!("00000003 61626300"),
        ),
    );
    let reply = decode_reply(&out[4..]).unwrap();
    assert_eq!(reply.results, hex!("00000003 61626300"));
}

#[test]
fn prog_unavail() {
    assert_eq!(
        status(&fuzz_dispatcher(), &null_call(1, 100_021, 4, 0)),
        ReplyStatus::ProgUnavail
    );
}

#[test]
fn prog_mismatch_spans_all_registered_versions() {
    let d = fuzz_dispatcher();
    assert_eq!(status(&d, &null_call(1, MOUNT, 1, 0)), ReplyStatus::Success);
    assert_eq!(status(&d, &null_call(1, MOUNT, 3, 0)), ReplyStatus::Success);
    for vers in [0, 2, 4, u32::MAX] {
        assert_eq!(
            status(&d, &null_call(1, MOUNT, vers, 0)),
            ReplyStatus::ProgMismatch { low: 1, high: 3 }
        );
    }
    let (_, out) = dispatch(&d, &null_call(0xAB, NFS, 2, 0));
    assert_eq!(
        out,
        hex!("80000020 000000ab 00000001 00000000 00000000 00000000 00000002 00000003 00000003")
    );
}

#[test]
fn proc_unavail() {
    assert_eq!(
        status(&fuzz_dispatcher(), &null_call(1, NFS, 3, 99)),
        ReplyStatus::ProcUnavail
    );
}

#[test]
fn garbage_args() {
    let d = fuzz_dispatcher();
    let over_limit = hex!("00000041"); // opaque<64> of 65 bytes
    assert_eq!(
        status(
            &d,
            &call([1, 2, NFS, 3, 1], &AUTH_NONE, &AUTH_NONE, &over_limit)
        ),
        ReplyStatus::GarbageArgs
    );
    assert_eq!(
        status(&d, &null_call(1, NFS, 3, 1)),
        ReplyStatus::GarbageArgs
    );
}

/// The service wrote results before failing: they are rolled back.
#[test]
fn system_err_discards_partial_results() {
    let (_, out) = dispatch(&fuzz_dispatcher(), &null_call(5, NFS, 3, 2));
    assert_eq!(
        out,
        hex!("80000018 00000005 00000001 00000000 00000000 00000000 00000005")
    );
}

#[test]
fn rpc_mismatch_bytes() {
    let (outcome, out) = dispatch(
        &fuzz_dispatcher(),
        &call([7, 3, NFS, 3, 0], &AUTH_NONE, &AUTH_NONE, &[]),
    );
    assert_eq!(
        out,
        hex!("80000018 00000007 00000001 00000001 00000000 00000002 00000002")
    );
    // Nothing after rpcvers is decoded, so nothing is reported.
    assert!(matches!(
        outcome,
        DispatchOutcome::Replied {
            prog: 0,
            proc_: 0,
            ..
        }
    ));
    // rpcvers alone suffices.
    assert_eq!(
        status(&fuzz_dispatcher(), &hex!("00000007 00000000 00000001")),
        ReplyStatus::RpcMismatch { low: 2, high: 2 }
    );
}

fn auth_sys_cred(machine_name: &[u8], gids: &[u32]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut w = Writer::new(&mut body);
    w.write_u32(0);
    w.write_string(machine_name);
    w.write_u32(1000);
    w.write_u32(100);
    w.write_u32(gids.len() as u32);
    gids.iter().for_each(|g| w.write_u32(*g));
    let mut cred = Vec::new();
    let mut w = Writer::new(&mut cred);
    w.write_u32(1);
    w.write_opaque(&body);
    cred
}

fn auth_error(cred: &[u8], verf: &[u8]) -> ReplyStatus {
    status(
        &fuzz_dispatcher(),
        &call([3, 2, NFS, 3, 0], cred, verf, &[]),
    )
}

#[test]
fn auth_sys_is_accepted_up_to_its_limits() {
    assert_eq!(
        auth_error(&auth_sys_cred(&[b'h'; 255], &[1; 16]), &AUTH_NONE),
        ReplyStatus::Success
    );
}

#[test]
fn over_limit_credentials_get_auth_badcred() {
    let badcred = ReplyStatus::AuthError(AuthStat::BadCred);
    assert_eq!(
        auth_error(&auth_sys_cred(&[b'h'; 256], &[]), &AUTH_NONE),
        badcred
    );
    assert_eq!(
        auth_error(&auth_sys_cred(b"h", &[1; 17]), &AUTH_NONE),
        badcred
    );
    // Body over 400 bytes.
    let mut big = hex!("00000001 00000194").to_vec();
    big.resize(8 + 404, 0);
    assert_eq!(auth_error(&big, &AUTH_NONE), badcred);
    // Declared length past the end of the record.
    assert_eq!(auth_error(&hex!("00000001 00000190"), &[]), badcred);
    // Truncated inside the AUTH_SYS body.
    assert_eq!(
        auth_error(&hex!("00000001 00000004 00000000"), &AUTH_NONE),
        badcred
    );
    // AUTH_NONE with a body; unsupported flavors (Linux answers these with BADCRED too).
    assert_eq!(
        auth_error(&hex!("00000000 00000004 00000000"), &AUTH_NONE),
        badcred
    );
    for flavor in [2u32, 3, 6, 0xFFFF_FFFF] {
        let mut cred = flavor.to_be_bytes().to_vec();
        cred.extend_from_slice(&[0; 4]);
        assert_eq!(auth_error(&cred, &AUTH_NONE), badcred, "flavor {flavor}");
    }
    // The exact bytes of one such reply.
    let (_, out) = dispatch(
        &fuzz_dispatcher(),
        &call(
            [3, 2, NFS, 3, 0],
            &auth_sys_cred(b"h", &[1; 17]),
            &AUTH_NONE,
            &[],
        ),
    );
    assert_eq!(
        out,
        hex!("80000014 00000003 00000001 00000001 00000001 00000001")
    );
}

#[test]
fn bad_verifiers_get_auth_badverf() {
    let badverf = ReplyStatus::AuthError(AuthStat::BadVerf);
    assert_eq!(auth_error(&AUTH_NONE, &hex!("00000001 00000000")), badverf);
    assert_eq!(
        auth_error(&AUTH_NONE, &hex!("00000000 00000004 00000000")),
        badverf
    );
    assert_eq!(auth_error(&AUTH_NONE, &hex!("00000000")), badverf);
    assert_eq!(auth_error(&AUTH_NONE, &[]), badverf);
}

#[test]
fn truncated_header_gets_garbage_args() {
    let full = null_call(9, NFS, 3, 0);
    // Cut anywhere between rpcvers and the credential.
    for cut in 12..24 {
        assert_eq!(
            status(&fuzz_dispatcher(), &full[..cut]),
            ReplyStatus::GarbageArgs,
            "cut {cut}"
        );
    }
}

#[test]
fn unanswerable_messages_are_dropped() {
    let d = fuzz_dispatcher();
    for short in [&[][..], &[0; 4], &[0; 7]] {
        assert_eq!(
            dispatch(&d, short).0,
            DispatchOutcome::Dropped(DropReason::Truncated)
        );
    }
    let reply = hex!("00000001 00000001 00000000 00000000 00000000 00000000");
    assert_eq!(
        dispatch(&d, &reply).0,
        DispatchOutcome::Dropped(DropReason::NotACall { msg_type: 1 })
    );
    let garbage = hex!("00000001 00000007");
    assert_eq!(
        dispatch(&d, &garbage).0,
        DispatchOutcome::Dropped(DropReason::NotACall { msg_type: 7 })
    );
}

#[test]
fn replies_append_to_existing_output() {
    let d = fuzz_dispatcher();
    let mut out = b"previous".to_vec();
    d.dispatch(&null_call(1, NFS, 3, 0), None, &mut out);
    d.dispatch(&hex!("00000002 00000001"), None, &mut out); // dropped
    d.dispatch(&null_call(3, NFS, 3, 2), None, &mut out); // rolled back
    assert_eq!(&out[..8], b"previous");
    assert_eq!(out.len(), 8 + 28 + 28);
    assert_eq!(&out[8 + 4..8 + 8], hex!("00000001"));
    assert_eq!(&out[8 + 28 + 4..8 + 28 + 8], hex!("00000003"));
}

#[derive(Debug, Default)]
struct Recorder {
    seen: Mutex<Vec<String>>,
}

impl Service for Recorder {
    fn program(&self) -> u32 {
        NFS
    }
    fn versions(&self) -> (u32, u32) {
        (2, 3)
    }
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn call(
        &self,
        ctx: &CallContext<'_>,
        args: &mut Reader<'_>,
        reply: &mut Writer<'_>,
    ) -> Result<(), ServiceError> {
        let auth = match ctx.auth {
            Auth::Sys(AuthSys { uid, gids, .. }) => format!("sys {uid} {:?}", &**gids),
            other => format!("{other:?}"),
        };
        self.seen.lock().unwrap().push(format!(
            "{} {} {} {} {auth} {:?} {}",
            ctx.xid,
            ctx.prog,
            ctx.vers,
            ctx.proc_,
            ctx.peer,
            args.remaining()
        ));
        match ctx.proc_ {
            0 => Ok(()),
            1 => Err(ServiceError::AuthError(AuthStat::TooWeak)),
            _ => {
                reply.write_u32(1);
                args.read_u64()?; // DecodeError -> GARBAGE_ARGS
                Ok(())
            }
        }
    }
}

#[test]
fn services_see_the_call_context() {
    let recorder = Arc::new(Recorder::default());
    let mut d = Dispatcher::new();
    d.register(recorder.clone()).unwrap();
    let mut out = Vec::new();
    let peer: SocketAddr = "192.0.2.1:700".parse().unwrap();
    let mut record = Vec::new();
    encode_call(
        42,
        NFS,
        2,
        0,
        &Auth::Sys(AuthSys {
            stamp: 0,
            machine_name: b"h",
            uid: 1000,
            gid: 100,
            gids: Gids::new(&[4, 5]).unwrap(),
        }),
        &[0; 8],
        &mut record,
    );
    let outcome = d.dispatch(&record[4..], Some(peer), &mut out);
    assert!(matches!(
        outcome,
        DispatchOutcome::Replied {
            status: ReplyStatus::Success,
            vers: 2,
            ..
        }
    ));
    assert_eq!(
        status(&d, &null_call(43, NFS, 3, 1)),
        ReplyStatus::AuthError(AuthStat::TooWeak)
    );
    assert_eq!(
        status(&d, &null_call(44, NFS, 3, 2)),
        ReplyStatus::GarbageArgs
    );
    assert_eq!(
        *recorder.seen.lock().unwrap(),
        [
            "42 100003 2 0 sys 1000 [4, 5] Some(192.0.2.1:700) 8",
            "43 100003 3 1 None None 0",
            "44 100003 3 2 None None 0",
        ]
    );
}

#[test]
fn quick_calls_are_those_their_service_names() {
    #[derive(Debug)]
    struct QuickOddProcs;
    impl Service for QuickOddProcs {
        fn program(&self) -> u32 {
            NFS
        }
        fn versions(&self) -> (u32, u32) {
            (3, 3)
        }
        fn name(&self) -> &'static str {
            "quick-odd"
        }
        fn call(
            &self,
            _: &CallContext<'_>,
            _: &mut Reader<'_>,
            _: &mut Writer<'_>,
        ) -> Result<(), ServiceError> {
            Ok(())
        }
        fn is_quick(&self, vers: u32, proc_: u32) -> bool {
            vers == 3 && proc_ % 2 == 1
        }
        fn is_quick_among_peers(&self, vers: u32, proc_: u32) -> bool {
            vers == 3 && (proc_ == 4 || proc_ == 5)
        }
    }
    let mut d = Dispatcher::new();
    d.register(Arc::new(QuickOddProcs)).unwrap();
    d.register(Arc::new(NullService)).unwrap_err(); // same program and version
    assert!(d.is_quick_call(&null_call(1, NFS, 3, 1)));
    assert!(
        d.is_quick_call(&null_call(1, NFS, 3, 7)[..24]),
        "24 bytes suffice"
    );
    assert!(
        !d.is_quick_call(&null_call(1, NFS, 3, 7)[..23]),
        "too short"
    );
    assert!(
        !d.is_quick_call(&null_call(1, NFS, 3, 2)),
        "the service says no"
    );
    assert!(
        !d.is_quick_call(&null_call(1, NFS, 2, 1)),
        "version not served"
    );
    assert!(
        !d.is_quick_call(&null_call(1, 100_005, 3, 1)),
        "program not served"
    );
    let mut reply = null_call(1, NFS, 3, 1);
    reply[4..8].copy_from_slice(&1u32.to_be_bytes());
    assert!(!d.is_quick_call(&reply), "not a CALL");
    let mut rpc_v3 = null_call(1, NFS, 3, 1);
    rpc_v3[8..12].copy_from_slice(&3u32.to_be_bytes());
    assert!(!d.is_quick_call(&rpc_v3), "not RPC version 2");
    // Paces: quick wins over quick among peers; anything unknown is slow.
    assert_eq!(d.call_pace(&null_call(1, NFS, 3, 1)), Pace::Quick);
    assert_eq!(d.call_pace(&null_call(1, NFS, 3, 4)), Pace::QuickAmongPeers);
    assert!(!d.is_quick_call(&null_call(1, NFS, 3, 4)), "peers only");
    assert_eq!(d.call_pace(&null_call(1, NFS, 3, 5)), Pace::Quick);
    assert_eq!(d.call_pace(&null_call(1, NFS, 3, 2)), Pace::Slow);
    assert_eq!(d.call_pace(&null_call(1, NFS, 3, 4)[..23]), Pace::Slow);
    assert_eq!(d.call_pace(&null_call(1, 100_005, 3, 4)), Pace::Slow);
    assert_eq!(d.pace(NFS, 3, 4), Pace::QuickAmongPeers);
    assert_eq!(d.pace(NFS, 2, 4), Pace::Slow);
    // A service that says nothing is never quick.
    let mut plain = Dispatcher::new();
    plain.register(Arc::new(NullService)).unwrap();
    assert!(!plain.is_quick_call(&null_call(1, NFS, 3, 0)));
    assert_eq!(plain.call_pace(&null_call(1, NFS, 3, 0)), Pace::Slow);
}

#[test]
fn registration_rejects_overlaps_and_empty_ranges() {
    #[derive(Debug)]
    struct Versions(u32, u32);
    impl Service for Versions {
        fn program(&self) -> u32 {
            NFS
        }
        fn versions(&self) -> (u32, u32) {
            (self.0, self.1)
        }
        fn name(&self) -> &'static str {
            "versions"
        }
        fn call(
            &self,
            _: &CallContext<'_>,
            _: &mut Reader<'_>,
            _: &mut Writer<'_>,
        ) -> Result<(), ServiceError> {
            Ok(())
        }
    }
    let mut d = Dispatcher::new();
    d.register(Arc::new(NullService)).unwrap(); // v3
    assert!(matches!(
        d.register(Arc::new(Versions(2, 3))),
        Err(RegisterError::Overlap {
            existing: "fuzz-null",
            ..
        })
    ));
    assert!(matches!(
        d.register(Arc::new(Versions(4, 2))),
        Err(RegisterError::EmptyVersions { .. })
    ));
    d.register(Arc::new(Versions(4, 4))).unwrap();
    d.register(Arc::new(Versions(2, 2))).unwrap();
    assert_eq!(
        status(&d, &null_call(1, NFS, 5, 0)),
        ReplyStatus::ProgMismatch { low: 2, high: 4 }
    );
    assert_eq!(status(&d, &null_call(1, NFS, 4, 0)), ReplyStatus::Success);
    assert!(format!("{d:?}").contains("fuzz-null 100003v3..=3"));
}

#[test]
fn dispatcher_is_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Dispatcher>();
}

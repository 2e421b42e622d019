//! RPC message and credential encodings checked against hand-assembled RFC 5531 bytes.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a panic is the failure report"
)]

use hex_literal::hex;
use rnfs_rpc::{
    decode_call, decode_reply, encode_call, Auth, AuthError, AuthFlavor, AuthStat, AuthSys,
    CallHeader, Gids, OpaqueAuth, ReplyHeader, ReplyStatus, RpcError,
};
use rnfs_xdr::{Decode, DecodeError, Encode, Reader, Writer};

const NFS_PROGRAM: u32 = 100_003;

/// NULL call, xid 0x12345678, NFS v3, AUTH_NONE credential and verifier.
const NULL_CALL_AUTH_NONE: [u8; 44] = hex!(
    "80000028"          // record mark: last fragment, 40 bytes
    "12345678"          // xid
    "00000000"          // msg_type CALL
    "00000002"          // rpcvers
    "000186a3"          // prog 100003
    "00000003"          // vers 3
    "00000000"          // proc NULL
    "00000000 00000000" // cred AUTH_NONE, empty
    "00000000 00000000" // verf AUTH_NONE, empty
);

/// The AUTH_SYS credential body used below: stamp, "client", uid 1000, gid 100,
/// groups {100, 10}.
const AUTH_SYS_BODY: [u8; 36] = hex!(
    "4a5b6c7d"          // stamp
    "00000006 636c6965 6e740000" // machinename "client" + 2 bytes fill
    "000003e8"          // uid 1000
    "00000064"          // gid 100
    "00000002 00000064 0000000a" // gids<16> = {100, 10}
);

/// NULL call as above with that AUTH_SYS credential.
const NULL_CALL_AUTH_SYS: [u8; 80] = hex!(
    "8000004c"
    "12345678 00000000 00000002 000186a3 00000003 00000000"
    "00000001 00000024" // cred AUTH_SYS, 36 bytes
    "4a5b6c7d 00000006 636c6965 6e740000 000003e8 00000064 00000002 00000064 0000000a"
    "00000000 00000000"
);

fn auth_sys() -> AuthSys<'static> {
    AuthSys {
        stamp: 0x4a5b_6c7d,
        machine_name: b"client",
        uid: 1000,
        gid: 100,
        gids: Gids::new(&[100, 10]).unwrap(),
    }
}

#[test]
fn null_call_auth_none_bytes() {
    let mut out = Vec::new();
    encode_call(0x1234_5678, NFS_PROGRAM, 3, 0, &Auth::None, &[], &mut out);
    assert_eq!(out, NULL_CALL_AUTH_NONE);

    let mut r = Reader::new(&NULL_CALL_AUTH_NONE[4..]);
    let call = decode_call(&mut r).unwrap();
    assert_eq!(
        call,
        CallHeader {
            xid: 0x1234_5678,
            rpcvers: 2,
            prog: NFS_PROGRAM,
            vers: 3,
            proc_: 0,
            cred: OpaqueAuth::NONE,
            verf: OpaqueAuth::NONE,
        }
    );
    assert_eq!(r.remaining(), 0);
    assert_eq!(Auth::from_call(&call.cred, &call.verf), Ok(Auth::None));

    let mut again = Vec::new();
    call.encode(&mut Writer::new(&mut again));
    assert_eq!(again, NULL_CALL_AUTH_NONE[4..]);
}

#[test]
fn null_call_auth_sys_bytes() {
    let mut out = Vec::new();
    encode_call(
        0x1234_5678,
        NFS_PROGRAM,
        3,
        0,
        &Auth::Sys(auth_sys()),
        &[],
        &mut out,
    );
    assert_eq!(out, NULL_CALL_AUTH_SYS);

    let call = decode_call(&mut Reader::new(&NULL_CALL_AUTH_SYS[4..])).unwrap();
    assert_eq!(call.cred.flavor, AuthFlavor::SYS);
    assert_eq!(call.cred.body, AUTH_SYS_BODY);
    let auth = Auth::from_call(&call.cred, &call.verf).unwrap();
    assert_eq!(auth, Auth::Sys(auth_sys()));
    let Auth::Sys(sys) = auth else { unreachable!() };
    assert_eq!(&*sys.gids, &[100, 10]);
}

#[test]
fn call_arguments_follow_the_header() {
    let mut out = Vec::new();
    encode_call(
        7,
        NFS_PROGRAM,
        3,
        1,
        &Auth::None,
        &hex!("0000002a"),
        &mut out,
    );
    let mut r = Reader::new(&out[4..]);
    let call = decode_call(&mut r).unwrap();
    assert_eq!((call.xid, call.proc_), (7, 1));
    assert_eq!(r.read_u32(), Ok(42));
}

#[test]
fn decode_call_rejects_a_reply() {
    let err = decode_call(&mut Reader::new(&hex!("00000001 00000001"))).unwrap_err();
    assert_eq!(
        err,
        RpcError::Decode(DecodeError::BadDiscriminant {
            type_name: "msg_type",
            value: 1
        })
    );
}

/// Each reply is checked both ways: encode == bytes and decode(bytes) == header.
fn check_reply(header: ReplyHeader<'_>, wire: &[u8]) {
    let mut out = Vec::new();
    header.encode(&mut Writer::new(&mut out));
    assert_eq!(out, wire, "{header:?}");
    let reply = decode_reply(wire).unwrap();
    assert_eq!(reply.header, header);
    assert!(reply.results.is_empty());
    assert_eq!(reply.results_offset, wire.len());
}

#[test]
fn accepted_reply_bytes() {
    let xid = 0x0102_0304;
    let accepted = |status| ReplyHeader {
        xid,
        verf: OpaqueAuth::NONE,
        status,
    };
    check_reply(
        accepted(ReplyStatus::Success),
        &hex!("01020304 00000001 00000000 00000000 00000000 00000000"),
    );
    check_reply(
        accepted(ReplyStatus::ProgUnavail),
        &hex!("01020304 00000001 00000000 00000000 00000000 00000001"),
    );
    check_reply(
        accepted(ReplyStatus::ProgMismatch { low: 2, high: 3 }),
        &hex!("01020304 00000001 00000000 00000000 00000000 00000002 00000002 00000003"),
    );
    check_reply(
        accepted(ReplyStatus::ProcUnavail),
        &hex!("01020304 00000001 00000000 00000000 00000000 00000003"),
    );
    check_reply(
        accepted(ReplyStatus::GarbageArgs),
        &hex!("01020304 00000001 00000000 00000000 00000000 00000004"),
    );
    check_reply(
        accepted(ReplyStatus::SystemErr),
        &hex!("01020304 00000001 00000000 00000000 00000000 00000005"),
    );
}

#[test]
fn denied_reply_bytes() {
    let denied = |status| ReplyHeader {
        xid: 9,
        verf: OpaqueAuth::NONE,
        status,
    };
    check_reply(
        denied(ReplyStatus::RpcMismatch { low: 2, high: 2 }),
        &hex!("00000009 00000001 00000001 00000000 00000002 00000002"),
    );
    check_reply(
        denied(ReplyStatus::AuthError(AuthStat::BadCred)),
        &hex!("00000009 00000001 00000001 00000001 00000001"),
    );
    check_reply(
        denied(ReplyStatus::AuthError(AuthStat::TooWeak)),
        &hex!("00000009 00000001 00000001 00000001 00000005"),
    );
}

#[test]
fn all_auth_stat_values_round_trip() {
    for v in 0..=14 {
        let stat = AuthStat::from_u32(v).unwrap();
        let mut out = Vec::new();
        stat.encode(&mut Writer::new(&mut out));
        assert_eq!(out, v.to_be_bytes());
        assert_eq!(AuthStat::decode(&mut Reader::new(&out)), Ok(stat));
    }
    assert_eq!(AuthStat::from_u32(15), None);
    assert_eq!(
        AuthStat::decode(&mut Reader::new(&hex!("0000000f"))),
        Err(DecodeError::BadDiscriminant {
            type_name: "auth_stat",
            value: 15
        })
    );
}

#[test]
fn reply_with_results_and_a_nonempty_verifier() {
    let wire = hex!("00000005 00000001 00000000 00000001 00000004 61626364 00000000 0000002a");
    let reply = decode_reply(&wire).unwrap();
    assert_eq!(reply.header.verf.flavor, AuthFlavor::SYS);
    assert_eq!(reply.header.verf.body, b"abcd");
    assert_eq!(reply.header.status, ReplyStatus::Success);
    assert_eq!(reply.results, hex!("0000002a"));
    assert_eq!(reply.results_offset, 28);
}

#[test]
fn malformed_replies() {
    assert_eq!(
        decode_reply(&hex!("00000005 00000000")),
        Err(RpcError::UnexpectedMsgType {
            expected: 1,
            got: 0
        })
    );
    for (wire, type_name, value) in [
        (&hex!("00000005 00000001 00000002")[..], "reply_stat", 2),
        (
            &hex!("00000005 00000001 00000000 00000000 00000000 00000006"),
            "accept_stat",
            6,
        ),
        (
            &hex!("00000005 00000001 00000001 00000002"),
            "reject_stat",
            2,
        ),
    ] {
        assert_eq!(
            decode_reply(wire),
            Err(RpcError::Decode(DecodeError::BadDiscriminant {
                type_name,
                value
            }))
        );
    }
    assert!(matches!(
        decode_reply(&hex!("00000005")),
        Err(RpcError::Decode(_))
    ));
    assert!(matches!(
        decode_reply(&hex!(
            "00000005 00000001 00000000 00000000 00000000 00000002 00000001"
        )),
        Err(RpcError::Decode(DecodeError::UnexpectedEnd { .. }))
    ));
}

fn cred_sys(body: &[u8]) -> OpaqueAuth<'_> {
    OpaqueAuth {
        flavor: AuthFlavor::SYS,
        body,
    }
}

fn auth_sys_body(machine_name: &[u8], gids: &[u32]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    w.write_u32(1);
    w.write_string(machine_name);
    w.write_u32(0);
    w.write_u32(0);
    w.write_u32(gids.len() as u32);
    gids.iter().for_each(|g| w.write_u32(*g));
    out
}

#[test]
fn auth_sys_limits() {
    let none = OpaqueAuth::NONE;
    let ok = auth_sys_body(&[b'm'; 255], &[7; 16]);
    let Auth::Sys(sys) = Auth::from_call(&cred_sys(&ok), &none).unwrap() else {
        unreachable!()
    };
    assert_eq!(sys.machine_name.len(), 255);
    assert_eq!(sys.gids.len(), 16);

    let long_name = auth_sys_body(&[b'm'; 256], &[]);
    let err = Auth::from_call(&cred_sys(&long_name), &none).unwrap_err();
    assert_eq!(
        err,
        AuthError::BadCredential(DecodeError::LengthLimit {
            type_name: "authsys_parms",
            len: 256,
            max: 255
        })
    );
    assert_eq!(AuthStat::from(&err), AuthStat::BadCred);

    let many_gids = auth_sys_body(b"m", &[7; 17]);
    let err = Auth::from_call(&cred_sys(&many_gids), &none).unwrap_err();
    assert_eq!(
        err,
        AuthError::BadCredential(DecodeError::LengthLimit {
            type_name: "authsys_parms",
            len: 17,
            max: 16
        })
    );

    let mut trailing = ok.clone();
    trailing.extend_from_slice(&[0; 4]);
    assert_eq!(
        Auth::from_call(&cred_sys(&trailing), &none),
        Err(AuthError::BadCredential(DecodeError::TrailingData {
            type_name: "opaque_auth",
            len: 4
        }))
    );
    assert!(matches!(
        Auth::from_call(&cred_sys(&ok[..ok.len() - 1]), &none),
        Err(AuthError::BadCredential(DecodeError::UnexpectedEnd { .. }))
    ));
    assert_eq!(Gids::new(&[0; 17]), None);
}

#[test]
fn opaque_auth_body_is_at_most_400_bytes() {
    let mut wire = hex!("00000001 00000191").to_vec(); // 401
    wire.resize(8 + 404, 0);
    assert_eq!(
        OpaqueAuth::decode(&mut Reader::new(&wire)),
        Err(DecodeError::LengthLimit {
            type_name: "opaque_auth",
            len: 401,
            max: 400
        })
    );
    wire[7] = 0x90; // 400
    assert_eq!(
        OpaqueAuth::decode(&mut Reader::new(&wire))
            .unwrap()
            .body
            .len(),
        400
    );
}

#[test]
fn flavors_and_verifiers() {
    let none = OpaqueAuth::NONE;
    for flavor in [
        AuthFlavor::SHORT,
        AuthFlavor::DH,
        AuthFlavor::RPCSEC_GSS,
        AuthFlavor(390_003),
    ] {
        let cred = OpaqueAuth { flavor, body: &[] };
        let err = Auth::from_call(&cred, &none).unwrap_err();
        assert_eq!(err, AuthError::UnsupportedFlavor(flavor));
        assert_eq!(AuthStat::from(&err), AuthStat::BadCred);
    }
    let none_with_body = OpaqueAuth {
        flavor: AuthFlavor::NONE,
        body: &[0; 4],
    };
    assert_eq!(
        AuthStat::from(&Auth::from_call(&none_with_body, &none).unwrap_err()),
        AuthStat::BadCred
    );

    let sys_verf = cred_sys(&[]);
    let err = Auth::from_call(&none, &sys_verf).unwrap_err();
    assert_eq!(err, AuthError::UnsupportedVerifier(AuthFlavor::SYS));
    assert_eq!(AuthStat::from(&err), AuthStat::BadVerf);
    let err = Auth::from_call(&none, &none_with_body).unwrap_err();
    assert_eq!(AuthStat::from(&err), AuthStat::BadVerf);

    assert_eq!(format!("{:?}", AuthFlavor::RPCSEC_GSS), "RPCSEC_GSS");
    assert_eq!(format!("{}", AuthFlavor(77)), "AuthFlavor(77)");
    assert_eq!(Auth::None.flavor(), AuthFlavor::NONE);
}

#[test]
fn auth_encode_opaque_patches_the_length() {
    let mut out = Vec::new();
    Auth::Sys(auth_sys()).encode_opaque(&mut Writer::new(&mut out));
    assert_eq!(&out[..8], hex!("00000001 00000024"));
    assert_eq!(&out[8..], AUTH_SYS_BODY);
    let mut out = Vec::new();
    Auth::None.encode_opaque(&mut Writer::new(&mut out));
    assert_eq!(out, hex!("00000000 00000000"));
}

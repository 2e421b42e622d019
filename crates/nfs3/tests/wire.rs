//! Exact wire bytes checked against the RFC 1813 XDR layouts, and bad inputs.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use hex_literal::hex;
use rnfs_nfs3::*;
use rnfs_xdr::{Decode, DecodeError, Encode, Reader, Writer};

fn encode(v: &impl Encode) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode(&mut Writer::new(&mut out));
    out
}

fn decode<'a, T: Decode<'a>>(bytes: &'a [u8]) -> Result<T, DecodeError> {
    let mut r = Reader::new(bytes);
    let v = T::decode(&mut r)?;
    r.finish("test")?;
    Ok(v)
}

fn args(proc_: NfsProc3, bytes: &[u8]) -> Result<NfsArgs<'_>, DecodeError> {
    NfsArgs::decode(proc_, &mut Reader::new(bytes))
}

fn sample_fattr3() -> Fattr3 {
    Fattr3 {
        ftype: Ftype3::Reg,
        mode: 0o644,
        nlink: 1,
        uid: 1000,
        gid: 100,
        size: 0x1234,
        used: 0x2000,
        rdev: Specdata3::default(),
        fsid: 0x0102_0304_0506_0708,
        fileid: 42,
        atime: Nfstime3 {
            seconds: 0x5f00_0000,
            nseconds: 1,
        },
        mtime: Nfstime3 {
            seconds: 0x5f00_0001,
            nseconds: 2,
        },
        ctime: Nfstime3 {
            seconds: 0x5f00_0002,
            nseconds: 3,
        },
    }
}

const FATTR3_HEX: [u8; 84] = hex!(
    "00000001 000001a4 00000001 000003e8 00000064"
    "0000000000001234 0000000000002000"
    "00000000 00000000"
    "0102030405060708 000000000000002a"
    "5f000000 00000001 5f000001 00000002 5f000002 00000003"
);

#[test]
fn lookup3args_layout() {
    // diropargs3: nfs_fh3 (opaque<64>), filename3 (string, padded to 4).
    let wire = hex!("00000008 0102030405060708 00000003 666f6f00");
    let fh = [1, 2, 3, 4, 5, 6, 7, 8];
    let value = LookupArgs {
        what: DirOpArgs3 {
            dir: NfsFh3::new(&fh).unwrap(),
            name: b"foo",
        },
    };
    assert_eq!(encode(&value), wire);
    assert_eq!(decode::<LookupArgs<'_>>(&wire).unwrap(), value);
    assert_eq!(
        args(NfsProc3::Lookup, &wire).unwrap(),
        NfsArgs::Lookup(value)
    );
}

#[test]
fn getattr3res_layout() {
    let wire = [&hex!("00000000")[..], &FATTR3_HEX].concat();
    let value = GetattrRes::Ok(GetattrResOk {
        obj_attributes: sample_fattr3(),
    });
    assert_eq!(encode(&value), wire);
    assert_eq!(wire.len(), 4 + Fattr3::WIRE_SIZE);
    assert_eq!(decode::<GetattrRes>(&wire).unwrap(), value);

    // A failure carries only the status (void resfail).
    let fail = GetattrRes::Fail {
        status: Nfsstat3::Stale,
    };
    assert_eq!(encode(&fail), hex!("00000046"));
    assert_eq!(decode::<GetattrRes>(&hex!("00000046")).unwrap(), fail);
    assert_eq!(fail.status(), Nfsstat3::Stale);
}

#[test]
fn write3args_layout_with_padding() {
    let wire = hex!(
        "00000004 deadbeef"        // file
        "00000001 00000000"        // offset 2^32
        "00000005"                 // count
        "00000002"                 // FILE_SYNC
        "00000005 68656c6c 6f000000" // data "hello" + 3 bytes padding
    );
    let fh = hex!("deadbeef");
    let value = WriteArgs {
        file: NfsFh3::new(&fh).unwrap(),
        offset: 1 << 32,
        count: 5,
        stable: StableHow::FileSync,
        data: b"hello",
    };
    assert_eq!(encode(&value), wire);
    assert_eq!(decode::<WriteArgs<'_>>(&wire).unwrap(), value);
    // Padding is accepted whatever its value (as Linux does).
    let mut dirty = wire;
    dirty[wire.len() - 1] = 0xff;
    assert_eq!(decode::<WriteArgs<'_>>(&dirty).unwrap(), value);
}

#[test]
fn lookup3res_and_wcc_layouts() {
    let fh = FileHandle::new(&hex!("aabbccdd")).unwrap();
    let ok = LookupRes::Ok(LookupResOk {
        object: fh,
        obj_attributes: Some(sample_fattr3()),
        dir_attributes: None,
    });
    let wire = [
        &hex!("00000000 00000004 aabbccdd 00000001")[..],
        &FATTR3_HEX,
        &hex!("00000000"),
    ]
    .concat();
    assert_eq!(encode(&ok), wire);
    assert_eq!(decode::<LookupRes>(&wire).unwrap(), ok);

    // REMOVE3res failure: status, wcc_data { pre_op_attr, post_op_attr }.
    let fail = RemoveRes::Fail {
        status: Nfsstat3::Notempty,
        dir_wcc: WccData {
            before: Some(WccAttr {
                size: 4096,
                mtime: Nfstime3 {
                    seconds: 7,
                    nseconds: 8,
                },
                ctime: Nfstime3 {
                    seconds: 9,
                    nseconds: 10,
                },
            }),
            after: None,
        },
    };
    let wire =
        hex!("00000042 00000001 0000000000001000 00000007 00000008 00000009 0000000a 00000000");
    assert_eq!(encode(&fail), wire);
    assert_eq!(decode::<RemoveRes>(&wire).unwrap(), fail);
}

#[test]
fn sattr3_and_createhow_layout() {
    // CREATE3args, GUARDED, mode 0600 and mtime set to server time.
    let wire = hex!(
        "00000001 07000000 00000001 78000000" // dir, name "x"
        "00000001"                            // GUARDED
        "00000001 00000180"                   // mode 0600
        "00000000 00000000 00000000"          // uid, gid, size unset
        "00000000 00000001"                   // atime DONT_CHANGE, mtime SERVER_TIME
    );
    let dir = [7];
    let value = CreateArgs {
        where_: DirOpArgs3 {
            dir: NfsFh3::new(&dir).unwrap(),
            name: b"x",
        },
        how: CreateHow3::Guarded(Sattr3 {
            mode: Some(0o600),
            mtime: SetTime::SetToServerTime,
            ..Sattr3::default()
        }),
    };
    assert_eq!(encode(&value), wire);
    assert_eq!(decode::<CreateArgs<'_>>(&wire).unwrap(), value);

    let excl = hex!("00000001 07000000 00000001 78000000 00000002 0102030405060708");
    let value = decode::<CreateArgs<'_>>(&excl).unwrap();
    assert_eq!(value.how, CreateHow3::Exclusive(hex!("0102030405060708")));
}

#[test]
fn readdir3res_layout() {
    let wire = hex!(
        "00000000"                                        // NFS3_OK
        "00000000"                                        // no dir attributes
        "0102030405060708"                                // cookieverf
        "00000001 0000000000000002 00000001 2e000000 0000000000000001"
        "00000001 0000000000000001 00000002 2e2e0000 0000000000000002"
        "00000000 00000001"                               // end of list, eof
    );
    let value = ReaddirRes::Ok(ReaddirResOk {
        dir_attributes: None,
        cookieverf: hex!("0102030405060708"),
        entries: vec![
            Entry3 {
                fileid: 2,
                name: b".",
                cookie: 1,
            },
            Entry3 {
                fileid: 1,
                name: b"..",
                cookie: 2,
            },
        ],
        eof: true,
    });
    assert_eq!(encode(&value), wire);
    assert_eq!(decode::<ReaddirRes<'_>>(&wire).unwrap(), value);

    // The streaming encoder writes the same bytes.
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    let mut enc = ReaddirEncoder::begin(&mut w, 4096, 0, &None, &hex!("0102030405060708"));
    assert!(enc.push(&mut w, 2, b".", 1));
    assert!(enc.push(&mut w, 1, b"..", 2));
    assert_eq!(enc.finish(&mut w, true), wire.len());
    assert_eq!(out, wire);
}

#[test]
fn mount_layouts() {
    // MNT args: dirpath.
    let wire = hex!("00000004 2f657870");
    assert_eq!(
        MountArgs::decode(MountProc3::Mnt, &mut Reader::new(&wire)).unwrap(),
        MountArgs::Mnt(MntArgs { dirpath: b"/exp" })
    );
    // mountres3: MNT3_OK, fhandle3, auth_flavors<> = [AUTH_SYS].
    let wire = hex!("00000000 00000004 01020304 00000001 00000001");
    let value = Mountres3::Ok(Mountres3Ok {
        fhandle: FileHandle::new(&[1, 2, 3, 4]).unwrap(),
        auth_flavors: vec![1],
    });
    assert_eq!(encode(&value), wire);
    assert_eq!(decode::<Mountres3>(&wire).unwrap(), value);
    assert_eq!(
        encode(&Mountres3::Fail(Mountstat3::Acces)),
        hex!("0000000d")
    );

    // EXPORT: one export "/exp" for group "lan".
    let wire = hex!("00000001 00000004 2f657870 00000001 00000003 6c616e00 00000000 00000000");
    let value = ExportRes {
        exports: vec![ExportNode {
            dir: b"/exp",
            groups: vec![b"lan"],
        }],
    };
    assert_eq!(encode(&value), wire);
    assert_eq!(decode::<ExportRes<'_>>(&wire).unwrap(), value);

    // DUMP: one mount entry.
    let wire = hex!("00000001 00000001 68000000 00000001 2f000000 00000000");
    let value = DumpRes {
        mounts: vec![MountBody {
            hostname: b"h",
            directory: b"/",
        }],
    };
    assert_eq!(encode(&value), wire);
    assert_eq!(decode::<DumpRes<'_>>(&wire).unwrap(), value);
}

#[test]
fn status_values_match_rfc() {
    let expected: [(Nfsstat3, u32); 29] = [
        (Nfsstat3::Ok, 0),
        (Nfsstat3::Perm, 1),
        (Nfsstat3::Noent, 2),
        (Nfsstat3::Io, 5),
        (Nfsstat3::Nxio, 6),
        (Nfsstat3::Acces, 13),
        (Nfsstat3::Exist, 17),
        (Nfsstat3::Xdev, 18),
        (Nfsstat3::Nodev, 19),
        (Nfsstat3::Notdir, 20),
        (Nfsstat3::Isdir, 21),
        (Nfsstat3::Inval, 22),
        (Nfsstat3::Fbig, 27),
        (Nfsstat3::Nospc, 28),
        (Nfsstat3::Rofs, 30),
        (Nfsstat3::Mlink, 31),
        (Nfsstat3::Nametoolong, 63),
        (Nfsstat3::Notempty, 66),
        (Nfsstat3::Dquot, 69),
        (Nfsstat3::Stale, 70),
        (Nfsstat3::Remote, 71),
        (Nfsstat3::Badhandle, 10001),
        (Nfsstat3::NotSync, 10002),
        (Nfsstat3::BadCookie, 10003),
        (Nfsstat3::Notsupp, 10004),
        (Nfsstat3::Toosmall, 10005),
        (Nfsstat3::Serverfault, 10006),
        (Nfsstat3::Badtype, 10007),
        (Nfsstat3::Jukebox, 10008),
    ];
    assert_eq!(Nfsstat3::ALL.len(), expected.len());
    for (status, value) in expected {
        assert_eq!(u32::from(status), value);
        assert_eq!(Nfsstat3::try_from(value), Ok(status));
    }
    for bad in [3, 4, 7, 10000, 10009, u32::MAX] {
        assert_eq!(
            Nfsstat3::try_from(bad),
            Err(DecodeError::BadDiscriminant {
                type_name: "nfsstat3",
                value: bad
            })
        );
    }
    for (status, value) in [(Mountstat3::Ok, 0), (Mountstat3::Notsupp, 10004)] {
        assert_eq!(u32::from(status), value);
    }
    assert!(Mountstat3::try_from(3).is_err());
}

#[test]
fn procedures() {
    assert_eq!(NfsProc3::ALL.len(), 22);
    for (i, p) in NfsProc3::ALL.iter().enumerate() {
        assert_eq!(u32::from(*p), i as u32);
        assert_eq!(NfsProc3::try_from(i as u32), Ok(*p));
    }
    assert!(NfsProc3::try_from(22).is_err());
    assert_eq!(NfsProc3::Readdirplus.name(), "READDIRPLUS");
    let non_idempotent: Vec<_> = NfsProc3::ALL
        .iter()
        .filter(|p| !p.is_idempotent())
        .map(|p| p.name())
        .collect();
    assert_eq!(
        non_idempotent,
        [
            "SETATTR", "WRITE", "CREATE", "MKDIR", "SYMLINK", "MKNOD", "REMOVE", "RMDIR", "RENAME",
            "LINK"
        ]
    );
    assert_eq!(MountProc3::ALL.len(), 6);
    assert_eq!(MountProc3::try_from(5), Ok(MountProc3::Export));
    assert!(MountProc3::try_from(6).is_err());
}

// ---------------------------------------------------------------------------
// Bad inputs
// ---------------------------------------------------------------------------

#[test]
fn handle_over_64_bytes_is_refused() {
    let mut wire = hex!("00000041").to_vec();
    wire.extend_from_slice(&[0; 68]);
    assert_eq!(
        args(NfsProc3::Getattr, &wire).unwrap_err(),
        DecodeError::LengthLimit {
            type_name: "nfs_fh3",
            len: 65,
            max: 64
        }
    );
    // Exactly 64 is fine.
    let mut wire = hex!("00000040").to_vec();
    wire.extend_from_slice(&[9; 64]);
    assert!(args(NfsProc3::Getattr, &wire).is_ok());

    assert_eq!(FileHandle::new(&[0; 65]), Err(HandleTooLong(65)));
    assert_eq!(NfsFh3::new(&[0; 65]), Err(HandleTooLong(65)));
    assert_eq!(FileHandle::new(&[0; 64]).unwrap().len(), 64);
    // In results too (client side).
    let mut wire = hex!("00000000 00000041").to_vec();
    wire.extend_from_slice(&[0; 68]);
    assert_eq!(
        decode::<LookupRes>(&wire).unwrap_err().type_name(),
        "nfs_fh3"
    );
}

#[test]
fn bad_discriminants_name_their_type() {
    let bad = |e: DecodeError| match e {
        DecodeError::BadDiscriminant { type_name, value } => (type_name, value),
        other => panic!("{other:?}"),
    };
    // fattr3 with type 8.
    let mut wire = hex!("00000000").to_vec();
    wire.extend_from_slice(&FATTR3_HEX);
    wire[7] = 8;
    assert_eq!(bad(decode::<GetattrRes>(&wire).unwrap_err()), ("ftype3", 8));
    // nfsstat3 3.
    assert_eq!(
        bad(decode::<GetattrRes>(&hex!("00000003")).unwrap_err()),
        ("nfsstat3", 3)
    );
    // createmode3 3.
    let wire = hex!("00000000 00000000 00000003");
    assert_eq!(
        bad(args(NfsProc3::Create, &wire).unwrap_err()),
        ("createmode3", 3)
    );
    // time_how 3 in SETATTR's sattr3 (after mode/uid/gid/size unset).
    let wire = hex!("00000000 00000000 00000000 00000000 00000000 00000003");
    assert_eq!(
        bad(args(NfsProc3::Setattr, &wire).unwrap_err()),
        ("time_how", 3)
    );
    // stable_how 3.
    let wire = hex!("00000000 0000000000000000 00000000 00000003 00000000");
    assert_eq!(
        bad(args(NfsProc3::Write, &wire).unwrap_err()),
        ("stable_how", 3)
    );
    // mknoddata3 with type 0.
    let wire = hex!("00000000 00000001 61000000 00000000");
    assert_eq!(
        bad(args(NfsProc3::Mknod, &wire).unwrap_err()),
        ("ftype3", 0)
    );
    // mountstat3 4.
    assert_eq!(
        bad(decode::<Mountres3>(&hex!("00000004")).unwrap_err()),
        ("mountstat3", 4)
    );
    // A bool that is neither 0 nor 1 (post_op_attr flag).
    assert_eq!(
        decode::<AccessRes>(&hex!("00000000 00000002")).unwrap_err(),
        DecodeError::BadBool(2)
    );
}

#[test]
fn mknod_void_arms_decode_as_other() {
    let wire = hex!("00000000 00000001 61000000 00000001");
    let NfsArgs::Mknod(m) = args(NfsProc3::Mknod, &wire).unwrap() else {
        panic!()
    };
    assert_eq!(m.what, Mknoddata3::Other(Ftype3::Reg));
    assert_eq!(m.what.ftype(), Ftype3::Reg);
    assert_eq!(encode(&m), wire);
}

#[test]
fn truncated_input_names_the_innermost_type() {
    let end = |e: DecodeError| match e {
        DecodeError::UnexpectedEnd { type_name, .. } => type_name,
        other => panic!("{other:?}"),
    };
    // LOOKUP cut inside the name.
    let wire = hex!("00000001 07000000 00000003 666f");
    assert_eq!(end(args(NfsProc3::Lookup, &wire).unwrap_err()), "filename3");
    // LOOKUP cut inside the handle.
    assert_eq!(
        end(args(NfsProc3::Lookup, &hex!("00000008 01020304")).unwrap_err()),
        "nfs_fh3"
    );
    // READ cut inside the offset.
    let wire = hex!("00000000 00000000");
    assert_eq!(end(args(NfsProc3::Read, &wire).unwrap_err()), "READ3args");
    // GETATTR3res cut inside the attributes.
    assert_eq!(
        end(
            decode::<GetattrRes>(&[&hex!("00000000")[..], &FATTR3_HEX[..30]].concat()).unwrap_err()
        ),
        "fattr3"
    );
    // Empty input.
    assert_eq!(end(args(NfsProc3::Commit, &[]).unwrap_err()), "nfs_fh3");
    assert!(args(NfsProc3::Null, &[]).is_ok());
}

#[test]
fn name_and_path_limits() {
    let lookup = |len: usize| {
        let mut wire = hex!("00000000").to_vec();
        wire.extend_from_slice(&(len as u32).to_be_bytes());
        wire.extend_from_slice(&vec![b'a'; len.div_ceil(4) * 4]);
        let result = args(NfsProc3::Lookup, &wire).map(|a| match a {
            NfsArgs::Lookup(l) => l.what.name.len(),
            _ => unreachable!(),
        });
        result
    };
    // 256..=1024 decode (the server answers NFS3ERR_NAMETOOLONG itself).
    assert_eq!(lookup(255), Ok(255));
    assert_eq!(lookup(256), Ok(256));
    assert_eq!(lookup(1024), Ok(1024));
    assert_eq!(
        lookup(1025),
        Err(DecodeError::LengthLimit {
            type_name: "filename3",
            len: 1025,
            max: 1024
        })
    );
    // Symlink target over 4096.
    let mut wire =
        hex!("00000000 00000001 61000000 00000000 00000000 00000000 00000000 00000000 00000000")
            .to_vec();
    wire.extend_from_slice(&4097u32.to_be_bytes());
    wire.extend_from_slice(&[b'p'; 4100]);
    assert_eq!(
        args(NfsProc3::Symlink, &wire).unwrap_err(),
        DecodeError::LengthLimit {
            type_name: "nfspath3",
            len: 4097,
            max: 4096
        }
    );
    // MOUNT dirpath over 1024, and a hostname over 255 in DUMP.
    let mut wire = 1025u32.to_be_bytes().to_vec();
    wire.extend_from_slice(&[b'/'; 1028]);
    assert_eq!(
        MountArgs::decode(MountProc3::Mnt, &mut Reader::new(&wire)).unwrap_err(),
        DecodeError::LengthLimit {
            type_name: "dirpath",
            len: 1025,
            max: 1024
        }
    );
    let mut wire = hex!("00000001 00000100").to_vec();
    wire.extend_from_slice(&[b'h'; 256]);
    assert_eq!(
        decode::<DumpRes<'_>>(&wire).unwrap_err().type_name(),
        "name"
    );
}

#[test]
fn write_data_limit() {
    let header = hex!("00000000 0000000000000000 00000000 00000000");
    let with_len = |len: u32| [&header[..], &len.to_be_bytes()].concat();
    assert_eq!(
        args(NfsProc3::Write, &with_len(MAX_WRITE_DATA + 1)).unwrap_err(),
        DecodeError::LengthLimit {
            type_name: "WRITE3args",
            len: u64::from(MAX_WRITE_DATA) + 1,
            max: u64::from(MAX_WRITE_DATA)
        }
    );
    // Within the limit but longer than the input: truncated, nothing allocated.
    assert!(matches!(
        args(NfsProc3::Write, &with_len(MAX_WRITE_DATA)).unwrap_err(),
        DecodeError::UnexpectedEnd { .. }
    ));
    // A full 1 MiB write decodes, `count` kept as sent even if it differs.
    let mut wire = hex!("00000000 0000000000000000 00000007 00000000").to_vec();
    wire.extend_from_slice(&(1u32 << 20).to_be_bytes());
    wire.extend_from_slice(&vec![0x5a; 1 << 20]);
    let NfsArgs::Write(w) = args(NfsProc3::Write, &wire).unwrap() else {
        panic!()
    };
    assert_eq!((w.count, w.data.len()), (7, 1 << 20));
}

#[test]
fn huge_list_counts_are_refused_before_allocating() {
    // auth_flavors<> count 2^32-1.
    let wire = hex!("00000000 00000000 ffffffff");
    assert_eq!(
        decode::<Mountres3>(&wire).unwrap_err(),
        DecodeError::LengthLimit {
            type_name: "mountres3_ok",
            len: 0xffff_ffff,
            max: u64::from(MAX_AUTH_FLAVORS)
        }
    );
    // A count within the limit but beyond the input.
    let wire = hex!("00000000 00000000 00000040 00000001");
    assert!(matches!(
        decode::<Mountres3>(&wire).unwrap_err(),
        DecodeError::UnexpectedEnd {
            type_name: "mountres3_ok",
            ..
        }
    ));
    // Linked lists with no end: errors, bounded by the input.
    let entry = hex!("00000001 0000000000000001 00000001 61000000 0000000000000001");
    let mut wire = hex!("00000000 00000000 0000000000000000").to_vec();
    for _ in 0..10_000 {
        wire.extend_from_slice(&entry);
    }
    assert!(matches!(
        decode::<ReaddirRes<'_>>(&wire).unwrap_err(),
        DecodeError::UnexpectedEnd { .. }
    ));
    let wire = [1u32; 4096]
        .iter()
        .flat_map(|w| w.to_be_bytes())
        .collect::<Vec<_>>();
    assert!(decode::<ExportRes<'_>>(&wire).is_err());
    assert!(decode::<DumpRes<'_>>(&wire).is_err());
}

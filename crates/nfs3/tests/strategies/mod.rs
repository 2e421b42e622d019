//! proptest strategies for every NFSv3 and MOUNT v3 type. Borrowed fields point
//! into leaked test buffers, so values are `'static`.
#![allow(dead_code, reason = "each test binary uses a subset")]

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

use rnfs_nfs3::*;

pub(crate) fn bytes(max: usize) -> impl Strategy<Value = &'static [u8]> {
    vec(any::<u8>(), 0..=max).prop_map(|v| &*v.leak())
}

pub(crate) fn fh() -> impl Strategy<Value = NfsFh3<'static>> {
    bytes(NFS3_FHSIZE).prop_map(|b| NfsFh3::new(b).unwrap())
}

pub(crate) fn file_handle() -> impl Strategy<Value = FileHandle> {
    vec(any::<u8>(), 0..=NFS3_FHSIZE).prop_map(|b| FileHandle::new(&b).unwrap())
}

pub(crate) fn name() -> impl Strategy<Value = &'static [u8]> {
    bytes(300)
}

pub(crate) fn nfstime() -> impl Strategy<Value = Nfstime3> {
    (any::<u32>(), any::<u32>()).prop_map(|(seconds, nseconds)| Nfstime3 { seconds, nseconds })
}

pub(crate) fn specdata() -> impl Strategy<Value = Specdata3> {
    (any::<u32>(), any::<u32>()).prop_map(|(specdata1, specdata2)| Specdata3 {
        specdata1,
        specdata2,
    })
}

pub(crate) fn ftype() -> impl Strategy<Value = Ftype3> {
    select(Ftype3::ALL)
}

pub(crate) fn fattr3() -> impl Strategy<Value = Fattr3> {
    (
        (
            ftype(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
        ),
        (
            any::<u64>(),
            any::<u64>(),
            specdata(),
            any::<u64>(),
            any::<u64>(),
        ),
        (nfstime(), nfstime(), nfstime()),
    )
        .prop_map(
            |(
                (ftype, mode, nlink, uid, gid),
                (size, used, rdev, fsid, fileid),
                (atime, mtime, ctime),
            )| Fattr3 {
                ftype,
                mode,
                nlink,
                uid,
                gid,
                size,
                used,
                rdev,
                fsid,
                fileid,
                atime,
                mtime,
                ctime,
            },
        )
}

pub(crate) fn post_op_attr() -> impl Strategy<Value = PostOpAttr> {
    proptest::option::of(fattr3())
}

pub(crate) fn wcc_data() -> impl Strategy<Value = WccData> {
    let wcc_attr = (any::<u64>(), nfstime(), nfstime()).prop_map(|(size, mtime, ctime)| WccAttr {
        size,
        mtime,
        ctime,
    });
    (proptest::option::of(wcc_attr), post_op_attr())
        .prop_map(|(before, after)| WccData { before, after })
}

pub(crate) fn set_time() -> impl Strategy<Value = SetTime> {
    prop_oneof![
        Just(SetTime::DontChange),
        Just(SetTime::SetToServerTime),
        nfstime().prop_map(SetTime::SetToClientTime),
    ]
}

pub(crate) fn sattr3() -> impl Strategy<Value = Sattr3> {
    use proptest::option::of;
    (
        of(any::<u32>()),
        of(any::<u32>()),
        of(any::<u32>()),
        of(any::<u64>()),
        set_time(),
        set_time(),
    )
        .prop_map(|(mode, uid, gid, size, atime, mtime)| Sattr3 {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        })
}

pub(crate) fn diropargs() -> impl Strategy<Value = DirOpArgs3<'static>> {
    (fh(), name()).prop_map(|(dir, name)| DirOpArgs3 { dir, name })
}

pub(crate) fn createhow() -> impl Strategy<Value = CreateHow3> {
    prop_oneof![
        sattr3().prop_map(CreateHow3::Unchecked),
        sattr3().prop_map(CreateHow3::Guarded),
        any::<[u8; 8]>().prop_map(CreateHow3::Exclusive),
    ]
}

/// Only the forms that decode back to themselves (`Other` holds a void-arm type).
pub(crate) fn mknoddata() -> impl Strategy<Value = Mknoddata3> {
    let dev = || {
        (sattr3(), specdata()).prop_map(|(dev_attributes, spec)| Devicedata3 {
            dev_attributes,
            spec,
        })
    };
    prop_oneof![
        dev().prop_map(Mknoddata3::Chr),
        dev().prop_map(Mknoddata3::Blk),
        sattr3().prop_map(Mknoddata3::Sock),
        sattr3().prop_map(Mknoddata3::Fifo),
        select(&[Ftype3::Reg, Ftype3::Dir, Ftype3::Lnk][..]).prop_map(Mknoddata3::Other),
    ]
}

pub(crate) fn stable() -> impl Strategy<Value = StableHow> {
    select(StableHow::ALL)
}

pub(crate) fn fail_status() -> impl Strategy<Value = Nfsstat3> {
    select(&Nfsstat3::ALL[1..])
}

pub(crate) fn nfs_args() -> impl Strategy<Value = NfsArgs<'static>> {
    prop_oneof![
        Just(NfsArgs::Null),
        fh().prop_map(|object| NfsArgs::Getattr(GetattrArgs { object })),
        (fh(), sattr3(), proptest::option::of(nfstime())).prop_map(|(object, a, guard)| {
            NfsArgs::Setattr(SetattrArgs {
                object,
                new_attributes: a,
                guard,
            })
        }),
        diropargs().prop_map(|what| NfsArgs::Lookup(LookupArgs { what })),
        (fh(), any::<u32>())
            .prop_map(|(object, access)| NfsArgs::Access(AccessArgs { object, access })),
        fh().prop_map(|symlink| NfsArgs::Readlink(ReadlinkArgs { symlink })),
        (fh(), any::<u64>(), any::<u32>()).prop_map(|(file, offset, count)| NfsArgs::Read(
            ReadArgs {
                file,
                offset,
                count
            }
        )),
        (fh(), any::<u64>(), any::<u32>(), stable(), bytes(2000)).prop_map(
            |(file, offset, count, stable, data)| NfsArgs::Write(WriteArgs {
                file,
                offset,
                count,
                stable,
                data,
            })
        ),
        (diropargs(), createhow())
            .prop_map(|(where_, how)| NfsArgs::Create(CreateArgs { where_, how })),
        (diropargs(), sattr3())
            .prop_map(|(where_, attributes)| NfsArgs::Mkdir(MkdirArgs { where_, attributes })),
        (diropargs(), sattr3(), bytes(600)).prop_map(|(where_, a, data)| {
            NfsArgs::Symlink(SymlinkArgs {
                where_,
                symlink: Symlinkdata3 {
                    symlink_attributes: a,
                    symlink_data: data,
                },
            })
        }),
        (diropargs(), mknoddata())
            .prop_map(|(where_, what)| NfsArgs::Mknod(MknodArgs { where_, what })),
        diropargs().prop_map(|object| NfsArgs::Remove(RemoveArgs { object })),
        diropargs().prop_map(|object| NfsArgs::Rmdir(RmdirArgs { object })),
        (diropargs(), diropargs()).prop_map(|(from, to)| NfsArgs::Rename(RenameArgs { from, to })),
        (fh(), diropargs()).prop_map(|(file, link)| NfsArgs::Link(LinkArgs { file, link })),
        (fh(), any::<u64>(), any::<[u8; 8]>(), any::<u32>()).prop_map(
            |(dir, cookie, cookieverf, count)| NfsArgs::Readdir(ReaddirArgs {
                dir,
                cookie,
                cookieverf,
                count,
            })
        ),
        (
            fh(),
            any::<u64>(),
            any::<[u8; 8]>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(dir, cookie, cookieverf, dircount, maxcount)| NfsArgs::Readdirplus(
                    ReaddirplusArgs {
                        dir,
                        cookie,
                        cookieverf,
                        dircount,
                        maxcount,
                    }
                )
            ),
        fh().prop_map(|fsroot| NfsArgs::Fsstat(FsstatArgs { fsroot })),
        fh().prop_map(|fsroot| NfsArgs::Fsinfo(FsinfoArgs { fsroot })),
        fh().prop_map(|object| NfsArgs::Pathconf(PathconfArgs { object })),
        (fh(), any::<u64>(), any::<u32>()).prop_map(|(file, offset, count)| NfsArgs::Commit(
            CommitArgs {
                file,
                offset,
                count
            }
        )),
    ]
}

/// `Ok(ok)` or `Fail { status, <fail fields> }` for one result type.
macro_rules! res {
    ($res:ident, $ok:expr, { $($field:ident : $strategy:expr),* }) => {
        prop_oneof![
            $ok.prop_map($res::Ok),
            (fail_status(), $($strategy),*).prop_map(|(status, $($field),*)| $res::Fail {
                status,
                $($field),*
            }),
        ]
    };
}

pub(crate) fn create_ok() -> impl Strategy<Value = CreateResOk> {
    (
        proptest::option::of(file_handle()),
        post_op_attr(),
        wcc_data(),
    )
        .prop_map(|(obj, obj_attributes, dir_wcc)| CreateResOk {
            obj,
            obj_attributes,
            dir_wcc,
        })
}

pub(crate) fn entries() -> impl Strategy<Value = Vec<Entry3<'static>>> {
    vec(
        (any::<u64>(), bytes(40), any::<u64>()).prop_map(|(fileid, name, cookie)| Entry3 {
            fileid,
            name,
            cookie,
        }),
        0..6,
    )
}

pub(crate) fn entries_plus() -> impl Strategy<Value = Vec<Entryplus3<'static>>> {
    vec(
        (
            any::<u64>(),
            bytes(40),
            any::<u64>(),
            post_op_attr(),
            proptest::option::of(file_handle()),
        )
            .prop_map(
                |(fileid, name, cookie, name_attributes, name_handle)| Entryplus3 {
                    fileid,
                    name,
                    cookie,
                    name_attributes,
                    name_handle,
                },
            ),
        0..6,
    )
}

pub(crate) fn nfs_res() -> impl Strategy<Value = NfsRes<'static>> {
    let u32s = || any::<u32>();
    let u64s = || any::<u64>();
    prop_oneof![
        Just(NfsRes::Null),
        res!(GetattrRes, fattr3().prop_map(|obj_attributes| GetattrResOk { obj_attributes }), {})
            .prop_map(NfsRes::Getattr),
        res!(SetattrRes, wcc_data().prop_map(|obj_wcc| SetattrResOk { obj_wcc }), {
            obj_wcc: wcc_data()
        })
        .prop_map(NfsRes::Setattr),
        res!(
            LookupRes,
            (file_handle(), post_op_attr(), post_op_attr()).prop_map(|(object, o, d)| {
                LookupResOk {
                    object,
                    obj_attributes: o,
                    dir_attributes: d,
                }
            }),
            { dir_attributes: post_op_attr() }
        )
        .prop_map(NfsRes::Lookup),
        res!(
            AccessRes,
            (post_op_attr(), u32s()).prop_map(|(obj_attributes, access)| AccessResOk {
                obj_attributes,
                access
            }),
            { obj_attributes: post_op_attr() }
        )
        .prop_map(NfsRes::Access),
        res!(
            ReadlinkRes,
            (post_op_attr(), bytes(600)).prop_map(|(symlink_attributes, data)| {
                ReadlinkResOk {
                    symlink_attributes,
                    data,
                }
            }),
            { symlink_attributes: post_op_attr() }
        )
        .prop_map(NfsRes::Readlink),
        res!(
            ReadRes,
            (post_op_attr(), u32s(), any::<bool>(), bytes(2000)).prop_map(
                |(file_attributes, count, eof, data)| ReadResOk {
                    file_attributes,
                    count,
                    eof,
                    data,
                }
            ),
            { file_attributes: post_op_attr() }
        )
        .prop_map(NfsRes::Read),
        res!(
            WriteRes,
            (wcc_data(), u32s(), stable(), any::<[u8; 8]>()).prop_map(
                |(file_wcc, count, committed, verf)| WriteResOk {
                    file_wcc,
                    count,
                    committed,
                    verf,
                }
            ),
            { file_wcc: wcc_data() }
        )
        .prop_map(NfsRes::Write),
        res!(CreateRes, create_ok(), { dir_wcc: wcc_data() }).prop_map(NfsRes::Create),
        res!(MkdirRes, create_ok(), { dir_wcc: wcc_data() }).prop_map(NfsRes::Mkdir),
        res!(SymlinkRes, create_ok(), { dir_wcc: wcc_data() }).prop_map(NfsRes::Symlink),
        res!(MknodRes, create_ok(), { dir_wcc: wcc_data() }).prop_map(NfsRes::Mknod),
        res!(RemoveRes, wcc_data().prop_map(|dir_wcc| RemoveResOk { dir_wcc }), {
            dir_wcc: wcc_data()
        })
        .prop_map(NfsRes::Remove),
        res!(RmdirRes, wcc_data().prop_map(|dir_wcc| RemoveResOk { dir_wcc }), {
            dir_wcc: wcc_data()
        })
        .prop_map(NfsRes::Rmdir),
        res!(
            RenameRes,
            (wcc_data(), wcc_data()).prop_map(|(fromdir_wcc, todir_wcc)| RenameResOk {
                fromdir_wcc,
                todir_wcc
            }),
            { fromdir_wcc: wcc_data(), todir_wcc: wcc_data() }
        )
        .prop_map(NfsRes::Rename),
        res!(
            LinkRes,
            (post_op_attr(), wcc_data()).prop_map(|(file_attributes, linkdir_wcc)| {
                LinkResOk {
                    file_attributes,
                    linkdir_wcc,
                }
            }),
            { file_attributes: post_op_attr(), linkdir_wcc: wcc_data() }
        )
        .prop_map(NfsRes::Link),
        res!(
            ReaddirRes,
            (post_op_attr(), any::<[u8; 8]>(), entries(), any::<bool>()).prop_map(
                |(dir_attributes, cookieverf, entries, eof)| ReaddirResOk {
                    dir_attributes,
                    cookieverf,
                    entries,
                    eof,
                }
            ),
            { dir_attributes: post_op_attr() }
        )
        .prop_map(NfsRes::Readdir),
        res!(
            ReaddirplusRes,
            (post_op_attr(), any::<[u8; 8]>(), entries_plus(), any::<bool>()).prop_map(
                |(dir_attributes, cookieverf, entries, eof)| ReaddirplusResOk {
                    dir_attributes,
                    cookieverf,
                    entries,
                    eof,
                }
            ),
            { dir_attributes: post_op_attr() }
        )
        .prop_map(NfsRes::Readdirplus),
        res!(
            FsstatRes,
            (post_op_attr(), u64s(), u64s(), u64s(), u64s(), u64s(), u64s(), u32s()).prop_map(
                |(obj_attributes, tbytes, fbytes, abytes, tfiles, ffiles, afiles, invarsec)| {
                    FsstatResOk {
                        obj_attributes,
                        tbytes,
                        fbytes,
                        abytes,
                        tfiles,
                        ffiles,
                        afiles,
                        invarsec,
                    }
                }
            ),
            { obj_attributes: post_op_attr() }
        )
        .prop_map(NfsRes::Fsstat),
        res!(
            FsinfoRes,
            (
                post_op_attr(),
                (u32s(), u32s(), u32s(), u32s(), u32s(), u32s(), u32s()),
                u64s(),
                nfstime(),
                u32s()
            )
                .prop_map(
                    |(obj_attributes, (rtmax, rtpref, rtmult, wtmax, wtpref, wtmult, dtpref), maxfilesize, time_delta, properties)| {
                        FsinfoResOk {
                            obj_attributes,
                            rtmax,
                            rtpref,
                            rtmult,
                            wtmax,
                            wtpref,
                            wtmult,
                            dtpref,
                            maxfilesize,
                            time_delta,
                            properties,
                        }
                    }
                ),
            { obj_attributes: post_op_attr() }
        )
        .prop_map(NfsRes::Fsinfo),
        res!(
            PathconfRes,
            (post_op_attr(), u32s(), u32s(), any::<[bool; 4]>()).prop_map(
                |(obj_attributes, linkmax, name_max, [a, b, c, d])| PathconfResOk {
                    obj_attributes,
                    linkmax,
                    name_max,
                    no_trunc: a,
                    chown_restricted: b,
                    case_insensitive: c,
                    case_preserving: d,
                }
            ),
            { obj_attributes: post_op_attr() }
        )
        .prop_map(NfsRes::Pathconf),
        res!(
            CommitRes,
            (wcc_data(), any::<[u8; 8]>()).prop_map(|(file_wcc, verf)| CommitResOk {
                file_wcc,
                verf
            }),
            { file_wcc: wcc_data() }
        )
        .prop_map(NfsRes::Commit),
    ]
}

pub(crate) fn mount_args() -> impl Strategy<Value = MountArgs<'static>> {
    prop_oneof![
        Just(MountArgs::Null),
        bytes(1024).prop_map(|dirpath| MountArgs::Mnt(MntArgs { dirpath })),
        Just(MountArgs::Dump),
        bytes(1024).prop_map(|dirpath| MountArgs::Umnt(UmntArgs { dirpath })),
        Just(MountArgs::Umntall),
        Just(MountArgs::Export),
    ]
}

pub(crate) fn mount_res() -> impl Strategy<Value = MountRes<'static>> {
    let mnt = prop_oneof![
        (file_handle(), vec(any::<u32>(), 0..=8)).prop_map(|(fhandle, auth_flavors)| {
            Mountres3::Ok(Mountres3Ok {
                fhandle,
                auth_flavors,
            })
        }),
        select(&Mountstat3::ALL[1..]).prop_map(Mountres3::Fail),
    ];
    let dump = vec(
        (bytes(255), bytes(100)).prop_map(|(hostname, directory)| MountBody {
            hostname,
            directory,
        }),
        0..5,
    )
    .prop_map(|mounts| DumpRes { mounts });
    let export = vec(
        (bytes(100), vec(bytes(255), 0..4)).prop_map(|(dir, groups)| ExportNode { dir, groups }),
        0..5,
    )
    .prop_map(|exports| ExportRes { exports });
    prop_oneof![
        Just(MountRes::Null),
        mnt.prop_map(MountRes::Mnt),
        dump.prop_map(MountRes::Dump),
        Just(MountRes::Umnt),
        Just(MountRes::Umntall),
        export.prop_map(MountRes::Export),
    ]
}

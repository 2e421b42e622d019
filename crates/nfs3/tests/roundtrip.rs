//! Property tests: every argument and result type of every NFSv3 and MOUNT v3
//! procedure encodes to whole XDR words, decodes back to an equal value consuming
//! exactly what was written, and fails with `UnexpectedEnd` when truncated.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod strategies;

use proptest::prelude::*;
use rnfs_nfs3::*;
use rnfs_xdr::{DecodeError, Encode, Reader, Writer};

use strategies::*;

fn encode(v: &impl Encode) -> &'static [u8] {
    let mut out = Vec::new();
    v.encode(&mut Writer::new(&mut out));
    assert_eq!(out.len() % 4, 0, "not whole XDR words");
    out.leak()
}

/// Decodes `bytes` with `decode`, requiring all of it to be consumed.
fn decode_all<T>(
    bytes: &'static [u8],
    decode: impl Fn(&mut Reader<'static>) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let mut r = Reader::new(bytes);
    let v = decode(&mut r)?;
    r.finish("test")?;
    Ok(v)
}

/// Every strict prefix of a valid encoding fails with `UnexpectedEnd` (sampled at
/// `cut`, a fraction of the length).
fn check_truncation<T: std::fmt::Debug>(
    bytes: &'static [u8],
    cut: f64,
    decode: impl Fn(&mut Reader<'static>) -> Result<T, DecodeError>,
) {
    if bytes.is_empty() {
        return;
    }
    let len = ((bytes.len() as f64) * cut) as usize % bytes.len();
    let err = decode(&mut Reader::new(&bytes[..len])).unwrap_err();
    assert!(
        matches!(err, DecodeError::UnexpectedEnd { .. }),
        "prefix of {len}: {err:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn nfs_args_round_trip(args in nfs_args(), cut in 0.0..1.0f64) {
        let bytes = encode(&args);
        let proc_ = args.procedure();
        let back = decode_all(bytes, |r| NfsArgs::decode(proc_, r)).unwrap();
        prop_assert_eq!(back, args);
        check_truncation(bytes, cut, |r| NfsArgs::decode(proc_, r));
    }

    #[test]
    fn nfs_res_round_trip(res in nfs_res(), cut in 0.0..1.0f64) {
        let bytes = encode(&res);
        let proc_ = res.procedure();
        let back = decode_all(bytes, |r| NfsRes::decode(proc_, r)).unwrap();
        prop_assert_eq!(&back, &res);
        check_truncation(bytes, cut, |r| NfsRes::decode(proc_, r));
    }

    #[test]
    fn mount_args_round_trip(args in mount_args(), cut in 0.0..1.0f64) {
        let bytes = encode(&args);
        let proc_ = args.procedure();
        let back = decode_all(bytes, |r| MountArgs::decode(proc_, r)).unwrap();
        prop_assert_eq!(back, args);
        check_truncation(bytes, cut, |r| MountArgs::decode(proc_, r));
    }

    #[test]
    fn mount_res_round_trip(res in mount_res(), cut in 0.0..1.0f64) {
        let bytes = encode(&res);
        let proc_ = res.procedure();
        let back = decode_all(bytes, |r| MountRes::decode(proc_, r)).unwrap();
        prop_assert_eq!(&back, &res);
        check_truncation(bytes, cut, |r| MountRes::decode(proc_, r));
    }

    /// The fuzz targets' own checks hold on valid input.
    #[test]
    fn fuzz_bodies_accept_valid_input(args in nfs_args(), res in nfs_res()) {
        let sel = |p: NfsProc3| u8::try_from(u32::from(p)).unwrap();
        fuzzing::nfs3_args(&[&[sel(args.procedure())], encode(&args)].concat());
        fuzzing::nfs3_res(&[&[sel(res.procedure())], encode(&res)].concat());
    }

    #[test]
    fn shared_types_round_trip(
        a in fattr3(),
        s in sattr3(),
        w in wcc_data(),
        how in createhow(),
        m in mknoddata(),
        d in diropargs(),
        h in file_handle(),
    ) {
        prop_assert_eq!(decode_all(encode(&a), Fattr3::decode_fn).unwrap(), a);
        prop_assert_eq!(encode(&a).len(), Fattr3::WIRE_SIZE);
        prop_assert_eq!(decode_all(encode(&s), Sattr3::decode_fn).unwrap(), s);
        prop_assert_eq!(decode_all(encode(&w), WccData::decode_fn).unwrap(), w);
        prop_assert_eq!(decode_all(encode(&how), CreateHow3::decode_fn).unwrap(), how);
        prop_assert_eq!(decode_all(encode(&m), Mknoddata3::decode_fn).unwrap(), m);
        prop_assert_eq!(decode_all(encode(&d), DirOpArgs3::decode_fn).unwrap(), d);
        prop_assert_eq!(decode_all(encode(&h), FileHandle::decode_fn).unwrap(), h);
        // Owned and borrowed handles encode identically.
        prop_assert_eq!(encode(&h), encode(&h.as_fh3()));
        prop_assert_eq!(FileHandle::from(h.as_fh3()), h);
    }
}

/// `T::decode` as a plain function, for [`decode_all`].
trait DecodeFn: Sized {
    fn decode_fn(r: &mut Reader<'static>) -> Result<Self, DecodeError>;
}

impl<T: rnfs_xdr::Decode<'static>> DecodeFn for T {
    fn decode_fn(r: &mut Reader<'static>) -> Result<Self, DecodeError> {
        T::decode(r)
    }
}

#[test]
fn every_procedure_is_generated() {
    // The strategies cover all 22 procedures (guards against a strategy arm
    // silently going missing).
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut args_seen, mut res_seen) = ([false; 22], [false; 22]);
    for _ in 0..2000 {
        let a = nfs_args().new_tree(&mut runner).unwrap().current();
        args_seen[u32::from(a.procedure()) as usize] = true;
        let r = nfs_res().new_tree(&mut runner).unwrap().current();
        res_seen[u32::from(r.procedure()) as usize] = true;
    }
    assert_eq!(args_seen, [true; 22]);
    assert_eq!(res_seen, [true; 22]);
}

//! Fuzz target bodies, public so that `fuzz/fuzz_targets/*.rs` stay three lines and
//! so that ordinary tests can replay the seed corpus through them.
#![doc(hidden)]

use std::fmt::Debug;

use rnfs_xdr::{DecodeError, Encode, Reader, Writer};

use crate::{MountArgs, MountProc3, MountRes, NfsArgs, NfsProc3, NfsRes};

/// Decodes with `decode`, and if that succeeds checks: the value re-encodes to
/// exactly as many bytes as were consumed, equal to them except for (zeroed)
/// padding, and the re-encoding decodes to an equal value that encodes to the
/// same bytes.
fn round_trip<'a, T, P>(
    proc_: P,
    input: &'a [u8],
    decode: impl for<'b> Fn(P, &mut Reader<'b>) -> Result<T::Of<'b>, DecodeError>,
) where
    P: Copy + Debug,
    T: Family,
{
    let mut r = Reader::new(input);
    let Ok(value) = decode(proc_, &mut r) else {
        return;
    };
    let consumed = r.position();
    let mut out = Vec::new();
    value.encode(&mut Writer::new(&mut out));
    assert_eq!(out.len(), consumed, "{proc_:?}: re-encoded length");
    // Only padding may differ from the input, and padding is written as zeros.
    for (i, (&sent, &again)) in input.iter().zip(&out).enumerate() {
        assert!(sent == again || again == 0, "{proc_:?}: byte {i} changed");
    }
    let mut r2 = Reader::new(&out);
    let again = match decode(proc_, &mut r2) {
        Ok(v) => v,
        Err(e) => panic!("{proc_:?}: re-encoding does not decode: {e}"),
    };
    assert_eq!(
        r2.remaining(),
        0,
        "{proc_:?}: trailing bytes after re-decode"
    );
    let mut out2 = Vec::new();
    again.encode(&mut Writer::new(&mut out2));
    assert_eq!(out2, out, "{proc_:?}: encoding is not stable");
    assert!(T::same(&value, &again), "{proc_:?}: {value:?} != {again:?}");
}

/// A borrowing type constructor, so one helper serves all four targets.
trait Family {
    type Of<'a>: Encode + Debug;
    fn same<'a, 'b>(a: &Self::Of<'a>, b: &Self::Of<'b>) -> bool;
}

macro_rules! family {
    ($marker:ident, $ty:ident) => {
        struct $marker;
        impl Family for $marker {
            type Of<'a> = $ty<'a>;
            fn same<'a, 'b>(a: &$ty<'a>, b: &$ty<'b>) -> bool {
                // Compare at a common lifetime: both borrow for at least the call.
                fn shorten<'s>(v: &'s $ty<'_>) -> &'s $ty<'s> {
                    v
                }
                shorten(a) == shorten(b)
            }
        }
    };
}

family!(NfsArgsF, NfsArgs);
family!(NfsResF, NfsRes);
family!(MountArgsF, MountArgs);
family!(MountResF, MountRes);

fn nfs_proc(selector: u8) -> NfsProc3 {
    NfsProc3::ALL[usize::from(selector) % NfsProc3::ALL.len()]
}

fn mount_proc(selector: u8) -> MountProc3 {
    MountProc3::ALL[usize::from(selector) % MountProc3::ALL.len()]
}

/// First byte: the procedure (mod 22); the rest: its NFSv3 arguments.
pub fn nfs3_args(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    round_trip::<NfsArgsF, _>(nfs_proc(selector), body, |p, r| {
        let v = NfsArgs::decode(p, r)?;
        assert_eq!(v.procedure(), p);
        Ok(v)
    });
}

/// First byte: the procedure (mod 22); the rest: its NFSv3 results.
pub fn nfs3_res(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    round_trip::<NfsResF, _>(nfs_proc(selector), body, |p, r| {
        let v = NfsRes::decode(p, r)?;
        assert_eq!(v.procedure(), p);
        Ok(v)
    });
}

/// First byte: the procedure (mod 6); the rest: its MOUNT v3 arguments.
pub fn mount_args(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    round_trip::<MountArgsF, _>(mount_proc(selector), body, |p, r| {
        let v = MountArgs::decode(p, r)?;
        assert_eq!(v.procedure(), p);
        Ok(v)
    });
}

/// First byte: the procedure (mod 6); the rest: its MOUNT v3 results.
pub fn mount_res(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    round_trip::<MountResF, _>(mount_proc(selector), body, |p, r| {
        let v = MountRes::decode(p, r)?;
        assert_eq!(v.procedure(), p);
        Ok(v)
    });
}

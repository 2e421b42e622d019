//! Fuzz target bodies, public so that `fuzz/fuzz_targets/*.rs` stay three lines and
//! so that ordinary tests can replay the seed corpus through them.
#![doc(hidden)]

use crate::{padded_len, DecodeError, Reader, Writer};

/// Drives a [`Reader`] with a script taken from the input itself.
///
/// Input: `k` (one byte, count of op bytes, `k % 32`), `k` op bytes, then the XDR
/// data. Each op byte selects a read (low 4 bits) and a size or limit (high 4 bits).
/// Checked invariants: no panic; successful reads consume a multiple of four bytes;
/// re-encoding what was read reproduces the input (padding aside).
pub fn xdr_reader(data: &[u8]) {
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let k = usize::from(k % 32).min(rest.len());
    let (ops, input) = rest.split_at(k);
    let mut r = Reader::new(input);
    for &op in ops {
        let arg = u32::from(op >> 4);
        let before = r.position();
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        let result: Result<(), DecodeError> = match op & 0xF {
            0 => r.read_u32().map(|v| w.write_u32(v)),
            1 => r.read_i32().map(|v| w.write_i32(v)),
            2 => r.read_u64().map(|v| w.write_u64(v)),
            3 => r.read_i64().map(|v| w.write_i64(v)),
            4 => r.read_bool().map(|v| w.write_bool(v)),
            5 => r
                .read_fixed_opaque(arg as usize)
                .map(|v| w.write_fixed_opaque(v)),
            6 => r.read_opaque(arg * 4).map(|v| w.write_opaque(v)),
            7 => r
                .named("fuzz_string", |r| r.read_string(arg))
                .map(|v| w.write_string(v)),
            8 => r.read_array_len(arg, 4).map(|n| {
                assert!(n.saturating_mul(4) <= r.remaining());
                w.write_u32(n as u32);
            }),
            9 => r
                .read_optional(Reader::read_u32)
                .map(|v| w.write_optional(v.as_ref())),
            10 => r.read_array::<u32>(arg, 4).map(|v| {
                w.write_u32(v.len() as u32);
                v.iter().for_each(|x| w.write_u32(*x));
            }),
            11 => r.sub(arg as usize * 4).map(|mut s| {
                let rest = s.read_rest();
                assert_eq!(rest.len(), arg as usize * 4);
                w.write_fixed_opaque(rest);
            }),
            12 => r.read_enum().map(|v| w.write_u32(v)),
            13 => {
                let len = r.remaining();
                r.clone().finish("fuzz").map_err(|e| {
                    assert_eq!(
                        e,
                        DecodeError::TrailingData {
                            type_name: "fuzz",
                            len
                        }
                    );
                    e
                })
            }
            _ => {
                // Raw remainder: not XDR-aligned in general, nothing to check.
                r.read_rest();
                return;
            }
        };
        let consumed = &input[before..r.position()];
        match result {
            Ok(()) => {
                assert_eq!(consumed.len(), padded_len(consumed.len()));
                // Re-encoding gives the input back, except that padding reads as zero.
                assert_eq!(out.len(), consumed.len(), "op {op:#x}");
                let padding_agnostic = matches!(op & 0xF, 5..=7);
                if !padding_agnostic {
                    assert_eq!(out, consumed, "op {op:#x}");
                }
            }
            Err(_) => return,
        }
    }
}

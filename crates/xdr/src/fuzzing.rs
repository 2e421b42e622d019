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

/// One edit of [`mutate`]: `kind` picks the operation, `at` where (taken modulo
/// the input's length), `value` what. Built from three random numbers, so a
/// property-testing crate can generate (and shrink) lists of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edit {
    /// The operation (modulo 9).
    pub kind: u8,
    /// The position, modulo the input's length.
    pub at: u32,
    /// The operand.
    pub value: u32,
}

impl From<(u8, u32, u32)> for Edit {
    /// `(kind, at, value)`, as a property-testing crate generates them.
    fn from((kind, at, value): (u8, u32, u32)) -> Self {
        Self { kind, at, value }
    }
}

/// The environment variable `name` as a number, or `default` when it is unset
/// or not a number: how the mutated-input tests take longer runs
/// (`FUZZ_CASES`, `MUTATION_SEED`, ...).
pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl Edit {
    /// An edit drawn from `rng`, for mutation loops that run without a
    /// property-testing crate (the end-to-end tests of server and client).
    pub fn random(rng: &mut XorShift) -> Self {
        Self {
            kind: rng.next_u64() as u8,
            at: rng.next_u64() as u32,
            value: rng.next_u64() as u32,
        }
    }
}

/// xorshift64*: a small deterministic generator, so a failing mutation run
/// repeats from its seed.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator from `seed`: any value, and neighbouring seeds give
    /// unrelated streams (splitmix64's finaliser; the state must not be 0).
    pub fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Self((z ^ (z >> 31)) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Values XDR decoders must treat carefully: lengths and counts at their limits,
/// discriminants just past the last one, sign bits.
const INTERESTING: [u32; 16] = [
    0,
    1,
    2,
    3,
    4,
    5,
    8,
    16,
    17,
    0x7f,
    0xff,
    0x400,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_fffe,
    0xffff_ffff,
];

/// Applies `edits` to `input`, libFuzzer-style, for mutated-input tests that run in
/// CI without a fuzzing engine: bit flips, bytes set, XDR words set to
/// boundary values (0 to 5, 8, 16, 17, 0x7f, 0xff, 0x400, 2^31 - 1, 2^31,
/// 2^32 - 2, 2^32 - 1) or nudged by a small amount (lengths off by one),
/// truncation, insertion, deletion, a duplicated span, and a splice with
/// `other` (another corpus input).
pub fn mutate(input: &[u8], other: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut data = input.to_vec();
    for e in edits {
        let len = data.len();
        let at = if len == 0 { 0 } else { e.at as usize % len };
        // The aligned XDR word containing `at`, when the input has one.
        let word = (at & !3) + 4 <= len;
        let w = at & !3;
        let v = e.value;
        match e.kind % 9 {
            0 if len > 0 => data[at] ^= 1 << (v % 8),
            1 if len > 0 => data[at] = v as u8,
            2 if word => {
                let new = INTERESTING[v as usize % INTERESTING.len()];
                data[w..w + 4].copy_from_slice(&new.to_be_bytes());
            }
            3 if word => {
                let old = u32::from_be_bytes([data[w], data[w + 1], data[w + 2], data[w + 3]]);
                // A signed nudge of -8..=7.
                let new = old.wrapping_add((v % 16).wrapping_sub(8));
                data[w..w + 4].copy_from_slice(&new.to_be_bytes());
            }
            4 => data.truncate(at),
            5 => {
                let n = (v % 16) as usize;
                let bytes = v.to_be_bytes();
                data.splice(at..at, (0..n).map(|i| bytes[i % 4]));
            }
            6 if len > 0 => {
                let n = ((v % 64) as usize).min(len - at);
                data.drain(at..at + n);
            }
            7 if len > 0 => {
                let n = ((v % 64) as usize).min(len - at).min(4096 - len.min(4096));
                let span = data[at..at + n].to_vec();
                data.splice(at..at, span);
            }
            8 if !other.is_empty() => {
                let from = v as usize % other.len();
                data.truncate(at);
                data.extend_from_slice(&other[from..]);
            }
            _ => {}
        }
    }
    data
}

/// Runs `target` on `input` after `edits` (splicing with `other`) and returns
/// the mutated input with the panic message if the target panicked.
pub fn run_mutated(
    input: &[u8],
    other: &[u8],
    edits: &[Edit],
    target: fn(&[u8]),
) -> Result<(), (Vec<u8>, String)> {
    let data = mutate(input, other, edits);
    std::panic::catch_unwind(|| target(&data)).map_err(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default();
        (data, message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutate_applies_each_kind() {
        let input = [0u8, 0, 0, 1, 0xaa, 0xbb, 0xcc, 0xdd];
        let one = |kind, at, value| mutate(&input, b"xyz", &[Edit { kind, at, value }]);
        assert_eq!(one(0, 3, 1), [0, 0, 0, 3, 0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(one(1, 12, 7), [0, 0, 0, 1, 7, 0xbb, 0xcc, 0xdd]);
        assert_eq!(
            one(2, 1, 15),
            [0xff, 0xff, 0xff, 0xff, 0xaa, 0xbb, 0xcc, 0xdd]
        );
        assert_eq!(one(3, 2, 7), [0, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(one(4, 5, 0), [0, 0, 0, 1, 0xaa]);
        assert_eq!(
            one(5, 0, 0x0102_0302),
            [1, 2, 0, 0, 0, 1, 0xaa, 0xbb, 0xcc, 0xdd]
        );
        assert_eq!(one(6, 1, 2), [0, 1, 0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(
            one(7, 4, 2),
            [0, 0, 0, 1, 0xaa, 0xbb, 0xaa, 0xbb, 0xcc, 0xdd]
        );
        assert_eq!(one(8, 2, 1), [0, 0, b'y', b'z']);
        // Nothing to edit in an empty input but insertions; no panic either way.
        for kind in 0..9 {
            let _ = mutate(
                &[],
                &[],
                &[Edit {
                    kind,
                    at: 5,
                    value: 9,
                }],
            );
        }
        assert_eq!(
            mutate(
                &[],
                &[],
                &[Edit {
                    kind: 5,
                    at: 0,
                    value: 2
                }]
            ),
            [0, 0]
        );
    }

    #[test]
    fn neighbouring_seeds_give_different_streams() {
        let first = |seed| XorShift::new(seed).next_u64();
        assert_ne!(first(44), first(45));
        assert_ne!(first(0), first(1));
        let mut r = XorShift::new(7);
        assert!((0..100).all(|_| r.below(3) < 3));
        assert_eq!(r.below(0), 0);
    }
}

//! Wire-level tests of the XDR reader and writer, with RFC 4506 examples.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a panic is the failure report"
)]

use hex_literal::hex;
use proptest::prelude::*;
use rnfs_xdr::{padded_len, padding, Decode, DecodeError, Encode, Reader, Writer};

fn encode<T: Encode + ?Sized>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode(&mut Writer::new(&mut out));
    out
}

/// RFC 4506 §7's example `file` structure.
#[derive(Debug, PartialEq)]
struct File<'a> {
    filename: &'a [u8],
    filetype: FileType<'a>,
    owner: &'a [u8],
    data: &'a [u8],
}

#[derive(Debug, PartialEq)]
enum FileType<'a> {
    Text,
    Data { creator: &'a [u8] },
    Exec { interpretor: &'a [u8] },
}

const MAXUSERNAME: u32 = 32;
const MAXFILELEN: u32 = 65535;
const MAXNAMELEN: u32 = 255;

impl<'a> Decode<'a> for File<'a> {
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        r.named("file", |r| {
            let filename = r.named("filename", |r| r.read_string(MAXNAMELEN))?;
            let filetype = match r.read_enum()? {
                0 => FileType::Text,
                1 => FileType::Data {
                    creator: r.read_string(MAXNAMELEN)?,
                },
                2 => FileType::Exec {
                    interpretor: r.read_string(MAXNAMELEN)?,
                },
                value => {
                    return Err(DecodeError::BadDiscriminant {
                        type_name: "filekind",
                        value,
                    })
                }
            };
            Ok(Self {
                filename,
                filetype,
                owner: r.read_string(MAXUSERNAME)?,
                data: r.read_opaque(MAXFILELEN)?,
            })
        })
    }
}

impl Encode for File<'_> {
    fn encode(&self, w: &mut Writer<'_>) {
        w.write_string(self.filename);
        match self.filetype {
            FileType::Text => w.write_u32(0),
            FileType::Data { creator } => {
                w.write_u32(1);
                w.write_string(creator);
            }
            FileType::Exec { interpretor } => {
                w.write_u32(2);
                w.write_string(interpretor);
            }
        }
        w.write_string(self.owner);
        w.write_opaque(self.data);
    }
}

/// RFC 4506 §7, verbatim.
const RFC4506_FILE: [u8; 48] = hex!(
    "00000009 73696c6c 7970726f 67000000"
    "00000002 00000004 6c697370"
    "00000004 6a6f686e"
    "00000006 28717569 74290000"
);

#[test]
fn rfc4506_file_example_round_trips() {
    let file = File {
        filename: b"sillyprog",
        filetype: FileType::Exec {
            interpretor: b"lisp",
        },
        owner: b"john",
        data: b"(quit)",
    };
    assert_eq!(encode(&file), RFC4506_FILE);
    let mut r = Reader::new(&RFC4506_FILE);
    assert_eq!(File::decode(&mut r), Ok(file));
    r.finish("file").unwrap();
}

#[test]
fn rfc4506_file_example_errors_name_the_type() {
    // Truncated inside `owner`: the label of the innermost `named` wins.
    let mut r = Reader::new(&RFC4506_FILE[..30]);
    let err = File::decode(&mut r).unwrap_err();
    assert_eq!(
        err,
        DecodeError::UnexpectedEnd {
            type_name: "file",
            needed: 4,
            remaining: 2
        }
    );
    let mut too_long = RFC4506_FILE;
    too_long[3] = 0xFF; // filename length 255 > remaining
    let err = File::decode(&mut Reader::new(&too_long)).unwrap_err();
    assert_eq!(err.type_name(), "filename");
    let mut bad_kind = RFC4506_FILE;
    bad_kind[19] = 7;
    assert_eq!(
        File::decode(&mut Reader::new(&bad_kind)),
        Err(DecodeError::BadDiscriminant {
            type_name: "filekind",
            value: 7
        })
    );
}

#[test]
fn integers_are_big_endian_twos_complement() {
    assert_eq!(encode(&0x0102_0304u32), hex!("01020304"));
    assert_eq!(encode(&-1i32), hex!("ffffffff"));
    assert_eq!(encode(&i32::MIN), hex!("80000000"));
    assert_eq!(encode(&0x0102_0304_0506_0708u64), hex!("0102030405060708"));
    assert_eq!(encode(&-2i64), hex!("fffffffffffffffe"));
    assert_eq!(encode(&true), hex!("00000001"));
    assert_eq!(encode(&false), hex!("00000000"));

    let mut r = Reader::new(&hex!(
        "fffffffe 00000000 00000001 80000000 00000000 00000001"
    ));
    assert_eq!(r.read_i32(), Ok(-2));
    assert_eq!(r.read_u64(), Ok(1));
    assert_eq!(r.read_i64(), Ok(i64::MIN));
    assert_eq!(r.read_bool(), Ok(true));
    assert_eq!(r.remaining(), 0);
    assert_eq!(r.position(), 24);
}

#[test]
fn bool_accepts_only_zero_and_one() {
    for (bytes, want) in [
        (hex!("00000000"), Ok(false)),
        (hex!("00000001"), Ok(true)),
        (hex!("00000002"), Err(DecodeError::BadBool(2))),
        (hex!("01000000"), Err(DecodeError::BadBool(0x0100_0000))),
        (hex!("ffffffff"), Err(DecodeError::BadBool(u32::MAX))),
    ] {
        assert_eq!(Reader::new(&bytes).read_bool(), want);
    }
}

#[test]
fn short_input_names_the_primitive() {
    let mut r = Reader::new(&[0, 0, 0]);
    assert_eq!(
        r.read_u32(),
        Err(DecodeError::UnexpectedEnd {
            type_name: "unsigned int",
            needed: 4,
            remaining: 3
        })
    );
    assert_eq!(
        Reader::new(&[0; 7]).read_u64().unwrap_err().type_name(),
        "unsigned hyper"
    );
    assert_eq!(
        Reader::new(&[0; 7]).read_i64().unwrap_err().type_name(),
        "hyper"
    );
    assert_eq!(Reader::new(&[]).read_i32().unwrap_err().type_name(), "int");
    assert_eq!(
        Reader::new(&[]).read_bool().unwrap_err().type_name(),
        "bool"
    );
    assert_eq!(
        Reader::new(&[]).read_enum().unwrap_err().type_name(),
        "enum"
    );
    assert_eq!(
        Reader::new(&[]).read_opaque(8).unwrap_err().type_name(),
        "opaque<>"
    );
    assert_eq!(
        Reader::new(&[]).read_string(8).unwrap_err().type_name(),
        "string<>"
    );
    assert_eq!(
        Reader::new(&[])
            .read_array_len(8, 4)
            .unwrap_err()
            .type_name(),
        "array<>"
    );
    assert_eq!(
        Reader::new(&[])
            .read_fixed_opaque(1)
            .unwrap_err()
            .type_name(),
        "opaque[]"
    );
}

#[test]
fn named_labels_nest_and_restore() {
    let mut r = Reader::new(&[]);
    let err = r
        .named("outer", |r| r.named("inner", |r| r.read_u32()))
        .unwrap_err();
    assert_eq!(err.type_name(), "inner");
    let err = r
        .named("outer", |r| {
            r.named("inner", |_| Ok(()))?;
            r.read_u32()
        })
        .unwrap_err();
    assert_eq!(err.type_name(), "outer");
    assert_eq!(r.read_u32().unwrap_err().type_name(), "unsigned int");
}

/// Opaque data of every length modulo 4: exact bytes, and zero padding on write.
#[test]
fn variable_opaque_padding() {
    let cases: [(&[u8], &[u8]); 6] = [
        (b"", &hex!("00000000")),
        (b"a", &hex!("00000001 61000000")),
        (b"ab", &hex!("00000002 61620000")),
        (b"abc", &hex!("00000003 61626300")),
        (b"abcd", &hex!("00000004 61626364")),
        (b"abcde", &hex!("00000005 61626364 65000000")),
    ];
    for (data, wire) in cases {
        let mut out = Vec::new();
        Writer::new(&mut out).write_opaque(data);
        assert_eq!(out, wire, "{data:?}");
        let mut out = Vec::new();
        Writer::new(&mut out).write_string(data);
        assert_eq!(out, wire, "{data:?}");
        let mut r = Reader::new(wire);
        assert_eq!(r.read_opaque(5), Ok(data));
        assert_eq!(r.remaining(), 0);
        assert_eq!(Reader::new(wire).read_string(5), Ok(data));
        // Missing padding is a truncation, not a short read.
        if padding(data.len()) > 0 {
            let short = &wire[..wire.len() - 1];
            assert_eq!(
                Reader::new(short).read_opaque(5),
                Err(DecodeError::UnexpectedEnd {
                    type_name: "opaque<>",
                    needed: padded_len(data.len()),
                    remaining: short.len() - 4
                })
            );
        }
    }
}

#[test]
fn fixed_opaque_padding() {
    for n in 0..=5usize {
        let data: Vec<u8> = (1..=n as u8).collect();
        let mut out = Vec::new();
        Writer::new(&mut out).write_fixed_opaque(&data);
        assert_eq!(out.len(), padded_len(n));
        assert_eq!(&out[..n], &data[..]);
        assert!(out[n..].iter().all(|&b| b == 0));
        let mut r = Reader::new(&out);
        assert_eq!(r.read_fixed_opaque(n), Ok(&data[..]));
        assert_eq!(r.remaining(), 0);
    }
    assert_eq!(
        <[u8; 3]>::decode(&mut Reader::new(&hex!("01020300"))),
        Ok([1, 2, 3])
    );
    assert_eq!(encode(&[9u8; 5]), hex!("09090909 09000000"));
}

/// RFC 4506 says padding MUST be zero; like Linux we accept anything.
#[test]
fn nonzero_padding_is_accepted() {
    let mut r = Reader::new(&hex!("00000001 61ffffff 62ff0000"));
    assert_eq!(r.read_opaque(4), Ok(&b"a"[..]));
    assert_eq!(r.read_fixed_opaque(2), Ok(&hex!("62ff")[..]));
    assert_eq!(r.remaining(), 0);
}

#[test]
fn length_over_max_is_rejected_before_bounds() {
    let wire = hex!("00000006 61626364 65660000");
    assert_eq!(
        Reader::new(&wire).read_opaque(5),
        Err(DecodeError::LengthLimit {
            type_name: "opaque<>",
            len: 6,
            max: 5
        })
    );
    assert_eq!(
        Reader::new(&wire).named("filename3", |r| r.read_string(5)),
        Err(DecodeError::LengthLimit {
            type_name: "filename3",
            len: 6,
            max: 5
        })
    );
    assert_eq!(Reader::new(&wire).read_opaque(6), Ok(&b"abcdef"[..]));
}

/// A hostile 0xFFFF_FFFF length fails on the length check; nothing is allocated.
#[test]
fn huge_declared_lengths_are_rejected() {
    let wire = hex!("ffffffff 00000000");
    assert_eq!(
        Reader::new(&wire).read_opaque(1024),
        Err(DecodeError::LengthLimit {
            type_name: "opaque<>",
            len: 0xFFFF_FFFF,
            max: 1024
        })
    );
    // Even with no maximum, the remaining-bytes check catches it.
    assert_eq!(
        Reader::new(&wire).read_opaque(u32::MAX),
        Err(DecodeError::UnexpectedEnd {
            type_name: "opaque<>",
            needed: padded_len(0xFFFF_FFFF),
            remaining: 4
        })
    );
    assert_eq!(
        Reader::new(&wire).read_array_len(u32::MAX, 4),
        Err(DecodeError::UnexpectedEnd {
            type_name: "array<>",
            needed: 0xFFFF_FFFF * 4,
            remaining: 4
        })
    );
    assert_eq!(
        Reader::new(&wire)
            .read_array::<u64>(u32::MAX, 8)
            .unwrap_err()
            .type_name(),
        "array<>"
    );
    assert_eq!(
        Reader::new(&wire).read_array_len(16, 4),
        Err(DecodeError::LengthLimit {
            type_name: "array<>",
            len: 0xFFFF_FFFF,
            max: 16
        })
    );
    assert_eq!(
        Reader::new(&wire)
            .read_fixed_opaque(usize::MAX)
            .unwrap_err()
            .type_name(),
        "opaque[]"
    );
}

#[test]
fn array_len_checks_count_against_remaining() {
    let wire = hex!("00000003 00000001 00000002 00000003");
    assert_eq!(Reader::new(&wire).read_array_len(3, 4), Ok(3));
    assert_eq!(
        Reader::new(&wire).read_array_len(3, 8),
        Err(DecodeError::UnexpectedEnd {
            type_name: "array<>",
            needed: 24,
            remaining: 12
        })
    );
    // min_elem_size 0 checks the maximum only.
    assert_eq!(
        Reader::new(&hex!("00000100")).read_array_len(256, 0),
        Ok(256)
    );
    assert_eq!(
        Reader::new(&wire).read_array::<u32>(3, 4),
        Ok(vec![1, 2, 3])
    );
    // Elements that are larger than declared run out of input.
    assert!(Reader::new(&wire).read_array::<u64>(3, 4).is_err());
}

#[test]
fn optional_data() {
    assert_eq!(encode(&Some(7u32)), hex!("00000001 00000007"));
    assert_eq!(encode(&None::<u32>), hex!("00000000"));
    assert_eq!(
        Option::<u32>::decode(&mut Reader::new(&hex!("00000001 00000007"))),
        Ok(Some(7))
    );
    assert_eq!(
        Option::<u32>::decode(&mut Reader::new(&hex!("00000000"))),
        Ok(None)
    );
    assert_eq!(
        Reader::new(&hex!("00000002 00000007")).read_optional(Reader::read_u32),
        Err(DecodeError::BadBool(2))
    );
    assert!(Reader::new(&hex!("00000001"))
        .read_optional(Reader::read_u32)
        .is_err());
}

#[test]
fn sub_reader_is_bounded() {
    let wire = hex!("00000001 00000002 00000003");
    let mut r = Reader::new(&wire);
    let mut sub = r.sub(4).unwrap();
    assert_eq!(r.read_u32(), Ok(2));
    assert_eq!(sub.read_u32(), Ok(1));
    assert_eq!(sub.read_u32().unwrap_err().type_name(), "unsigned int");
    assert!(r.sub(5).is_err());
    assert_eq!(r.peek_rest(), hex!("00000003"));
    let sub = r.sub(4).unwrap();
    assert_eq!(
        sub.finish("x").unwrap_err(),
        DecodeError::TrailingData {
            type_name: "x",
            len: 4
        }
    );
    r.finish("wire").unwrap();
}

#[test]
fn finish_rejects_trailing_data() {
    let mut r = Reader::new(&hex!("00000001 00"));
    r.read_u32().unwrap();
    assert_eq!(
        r.finish("args"),
        Err(DecodeError::TrailingData {
            type_name: "args",
            len: 1
        })
    );
    assert_eq!(
        DecodeError::TrailingData {
            type_name: "args",
            len: 1
        }
        .to_string(),
        "args: 1 bytes of trailing data"
    );
}

#[test]
fn writer_slots_and_truncate() {
    let mut out = vec![0xEE];
    let mut w = Writer::new(&mut out);
    assert_eq!(w.len(), 1);
    let slot = w.reserve_u32();
    assert_eq!(slot.position(), 1);
    w.write_string(b"abc");
    let n = w.len_since(slot) as u32;
    w.patch_u32(slot, n);
    let rollback = w.len();
    w.write_u64(u64::MAX);
    w.truncate(rollback);
    w.write_optional(Some(&1u32));
    assert_eq!(
        w.as_slice(),
        hex!("ee 00000008 00000003 61626300 00000001 00000001")
    );
    assert!(!w.is_empty());
}

#[derive(Debug, Clone)]
enum Item {
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    Bool(bool),
    Opaque(Vec<u8>),
    Fixed(Vec<u8>),
    Array(Vec<u32>),
    Optional(Option<u64>),
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        any::<u32>().prop_map(Item::U32),
        any::<i32>().prop_map(Item::I32),
        any::<u64>().prop_map(Item::U64),
        any::<i64>().prop_map(Item::I64),
        any::<bool>().prop_map(Item::Bool),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Item::Opaque),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Item::Fixed),
        proptest::collection::vec(any::<u32>(), 0..10).prop_map(Item::Array),
        any::<Option<u64>>().prop_map(Item::Optional),
    ]
}

fn write_item(w: &mut Writer<'_>, item: &Item) {
    match item {
        Item::U32(v) => v.encode(w),
        Item::I32(v) => v.encode(w),
        Item::U64(v) => v.encode(w),
        Item::I64(v) => v.encode(w),
        Item::Bool(v) => v.encode(w),
        Item::Opaque(v) => w.write_opaque(v),
        Item::Fixed(v) => w.write_fixed_opaque(v),
        Item::Array(v) => {
            w.write_u32(v.len() as u32);
            v.iter().for_each(|x| x.encode(w));
        }
        Item::Optional(v) => v.encode(w),
    }
}

fn check_item(r: &mut Reader<'_>, item: &Item) {
    match item {
        Item::U32(v) => assert_eq!(u32::decode(r), Ok(*v)),
        Item::I32(v) => assert_eq!(i32::decode(r), Ok(*v)),
        Item::U64(v) => assert_eq!(u64::decode(r), Ok(*v)),
        Item::I64(v) => assert_eq!(i64::decode(r), Ok(*v)),
        Item::Bool(v) => assert_eq!(bool::decode(r), Ok(*v)),
        Item::Opaque(v) => assert_eq!(r.read_opaque(40), Ok(&v[..])),
        Item::Fixed(v) => assert_eq!(r.read_fixed_opaque(v.len()), Ok(&v[..])),
        Item::Array(v) => assert_eq!(r.read_array::<u32>(10, 4).as_ref(), Ok(v)),
        Item::Optional(v) => assert_eq!(Option::<u64>::decode(r), Ok(*v)),
    }
}

proptest! {
    #[test]
    fn encode_decode_round_trip(items in proptest::collection::vec(item(), 0..20)) {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        for item in &items {
            let before = w.len();
            write_item(&mut w, item);
            prop_assert_eq!((w.len() - before) % 4, 0);
        }
        let mut r = Reader::new(&out);
        for item in &items {
            check_item(&mut r, item);
        }
        prop_assert!(r.finish("items").is_ok());
    }

    #[test]
    fn truncated_input_errors_without_panicking(
        items in proptest::collection::vec(item(), 1..10),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        items.iter().for_each(|i| write_item(&mut w, i));
        let cut = cut.index(out.len() + 1);
        let mut r = Reader::new(&out[..cut]);
        // Decoding the same items fails (cleanly) exactly when bytes are missing.
        let mut failed = false;
        for item in &items {
            let ok = match item {
                Item::U32(_) => r.read_u32().is_ok(),
                Item::I32(_) => r.read_i32().is_ok(),
                Item::U64(_) => r.read_u64().is_ok(),
                Item::I64(_) => r.read_i64().is_ok(),
                Item::Bool(_) => r.read_bool().is_ok(),
                Item::Opaque(_) => r.read_opaque(40).is_ok(),
                Item::Fixed(v) => r.read_fixed_opaque(v.len()).is_ok(),
                Item::Array(_) => r.read_array::<u32>(10, 4).is_ok(),
                Item::Optional(_) => Option::<u64>::decode(&mut r).is_ok(),
            };
            if !ok {
                failed = true;
                break;
            }
        }
        prop_assert_eq!(failed, cut < out.len());
    }

    #[test]
    fn reader_fuzz_target_never_panics(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        rnfs_xdr::fuzzing::xdr_reader(&data);
    }
}

//! Record marking (RFC 5531 §11): framing, reassembly, limits.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a panic is the failure report"
)]

use hex_literal::hex;
use proptest::prelude::*;
use rnfs_rpc::record::{MAX_FRAGMENTS, MAX_FRAGMENT_LEN};
use rnfs_rpc::{begin_record, encode_record, finish_record, RecordDecoder, RecordError};

/// Feeds `stream` in chunks of `chunk` bytes, draining records after each read.
fn feed(dec: &mut RecordDecoder, stream: &[u8], chunk: usize) -> Result<Vec<Vec<u8>>, RecordError> {
    let mut records = Vec::new();
    for piece in stream.chunks(chunk.max(1)) {
        let mut piece = piece;
        while !piece.is_empty() {
            let buf = dec.read_buf();
            assert!(!buf.is_empty());
            let n = buf.len().min(piece.len());
            buf[..n].copy_from_slice(&piece[..n]);
            dec.advance(n);
            piece = &piece[n..];
        }
        while let Some(rec) = dec.next_record()? {
            records.push(rec);
        }
    }
    Ok(records)
}

fn fragment(data: &[u8], last: bool) -> Vec<u8> {
    let mark = data.len() as u32 | if last { 0x8000_0000 } else { 0 };
    let mut out = mark.to_be_bytes().to_vec();
    out.extend_from_slice(data);
    out
}

#[test]
fn encode_record_writes_one_last_fragment() {
    let mut out = vec![0xFF];
    encode_record(&hex!("01020304 05"), &mut out);
    assert_eq!(out, hex!("ff 80000005 01020304 05"));
    let mut out = Vec::new();
    encode_record(&[], &mut out);
    assert_eq!(out, hex!("80000000"));
}

#[test]
fn begin_finish_patches_the_mark() {
    let mut out = b"xy".to_vec();
    let start = begin_record(&mut out);
    assert_eq!(start, 2);
    out.extend_from_slice(&[7; 10]);
    finish_record(&mut out, start);
    assert_eq!(&out[2..6], hex!("8000000a"));
    assert_eq!(MAX_FRAGMENT_LEN, 0x7FFF_FFFF);
}

#[test]
fn single_and_multi_fragment_records() {
    let mut stream = fragment(b"hello", true);
    stream.extend(fragment(b"ab", false));
    stream.extend(fragment(b"", false));
    stream.extend(fragment(b"cde", false));
    stream.extend(fragment(b"f", true));
    stream.extend(fragment(b"", true));
    let mut dec = RecordDecoder::new(64);
    let records = feed(&mut dec, &stream, stream.len()).unwrap();
    assert_eq!(records, [b"hello".to_vec(), b"abcdef".to_vec(), Vec::new()]);
    assert_eq!(dec.buffered(), 0);
}

#[test]
fn every_split_point_gives_the_same_records() {
    let mut stream = fragment(b"first record", true);
    stream.extend(fragment(b"sec", false));
    stream.extend(fragment(b"ond", true));
    stream.extend(fragment(&[0xAA; 100], true));
    let want = vec![
        b"first record".to_vec(),
        b"second".to_vec(),
        vec![0xAA; 100],
    ];
    // One byte at a time.
    assert_eq!(
        feed(&mut RecordDecoder::new(128), &stream, 1).unwrap(),
        want
    );
    // Two pieces, split at every byte boundary.
    for split in 0..=stream.len() {
        let mut dec = RecordDecoder::new(128);
        let mut records = feed(&mut dec, &stream[..split], split).unwrap();
        records.extend(feed(&mut dec, &stream[split..], stream.len()).unwrap());
        assert_eq!(records, want, "split at {split}");
        assert_eq!(dec.buffered(), 0);
    }
}

#[test]
fn partial_data_is_kept_and_counted() {
    let stream = fragment(b"abcdefgh", true);
    let mut dec = RecordDecoder::new(64);
    assert!(feed(&mut dec, &stream[..6], 6).unwrap().is_empty());
    assert_eq!(dec.buffered(), 2);
    assert!(!dec.has_complete_record());
    assert_eq!(
        feed(&mut dec, &stream[6..], 64).unwrap(),
        [b"abcdefgh".to_vec()]
    );
}

#[test]
fn has_complete_record_looks_ahead_without_consuming() {
    let mut stream = fragment(b"one", true);
    stream.extend(fragment(b"t", false));
    stream.extend(fragment(b"wo", true));
    stream.extend(fragment(b"thr", true));
    let mut dec = RecordDecoder::new(64);
    assert!(!dec.has_complete_record());
    let buf = dec.read_buf();
    buf[..stream.len() - 1].copy_from_slice(&stream[..stream.len() - 1]);
    dec.advance(stream.len() - 1);
    assert!(dec.has_complete_record());
    assert_eq!(dec.next_record().unwrap(), Some(b"one".to_vec()));
    assert!(dec.has_complete_record());
    assert_eq!(dec.next_record().unwrap(), Some(b"two".to_vec()));
    assert!(!dec.has_complete_record()); // "thr" lacks its last byte
    assert_eq!(dec.next_record().unwrap(), None);
    assert_eq!(dec.buffered(), 2);
}

/// Mid-fragment, the look-ahead counts the whole fragment towards the
/// record's size (not only the bytes copied so far), so it foresees the
/// error the next fragment's mark causes. Found by the fuzz harness.
#[test]
fn has_complete_record_counts_the_fragment_being_copied() {
    let mut stream = fragment(&[1; 60], false);
    stream.extend(fragment(&[2; 60], true)); // 120 bytes in all, over 100
    let mut dec = RecordDecoder::new(100);
    assert!(feed(&mut dec, &stream[..34], 34).unwrap().is_empty());
    assert_eq!(dec.buffered(), 30);
    let rest = &stream[34..68]; // the first fragment's last 30 bytes, the second mark
    dec.read_buf()[..rest.len()].copy_from_slice(rest);
    dec.advance(rest.len());
    assert!(dec.has_complete_record());
    assert!(matches!(
        dec.next_record(),
        Err(RecordError::TooLarge {
            size: 120,
            max: 100
        })
    ));
}

/// The limit is enforced from the mark alone, before any data arrives.
#[test]
fn oversized_record_is_rejected_from_its_mark() {
    let mut dec = RecordDecoder::new(1000);
    let err = feed(&mut dec, &hex!("800003e9"), 4).unwrap_err();
    assert_eq!(
        err,
        RecordError::TooLarge {
            size: 1001,
            max: 1000
        }
    );
    assert!(dec.has_complete_record());
    // The error is sticky.
    assert_eq!(dec.next_record(), Err(err));

    let mut dec = RecordDecoder::new(1000);
    assert_eq!(
        feed(&mut dec, &hex!("ffffffff"), 4),
        Err(RecordError::TooLarge {
            size: 0x7FFF_FFFF,
            max: 1000
        })
    );
    // Exactly max is fine.
    let mut dec = RecordDecoder::new(1000);
    assert_eq!(
        feed(&mut dec, &fragment(&[1; 1000], true), 4096)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn accumulated_fragments_over_the_limit_are_rejected() {
    let mut stream = fragment(&[0; 600], false);
    stream.extend_from_slice(&hex!("00000191")); // 401 more, no data needed
    let mut dec = RecordDecoder::new(1000);
    assert_eq!(
        feed(&mut dec, &stream, 7),
        Err(RecordError::TooLarge {
            size: 1001,
            max: 1000
        })
    );
}

#[test]
fn empty_fragment_flood_is_bounded() {
    let mut stream = Vec::new();
    for _ in 0..MAX_FRAGMENTS - 1 {
        stream.extend(fragment(b"", false));
    }
    stream.extend(fragment(b"x", true));
    let mut dec = RecordDecoder::new(16);
    assert_eq!(feed(&mut dec, &stream, 1000).unwrap(), [b"x".to_vec()]);

    let flood: Vec<u8> = std::iter::repeat_n(hex!("00000000"), 100_000)
        .flatten()
        .collect();
    let mut dec = RecordDecoder::new(16);
    assert_eq!(
        feed(&mut dec, &flood, 65536),
        Err(RecordError::TooManyFragments { max: MAX_FRAGMENTS })
    );
}

#[test]
fn large_records_grow_the_buffer_within_bounds() {
    let big: Vec<u8> = (0..1_000_000u32).map(|i| i as u8).collect();
    let mut stream = Vec::new();
    encode_record(&big, &mut stream);
    encode_record(b"tail", &mut stream);
    let mut dec = RecordDecoder::new(big.len());
    let mut records = Vec::new();
    let mut input = &stream[..];
    while !input.is_empty() {
        let buf = dec.read_buf();
        assert!(!buf.is_empty() && buf.len() <= 128 * 1024, "{}", buf.len());
        let n = buf.len().min(input.len()).min(10_000);
        buf[..n].copy_from_slice(&input[..n]);
        dec.advance(n);
        input = &input[n..];
        while let Some(rec) = dec.next_record().unwrap() {
            records.push(rec);
        }
    }
    assert_eq!(records, [big, b"tail".to_vec()]);
}

/// Many small records arriving in big reads, not drained between reads: the
/// buffer grows up to its limit (max_record plus marks), then still works.
#[test]
fn undrained_reads_are_bounded() {
    let mut stream = Vec::new();
    for i in 0..20_000u32 {
        encode_record(&i.to_be_bytes(), &mut stream);
    }
    let mut dec = RecordDecoder::new(100);
    let mut input = &stream[..];
    let mut total = 0;
    while !input.is_empty() {
        let buf = dec.read_buf();
        if buf.is_empty() {
            // Caller broke the contract; draining recovers.
            while dec.next_record().unwrap().is_some() {
                total += 1;
            }
            continue;
        }
        let n = buf.len().min(input.len());
        buf[..n].copy_from_slice(&input[..n]);
        dec.advance(n);
        input = &input[n..];
    }
    while let Some(rec) = dec.next_record().unwrap() {
        assert_eq!(rec.len(), 4);
        total += 1;
    }
    assert_eq!(total, 20_000);
}

/// Linear work: 1 MiB of small records fed one byte per read.
#[test]
fn byte_at_a_time_is_linear() {
    let mut stream = Vec::new();
    while stream.len() < 1 << 20 {
        encode_record(&[0x5A; 60], &mut stream);
    }
    let mut dec = RecordDecoder::new(64);
    let records = feed(&mut dec, &stream, 1).unwrap();
    assert_eq!(records.len(), stream.len() / 64);
}

#[test]
fn advance_is_clamped() {
    let mut dec = RecordDecoder::new(8);
    let len = dec.read_buf().len();
    dec.advance(len + 100);
    assert_eq!(dec.buffered(), len);
}

fn record_strategy() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..300)
}

proptest! {
    /// Records split into arbitrary fragments and fed in arbitrary chunks come back intact.
    #[test]
    fn fragmented_records_round_trip(
        records in proptest::collection::vec(record_strategy(), 0..8),
        frag_size in 1usize..100,
        chunk in 1usize..200,
    ) {
        let mut stream = Vec::new();
        for rec in &records {
            let mut frags = rec.chunks(frag_size).peekable();
            if frags.peek().is_none() {
                stream.extend(fragment(&[], true));
            }
            while let Some(f) = frags.next() {
                stream.extend(fragment(f, frags.peek().is_none()));
            }
        }
        let mut dec = RecordDecoder::new(300);
        prop_assert_eq!(feed(&mut dec, &stream, chunk).unwrap(), records);
        prop_assert_eq!(dec.buffered(), 0);
    }

    /// Arbitrary bytes never panic the deframer or the dispatcher.
    #[test]
    fn byte_soup_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        rnfs_rpc::fuzzing::record_deframer(&data);
        rnfs_rpc::fuzzing::rpc_call(&data);
        let mut dec = RecordDecoder::new(rnfs_rpc::fuzzing::FUZZ_MAX_RECORD);
        if let Ok(records) = feed(&mut dec, &data, 13) {
            for rec in records {
                rnfs_rpc::fuzzing::rpc_call(&rec);
            }
        }
    }

    /// Calls with valid headers and arbitrary tails never panic the dispatcher.
    #[test]
    fn call_soup_never_panics(
        xid in any::<u32>(),
        prog in prop_oneof![Just(100_003u32), Just(100_005), any::<u32>()],
        vers in 0u32..5,
        proc_ in 0u32..4,
        tail in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut call = Vec::new();
        for v in [xid, 0, 2, prog, vers, proc_] {
            call.extend_from_slice(&v.to_be_bytes());
        }
        call.extend_from_slice(&tail);
        rnfs_rpc::fuzzing::rpc_call(&call);
    }
}

#[test]
fn peek_shows_the_head_of_the_next_complete_record_only() {
    let mut dec = RecordDecoder::new(1024);
    let push = |dec: &mut RecordDecoder, bytes: &[u8]| {
        dec.read_buf()[..bytes.len()].copy_from_slice(bytes);
        dec.advance(bytes.len());
    };
    // A one-fragment record, then the first half of a second.
    push(&mut dec, &hex!("80000008 01020304 05060708 80000008 0a0b"));
    assert_eq!(dec.peek_complete_record(4), Some(&hex!("01020304")[..]));
    assert_eq!(
        dec.peek_complete_record(8),
        Some(&hex!("0102030405060708")[..])
    );
    assert_eq!(
        dec.peek_complete_record(9),
        None,
        "longer than the fragment"
    );
    assert_eq!(
        dec.next_record().unwrap().unwrap(),
        hex!("0102030405060708")
    );
    assert_eq!(
        dec.peek_complete_record(2),
        None,
        "the second is incomplete"
    );
    push(&mut dec, &hex!("0c0d 0e0f1011"));
    assert_eq!(dec.peek_complete_record(2), Some(&hex!("0a0b")[..]));
    assert_eq!(
        dec.next_record().unwrap().unwrap(),
        hex!("0a0b0c0d0e0f1011")
    );
    assert_eq!(dec.peek_complete_record(0), None, "nothing buffered");
    // Two fragments: the head must lie in the first, and the whole record be here.
    push(&mut dec, &hex!("00000004 21222324 80000002"));
    assert_eq!(dec.peek_complete_record(4), None, "last fragment missing");
    push(&mut dec, &hex!("2526"));
    assert_eq!(dec.peek_complete_record(4), Some(&hex!("21222324")[..]));
    assert_eq!(dec.peek_complete_record(5), None, "spans two fragments");
    assert_eq!(dec.next_record().unwrap().unwrap(), hex!("212223242526"));
    // A failed stream shows nothing.
    push(&mut dec, &hex!("80001000"));
    assert!(dec.next_record().is_err());
    assert_eq!(dec.peek_complete_record(0), None);
}

/// With `grow_on_full_reads`, reads that fill the read buffer (a socket with
/// a backlog of pipelined calls) double it up to 64 KiB, and it is kept
/// through pauses; reads that do not fill it never grow it, nor do any
/// without the option.
#[test]
fn full_reads_grow_the_buffer_up_to_64_kib() {
    let mut stream = Vec::new();
    while stream.len() < 1 << 20 {
        encode_record(&[7; 4092], &mut stream);
    }
    let mut dec = RecordDecoder::new(1 << 20).grow_on_full_reads();
    let initial = dec.read_buf().len();
    let mut input = &stream[..];
    let mut read = |dec: &mut RecordDecoder, most: usize| {
        let buf = dec.read_buf();
        let offered = buf.len();
        let n = offered.min(most).min(input.len());
        buf[..n].copy_from_slice(&input[..n]);
        dec.advance(n);
        input = &input[n..];
        while let Some(rec) = dec.next_record().unwrap() {
            assert_eq!(rec.len(), 4092);
        }
        offered
    };
    // Reads that do not fill the buffer never grow it.
    for _ in 0..4 {
        assert_eq!(read(&mut dec, 4096), initial);
    }
    let offered: Vec<usize> = (0..6).map(|_| read(&mut dec, usize::MAX)).collect();
    assert_eq!(
        offered,
        [
            initial,
            2 * initial,
            4 * initial,
            8 * initial,
            64 << 10,
            64 << 10
        ]
    );
    // The socket runs dry: the buffer stays for the next burst.
    dec.shrink_if_idle();
    assert_eq!(read(&mut dec, 4096), 64 << 10);
    // Without the option, full reads leave the buffer as it is.
    let mut plain = RecordDecoder::new(1 << 20);
    for _ in 0..4 {
        let buf = plain.read_buf();
        assert_eq!(buf.len(), initial);
        let n = buf.len();
        buf.copy_from_slice(&stream[..n]);
        plain.advance(n);
        while plain.next_record().unwrap().is_some() {}
    }
}

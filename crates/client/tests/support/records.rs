//! Record-marked RPC messages over a TCP stream, for the test proxies.

use std::io::{Read, Write};
use std::net::TcpStream;

use rnfs_rpc::{encode_record, RecordDecoder};

/// Writes `record` with its record mark; whether it was all written.
pub(crate) fn write_record(to: &mut TcpStream, record: &[u8]) -> bool {
    let mut framed = Vec::with_capacity(record.len() + 4);
    encode_record(record, &mut framed);
    to.write_all(&framed).is_ok()
}

/// Reads records from `from` and hands each to `out` until either fails.
pub(crate) fn relay(mut from: TcpStream, mut out: impl FnMut(&[u8]) -> bool) {
    let mut decoder = RecordDecoder::new(4 << 20);
    loop {
        while let Ok(Some(rec)) = decoder.next_record() {
            if !out(&rec) {
                return;
            }
        }
        match from.read(decoder.read_buf()) {
            Ok(0) | Err(_) => return,
            Ok(n) => decoder.advance(n),
        }
    }
}

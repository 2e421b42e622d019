//! Fuzz target bodies, public so that `fuzz/fuzz_targets/*.rs` stay three lines and
//! so that ordinary tests can replay the seed corpus through them.
#![doc(hidden)]

use std::sync::Arc;

use rnfs_xdr::{Encode, Reader, Writer};

use crate::message::ReplyStatus;
use crate::record::{encode_record, RecordDecoder, RecordError};
use crate::service::{
    decode_reply, CallContext, DispatchOutcome, Dispatcher, Service, ServiceError,
};

/// `max_record` used by the fuzz targets: small, so the limit is reachable.
pub const FUZZ_MAX_RECORD: usize = 4096;

/// Feeds the input to a [`RecordDecoder`] in chunks whose sizes come from the first
/// byte, and checks the result equals feeding it in one piece; then re-frames the
/// records and checks they decode to themselves.
pub fn record_deframer(data: &[u8]) {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    let whole = deframe(stream, &mut |_| usize::MAX, Reads::OneTarget);
    let mut state = u32::from(seed) | 1;
    let mut chunks = |_| {
        // xorshift: deterministic chunk sizes of 1..=64 bytes.
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        (state % 64) as usize + 1
    };
    let chunked = deframe(stream, &mut chunks, Reads::OneTarget);
    assert_eq!(whole, chunked);
    let vectored = deframe(stream, &mut chunks, Reads::Vectored);
    assert_eq!(whole, vectored);

    let (records, _) = whole;
    let mut reframed = Vec::new();
    for rec in &records {
        encode_record(rec, &mut reframed);
    }
    let (again, err) = deframe(&reframed, &mut |_| usize::MAX, Reads::OneTarget);
    assert_eq!(again, records);
    assert_eq!(err, None);
}

/// How [`deframe`] hands bytes to the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reads {
    /// Into the direct target when one is offered (and the chunk is not
    /// unbounded), else into the read buffer.
    OneTarget,
    /// Into both targets of [`RecordDecoder::read_targets`], in order.
    Vectored,
}

/// Records decoded from `stream`, fed in chunks of `chunk(i)` bytes, and the error
/// that stopped decoding, if any.
fn deframe(
    stream: &[u8],
    chunk: &mut dyn FnMut(usize) -> usize,
    reads: Reads,
) -> (Vec<Vec<u8>>, Option<RecordError>) {
    // Direct reads from one byte on: the chunked pass takes them whenever
    // offered, the whole pass never; both must agree.
    let mut dec = RecordDecoder::new(FUZZ_MAX_RECORD)
        .direct_reads_from(1)
        .grow_on_full_reads();
    let mut records = Vec::new();
    let mut input = stream;
    let mut i = 0;
    loop {
        loop {
            let complete = dec.has_complete_record();
            match dec.next_record() {
                Ok(Some(rec)) => {
                    assert!(complete);
                    assert!(rec.len() <= FUZZ_MAX_RECORD);
                    records.push(rec);
                }
                Ok(None) => {
                    assert!(!complete);
                    break;
                }
                Err(e) => {
                    assert!(complete);
                    assert_eq!(dec.next_record(), Err(e.clone()));
                    return (records, Some(e));
                }
            }
        }
        if input.is_empty() {
            assert!(dec.buffered() <= stream.len());
            return (records, None);
        }
        let want = chunk(i);
        if reads == Reads::Vectored {
            let n = fill_vectored(&mut dec, want, input);
            assert!(n > 0);
            input = &input[n..];
            i += 1;
            continue;
        }
        let direct = if want == usize::MAX {
            None
        } else {
            dec.direct_target()
        };
        let n = if let Some(rec) = direct {
            let spare = rec.capacity() - rec.len();
            assert!(spare > 0);
            let n = want.min(spare).min(input.len());
            rec.extend_from_slice(&input[..n]);
            assert!(
                rec.len() <= rec.capacity(),
                "no reallocation past the fragment"
            );
            dec.direct_filled();
            n
        } else {
            let buf = dec.read_buf();
            assert!(!buf.is_empty());
            let n = want.min(buf.len()).min(input.len());
            buf[..n].copy_from_slice(&input[..n]);
            dec.advance(n);
            n
        };
        input = &input[n..];
        i += 1;
    }
}

/// One vectored read of at most `want` bytes of `input` into
/// [`RecordDecoder::read_targets`]; the bytes taken.
fn fill_vectored(dec: &mut RecordDecoder, want: usize, input: &[u8]) -> usize {
    let want = want.min(input.len());
    if dec.wants_record_buffer() {
        // A used buffer, as the client recycles them: any capacity, stale
        // contents.
        let mut used = Vec::with_capacity(want % 97);
        used.extend(std::iter::repeat_n(0xA5, want % 5));
        dec.supply_record_buffer(used);
    }
    let targets = dec.read_targets();
    let mut n = 0;
    let mut direct_full = true;
    if let Some(rec) = targets.direct {
        let room = targets.direct_room;
        assert!(room > 0 && room <= rec.capacity() - rec.len());
        let capacity = rec.capacity();
        n = want.min(room);
        rec.extend_from_slice(&input[..n]);
        assert_eq!(rec.capacity(), capacity, "no reallocation");
        direct_full = n == room;
    }
    if direct_full {
        assert!(!targets.buf.is_empty());
        let b = (want - n).min(targets.buf.len());
        targets.buf[..b].copy_from_slice(&input[n..n + b]);
        n += b;
    }
    dec.targets_filled(n);
    n
}

/// A dummy program for the fuzz targets and tests: 100003 v3 (NFS's numbers) with
/// NULL (proc 0), an echo of one `opaque<64>` (proc 1), a procedure that writes
/// results then fails with SYSTEM_ERR (proc 2), and PROC_UNAVAIL for the rest.
#[derive(Debug)]
pub struct NullService;

impl Service for NullService {
    fn program(&self) -> u32 {
        100_003
    }
    fn versions(&self) -> (u32, u32) {
        (3, 3)
    }
    fn name(&self) -> &'static str {
        "fuzz-null"
    }
    fn call(
        &self,
        ctx: &CallContext<'_>,
        args: &mut Reader<'_>,
        reply: &mut Writer<'_>,
    ) -> Result<(), ServiceError> {
        match ctx.proc_ {
            0 => Ok(()),
            1 => {
                let data = args.read_opaque(64)?;
                reply.write_opaque(data);
                Ok(())
            }
            2 => {
                reply.write_u32(0xdead_beef);
                Err(ServiceError::SystemErr)
            }
            _ => Err(ServiceError::ProcUnavail),
        }
    }
}

/// The dispatcher used by the `rpc_call` target: [`NullService`] plus MOUNT
/// (100005) v1 and v3 as two services, so PROG_MISMATCH spans both.
pub fn fuzz_dispatcher() -> Dispatcher {
    #[derive(Debug)]
    struct Mount(u32);
    impl Service for Mount {
        fn program(&self) -> u32 {
            100_005
        }
        fn versions(&self) -> (u32, u32) {
            (self.0, self.0)
        }
        fn name(&self) -> &'static str {
            "fuzz-mount"
        }
        fn call(
            &self,
            ctx: &CallContext<'_>,
            _: &mut Reader<'_>,
            _: &mut Writer<'_>,
        ) -> Result<(), ServiceError> {
            match ctx.proc_ {
                0 => Ok(()),
                _ => Err(ServiceError::ProcUnavail),
            }
        }
    }
    let mut d = Dispatcher::new();
    let services: [Arc<dyn Service>; 3] = [
        Arc::new(NullService),
        Arc::new(Mount(1)),
        Arc::new(Mount(3)),
    ];
    for s in services {
        if let Err(e) = d.register(s) {
            unreachable!("fuzz dispatcher: {e}");
        }
    }
    d
}

/// Dispatches the input as one record and checks the reply is one well-formed
/// record whose header matches the outcome.
pub fn rpc_call(data: &[u8]) {
    let dispatcher = fuzz_dispatcher();
    let mut out = vec![0xAA; 3]; // pre-existing bytes must be kept
    let outcome = dispatcher.dispatch(data, None, &mut out);
    assert_eq!(&out[..3], &[0xAA; 3]);
    let reply = &out[3..];
    match outcome {
        DispatchOutcome::Dropped(_) => assert!(reply.is_empty()),
        DispatchOutcome::Replied { xid, status, .. } => {
            let (mut records, err) = deframe(reply, &mut |_| usize::MAX, Reads::OneTarget);
            assert_eq!((records.len(), err), (1, None), "reply is not one record");
            let record = records.remove(0);
            let decoded = match decode_reply(&record) {
                Ok(decoded) => decoded,
                Err(e) => panic!("reply does not decode: {e}"),
            };
            assert_eq!(decoded.header.xid, xid);
            assert_eq!(decoded.header.status, status);
            if status != ReplyStatus::Success {
                assert!(decoded.results.is_empty());
            }
        }
    }
}

/// Decodes the input as a reply record, as a client does with whatever a server
/// sends, and checks that a decoded header re-encodes to one that decodes the
/// same, with the results starting where they did.
pub fn rpc_reply(data: &[u8]) {
    let Ok(reply) = decode_reply(data) else {
        return;
    };
    assert_eq!(reply.results_offset + reply.results.len(), data.len());
    assert_eq!(reply.results, &data[reply.results_offset..]);
    assert_eq!(reply.results_offset % 4, 0);
    let mut again = Vec::new();
    reply.header.encode(&mut Writer::new(&mut again));
    // Padding reads as zero, so only the length and the decoded value must agree.
    assert_eq!(again.len(), reply.results_offset);
    again.extend_from_slice(reply.results);
    match decode_reply(&again) {
        Ok(back) => {
            assert_eq!(back.header, reply.header);
            assert_eq!(back.results, reply.results);
        }
        Err(e) => panic!("re-encoded reply does not decode: {e}"),
    }
}

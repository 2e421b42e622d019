//! The per-call side channel from the NFS service to the handler: which export a
//! call touched and how many bytes READ returned or WRITE accepted.
//!
//! A service runs synchronously inside [`Dispatcher::dispatch`] on the service
//! thread that handles the call, so a thread-local cell is enough: the service
//! writes it (a few plain stores, no atomics), the handler takes it once the
//! reply is built. Only services built with metrics write it
//! ([`NfsService::with_metrics`]), and the handler takes it after every call it
//! records, so a note never leaks into the next call.
//!
//! [`Dispatcher::dispatch`]: rnfs_rpc::Dispatcher::dispatch
//! [`NfsService::with_metrics`]: crate::nfs::NfsService::with_metrics

use std::cell::Cell;

/// What one call touched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CallNote {
    /// The export of the first file handle the call opened: its id and its
    /// dense index (`shard::export_index`).
    pub(crate) export: Option<(u32, u32)>,
    /// READ: bytes returned.
    pub(crate) bytes_read: u32,
    /// WRITE: bytes accepted.
    pub(crate) bytes_written: u32,
    /// The reply was held for coalescing rather than written (set by the
    /// handler after sending, not by services).
    pub(crate) reply_held: bool,
}

impl CallNote {
    const EMPTY: CallNote = CallNote {
        export: None,
        bytes_read: 0,
        bytes_written: 0,
        reply_held: false,
    };
}

thread_local! {
    static NOTE: Cell<CallNote> = const { Cell::new(CallNote::EMPTY) };
}

/// Records the export of the call in progress (the first one noted wins: RENAME
/// and LINK open two handles of one export).
pub(crate) fn export(id: u32, index: u32) {
    NOTE.with(|n| {
        let mut v = n.get();
        if v.export.is_none() {
            v.export = Some((id, index));
            n.set(v);
        }
    });
}

/// Records the bytes a READ returned.
pub(crate) fn read(bytes: u32) {
    NOTE.with(|n| {
        let mut v = n.get();
        v.bytes_read = v.bytes_read.saturating_add(bytes);
        n.set(v);
    });
}

/// Records the bytes a WRITE accepted.
pub(crate) fn written(bytes: u32) {
    NOTE.with(|n| {
        let mut v = n.get();
        v.bytes_written = v.bytes_written.saturating_add(bytes);
        n.set(v);
    });
}

/// Takes this thread's note, leaving it empty.
pub(crate) fn take() -> CallNote {
    NOTE.with(|n| n.replace(CallNote::EMPTY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_returns_the_call_and_clears_it() {
        let _ = take();
        export(7, 0);
        export(9, 1);
        read(10);
        written(3);
        assert_eq!(
            take(),
            CallNote {
                export: Some((7, 0)),
                bytes_read: 10,
                bytes_written: 3,
                reply_held: false,
            }
        );
        assert_eq!(take(), CallNote::default());
    }
}

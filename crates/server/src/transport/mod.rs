//! TCP transport: sockets on mio (edge-triggered epoll) feeding the service-thread
//! scheduler.
//!
//! # Threads
//!
//! - **One acceptor** (`rnfs-accept`) owns the listening sockets. It accepts, applies
//!   `max_connections`, and hands each new socket round-robin to a poller.
//! - **One poller per scheduler pool** (`rnfs-poll-N`), each with its own epoll. A
//!   connection handed to poller *p* becomes `sched.new_task(conn, p)`, so its work is
//!   queued on pool *p*. Pollers do no RPC work: readable → [`Scheduler::notify`];
//!   error → [`Scheduler::close`]; writable → flush the connection's buffered replies.
//! - **Service threads** (the scheduler's) read, dispatch and reply.
//!
//! # Life of a call
//!
//! 1. Bytes arrive; epoll wakes the connection's poller, which calls `notify`: the
//!    scheduler sets the task's `DATA` flag and, unless a thread already owns the
//!    task (`BUSY`), queues it and wakes one idle service thread.
//! 2. That thread gets a [`Claim`](rnfs_sched::Claim) (it now owns `BUSY`). If the
//!    connection has `max_in_flight_per_conn` calls outstanding, or more than
//!    `max_output_per_conn` bytes of replies waiting unsent, it stops here
//!    (back-pressure, see below). Otherwise it clears `DATA` (`take_data`) *before*
//!    reading, so bytes arriving during the read set it again and re-queue the task.
//! 3. It reads the non-blocking socket into the connection's record decoder until one
//!    complete record is assembled or the socket says `WouldBlock`. A partial record
//!    stays in the decoder and the thread returns at once: a client that sends half a
//!    call holds no thread.
//! 4. With one record in hand it counts the call in flight (on the connection and
//!    server-wide, still under the connection's read lock) and releases the claim
//!    *before* processing it, asking for a re-queue (`more`) if the decoder holds
//!    another complete record or the socket may hold unread bytes: the last read
//!    filled the buffer, or DATA was set when this owner cleared it but it never
//!    read the socket (it was throttled, or took a record already in the decoder).
//!    Forgetting the latter loses the edge: the next owner drains the decoder and
//!    goes idle with the socket unread. A short read means the socket was drained
//!    and later bytes raise a new edge. Another thread can now read the next
//!    pipelined call while this one works: one reader at a time, parallel
//!    processing (Linux `svc_tcp_recvfrom`).
//! 5. It dispatches the record and sends the reply (see *Write path*). When the reply
//!    has left for the kernel the call stops counting as in flight.
//!
//! # Write path
//!
//! Replies of one connection go out one at a time under its write mutex, which is
//! only ever held for non-blocking writes, so no thread waits on a slow client. A
//! sender with an empty output buffer writes straight from its own reply buffer;
//! what the socket does not take is appended to the connection's output buffer,
//! which the poller flushes on the next writable edge. Replies behind a non-empty
//! buffer are appended (order is kept) and a flush is attempted.
//!
//! **Reply coalescing.** Pipelining clients send calls in bursts, and one `send`
//! per reply was most of the server's CPU (the kernel's TCP path, run once per
//! write). So when an owner takes a record it also notes the [`Pace`](rnfs_rpc::Pace) of the
//! *next* record if that one is already complete in the decoder (`next_pace`,
//! from [`Dispatcher::call_pace`](rnfs_rpc::Dispatcher::call_pace) via the
//! record's first 24 bytes). A thread finishing a reply while the next call is
//! quick ([`Service::is_quick`](rnfs_rpc::Service::is_quick)) appends it to the
//! output buffer without writing: the thread that answers that next call, a few
//! microseconds and one turn of the queue later, writes both. A next call that is
//! quick only among its peers
//! ([`Service::is_quick_among_peers`](rnfs_rpc::Service::is_quick_among_peers):
//! NFS WRITE, a buffered write that the kernel may throttle now and then) holds
//! only the reply of a call of that pace, so a run of WRITEs is answered in
//! batches and nothing else (a GETATTR, a READ) ever waits behind a WRITE. The
//! chain stops at `max_reply_hold` after the oldest held reply, or at a record
//! that is not quick, or at the last record received, or at a reply too large
//! to copy cheaply (16.5 KiB) or 32 KiB held. A quick call that must wait
//! after all (a READ whose data is not in the page cache, a WRITE that must
//! reach storage) calls [`before_blocking`](crate::before_blocking), which
//! writes what was held. A held reply is never
//! stranded: `next_pace` is read under the write lock, and every store of it
//! is followed by a write-lock section of the same thread (the reply of the
//! call it took, or a release), so a reader that saw a holding pace runs before
//! the section that follows the store replacing it, which writes what was held.
//! Where the next record will not be taken soon, `next_pace` is cleared and
//! the held replies written at once: at the in-flight limit (held replies count
//! as in flight, so waiting for a completion would deadlock) and when reading
//! stops (draining). A connection closing loses held replies exactly as it loses
//! replies still running.
//!
//! The poller reads the `write_pending` flag before taking the lock, to keep the
//! lock off the common readable-event path. An edge cannot be lost: a sender sets
//! `write_pending` *before* its last write attempt, so either that attempt succeeds,
//! or it fails with `WouldBlock` and the writable edge the kernel raises later is
//! seen by a poller that already sees the flag. `write_pending` is cleared only under
//! the lock, when the buffer is empty.
//!
//! # Back-pressure
//!
//! `in_flight` counts calls read but not yet fully written back. Only the task's
//! owner increments it, after checking it is below the limit, so it never exceeds
//! `max_in_flight_per_conn`. Calls are not bytes, though: 64 READ replies of 1 MiB
//! are 64 MiB. So the owner also checks `unsent`, the bytes in the output buffer
//! (published under the write lock after every change), against
//! `max_output_per_conn` (Linux `svc_tcp_has_wspace` bounds the same). At either
//! limit the owner sets `throttled`, re-checks both, and releases without reading;
//! whoever completes the next reply (a service thread or the poller's flush)
//! clears `throttled` and calls `notify`. The set-then-recheck /
//! publish-decrement-then-check pair is `SeqCst` on both sides, so at least one
//! side sees the other (no stall; at worst one spurious notify). While `unsent` is
//! over the cap some reply is unsent, so a completion is still to come when the
//! client reads, and reading resumes at the first one that leaves the buffer under
//! the cap. A reply being produced is always queued: the cap stops reading new
//! calls, never drops a reply, so a connection's buffer stays within the cap plus
//! one reply per service thread working on its calls (and all connections together
//! within one extra reply per service thread). A client that never reads its
//! replies thus stops being read: its calls back up in its own socket buffers, it
//! holds no thread, and the server holds bounded memory for it.
//!
//! # Draining
//!
//! A call is in flight from the moment its record is taken off the connection
//! (counted under the read lock) until its reply has reached the kernel, from the
//! sender's own write or from the output buffer by the poller, or the call is
//! dropped. Besides the per-connection count used for back-pressure, a
//! server-wide count (`stats::InFlight`, one cache line of its own: one add and
//! one subtract per call) is what [`Server::drain`](crate::Server::drain) waits
//! on. A connection dropped with replies still buffered retires them then.
//!
//! To stop reading, each poller sets every connection's `stopped` flag under its
//! read lock: after that, every call ever taken off the connection is counted and
//! no owner takes another (`ReadOutcome::Stopped`); records the decoder assembled
//! but no owner took are discarded with the unread bytes. The poller also stops
//! notifying readable connections, so a draining server wakes no thread for
//! calls it will not read. Writable edges are still served: buffered replies go
//! out as clients read them.
//!
//! # Closing
//!
//! Bad input (an oversized record, a record the dispatcher drops), EOF and socket
//! errors end in [`Scheduler::close`]; the next owner of the task sees
//! `is_closing()` and tears the connection down: it shuts the socket and tells the
//! poller to deregister it and drop its reference. The file descriptor closes when
//! the last reference goes.
//!
//! [`Scheduler::notify`]: rnfs_sched::Scheduler::notify
//! [`Scheduler::close`]: rnfs_sched::Scheduler::close

mod conn;
mod poller;
mod tcp;

pub use conn::Connection;
pub(crate) use conn::{CallPace, ReadOutcome};
pub(crate) use poller::{spawn_poller, PollerHandle};
pub(crate) use tcp::{bind_listener, spawn_acceptor, AcceptorHandle};

//! loom models of the slot table (run with `ci/loom.sh`): a freed slot
//! reaches a caller queued in the backlog (release vs. congested reserve),
//! two queued callers never share a slot, shutdown wakes a queued caller, a
//! reply that races with the owner going to sleep wakes it, and a reply that
//! races with the owner giving up is either taken or dropped, never both.
//!
//! The read role (`lead.rs`): two blocking owners reading in turn while the
//! replies arrive get both replies (a hand-off never strands a waiter, a
//! reply arriving while the role changes hands is delivered); a call whose
//! owner does not read is served by the reader thread after a blocking leader
//! got its own reply and left; an owner that wants the role again while a
//! releaser pops its stale want entry gets the role or the baton.

use std::collections::VecDeque;
use std::sync::Arc;

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Condvar, Mutex};
use loom::thread;

use super::lead::{ReadRole, ReadSide};
use super::slots::{Delivery, Reservation, Slot, SlotTable};
use super::sync::park;

/// The blocking reservation of `call.rs`: `None` on shutdown.
fn reserve_blocking(t: &SlotTable) -> Option<u32> {
    match t.reserve() {
        Reservation::Slot(i) => Some(i),
        Reservation::Shutdown => None,
        Reservation::Queued(ticket) => ticket.wait_blocking(),
    }
}

fn take_slot(t: &SlotTable) -> u32 {
    match t.reserve() {
        Reservation::Slot(i) => i,
        other => panic!("expected a free slot, got {other:?}"),
    }
}

/// A free slot with a call begun in it: `(index, xid)`.
fn begun(t: &SlotTable) -> (u32, u32) {
    let i = take_slot(t);
    (i, t.begin(i).unwrap())
}

#[test]
fn loom_release_hands_slot_to_congested_reserver() {
    loom::model(|| {
        let t = Arc::new(SlotTable::new(1, 0));
        let held = take_slot(&t);
        let t2 = Arc::clone(&t);
        let waiter = thread::spawn(move || {
            let i = reserve_blocking(&t2);
            if let Some(i) = i {
                t2.release(i);
            }
            i
        });
        t.release(held);
        assert_eq!(waiter.join().unwrap(), Some(held));
        // Nothing is left queued or lost: the slot is free again.
        assert_eq!(take_slot(&t), held);
    });
}

#[test]
fn loom_two_queued_callers_never_share_a_slot() {
    loom::model(|| {
        let t = Arc::new(SlotTable::new(1, 0));
        let in_use = Arc::new(AtomicBool::new(false));
        let held = take_slot(&t);
        in_use.store(true, Ordering::SeqCst);
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let t = Arc::clone(&t);
                let in_use = Arc::clone(&in_use);
                thread::spawn(move || {
                    let i = reserve_blocking(&t).unwrap();
                    assert!(!in_use.swap(true, Ordering::SeqCst), "slot shared");
                    in_use.store(false, Ordering::SeqCst);
                    t.release(i);
                })
            })
            .collect();
        in_use.store(false, Ordering::SeqCst);
        t.release(held);
        for c in callers {
            c.join().unwrap();
        }
        assert_eq!(take_slot(&t), held);
    });
}

#[test]
fn loom_shutdown_wakes_a_queued_caller() {
    loom::model(|| {
        let t = Arc::new(SlotTable::new(1, 0));
        let _held = take_slot(&t);
        let t2 = Arc::clone(&t);
        let waiter = thread::spawn(move || reserve_blocking(&t2));
        t.close();
        assert_eq!(waiter.join().unwrap(), None);
    });
}

/// The owner's loop from `call.rs` without reading: register, check, sleep.
fn wait_for(slot: &Slot, xid: u32) -> Delivery {
    loop {
        slot.waiter.register_thread();
        if let Some(d) = slot.take_if_done(xid) {
            return d;
        }
        park(None);
    }
}

/// A reader thread delivering `[7]` for `xid`; joins to whether it landed.
fn spawn_reply(t: &Arc<SlotTable>, xid: u32) -> thread::JoinHandle<bool> {
    let t = Arc::clone(t);
    thread::spawn(move || {
        t.slot_for_xid(xid)
            .unwrap()
            .deliver(xid, Delivery::Reply(vec![7]))
    })
}

#[test]
fn loom_reply_racing_with_park_wakes_the_owner() {
    loom::model(|| {
        let t = Arc::new(SlotTable::new(2, 0));
        let (i, xid) = begun(&t);
        let reader = spawn_reply(&t, xid);
        let d = wait_for(t.slot(i).unwrap(), xid);
        assert!(matches!(d, Delivery::Reply(v) if v == [7]));
        assert!(reader.join().unwrap());
        t.release(i);
    });
}

#[test]
fn loom_reply_racing_with_abandon_is_taken_or_dropped() {
    loom::model(|| {
        let t = Arc::new(SlotTable::new(2, 0));
        let (i, xid) = begun(&t);
        let reader = spawn_reply(&t, xid);
        let taken = t.slot(i).unwrap().abandon(xid);
        t.release(i);
        let delivered = reader.join().unwrap();
        assert_eq!(taken.is_some(), delivered);
        // The slot is reusable and the late XID cannot land in it.
        let j = take_slot(&t);
        let xid2 = t.begin(j).unwrap();
        assert_ne!(xid, xid2);
        assert!(!t.slot(j).unwrap().deliver(xid, Delivery::Reply(vec![8])));
    });
}

/// The socket, as the read role sees it: replies (XIDs) in arrival order;
/// reading blocks until one is there.
#[derive(Debug, Default)]
struct Wire {
    replies: Mutex<VecDeque<u32>>,
    arrived: Condvar,
}

impl Wire {
    /// The server answers `xid`.
    fn answer(&self, xid: u32) {
        self.replies.lock().unwrap().push_back(xid);
        self.arrived.notify_all();
    }
}

#[derive(Debug)]
struct ModelSide(Arc<Wire>);

impl ReadSide for ModelSide {
    fn needs_reader(&mut self) -> bool {
        false
    }
}

/// One blocking `read` and the delivery of what it returned (`conn.rs`).
fn read_one(side: &ModelSide, t: &SlotTable) {
    let xid = {
        let mut q = side.0.replies.lock().unwrap();
        loop {
            if let Some(x) = q.pop_front() {
                break x;
            }
            q = side.0.arrived.wait(q).unwrap();
        }
    };
    if let Some(s) = t.slot_for_xid(xid) {
        s.deliver(xid, Delivery::Reply(xid.to_be_bytes().to_vec()));
    }
}

/// A blocking owner's wait (`call.rs`): read while the role is free, sleep
/// otherwise; then give the slot back, passing on a baton.
fn wait_leading(role: &ReadRole<ModelSide>, t: &SlotTable, idx: u32, xid: u32) -> Delivery {
    let slot = t.slot(idx).unwrap();
    let d = loop {
        slot.waiter.register_thread();
        if let Some(d) = slot.take_if_done(xid) {
            break d;
        }
        if let Some(mut g) = role.try_lead(slot) {
            g.with(|side| {
                while !slot.is_done(xid) {
                    read_one(side, t);
                }
            });
            role.release(g, t);
            continue;
        }
        park(None);
    };
    let baton = slot.leave_lead();
    t.release(idx);
    if baton {
        role.pass_on(t);
    }
    d
}

#[test]
fn loom_read_role_hand_off_never_strands_a_waiter() {
    loom::model(|| {
        let t = Arc::new(SlotTable::new(2, 0));
        let wire = Arc::new(Wire::default());
        let role = Arc::new(ReadRole::new(ModelSide(Arc::clone(&wire))));
        let (a, xa) = begun(&t);
        let (b, xb) = begun(&t);
        // The server answers B first: whoever leads first meets B's reply.
        let server = {
            let wire = Arc::clone(&wire);
            thread::spawn(move || {
                wire.answer(xb);
                wire.answer(xa);
            })
        };
        let other = {
            let (t, role) = (Arc::clone(&t), Arc::clone(&role));
            thread::spawn(move || wait_leading(&role, &t, b, xb))
        };
        let da = wait_leading(&role, &t, a, xa);
        let db = other.join().unwrap();
        server.join().unwrap();
        assert!(matches!(da, Delivery::Reply(v) if v == xa.to_be_bytes()));
        assert!(matches!(db, Delivery::Reply(v) if v == xb.to_be_bytes()));
        assert!(wire.replies.lock().unwrap().is_empty());
    });
}

#[test]
fn loom_a_call_whose_owner_does_not_read_is_served_by_the_reader() {
    loom::model(|| {
        let t = Arc::new(SlotTable::new(2, 0));
        let wire = Arc::new(Wire::default());
        let role = Arc::new(ReadRole::new(ModelSide(Arc::clone(&wire))));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, xa) = begun(&t);
        let (b, xb) = begun(&t);
        // The reader thread (`conn.rs`): reads when asked, while a call
        // waits and no blocking owner wants the role.
        let reader = {
            let (t, role, stop) = (Arc::clone(&t), Arc::clone(&role), Arc::clone(&stop));
            thread::spawn(move || loop {
                role.reader_register();
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                if role.reader_asked() {
                    if let Some(mut g) = role.try_take() {
                        g.with(|side| {
                            while t.any_waiting() && !t.has_want() {
                                read_one(side, &t);
                            }
                        });
                        role.release(g, &t);
                        continue;
                    }
                }
                park(None);
            })
        };
        // B's owner (an async future): asks for a reader after sending and
        // sleeps; here it also plays the server, answering A then B.
        let owner_b = {
            let (t, role, wire) = (Arc::clone(&t), Arc::clone(&role), Arc::clone(&wire));
            thread::spawn(move || {
                role.ensure_reader();
                wire.answer(xa);
                wire.answer(xb);
                let slot = t.slot(b).unwrap();
                let d = wait_for(slot, xb);
                assert!(!slot.leave_lead(), "a non-leading owner gets no baton");
                t.release(b);
                d
            })
        };
        let da = wait_leading(&role, &t, a, xa);
        let db = owner_b.join().unwrap();
        stop.store(true, Ordering::SeqCst);
        role.wake_reader();
        reader.join().unwrap();
        assert!(matches!(da, Delivery::Reply(v) if v == xa.to_be_bytes()));
        assert!(matches!(db, Delivery::Reply(v) if v == xb.to_be_bytes()));
    });
}

#[test]
fn loom_an_owner_wanting_again_while_its_stale_entry_is_popped_gets_the_baton_or_the_role() {
    loom::model(|| {
        let t = Arc::new(SlotTable::new(2, 0));
        let role = Arc::new(ReadRole::new(ModelSide(Arc::new(Wire::default()))));
        let (a, _) = begun(&t);
        let (b, _) = begun(&t);
        // A stale entry for A: it wanted, then took the role itself.
        let slot_a = t.slot(a).unwrap();
        slot_a.want_lead();
        slot_a.clear_lead();
        // B's owner wants too, so the releaser has two entries to go through.
        t.slot(b).unwrap().want_lead();
        let held = role.try_take().unwrap();
        let owner = {
            let (t, role) = (Arc::clone(&t), Arc::clone(&role));
            thread::spawn(move || {
                let slot = t.slot(a).unwrap();
                // Some(true): A took the role itself (and released it).
                match role.try_lead(slot) {
                    Some(g) => {
                        role.release(g, &t);
                        true
                    }
                    None => false,
                }
            })
        };
        role.release(held, &t);
        let led = owner.join().unwrap();
        let baton_a = t.slot(a).unwrap().leave_lead();
        let baton_b = t.slot(b).unwrap().leave_lead();
        // Whoever released last handed the baton on to a wanting owner;
        // if A did not lead, someone holds the baton (A or B), never nobody.
        assert!(led || baton_a || baton_b, "A waits, nobody reads");
        // Nobody wants now: the next hand-off finds no one and drops every
        // stale entry.
        assert!(!t.pass_baton(), "a baton for an owner that stopped wanting");
        assert!(!t.has_want(), "stale entries are dropped");
    });
}

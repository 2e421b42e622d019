//! rnfs's service-thread scheduler: how work arriving on transports reaches
//! threads, in constant time. It knows nothing of RPC: a [`Task`] is any
//! source of work with a payload, a [`Handler`] does the work.
//!
//! # The model (Linux SUNRPC since 6.6, and the 2009 waking bound)
//! - Threads live in **pools** (one, one per CPU, or one per NUMA node;
//!   [`PoolMode`]). Pools never steal from each other.
//! - A task with work is put on its pool's **pending queue** once: the task's
//!   `BUSY` flag, won by a single `fetch_or`, makes the winner the only thread
//!   that may queue or read it. Producers never lock ([`Policy::Lwq`]).
//! - Idle threads wait on an **O(1) LIFO stack**. A producer wakes one idle
//!   thread, unless `max_waking` threads are already **woken but not yet
//!   running**: then the waking thread, once it has taken a task, wakes the
//!   next one only if work remains. Beyond the first, a thread is woken only
//!   while more tasks are queued than threads waking. Wake-ups stay near one
//!   per task and the runnable threads near the number of CPUs, whatever the
//!   thread count.
//! - A thread **releases** the task as soon as it has read one record, so the
//!   next record on the same transport is read by another thread in parallel;
//!   the task goes to the back of the queue (FIFO fairness between tasks).
//! - Thread count changes at run time: grow at once, shrink by asking exactly
//!   one thread per surplus thread to exit (it passes pending work on), and
//!   between `min` and `max` automatically: grow one thread at a time when work
//!   finds no idle thread, retire after `idle_timeout` idle.
//!
//! The baselines [`Policy::ListWalk`] (a mutex and a linear walk of all
//! threads) and [`Policy::WakeAll`] (a broadcast per task) run the same
//! tasks and handlers, so gains are measured side by side.
//!
//! # Invariants (each is tested; the wake protocol under loom)
//! 1. No lost wake-up: a task queued while a thread goes idle is seen by the
//!    thread or wakes it (`policy/wake_one.rs`, fence pair 1).
//! 2. At most `max_waking` threads woken but not running per pool.
//! 3. At most one thread owns a task; data arriving meanwhile re-queues it
//!    on release (`task.rs`).
//! 4. A shrink request is won by exactly one thread, which hands pending
//!    work on before exiting.
//! 5. `idle` count ≤ idle-stack length (`idle.rs`).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod config;
mod cpu;
#[cfg(not(loom))]
mod futex_hash;
mod idle;
mod lwq;
mod policy;
mod pool;
#[cfg(not(loom))]
mod scheduler;
mod stats;
mod sync;
mod task;

#[cfg(all(test, loom))]
mod loom_tests;

#[cfg(all(test, not(loom)))]
#[path = "../../../tests/support/cannot_run.rs"]
mod cannot_run;

pub use config::{Config, ConfigError, ParseNameError, Policy, PoolMode, MAX_THREADS};
#[cfg(not(loom))]
pub use futex_hash::fit as fit_futex_hash;
#[cfg(not(loom))]
pub use scheduler::{Claim, Enqueuer, Handler, ResizeError, Scheduler, StartError};
pub use stats::{PoolStats, SchedStats};
pub use task::Task;

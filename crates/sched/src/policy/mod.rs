//! How a queued task finds a thread: the lwq policy and the two baselines
//! it is measured against. All three share the task flags (`task.rs`), the
//! pool control words and the worker loop; only the hand-off differs.

mod list_walk;
mod wake_all;
mod wake_one;

pub(crate) use list_walk::ListWalk;
pub(crate) use wake_all::WakeAll;
pub(crate) use wake_one::WakeOne;

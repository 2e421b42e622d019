//! Benchmarks behind `rnfs bench`. They report numbers; they assert nothing
//! (tests do that). Every figure comes with the configuration that produced
//! it, in a table and as JSON.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod client;
pub mod dirio;
pub mod echo;
pub mod fileio;
pub mod load;
pub mod nfs;
pub mod report;
pub mod sched;

/// A benchmark parameter out of range: the option, without its `--`, and
/// what is wrong with it. Shared by every benchmark's error type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("--{name} {reason}")]
pub struct InvalidParam {
    /// The option.
    pub name: &'static str,
    /// What is wrong.
    pub reason: &'static str,
}

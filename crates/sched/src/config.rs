//! Scheduler configuration.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How an arriving task finds a service thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Policy {
    /// Lock-free pending queue, O(1) idle stack, one thread waking at a time
    /// (Linux since 6.6, plus a bound on woken-but-not-running threads). A
    /// woken thread dequeues for itself, so a running thread may take the work
    /// first (a wasted wake-up), which keeps hot threads busy.
    Lwq,
    /// `Lwq`, but the waker dequeues and hands the task to the thread it wakes:
    /// no wasted wake-ups, at the price of a wake-up for nearly every task
    /// (running threads no longer pick up work queued for a woken one).
    #[serde(rename = "lwq-handoff")]
    LwqHandoff,
    /// Baseline: one pool mutex, a FIFO behind it, and a linear walk of all
    /// threads for an idle one (Linux before 6.6).
    ListWalk,
    /// Baseline: one mutex and a condition-variable broadcast per task (the
    /// thundering herd).
    WakeAll,
}

impl Policy {
    /// Every policy, in the order benchmarks report them.
    pub const ALL: [Policy; 4] = [
        Policy::Lwq,
        Policy::LwqHandoff,
        Policy::ListWalk,
        Policy::WakeAll,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Lwq => "lwq",
            Policy::LwqHandoff => "lwq-handoff",
            Policy::ListWalk => "listwalk",
            Policy::WakeAll => "wakeall",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown policy or pool-mode name.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown {kind} {name:?} (expected one of: {expected})")]
pub struct ParseNameError {
    kind: &'static str,
    name: String,
    expected: &'static str,
}

impl FromStr for Policy {
    type Err = ParseNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "lwq" => Ok(Policy::Lwq),
            "lwq-handoff" => Ok(Policy::LwqHandoff),
            "listwalk" => Ok(Policy::ListWalk),
            "wakeall" => Ok(Policy::WakeAll),
            _ => Err(ParseNameError {
                kind: "scheduler policy",
                name: s.to_owned(),
                expected: "lwq, lwq-handoff, listwalk, wakeall",
            }),
        }
    }
}

/// How threads are split into pools (Linux's `sunrpc.pool_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum PoolMode {
    /// One pool for the whole machine; threads are not pinned.
    Global,
    /// One pool per allowed CPU; its threads are pinned to that CPU.
    PerCpu,
    /// One pool per NUMA node; its threads are pinned to the node's CPUs.
    PerNode,
    /// `pernode` on a multi-node machine, else `percpu` above 2 CPUs, else
    /// `global` (Linux's rule).
    Auto,
}

impl PoolMode {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            PoolMode::Global => "global",
            PoolMode::PerCpu => "percpu",
            PoolMode::PerNode => "pernode",
            PoolMode::Auto => "auto",
        }
    }

    /// How many pools this mode makes on this machine (its allowed CPUs and
    /// NUMA nodes): what [`Scheduler::start`](crate::Scheduler::start)
    /// will build, so a caller can choose a minimum thread count of at
    /// least one per pool.
    pub fn pools(self) -> usize {
        crate::cpu::PoolMap::build(self).pools()
    }
}

impl fmt::Display for PoolMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PoolMode {
    type Err = ParseNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "global" => Ok(PoolMode::Global),
            "percpu" => Ok(PoolMode::PerCpu),
            "pernode" => Ok(PoolMode::PerNode),
            "auto" => Ok(PoolMode::Auto),
            _ => Err(ParseNameError {
                kind: "pool mode",
                name: s.to_owned(),
                expected: "global, percpu, pernode, auto",
            }),
        }
    }
}

/// Scheduler configuration. Thread counts are totals over all pools; each
/// pool gets an even share and never fewer than one thread, because pools
/// do not steal work from each other (a pool without threads strands its
/// work).
#[derive(Debug, Clone)]
pub struct Config {
    /// Thread name prefix.
    pub name: String,
    /// How tasks find threads.
    pub policy: Policy,
    /// How threads are split into pools.
    pub pool_mode: PoolMode,
    /// Threads started at once.
    pub initial_threads: usize,
    /// Automatic sizing never retires below this many threads.
    pub min_threads: usize,
    /// Automatic sizing never grows above this many threads.
    pub max_threads: usize,
    /// Bound on threads woken but not yet running, per pool (Linux 2009's
    /// `SVC_MAX_WAKING` was 5; 1 gives "one thread waking at a time"). With
    /// `lwq`, a thread beyond the first is woken only while more tasks are
    /// queued than threads waking.
    pub max_waking: usize,
    /// An idle thread above `min_threads` retires after this long.
    pub idle_timeout: Duration,
    /// Pin threads to their pool's CPUs (per-CPU and per-node modes).
    pub pin_threads: bool,
}

impl Config {
    /// A fixed number of threads.
    pub fn fixed(threads: usize) -> Self {
        Config {
            initial_threads: threads,
            min_threads: threads,
            max_threads: threads,
            ..Config::default()
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            name: "rnfs-svc".to_owned(),
            policy: Policy::Lwq,
            pool_mode: PoolMode::Global,
            initial_threads: 8,
            min_threads: 8,
            max_threads: 8,
            max_waking: 1,
            idle_timeout: Duration::from_secs(5),
            pin_threads: true,
        }
    }
}

/// A configuration the scheduler refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `min_threads <= initial_threads <= max_threads` does not hold.
    #[error("thread counts must satisfy min ({min}) <= initial ({initial}) <= max ({max})")]
    ThreadOrder {
        /// Configured minimum.
        min: usize,
        /// Configured initial count.
        initial: usize,
        /// Configured maximum.
        max: usize,
    },
    /// Fewer threads than pools.
    #[error(
        "{threads} thread(s) cannot serve {pools} pool(s): every pool needs at least one thread"
    )]
    TooFewThreads {
        /// Requested minimum.
        threads: usize,
        /// Number of pools.
        pools: usize,
    },
    /// More threads than the scheduler supports.
    #[error("{threads} threads exceed the limit of {limit}")]
    TooManyThreads {
        /// Requested count.
        threads: usize,
        /// Upper limit.
        limit: usize,
    },
    /// `max_waking` is zero.
    #[error("max_waking must be at least 1")]
    ZeroMaxWaking,
}

/// Most threads one scheduler runs (each costs a stack and a histogram).
pub const MAX_THREADS: usize = 65_536;

impl Config {
    pub(crate) fn validate(&self, pools: usize) -> Result<(), ConfigError> {
        let (min, initial, max) = (self.min_threads, self.initial_threads, self.max_threads);
        if !(min <= initial && initial <= max) {
            return Err(ConfigError::ThreadOrder { min, initial, max });
        }
        if min < pools {
            return Err(ConfigError::TooFewThreads {
                threads: min,
                pools,
            });
        }
        if max > MAX_THREADS {
            return Err(ConfigError::TooManyThreads {
                threads: max,
                limit: MAX_THREADS,
            });
        }
        if self.max_waking == 0 {
            return Err(ConfigError::ZeroMaxWaking);
        }
        Ok(())
    }
}

/// Splits `total` over `pools` as evenly as possible; pool `i` gets the
/// remainder first.
pub(crate) fn share(total: usize, pools: usize, i: usize) -> usize {
    total / pools + usize::from(i < total % pools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>().ok(), Some(p));
        }
        for m in [
            PoolMode::Global,
            PoolMode::PerCpu,
            PoolMode::PerNode,
            PoolMode::Auto,
        ] {
            assert_eq!(m.name().parse::<PoolMode>().ok(), Some(m));
        }
        let err = "fifo".parse::<Policy>().unwrap_err().to_string();
        assert!(err.contains("lwq, lwq-handoff, listwalk, wakeall"), "{err}");
    }

    #[test]
    fn validation() {
        assert!(Config::fixed(8).validate(1).is_ok());
        assert_eq!(
            Config::fixed(2).validate(4),
            Err(ConfigError::TooFewThreads {
                threads: 2,
                pools: 4
            })
        );
        let mut c = Config::fixed(8);
        c.min_threads = 9;
        assert!(matches!(
            c.validate(1),
            Err(ConfigError::ThreadOrder { .. })
        ));
        c = Config::fixed(8);
        c.max_waking = 0;
        assert_eq!(c.validate(1), Err(ConfigError::ZeroMaxWaking));
    }

    #[test]
    fn share_is_even_and_complete() {
        for (total, pools) in [(8, 3), (1, 1), (7, 7), (100, 16)] {
            let parts: Vec<_> = (0..pools).map(|i| share(total, pools, i)).collect();
            assert_eq!(parts.iter().sum::<usize>(), total);
            assert!(parts.iter().max().unwrap() - parts.iter().min().unwrap() <= 1);
        }
    }
}

//! CPU topology: which CPUs each pool owns, and the calling CPU's pool.

use std::fs;

use crate::config::PoolMode;

/// The pools' CPU sets, built once at start (CPUs that come online later
/// map to pool 0, as in Linux's `svc_pool_map`).
#[derive(Debug, Clone)]
pub(crate) struct PoolMap {
    /// The mode actually used (`Auto` resolved).
    pub(crate) mode: PoolMode,
    /// CPUs of each pool; empty for the global pool (no pinning).
    pub(crate) cpus: Vec<Vec<usize>>,
    cpu_to_pool: Vec<usize>,
}

impl PoolMap {
    pub(crate) fn build(mode: PoolMode) -> PoolMap {
        let allowed = allowed_cpus();
        let nodes = numa_nodes(&allowed);
        let mode = match mode {
            PoolMode::Auto if nodes.len() > 1 => PoolMode::PerNode,
            PoolMode::Auto if allowed.len() > 2 => PoolMode::PerCpu,
            PoolMode::Auto => PoolMode::Global,
            m => m,
        };
        let cpus: Vec<Vec<usize>> = match mode {
            PoolMode::PerCpu if !allowed.is_empty() => allowed.iter().map(|&c| vec![c]).collect(),
            PoolMode::PerNode if !nodes.is_empty() => nodes,
            _ => vec![Vec::new()],
        };
        let mode = if cpus.len() == 1 && cpus[0].is_empty() {
            PoolMode::Global
        } else {
            mode
        };
        let max_cpu = cpus.iter().flatten().copied().max().map_or(0, |m| m + 1);
        let mut cpu_to_pool = vec![0; max_cpu];
        for (pool, set) in cpus.iter().enumerate() {
            for &c in set {
                cpu_to_pool[c] = pool;
            }
        }
        PoolMap {
            mode,
            cpus,
            cpu_to_pool,
        }
    }

    pub(crate) fn pools(&self) -> usize {
        self.cpus.len()
    }

    /// The pool of the CPU the caller runs on.
    pub(crate) fn current_pool(&self) -> usize {
        if self.cpus.len() == 1 {
            return 0;
        }
        nix::sched::sched_getcpu()
            .ok()
            .and_then(|cpu| self.cpu_to_pool.get(cpu).copied())
            .unwrap_or(0)
    }
}

fn allowed_cpus() -> Vec<usize> {
    use nix::sched::{sched_getaffinity, CpuSet};
    use nix::unistd::Pid;
    match sched_getaffinity(Pid::from_raw(0)) {
        Ok(set) => (0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// CPUs per NUMA node, restricted to `allowed`; empty if sysfs says nothing.
fn numa_nodes(allowed: &[usize]) -> Vec<Vec<usize>> {
    let Ok(dir) = fs::read_dir("/sys/devices/system/node") else {
        return Vec::new();
    };
    let mut nodes: Vec<(usize, Vec<usize>)> = dir
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let id: usize = name.strip_prefix("node")?.parse().ok()?;
            let list = fs::read_to_string(e.path().join("cpulist")).ok()?;
            let cpus: Vec<usize> = parse_cpulist(&list)
                .into_iter()
                .filter(|c| allowed.contains(c))
                .collect();
            (!cpus.is_empty()).then_some((id, cpus))
        })
        .collect();
    nodes.sort();
    nodes.into_iter().map(|(_, cpus)| cpus).collect()
}

/// Parses the kernel's cpulist format, e.g. `0-3,8,10-11`.
pub(crate) fn parse_cpulist(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let mut ends = part.splitn(2, '-').map(|n| n.trim().parse::<usize>());
        match (ends.next(), ends.next()) {
            (Some(Ok(a)), None) => out.push(a),
            (Some(Ok(a)), Some(Ok(b))) if a <= b && b - a < 65_536 => out.extend(a..=b),
            _ => {}
        }
    }
    out
}

/// Pins the calling thread to `cpus` (no-op for an empty set).
pub(crate) fn pin_current_thread(cpus: &[usize]) {
    use nix::sched::{sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    if cpus.is_empty() {
        return;
    }
    let mut set = CpuSet::new();
    for &c in cpus {
        if set.set(c).is_err() {
            return;
        }
    }
    if let Err(e) = sched_setaffinity(Pid::from_raw(0), &set) {
        tracing::warn!(error = %e, ?cpus, "could not pin service thread");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulist() {
        assert_eq!(parse_cpulist("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpulist(""), Vec::<usize>::new());
        assert_eq!(parse_cpulist("5-2,x,7"), vec![7]);
    }

    #[test]
    fn modes_cover_every_allowed_cpu() {
        let global = PoolMap::build(PoolMode::Global);
        assert_eq!(global.pools(), 1);
        assert_eq!(global.current_pool(), 0);
        let percpu = PoolMap::build(PoolMode::PerCpu);
        assert_eq!(percpu.pools(), allowed_cpus().len().max(1));
        assert!(percpu.current_pool() < percpu.pools());
        let auto = PoolMap::build(PoolMode::Auto);
        assert_ne!(auto.mode, PoolMode::Auto);
    }
}

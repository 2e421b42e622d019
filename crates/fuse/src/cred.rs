//! The AUTH_SYS credential of a FUSE request's caller: its uid and gid from
//! the request, its supplementary groups from `/proc/<pid>/status` (FUSE
//! does not pass them), cached briefly per process.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rnfs_client::Credential;

/// How long a process's groups are trusted.
const GROUPS_TTL: Duration = Duration::from_secs(2);
/// Processes remembered before the cache is cleared.
const MAX_ENTRIES: usize = 4096;
/// AUTH_SYS carries at most 16 supplementary groups.
const MAX_GROUPS: usize = 16;

#[derive(Debug)]
struct Entry {
    uid: u32,
    gid: u32,
    cred: Credential,
    at: Instant,
}

/// Builds and caches callers' credentials.
#[derive(Debug)]
pub(crate) struct Credentials {
    machine_name: String,
    by_pid: Mutex<HashMap<u32, Entry>>,
}

impl Credentials {
    pub(crate) fn new() -> Self {
        Self {
            machine_name: Credential::root().machine_name,
            by_pid: Mutex::new(HashMap::new()),
        }
    }

    /// The credential of `uid`/`gid` calling from process `pid`.
    pub(crate) fn get(&self, uid: u32, gid: u32, pid: u32) -> Credential {
        if uid == 0 {
            // The server grants root everything groups could.
            return self.make(0, gid, Vec::new());
        }
        let now = Instant::now();
        if let Ok(cache) = self.by_pid.lock() {
            if let Some(e) = cache.get(&pid) {
                if e.uid == uid && e.gid == gid && now.duration_since(e.at) < GROUPS_TTL {
                    return e.cred.clone();
                }
            }
        }
        let cred = self.make(uid, gid, groups_of(pid).unwrap_or_default());
        if let Ok(mut cache) = self.by_pid.lock() {
            if cache.len() >= MAX_ENTRIES {
                cache.clear();
            }
            cache.insert(
                pid,
                Entry {
                    uid,
                    gid,
                    cred: cred.clone(),
                    at: now,
                },
            );
        }
        cred
    }

    fn make(&self, uid: u32, gid: u32, gids: Vec<u32>) -> Credential {
        Credential {
            uid,
            gid,
            gids,
            machine_name: self.machine_name.clone(),
        }
    }
}

/// The `Groups:` line of `/proc/<pid>/status`.
fn groups_of(pid: u32) -> Option<Vec<u32>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Groups:"))?;
    Some(
        line.split_whitespace()
            .filter_map(|g| g.parse().ok())
            .take(MAX_GROUPS)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_groups() {
        let c = Credentials::new();
        let me = std::process::id();
        let cred = c.get(1000, 1000, me);
        assert_eq!((cred.uid, cred.gid), (1000, 1000));
        assert_eq!(Some(cred.gids.clone()), groups_of(me));
        assert!(c.get(0, 5, me).gids.is_empty());
    }
}

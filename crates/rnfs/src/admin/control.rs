//! [`Control`]: what the admin commands, SIGHUP and SIGTERM do to a running
//! server. Every change is checked before anything is touched, so a refused
//! request leaves the server as it was.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use rnfs_server::metrics::StatsSnapshot;
use rnfs_server::nfs::exports::ServerSection;
use rnfs_server::nfs::exports::{normalize_mount_path, BackendKind};
use rnfs_server::nfs::{ConfigFile, ExportConfig, Exports};
use rnfs_server::Server;
use serde::Serialize;

use super::protocol::{
    DrainReply, ExportChangeReply, ExportRow, ExportSpec, ReloadReply, Request, Response,
    ThreadsReply,
};

/// How long `drain` waits for calls in flight when the request names no timeout.
pub(crate) const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The live server and what the admin commands change in it.
#[derive(Debug)]
pub(crate) struct Control {
    /// `None` once drained: the server stopped and only its last figures remain.
    /// A drain holds it for reading while it waits, so `stats` still answers;
    /// only taking the server out to stop it writes.
    server: RwLock<Option<Server>>,
    /// The figures taken when the server stopped.
    last: Mutex<Option<StatsSnapshot>>,
    /// Held for the whole of a drain: a second one waits for the first, then
    /// finds the server stopped.
    draining: Mutex<()>,
    exports: Arc<Exports>,
    /// The `--config` file, if the server runs from one.
    config_file: Option<PathBuf>,
    /// Its `[server]` section as read at start: a reload cannot apply a
    /// change to it, and says so.
    started_server: ServerSection,
    /// The addresses served, to warn about exports open to the network.
    listen: Vec<SocketAddr>,
    /// Held while the thread bounds change, so two changes cannot race and
    /// lose one of them.
    threads_change: Mutex<()>,
    /// Held while the export table is rebuilt, so two changes cannot race and
    /// lose one of them.
    table_change: Mutex<()>,
}

/// Mount paths an export table change added, removed and changed.
#[derive(Debug, Default)]
struct TableChanges {
    added: Vec<String>,
    removed: Vec<String>,
    changed: Vec<String>,
}

/// Locks `m`, carrying on after a panic elsewhere (the data stays consistent:
/// every critical section here is a plain read or replace).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(PoisonError::into_inner)
}

fn to_value<T: Serialize>(v: T) -> Result<serde_json::Value, String> {
    serde_json::to_value(v).map_err(|e| format!("cannot encode the result: {e}"))
}

impl Control {
    /// Controls `server`, which serves `exports`; `config_file` is `--config`.
    pub(crate) fn new(
        server: Server,
        exports: Arc<Exports>,
        config_file: Option<PathBuf>,
        started_server: ServerSection,
        listen: Vec<SocketAddr>,
    ) -> Self {
        Control {
            server: RwLock::new(Some(server)),
            last: Mutex::new(None),
            draining: Mutex::new(()),
            exports,
            config_file,
            started_server,
            listen,
            threads_change: Mutex::new(()),
            table_change: Mutex::new(()),
        }
    }

    /// Answers one admin request.
    pub(crate) fn handle(&self, request: Request) -> Response {
        let result = match request {
            Request::Stats => self.stats().and_then(to_value),
            Request::Threads { set, min, max } => self.threads(set, min, max).and_then(to_value),
            Request::Exports => to_value(self.export_rows()),
            Request::Reload => self.reload().and_then(to_value),
            Request::ExportAdd(spec) => self.export_add(spec).and_then(to_value),
            Request::ExportRemove { mount_path } => {
                self.export_remove(&mount_path).and_then(to_value)
            }
            Request::Clients => self.stats().and_then(|s| to_value(s.clients)),
            Request::Drain { timeout_secs } => {
                let timeout = match timeout_secs {
                    None => Ok(DEFAULT_DRAIN_TIMEOUT),
                    Some(s) if s.is_finite() && (0.0..=3600.0).contains(&s) => {
                        Ok(Duration::from_secs_f64(s))
                    }
                    Some(s) => Err(format!(
                        "drain timeout {s} is out of range (0 to 3600 seconds)"
                    )),
                };
                timeout.and_then(|t| to_value(self.drain(t)))
            }
        };
        match result {
            Ok(value) => Response::ok(value),
            Err(message) => Response::error(message),
        }
    }

    /// The server's figures, or the last ones taken if it has been drained.
    pub(crate) fn stats(&self) -> Result<StatsSnapshot, String> {
        if let Some(server) = read(&self.server).as_ref() {
            return Ok(server.stats_snapshot());
        }
        lock(&self.last)
            .clone()
            .ok_or_else(|| "the server has stopped".to_owned())
    }

    /// Sets a fixed count (`set`) or the bounds (`min`/`max`, each defaulting
    /// to the current one); with neither, reports the figures.
    pub(crate) fn threads(
        &self,
        set: Option<u64>,
        min: Option<u64>,
        max: Option<u64>,
    ) -> Result<ThreadsReply, String> {
        let guard = read(&self.server);
        let Some(server) = guard.as_ref() else {
            return Err("the server has been drained: it runs no service threads".into());
        };
        let sched = server.scheduler();
        let _change = lock(&self.threads_change);
        let limits = {
            let (min, max) = sched.limits();
            (min as u64, max as u64)
        };
        let (new_min, new_max) = match (set, min, max) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(r#"give either "set" or "min"/"max", not both"#.into())
            }
            (Some(0), _, _) => return Err("threads must be at least 1".into()),
            (Some(n), _, _) => (n, n),
            (None, None, None) => limits,
            (None, min, max) => {
                let new_min = min.unwrap_or(limits.0);
                let new_max = max.unwrap_or(limits.1);
                if new_min == 0 {
                    return Err("min must be at least 1".into());
                }
                if new_max == 0 {
                    return Err("max must be at least 1".into());
                }
                if new_min > new_max {
                    return Err(format!("min ({new_min}) is above max ({new_max})"));
                }
                (new_min, new_max)
            }
        };
        // A change is applied even when the limits are unchanged (only a
        // query is not): `set_limits` also moves every pool's count back
        // into them, so asking again repairs a pool left short (a thread
        // that could not be spawned).
        let query = set.is_none() && min.is_none() && max.is_none();
        if !query {
            let as_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
            sched
                .set_limits(as_usize(new_min), as_usize(new_max))
                .map_err(|e| format!("cannot change the thread count: {e}"))?;
        }
        if (new_min, new_max) != limits {
            tracing::info!(
                min = new_min,
                max = new_max,
                "service thread limits changed"
            );
        }
        Ok(ThreadsReply {
            threads: sched.stats().total().threads,
            min: new_min,
            max: new_max,
            pools: sched.pools() as u64,
        })
    }

    /// The live export table.
    pub(crate) fn export_rows(&self) -> Vec<ExportRow> {
        self.exports
            .load()
            .iter()
            .map(|e| ExportRow::from(&**e))
            .collect()
    }

    /// Re-reads `--config` (SIGHUP does the same).
    pub(crate) fn reload(&self) -> Result<ReloadReply, String> {
        let Some(path) = &self.config_file else {
            return Err(
                "the server was started without --config: there is no file to \
                        reload (use `rnfs admin export add` and `rnfs admin export remove`)"
                    .into(),
            );
        };
        let _change = lock(&self.table_change);
        let file = ConfigFile::load(path).map_err(|e| format!("keeping the old exports: {e}"))?;
        let TableChanges {
            added,
            removed,
            changed,
        } = self
            .replace_exports(&file.exports)
            .map_err(|e| format!("keeping the old exports: {}: {e}", path.display()))?;
        let note = (file.server != self.started_server).then(|| {
            let note = "the [server] section changed; it is read only at start, so restart \
                        rnfs to apply it";
            tracing::warn!("reload of {}: {note}", path.display());
            note.to_owned()
        });
        Ok(ReloadReply {
            config: path.display().to_string(),
            exports: self.exports.load().len() as u64,
            added,
            removed,
            changed,
            note,
        })
    }

    /// Adds one export to the live table.
    pub(crate) fn export_add(&self, spec: ExportSpec) -> Result<ExportChangeReply, String> {
        let config = export_config(spec)?;
        let _change = lock(&self.table_change);
        let table = self.exports.load();
        let mount_path = normalize_mount_path(&config.mount_path()).to_owned();
        if table.by_mount_path(&mount_path).is_some() {
            return Err(format!(
                "an export is already mounted as {mount_path} (remove it first, or choose \
                 another mount path)"
            ));
        }
        let mut configs: Vec<ExportConfig> = table.iter().map(|e| e.config.clone()).collect();
        configs.push(config);
        self.replace_exports(&configs)?;
        let table = self.exports.load();
        let added = table
            .by_mount_path(&mount_path)
            .ok_or_else(|| format!("{mount_path} vanished from the export table"))?;
        Ok(ExportChangeReply {
            export: ExportRow::from(&**added),
            exports: table.len() as u64,
            note: self.not_saved_note(),
        })
    }

    /// Removes the export mounted as `mount_path`; the others keep their clients.
    pub(crate) fn export_remove(&self, mount_path: &str) -> Result<ExportChangeReply, String> {
        let _change = lock(&self.table_change);
        let table = self.exports.load();
        let Some(gone) = table.by_mount_path(mount_path) else {
            let known: Vec<&str> = table.iter().map(|e| e.mount_path.as_str()).collect();
            return Err(format!(
                "no export is mounted as {mount_path} (exports: {})",
                known.join(", ")
            ));
        };
        if table.len() == 1 {
            return Err(format!(
                "cannot remove {}: it is the only export, and a server needs one",
                gone.mount_path
            ));
        }
        let configs: Vec<ExportConfig> = table
            .iter()
            .filter(|e| e.id != gone.id)
            .map(|e| e.config.clone())
            .collect();
        self.replace_exports(&configs)?;
        Ok(ExportChangeReply {
            export: ExportRow::from(&**gone),
            exports: configs.len() as u64,
            note: self.not_saved_note(),
        })
    }

    fn not_saved_note(&self) -> Option<String> {
        self.config_file.as_ref().map(|path| {
            format!(
                "the change is not written to {}: a reload or a restart undoes it",
                path.display()
            )
        })
    }

    /// Swaps the table for one built from `configs` and logs each export that
    /// changed.
    fn replace_exports(&self, configs: &[ExportConfig]) -> Result<TableChanges, String> {
        if read(&self.server).is_none() {
            return Err("the server has been drained: it serves no exports any more".into());
        }
        let before: Vec<(String, ExportConfig)> = self
            .exports
            .load()
            .iter()
            .map(|e| (e.mount_path.clone(), e.config.clone()))
            .collect();
        self.exports.reload(configs).map_err(|e| e.to_string())?;
        let after = self.exports.load();
        let mut added = Vec::new();
        let mut changed = Vec::new();
        for e in after.iter() {
            match before.iter().find(|(path, _)| *path == e.mount_path) {
                None => added.push(e.mount_path.clone()),
                Some((_, old)) if *old != e.config => changed.push(e.mount_path.clone()),
                Some(_) => {}
            }
        }
        let removed: Vec<String> = before
            .iter()
            .filter(|(path, _)| after.by_mount_path(path).is_none())
            .map(|(path, _)| path.clone())
            .collect();
        for (change, paths) in [
            ("added", &added),
            ("removed", &removed),
            ("changed", &changed),
        ] {
            for path in paths {
                tracing::info!(export = %path, change, "export reloaded");
            }
        }
        for path in added.iter().chain(&changed) {
            if let Some(e) = after.by_mount_path(path) {
                crate::serve::warn_if_open_to_the_network(e, &self.listen);
            }
        }
        Ok(TableChanges {
            added,
            removed,
            changed,
        })
    }

    /// Stops serving: closes the listening sockets, stops reading calls, and
    /// waits up to `timeout` for the calls already read to be answered
    /// ([`Server::drain`]); then closes every connection and stops the service
    /// threads. The process keeps running (the admin socket answers with the
    /// last figures) until SIGTERM.
    pub(crate) fn drain(&self, timeout: Duration) -> DrainReply {
        let start = Instant::now();
        let _draining = lock(&self.draining);
        let outcome = {
            let guard = read(&self.server);
            let Some(server) = guard.as_ref() else {
                return DrainReply {
                    in_flight: 0,
                    remaining: 0,
                    waited_secs: start.elapsed().as_secs_f64(),
                    stopped_now: false,
                };
            };
            server.drain(timeout)
        };
        let server = {
            let mut guard = write(&self.server);
            if let Some(server) = guard.as_ref() {
                // Kept for `stats` before the server goes.
                *lock(&self.last) = Some(server.stats_snapshot());
            }
            guard.take()
        };
        if let Some(server) = server {
            server.shutdown();
        }
        let (in_flight, remaining) = (outcome.in_flight_at_start, outcome.remaining);
        let reply = DrainReply {
            in_flight,
            remaining,
            waited_secs: start.elapsed().as_secs_f64(),
            stopped_now: true,
        };
        if remaining > 0 {
            tracing::warn!(
                in_flight,
                remaining,
                "drained after {:.1}s with calls still in flight",
                reply.waited_secs
            );
        } else {
            tracing::info!(in_flight, "drained in {:.3}s", reply.waited_secs);
        }
        reply
    }

    /// Makes the data of the writable local exports durable: one `syncfs` per
    /// file system, so UNSTABLE writes that no COMMIT covered reach the disk.
    /// Returns how many file systems were synced.
    pub(crate) fn flush(&self) -> Result<usize, String> {
        let table = self.exports.load();
        let mut synced = HashSet::new();
        let mut errors = Vec::new();
        for e in table.iter() {
            if e.config.backend != BackendKind::Local || e.read_only() {
                continue;
            }
            let result = std::fs::File::open(&e.config.path).and_then(|dir| {
                let dev = dir.metadata()?.dev();
                if synced.insert(dev) {
                    rustix::fs::syncfs(&dir)?;
                }
                Ok(())
            });
            if let Err(err) = result {
                errors.push(format!("{}: {err}", e.config.path.display()));
            }
        }
        if errors.is_empty() {
            Ok(synced.len())
        } else {
            Err(format!("cannot flush {}", errors.join("; ")))
        }
    }
}

/// Builds the configuration of an export to add; a local export's directory
/// must exist (it is resolved to its canonical path).
fn export_config(spec: ExportSpec) -> Result<ExportConfig, String> {
    let backend = spec.backend.map_or(BackendKind::Local, BackendKind::from);
    if !spec.path.is_absolute() {
        return Err(format!(
            "export path {} is not absolute",
            spec.path.display()
        ));
    }
    let path = match backend {
        BackendKind::Local => {
            let path = std::fs::canonicalize(&spec.path)
                .map_err(|e| format!("cannot export {}: {e}", spec.path.display()))?;
            if !path.is_dir() {
                return Err(format!(
                    "cannot export {}: not a directory",
                    spec.path.display()
                ));
            }
            path
        }
        BackendKind::Memory => spec.path,
    };
    let mut c = ExportConfig::new(path);
    c.mount_path = spec.mount_path;
    c.id = spec.id;
    c.backend = backend;
    c.access = spec
        .access
        .map_or(rnfs_server::nfs::exports::Access::Rw, Into::into);
    if let Some(squash) = spec.squash {
        c.squash = squash.into();
    }
    if let Some(uid) = spec.anonuid {
        c.anonuid = uid;
    }
    if let Some(gid) = spec.anongid {
        c.anongid = gid;
    }
    c.clients = spec.clients;
    c.secure = spec.secure;
    if let Some(age) = spec.attr_cache_max_age {
        c.attr_cache_max_age = age;
    }
    c.sync = !spec.async_;
    Ok(c)
}

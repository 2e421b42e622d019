//! The admin protocol: one JSON request per line, one JSON response per line.
//!
//! ```text
//! request   {"cmd":"stats"}
//!           {"cmd":"threads"}                        (the current figures)
//!           {"cmd":"threads","set":N}                (a fixed count)
//!           {"cmd":"threads","min":N,"max":M}        (dynamic bounds; either may be left out)
//!           {"cmd":"exports"}
//!           {"cmd":"reload"}                         (re-read --config, as SIGHUP)
//!           {"cmd":"export-add","path":P, ...}       (fields of ExportSpec)
//!           {"cmd":"export-remove","mount_path":P}
//!           {"cmd":"clients"}
//!           {"cmd":"drain"} | {"cmd":"drain","timeout_secs":S}
//! response  {"ok":true,"result":...} | {"ok":false,"error":"human readable message"}
//! ```
//!
//! Unknown fields are errors, so a misspelt option is never silently ignored.
//! Field names are part of the protocol: add fields, do not rename them.

use std::path::PathBuf;

use rnfs_server::nfs::exports::{Access, BackendKind, Export, Squash};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest request line accepted, newline excluded.
pub(crate) const MAX_REQUEST_LINE: usize = 64 * 1024;

/// Every command name, for the "unknown command" message.
pub(crate) const COMMANDS: &[&str] = &[
    "stats",
    "threads",
    "exports",
    "reload",
    "export-add",
    "export-remove",
    "clients",
    "drain",
];

/// The commands that take no fields.
const FIELDLESS: &[&str] = &["stats", "exports", "reload", "clients"];

/// One admin request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub(crate) enum Request {
    /// The server's [`StatsSnapshot`](rnfs_server::metrics::StatsSnapshot).
    Stats,
    /// Shows or changes the service-thread count ([`ThreadsReply`]).
    Threads {
        /// A fixed count (min = max = set).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        set: Option<u64>,
        /// New minimum for dynamic sizing; default: the current one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<u64>,
        /// New maximum for dynamic sizing; default: the current one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u64>,
    },
    /// The live export table (a list of [`ExportRow`]).
    Exports,
    /// Re-reads the configuration file ([`ReloadReply`]).
    Reload,
    /// Adds an export to the live table ([`ExportChangeReply`]).
    ExportAdd(ExportSpec),
    /// Removes an export from the live table ([`ExportChangeReply`]).
    ExportRemove {
        /// The path clients mount.
        mount_path: String,
    },
    /// Per-client rows (a list of [`ClientSnapshot`](rnfs_server::metrics::ClientSnapshot)).
    Clients,
    /// Stops serving once the calls in flight are done ([`DrainReply`]).
    Drain {
        /// How long to wait for calls in flight; default 10 s.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_secs: Option<f64>,
    },
}

impl Request {
    /// Parses one request line. The error is the message sent back to the client.
    pub(crate) fn parse(line: &str) -> Result<Request, String> {
        let value: Value =
            serde_json::from_str(line).map_err(|e| format!("malformed JSON request: {e}"))?;
        let Some(object) = value.as_object() else {
            return Err(r#"a request is a JSON object such as {"cmd":"stats"}"#.into());
        };
        let cmd = match object.get("cmd") {
            Some(Value::String(cmd)) => cmd,
            Some(_) => return Err(r#""cmd" must be a string such as "stats""#.into()),
            None => return Err(r#"the request has no "cmd" field"#.into()),
        };
        if !COMMANDS.contains(&cmd.as_str()) {
            return Err(format!(
                "unknown command {cmd:?} (commands: {})",
                COMMANDS.join(", ")
            ));
        }
        let cmd = cmd.clone();
        // serde ignores extra fields next to the tag of a field-less variant.
        if FIELDLESS.contains(&cmd.as_str()) {
            if let Some(extra) = object.keys().find(|k| *k != "cmd") {
                return Err(format!(
                    "bad {cmd} request: unknown field `{extra}` ({cmd} takes none)"
                ));
            }
        }
        serde_json::from_value(value).map_err(|e| format!("bad {cmd} request: {e}"))
    }
}

/// One response line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Response {
    /// Whether the request was carried out.
    pub(crate) ok: bool,
    /// The command's result, when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<Value>,
    /// Why not, when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

impl Response {
    /// A success carrying `result`.
    pub(crate) fn ok(result: Value) -> Response {
        Response {
            ok: true,
            result: Some(result),
            error: None,
        }
    }

    /// A refusal with a human-readable message.
    pub(crate) fn error(message: impl Into<String>) -> Response {
        Response {
            ok: false,
            result: None,
            error: Some(message.into()),
        }
    }

    /// The JSON line, without the newline.
    pub(crate) fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!(r#"{{"ok":false,"error":"cannot encode the response: {e}"}}"#)
        })
    }
}

/// Backend of an export ([`BackendKind`] in the protocol and on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum BackendName {
    /// The host directory.
    Local,
    /// An empty in-memory file system.
    Memory,
}

/// `ro` or `rw` ([`Access`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum AccessName {
    /// Read-only.
    Ro,
    /// Read-write.
    Rw,
}

/// Identity squashing ([`Squash`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SquashName {
    /// root_squash.
    Root,
    /// all_squash.
    All,
    /// no_root_squash.
    None,
}

/// The protocol names print as the configuration spells them.
macro_rules! display_as {
    ($($name:ty => $kind:ty),+) => {$(
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                <$kind>::from(*self).fmt(f)
            }
        }
    )+};
}
display_as!(AccessName => Access, BackendName => BackendKind, SquashName => Squash);

impl From<BackendName> for BackendKind {
    fn from(b: BackendName) -> Self {
        match b {
            BackendName::Local => BackendKind::Local,
            BackendName::Memory => BackendKind::Memory,
        }
    }
}

impl From<BackendKind> for BackendName {
    fn from(b: BackendKind) -> Self {
        match b {
            BackendKind::Local => BackendName::Local,
            BackendKind::Memory => BackendName::Memory,
        }
    }
}

impl From<AccessName> for Access {
    fn from(a: AccessName) -> Self {
        match a {
            AccessName::Ro => Access::Ro,
            AccessName::Rw => Access::Rw,
        }
    }
}

impl From<Access> for AccessName {
    fn from(a: Access) -> Self {
        match a {
            Access::Ro => AccessName::Ro,
            Access::Rw => AccessName::Rw,
        }
    }
}

impl From<SquashName> for Squash {
    fn from(s: SquashName) -> Self {
        match s {
            SquashName::Root => Squash::Root,
            SquashName::All => Squash::All,
            SquashName::None => Squash::None,
        }
    }
}

impl From<Squash> for SquashName {
    fn from(s: Squash) -> Self {
        match s {
            Squash::Root => SquashName::Root,
            Squash::All => SquashName::All,
            Squash::None => SquashName::None,
        }
    }
}

/// An export to add: the fields of a configuration file's `[[export]]` table.
/// Unlike the file, `access` defaults to `rw`, as `rnfs serve EXPORT_DIR` does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExportSpec {
    /// Directory on the server's host (absolute; for `memory`, only a name).
    pub(crate) path: PathBuf,
    /// What clients mount; default: `path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mount_path: Option<String>,
    /// Handle prefix; default: a hash of the mount path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<u32>,
    /// Backend; default `local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) backend: Option<BackendName>,
    /// Access; default `rw`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) access: Option<AccessName>,
    /// Squashing; default `root`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) squash: Option<SquashName>,
    /// uid of squashed callers; default 65534.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) anonuid: Option<u32>,
    /// gid of squashed callers; default 65534.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) anongid: Option<u32>,
    /// Allowed client networks; absent: everyone. An empty list is refused
    /// (as `clients = []` in the configuration file): it admits nobody.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) clients: Option<Vec<String>>,
    /// Require a privileged source port.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) secure: bool,
    /// Seconds READDIRPLUS may answer from attributes read earlier; default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) attr_cache_max_age: Option<u32>,
    /// Reply before changes are on stable storage (exports(5) `async`).
    #[serde(default, rename = "async", skip_serializing_if = "std::ops::Not::not")]
    pub(crate) async_: bool,
}

/// The `threads` result: the bounds now in force and the live count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ThreadsReply {
    /// Service threads running now, all pools together. After a decrease,
    /// surplus threads exit when they next look for work, so this may still
    /// show the old count for a moment.
    pub(crate) threads: u64,
    /// Minimum (equal to `max` for a fixed count).
    pub(crate) min: u64,
    /// Maximum.
    pub(crate) max: u64,
    /// Scheduler pools; every pool keeps at least one thread.
    pub(crate) pools: u64,
}

/// One live export, as `exports` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ExportRow {
    /// Handle prefix.
    pub(crate) id: u32,
    /// What clients mount.
    pub(crate) mount_path: String,
    /// Host directory.
    pub(crate) path: String,
    /// Backend.
    pub(crate) backend: BackendName,
    /// `ro` or `rw`.
    pub(crate) access: AccessName,
    /// Squashing.
    pub(crate) squash: SquashName,
    /// uid of squashed callers.
    pub(crate) anonuid: u32,
    /// gid of squashed callers.
    pub(crate) anongid: u32,
    /// Allowed networks; empty: everyone.
    pub(crate) clients: Vec<String>,
    /// Privileged source port required.
    pub(crate) secure: bool,
    /// Seconds READDIRPLUS may answer from attributes read earlier.
    #[serde(default)]
    pub(crate) attr_cache_max_age: u32,
    /// Changes committed before the reply (`false`: exports(5) `async`).
    #[serde(default = "yes")]
    pub(crate) sync: bool,
}

fn yes() -> bool {
    true
}

impl From<&Export> for ExportRow {
    fn from(e: &Export) -> Self {
        ExportRow {
            id: e.id,
            mount_path: e.mount_path.clone(),
            path: e.config.path.to_string_lossy().into_owned(),
            backend: e.config.backend.into(),
            access: e.config.access.into(),
            squash: e.config.squash.into(),
            anonuid: e.config.anonuid,
            anongid: e.config.anongid,
            clients: e.config.clients.clone().unwrap_or_default(),
            secure: e.config.secure,
            attr_cache_max_age: e.config.attr_cache_max_age,
            sync: e.config.sync,
        }
    }
}

/// The `reload` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReloadReply {
    /// The file re-read.
    pub(crate) config: String,
    /// Exports now.
    pub(crate) exports: u64,
    /// Mount paths added.
    pub(crate) added: Vec<String>,
    /// Mount paths removed.
    pub(crate) removed: Vec<String>,
    /// Mount paths whose options changed.
    pub(crate) changed: Vec<String>,
    /// What the reload could not apply (settings read only at start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
}

/// The `export-add` and `export-remove` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ExportChangeReply {
    /// The export added or removed.
    pub(crate) export: ExportRow,
    /// Exports now.
    pub(crate) exports: u64,
    /// Set when the server runs from a configuration file, which the change
    /// is not written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
}

/// The `drain` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DrainReply {
    /// Calls read but not yet answered when the drain began.
    pub(crate) in_flight: u64,
    /// Work still in flight when the server stopped (0 unless the timeout hit).
    pub(crate) remaining: u64,
    /// Seconds the drain waited.
    pub(crate) waited_secs: f64,
    /// False if the server had already been drained by an earlier request.
    pub(crate) stopped_now: bool,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn requests_round_trip_through_their_json_lines() {
        let requests = [
            Request::Stats,
            Request::Threads {
                set: Some(4),
                min: None,
                max: None,
            },
            Request::Threads {
                set: None,
                min: Some(2),
                max: Some(8),
            },
            Request::ExportAdd(ExportSpec {
                path: "/srv/a".into(),
                mount_path: Some("/a".into()),
                id: None,
                backend: Some(BackendName::Memory),
                access: Some(AccessName::Ro),
                squash: None,
                anonuid: None,
                anongid: None,
                clients: Some(vec!["10.0.0.0/8".into()]),
                secure: true,
                attr_cache_max_age: Some(0),
                async_: true,
            }),
            Request::ExportRemove {
                mount_path: "/a".into(),
            },
            Request::Drain {
                timeout_secs: Some(1.5),
            },
        ];
        for r in requests {
            let line = serde_json::to_string(&r).unwrap();
            assert_eq!(Request::parse(&line).unwrap(), r, "{line}");
        }
        assert_eq!(
            serde_json::to_string(&Request::Stats).unwrap(),
            r#"{"cmd":"stats"}"#
        );
        assert_eq!(
            Request::parse(r#"{"cmd":"threads","set":3}"#).unwrap(),
            Request::Threads {
                set: Some(3),
                min: None,
                max: None
            }
        );
    }

    #[test]
    fn bad_requests_get_messages_that_say_what_is_wrong() {
        let err = |line: &str| Request::parse(line).unwrap_err();
        assert!(err("{").starts_with("malformed JSON"), "{}", err("{"));
        assert!(err("[1]").contains("JSON object"));
        assert!(err(r#"{"set":1}"#).contains(r#"no "cmd""#));
        assert!(err(r#"{"cmd":7}"#).contains("must be a string"));
        let e = err(r#"{"cmd":"frobnicate"}"#);
        assert!(
            e.contains("unknown command \"frobnicate\"") && e.contains("export-add"),
            "{e}"
        );
        let e = err(r#"{"cmd":"threads","sett":3}"#);
        assert!(
            e.starts_with("bad threads request") && e.contains("sett"),
            "{e}"
        );
        let e = err(r#"{"cmd":"threads","set":-1}"#);
        assert!(e.contains("-1"), "{e}");
        let e = err(r#"{"cmd":"export-remove"}"#);
        assert!(e.contains("mount_path"), "{e}");
        let e = err(r#"{"cmd":"export-add","path":"/x","acess":"ro"}"#);
        assert!(e.contains("acess"), "{e}");
        let e = err(r#"{"cmd":"export-add","path":"/x","access":"rx"}"#);
        assert!(e.contains("rx"), "{e}");
        let e = err(r#"{"cmd":"stats","verbose":true}"#);
        assert!(e.contains("verbose"), "{e}");
    }

    #[test]
    fn responses_carry_either_a_result_or_an_error() {
        let ok = Response::ok(serde_json::json!({"threads": 4}));
        assert_eq!(ok.to_line(), r#"{"ok":true,"result":{"threads":4}}"#);
        let bad = Response::error("no such export");
        assert_eq!(bad.to_line(), r#"{"ok":false,"error":"no such export"}"#);
        let back: Response = serde_json::from_str(&bad.to_line()).unwrap();
        assert_eq!(back, bad);
    }
}

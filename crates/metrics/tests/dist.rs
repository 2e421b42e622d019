//! The example files in `dist/` stay valid: the config is accepted by the
//! server's own parser and export-table builder, and the systemd unit runs
//! the command this project documents.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::sync::Arc;

use rnfs_server::nfs::{ConfigFile, Exports};
use rnfs_vfs::memory::MemoryFs;
use rnfs_vfs::Filesystem;

const CONFIG: &str = include_str!("../../../dist/rnfs.toml");
const UNIT: &str = include_str!("../../../dist/rnfs.service");

/// The default of `rnfs serve --shutdown-timeout`, in seconds.
const SHUTDOWN_TIMEOUT_S: u64 = 10;

#[test]
fn example_config_parses_and_builds_an_export_table() {
    let file = ConfigFile::parse(CONFIG).unwrap_or_else(|e| panic!("dist/rnfs.toml: {e}"));
    assert_eq!(
        file.server.state_dir.as_deref(),
        Some(std::path::Path::new("/var/lib/rnfs"))
    );
    assert!(file.exports.len() >= 2);
    for e in &file.exports {
        assert!(
            e.id.is_some(),
            "{}: give every example export an id",
            e.mount_path()
        );
    }
    // The same checks `rnfs serve` makes (networks, duplicate ids and mount
    // paths, absolute mount paths), with memory backends instead of the
    // example's directories.
    let opener = Box::new(|_: &rnfs_server::nfs::ExportConfig| {
        Ok(Arc::new(MemoryFs::new(1)) as Arc<dyn Filesystem>)
    });
    let exports = Exports::new(&file.exports, opener).unwrap_or_else(|e| panic!("{e}"));
    let table = exports.load();
    assert!(table.by_mount_path("/data").is_some());
    assert!(table.by_mount_path("/isos").is_some());
}

#[test]
fn example_unit_is_well_formed_and_runs_the_documented_command() {
    let mut section = "";
    let mut keys = Vec::new();
    for line in UNIT.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('[') {
            assert!(line.ends_with(']'), "bad section line {line:?}");
            section = line;
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not Key=Value: {line:?}"));
        assert!(
            !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric()),
            "bad key in {line:?}"
        );
        assert!(!section.is_empty(), "{line:?} outside a section");
        keys.push((section, key, value));
    }
    let get = |section: &str, key: &str| {
        keys.iter()
            .find(|(s, k, _)| *s == section && *k == key)
            .map(|(_, _, v)| *v)
            .unwrap_or_else(|| panic!("{section} {key}= missing"))
    };
    assert_eq!(
        get("[Service]", "ExecStart"),
        "/usr/local/bin/rnfs serve --config /etc/rnfs/rnfs.toml --metrics 127.0.0.1:9400"
    );
    assert_eq!(get("[Service]", "ExecReload"), "/bin/kill -HUP $MAINPID");
    // rnfs does not call sd_notify, so Type=notify would time out.
    assert_eq!(get("[Service]", "Type"), "exec");
    let stop: u64 = get("[Service]", "TimeoutStopSec").parse().unwrap();
    assert!(
        stop > SHUTDOWN_TIMEOUT_S,
        "TimeoutStopSec must exceed rnfs's own shutdown bound"
    );
    assert_eq!(get("[Service]", "Restart"), "on-failure");
    assert_eq!(get("[Service]", "LimitNOFILE"), "1048576");
    assert_eq!(get("[Install]", "WantedBy"), "multi-user.target");
    // The capabilities identity switching and handle resolution need.
    let caps = get("[Service]", "CapabilityBoundingSet");
    for cap in ["CAP_SETUID", "CAP_SETGID", "CAP_DAC_READ_SEARCH"] {
        assert!(caps.split(' ').any(|c| c == cap), "{cap} missing");
    }
}

//! What `crates/{rpc,nfs3}/tests/fuzz_corpus.rs` share: reading a target's
//! corpus, replaying it, and the proptest strategy and check of the mutation
//! tests. Use: `#[path = "../../../fuzz/replay.rs"] mod replay;`
#![allow(dead_code, reason = "each test binary uses a different subset")]
#![allow(clippy::unwrap_used, reason = "tests")]

use std::fs;
use std::path::PathBuf;

use proptest::prelude::*;
use proptest::sample::Index;
use rnfs_xdr::fuzzing::{env_or, run_mutated, Edit};

/// `fuzz/corpus/<target>`.
pub(crate) fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// The files of the target's corpus, sorted by name.
pub(crate) fn corpus_files(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut paths: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let data = fs::read(&p).unwrap();
            (p, data)
        })
        .collect()
}

/// The target's corpus inputs, without their names.
pub(crate) fn corpus(target: &str) -> Vec<Vec<u8>> {
    corpus_files(target).into_iter().map(|(_, d)| d).collect()
}

/// Runs `f` on every file of the target's corpus and returns how many there were.
pub(crate) fn replay(target: &str, f: fn(&[u8])) -> usize {
    let files = corpus_files(target);
    for (path, data) in &files {
        let result = std::panic::catch_unwind(|| f(data));
        assert!(result.is_ok(), "{target}: {} panicked", path.display());
    }
    files.len()
}

/// Cases per mutated-input test: `FUZZ_CASES`, 512 by default.
pub(crate) fn fuzz_cases() -> u32 {
    u32::try_from(env_or("FUZZ_CASES", 512)).unwrap_or(u32::MAX)
}

/// One to seven edits.
pub(crate) fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec(any::<(u8, u32, u32)>().prop_map(Edit::from), 1..8)
}

/// Runs `target` on input `pick` of `inputs` after `edits`; panics with the
/// mutated input if the target panicked.
pub(crate) fn check_mutated(
    inputs: &[Vec<u8>],
    target: fn(&[u8]),
    pick: Index,
    other: Index,
    edits: &[Edit],
) {
    let (input, other) = (pick.get(inputs), other.get(inputs));
    if let Err((data, message)) = run_mutated(input, other, edits, target) {
        panic!("{message}\ninput: {data:02x?}");
    }
}

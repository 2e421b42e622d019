//! How a test says it cannot run here (no root, no FUSE, a noexec temporary
//! directory, ...): a skip on a developer's machine, a failure under CI
//! (`RNFS_CI=1`, set by ci/test.sh, or `CI=1`/`CI=true`), which provides
//! everything the tests need, so that there a missing requirement cannot pass
//! silently. Shared by the crates' tests through `#[path]` (test code only).

/// Says why this test cannot run here and returns (the caller then returns,
/// skipping the rest); panics with `why` instead under CI.
#[track_caller]
pub(crate) fn cannot_run(why: &str) {
    let set = |name: &str| matches!(std::env::var(name).as_deref(), Ok("1" | "true"));
    assert!(
        !set("RNFS_CI") && !set("CI"),
        "under CI, not skipping: {why}"
    );
    eprintln!("skipped: {why}");
}

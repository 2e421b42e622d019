//! The backend conformance suite: one set of cases that every [`Filesystem`]
//! backend must pass, checking the rules written in `rnfs_vfs`'s crate docs.
//!
//! # Instantiating it for a backend
//!
//! In `tests/<backend>.rs` (the module must be named `conformance` and sit at
//! the crate root, because the macros refer to `$crate::conformance`):
//!
//! ```ignore
//! #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]
//!
//! #[macro_use]
//! mod conformance;
//!
//! use conformance::{Caps, Fixture};
//!
//! fn fixture() -> Fixture<MyFs> {
//!     let dir = make_temp_dir();
//!     // The guard is dropped after the file system (e.g. a temp dir to delete).
//!     Fixture::new(MyFs::new(dir.path()), Caps::ALL).with_guard(dir)
//! }
//!
//! // One #[test] per case, named after the case.
//! conformance_tests!(fixture);
//! // Only for backends that check credentials themselves (not a backend that
//! // acts as one fixed identity): cases run as uid 1000 against root-owned files.
//! conformance_permission_tests!(fixture);
//! ```
//!
//! `fixture` is any expression callable with no arguments that returns a fresh
//! [`Fixture`]: every case gets an empty file system of its own. Most cases act
//! with [`Cred::root()`](rnfs_vfs::Cred::root); they never set owners unless
//! [`Caps::chown`] says the backend can, and never assert who owns a new file.
//!
//! Cases that need an optional capability return early (printing a note) when
//! [`Caps`] says the backend lacks it.
#![allow(
    dead_code,
    reason = "each backend instantiates only the groups it supports"
)]
#![allow(
    unreachable_pub,
    reason = "a module of a test crate: `pub` only spans the crate"
)]

pub mod access;
pub mod attrs;
pub mod create;
pub mod fs;
pub mod handles;
pub mod io;
pub mod link;
pub mod lookup;
pub mod names;
pub mod perms;
pub mod readdir;
pub mod remove;
pub mod rename;
pub mod symlink;
pub mod util;

use std::any::Any;

use rnfs_vfs::Filesystem;

/// What a backend can do beyond the contract's minimum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// SETATTR may give a file to another uid/gid with `Cred::root()` (false for
    /// the local backend running as an ordinary user).
    pub chown: bool,
    /// MKNOD of character and block devices works with `Cred::root()`.
    pub device_nodes: bool,
    /// A non-zero READDIR verifier other than the one the backend handed out is
    /// [`FsError::BadCookie`](rnfs_vfs::FsError::BadCookie).
    pub checks_cookie_verifier: bool,
}

impl Caps {
    /// Every capability (the memory backend; the local backend as root).
    pub const ALL: Self = Self {
        chown: true,
        device_nodes: true,
        checks_cookie_verifier: true,
    };
    /// No optional capability.
    pub const NONE: Self = Self {
        chown: false,
        device_nodes: false,
        checks_cookie_verifier: false,
    };
}

/// A fresh, empty file system for one case, plus whatever must outlive it.
pub struct Fixture<F: Filesystem> {
    /// The backend under test (dropped before `guard`).
    pub fs: F,
    /// Its optional capabilities.
    pub caps: Caps,
    guard: Option<Box<dyn Any>>,
}

impl<F: Filesystem> Fixture<F> {
    /// A fixture without a guard.
    pub fn new(fs: F, caps: Caps) -> Self {
        Self {
            fs,
            caps,
            guard: None,
        }
    }

    /// Keeps `guard` alive until after the file system is dropped.
    pub fn with_guard(mut self, guard: impl Any) -> Self {
        self.guard = Some(Box::new(guard));
        self
    }

    /// The backend as a trait object.
    pub fn fs(&self) -> &dyn Filesystem {
        &self.fs
    }
}

/// Expands to one `#[test]` per `module::case`, each calling the case with a
/// fresh fixture from `$make`.
macro_rules! conformance_cases {
    ($make:expr; $($module:ident :: $case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let fixture = $make();
                $crate::conformance::$module::$case(&fixture);
            }
        )*
    };
}

/// Every case a backend must pass, acting as root (see the module docs).
macro_rules! conformance_tests {
    ($make:expr) => {
        conformance_cases!($make;
            attrs::getattr_root_is_directory,
            attrs::getattr_fsid_and_fileids,
            attrs::setattr_mode,
            attrs::setattr_owner,
            attrs::setattr_chown_with_a_set_id_mode_drops_it,
            attrs::setattr_size_truncates_and_extends_with_zeros,
            attrs::setattr_size_on_directory_is_isdir,
            attrs::setattr_client_times,
            attrs::setattr_server_time,
            attrs::setattr_ctime_guard,
            attrs::setattr_empty_changes_nothing,
            lookup::lookup_dot_is_self,
            lookup::lookup_dotdot_is_parent,
            lookup::lookup_dotdot_at_root_is_root,
            lookup::lookup_missing_is_noent,
            lookup::lookup_in_file_is_notdir,
            lookup::lookup_handle_is_stable,
            access::access_root_on_file_and_dir,
            access::access_execute_needs_an_x_bit,
            access::access_answers_only_the_mask,
            symlink::symlink_target_is_stored_verbatim,
            symlink::symlink_is_never_followed,
            symlink::readlink_of_non_symlink_is_inval,
            io::read_eof_flag,
            io::read_beyond_eof,
            io::read_directory_is_isdir,
            io::write_at_offsets_reads_holes_as_zeros,
            io::write_far_offset_is_sparse,
            io::write_stability_at_least_requested,
            io::write_directory_is_isdir,
            io::write_wcc_tracks_size,
            io::commit_succeeds,
            create::create_guarded_refuses_existing,
            create::create_unchecked_opens_existing,
            create::create_exclusive_retransmit,
            create::create_sets_type_mode_and_size,
            create::create_in_file_is_notdir,
            create::mkdir_creates_directory,
            create::mknod_fifo_and_socket,
            create::mknod_devices,
            remove::remove_file_then_stale,
            remove::remove_missing_is_noent,
            remove::remove_directory_is_isdir,
            remove::rmdir_file_is_notdir,
            remove::rmdir_non_empty_is_notempty,
            remove::rmdir_empty_then_stale,
            rename::rename_within_directory,
            rename::rename_over_file_replaces_it,
            rename::rename_dir_over_empty_dir,
            rename::rename_dir_over_non_empty_dir_is_notempty,
            rename::rename_dir_over_file_is_notdir,
            rename::rename_file_over_dir_is_isdir,
            rename::rename_into_own_subtree_is_inval,
            rename::rename_to_same_name_is_noop,
            rename::rename_between_links_of_one_file_is_noop,
            rename::rename_across_directories_moves_dotdot,
            rename::rename_missing_source_is_noent,
            link::link_increments_nlink,
            link::link_to_directory_is_refused,
            link::link_existing_name_is_exist,
            link::link_into_a_non_directory_is_notdir,
            link::remove_one_link_keeps_the_file,
            readdir::readdir_lists_dot_entries_first,
            readdir::readdir_paged_returns_each_name_once,
            readdir::readdir_refused_entry_comes_again,
            readdir::readdir_resume_survives_changes,
            readdir::readdirplus_handles_resolve,
            readdir::readdirplus_dotdot_carries_no_handle,
            readdir::readdir_of_file_is_notdir,
            readdir::readdir_bad_verifier,
            names::names_are_bytes,
            names::invalid_names_refused,
            names::name_length_limit,
            handles::bad_handle_bytes,
            handles::stale_after_remove,
            fs::fsstat_is_sane,
            fs::info_is_sane,
            fs::write_verifier_is_stable,
        );
    };
}

/// Cases acting as uid 1000 against files set up by root: only for backends
/// that check credentials themselves (memory; not local, which acts as one
/// identity while the server switches fsuid).
macro_rules! conformance_permission_tests {
    ($make:expr) => {
        conformance_cases!($make;
            perms::perm_lookup_needs_search,
            perms::perm_create_needs_write_and_search,
            perms::perm_mode_class_is_exclusive,
            perms::perm_chmod_owner_only,
            perms::perm_chown_root_only,
            perms::perm_chgrp_to_own_group,
            perms::perm_utimes_rules,
            perms::perm_truncate_needs_write,
            perms::perm_sticky_directory,
            perms::perm_access_per_class,
            perms::perm_readdir_needs_read,
            perms::perm_remove_and_rename_need_write,
            perms::perm_setgid_directory_inherits_group,
            perms::perm_devices_need_root,
        );
    };
}

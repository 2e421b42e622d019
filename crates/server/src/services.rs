//! The RPC programs this server registers.
//!
//! For now only the NULL procedure (0) of NFSv3 and MOUNTv3 is served; every other
//! procedure answers PROC_UNAVAIL until the NFS and MOUNT services land. NFSACL
//! (program 100227) is deliberately not registered, so a Linux client asking for it
//! gets PROG_UNAVAIL and carries on without ACLs.

use std::sync::Arc;

use rnfs_rpc::{CallContext, Dispatcher, Service, ServiceError};
use rnfs_xdr::{Reader, Writer};

/// NFS program number (RFC 1813).
pub const NFS_PROGRAM: u32 = 100_003;
/// MOUNT program number (RFC 1813 appendix I).
pub const MOUNT_PROGRAM: u32 = 100_005;
/// NFSACL program number (Linux/Solaris side protocol; not served).
pub const NFSACL_PROGRAM: u32 = 100_227;
/// The NULL procedure, present in every program: no arguments, no results.
pub const PROC_NULL: u32 = 0;

/// Answers NULL (the arguments, normally none, are ignored as Linux does) and
/// refuses every other procedure with PROC_UNAVAIL.
fn null_only(ctx: &CallContext<'_>) -> Result<(), ServiceError> {
    match ctx.proc_ {
        PROC_NULL => Ok(()),
        _ => Err(ServiceError::ProcUnavail),
    }
}

/// NFS version 3, NULL only (for now).
#[derive(Debug, Default, Clone, Copy)]
pub struct NfsV3Null;

impl Service for NfsV3Null {
    fn program(&self) -> u32 {
        NFS_PROGRAM
    }

    fn versions(&self) -> (u32, u32) {
        (3, 3)
    }

    fn name(&self) -> &'static str {
        "nfs"
    }

    fn call(
        &self,
        ctx: &CallContext<'_>,
        _args: &mut Reader<'_>,
        _reply: &mut Writer<'_>,
    ) -> Result<(), ServiceError> {
        null_only(ctx)
    }
}

/// MOUNT version 3, NULL only (for now).
#[derive(Debug, Default, Clone, Copy)]
pub struct MountV3Null;

impl Service for MountV3Null {
    fn program(&self) -> u32 {
        MOUNT_PROGRAM
    }

    fn versions(&self) -> (u32, u32) {
        (3, 3)
    }

    fn name(&self) -> &'static str {
        "mount"
    }

    fn call(
        &self,
        ctx: &CallContext<'_>,
        _args: &mut Reader<'_>,
        _reply: &mut Writer<'_>,
    ) -> Result<(), ServiceError> {
        null_only(ctx)
    }
}

/// A dispatcher with [`NfsV3Null`] and [`MountV3Null`] registered.
pub fn default_dispatcher() -> Dispatcher {
    let mut d = Dispatcher::new();
    // Distinct programs: registration cannot overlap.
    for service in [
        Arc::new(NfsV3Null) as Arc<dyn Service>,
        Arc::new(MountV3Null),
    ] {
        if let Err(e) = d.register(service) {
            debug_assert!(false, "{e}");
        }
    }
    d
}

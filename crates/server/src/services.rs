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

/// A program of which only NULL is served (the arguments, normally none, are
/// ignored as Linux does); every other procedure gets PROC_UNAVAIL.
#[derive(Debug, Clone, Copy)]
pub struct NullOnly {
    program: u32,
    version: u32,
    name: &'static str,
}

/// NFS version 3, NULL only (for now).
pub const NFS_V3_NULL: NullOnly = NullOnly {
    program: NFS_PROGRAM,
    version: 3,
    name: "nfs",
};

/// MOUNT version 3, NULL only (for now).
pub const MOUNT_V3_NULL: NullOnly = NullOnly {
    program: MOUNT_PROGRAM,
    version: 3,
    name: "mount",
};

impl Service for NullOnly {
    fn program(&self) -> u32 {
        self.program
    }

    fn versions(&self) -> (u32, u32) {
        (self.version, self.version)
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn call(
        &self,
        ctx: &CallContext<'_>,
        _args: &mut Reader<'_>,
        _reply: &mut Writer<'_>,
    ) -> Result<(), ServiceError> {
        match ctx.proc_ {
            PROC_NULL => Ok(()),
            _ => Err(ServiceError::ProcUnavail),
        }
    }

    /// Every call is answered without touching anything.
    fn is_quick(&self, _vers: u32, _proc_: u32) -> bool {
        true
    }
}

/// A dispatcher with [`NFS_V3_NULL`] and [`MOUNT_V3_NULL`] registered.
pub fn default_dispatcher() -> Dispatcher {
    let mut d = Dispatcher::new();
    // Distinct programs: registration cannot overlap.
    for service in [NFS_V3_NULL, MOUNT_V3_NULL] {
        if let Err(e) = d.register(Arc::new(service)) {
            debug_assert!(false, "{e}");
        }
    }
    d
}

//! Client options and a one-u32 call to the fake servers' test program.

use std::time::Duration;

use rnfs_client::{ClientError, ClientOptions, Credential, RpcClient};

/// The fake servers' program number.
pub(crate) const PROG: u32 = 400_123;

/// Options with a timeout, a retransmission count and a slot cap.
pub(crate) fn options(timeout_ms: u64, retrans: u32, max_slots: u32) -> ClientOptions {
    ClientOptions {
        timeout: Duration::from_millis(timeout_ms),
        retrans,
        max_slots,
        ..ClientOptions::default()
    }
}

/// Procedure 1 of [`PROG`]: sends `arg`, returns the u32 the server answers.
pub(crate) fn call_u32(rpc: &RpcClient, arg: u32) -> Result<u32, ClientError> {
    rpc.call(&Credential::root(), PROG, 1, 1, &arg, |r| r.read_u32())
}

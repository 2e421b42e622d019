//! XDR (RFC 4506) codec: a borrowing, bounded [`Reader`] and an appending [`Writer`].
//!
//! This crate does no IO. Everything decoded from the network goes through
//! [`Reader`], which checks every length prefix against both a caller-given maximum
//! and the bytes actually remaining *before* anything is allocated or sliced, so a
//! hostile `0xFFFF_FFFF` length costs nothing. Every failure is a [`DecodeError`]
//! that names the XDR type being decoded.
//!
//! Conventions, all from RFC 4506:
//! - every item occupies a multiple of four bytes (§3); variable-length opaque data
//!   and strings are followed by up to three padding bytes;
//! - padding is written as zeros but **accepted with any value** on read, as the Linux
//!   kernel's XDR decoder does (RFC 4506 §4.9 says it "MUST" be zero; being lenient
//!   costs nothing and interoperates with sloppy peers);
//! - `bool` must be 0 or 1 (§4.4); anything else is [`DecodeError::BadBool`];
//! - strings (§4.11) are returned as bytes: NFS names are not necessarily UTF-8.
//!
//! Composite types implement [`Decode`] / [`Encode`]. A decoder labels the errors its
//! primitive reads raise with [`Reader::named`], so an over-long file name reports
//! `filename3` rather than `string<>`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod codec;
mod error;
pub mod fuzzing;
mod reader;
mod writer;

pub use codec::{Decode, Encode};
pub use error::DecodeError;
pub use reader::Reader;
pub use writer::{Slot, Writer};

/// Number of zero bytes needed after `len` bytes to reach a four-byte boundary.
#[inline]
pub const fn padding(len: usize) -> usize {
    (4 - (len & 3)) & 3
}

/// `len` rounded up to a multiple of four: the wire size of `len` bytes of opaque data.
#[inline]
pub const fn padded_len(len: usize) -> usize {
    len + padding(len)
}

//! The appending XDR writer.

use crate::padding;

/// Appends XDR-encoded data to a caller-owned `Vec<u8>`, so buffers can be reused
/// across calls and several layers (record mark, RPC header, results) can write into
/// one allocation.
///
/// Positions ([`len`](Self::len), [`Slot`]) are offsets into the whole vector, not
/// relative to where this writer started.
#[derive(Debug)]
pub struct Writer<'a> {
    buf: &'a mut Vec<u8>,
}

/// A reserved four-byte hole in a [`Writer`]'s buffer, filled later with
/// [`Writer::patch_u32`]: used for lengths known only after their data is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a reserved slot should be patched"]
pub struct Slot(usize);

impl Slot {
    /// Offset of the slot in the buffer.
    pub fn position(self) -> usize {
        self.0
    }
}

impl<'a> Writer<'a> {
    /// A writer appending to `buf` (existing contents are kept).
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        Self { buf }
    }

    /// Current length of the underlying buffer.
    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the underlying buffer is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Drops everything written from `pos` on (no-op if `pos >= len()`): rolls back a
    /// partially written value.
    #[inline]
    pub fn truncate(&mut self, pos: usize) {
        self.buf.truncate(pos);
    }

    /// Reserves capacity for at least `additional` more bytes.
    #[inline]
    pub fn reserve(&mut self, additional: usize) {
        self.buf.reserve(additional);
    }

    /// The bytes written so far (the whole buffer).
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        self.buf
    }

    /// `unsigned int`.
    #[inline]
    pub fn write_u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// `int`.
    #[inline]
    pub fn write_i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// `unsigned hyper`.
    #[inline]
    pub fn write_u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// `hyper`.
    #[inline]
    pub fn write_i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// `bool`: 0 or 1.
    #[inline]
    pub fn write_bool(&mut self, v: bool) {
        self.write_u32(u32::from(v));
    }

    /// Fixed-length opaque data: the bytes plus zero padding, no length.
    pub fn write_fixed_opaque(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
        self.buf.extend_from_slice(&[0; 3][..padding(data.len())]);
    }

    /// Variable-length opaque data: length, bytes, zero padding.
    ///
    /// XDR cannot express more than `u32::MAX` bytes; longer input is truncated to
    /// that (callers enforce their protocol's much smaller limits).
    pub fn write_opaque(&mut self, data: &[u8]) {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        let data = &data[..len as usize];
        self.buf.reserve(4 + data.len() + 3);
        self.write_u32(len);
        self.write_fixed_opaque(data);
    }

    /// A string: same wire form as [`write_opaque`](Self::write_opaque).
    pub fn write_string(&mut self, s: &[u8]) {
        self.write_opaque(s);
    }

    /// Optional data `T *`: a flag, then the value if present.
    pub fn write_optional<T: crate::Encode + ?Sized>(&mut self, v: Option<&T>) {
        self.write_bool(v.is_some());
        if let Some(v) = v {
            v.encode(self);
        }
    }

    /// Appends four placeholder bytes to be filled by [`patch_u32`](Self::patch_u32).
    pub fn reserve_u32(&mut self) -> Slot {
        let slot = Slot(self.buf.len());
        self.write_u32(0);
        slot
    }

    /// Writes `v` into a slot from [`reserve_u32`](Self::reserve_u32). A slot that was
    /// truncated away is ignored.
    pub fn patch_u32(&mut self, slot: Slot, v: u32) {
        if let Some(hole) = self.buf.get_mut(slot.0..slot.0 + 4) {
            hole.copy_from_slice(&v.to_be_bytes());
        } else {
            debug_assert!(false, "patch of a truncated slot at {}", slot.0);
        }
    }

    /// Overwrites bytes already written at `pos` (from [`len`](Self::len) taken
    /// earlier), e.g. a header whose values are known only after the body. A range
    /// past the end is ignored.
    pub fn overwrite(&mut self, pos: usize, bytes: &[u8]) {
        if let Some(hole) = self.buf.get_mut(pos..pos + bytes.len()) {
            hole.copy_from_slice(bytes);
        } else {
            debug_assert!(false, "overwrite past the end at {pos}");
        }
    }

    /// Length in bytes of everything written after `slot` (for length prefixes).
    pub fn len_since(&self, slot: Slot) -> usize {
        self.buf.len().saturating_sub(slot.0 + 4)
    }
}

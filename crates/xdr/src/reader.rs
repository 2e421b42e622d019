//! The borrowing, bounded XDR reader.

use crate::{padded_len, DecodeError};

/// A cursor over XDR-encoded bytes that borrows from the input.
///
/// Reads never allocate and never panic. Variable-length items ([`read_opaque`],
/// [`read_string`], [`read_array_len`]) check the declared length against the
/// caller's maximum first and against [`remaining`] second, so a caller may size a
/// `Vec` from the result.
///
/// Errors from primitive reads are labelled with the XDR primitive's name
/// (`"unsigned int"`, `"opaque<>"`, …) unless a label is in force: see [`named`].
/// A failed read leaves the reader at an unspecified position; callers stop decoding.
///
/// [`read_opaque`]: Self::read_opaque
/// [`read_string`]: Self::read_string
/// [`read_array_len`]: Self::read_array_len
/// [`remaining`]: Self::remaining
/// [`named`]: Self::named
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    /// The whole input; `pos <= buf.len()` always.
    buf: &'a [u8],
    pos: usize,
    /// Type name for errors raised by primitive reads; `None` uses the primitive's.
    label: Option<&'static str>,
}

impl<'a> Reader<'a> {
    /// A reader positioned at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            pos: 0,
            label: None,
        }
    }

    /// Bytes not yet consumed.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Bytes consumed so far.
    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The unconsumed bytes, without consuming them.
    #[inline]
    pub fn peek_rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Runs `f`, labelling errors raised by this reader's primitive reads with
    /// `type_name` (the innermost label wins; the previous label is restored after).
    ///
    /// ```
    /// # use rnfs_xdr::{Reader, DecodeError};
    /// let mut r = Reader::new(&[0, 0, 1, 0]);
    /// let err = r.named("filename3", |r| r.read_string(255)).unwrap_err();
    /// assert_eq!(err.type_name(), "filename3");
    /// ```
    pub fn named<T>(
        &mut self,
        type_name: &'static str,
        f: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        let outer = self.label.replace(type_name);
        let result = f(self);
        self.label = outer;
        result
    }

    fn name(&self, primitive: &'static str) -> &'static str {
        self.label.unwrap_or(primitive)
    }

    /// Consumes exactly `n` bytes.
    fn take(&mut self, n: usize, primitive: &'static str) -> Result<&'a [u8], DecodeError> {
        let remaining = self.remaining();
        if n > remaining {
            return Err(DecodeError::UnexpectedEnd {
                type_name: self.name(primitive),
                needed: n,
                remaining,
            });
        }
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn take_array<const N: usize>(
        &mut self,
        primitive: &'static str,
    ) -> Result<[u8; N], DecodeError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N, primitive)?);
        Ok(out)
    }

    /// `unsigned int` (RFC 4506 §4.2).
    #[inline]
    pub fn read_u32(&mut self) -> Result<u32, DecodeError> {
        self.take_array("unsigned int").map(u32::from_be_bytes)
    }

    /// `int` (§4.1).
    #[inline]
    pub fn read_i32(&mut self) -> Result<i32, DecodeError> {
        self.take_array("int").map(i32::from_be_bytes)
    }

    /// `unsigned hyper` (§4.5).
    #[inline]
    pub fn read_u64(&mut self) -> Result<u64, DecodeError> {
        self.take_array("unsigned hyper").map(u64::from_be_bytes)
    }

    /// `hyper` (§4.5).
    #[inline]
    pub fn read_i64(&mut self) -> Result<i64, DecodeError> {
        self.take_array("hyper").map(i64::from_be_bytes)
    }

    /// `bool` (§4.4): exactly 0 or 1, anything else is [`DecodeError::BadBool`].
    #[inline]
    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        match self.take_array("bool").map(u32::from_be_bytes)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(DecodeError::BadBool(v)),
        }
    }

    /// An enum discriminant (§4.3), returned raw; the caller maps it and reports
    /// unknown values with [`DecodeError::BadDiscriminant`].
    #[inline]
    pub fn read_enum(&mut self) -> Result<u32, DecodeError> {
        self.take_array("enum").map(u32::from_be_bytes)
    }

    /// Fixed-length opaque data `opaque[n]` (§4.9): `n` bytes plus padding, which is
    /// consumed and not checked.
    pub fn read_fixed_opaque(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let padded = padded_len_checked(n);
        let bytes = self.take(padded, "opaque[]")?;
        Ok(&bytes[..n])
    }

    /// Variable-length opaque data `opaque<max>` (§4.10).
    ///
    /// The length is checked against `max`, then against the remaining input
    /// (including padding), before anything else. Padding is consumed and not checked.
    pub fn read_opaque(&mut self, max: u32) -> Result<&'a [u8], DecodeError> {
        self.read_var("opaque<>", max)
    }

    /// A string `string<max>` (§4.11), as raw bytes: same wire form and checks as
    /// [`read_opaque`](Self::read_opaque). NFS file names are bytes, not UTF-8.
    pub fn read_string(&mut self, max: u32) -> Result<&'a [u8], DecodeError> {
        self.read_var("string<>", max)
    }

    fn read_var(&mut self, primitive: &'static str, max: u32) -> Result<&'a [u8], DecodeError> {
        let len = self.take_array(primitive).map(u32::from_be_bytes)?;
        if len > max {
            return Err(DecodeError::LengthLimit {
                type_name: self.name(primitive),
                len: len.into(),
                max: max.into(),
            });
        }
        let len = len as usize; // u32 fits in usize on every platform we build for
        let bytes = self.take(padded_len_checked(len), primitive)?;
        Ok(&bytes[..len])
    }

    /// The element count of a variable-length array `T<max_elems>` (§4.13).
    ///
    /// The count is checked against `max_elems`, then `count * min_elem_size` against
    /// the remaining input, so `Vec::with_capacity(count)` is bounded by the input
    /// size. `min_elem_size` is the smallest wire size of one element (4 for
    /// `unsigned int`); 0 disables the second check.
    pub fn read_array_len(
        &mut self,
        max_elems: u32,
        min_elem_size: usize,
    ) -> Result<usize, DecodeError> {
        let count = self.take_array("array<>").map(u32::from_be_bytes)?;
        if count > max_elems {
            return Err(DecodeError::LengthLimit {
                type_name: self.name("array<>"),
                len: count.into(),
                max: max_elems.into(),
            });
        }
        let count = count as usize;
        let needed = count.saturating_mul(min_elem_size);
        let remaining = self.remaining();
        if needed > remaining {
            return Err(DecodeError::UnexpectedEnd {
                type_name: self.name("array<>"),
                needed,
                remaining,
            });
        }
        Ok(count)
    }

    /// A variable-length array `T<max_elems>` of [`Decode`](crate::Decode) elements
    /// whose wire size is at least `min_elem_size`. Allocates at most once.
    pub fn read_array<T: crate::Decode<'a>>(
        &mut self,
        max_elems: u32,
        min_elem_size: usize,
    ) -> Result<Vec<T>, DecodeError> {
        let count = self.read_array_len(max_elems, min_elem_size)?;
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            out.push(T::decode(self)?);
        }
        Ok(out)
    }

    /// Optional data `T *` (§4.19): a `bool` flag followed, if set, by the value
    /// decoded by `f`.
    pub fn read_optional<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, DecodeError> {
        if self.read_bool()? {
            f(self).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Splits off the next `len` bytes as an independent reader (which keeps the
    /// current label) and advances past them.
    pub fn sub(&mut self, len: usize) -> Result<Reader<'a>, DecodeError> {
        let buf = self.take(len, "opaque[]")?;
        Ok(Reader {
            buf,
            pos: 0,
            label: self.label,
        })
    }

    /// Consumes and returns all remaining bytes.
    pub fn read_rest(&mut self) -> &'a [u8] {
        let rest = &self.buf[self.pos..];
        self.pos = self.buf.len();
        rest
    }

    /// Ends decoding of `type_name`: fails with [`DecodeError::TrailingData`] if any
    /// input is left.
    pub fn finish(self, type_name: &'static str) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            len => Err(DecodeError::TrailingData { type_name, len }),
        }
    }
}

/// `n` rounded up to four bytes, saturating: a length near `usize::MAX` then simply
/// fails the bounds check instead of wrapping.
fn padded_len_checked(n: usize) -> usize {
    if n > usize::MAX - 3 {
        usize::MAX
    } else {
        padded_len(n)
    }
}

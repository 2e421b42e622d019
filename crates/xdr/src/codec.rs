//! The [`Decode`] and [`Encode`] traits and their impls for XDR primitives.

use crate::{DecodeError, Reader, Writer};

/// A type with an XDR wire form that can be decoded, possibly borrowing from the
/// input (`'a`).
pub trait Decode<'a>: Sized {
    /// Decodes one value, advancing `r` past it.
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError>;
}

/// A type with an XDR wire form that can be encoded. Encoding cannot fail: limits are
/// the producer's responsibility.
pub trait Encode {
    /// Appends the value's wire form to `w`.
    fn encode(&self, w: &mut Writer<'_>);
}

macro_rules! primitive {
    ($ty:ty, $read:ident, $write:ident) => {
        impl Decode<'_> for $ty {
            #[inline]
            fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                r.$read()
            }
        }
        impl Encode for $ty {
            #[inline]
            fn encode(&self, w: &mut Writer<'_>) {
                w.$write(*self)
            }
        }
    };
}

primitive!(u32, read_u32, write_u32);
primitive!(i32, read_i32, write_i32);
primitive!(u64, read_u64, write_u64);
primitive!(i64, read_i64, write_i64);
primitive!(bool, read_bool, write_bool);

/// Fixed-length opaque data `opaque[N]`.
impl<const N: usize> Decode<'_> for [u8; N] {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut out = [0; N];
        out.copy_from_slice(r.read_fixed_opaque(N)?);
        Ok(out)
    }
}

impl<const N: usize> Encode for [u8; N] {
    fn encode(&self, w: &mut Writer<'_>) {
        w.write_fixed_opaque(self);
    }
}

/// Optional data `T *` (RFC 4506 §4.19).
impl<'a, T: Decode<'a>> Decode<'a> for Option<T> {
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        r.read_optional(T::decode)
    }
}

impl<T: Encode> Encode for Option<T> {
    fn encode(&self, w: &mut Writer<'_>) {
        w.write_optional(self.as_ref());
    }
}

impl<T: Encode + ?Sized> Encode for &T {
    fn encode(&self, w: &mut Writer<'_>) {
        (**self).encode(w);
    }
}

/// `void` (RFC 4506 §4.16): no bytes.
impl Decode<'_> for () {
    fn decode(_: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(())
    }
}

impl Encode for () {
    fn encode(&self, _: &mut Writer<'_>) {}
}

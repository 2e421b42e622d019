//! The one error type of the XDR layer.

/// Why a value could not be decoded. Every variant names the XDR type being decoded
/// (`type_name`): a primitive such as `"unsigned int"`, or the label set with
/// [`Reader::named`](crate::Reader::named), e.g. `"filename3"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended `needed` bytes into a read that had only `remaining` available.
    #[error("{type_name}: needed {needed} bytes, only {remaining} remain")]
    UnexpectedEnd {
        /// The type being decoded.
        type_name: &'static str,
        /// Bytes the read needed (saturating; a declared length may be huge).
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A length or element count exceeded the type's maximum (`opaque<max>`, `T<max>`).
    #[error("{type_name}: length {len} exceeds maximum {max}")]
    LengthLimit {
        /// The type being decoded.
        type_name: &'static str,
        /// The length or count found on the wire.
        len: u64,
        /// The largest one allowed.
        max: u64,
    },
    /// Bytes were left over after a complete value.
    #[error("{type_name}: {len} bytes of trailing data")]
    TrailingData {
        /// The type that should have consumed the whole input.
        type_name: &'static str,
        /// How many bytes were left.
        len: usize,
    },
    /// An enum or union discriminant had no defined arm.
    #[error("{type_name}: invalid discriminant {value}")]
    BadDiscriminant {
        /// The enum or union type.
        type_name: &'static str,
        /// The value found on the wire.
        value: u32,
    },
    /// A `bool` (or optional-data flag) was neither 0 nor 1.
    #[error("bool: invalid value {0}")]
    BadBool(u32),
}

impl DecodeError {
    /// The type that failed to decode.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::UnexpectedEnd { type_name, .. }
            | Self::LengthLimit { type_name, .. }
            | Self::TrailingData { type_name, .. }
            | Self::BadDiscriminant { type_name, .. } => type_name,
            Self::BadBool(_) => "bool",
        }
    }
}

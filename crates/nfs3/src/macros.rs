//! Declarative helpers that generate the repetitive XDR codecs: enums, structs
//! whose fields are encoded in order, and `NFS3_OK`-switched result unions.

/// An XDR enum (RFC 4506 §4.3) as a `#[repr(u32)]` Rust enum with `u32`
/// conversions, [`Decode`](rnfs_xdr::Decode) and [`Encode`](rnfs_xdr::Encode).
/// Unknown values are [`DecodeError::BadDiscriminant`](rnfs_xdr::DecodeError)
/// naming the XDR type.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident : $label:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u32)]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $value, )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];
            /// The XDR type name used in decode errors.
            pub const XDR_NAME: &'static str = $label;
        }

        impl From<$name> for u32 {
            #[inline]
            fn from(v: $name) -> u32 {
                v as u32
            }
        }

        impl TryFrom<u32> for $name {
            type Error = rnfs_xdr::DecodeError;
            #[inline]
            fn try_from(value: u32) -> Result<Self, rnfs_xdr::DecodeError> {
                match value {
                    $( $value => Ok(Self::$variant), )+
                    _ => Err(rnfs_xdr::DecodeError::BadDiscriminant { type_name: $label, value }),
                }
            }
        }

        impl rnfs_xdr::Decode<'_> for $name {
            #[inline]
            fn decode(r: &mut rnfs_xdr::Reader<'_>) -> Result<Self, rnfs_xdr::DecodeError> {
                Self::try_from(r.named($label, rnfs_xdr::Reader::read_enum)?)
            }
        }

        impl rnfs_xdr::Encode for $name {
            #[inline]
            fn encode(&self, w: &mut rnfs_xdr::Writer<'_>) {
                w.write_u32(u32::from(*self));
            }
        }
    };
}

/// An XDR struct (RFC 4506 §4.14): a Rust struct with public fields, decoded and
/// encoded in declaration order. Decode errors raised by primitive reads carry the
/// struct's XDR name unless an inner type names itself. A field written
/// `name: Ty as codec` uses `codec::decode` / `codec::encode` instead of the
/// type's own impls (for byte strings with a protocol limit).
macro_rules! xdr_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident $(<$lt:lifetime>)? : $label:literal {
            $( $(#[$fmeta:meta])* pub $field:ident : $fty:ty $(as $codec:ident)? ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        pub struct $name $(<$lt>)? {
            $( $(#[$fmeta])* pub $field: $fty, )*
        }

        impl<'a> rnfs_xdr::Decode<'a> for $name $(<$lt>)? {
            fn decode(r: &mut rnfs_xdr::Reader<'a>) -> Result<Self, rnfs_xdr::DecodeError> {
                r.named($label, |r| {
                    Ok(Self {
                        $( $field: xdr_struct!(@decode r $($codec)?), )*
                    })
                })
            }
        }

        impl $(<$lt>)? rnfs_xdr::Encode for $name $(<$lt>)? {
            #[allow(unused_variables, reason = "structs without fields")]
            fn encode(&self, w: &mut rnfs_xdr::Writer<'_>) {
                $( xdr_struct!(@encode w self.$field $(, $codec)?); )*
            }
        }
    };
    (@decode $r:ident) => { rnfs_xdr::Decode::decode($r)? };
    (@decode $r:ident $codec:ident) => { $codec::decode($r)? };
    (@encode $w:ident $value:expr) => { rnfs_xdr::Encode::encode(&$value, $w) };
    (@encode $w:ident $value:expr, $codec:ident) => { $codec::encode($value, $w) };
}

/// A procedure result (`XXX3res`, RFC 1813 §3.3): a union switched on
/// [`Nfsstat3`](crate::Nfsstat3) whose `NFS3_OK` arm is the `resok` struct and
/// whose other arms share the `resfail` fields.
macro_rules! nfs_res {
    (
        $(#[$meta:meta])*
        pub enum $name:ident $(<$lt:lifetime>)? : $label:literal {
            Ok($ok:ty),
            Fail { $( $(#[$fmeta:meta])* $field:ident : $fty:ty ),* $(,)? }
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum $name $(<$lt>)? {
            /// `NFS3_OK`, with the `resok` fields.
            Ok($ok),
            /// Any other status, with the `resfail` fields.
            Fail {
                /// Why the call failed. Never [`Nfsstat3::Ok`](crate::Nfsstat3::Ok)
                /// when decoded; encoding `Ok` here is a bug and is sent as
                /// `NFS3ERR_SERVERFAULT`.
                status: crate::Nfsstat3,
                $( $(#[$fmeta])* $field: $fty, )*
            },
        }

        impl $(<$lt>)? $name $(<$lt>)? {
            /// The status this result carries on the wire.
            pub fn status(&self) -> crate::Nfsstat3 {
                match self {
                    Self::Ok(_) => crate::Nfsstat3::Ok,
                    Self::Fail { status, .. } => crate::status::fail_status(*status),
                }
            }
        }

        impl<'a> rnfs_xdr::Decode<'a> for $name $(<$lt>)? {
            fn decode(r: &mut rnfs_xdr::Reader<'a>) -> Result<Self, rnfs_xdr::DecodeError> {
                r.named($label, |r| match <crate::Nfsstat3 as rnfs_xdr::Decode>::decode(r)? {
                    crate::Nfsstat3::Ok => Ok(Self::Ok(rnfs_xdr::Decode::decode(r)?)),
                    status => Ok(Self::Fail {
                        status,
                        $( $field: rnfs_xdr::Decode::decode(r)?, )*
                    }),
                })
            }
        }

        impl $(<$lt>)? rnfs_xdr::Encode for $name $(<$lt>)? {
            fn encode(&self, w: &mut rnfs_xdr::Writer<'_>) {
                match self {
                    Self::Ok(ok) => {
                        w.write_u32(0);
                        rnfs_xdr::Encode::encode(ok, w);
                    }
                    Self::Fail { status, $( $field, )* } => {
                        debug_assert_ne!(*status, crate::Nfsstat3::Ok, "failure result with NFS3_OK");
                        rnfs_xdr::Encode::encode(&crate::status::fail_status(*status), w);
                        $( rnfs_xdr::Encode::encode($field, w); )*
                    }
                }
            }
        }
    };
}

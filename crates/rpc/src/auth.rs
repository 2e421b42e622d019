//! Authentication flavors (RFC 5531 §8–9, appendix A): the raw [`OpaqueAuth`], the
//! parsed [`Auth`] a service sees, and [`AuthStat`], the wire code for failures.
//!
//! The server accepts AUTH_NONE and AUTH_SYS credentials, each with an AUTH_NONE
//! verifier. Following the Linux server (`svc_authenticate`, `svcauth_unix_accept`):
//! - a malformed or over-limit credential, an AUTH_NONE credential with a body, and
//!   any other flavor (AUTH_SHORT, AUTH_DH, RPCSEC_GSS, unknown) get AUTH_BADCRED;
//! - a verifier that is not an empty AUTH_NONE gets AUTH_BADVERF.
//!
//! Parsing borrows from the call and does not allocate: the machine name is a slice,
//! the supplementary groups an inline array ([`Gids`]).

use std::fmt;
use std::ops::Deref;

use rnfs_xdr::{Decode, DecodeError, Encode, Reader, Writer};

/// Largest `opaque_auth` body (RFC 5531 §8.2: `opaque body<400>`).
pub const MAX_AUTH_BYTES: u32 = 400;
/// Largest AUTH_SYS machine name (RFC 5531 appendix A: `string machinename<255>`).
pub const MAX_MACHINE_NAME: u32 = 255;
/// Most AUTH_SYS supplementary groups (RFC 5531 appendix A: `unsigned int gids<16>`).
pub const MAX_GIDS: usize = 16;

/// An authentication flavor number (`auth_flavor`). Open-ended: flavors are
/// assigned by IANA, so any value is representable.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct AuthFlavor(pub u32);

impl AuthFlavor {
    /// AUTH_NONE.
    pub const NONE: Self = Self(0);
    /// AUTH_SYS (formerly AUTH_UNIX).
    pub const SYS: Self = Self(1);
    /// AUTH_SHORT.
    pub const SHORT: Self = Self(2);
    /// AUTH_DH.
    pub const DH: Self = Self(3);
    /// RPCSEC_GSS (RFC 2203).
    pub const RPCSEC_GSS: Self = Self(6);

    fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::NONE => "AUTH_NONE",
            Self::SYS => "AUTH_SYS",
            Self::SHORT => "AUTH_SHORT",
            Self::DH => "AUTH_DH",
            Self::RPCSEC_GSS => "RPCSEC_GSS",
            _ => return None,
        })
    }
}

impl fmt::Debug for AuthFlavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "AuthFlavor({})", self.0),
        }
    }
}

impl fmt::Display for AuthFlavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// `opaque_auth` (RFC 5531 §8.2): a flavor and an uninterpreted body of at most
/// [`MAX_AUTH_BYTES`], borrowed from the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpaqueAuth<'a> {
    /// The flavor.
    pub flavor: AuthFlavor,
    /// The flavor-specific body.
    pub body: &'a [u8],
}

impl OpaqueAuth<'_> {
    /// AUTH_NONE with an empty body: the verifier of every reply this server sends.
    pub const NONE: OpaqueAuth<'static> = OpaqueAuth {
        flavor: AuthFlavor::NONE,
        body: &[],
    };
}

impl<'a> Decode<'a> for OpaqueAuth<'a> {
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        r.named("opaque_auth", |r| {
            Ok(Self {
                flavor: AuthFlavor(r.read_u32()?),
                body: r.read_opaque(MAX_AUTH_BYTES)?,
            })
        })
    }
}

impl Encode for OpaqueAuth<'_> {
    fn encode(&self, w: &mut Writer<'_>) {
        w.write_u32(self.flavor.0);
        w.write_opaque(self.body);
    }
}

/// The supplementary group ids of an AUTH_SYS credential: at most [`MAX_GIDS`],
/// stored inline. Dereferences to `[u32]`.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Gids {
    ids: [u32; MAX_GIDS],
    len: u8,
}

impl Gids {
    /// Groups from a slice; `None` if it has more than [`MAX_GIDS`].
    pub fn new(ids: &[u32]) -> Option<Self> {
        let mut gids = Self::default();
        gids.ids.get_mut(..ids.len())?.copy_from_slice(ids);
        gids.len = ids.len() as u8; // <= MAX_GIDS
        Some(gids)
    }
}

impl Deref for Gids {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.ids[..usize::from(self.len)]
    }
}

impl fmt::Debug for Gids {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// `authsys_parms` (RFC 5531 appendix A), borrowing the machine name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthSys<'a> {
    /// Arbitrary id chosen by the caller's machine.
    pub stamp: u32,
    /// The caller's host name, as bytes (at most [`MAX_MACHINE_NAME`]).
    pub machine_name: &'a [u8],
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
    /// Supplementary groups (at most [`MAX_GIDS`]).
    pub gids: Gids,
}

impl<'a> Decode<'a> for AuthSys<'a> {
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        r.named("authsys_parms", |r| {
            let stamp = r.read_u32()?;
            let machine_name = r.read_string(MAX_MACHINE_NAME)?;
            let uid = r.read_u32()?;
            let gid = r.read_u32()?;
            let n = r.read_array_len(MAX_GIDS as u32, 4)?;
            let mut gids = Gids::default();
            for slot in &mut gids.ids[..n] {
                *slot = r.read_u32()?;
            }
            gids.len = n as u8; // <= MAX_GIDS, checked by read_array_len
            Ok(Self {
                stamp,
                machine_name,
                uid,
                gid,
                gids,
            })
        })
    }
}

impl Encode for AuthSys<'_> {
    fn encode(&self, w: &mut Writer<'_>) {
        w.write_u32(self.stamp);
        w.write_string(self.machine_name);
        w.write_u32(self.uid);
        w.write_u32(self.gid);
        w.write_u32(self.gids.len() as u32);
        for gid in self.gids.iter() {
            w.write_u32(*gid);
        }
    }
}

/// A caller's identity as the server accepted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Auth<'a> {
    /// AUTH_NONE: anonymous.
    None,
    /// AUTH_SYS: uid, gid and groups asserted by the client.
    Sys(AuthSys<'a>),
}

impl<'a> Auth<'a> {
    /// Validates a call's credential and verifier (see the module docs for the rules).
    pub fn from_call(cred: &OpaqueAuth<'a>, verf: &OpaqueAuth<'_>) -> Result<Self, AuthError> {
        let mut body = Reader::new(cred.body);
        let auth = match cred.flavor {
            AuthFlavor::NONE => Self::None,
            AuthFlavor::SYS => {
                Self::Sys(AuthSys::decode(&mut body).map_err(AuthError::BadCredential)?)
            }
            other => return Err(AuthError::UnsupportedFlavor(other)),
        };
        body.finish("opaque_auth")
            .map_err(AuthError::BadCredential)?;
        if verf.flavor != AuthFlavor::NONE {
            return Err(AuthError::UnsupportedVerifier(verf.flavor));
        }
        Reader::new(verf.body)
            .finish("opaque_auth")
            .map_err(AuthError::BadVerifier)?;
        Ok(auth)
    }

    /// The flavor of this credential.
    pub fn flavor(&self) -> AuthFlavor {
        match self {
            Self::None => AuthFlavor::NONE,
            Self::Sys(_) => AuthFlavor::SYS,
        }
    }

    /// Encodes this credential as an `opaque_auth` (flavor, length, body).
    pub fn encode_opaque(&self, w: &mut Writer<'_>) {
        w.write_u32(self.flavor().0);
        let len = w.reserve_u32();
        match self {
            Self::None => {}
            Self::Sys(sys) => sys.encode(w),
        }
        let n = w.len_since(len) as u32;
        w.patch_u32(len, n);
    }
}

/// Why a call's credential or verifier was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The credential could not be decoded or broke a limit (body over 400 bytes,
    /// machine name over 255, more than 16 groups, trailing bytes).
    #[error("malformed credential: {0}")]
    BadCredential(DecodeError),
    /// The credential's flavor is not one this server accepts.
    #[error("unsupported credential flavor {0}")]
    UnsupportedFlavor(AuthFlavor),
    /// The verifier could not be decoded or was not empty.
    #[error("malformed verifier: {0}")]
    BadVerifier(DecodeError),
    /// The verifier's flavor is not AUTH_NONE.
    #[error("unsupported verifier flavor {0}")]
    UnsupportedVerifier(AuthFlavor),
}

/// The single mapping from an authentication failure to its wire code.
impl From<&AuthError> for AuthStat {
    fn from(e: &AuthError) -> Self {
        match e {
            AuthError::BadCredential(_) | AuthError::UnsupportedFlavor(_) => Self::BadCred,
            AuthError::BadVerifier(_) | AuthError::UnsupportedVerifier(_) => Self::BadVerf,
        }
    }
}

/// `auth_stat` (RFC 5531 §9): why authentication failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[repr(u32)]
pub enum AuthStat {
    /// AUTH_OK: success.
    Ok = 0,
    /// AUTH_BADCRED: bad credential (seal broken).
    BadCred = 1,
    /// AUTH_REJECTEDCRED: client must begin a new session.
    RejectedCred = 2,
    /// AUTH_BADVERF: bad verifier (seal broken).
    BadVerf = 3,
    /// AUTH_REJECTEDVERF: verifier expired or replayed.
    RejectedVerf = 4,
    /// AUTH_TOOWEAK: rejected for security reasons.
    TooWeak = 5,
    /// AUTH_INVALIDRESP: bogus response verifier.
    InvalidResp = 6,
    /// AUTH_FAILED: reason unknown.
    Failed = 7,
    /// AUTH_KERB_GENERIC: Kerberos generic error.
    KerbGeneric = 8,
    /// AUTH_TIMEEXPIRE: time of credential expired.
    TimeExpire = 9,
    /// AUTH_TKT_FILE: problem with ticket file.
    TktFile = 10,
    /// AUTH_DECODE: can't decode authenticator.
    Decode = 11,
    /// AUTH_NET_ADDR: wrong net address in ticket.
    NetAddr = 12,
    /// RPCSEC_GSS_CREDPROBLEM: no credentials for user.
    RpcsecGssCredProblem = 13,
    /// RPCSEC_GSS_CTXPROBLEM: problem with context.
    RpcsecGssCtxProblem = 14,
}

impl AuthStat {
    /// The value from its wire code.
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Ok,
            1 => Self::BadCred,
            2 => Self::RejectedCred,
            3 => Self::BadVerf,
            4 => Self::RejectedVerf,
            5 => Self::TooWeak,
            6 => Self::InvalidResp,
            7 => Self::Failed,
            8 => Self::KerbGeneric,
            9 => Self::TimeExpire,
            10 => Self::TktFile,
            11 => Self::Decode,
            12 => Self::NetAddr,
            13 => Self::RpcsecGssCredProblem,
            14 => Self::RpcsecGssCtxProblem,
            _ => return None,
        })
    }
}

impl Decode<'_> for AuthStat {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let value = r.read_enum()?;
        Self::from_u32(value).ok_or(DecodeError::BadDiscriminant {
            type_name: "auth_stat",
            value,
        })
    }
}

impl Encode for AuthStat {
    fn encode(&self, w: &mut Writer<'_>) {
        w.write_u32(*self as u32);
    }
}

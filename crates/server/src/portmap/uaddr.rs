//! Universal addresses (RFC 1833 §3, RFC 5665 §5.2.3): the text form of an IP
//! address and port that rpcbind versions 3 and 4 exchange.
//!
//! An IPv4 address is `h1.h2.h3.h4.p1.p2` and an IPv6 address is its RFC 5952 text
//! followed by `.p1.p2`, where `p1` and `p2` are the high and low octets of the port
//! in decimal: `127.0.0.1:2049` is `127.0.0.1.8.1` and `[::1]:2049` is `::1.8.1`.
//! Scope ids and flow labels have no universal form and are dropped.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The longest universal address [`parse_uaddr`] accepts: a full IPv6 text with an
/// embedded IPv4 tail (45 bytes) plus `.255.255`.
pub const MAX_INET_UADDR_LEN: usize = 53;

/// Why a string is not an IP universal address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UaddrError {
    /// Longer than [`MAX_INET_UADDR_LEN`].
    #[error("universal address longer than {MAX_INET_UADDR_LEN} bytes")]
    TooLong,
    /// The two port octets are missing or not decimal numbers up to 255.
    #[error("universal address has no valid port octets")]
    BadPort,
    /// What precedes the port octets is not an IPv4 or IPv6 address.
    #[error("universal address has no valid IP address")]
    BadHost,
}

/// Formats `addr` as a universal address.
pub fn format_uaddr(addr: SocketAddr) -> String {
    let [p1, p2] = addr.port().to_be_bytes();
    format!("{}.{p1}.{p2}", addr.ip())
}

/// Parses an IPv4 or IPv6 universal address.
pub fn parse_uaddr(uaddr: &str) -> Result<SocketAddr, UaddrError> {
    if uaddr.len() > MAX_INET_UADDR_LEN {
        return Err(UaddrError::TooLong);
    }
    let mut parts = uaddr.rsplitn(3, '.');
    let (Some(p2), Some(p1), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(UaddrError::BadPort);
    };
    let port = u16::from_be_bytes([port_octet(p1)?, port_octet(p2)?]);
    // Either parser alone: `Ipv6Addr` would take "::ffff:1.2.3.4" but `IpAddr` tries
    // both anyway; zone ids ("%eth0") are refused by both.
    let ip = if host.contains(':') {
        IpAddr::V6(host.parse::<Ipv6Addr>().map_err(|_| UaddrError::BadHost)?)
    } else {
        IpAddr::V4(host.parse::<Ipv4Addr>().map_err(|_| UaddrError::BadHost)?)
    };
    Ok(SocketAddr::new(ip, port))
}

/// One port octet: 1 to 3 decimal digits (no sign), at most 255.
fn port_octet(s: &str) -> Result<u8, UaddrError> {
    if s.is_empty() || s.len() > 3 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(UaddrError::BadPort);
    }
    s.parse().map_err(|_| UaddrError::BadPort)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn ipv4_round_trip() {
        let addr: SocketAddr = "127.0.0.1:2049".parse().unwrap();
        assert_eq!(format_uaddr(addr), "127.0.0.1.8.1");
        assert_eq!(parse_uaddr("127.0.0.1.8.1"), Ok(addr));
        assert_eq!(
            format_uaddr("0.0.0.0:111".parse().unwrap()),
            "0.0.0.0.0.111"
        );
        assert_eq!(
            parse_uaddr("10.1.2.3.255.255"),
            Ok("10.1.2.3:65535".parse().unwrap())
        );
    }

    #[test]
    fn ipv6_round_trip_in_rfc5952_form() {
        let addr: SocketAddr = "[::1]:2049".parse().unwrap();
        assert_eq!(format_uaddr(addr), "::1.8.1");
        assert_eq!(parse_uaddr("::1.8.1"), Ok(addr));
        let full: SocketAddr = "[2001:db8:0:0:1:0:0:1]:20048".parse().unwrap();
        assert_eq!(format_uaddr(full), "2001:db8::1:0:0:1.78.80");
        assert_eq!(parse_uaddr("2001:db8::1:0:0:1.78.80"), Ok(full));
        assert_eq!(format_uaddr("[::]:111".parse().unwrap()), "::.0.111");
        assert_eq!(parse_uaddr("::.0.111"), Ok("[::]:111".parse().unwrap()));
    }

    #[test]
    fn ipv4_mapped_ipv6_keeps_its_dotted_tail() {
        let addr: SocketAddr = "[::ffff:127.0.0.1]:2049".parse().unwrap();
        let uaddr = format_uaddr(addr);
        assert_eq!(uaddr, "::ffff:127.0.0.1.8.1");
        assert_eq!(parse_uaddr(&uaddr), Ok(addr));
    }

    #[test]
    fn scope_id_is_dropped() {
        let addr = SocketAddr::V6(std::net::SocketAddrV6::new(
            "fe80::1".parse().unwrap(),
            2049,
            7,
            3,
        ));
        assert_eq!(format_uaddr(addr), "fe80::1.8.1");
    }

    #[test]
    fn malformed_addresses_are_refused() {
        for bad in [
            "",
            "127.0.0.1",
            "127.0.0.1.8",
            "127.0.0.1.8.256",
            "127.0.0.1.+8.1",
            "127.0.0.1.8.-1",
            "127.0.0.1..1",
            "127.0.0.1.0008.1",
            "127.0.1.8.1",
            "localhost.8.1",
            "fe80::1%eth0.8.1",
            "::1.8.1 ",
            "1:2:3:4:5:6:7:8:9.0.1",
        ] {
            assert!(parse_uaddr(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(
            parse_uaddr(&format!("{}.1.1", "1".repeat(60))),
            Err(UaddrError::TooLong)
        );
    }
}

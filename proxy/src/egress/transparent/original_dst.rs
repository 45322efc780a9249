//! Where a redirected connection was going: `SO_ORIGINAL_DST` (IPv4) or
//! `IP6T_SO_ORIGINAL_DST` (IPv6) on the accepted socket, read from conntrack after the nat
//! table's REDIRECT rewrote the destination to the transparent listener.
//!
//! Only the port of this address is used to dial: the IP was chosen by the agent's own DNS.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use nix::sys::socket::{getsockopt, sockopt};
use tokio::net::TcpStream;

/// Why the original destination could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OriginalDstError {
    /// The connection has no NAT record: it reached the listener without being redirected
    /// (`ENOENT`), or the kernel has no conntrack for this family (`ENOPROTOOPT`).
    #[error("failed to read the original destination: the connection was not redirected ({0})")]
    NotRedirected(nix::Error),
    /// Any other socket error.
    #[error("failed to read the original destination: {0}")]
    Socket(#[from] std::io::Error),
}

/// The original destination of an accepted, redirected connection.
pub(crate) fn original_dst(stream: &TcpStream) -> Result<SocketAddr, OriginalDstError> {
    let local = stream.local_addr()?;
    let answer = match local {
        SocketAddr::V4(_) => getsockopt(stream, sockopt::OriginalDst).map(from_v4),
        SocketAddr::V6(_) => getsockopt(stream, sockopt::Ip6tOriginalDst).map(from_v6),
    };
    answer.map_err(|errno| match errno {
        nix::Error::ENOENT | nix::Error::ENOPROTOOPT => OriginalDstError::NotRedirected(errno),
        other => OriginalDstError::Socket(other.into()),
    })
}

/// `sockaddr_in` (network byte order fields) → `SocketAddr`.
fn from_v4(raw: libc::sockaddr_in) -> SocketAddr {
    let ip = Ipv4Addr::from(u32::from_be(raw.sin_addr.s_addr));
    SocketAddr::new(IpAddr::V4(ip), u16::from_be(raw.sin_port))
}

/// `sockaddr_in6` (network byte order port) → `SocketAddr` (flow info and scope dropped).
fn from_v6(raw: libc::sockaddr_in6) -> SocketAddr {
    let ip = Ipv6Addr::from(raw.sin6_addr.s6_addr);
    SocketAddr::new(IpAddr::V6(ip), u16::from_be(raw.sin6_port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_structs_convert_from_network_byte_order() {
        let v4 = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 443u16.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(Ipv4Addr::new(192, 0, 2, 10)).to_be(),
            },
            sin_zero: [0; 8],
        };
        assert_eq!(
            from_v4(v4),
            "192.0.2.10:443".parse().unwrap(),
            "the IPv4 address and port must be read in network byte order"
        );
        let v6 = libc::sockaddr_in6 {
            sin6_family: libc::AF_INET6 as libc::sa_family_t,
            sin6_port: 8080u16.to_be(),
            sin6_flowinfo: 0,
            sin6_addr: libc::in6_addr {
                s6_addr: "2001:db8::10".parse::<Ipv6Addr>().unwrap().octets(),
            },
            sin6_scope_id: 0,
        };
        assert_eq!(
            from_v6(v6),
            "[2001:db8::10]:8080".parse().unwrap(),
            "the IPv6 address and port must be read in network byte order"
        );
    }

    #[tokio::test]
    async fn a_connection_that_was_not_redirected_has_no_original_destination() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = TcpStream::connect(addr).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        match original_dst(&accepted) {
            // Without conntrack in this namespace the kernel has no NAT record at all.
            Err(OriginalDstError::NotRedirected(_)) => {}
            // With conntrack loaded (but no REDIRECT), the record names the listener itself.
            Ok(dst) => assert_eq!(dst, addr, "an un-NATed connection must name the listener"),
            Err(other) => panic!("unexpected error reading the original destination: {other}"),
        }
    }
}

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::*;

fn sa(s: &str) -> SocketAddr {
    s.parse().expect("test socket address must parse")
}

#[test]
fn targets_reaching_an_own_listener_are_loops() {
    let own = OwnListeners::new([sa("127.0.0.1:15181"), sa("0.0.0.0:15190")]);
    let cases = [
        ("127.0.0.1:15181", true, "the exact listener"),
        (
            "0.0.0.0:15181",
            true,
            "the unspecified address reaches local sockets",
        ),
        (
            "[::ffff:127.0.0.1]:15181",
            true,
            "an IPv4-mapped form of the listener",
        ),
        (
            "127.0.0.2:15181",
            false,
            "another loopback address misses a 127.0.0.1 bind",
        ),
        ("127.0.0.1:15180", false, "another port on the same address"),
        (
            "127.0.0.7:15190",
            true,
            "a wildcard bind matches every loopback address",
        ),
        ("127.0.0.1:15190", true, "a wildcard bind matches 127.0.0.1"),
        (
            "192.0.2.10:15190",
            false,
            "a documentation address is not local",
        ),
        (
            "192.0.2.10:15181",
            false,
            "a foreign address on the listener's port",
        ),
    ];
    for (target, want, why) in cases {
        assert_eq!(
            own.reached_by(sa(target)).is_some(),
            want,
            "{target} must {}be a loop: {why}",
            if want { "" } else { "not " }
        );
    }
}

#[test]
fn first_loop_names_the_offending_address_among_the_checked_ones() {
    let own = OwnListeners::new([sa("127.0.0.1:15181")]);
    let addrs: Vec<IpAddr> = vec![
        "192.0.2.1".parse().expect("ip"),
        "127.0.0.1".parse().expect("ip"),
    ];
    assert_eq!(own.first_loop(&addrs, 15181), Some(sa("127.0.0.1:15181")));
    assert_eq!(own.first_loop(&addrs, 443), None, "port 443 is no listener");
}

#[tokio::test]
async fn the_connector_skips_refusing_addresses_and_dials_the_next_checked_one() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind must work");
    let port = listener.local_addr().expect("local addr").port();
    // Nothing listens on 127.0.0.3 at that port: the kernel refuses at once.
    let addrs: Vec<IpAddr> = vec![
        "127.0.0.3".parse().expect("ip"),
        "127.0.0.1".parse().expect("ip"),
    ];
    let stream = connect_pinned(&addrs, port, Duration::from_secs(2))
        .await
        .expect("the second checked address must be dialled");
    assert_eq!(
        stream.peer_addr().expect("peer").ip(),
        "127.0.0.1".parse::<IpAddr>().expect("ip")
    );
}

#[tokio::test]
async fn the_connector_reports_the_last_failure_and_never_invents_an_address() {
    let refused: Vec<IpAddr> = vec!["127.0.0.3".parse().expect("ip")];
    let err = connect_pinned(&refused, 9, Duration::from_secs(2))
        .await
        .expect_err("a closed port must fail");
    assert_eq!(err.code(), "upstream_connect_failed");
    assert!(
        err.detail().starts_with("127.0.0.3: "),
        "detail must name the dialled address: {}",
        err.detail()
    );
    let none = connect_pinned(&[], 80, Duration::from_secs(2))
        .await
        .expect_err("no address must fail");
    assert_eq!(none, ConnectError::NoAddress);
}

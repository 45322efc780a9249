use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use ipnet::IpNet;
use proptest::prelude::*;

use super::table::{FLOOR_V4, FLOOR_V6, V4_TABLE, V6_TABLE};
use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address must parse")
}

fn net(s: &str) -> IpNet {
    s.parse().expect("test network must parse")
}

// --- a naive reference: ipnet containment over the §3.2 table, written independently ---

/// The floor, spelled as networks: IPv4, IPv6, and the NAT64 forms of the IPv4 floor.
const REF_FLOOR: &[&str] = &[
    "169.254.0.0/16",
    "100.100.100.200/32",
    "168.63.129.16/32",
    "192.0.0.192/32",
    "fd00:ec2::254/128",
    "fd00:ec2::23/128",
    "64:ff9b::a9fe:0/112",
    "64:ff9b::6464:64c8/128",
    "64:ff9b::a83f:8110/128",
    "64:ff9b::c000:c0/128",
    // The same floor in the other embedded-IPv4 forms: IPv4-compatible, IPv4-translated,
    // 6to4 and the Teredo server (the Teredo client is obfuscated; see `reference_class`).
    "::a9fe:0/112",
    "::6464:64c8/128",
    "::a83f:8110/128",
    "::c000:c0/128",
    "::ffff:0:a9fe:0/112",
    "::ffff:0:6464:64c8/128",
    "::ffff:0:a83f:8110/128",
    "::ffff:0:c000:c0/128",
    "2002:a9fe::/32",
    "2002:6464:64c8::/48",
    "2002:a83f:8110::/48",
    "2002:c000:c0::/48",
    "2001:0:a9fe::/48",
    "2001:0:6464:64c8::/64",
    "2001:0:a83f:8110::/64",
    "2001:0:c000:c0::/64",
];

/// §3.2 special blocks, most specific first.
const REF_SPECIALS: &[(&str, &str)] = &[
    ("0.0.0.0/32", "unspecified"),
    ("0.0.0.0/8", "this_network"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "cgnat"),
    ("127.0.0.0/8", "loopback"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "ietf_protocol"),
    ("192.0.2.0/24", "documentation"),
    ("192.31.196.0/24", "as112"),
    ("192.52.193.0/24", "amt"),
    ("192.88.99.0/24", "six_to_four_relay"),
    ("192.168.0.0/16", "private"),
    ("192.175.48.0/24", "as112"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("240.0.0.0/4", "reserved"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::/96", "ipv4_compatible"),
    ("::ffff:0:0:0/96", "ipv4_translated"),
    ("64:ff9b::/96", "nat64"),
    ("64:ff9b:1::/48", "nat64"),
    ("100::/64", "discard"),
    ("fc00::/7", "ipv6_unique_local"),
    ("fe80::/10", "ipv6_link_local"),
    ("fec0::/10", "ipv6_site_local"),
    ("ff00::/8", "multicast"),
    ("2001::/32", "teredo"),
    ("2001:2::/48", "benchmarking"),
    ("2001:3::/32", "amt"),
    ("2001:4:112::/48", "as112"),
    ("2001:10::/28", "orchid"),
    ("2001:20::/28", "orchid"),
    ("2001::/23", "ietf_protocol"),
    ("2001:db8::/32", "documentation"),
    ("2002::/16", "six_to_four"),
    ("2620:4f:8000::/48", "as112"),
    ("3fff::/20", "documentation"),
];

/// The reference table parsed once: (floor networks, special blocks with their codes).
type RefTable = (Vec<IpNet>, Vec<(IpNet, &'static str)>);

static REF_TABLE: LazyLock<RefTable> = LazyLock::new(|| {
    let floor = REF_FLOOR.iter().map(|s| net(s)).collect();
    let specials = REF_SPECIALS.iter().map(|(s, c)| (net(s), *c)).collect();
    (floor, specials)
});

fn reference_class(addr: IpAddr) -> &'static str {
    let addr = addr.to_canonical();
    let (floor, specials) = &*REF_TABLE;
    if floor.iter().any(|n| n.contains(&addr)) {
        return "metadata";
    }
    // Teredo's client address is the bitwise NOT of the last 32 bits.
    if let IpAddr::V6(v6) = addr
        && net("2001::/32").contains(&addr)
    {
        let client = IpAddr::V4(std::net::Ipv4Addr::from(!(u128::from(v6) as u32)));
        if floor.iter().any(|n| n.contains(&client)) {
            return "metadata";
        }
    }
    if let Some((_, code)) = specials.iter().find(|(n, _)| n.contains(&addr)) {
        return code;
    }
    match addr {
        IpAddr::V6(_) if !net("2000::/3").contains(&addr) => "ipv6_non_global",
        _ => "public",
    }
}

// --- codes ---

#[test]
fn class_and_name_codes_are_unique_snake_case() {
    let codes = AddrClass::ALL
        .iter()
        .map(AddrClass::code)
        .chain(BlockedName::ALL.iter().map(BlockedName::code));
    let mut seen = HashSet::new();
    for code in codes {
        assert!(seen.insert(code), "code {code} must be unique");
        assert!(
            !code.is_empty()
                && code
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "code {code} must match ^[a-z0-9_]+$"
        );
    }
    let reference_codes: HashSet<&str> = REF_SPECIALS
        .iter()
        .map(|(_, c)| *c)
        .chain(["metadata", "public", "ipv6_non_global"])
        .collect();
    for class in AddrClass::ALL {
        assert!(
            reference_codes.contains(class.code()),
            "class {} must be reachable from the §3.2 table",
            class.code()
        );
    }
}

// --- the smokescreen-style edge table ---

/// Both edges of every prefix, one address before and one after, plus the named vectors.
const EDGES: &[(&str, &str)] = &[
    // 0.0.0.0/8
    ("0.0.0.0", "unspecified"),
    ("0.0.0.1", "this_network"),
    ("0.255.255.255", "this_network"),
    ("1.0.0.0", "public"),
    // 10/8
    ("9.255.255.255", "public"),
    ("10.0.0.0", "private"),
    ("10.0.0.1", "private"),
    ("10.255.255.255", "private"),
    ("11.0.0.0", "public"),
    // 100.64/10 and the Alibaba floor inside it
    ("100.63.255.255", "public"),
    ("100.63.255.254", "public"),
    ("100.64.0.0", "cgnat"),
    ("100.64.0.1", "cgnat"),
    ("100.64.0.100", "cgnat"),
    ("100.100.100.199", "cgnat"),
    ("100.100.100.200", "metadata"),
    ("100.100.100.201", "cgnat"),
    ("100.127.255.254", "cgnat"),
    ("100.127.255.255", "cgnat"),
    ("100.128.0.0", "public"),
    ("100.128.0.1", "public"),
    // 127/8
    ("126.255.255.255", "public"),
    ("127.0.0.0", "loopback"),
    ("127.0.0.1", "loopback"),
    ("127.0.1.1", "loopback"),
    ("127.255.255.255", "loopback"),
    ("128.0.0.0", "public"),
    // Azure WireServer
    ("168.63.129.15", "public"),
    ("168.63.129.16", "metadata"),
    ("168.63.129.17", "public"),
    // 169.254/16: the whole block is the floor
    ("169.253.255.255", "public"),
    ("169.254.0.0", "metadata"),
    ("169.254.169.254", "metadata"),
    ("169.254.169.253", "metadata"),
    ("169.254.170.2", "metadata"),
    ("169.254.170.23", "metadata"),
    ("169.254.255.255", "metadata"),
    ("169.255.0.0", "public"),
    // 172.16/12
    ("172.15.255.255", "public"),
    ("172.16.0.0", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("172.32.0.0", "public"),
    // 192.0.0/24 and OCI inside it
    ("191.255.255.255", "public"),
    ("192.0.0.0", "ietf_protocol"),
    ("192.0.0.191", "ietf_protocol"),
    ("192.0.0.192", "metadata"),
    ("192.0.0.193", "ietf_protocol"),
    ("192.0.0.255", "ietf_protocol"),
    ("192.0.1.0", "public"),
    ("192.0.1.255", "public"),
    ("192.0.2.0", "documentation"),
    ("192.0.2.255", "documentation"),
    ("192.0.3.0", "public"),
    ("192.31.195.255", "public"),
    ("192.31.196.0", "as112"),
    ("192.31.196.255", "as112"),
    ("192.31.197.0", "public"),
    ("192.52.192.255", "public"),
    ("192.52.193.0", "amt"),
    ("192.52.193.255", "amt"),
    ("192.52.194.0", "public"),
    ("192.88.98.255", "public"),
    ("192.88.99.0", "six_to_four_relay"),
    ("192.88.99.255", "six_to_four_relay"),
    ("192.88.100.0", "public"),
    ("192.167.255.255", "public"),
    ("192.168.0.0", "private"),
    ("192.168.0.1", "private"),
    ("192.168.255.255", "private"),
    ("192.169.0.0", "public"),
    ("192.175.47.255", "public"),
    ("192.175.48.0", "as112"),
    ("192.175.48.255", "as112"),
    ("192.175.49.0", "public"),
    ("198.17.255.255", "public"),
    ("198.18.0.0", "benchmarking"),
    ("198.19.255.255", "benchmarking"),
    ("198.20.0.0", "public"),
    ("198.51.99.255", "public"),
    ("198.51.100.0", "documentation"),
    ("198.51.100.255", "documentation"),
    ("198.51.101.0", "public"),
    ("203.0.112.255", "public"),
    ("203.0.113.0", "documentation"),
    ("203.0.113.255", "documentation"),
    ("203.0.114.0", "public"),
    ("223.255.255.255", "public"),
    ("224.0.0.0", "multicast"),
    ("239.255.255.255", "multicast"),
    ("240.0.0.0", "reserved"),
    ("255.255.255.254", "reserved"),
    ("255.255.255.255", "broadcast"),
    ("8.8.8.8", "public"),
    ("8.8.9.8", "public"),
    ("1.1.1.1", "public"),
    // IPv4-mapped: unwrapped to the IPv4 class
    ("::ffff:0.0.0.0", "unspecified"),
    ("::ffff:10.0.0.1", "private"),
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:169.254.169.254", "metadata"),
    ("::ffff:169.254.170.2", "metadata"),
    ("::ffff:169.254.170.23", "metadata"),
    ("::ffff:100.100.100.200", "metadata"),
    ("::ffff:168.63.129.16", "metadata"),
    ("::ffff:192.0.0.192", "metadata"),
    ("::ffff:100.64.0.1", "cgnat"),
    ("::ffff:8.8.8.8", "public"),
    ("::ffff:255.255.255.255", "broadcast"),
    ("::fffe:ffff:ffff", "ipv6_non_global"),
    ("0:0:0:1::", "ipv6_non_global"),
    // ::/128, ::1, ::/96 (IPv4-compatible)
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("::2", "ipv4_compatible"),
    ("::c000:201", "ipv4_compatible"),
    ("::a00:1", "ipv4_compatible"),
    ("::808:808", "ipv4_compatible"),
    ("::ffff:ffff", "ipv4_compatible"),
    ("::1:0:0", "ipv6_non_global"),
    // ::ffff:0:0:0/96 (IPv4-translated)
    ("::fffe:ffff:ffff:ffff", "ipv6_non_global"),
    ("::ffff:0:0:0", "ipv4_translated"),
    ("::ffff:0:ffff:ffff", "ipv4_translated"),
    ("::ffff:1:0:0", "ipv6_non_global"),
    // NAT64 64:ff9b::/96 and 64:ff9b:1::/48
    ("64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", "ipv6_non_global"),
    ("64:ff9b::", "nat64"),
    ("64:ff9b::ac1c:5", "nat64"),
    ("64:ff9b::808:808", "nat64"),
    ("64:ff9b::a9fe:a9fe", "metadata"),
    ("64:ff9b::6464:64c8", "metadata"),
    ("64:ff9b::a83f:8110", "metadata"),
    ("64:ff9b::ffff:ffff", "nat64"),
    ("64:ff9b::1:0:0", "ipv6_non_global"),
    ("64:ff9b:0:ffff:ffff:ffff:ffff:ffff", "ipv6_non_global"),
    ("64:ff9b:1::", "nat64"),
    ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "nat64"),
    ("64:ff9b:2::", "ipv6_non_global"),
    ("64:ff9c::1", "ipv6_non_global"),
    // 100::/64
    ("ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ipv6_non_global"),
    ("100::", "discard"),
    ("100::ffff:ffff:ffff:ffff", "discard"),
    ("100:0:0:1::", "ipv6_non_global"),
    // fc00::/7 with the AWS floor inside it
    ("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ipv6_non_global"),
    ("fc00::", "ipv6_unique_local"),
    ("fd00:ec2::23", "metadata"),
    ("fd00:ec2::253", "ipv6_unique_local"),
    ("fd00:ec2::254", "metadata"),
    ("fd00:ec2::255", "ipv6_unique_local"),
    (
        "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "ipv6_unique_local",
    ),
    ("fe00::", "ipv6_non_global"),
    // fe80::/10, fec0::/10, ff00::/8
    ("fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ipv6_non_global"),
    ("fe80::", "ipv6_link_local"),
    ("fe80::1", "ipv6_link_local"),
    ("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ipv6_link_local"),
    ("fec0::", "ipv6_site_local"),
    ("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ipv6_site_local"),
    ("ff00::", "multicast"),
    ("ff02::2", "multicast"),
    ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "multicast"),
    // 2000::/3 and its special blocks
    ("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ipv6_non_global"),
    ("2000::", "public"),
    ("2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "public"),
    ("2001::", "teredo"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "teredo"),
    ("2001:0:5ef5:79fb:0:59d:a0e5:ba1", "teredo"),
    ("2001:0:ffff:ffff:ffff:ffff:ffff:ffff", "teredo"),
    ("2001:1::", "ietf_protocol"),
    ("2001:1::1", "ietf_protocol"),
    ("2001:1:ffff:ffff:ffff:ffff:ffff:ffff", "ietf_protocol"),
    ("2001:2::", "benchmarking"),
    ("2001:2:0:ffff:ffff:ffff:ffff:ffff", "benchmarking"),
    ("2001:2:1::", "ietf_protocol"),
    ("2001:3::", "amt"),
    ("2001:3:ffff:ffff:ffff:ffff:ffff:ffff", "amt"),
    ("2001:4::", "ietf_protocol"),
    ("2001:4:111:ffff:ffff:ffff:ffff:ffff", "ietf_protocol"),
    ("2001:4:112::", "as112"),
    ("2001:4:112:ffff:ffff:ffff:ffff:ffff", "as112"),
    ("2001:4:113::", "ietf_protocol"),
    ("2001:f:ffff:ffff:ffff:ffff:ffff:ffff", "ietf_protocol"),
    ("2001:10::", "orchid"),
    ("2001:1f:ffff:ffff:ffff:ffff:ffff:ffff", "orchid"),
    ("2001:20::", "orchid"),
    ("2001:2f:ffff:ffff:ffff:ffff:ffff:ffff", "orchid"),
    ("2001:30::", "ietf_protocol"),
    ("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "ietf_protocol"),
    ("2001:200::", "public"),
    ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", "public"),
    ("2001:db8::", "documentation"),
    ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "documentation"),
    ("2001:db9::", "public"),
    ("2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "public"),
    ("2002::", "six_to_four"),
    ("2002:c000:201::1", "six_to_four"),
    ("2002:a00:1::1", "six_to_four"),
    ("2002:808:808::1", "six_to_four"),
    // The metadata floor is coded the same in every embedded-IPv4 form.
    ("2002:a9fe:a9fe::1", "metadata"),
    ("2002:808:808::1", "six_to_four"),
    ("::169.254.169.254", "metadata"),
    ("::ffff:0:169.254.169.254", "metadata"),
    ("2001:0:a9fe:a9fe::1", "metadata"),
    ("2001:0:4136:e378:8000:63bf:5601:5601", "metadata"),
    ("2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "six_to_four"),
    ("2003::", "public"),
    ("2001:4860:4860::8888", "public"),
    ("2606:4700:4700::1111", "public"),
    ("2620:4f:7fff:ffff:ffff:ffff:ffff:ffff", "public"),
    ("2620:4f:8000::", "as112"),
    ("2620:4f:8000:ffff:ffff:ffff:ffff:ffff", "as112"),
    ("2620:4f:8001::", "public"),
    ("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "public"),
    ("3fff::", "documentation"),
    ("3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "documentation"),
    ("3fff:1000::", "public"),
    ("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "public"),
    ("4000::", "ipv6_non_global"),
];

#[test]
fn every_table_edge_classifies_as_written() {
    for (addr, want) in EDGES {
        let got = classify_addr(ip(addr));
        assert_eq!(got.code(), *want, "{addr} must classify as {want}");
        assert_eq!(
            reference_class(ip(addr)),
            *want,
            "the reference must agree on {addr}"
        );
    }
}

/// The four edges of a prefix: first, last, one before, one after.
fn v4_edges(net: u32, len: u8) -> [u32; 4] {
    let size = if len == 0 {
        u32::MAX
    } else {
        (1u32 << (32 - len)) - 1
    };
    let last = net | size;
    [net, last, net.wrapping_sub(1), last.wrapping_add(1)]
}

fn v6_edges(net: u128, len: u8) -> [u128; 4] {
    let size = if len == 0 {
        u128::MAX
    } else {
        (1u128 << (128 - len)) - 1
    };
    let last = net | size;
    [net, last, net.wrapping_sub(1), last.wrapping_add(1)]
}

#[test]
fn every_row_edge_and_its_mapped_form_agree_with_the_reference() {
    let v4_rows = V4_TABLE.iter().chain(FLOOR_V4);
    for row in v4_rows {
        for addr in v4_edges(row.net, row.len).map(Ipv4Addr::from) {
            let want = reference_class(addr.into());
            assert_eq!(
                classify_addr(addr.into()).code(),
                want,
                "{addr} must be {want}"
            );
            let mapped = IpAddr::V6(addr.to_ipv6_mapped());
            assert_eq!(
                classify_addr(mapped).code(),
                want,
                "{mapped} must be {want}"
            );
        }
    }
    for row in V6_TABLE.iter().chain(FLOOR_V6) {
        for addr in v6_edges(row.net, row.len).map(Ipv6Addr::from) {
            let want = reference_class(addr.into());
            assert_eq!(
                classify_addr(addr.into()).code(),
                want,
                "{addr} must be {want}"
            );
        }
    }
}

#[test]
fn the_floor_is_exactly_the_metadata_class() {
    for (addr, want) in EDGES {
        let floor = is_metadata_floor(ip(addr));
        assert_eq!(
            floor,
            *want == "metadata",
            "{addr}: floor membership must match the metadata class"
        );
    }
}

// --- names ---

#[test]
fn names_are_refused_before_dns_with_their_reason() {
    let cases: &[(&str, Option<&str>)] = &[
        ("localhost", Some("localhost_name")),
        ("LOCALHOST.", Some("localhost_name")),
        ("app.localhost", Some("localhost_name")),
        ("localhost.localdomain", Some("localhost_name")),
        ("ip6-localhost", Some("localhost_name")),
        ("ip6-loopback", Some("localhost_name")),
        ("metadata", Some("metadata_name")),
        ("metadata.google.internal", Some("metadata_name")),
        ("Metadata.Google.Internal.", Some("metadata_name")),
        ("metadata.goog", Some("metadata_name")),
        ("computemetadata.metadata.goog", Some("metadata_name")),
        ("instance-data", Some("metadata_name")),
        ("instance-data.ec2.internal", Some("metadata_name")),
        ("db.internal", Some("cluster_internal_name")),
        ("cache.prod.svc", Some("cluster_internal_name")),
        ("api.ns.svc.cluster.local", Some("cluster_internal_name")),
        ("node.cluster.local", Some("cluster_internal_name")),
        ("cluster.local", Some("cluster_internal_name")),
        ("kubernetes.default", Some("cluster_internal_name")),
        ("kubernetes.default.svc", Some("cluster_internal_name")),
        (
            "Kubernetes.Default.Svc.Cluster.Local.",
            Some("cluster_internal_name"),
        ),
        ("intranet", Some("single_label_name")),
        ("Intranet.", Some("single_label_name")),
        ("", Some("single_label_name")),
        ("example.com", None),
        ("EXAMPLE.COM.", None),
        ("localhost.example.com", None),
        ("internal.example.com", None),
        ("notinternal.com", None),
        ("kubernetes.io", None),
        ("127.0.0.1", None),
        ("::1", None),
        ("[::1]", None),
        ("169.254.169.254", None),
    ];
    for (host, want) in cases {
        assert_eq!(
            is_blocked_hostname(host),
            *want,
            "{host:?} must be refused as {want:?}"
        );
    }
}

// --- policy ---

#[test]
fn allow_entries_that_overlap_the_floor_are_refused_with_the_floor_address() {
    let cases = [
        ("169.254.0.0/16", "169.254.0.0"),
        ("169.254.169.254/32", "169.254.169.254"),
        ("169.0.0.0/8", "169.254.0.0"),
        ("0.0.0.0/0", "169.254.0.0"),
        ("100.64.0.0/10", "100.100.100.200"),
        ("168.63.0.0/16", "168.63.129.16"),
        ("192.0.0.0/24", "192.0.0.192"),
        ("::ffff:169.254.0.0/112", "169.254.0.0"),
        ("::ffff:0:0/96", "169.254.0.0"),
        ("::/0", "::ffff:169.254.0.0"),
        ("fd00::/8", "fd00:ec2::254"),
        ("fd00:ec2::/120", "fd00:ec2::23"),
    ];
    for (entry, floor) in cases {
        let err = AddrPolicy::new(vec![net(entry)], vec![])
            .expect_err("an entry covering the floor must be refused");
        assert_eq!(err.net, net(entry), "the error must name the entry");
        assert_eq!(err.floor, ip(floor), "{entry} must report floor {floor}");
        let text = err.to_string();
        assert!(
            text.contains(&net(entry).to_string())
                && text.contains(&ip(floor).to_string())
                && text.starts_with("failed to"),
            "message {text:?} must name {entry} and {floor}"
        );
    }
}

#[test]
fn allow_entries_clear_of_the_floor_are_accepted() {
    for entry in [
        "10.0.0.0/8",
        "100.64.0.0/11",
        "64:ff9b::/96",
        "fd00:ec2::1:0/112",
        "::1/128",
    ] {
        AddrPolicy::new(vec![net(entry)], vec![]).expect("an entry clear of the floor must load");
    }
}

#[test]
fn check_applies_floor_then_allow_list_then_class() {
    let policy = AddrPolicy::new(
        vec![
            net("10.0.0.0/8"),
            net("64:ff9b::/96"),
            net("::ffff:192.168.1.0/120"),
        ],
        vec![],
    )
    .expect("policy must load");
    let cases: &[(&str, Result<(), &str>)] = &[
        ("169.254.169.254", Err("ip_cloud_metadata")),
        ("::ffff:169.254.169.254", Err("ip_cloud_metadata")),
        ("64:ff9b::a9fe:a9fe", Err("ip_cloud_metadata")),
        ("fd00:ec2::254", Err("ip_cloud_metadata")),
        ("10.1.2.3", Ok(())),
        ("::ffff:10.1.2.3", Ok(())),
        ("192.168.1.7", Ok(())),
        ("::ffff:192.168.1.7", Ok(())),
        ("192.168.2.7", Err("ip_private_range")),
        ("64:ff9b::808:808", Ok(())),
        ("172.16.0.1", Err("ip_private_range")),
        ("2002:a9fe:a9fe::1", Err("ip_cloud_metadata")),
        ("2002:0a01:0203::1", Err("ip_private_range")),
        ("::169.254.169.254", Err("ip_cloud_metadata")),
        ("8.8.8.8", Ok(())),
        ("2606:4700:4700::1111", Ok(())),
    ];
    for (addr, want) in cases {
        let got = policy.check(ip(addr)).map_err(|r| r.code());
        assert_eq!(got, *want, "{addr} must be decided as {want:?}");
    }
    let denied = AddrPolicy::default().check(ip("100.64.0.1"));
    assert_eq!(
        denied,
        Err(AddrRefusal::PrivateAddress {
            addr: ip("100.64.0.1"),
            class: "cgnat"
        }),
        "the deny reason must carry the address and its class code"
    );
}

#[test]
fn allow_hosts_exempt_internal_names_but_never_metadata_names() {
    let policy = AddrPolicy::new(
        vec![],
        [
            "svc.cluster.local",
            "*.corp.internal",
            "Intranet.",
            "internal",
            "metadata.goog",
        ]
        .map(String::from)
        .to_vec(),
    )
    .expect("policy must load");
    let cases: &[(&str, bool)] = &[
        ("db.ns.svc.cluster.local", true),
        ("svc.cluster.local", true),
        ("wiki.corp.internal", true),
        ("corp.internal", true), // exempted by the plain `internal` entry
        ("intranet", true),
        ("INTRANET.", true),
        ("other", false),
        ("x.cluster.local", false),
        ("metadata.google.internal", false),
        ("metadata.goog", false),
        ("localhost", false),
    ];
    for (host, allowed) in cases {
        let got = policy.check_hostname(host);
        assert_eq!(got.is_ok(), *allowed, "{host} must be allowed={allowed}");
    }
    let glob_only = AddrPolicy::new(vec![], vec!["*.corp.internal".into()]).expect("must load");
    assert_eq!(
        glob_only.check_hostname("Corp.Internal."),
        Err(AddrRefusal::BlockedHostname {
            host: "corp.internal".into()
        }),
        "`*.x` must not exempt x itself, and the reason must carry the canonical host"
    );
}

// --- properties ---

/// Addresses biased towards the table: uniform, near a row's edges, mapped forms.
fn any_addr() -> impl Strategy<Value = IpAddr> {
    let v4_rows: Vec<(u32, u8)> = V4_TABLE
        .iter()
        .chain(FLOOR_V4)
        .map(|r| (r.net, r.len))
        .collect();
    let v6_rows: Vec<(u128, u8)> = V6_TABLE
        .iter()
        .chain(FLOOR_V6)
        .map(|r| (r.net, r.len))
        .collect();
    prop_oneof![
        any::<u32>().prop_map(|a| IpAddr::V4(a.into())),
        any::<u128>().prop_map(|a| IpAddr::V6(a.into())),
        any::<u32>().prop_map(|a| IpAddr::V6(Ipv4Addr::from(a).to_ipv6_mapped())),
        (proptest::sample::select(v4_rows), any::<u32>(), -2i64..2).prop_map(|((n, l), r, d)| {
            let host = if l == 32 { 0 } else { r >> l };
            // Wrapping at the ends of the space is fine: any address is a valid input.
            IpAddr::V4(Ipv4Addr::from(
                ((n | host) as i64 + d).rem_euclid(1 << 32) as u32
            ))
        }),
        (
            proptest::sample::select(v6_rows),
            any::<u128>(),
            any::<bool>()
        )
            .prop_map(|((n, l), r, up)| {
                let host = if l == 128 { 0 } else { r >> l };
                let a = if up {
                    (n | host).wrapping_add(1)
                } else {
                    (n | host).wrapping_sub(1)
                };
                IpAddr::V6(a.into())
            }),
    ]
}

fn any_net() -> impl Strategy<Value = IpNet> {
    prop_oneof![
        (any::<u32>(), 0u8..=32).prop_map(|(a, l)| net(&format!("{}/{l}", Ipv4Addr::from(a)))),
        (any::<u128>(), 0u8..=128).prop_map(|(a, l)| net(&format!("{}/{l}", Ipv6Addr::from(a)))),
        (any::<u32>(), 8u8..=32).prop_map(|(a, l)| net(&format!("{}/{l}", Ipv4Addr::from(a)))),
    ]
}

fn floor_addr() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<u16>().prop_map(|h| IpAddr::V4(Ipv4Addr::new(169, 254, (h >> 8) as u8, h as u8))),
        proptest::sample::select(REF_FLOOR.to_vec()).prop_map(|s| net(s).network()),
        any::<u16>().prop_map(|h| {
            IpAddr::V6(Ipv4Addr::new(169, 254, (h >> 8) as u8, h as u8).to_ipv6_mapped())
        }),
    ]
}

proptest! {
    #[test]
    fn mapped_v4_classifies_as_its_v4(a in any::<u32>()) {
        let v4 = Ipv4Addr::from(a);
        prop_assert_eq!(classify_addr(IpAddr::V6(v4.to_ipv6_mapped())), classify_addr(v4.into()));
    }

    #[test]
    fn the_classifier_agrees_with_the_naive_reference(addr in any_addr()) {
        prop_assert_eq!(classify_addr(addr).code(), reference_class(addr));
        prop_assert_eq!(is_metadata_floor(addr), reference_class(addr) == "metadata");
    }

    #[test]
    fn the_floor_is_denied_whatever_the_allow_list(
        nets in proptest::collection::vec(any_net(), 0..6),
        addr in floor_addr(),
    ) {
        let kept: Vec<IpNet> = nets
            .into_iter()
            .filter(|n| AddrPolicy::new(vec![*n], vec![]).is_ok())
            .collect();
        let policy = AddrPolicy::new(kept, vec![]).expect("entries that load alone must load together");
        prop_assert_eq!(policy.check(addr), Err(AddrRefusal::CloudMetadata { addr }));
    }

    #[test]
    fn an_address_inside_an_allow_entry_and_off_the_floor_is_allowed(
        n in any_net(),
        offset in any::<u128>(),
    ) {
        let addr = match n {
            IpNet::V4(v4) => {
                let host = u32::from(v4.hostmask()) & offset as u32;
                IpAddr::V4((u32::from(v4.network()) | host).into())
            }
            IpNet::V6(v6) => IpAddr::V6((u128::from(v6.network()) | (u128::from(v6.hostmask()) & offset)).into()),
        };
        prop_assume!(!is_metadata_floor(addr));
        if let Ok(policy) = AddrPolicy::new(vec![n], vec![]) {
            prop_assert_eq!(policy.check(addr), Ok(()));
            if let IpAddr::V4(v4) = addr {
                prop_assert_eq!(policy.check(IpAddr::V6(v4.to_ipv6_mapped())), Ok(()));
            }
        }
    }

    #[test]
    fn random_addresses_and_names_never_panic(addr in any_addr(), host in "\\PC{0,40}") {
        let policy = AddrPolicy::default();
        let _ = classify_addr(addr);
        let _ = is_metadata_floor(addr);
        let _ = policy.check(addr);
        let _ = policy.check_hostname(&host);
        let _ = is_blocked_hostname(&host);
    }
}

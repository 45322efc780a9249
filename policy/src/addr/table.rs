//! The address table itself: explicit prefixes, first match wins, no allocation.
//!
//! Stable Rust has no `is_global`, so every special-purpose block of `egress-anchors` §3.2 is
//! spelled out here as a prefix. The rows are ordered most specific first where blocks nest
//! (`0.0.0.0/32` before `0.0.0.0/8`, Teredo before `2001::/23`, ...).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The class of an address, with a stable code for logs and metric labels.
///
/// Only [`AddrClass::Public`] may be dialled without an explicit `egress.allowCIDRs` entry, and
/// [`AddrClass::Metadata`] may never be dialled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddrClass {
    /// Public unicast: may be dialled.
    Public,
    /// `0.0.0.0` and `::`.
    Unspecified,
    /// `0.0.0.0/8` other than `0.0.0.0` ("this network", RFC 791).
    ThisNetwork,
    /// `127.0.0.0/8` and `::1`.
    Loopback,
    /// RFC 1918: `10/8`, `172.16/12`, `192.168/16`.
    Private,
    /// Shared address space `100.64.0.0/10` (RFC 6598), used by carrier NAT and overlay VPNs.
    Cgnat,
    /// The cloud-metadata floor ([`super::is_metadata_floor`]), including all of `169.254/16`.
    Metadata,
    /// IETF protocol assignments: `192.0.0.0/24`, `2001::/23` (rest of it).
    IetfProtocol,
    /// Documentation: TEST-NET-1/2/3, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// AS112 DNS sinks: `192.31.196/24`, `192.175.48/24`, `2001:4:112::/48`, `2620:4f:8000::/48`.
    As112,
    /// AMT relays: `192.52.193/24`, `2001:3::/32`.
    Amt,
    /// The deprecated 6to4 relay anycast `192.88.99.0/24`.
    SixToFourRelay,
    /// Benchmarking: `198.18.0.0/15`, `2001:2::/48` (also the TUN fake-IP pool).
    Benchmarking,
    /// Multicast: `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// Limited broadcast `255.255.255.255`.
    Broadcast,
    /// Reserved for future use: `240.0.0.0/4` other than the broadcast address.
    Reserved,
    /// IPv4-compatible IPv6 `::a.b.c.d` (`::/96`, deprecated).
    Ipv4Compatible,
    /// IPv4-translated IPv6 `::ffff:0:a.b.c.d` (`::ffff:0:0:0/96`, SIIT).
    Ipv4Translated,
    /// NAT64: `64:ff9b::/96` and the local-use `64:ff9b:1::/48`.
    Nat64,
    /// The discard-only prefix `100::/64`.
    Discard,
    /// Unique local `fc00::/7`.
    Ipv6UniqueLocal,
    /// Link-local `fe80::/10`.
    Ipv6LinkLocal,
    /// Site-local `fec0::/10` (deprecated, still routed inside some networks).
    Ipv6SiteLocal,
    /// Any other IPv6 address outside global unicast `2000::/3`.
    Ipv6NonGlobal,
    /// Teredo `2001::/32`: embeds an IPv4 server and client address.
    Teredo,
    /// ORCHID `2001:10::/28` and ORCHIDv2 `2001:20::/28`.
    Orchid,
    /// 6to4 `2002::/16`: embeds an IPv4 address.
    SixToFour,
}

// === impl AddrClass ===

impl AddrClass {
    /// Every class, for documentation tables and the code uniqueness test.
    pub const ALL: &'static [AddrClass] = &[
        Self::Public,
        Self::Unspecified,
        Self::ThisNetwork,
        Self::Loopback,
        Self::Private,
        Self::Cgnat,
        Self::Metadata,
        Self::IetfProtocol,
        Self::Documentation,
        Self::As112,
        Self::Amt,
        Self::SixToFourRelay,
        Self::Benchmarking,
        Self::Multicast,
        Self::Broadcast,
        Self::Reserved,
        Self::Ipv4Compatible,
        Self::Ipv4Translated,
        Self::Nat64,
        Self::Discard,
        Self::Ipv6UniqueLocal,
        Self::Ipv6LinkLocal,
        Self::Ipv6SiteLocal,
        Self::Ipv6NonGlobal,
        Self::Teredo,
        Self::Orchid,
        Self::SixToFour,
    ];

    /// Stable snake_case code, used as the `class` of [`super::AddrRefusal::PrivateAddress`].
    pub fn code(&self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Unspecified => "unspecified",
            Self::ThisNetwork => "this_network",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::Cgnat => "cgnat",
            Self::Metadata => "metadata",
            Self::IetfProtocol => "ietf_protocol",
            Self::Documentation => "documentation",
            Self::As112 => "as112",
            Self::Amt => "amt",
            Self::SixToFourRelay => "six_to_four_relay",
            Self::Benchmarking => "benchmarking",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Reserved => "reserved",
            Self::Ipv4Compatible => "ipv4_compatible",
            Self::Ipv4Translated => "ipv4_translated",
            Self::Nat64 => "nat64",
            Self::Discard => "discard",
            Self::Ipv6UniqueLocal => "ipv6_unique_local",
            Self::Ipv6LinkLocal => "ipv6_link_local",
            Self::Ipv6SiteLocal => "ipv6_site_local",
            Self::Ipv6NonGlobal => "ipv6_non_global",
            Self::Teredo => "teredo",
            Self::Orchid => "orchid",
            Self::SixToFour => "six_to_four",
        }
    }
}

/// One IPv4 row: every address under `net/len` has `class`.
#[derive(Clone, Copy, Debug)]
pub(super) struct V4Row {
    pub(super) net: u32,
    pub(super) len: u8,
    pub(super) class: AddrClass,
}

/// One IPv6 row: every address under `net/len` has `class`.
#[derive(Clone, Copy, Debug)]
pub(super) struct V6Row {
    pub(super) net: u128,
    pub(super) len: u8,
    pub(super) class: AddrClass,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8, class: AddrClass) -> V4Row {
    V4Row {
        net: u32::from_be_bytes([a, b, c, d]),
        len,
        class,
    }
}

const fn v6(segments: [u16; 8], len: u8, class: AddrClass) -> V6Row {
    let mut net = 0u128;
    let mut i = 0;
    while i < 8 {
        net = (net << 16) | segments[i] as u128;
        i += 1;
    }
    V6Row { net, len, class }
}

use AddrClass as C;

/// The cloud-metadata floor, IPv4 part. No `allowCIDRs` entry may cover any of it.
pub(super) const FLOOR_V4: &[V4Row] = &[
    // Link-local: AWS/GCP/Azure/OCI/DigitalOcean IMDS 169.254.169.254, Azure DNS
    // 169.254.169.253, ECS task credentials 169.254.170.2, EKS Pod Identity 169.254.170.23.
    v4(169, 254, 0, 0, 16, C::Metadata),
    // Alibaba Cloud ECS metadata.
    v4(100, 100, 100, 200, 32, C::Metadata),
    // Azure WireServer (host agent channel): public-looking, reachable from every VM.
    v4(168, 63, 129, 16, 32, C::Metadata),
    // Oracle Cloud legacy metadata endpoint.
    v4(192, 0, 0, 192, 32, C::Metadata),
];

/// The cloud-metadata floor, IPv6 part.
pub(super) const FLOOR_V6: &[V6Row] = &[
    // AWS IMDS over IPv6 (Nitro).
    v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254], 128, C::Metadata),
    // EKS Pod Identity agent over IPv6.
    v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23], 128, C::Metadata),
];

/// The IPv4 special-purpose blocks (§3.2), most specific first.
pub(super) const V4_TABLE: &[V4Row] = &[
    v4(0, 0, 0, 0, 32, C::Unspecified),
    v4(0, 0, 0, 0, 8, C::ThisNetwork),
    v4(10, 0, 0, 0, 8, C::Private),
    v4(100, 64, 0, 0, 10, C::Cgnat),
    v4(127, 0, 0, 0, 8, C::Loopback),
    v4(172, 16, 0, 0, 12, C::Private),
    v4(192, 0, 0, 0, 24, C::IetfProtocol),
    v4(192, 0, 2, 0, 24, C::Documentation),
    v4(192, 31, 196, 0, 24, C::As112),
    v4(192, 52, 193, 0, 24, C::Amt),
    v4(192, 88, 99, 0, 24, C::SixToFourRelay),
    v4(192, 168, 0, 0, 16, C::Private),
    v4(192, 175, 48, 0, 24, C::As112),
    v4(198, 18, 0, 0, 15, C::Benchmarking),
    v4(198, 51, 100, 0, 24, C::Documentation),
    v4(203, 0, 113, 0, 24, C::Documentation),
    v4(224, 0, 0, 0, 4, C::Multicast),
    v4(255, 255, 255, 255, 32, C::Broadcast),
    v4(240, 0, 0, 0, 4, C::Reserved),
];

/// The IPv6 special-purpose blocks (§3.2), most specific first. `::ffff:0:0/96` is not a
/// row: mapped addresses are unwrapped to IPv4 before this table is consulted.
pub(super) const V6_TABLE: &[V6Row] = &[
    v6([0; 8], 128, C::Unspecified),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, C::Loopback),
    v6([0; 8], 96, C::Ipv4Compatible),
    v6([0, 0, 0, 0, 0xffff, 0, 0, 0], 96, C::Ipv4Translated),
    v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96, C::Nat64),
    v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, C::Nat64),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, C::Discard),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, C::Ipv6UniqueLocal),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, C::Ipv6LinkLocal),
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, C::Ipv6SiteLocal),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, C::Multicast),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, C::Teredo),
    v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, C::Benchmarking),
    v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32, C::Amt),
    v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0], 48, C::As112),
    v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28, C::Orchid),
    v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, C::Orchid),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, C::IetfProtocol),
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, C::Documentation),
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, C::SixToFour),
    v6([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0], 48, C::As112),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, C::Documentation),
];

/// Global unicast `2000::/3`: the only IPv6 space that may be public.
const GLOBAL_UNICAST: V6Row = v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3, C::Public);

/// The NAT64 well-known prefix, whose low 32 bits are the translated IPv4 address.
const NAT64_WKP: V6Row = v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96, C::Nat64);

// === impl V4Row / V6Row ===

impl V4Row {
    /// Whether `addr` is inside this row's prefix.
    pub(super) const fn contains(&self, addr: u32) -> bool {
        let mask = if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - self.len)
        };
        addr & mask == self.net
    }
}

impl V6Row {
    /// Whether `addr` is inside this row's prefix.
    pub(super) const fn contains(&self, addr: u128) -> bool {
        let mask = if self.len == 0 {
            0
        } else {
            u128::MAX << (128 - self.len)
        };
        addr & mask == self.net
    }
}

/// Classify one address against the table: metadata floor first, then the special blocks,
/// IPv6 outside `2000::/3` last. IPv4-mapped IPv6 is classified as its IPv4 address.
pub fn classify_addr(ip: IpAddr) -> AddrClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddrClass {
    let addr = u32::from(ip);
    if FLOOR_V4.iter().any(|row| row.contains(addr)) {
        return AddrClass::Metadata;
    }
    V4_TABLE
        .iter()
        .find(|row| row.contains(addr))
        .map_or(AddrClass::Public, |row| row.class)
}

fn classify_v6(ip: Ipv6Addr) -> AddrClass {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let addr = u128::from(ip);
    if is_floor_v6(addr) {
        return AddrClass::Metadata;
    }
    if let Some(row) = V6_TABLE.iter().find(|row| row.contains(addr)) {
        return row.class;
    }
    if GLOBAL_UNICAST.contains(addr) {
        AddrClass::Public
    } else {
        AddrClass::Ipv6NonGlobal
    }
}

/// Whether `ip` is on the cloud-metadata floor, which no policy can open.
///
/// The floor is `169.254.0.0/16` (every link-local IPv4 address: AWS/GCP/Azure/OCI/DO IMDS
/// `169.254.169.254`, ECS `169.254.170.2`, EKS Pod Identity `169.254.170.23`), Alibaba
/// `100.100.100.200`, Azure WireServer `168.63.129.16`, OCI legacy `192.0.0.192`, AWS IPv6
/// IMDS `fd00:ec2::254`, EKS Pod Identity IPv6 `fd00:ec2::23`; also each IPv4 floor address in
/// its IPv4-mapped form (`::ffff:a.b.c.d`) and in its NAT64 form (`64:ff9b::a.b.c.d`), because a
/// DNS64/NAT64 gateway translates the latter straight back to the IPv4 endpoint.
pub fn is_metadata_floor(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_floor_v4(u32::from(v4)),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_floor_v4(u32::from(v4)),
            None => is_floor_v6(u128::from(v6)),
        },
    }
}

fn is_floor_v4(addr: u32) -> bool {
    FLOOR_V4.iter().any(|row| row.contains(addr))
}

fn is_floor_v6(addr: u128) -> bool {
    if NAT64_WKP.contains(addr) {
        // The low 32 bits are the embedded IPv4 address; truncation is the point.
        return is_floor_v4(addr as u32);
    }
    // The metadata floor is the same in every embedded-IPv4 form: IPv4-compatible
    // (`::169.254.169.254`), IPv4-translated (`::ffff:0:a.b.c.d`), 6to4 and Teredo.
    if embedded_v4(addr).into_iter().flatten().any(is_floor_v4) {
        return true;
    }
    FLOOR_V6.iter().any(|row| row.contains(addr))
}

/// The IPv4 addresses an IPv6 transition form embeds (truncations are the point).
fn embedded_v4(addr: u128) -> [Option<u32>; 2] {
    let high96 = addr >> 32;
    let low = addr as u32;
    if high96 == 0 && low > 1 {
        // IPv4-compatible `::a.b.c.d` (deprecated, still parsed by every stack).
        return [Some(low), None];
    }
    if high96 == 0xffff_0000 {
        // IPv4-translated `::ffff:0:a.b.c.d`.
        return [Some(low), None];
    }
    if addr >> 112 == 0x2002 {
        // 6to4 `2002:AABB:CCDD::/48`.
        return [Some((addr >> 80) as u32), None];
    }
    if addr >> 96 == 0x2001_0000 {
        // Teredo `2001:0:SSSS:SSSS:flags:port:CCCC:CCCC`: server, and the client obfuscated.
        return [Some((addr >> 64) as u32), Some(!low)];
    }
    [None, None]
}

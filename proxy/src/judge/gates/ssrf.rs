//! Gate E2: the SSRF filter. The gate resolves the name itself, checks every answer against
//! the address table (`ip_guard`), fails closed, and returns the checked addresses: the
//! connector dials only those, so there is no rebinding window between check and connect.

use std::net::IpAddr;

use super::DenyReason;
use crate::base::resolve::{GateResolver, LookupError};
use crate::base::target_url::{HostKind, TargetUrl};
use crate::policy::EgressPolicy;

/// The outcome of E2 for one target: the addresses that passed, in resolver order.
pub(crate) type Checked = Result<Vec<IpAddr>, DenyReason>;

/// What is left to do after the checks that need no DNS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Precheck {
    /// An IP literal that passed: nothing to resolve.
    Literal(Vec<IpAddr>),
    /// A name that passed the pre-DNS name rules and must be resolved.
    Name(String),
}

/// Check a URL target: scheme, host, pre-DNS name rules, resolution, every answer.
pub(crate) async fn check_url(
    target: &TargetUrl,
    egress: &EgressPolicy,
    resolver: &GateResolver,
) -> Checked {
    match precheck_url(target, egress)? {
        Precheck::Literal(addrs) => Ok(addrs),
        Precheck::Name(host) => resolve_and_check(&host, egress, resolver).await,
    }
}

/// The synchronous part of E2: scheme, host presence, IP literals, the pre-DNS name rules.
pub fn precheck_url(target: &TargetUrl, egress: &EgressPolicy) -> Result<Precheck, DenyReason> {
    let Some(scheme) = target.scheme() else {
        return Err(DenyReason::InvalidUrl {
            detail: "the URL does not parse".into(),
        });
    };
    match scheme {
        "http" | "https" => {}
        other => {
            return Err(DenyReason::UnsupportedScheme {
                scheme: other.to_string(),
            });
        }
    }
    match (target.host_kind(), &target.host) {
        (Some(HostKind::Ip(ip)), _) => check_addrs(vec![ip], egress).map(Precheck::Literal),
        (Some(HostKind::Domain), Some(host)) => precheck_host(host, egress),
        _ => Err(DenyReason::InvalidUrl {
            detail: "the URL has no host".into(),
        }),
    }
}

/// Check a canonical host name (or IP literal): name rules, resolution, every answer.
pub(crate) async fn check_host(
    host: &str,
    egress: &EgressPolicy,
    resolver: &GateResolver,
) -> Checked {
    match precheck_host(host, egress)? {
        Precheck::Literal(addrs) => Ok(addrs),
        Precheck::Name(host) => resolve_and_check(&host, egress, resolver).await,
    }
}

fn precheck_host(host: &str, egress: &EgressPolicy) -> Result<Precheck, DenyReason> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return check_addrs(vec![ip], egress).map(Precheck::Literal);
    }
    // No web host name has `_` (RFC 952/1123 host names); DNS would still be asked, and the
    // name sent to it. Refused before any query, with a code of its own.
    if host.contains('_') {
        return Err(DenyReason::UnderscoreInHostname);
    }
    egress.addrs.check_hostname(host)?;
    Ok(Precheck::Name(host.to_string()))
}

async fn resolve_and_check(host: &str, egress: &EgressPolicy, resolver: &GateResolver) -> Checked {
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
    for ip in &addrs {
        egress.addrs.check(*ip)?;
    }
    Ok(addrs)
}

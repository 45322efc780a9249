//! The transparent listener's gate order for one sniffed name, and the addresses it may dial.
//!
//! ```text
//!  name? ─► (HTTP: E1 on the first request's URL) ─► secret in host ─► egress.ports (original port) ─► SSRF: own resolver, every answer
//!        ─► website blocklist ─► dial targets = checked answers × original port
//!  no name / IP literal ─► refused, unless raw-IP egress is allowed (then the original
//!                          address itself goes through the address table and the port list)
//! ```
//!
//! Same order as the extract pipeline (E1, E2, E4), with the port check first because the port
//! belongs to the connection, not to the name.

use std::net::{IpAddr, SocketAddr};

use super::refusal::Refusal;
use super::sniff::{Sniffed, TargetName};
use crate::gates::{DenyReason, Verdict, secret_url, ssrf};
use crate::metrics::ProxyMetrics;
use crate::policy::{EnforcementMode, Policy};
use crate::runtime::Runtime;

/// Whether a connection without a name may go to the address the agent chose (still
/// checked): the policy's `egress.allowRawIP`, off by default, read per connection.
pub fn raw_ip_allowed(policy: &Policy) -> bool {
    policy.egress.limits.allow_raw_ip
}

/// A connection the gates let through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    /// The canonical name (or the IP, for raw-IP egress), for logs.
    pub host: String,
    /// The checked answers, in resolver order: the only addresses the gate may dial.
    pub addrs: Vec<IpAddr>,
    /// The original destination's port.
    pub port: u16,
}

/// Run the gates for one sniffed connection whose original destination is `original`.
pub async fn admit(
    rt: &Runtime,
    metrics: &ProxyMetrics,
    sniffed: &Sniffed,
    original: SocketAddr,
    allow_raw_ip: bool,
) -> Result<Admission, Refusal> {
    match &sniffed.name {
        Some(TargetName::Domain(host)) => {
            let raw = sniffed.raw_name.as_deref().unwrap_or(host);
            check_first_request(rt, metrics, host, sniffed.path.as_deref())?;
            admit_name(rt, metrics, raw, host, original).await
        }
        None | Some(TargetName::Ip(_)) if allow_raw_ip => admit_raw_ip(rt, metrics, original).await,
        None | Some(TargetName::Ip(_)) => Err(Refusal::NoTargetName),
    }
}

async fn admit_name(
    rt: &Runtime,
    metrics: &ProxyMetrics,
    raw: &str,
    host: &str,
    original: SocketAddr,
) -> Result<Admission, Refusal> {
    // The raw form keeps its case: DNS is case-insensitive, a secret's prefix is not.
    let secrets = Some(&rt.policy.secrets);
    let secret = match secret_url::check_host_secret_with(raw, secrets) {
        Verdict::Deny(reason) => Verdict::Deny(reason),
        first => match secret_url::check_host_secret_with(host, secrets) {
            Verdict::Allow => first,
            second => second,
        },
    };
    metrics.count_verdict("secret_url", &secret);
    if let Verdict::Deny(reason) = secret {
        return Err(Refusal::Gate(reason));
    }
    check_port(rt, metrics, original.port())?;
    let checked = ssrf::check_host(host, &rt.policy.egress, &rt.resolver).await;
    metrics.count_verdict("ssrf", &verdict_of(&checked));
    let addrs = checked.map_err(Refusal::Gate)?;
    let blocked = rt
        .blocklist
        .check_host(host)
        .map(|m| DenyReason::BlockedByPolicy {
            host: m.host,
            rule: m.rule,
            source: m.source,
        });
    let verdict = match (blocked, rt.policy.blocklist.mode) {
        (None, _) => Verdict::Allow,
        (Some(reason), EnforcementMode::Report) => Verdict::Report(reason),
        (Some(reason), _) => Verdict::Deny(reason),
    };
    metrics.count_verdict("website_blocklist", &verdict);
    if let Verdict::Deny(reason) = verdict {
        return Err(Refusal::Gate(reason));
    }
    Ok(Admission {
        host: host.to_string(),
        addrs,
        port: original.port(),
    })
}

async fn admit_raw_ip(
    rt: &Runtime,
    metrics: &ProxyMetrics,
    original: SocketAddr,
) -> Result<Admission, Refusal> {
    check_port(rt, metrics, original.port())?;
    let ip = original.ip().to_canonical().to_string();
    let checked = ssrf::check_host(&ip, &rt.policy.egress, &rt.resolver).await;
    metrics.count_verdict("ssrf", &verdict_of(&checked));
    let addrs = checked.map_err(Refusal::Gate)?;
    Ok(Admission {
        host: ip,
        addrs,
        port: original.port(),
    })
}

/// Plain HTTP: the sniffed request's URL also goes through E1 (secret-shaped tokens, sensitive
/// query names), as on the forward proxy. The listener itself sends plain HTTP through the
/// forward proxy's relay, which gates every request of the connection; this covers a caller
/// that decides one sniffed head.
fn check_first_request(
    rt: &Runtime,
    metrics: &ProxyMetrics,
    host: &str,
    path: Option<&str>,
) -> Result<(), Refusal> {
    let Some(path) = path else {
        return Ok(());
    };
    let target = crate::context::TargetUrl::new(&format!("http://{host}{path}"));
    let gate = secret_url::SecretUrlGate {
        secrets: Some(&rt.policy.secrets),
    };
    let verdict = crate::gates::Gate::check(&gate, &target);
    metrics.count_verdict("secret_url", &verdict);
    match verdict {
        Verdict::Deny(reason) => Err(Refusal::Gate(reason)),
        _ => Ok(()),
    }
}

fn check_port(rt: &Runtime, metrics: &ProxyMetrics, port: u16) -> Result<(), Refusal> {
    let verdict = if rt.policy.egress.ports.contains(&port) {
        Verdict::Allow
    } else {
        Verdict::Deny(DenyReason::PortNotAllowed { port })
    };
    metrics.count_verdict("port", &verdict);
    match verdict {
        Verdict::Deny(reason) => Err(Refusal::Gate(reason)),
        _ => Ok(()),
    }
}

fn verdict_of<T>(checked: &Result<T, DenyReason>) -> Verdict {
    match checked {
        Ok(_) => Verdict::Allow,
        Err(r) => Verdict::Deny(r.clone()),
    }
}

#[cfg(test)]
mod tests;

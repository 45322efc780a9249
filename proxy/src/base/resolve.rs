//! The gate's own resolver (E2): one lookup per target, every answer checked by the caller,
//! the checked addresses handed to the connector. There is no second lookup to race.
//!
//! Names are always queried as absolute (`name.`): in a pod, resolv.conf search lists with
//! `ndots:5` would otherwise turn `example.com` into `example.com.<ns>.svc.cluster.local`
//! first, an internal name the agent never asked for.

use std::net::IpAddr;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;

use crate::policy::ResolverPolicy;

/// Why a lookup failed. Reported to the agent as a DNS failure, never as a private address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LookupError {
    /// The name does not exist.
    #[error("NXDOMAIN (name does not exist)")]
    NxDomain,
    /// The name exists but has no A/AAAA records.
    #[error("no A or AAAA records")]
    NoRecords,
    /// The resolver gave up waiting.
    #[error("timed out")]
    Timeout,
    /// Anything else the resolver reported (SERVFAIL, refused, I/O).
    #[error("{0}")]
    Other(String),
}

/// Failure to build the resolver from the policy or the system configuration.
#[derive(Debug, thiserror::Error)]
#[error("failed to build the resolver: {0}")]
pub struct BuildError(String);

/// The gate's resolver.
#[derive(Clone)]
pub(crate) struct GateResolver {
    inner: TokioResolver,
    /// The most one lookup may take: `timeout × attempts`, whatever the resolver does inside.
    deadline: std::time::Duration,
}

impl std::fmt::Debug for GateResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateResolver").finish_non_exhaustive()
    }
}

// === impl GateResolver ===

impl GateResolver {
    /// Build from `egress.resolver`; no name servers means the system configuration.
    pub(crate) fn new(policy: &ResolverPolicy) -> Result<Self, BuildError> {
        let mut builder = if policy.nameservers.is_empty() {
            TokioResolver::builder_tokio().map_err(|e| BuildError(e.to_string()))?
        } else {
            let servers = policy
                .nameservers
                .iter()
                .map(|addr| {
                    let mut ns = NameServerConfig::udp_and_tcp(addr.ip());
                    for conn in &mut ns.connections {
                        conn.port = addr.port();
                    }
                    ns
                })
                .collect();
            TokioResolver::builder_with_config(
                ResolverConfig::from_name_servers(servers),
                TokioRuntimeProvider::default(),
            )
        };
        let opts: &mut ResolverOpts = builder.options_mut();
        opts.timeout = policy.timeout;
        // `attempts` in the policy counts every try, the first included; the resolver's
        // option counts the retries after the first.
        opts.attempts = policy.attempts.saturating_sub(1);
        // Names come from agents; /etc/hosts of the gate container is not a policy input.
        opts.use_hosts_file = ResolveHosts::Never;
        opts.ndots = 0;
        let tries = u32::try_from(policy.attempts.max(1)).unwrap_or(u32::MAX);
        let deadline = policy.timeout.saturating_mul(tries);
        builder
            .build()
            .map(|inner| Self { inner, deadline })
            .map_err(|e| BuildError(e.to_string()))
    }

    /// Resolve `host` (a canonical name, not an IP literal) to every A and AAAA answer.
    pub(crate) async fn lookup(&self, host: &str) -> Result<Vec<IpAddr>, LookupError> {
        let absolute = format!("{}.", host.trim_end_matches('.'));
        let answered = tokio::time::timeout(self.deadline, self.inner.lookup_ip(absolute.as_str()))
            .await
            .map_err(|_| LookupError::Timeout)?;
        match answered {
            Ok(answers) => {
                let addrs: Vec<IpAddr> = answers.iter().collect();
                if addrs.is_empty() {
                    Err(LookupError::NoRecords)
                } else {
                    Ok(addrs)
                }
            }
            Err(e) if e.is_nx_domain() => Err(LookupError::NxDomain),
            Err(e) if e.is_no_records_found() => Err(LookupError::NoRecords),
            Err(hickory_resolver::net::NetError::Timeout) => Err(LookupError::Timeout),
            Err(e) => Err(LookupError::Other(e.to_string())),
        }
    }
}

//! Which URLs may enter the shared cache: hostname heuristics only, no DNS.
//!
//! Pages of local and internal hosts never land on a volume other pods read: `localhost`,
//! `*.localhost`, `*.local`, single-label names, non-public IP literals, and the operator's
//! `web.cache.exemptHosts`. The address rule is its own small table rather than E2's: the cache
//! rule must hold even where `egress.allowCIDRs` opened a private range for fetching, and it is
//! stricter than Hermes' (CGNAT, multicast and 6to4 literals are never cached either).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::Url;

use super::NoCacheReason;
use crate::base::target_url::canonical_host;

/// The compiled `web.cache.exemptHosts`: a pattern matches its host exactly or any subdomain;
/// a leading `*.` is dropped, so `*.x.com` also matches `x.com` itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ExemptHosts {
    patterns: Vec<String>,
}

// === impl ExemptHosts ===

impl ExemptHosts {
    /// Compile patterns: trimmed, lowercased, a leading `*.` removed, dots stripped from both
    /// ends, international names in their ASCII (Punycode) form; empty patterns are dropped.
    pub(crate) fn new(patterns: &[String]) -> Self {
        let patterns = patterns
            .iter()
            .filter_map(|raw| {
                let lowered = raw.trim().to_lowercase();
                let bare = lowered.strip_prefix("*.").unwrap_or(&lowered);
                let bare = bare.trim_matches('.');
                if bare.is_empty() {
                    return None;
                }
                Some(match url::Host::parse(bare) {
                    Ok(url::Host::Domain(ascii)) => ascii,
                    _ => bare.to_owned(),
                })
            })
            .collect();
        Self { patterns }
    }

    /// Whether the canonical `host` is exempt.
    pub(crate) fn matches(&self, host: &str) -> bool {
        let host = host.trim_matches('.').to_ascii_lowercase();
        self.patterns.iter().any(|p| {
            host == *p
                || host
                    .strip_suffix(p.as_str())
                    .is_some_and(|head| head.ends_with('.'))
        })
    }
}

/// Whether `url` may be cached, and why not. `exempt` holds the operator's exempt hosts.
pub(crate) fn check_url(url: &str, exempt: &ExemptHosts) -> Result<(), NoCacheReason> {
    let host = Url::parse(url)
        .ok()
        .as_ref()
        .and_then(canonical_host)
        .ok_or(NoCacheReason::InvalidUrl)?;
    check_host(&host, exempt)
}

/// [`check_url`] for a canonical host (lowercase, no trailing dot, IPv6 without brackets).
pub(crate) fn check_host(host: &str, exempt: &ExemptHosts) -> Result<(), NoCacheReason> {
    if host.is_empty() {
        return Err(NoCacheReason::InvalidUrl);
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return if is_public_literal(ip) {
            Ok(())
        } else {
            Err(NoCacheReason::PrivateAddress)
        };
    }
    if host == "localhost" || host.ends_with(".localhost") || host.ends_with(".local") {
        return Err(NoCacheReason::LocalHost);
    }
    if !host.contains('.') {
        return Err(NoCacheReason::SingleLabelHost);
    }
    if exempt.matches(host) {
        return Err(NoCacheReason::ExemptHost);
    }
    Ok(())
}

/// Whether an IP literal is public unicast for the cache rule.
pub(crate) fn is_public_literal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let refused = a == 0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b))
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && (c == 0 || c == 2))
        || (a == 192 && b == 168)
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224;
    !refused
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let seg = ip.segments();
    // Everything outside global unicast 2000::/3 (loopback, mapped, ULA, link-local, multicast,
    // reserved) is refused, then the documentation, benchmarking/ORCHID and 6to4 blocks.
    let global_unicast = (seg[0] & 0xe000) == 0x2000;
    let special = (seg[0] == 0x2001 && (seg[1] < 0x0200 || seg[1] == 0x0db8)) || seg[0] == 0x2002;
    global_unicast && !special
}

#[cfg(test)]
mod tests;

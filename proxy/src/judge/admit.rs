//! One egress admission beneath every listener.
//!
//! Every path out of the pod asks the same question: may this URL (or this `host:port`) be
//! reached, and which addresses may the gate dial? [`url()`] and [`host()`] answer it for every
//! listener. Each runs, in one order, the gates its [`Listener`]'s row of [`GateRow::of`] names:
//!
//! ```text
//!  E1 secret URL ─► secret in host ─► egress.ports ─► E2 SSRF (own resolver, every answer) ─► E4 blocklist
//! ```
//!
//! and counts every verdict in `fleetgate_gate_decisions_total`. The table is the only place
//! that says which gate applies where; a listener never runs a gate by hand. Every listener
//! that dials then runs [`no_loop`] on the address and port it is about to dial (the
//! `proxy_loop` gate). A TLS ClientHello inside a CONNECT tunnel is judged by [`sni`]: the
//! CONNECT row's name gates on the server name, then the `sni` gate, which ties the name to the
//! tunnel's target. What stays with the listener is its own protocol work: parsing its target,
//! the pinned dial to the returned addresses, its decision line.

use std::net::IpAddr;

use crate::base::dialer::OwnListeners;
use crate::base::target_url::TargetUrl;
use crate::judge::gates::website_blocklist::WebsiteBlocklistGate;
use crate::judge::gates::{DenyReason, Gate, Verdict, secret_url, ssrf};
use crate::judge::metrics::ProxyMetrics;
use crate::judge::rules::Rules;
use crate::policy::EnforcementMode;

/// Who asks: each listener has one row of gates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Listener {
    /// An item of an extract call, after E1 ran over the whole call.
    ExtractItem,
    /// The gate's own fetch (the `direct` backend): the item's dial and every redirect hop.
    Fetch,
    /// A URL re-checked without the gate dialling it: a vendor's final URL, `check-url`.
    Recheck,
    /// An absolute-form request on the forward proxy, a request relayed inside a CONNECT
    /// tunnel, a captured plain-HTTP request.
    ForwardHttp,
    /// `CONNECT host:port` on the forward proxy.
    Connect,
    /// A captured TLS connection, by its SNI (or the original address for raw-IP egress).
    TransparentTls,
    /// The LLM route's upstream: a provider base URL from the policy.
    LlmUpstream,
    /// A watch's MCP server: a URL from the policy.
    Watch,
}

// === impl Listener ===

impl Listener {
    /// Every listener, for tests and docs.
    #[cfg(test)]
    pub(crate) const ALL: [Self; 8] = [
        Self::ExtractItem,
        Self::Fetch,
        Self::Recheck,
        Self::ForwardHttp,
        Self::Connect,
        Self::TransparentTls,
        Self::LlmUpstream,
        Self::Watch,
    ];
}

/// When `egress.ports` applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ports {
    /// Always: the list (default 80, 443) binds every connection of this listener.
    Always,
    /// Only when the policy sets `egress.ports` itself.
    WhenSet,
    /// Never: the gate does not dial this target, or dials a port it checks elsewhere.
    Never,
}

/// The gates of one listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GateRow {
    /// E1 over the whole URL (secret-shaped tokens, sensitive query names, userinfo).
    pub(crate) secret_url: bool,
    /// A token in a host label, on the name as the client sent it and on its canonical form.
    pub(crate) secret_in_host: bool,
    /// The port allow-list.
    pub(crate) ports: Ports,
    /// E4, the website blocklist.
    pub(crate) blocklist: bool,
}

// === impl GateRow ===

impl GateRow {
    /// The gates of `listener`. E2 (the address check) applies everywhere: it is what
    /// returns the addresses a listener may dial.
    pub(crate) const fn of(listener: Listener) -> Self {
        match listener {
            // E1 already refused the whole call before any item's DNS query (Hermes refuses
            // the call, not the item); the port is the dialler's business: a vendor dials its
            // own connections, the `direct` backend checks at its dial (`Fetch`).
            Listener::ExtractItem => Self {
                secret_url: false,
                secret_in_host: false,
                ports: Ports::Never,
                blocklist: true,
            },
            // The gate's own fetch of an extract item: the port list binds it when the policy
            // sets one (pages on other ports are ordinary web pages Hermes fetches); a redirect
            // hop is a new URL from the origin, so E1 runs on it again.
            Listener::Fetch => Self {
                secret_url: true,
                secret_in_host: false,
                ports: Ports::WhenSet,
                blocklist: true,
            },
            // Nothing is dialled by the gate: the vendor already fetched, or nothing will be.
            Listener::Recheck => Self {
                secret_url: true,
                secret_in_host: false,
                ports: Ports::Never,
                blocklist: true,
            },
            // The agent names the URL and the gate dials it: every gate. E1 covers the host.
            Listener::ForwardHttp => Self {
                secret_url: true,
                secret_in_host: false,
                ports: Ports::Always,
                blocklist: true,
            },
            // Only a host and a port are seen: the host's labels carry what E1 would look for,
            // on the raw form too (a secret's prefix is case-sensitive, DNS is not).
            Listener::Connect | Listener::TransparentTls => Self {
                secret_in_host: true,
                secret_url: false,
                ports: Ports::Always,
                blocklist: true,
            },
            // The provider's base URL comes from the policy, not the agent: no URL content to
            // check and nothing the blocklist is for; the address and port still bind it.
            Listener::LlmUpstream => Self {
                secret_url: false,
                secret_in_host: false,
                ports: Ports::Always,
                blocklist: false,
            },
            // The MCP server's URL comes from the policy, but its headers may expand secrets
            // and the blocklist may name the host: the URL gates apply. MCP servers listen on
            // any port, which the policy names outright.
            Listener::Watch => Self {
                secret_url: true,
                secret_in_host: false,
                ports: Ports::Never,
                blocklist: true,
            },
        }
    }
}

/// A target the gates let through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct GateAdmission {
    /// The checked addresses, in resolver order: the only ones the listener may dial.
    pub(crate) addrs: Vec<IpAddr>,
    /// Gates in report mode that would have refused: `(gate, reason)`, for the decision line.
    pub(crate) reported: Vec<(&'static str, DenyReason)>,
}

/// A target a gate refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub(crate) struct GateRefusal {
    /// The gate that refused (`secret_url`, `port`, `ssrf`, `website_blocklist`).
    pub(crate) gate: &'static str,
    /// Why; its `code()` is the stable code every listener reports.
    pub(crate) reason: DenyReason,
}

/// The gates of `listener` on a URL.
pub(crate) async fn url(
    rt: &Rules,
    metrics: &ProxyMetrics,
    listener: Listener,
    target: &TargetUrl,
) -> Result<GateAdmission, GateRefusal> {
    let row = GateRow::of(listener);
    let mut admission = GateAdmission::default();
    if row.secret_url {
        admission = secrets(rt, metrics, target)?;
    }
    if let Some(port) = target.port() {
        self::port(rt, metrics, listener, port)?;
    }
    let checked = ssrf::check_url(target, &rt.policy.egress, &rt.resolver).await;
    admission.addrs = addresses(metrics, checked)?;
    if row.blocklist {
        blocklist_url(rt, metrics, target, &mut admission)?;
    }
    Ok(admission)
}

/// The gates of `listener` on a host and port; `raw` is the name as the client sent it,
/// `host` its canonical form.
pub(crate) async fn host(
    rt: &Rules,
    metrics: &ProxyMetrics,
    listener: Listener,
    raw: &str,
    host: &str,
    port: u16,
) -> Result<GateAdmission, GateRefusal> {
    let row = GateRow::of(listener);
    let mut admission = GateAdmission::default();
    if row.secret_in_host {
        decide(
            metrics,
            "secret_url",
            host_secret(rt, raw, host),
            &mut admission,
        )?;
    }
    self::port(rt, metrics, listener, port)?;
    let checked = ssrf::check_host(host, &rt.policy.egress, &rt.resolver).await;
    admission.addrs = addresses(metrics, checked)?;
    if row.blocklist {
        host_blocklist(rt, metrics, host, &mut admission)?;
    }
    Ok(admission)
}

/// A stored redirect hop of a cached page, re-admitted on every hit under the current policy:
/// the gates of [`Listener::Recheck`]'s row, with E2's checks that need no DNS (scheme, IP
/// literals, the name rules). The addresses are not looked up again: a page whose chain
/// crossed any address outside public unicast space is never stored, and public addresses
/// pass E2 under every policy.
pub(crate) fn stored_hop(
    rt: &Rules,
    metrics: &ProxyMetrics,
    target: &TargetUrl,
) -> Result<GateAdmission, GateRefusal> {
    let row = GateRow::of(Listener::Recheck);
    let mut admission = GateAdmission::default();
    if row.secret_url {
        admission = secrets(rt, metrics, target)?;
    }
    let verdict = match ssrf::precheck_url(target, &rt.policy.egress) {
        Ok(_) => Verdict::Allow,
        Err(reason) => Verdict::Deny(reason),
    };
    decide(metrics, "ssrf", verdict, &mut admission)?;
    if row.blocklist {
        blocklist_url(rt, metrics, target, &mut admission)?;
    }
    Ok(admission)
}

/// E1 alone on one URL: the extract call runs it over every item before any item's DNS query
/// (a hit refuses the whole call), and a sniffed HTTP head is checked with it before its host.
pub(crate) fn secrets(
    rt: &Rules,
    metrics: &ProxyMetrics,
    target: &TargetUrl,
) -> Result<GateAdmission, GateRefusal> {
    let gate = secret_url::SecretUrlGate {
        secrets: Some(&rt.policy.secrets),
    };
    let mut admission = GateAdmission::default();
    decide(metrics, "secret_url", gate.check(target), &mut admission)?;
    Ok(admission)
}

/// The port allow-list as `listener`'s row applies it; counted only where it applies.
pub(crate) fn port(
    rt: &Rules,
    metrics: &ProxyMetrics,
    listener: Listener,
    port: u16,
) -> Result<(), GateRefusal> {
    let egress = &rt.policy.egress;
    let applies = match GateRow::of(listener).ports {
        Ports::Always => true,
        Ports::WhenSet => egress.ports_explicit,
        Ports::Never => false,
    };
    if !applies {
        return Ok(());
    }
    let verdict = if egress.ports.contains(&port) {
        Verdict::Allow
    } else {
        Verdict::Deny(DenyReason::PortNotAllowed { port })
    };
    decide(metrics, "port", verdict, &mut GateAdmission::default())
}

/// The loop check: whether a checked address on `port` reaches one of the gate's own
/// listeners (`own`). Every listener that dials runs it after [`url()`] or [`host()`], counted as
/// the `proxy_loop` gate.
pub(crate) fn no_loop(
    metrics: &ProxyMetrics,
    own: &OwnListeners,
    addrs: &[IpAddr],
    port: u16,
) -> Result<(), GateRefusal> {
    let verdict = match own.first_loop(addrs, port) {
        Some(target) => Verdict::Deny(DenyReason::ProxyLoop { target }),
        None => Verdict::Allow,
    };
    decide(
        metrics,
        "proxy_loop",
        verdict,
        &mut GateAdmission::default(),
    )
}

/// A host as a client named it: `raw` as sent (case kept), `host` canonical (lowercase, IDNA,
/// IPv4 forms decoded, IPv6 without brackets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Named<'a> {
    /// As the client sent it.
    pub(crate) raw: &'a str,
    /// Its canonical form.
    pub(crate) host: &'a str,
}

/// The server name of a TLS ClientHello inside a CONNECT tunnel to `target`, which [`host`]
/// admitted and the gate dialled at `dialled`. Names carry what a host does, so the CONNECT
/// row's name gates run on the server name (secret in host, then the blocklist, which matches
/// names only: a CONNECT to an address is judged here by the name it carries), then the `sni`
/// gate ties the name to the tunnel:
///
/// 1. a CONNECT to a name carries that same name (canonical forms compared);
/// 2. a CONNECT to an address carries a name whose checked answers (E2, the gate's own
///    resolver) include the dialled address, or that address itself.
///
/// A server name identical to the CONNECT host was judged with it and costs nothing here.
pub(crate) async fn sni(
    rt: &Rules,
    metrics: &ProxyMetrics,
    name: Named<'_>,
    target: Named<'_>,
    dialled: IpAddr,
) -> Result<GateAdmission, GateRefusal> {
    let row = GateRow::of(Listener::Connect);
    let mut admission = GateAdmission::default();
    if name.raw == target.raw {
        return Ok(admission);
    }
    if row.secret_in_host {
        let verdict = host_secret(rt, name.raw, name.host);
        decide(metrics, "secret_url", verdict, &mut admission)?;
    }
    if name.host == target.host {
        return Ok(admission);
    }
    if row.blocklist {
        host_blocklist(rt, metrics, name.host, &mut admission)?;
    }
    let same = |ip: IpAddr| ip.to_canonical() == dialled.to_canonical();
    let matches = match (target.host.parse::<IpAddr>(), name.host.parse::<IpAddr>()) {
        (Ok(_), Ok(ip)) => same(ip),
        (Ok(_), Err(_)) => {
            let checked = ssrf::check_host(name.host, &rt.policy.egress, &rt.resolver).await;
            addresses(metrics, checked)?.into_iter().any(same)
        }
        (Err(_), _) => false,
    };
    let verdict = match matches {
        true => Verdict::Allow,
        false => Verdict::Deny(DenyReason::SniMismatch {
            sni: name.host.to_string(),
            target: target.host.to_string(),
        }),
    };
    decide(metrics, "sni", verdict, &mut admission)?;
    Ok(admission)
}

/// A token in a host label, judged on the name as sent (a secret's prefix is case-sensitive)
/// and on its canonical form.
fn host_secret(rt: &Rules, raw: &str, host: &str) -> Verdict {
    let secrets = Some(&rt.policy.secrets);
    let first = secret_url::check_host_secret_with(raw, secrets);
    match first {
        Verdict::Deny(_) => first,
        _ if raw == host => first,
        _ => match secret_url::check_host_secret_with(host, secrets) {
            Verdict::Allow => first,
            second => second,
        },
    }
}

/// E4 on a canonical host name, counted, in the policy's blocklist mode.
fn host_blocklist(
    rt: &Rules,
    metrics: &ProxyMetrics,
    host: &str,
    admission: &mut GateAdmission,
) -> Result<(), GateRefusal> {
    let verdict = match rt.blocklist.check_host(host) {
        None => Verdict::Allow,
        Some(m) => Verdict::Deny(DenyReason::BlockedByPolicy {
            host: m.host,
            rule: m.rule,
            source: m.source,
        }),
    };
    decide(
        metrics,
        "website_blocklist",
        blocklist_mode(rt, verdict),
        admission,
    )
}

/// Count `verdict`; a refusal ends the admission, a report is kept for the decision line.
fn decide(
    metrics: &ProxyMetrics,
    gate: &'static str,
    verdict: Verdict,
    admission: &mut GateAdmission,
) -> Result<(), GateRefusal> {
    metrics.count_verdict(gate, &verdict);
    match verdict {
        Verdict::Allow => Ok(()),
        Verdict::Report(reason) => {
            admission.reported.push((gate, reason));
            Ok(())
        }
        Verdict::Deny(reason) => Err(GateRefusal { gate, reason }),
    }
}

/// E2's outcome, counted.
fn addresses(metrics: &ProxyMetrics, checked: ssrf::Checked) -> Result<Vec<IpAddr>, GateRefusal> {
    match checked {
        Ok(addrs) => {
            metrics.count_verdict("ssrf", &Verdict::Allow);
            Ok(addrs)
        }
        Err(reason) => {
            metrics.count_verdict("ssrf", &Verdict::Deny(reason.clone()));
            Err(GateRefusal {
                gate: "ssrf",
                reason,
            })
        }
    }
}

/// E4 on a URL, in the blocklist's mode.
fn blocklist_url(
    rt: &Rules,
    metrics: &ProxyMetrics,
    target: &TargetUrl,
    admission: &mut GateAdmission,
) -> Result<(), GateRefusal> {
    let verdict = WebsiteBlocklistGate {
        list: &rt.blocklist,
    }
    .check(target);
    decide(
        metrics,
        "website_blocklist",
        blocklist_mode(rt, verdict),
        admission,
    )
}

/// The blocklist's `mode`: in report mode a match is only reported.
fn blocklist_mode(rt: &Rules, verdict: Verdict) -> Verdict {
    match (verdict, rt.policy.blocklist.mode) {
        (Verdict::Deny(reason), EnforcementMode::Report) => Verdict::Report(reason),
        (v, _) => v,
    }
}

#[cfg(test)]
mod tests;

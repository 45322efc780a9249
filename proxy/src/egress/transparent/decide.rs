//! The transparent listener's gate order for one sniffed name, and the addresses it may dial.
//!
//! ```text
//!  name? ─► (HTTP: E1 on the first request's URL) ─► secret in host ─► egress.ports (original port) ─► SSRF: own resolver, every answer
//!        ─► website blocklist ─► dial targets = checked answers × original port
//!  no name / IP literal ─► refused, unless raw-IP egress is allowed (then the original
//!                          address itself goes through the address table and the port list)
//! ```
//!
//! The gates are `admit`'s row for a captured TLS connection; this module picks the name.

use std::net::{IpAddr, SocketAddr};

use crate::egress::capture_refusal::CaptureRefusal;
use crate::egress::relay::sniff::{Sniffed, TargetName};
use crate::judge::admit::{self, Listener};
use crate::judge::metrics::ProxyMetrics;
use crate::live::runtime::Runtime;

/// A connection the gates let through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CaptureAdmission {
    /// The canonical name (or the IP, for raw-IP egress), for logs.
    pub(crate) host: String,
    /// The checked answers, in resolver order: the only addresses the gate may dial.
    pub(crate) addrs: Vec<IpAddr>,
    /// The original destination's port.
    pub(crate) port: u16,
}

/// Run the gates for one sniffed connection whose original destination is `original`.
pub(crate) async fn admit(
    rt: &Runtime,
    metrics: &ProxyMetrics,
    sniffed: &Sniffed,
    original: SocketAddr,
    allow_raw_ip: bool,
) -> Result<CaptureAdmission, CaptureRefusal> {
    match &sniffed.name {
        Some(TargetName::Domain(host)) => {
            let raw = sniffed.raw_name.as_deref().unwrap_or(host);
            check_first_request(rt, metrics, host, sniffed.path.as_deref())?;
            admit_name(rt, metrics, raw, host, original).await
        }
        None | Some(TargetName::Ip(_)) if allow_raw_ip => admit_raw_ip(rt, metrics, original).await,
        None | Some(TargetName::Ip(_)) => Err(CaptureRefusal::NoTargetName),
    }
}

async fn admit_name(
    rt: &Runtime,
    metrics: &ProxyMetrics,
    raw: &str,
    host: &str,
    original: SocketAddr,
) -> Result<CaptureAdmission, CaptureRefusal> {
    let port = original.port();
    let admitted = admit::host(rt, metrics, Listener::TransparentTls, raw, host, port)
        .await
        .map_err(|r| CaptureRefusal::Gate(r.reason))?;
    Ok(CaptureAdmission {
        host: host.to_string(),
        addrs: admitted.addrs,
        port,
    })
}

/// Raw-IP egress: the original address itself goes through the same gates as a name.
async fn admit_raw_ip(
    rt: &Runtime,
    metrics: &ProxyMetrics,
    original: SocketAddr,
) -> Result<CaptureAdmission, CaptureRefusal> {
    let ip = original.ip().to_canonical().to_string();
    admit_name(rt, metrics, &ip, &ip, original).await
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
) -> Result<(), CaptureRefusal> {
    let Some(path) = path else {
        return Ok(());
    };
    let target = crate::base::target_url::TargetUrl::new(&format!("http://{host}{path}"));
    admit::secrets(rt, metrics, &target)
        .map(drop)
        .map_err(|r| CaptureRefusal::Gate(r.reason))
}

#[cfg(test)]
mod tests;

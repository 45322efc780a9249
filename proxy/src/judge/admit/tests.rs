//! The admission table against a stub DNS server: every refused target gets the same code on
//! every listener whose row runs the refusing gate, an admission where the row leaves that
//! gate out, and exactly one counted decision of the refusing gate.

use std::sync::Arc;

use fleetgate_e2e::dns::StubDns;

use super::*;
use crate::policy::Policy;

async fn stub_dns() -> StubDns {
    StubDns::builder()
        .answer("ok.example", ["93.184.215.14".parse().unwrap()])
        .answer("meta.example", ["169.254.169.254".parse().unwrap()])
        .answer("internal.example", ["10.1.2.3".parse().unwrap()])
        .answer("blocked.example", ["93.184.215.14".parse().unwrap()])
        .start()
        .await
        .expect("the stub DNS server must start")
}

fn runtime(dns: &StubDns) -> Arc<Rules> {
    let yaml = format!(
        "version: v1\n\
         egress:\n  ports: [80, 443]\n  resolver:\n    nameservers: [\"{}\"]\n    timeoutMs: 500\n    attempts: 1\n\
         websiteBlocklist:\n  domains: [\"blocked.example\"]\n",
        dns.addr()
    );
    let policy = Policy::parse(yaml.as_bytes(), std::path::Path::new("."))
        .expect("the test policy must be valid");
    Arc::new(Rules::build(policy).expect("the rules must build").0)
}

/// One refused target: its URL, the host and port a host-only listener sees, the gate that
/// refuses it and the code.
struct Case {
    name: &'static str,
    url: &'static str,
    host: &'static str,
    port: u16,
    gate: &'static str,
    code: &'static str,
}

const CASES: [Case; 7] = [
    Case {
        name: "metadata address",
        url: "http://meta.example/latest",
        host: "meta.example",
        port: 80,
        gate: "ssrf",
        code: "ip_cloud_metadata",
    },
    Case {
        name: "private range",
        url: "http://internal.example/",
        host: "internal.example",
        port: 80,
        gate: "ssrf",
        code: "ip_private_range",
    },
    Case {
        name: "DNS failure",
        url: "http://nowhere.example/",
        host: "nowhere.example",
        port: 80,
        gate: "ssrf",
        code: "dns_failure",
    },
    Case {
        name: "blocklisted host",
        url: "https://blocked.example/",
        host: "blocked.example",
        port: 443,
        gate: "website_blocklist",
        code: "blocked_by_policy",
    },
    Case {
        name: "secret in the URL",
        url: "https://ok.example/?q=sk-abcdefghijklmnopqrstuvwxyz012345",
        host: "ok.example",
        port: 443,
        gate: "secret_url",
        code: "secret_in_url",
    },
    Case {
        name: "secret in a host label",
        url: "https://AKIAABCDEFGHIJKLMNOP.ok.example/",
        host: "AKIAABCDEFGHIJKLMNOP.ok.example",
        port: 443,
        gate: "secret_url",
        code: "secret_in_host",
    },
    Case {
        name: "port off the list",
        url: "http://ok.example:8080/",
        host: "ok.example",
        port: 8080,
        gate: "port",
        code: "port_not_allowed",
    },
];

/// Whether `listener`'s row runs the gate that refuses `case`.
fn applies(listener: Listener, case: &Case) -> bool {
    let row = GateRow::of(listener);
    match case.gate {
        "ssrf" => true,
        "website_blocklist" => row.blocklist,
        // The test policy sets `egress.ports`, so a `WhenSet` row checks it too.
        "port" => row.ports != Ports::Never,
        // A URL-listener's E1 reads the host too; a host-listener checks the host labels.
        "secret_url" if case.code == "secret_in_host" => row.secret_url || row.secret_in_host,
        "secret_url" => row.secret_url,
        other => panic!("unknown gate {other}"),
    }
}

/// Whether `listener` sees only a host and a port.
fn host_only(listener: Listener) -> bool {
    matches!(listener, Listener::Connect | Listener::TransparentTls)
}

fn denials(metrics: &ProxyMetrics, gate: &str, code: &str) -> u64 {
    metrics
        .gate_decisions
        .with_label_values(&[gate, "deny", code])
        .get()
}

#[tokio::test]
async fn every_listener_gives_each_refused_target_the_same_code_and_one_count() {
    let dns = stub_dns().await;
    let rt = runtime(&dns);
    for case in &CASES {
        for listener in Listener::ALL {
            if host_only(listener) && case.code == "secret_in_url" {
                // A host and a port carry no query string.
                continue;
            }
            let metrics = ProxyMetrics::unregistered().unwrap();
            let result = if host_only(listener) {
                let canonical = case.host.to_ascii_lowercase();
                host(&rt, &metrics, listener, case.host, &canonical, case.port).await
            } else {
                url(&rt, &metrics, listener, &TargetUrl::new(case.url)).await
            };
            let what = format!("{} through {listener:?}", case.name);
            // A token in a host label, seen inside a whole URL, is E1's URL refusal (Hermes'
            // own text for the agent); a listener that sees only the host names the host.
            let code = match case.code {
                "secret_in_host" if !host_only(listener) => "secret_in_url",
                code => code,
            };
            if applies(listener, case) {
                let refusal = result.expect_err(&what);
                assert_eq!(
                    (refusal.gate, refusal.reason.code()),
                    (case.gate, code),
                    "{what}"
                );
                assert_eq!(
                    denials(&metrics, case.gate, code),
                    1,
                    "{what}: one counted refusal"
                );
            } else {
                // The row leaves the gate out (a later gate may still refuse: an unresolvable
                // name fails E2).
                let gate = result.err().map(|r| r.gate);
                assert_ne!(
                    gate,
                    Some(case.gate),
                    "{what}: the row leaves that gate out"
                );
                assert_eq!(denials(&metrics, case.gate, code), 0, "{what}");
            }
        }
    }
}

#[tokio::test]
async fn an_allowed_target_returns_its_checked_addresses_on_every_listener() {
    let dns = stub_dns().await;
    let rt = runtime(&dns);
    for listener in Listener::ALL {
        let metrics = ProxyMetrics::unregistered().unwrap();
        let admitted = if host_only(listener) {
            host(&rt, &metrics, listener, "OK.example", "ok.example", 443).await
        } else {
            url(
                &rt,
                &metrics,
                listener,
                &TargetUrl::new("https://ok.example/page"),
            )
            .await
        }
        .unwrap_or_else(|r| panic!("{listener:?}: {r}"));
        assert_eq!(
            admitted.addrs,
            ["93.184.215.14".parse::<IpAddr>().unwrap()],
            "{listener:?}"
        );
        assert!(admitted.reported.is_empty(), "{listener:?}");
    }
}

#[test]
fn the_table_leaves_a_gate_out_only_where_the_target_comes_from_the_policy_or_was_checked() {
    // Every listener an agent's bytes reach runs the blocklist; only the LLM upstream, whose
    // target the policy names, does not.
    for listener in Listener::ALL {
        let row = GateRow::of(listener);
        assert_eq!(
            row.blocklist,
            listener != Listener::LlmUpstream,
            "{listener:?}"
        );
        // A host-only listener checks the host labels; a URL listener runs E1 on the URL,
        // except an extract item (E1 ran over the whole call) and the LLM upstream.
        let host_labels = row.secret_in_host || row.secret_url;
        let exempt = matches!(listener, Listener::ExtractItem | Listener::LlmUpstream);
        assert_eq!(host_labels, !exempt, "{listener:?}");
    }
}

/// `admit::sni` for a ClientHello naming `sni` in a tunnel to `target`, dialled at `dialled`.
async fn judge_sni(
    rt: &Rules,
    metrics: &ProxyMetrics,
    sni: &str,
    target: &str,
    dialled: &str,
) -> Result<GateAdmission, GateRefusal> {
    let (sni_host, target_host) = (sni.to_ascii_lowercase(), target.to_ascii_lowercase());
    let name = Named {
        raw: sni,
        host: &sni_host,
    };
    let target = Named {
        raw: target,
        host: &target_host,
    };
    super::sni(rt, metrics, name, target, dialled.parse().unwrap()).await
}

#[tokio::test]
async fn a_server_name_is_gated_like_a_host_and_must_name_the_tunnels_target() {
    let dns = stub_dns().await;
    let rt = runtime(&dns);
    let ok = "93.184.215.14";
    // (what, sni, CONNECT target, dialled address, gate and code of the refusal)
    let refused = [
        (
            "a blocklisted name in a tunnel to an allowed one",
            "blocked.example",
            "ok.example",
            ok,
            ("website_blocklist", "blocked_by_policy"),
        ),
        (
            "a blocklisted name in a tunnel to its own address",
            "blocked.example",
            ok,
            ok,
            ("website_blocklist", "blocked_by_policy"),
        ),
        (
            "a token in a label",
            "AKIAABCDEFGHIJKLMNOP.ok.example",
            "ok.example",
            ok,
            ("secret_url", "secret_in_host"),
        ),
        (
            "another allowed name",
            "other.example",
            "ok.example",
            ok,
            ("sni", "sni_mismatch"),
        ),
        (
            "a name resolving to another address than the dialled one",
            "ok.example",
            "93.184.215.15",
            "93.184.215.15",
            ("sni", "sni_mismatch"),
        ),
        (
            "a name resolving to a private address",
            "internal.example",
            ok,
            ok,
            ("ssrf", "ip_private_range"),
        ),
        (
            "another address",
            "93.184.215.15",
            ok,
            ok,
            ("sni", "sni_mismatch"),
        ),
    ];
    for (what, sni, target, dialled, (gate, code)) in refused {
        let metrics = ProxyMetrics::unregistered().unwrap();
        let refusal = judge_sni(&rt, &metrics, sni, target, dialled)
            .await
            .expect_err(what);
        assert_eq!(
            (refusal.gate, refusal.reason.code()),
            (gate, code),
            "{what}"
        );
        assert_eq!(
            denials(&metrics, gate, code),
            1,
            "{what}: one counted refusal"
        );
    }
    let allowed = [
        ("the CONNECT host itself", "ok.example", "ok.example", ok),
        (
            "the CONNECT host in another case",
            "OK.Example",
            "ok.example",
            ok,
        ),
        (
            "a name resolving to the dialled address",
            "ok.example",
            ok,
            ok,
        ),
    ];
    for (what, sni, target, dialled) in allowed {
        let metrics = ProxyMetrics::unregistered().unwrap();
        let admitted = judge_sni(&rt, &metrics, sni, target, dialled).await;
        assert!(admitted.is_ok(), "{what}: {admitted:?}");
    }
}

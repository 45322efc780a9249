use std::collections::BTreeMap;
use std::net::IpAddr;

use proptest::prelude::*;

use super::*;
use crate::crd::cluster_fleet_policy::{
    BaselineBlocklist, BaselineCron, BaselineEgress, BaselineLlm, BaselineSecrets,
};
use crate::crd::llm::{
    LlmEffort, LlmPinSpec, LlmProviderKind, LlmProviderSpec, LlmProviderTools, LlmSecretRef,
};
use crate::crd::{BlocklistSpec, CronSpec, EgressSpec, SharedListRef};

fn baseline(name: &str, edit: impl FnOnce(&mut ClusterFleetPolicySpec)) -> ClusterFleetPolicy {
    let mut spec = ClusterFleetPolicySpec::default();
    edit(&mut spec);
    let mut b = ClusterFleetPolicy::new(name, spec);
    b.metadata.generation = Some(3);
    b
}

fn spec(edit: impl FnOnce(&mut FleetPolicySpec)) -> FleetPolicySpec {
    let mut s = FleetPolicySpec::default();
    edit(&mut s);
    s
}

fn with_route(s: &mut FleetPolicySpec) {
    s.llm = Some(LlmSpec {
        providers: BTreeMap::from([(
            "openai".to_string(),
            LlmProviderSpec {
                kind: LlmProviderKind::Openai,
                base_url: "https://api.openai.com".into(),
                secret_ref: LlmSecretRef {
                    name: "llm-keys".into(),
                    key: "openai".into(),
                },
                timeout_seconds: None,
            },
        )]),
        roles: BTreeMap::from([("default".to_string(), "openai".to_string())]),
        ..LlmSpec::default()
    });
}

fn merged(b: &[ClusterFleetPolicy], s: &FleetPolicySpec) -> Merged {
    merge(b, s).unwrap_or_else(|c| panic!("the merge must succeed, got {c:?}"))
}

fn conflict(b: &[ClusterFleetPolicy], s: &FleetPolicySpec) -> Conflict {
    merge(b, s).expect_err("the merge must refuse the spec")
}

fn changed_fields(m: &Merged) -> Vec<&str> {
    m.changes.iter().map(|c| c.field.as_str()).collect()
}

#[test]
fn without_a_baseline_the_spec_comes_back_unchanged() {
    let s = spec(|s| {
        s.egress.mode = Some(EgressMode::Off);
        s.egress.allow_cidrs = vec!["10.0.0.0/8".into()];
        s.website_blocklist.mode = Some(BlocklistMode::Report);
    });
    let m = merged(&[], &s);
    assert_eq!(m.spec, s);
    assert!(m.changes.is_empty() && m.baselines.is_empty());
    let quiet = baseline("empty", |_| {});
    let m = merged(&[quiet], &s);
    assert_eq!(m.spec, s, "an empty baseline changes nothing");
    assert_eq!(m.baselines, vec![("empty".to_string(), Some(3))]);
}

/// (case, baseline, namespace mode, merged mode).
type ModeCase = (
    &'static str,
    Option<MinimumMode>,
    Option<EgressMode>,
    EgressMode,
);

#[test]
fn the_minimum_mode_raises_a_weaker_namespace_and_keeps_a_stronger_one() {
    let cases: &[ModeCase] = &[
        (
            "off under proxy",
            Some(MinimumMode::Proxy),
            Some(EgressMode::Off),
            EgressMode::Proxy,
        ),
        (
            "unset under transparent",
            Some(MinimumMode::Transparent),
            None,
            EgressMode::Transparent,
        ),
        (
            "proxy under transparent",
            Some(MinimumMode::Transparent),
            Some(EgressMode::Proxy),
            EgressMode::Transparent,
        ),
        (
            "transparent under proxy",
            Some(MinimumMode::Proxy),
            Some(EgressMode::Transparent),
            EgressMode::Transparent,
        ),
        (
            "off without a floor",
            None,
            Some(EgressMode::Off),
            EgressMode::Off,
        ),
    ];
    for (case, floor, mine, want) in cases {
        let b = baseline("floor", |b| b.egress.minimum_mode = *floor);
        let s = spec(|s| s.egress.mode = *mine);
        let m = merged(std::slice::from_ref(&b), &s);
        assert_eq!(
            m.spec.egress.mode.unwrap_or(EgressMode::Proxy),
            *want,
            "{case}"
        );
        assert_eq!(egress_mode(&[b], &s), *want, "{case}: the webhook's mode");
        let raised = m.changes.iter().any(|c| c.field == "spec.egress.mode");
        assert_eq!(
            raised,
            mine.unwrap_or(EgressMode::Proxy) != *want,
            "{case}: the change is reported"
        );
    }
}

#[test]
fn allow_cidrs_lose_the_denied_ranges_and_what_lies_outside_the_ceiling() {
    let b = baseline("ranges", |b| {
        b.egress.deny_cidrs = vec!["10.96.0.0/12".into()];
        b.egress.max_allow_cidrs = Some(vec!["10.0.0.0/8".into(), "fd00::/8".into()]);
    });
    let s = spec(|s| {
        s.egress.allow_cidrs = vec![
            "10.1.0.0/16".into(),
            "10.96.5.0/24".into(),
            "10.0.0.0/8".into(),
            "172.16.0.0/12".into(),
            "fd00:1::/32".into(),
            "0.0.0.0/0".into(),
        ]
    });
    let m = merged(&[b], &s);
    assert_eq!(
        m.spec.egress.allow_cidrs,
        vec![
            "10.1.0.0/16",
            "10.0.0.0/10",
            "10.64.0.0/11",
            "10.112.0.0/12",
            "10.128.0.0/9",
            "fd00:1::/32",
            "10.0.0.0/10",
            "10.64.0.0/11",
            "10.112.0.0/12",
            "10.128.0.0/9",
        ]
    );
    assert_eq!(
        changed_fields(&m),
        [
            "spec.egress.allowCIDRs[1]",
            "spec.egress.allowCIDRs[2]",
            "spec.egress.allowCIDRs[3]",
            "spec.egress.allowCIDRs[5]"
        ],
        "untouched entries are kept as written and not reported"
    );
    assert!(
        m.changes[2].message.contains("172.16.0.0/12 removed"),
        "{:?}",
        m.changes[2]
    );
}

#[test]
fn an_empty_ceiling_closes_every_range_and_a_denied_ipv4_range_stays_closed_in_its_ipv6_forms() {
    let b = baseline("closed", |b| b.egress.max_allow_cidrs = Some(Vec::new()));
    let s = spec(|s| s.egress.allow_cidrs = vec!["10.0.0.0/8".into()]);
    assert!(merged(&[b], &s).spec.egress.allow_cidrs.is_empty());

    let b = baseline("deny", |b| b.egress.deny_cidrs = vec!["10.0.0.0/8".into()]);
    let s = spec(|s| {
        s.egress.allow_cidrs = vec![
            "64:ff9b::a00:0/104".into(),
            "::ffff:a00:0/104".into(),
            "2002:a00::/24".into(),
            "2001::/32".into(),
            "2001:db8::/32".into(),
        ]
    });
    let m = merged(&[b], &s);
    assert_eq!(
        m.spec.egress.allow_cidrs,
        vec!["2001:db8::/32"],
        "only the unrelated range stays"
    );
}

#[test]
fn ports_are_intersected_and_an_empty_intersection_is_a_conflict() {
    let b = baseline("ports", |b| b.egress.ports = Some(vec![443, 8443]));
    let m = merged(std::slice::from_ref(&b), &spec(|_| {}));
    assert_eq!(
        m.spec.egress.ports,
        Some(vec![443]),
        "the default 80, 443 is bound too"
    );
    let m = merged(
        std::slice::from_ref(&b),
        &spec(|s| s.egress.ports = Some(vec![8443, 22])),
    );
    assert_eq!(m.spec.egress.ports, Some(vec![8443]));
    let m = merged(
        std::slice::from_ref(&b),
        &spec(|s| s.egress.ports = Some(vec![443])),
    );
    assert!(
        m.changes.is_empty(),
        "a list already inside the baseline's is not a change"
    );
    let c = conflict(&[b], &spec(|s| s.egress.ports = Some(vec![22])));
    assert_eq!(c.problems[0].field, "spec.egress.ports");
    assert!(
        c.problems[0].message.contains("ClusterFleetPolicy ports"),
        "{:?}",
        c.problems
    );
}

#[test]
fn blocklist_rules_are_united_and_enforce_cannot_be_lowered() {
    let b = baseline("company", |b| {
        b.website_blocklist = BaselineBlocklist {
            mode: None,
            domains: vec!["*.casino.example".into(), "pastebin.example".into()],
        }
    });
    let s = spec(|s| {
        s.website_blocklist = BlocklistSpec {
            mode: Some(BlocklistMode::Report),
            domains: vec!["pastebin.example".into(), "team.example".into()],
            ..BlocklistSpec::default()
        }
    });
    let m = merged(std::slice::from_ref(&b), &s);
    assert_eq!(
        m.spec.website_blocklist.domains,
        vec!["pastebin.example", "team.example", "*.casino.example"]
    );
    assert_eq!(m.spec.website_blocklist.mode, Some(BlocklistMode::Enforce));

    // A namespace switching its blocklist off still enforces the baseline's rules.
    let off = spec(|s| {
        s.website_blocklist = BlocklistSpec {
            enabled: Some(false),
            domains: vec!["team.example".into()],
            shared_lists: vec![SharedListRef {
                config_map: "lists".into(),
                key: "team".into(),
            }],
            ..BlocklistSpec::default()
        }
    });
    let m = merged(std::slice::from_ref(&b), &off);
    assert_eq!(m.spec.website_blocklist.enabled, Some(true));
    assert_eq!(
        m.spec.website_blocklist.domains,
        vec!["*.casino.example", "pastebin.example"]
    );
    assert!(m.spec.website_blocklist.shared_lists.is_empty());

    // A baseline in report mode does not lower a namespace that enforces.
    let trial = baseline("trial", |b| {
        b.website_blocklist.mode = Some(BlocklistMode::Report)
    });
    let m = merged(&[trial], &spec(|_| {}));
    assert_eq!(m.spec.website_blocklist.mode, None);
}

#[test]
fn secret_rules_are_united_and_no_namespace_exempts_a_baseline_rule() {
    let rules =
        "[[rules]]\nid = \"corp-token\"\nregex = '''corp_[a-z0-9]{24}'''\nkeywords = [\"corp_\"]\n";
    let b = baseline("secrets", |b| {
        b.secrets = BaselineSecrets {
            mode: None,
            rules: Some(rules.into()),
            allow: vec!["https://docs.corp.example/".into()],
            namespace_allow: None,
        }
    });
    let s = spec(|s| {
        s.secrets.mode = Some(BlocklistMode::Report);
        s.secrets.allow = vec!["corp-token".into(), "https://team.example/".into()];
    });
    let m = merged(std::slice::from_ref(&b), &s);
    assert_eq!(m.spec.secrets.inline_rules, vec![rules.to_string()]);
    assert_eq!(
        m.spec.secrets.allow,
        vec!["https://team.example/", "https://docs.corp.example/"]
    );
    assert_eq!(m.spec.secrets.mode, Some(BlocklistMode::Enforce));

    let locked = baseline("locked", |b| b.secrets.namespace_allow = Some(false));
    let m = merged(&[locked], &s);
    assert!(
        m.spec.secrets.allow.is_empty(),
        "no namespace exemption stays"
    );

    let broken = baseline("broken", |b| {
        b.secrets.rules = Some("[[rules]]\nid = \"x\"\nregex = '''(['''\n".into())
    });
    let c = conflict(&[broken], &s);
    assert!(
        c.problems[0].message.contains("ClusterFleetPolicy broken"),
        "{:?}",
        c.problems
    );
}

#[test]
fn llm_models_are_intersected_pins_win_and_enforce_cannot_be_lowered() {
    let b = baseline("models", |b| {
        b.llm = BaselineLlm {
            mode: Some(LlmModeSpec::Enforce),
            allowed_models: vec!["gpt-5*".into(), "claude-sonnet-4".into()],
            pins: BTreeMap::from([(
                "main".to_string(),
                LlmPinSpec {
                    effort: Some(LlmEffort::Medium),
                    service_tier: None,
                },
            )]),
            provider_tools: BTreeMap::new(),
        }
    });
    let s = spec(|s| {
        with_route(s);
        if let Some(l) = s.llm.as_mut() {
            l.allowed_models = vec!["gpt-5-mini".into(), "gpt-*".into(), "o3".into()];
            l.pins.insert(
                "main".into(),
                LlmPinSpec {
                    effort: Some(LlmEffort::High),
                    service_tier: Some("priority".into()),
                },
            );
        }
    });
    let m = merged(std::slice::from_ref(&b), &s);
    let llm = m.spec.llm.as_ref().expect("the route stays");
    assert_eq!(llm.allowed_models, vec!["gpt-5-mini", "gpt-5*"]);
    assert_eq!(llm.mode, Some(LlmModeSpec::Enforce));
    assert_eq!(llm.pins["main"].effort, Some(LlmEffort::Medium));
    assert_eq!(
        llm.pins["main"].service_tier.as_deref(),
        Some("priority"),
        "the baseline pins effort only"
    );

    let c = conflict(
        std::slice::from_ref(&b),
        &spec(|s| {
            with_route(s);
            if let Some(l) = s.llm.as_mut() {
                l.allowed_models = vec!["o3".into()];
            }
        }),
    );
    assert_eq!(c.problems[0].field, "spec.llm.allowedModels");

    let m = merged(&[b], &spec(|_| {}));
    assert!(m.spec.llm.is_none(), "no route is invented");
    assert_eq!(m.notes.len(), 1, "the unbound model rules are said");
}

#[test]
fn provider_tools_are_raised_to_the_baseline_for_the_role_and_every_role_it_covers() {
    use LlmProviderTools::{Allow, Observe, Refuse};
    let b = baseline("tools", |b| {
        b.llm.provider_tools = BTreeMap::from([
            ("default".to_string(), Observe),
            ("main".to_string(), Refuse),
        ])
    });
    let s = spec(|s| {
        with_route(s);
        if let Some(l) = s.llm.as_mut() {
            l.provider_tools = BTreeMap::from([
                ("default".to_string(), Allow),
                ("auxiliary:vision".to_string(), Allow),
                ("delegation".to_string(), Refuse),
            ]);
        }
    });
    let m = merged(std::slice::from_ref(&b), &s);
    let llm = m.spec.llm.as_ref().expect("the route stays");
    assert_eq!(
        llm.provider_tools,
        BTreeMap::from([
            ("default".to_string(), Observe),
            ("auxiliary:vision".to_string(), Observe),
            ("delegation".to_string(), Refuse),
            ("main".to_string(), Refuse),
        ]),
        "each role at least the baseline's, a stricter namespace kept"
    );
    assert_eq!(
        changed_fields(&m),
        [
            "spec.llm.providerTools.default",
            "spec.llm.providerTools.auxiliary:vision",
            "spec.llm.providerTools.main",
        ],
        "every raise is said"
    );
    let strict = spec(|s| {
        with_route(s);
        if let Some(l) = s.llm.as_mut() {
            l.provider_tools = BTreeMap::from([("default".to_string(), Refuse)]);
        }
    });
    let m = merged(&[b], &strict);
    assert_eq!(
        m.spec.llm.as_ref().map(|l| l.provider_tools.len()),
        Some(1),
        "a namespace refusing everywhere is left as it is: {:?}",
        m.spec.llm
    );
    assert!(changed_fields(&m).is_empty());
}

#[test]
fn the_first_baseline_by_name_wins_a_pin_two_baselines_set() {
    let pin = |e| LlmPinSpec {
        effort: Some(e),
        service_tier: None,
    };
    let a = baseline("a-platform", |b| {
        b.llm.pins = BTreeMap::from([("main".to_string(), pin(LlmEffort::Low))])
    });
    let z = baseline("z-security", |b| {
        b.llm.pins = BTreeMap::from([("main".to_string(), pin(LlmEffort::High))])
    });
    let s = spec(with_route);
    let m = merged(&[z, a], &s);
    let llm = m.spec.llm.as_ref().expect("the route stays");
    assert_eq!(llm.pins["main"].effort, Some(LlmEffort::Low));
    assert_eq!(
        m.baselines[0].0, "a-platform",
        "baselines apply in name order"
    );
}

#[test]
fn cron_models_are_intersected_and_the_lower_cost_ceiling_stays() {
    let b = baseline("cron", |b| {
        b.cron = BaselineCron {
            allowed_models: vec!["grok-4.6-mini".into(), "gpt-5-mini".into()],
            max_cost_per_job_per_day: Some(5.0),
        }
    });
    let m = merged(std::slice::from_ref(&b), &spec(|_| {}));
    assert_eq!(
        m.spec.cron.allowed_models,
        vec!["grok-4.6-mini", "gpt-5-mini"]
    );
    assert_eq!(m.spec.cron.max_cost_per_job_per_day, Some(5.0));
    let s = spec(|s| {
        s.cron = CronSpec {
            allowed_models: vec!["gpt-5-mini".into(), "gpt-5".into()],
            max_cost_per_job_per_day: Some(1.5),
            ..CronSpec::default()
        }
    });
    let m = merged(std::slice::from_ref(&b), &s);
    assert_eq!(m.spec.cron.allowed_models, vec!["gpt-5-mini"]);
    assert_eq!(m.spec.cron.max_cost_per_job_per_day, Some(1.5));
    let c = conflict(
        &[b],
        &spec(|s| s.cron.allowed_models = vec!["gpt-5".into()]),
    );
    assert_eq!(c.problems[0].field, "spec.cron.allowedModels");
}

#[test]
fn model_patterns_meet_as_the_narrower_one() {
    let cases = [
        ("gpt-5", "gpt-5", Some("gpt-5")),
        ("gpt-5", "gpt-6", None),
        ("gpt-5-mini", "gpt-5*", Some("gpt-5-mini")),
        ("gpt-*", "gpt-5*", Some("gpt-5*")),
        ("gpt-5*", "gpt-*", Some("gpt-5*")),
        ("gpt-5*", "claude*", None),
        ("*", "o3", Some("o3")),
    ];
    for (a, b, want) in cases {
        assert_eq!(meet_pattern(a, b).as_deref(), want, "{a} ∧ {b}");
    }
}

// === the property: nothing the baseline forbids survives the merge ===

fn arb_v4_cidr() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec![10u8, 172, 192, 100, 8]),
        any::<u8>(),
        any::<u8>(),
        0u8..=32,
    )
        .prop_map(|(a, b, c, len)| format!("{a}.{b}.{c}.0/{}", len.max(6)))
}

fn arb_cidr() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => arb_v4_cidr(),
        1 => prop::sample::select(vec![
            "::/0".to_string(),
            "::ffff:0:0/96".into(),
            "64:ff9b::/96".into(),
            "64:ff9b::a00:0/104".into(),
            "2002::/16".into(),
            "fd00::/8".into(),
        ]),
    ]
}

fn arb_addr() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        4 => (prop::sample::select(vec![10u8, 172, 192, 100, 8]), any::<u8>(), any::<u8>(), any::<u8>())
            .prop_map(|(a, b, c, d)| IpAddr::from([a, b, c, d])),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(b, c)| {
            IpAddr::from(std::net::Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0x0a00 | u16::from(b), u16::from(c)))
        }),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(b, c)| {
            IpAddr::from(std::net::Ipv6Addr::new(0x2002, 0x0a00 | u16::from(b), u16::from(c) << 8, 0, 0, 0, 0, 1))
        }),
    ]
}

fn arb_models() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop::sample::select(vec![
            "gpt-5".to_string(),
            "gpt-5-mini".into(),
            "gpt-5*".into(),
            "gpt-*".into(),
            "o3".into(),
            "claude-sonnet-4".into(),
            "claude*".into(),
        ]),
        0..4,
    )
}

fn arb_mode() -> impl Strategy<Value = Option<EgressMode>> {
    prop::sample::select(vec![
        None,
        Some(EgressMode::Off),
        Some(EgressMode::Proxy),
        Some(EgressMode::Transparent),
    ])
}

prop_compose! {
    fn arb_baseline()(
        floor in prop::sample::select(vec![None, Some(MinimumMode::Proxy), Some(MinimumMode::Transparent)]),
        deny in prop::collection::vec(arb_v4_cidr(), 0..3),
        ceiling in prop::option::of(prop::collection::vec(arb_cidr(), 0..3)),
        ports in prop::option::of(prop::collection::vec(prop::sample::select(vec![80u16, 443, 8080, 8443]), 1..3)),
        models in arb_models(),
        cron in arb_models(),
    ) -> ClusterFleetPolicy {
        baseline("prop", |b| {
            b.egress = BaselineEgress { minimum_mode: floor, deny_cidrs: deny, max_allow_cidrs: ceiling, ports };
            b.llm.allowed_models = models;
            b.cron.allowed_models = cron;
        })
    }
}

prop_compose! {
    fn arb_spec()(
        mode in arb_mode(),
        allow in prop::collection::vec(arb_cidr(), 0..4),
        ports in prop::option::of(prop::collection::vec(prop::sample::select(vec![22u16, 80, 443, 8080, 8443]), 1..4)),
        models in arb_models(),
        cron in arb_models(),
    ) -> FleetPolicySpec {
        spec(|s| {
            s.egress = EgressSpec { mode, allow_cidrs: allow, ports, ..EgressSpec::default() };
            with_route(s);
            if let Some(l) = s.llm.as_mut() { l.allowed_models = models; }
            s.cron.allowed_models = cron;
        })
    }
}

/// Whether the gate's `allowCIDRs` check opens `ip` under `entries` (an entry matches the
/// address or its canonical form, as the gate compares).
fn opened(entries: &[String], ip: IpAddr) -> bool {
    let canonical = ip.to_canonical();
    entries
        .iter()
        .filter_map(|e| cidr::Prefix::parse(e))
        .any(|p| p.contains_addr(ip) || p.contains_addr(canonical))
}

fn model_allowed(list: &[String], model: &str) -> bool {
    list.is_empty()
        || list.iter().any(|m| match m.strip_suffix('*') {
            Some(prefix) => model.starts_with(prefix),
            None => m == model,
        })
}

/// The IPv4 address an IPv6 transition form carries (NAT64, 6to4, mapped), as the gate reads it.
fn carried_v4(ip: IpAddr) -> Option<std::net::Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => {
            let n = u128::from(v6);
            if n >> 32 == 0x0064_ff9b << 64 || n >> 32 == 0xffff {
                Some(std::net::Ipv4Addr::from(n as u32))
            } else if n >> 112 == 0x2002 {
                Some(std::net::Ipv4Addr::from((n >> 80) as u32))
            } else {
                None
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_merged_policy_never_allows_what_the_baseline_forbids(
        b in arb_baseline(),
        s in arb_spec(),
        ip in arb_addr(),
        port in prop::sample::select(vec![22u16, 80, 443, 8080, 8443]),
        model in prop::sample::select(vec!["gpt-5", "gpt-5-mini", "gpt-4o", "o3", "claude-sonnet-4", "claude-opus-4"]),
    ) {
        let Ok(m) = merge(std::slice::from_ref(&b), &s) else {
            // A refusal renders nothing: the last good ConfigMap stays.
            return Ok(());
        };
        let e = &b.spec.egress;
        // Mode: never below the floor.
        if let Some(floor) = e.minimum_mode {
            prop_assert!(strength(m.spec.egress.mode.unwrap_or(EgressMode::Proxy)) >= strength(floor.as_egress()));
        }
        // Addresses: nothing denied (in any form the gate reads), nothing outside the ceiling.
        if opened(&m.spec.egress.allow_cidrs, ip) {
            let v4 = carried_v4(ip);
            let denied = e.deny_cidrs.iter().filter_map(|d| cidr::Prefix::parse(d)).any(|d| {
                d.contains_addr(ip) || v4.is_some_and(|v4| d.contains_addr(IpAddr::V4(v4)))
            });
            prop_assert!(!denied, "{ip} is denied yet opened by {:?}", m.spec.egress.allow_cidrs);
            if let Some(ceiling) = &e.max_allow_cidrs {
                prop_assert!(opened(ceiling, ip), "{ip} lies outside the ceiling yet is opened by {:?}", m.spec.egress.allow_cidrs);
            }
        }
        // Ports: inside the baseline's list.
        let ports = m.spec.egress.ports.clone().unwrap_or_else(|| DEFAULT_PORTS.to_vec());
        if let Some(allowed) = &e.ports {
            prop_assert!(!ports.contains(&port) || allowed.contains(&port));
        }
        // Models: the route and cron allow nothing the baseline does not.
        let llm = m.spec.llm.as_ref().map(|l| l.allowed_models.clone()).unwrap_or_default();
        if model_allowed(&llm, model) {
            prop_assert!(model_allowed(&b.spec.llm.allowed_models, model), "{model} allowed by {llm:?}");
        }
        if model_allowed(&m.spec.cron.allowed_models, model) {
            prop_assert!(model_allowed(&b.spec.cron.allowed_models, model));
        }
        // And what the namespace itself refused stays refused.
        if !model_allowed(&s.llm.as_ref().map(|l| l.allowed_models.clone()).unwrap_or_default(), model) {
            prop_assert!(!model_allowed(&llm, model));
        }
        if !opened(&s.egress.allow_cidrs, ip) {
            prop_assert!(!opened(&m.spec.egress.allow_cidrs, ip), "{ip} newly opened");
        }
    }
}

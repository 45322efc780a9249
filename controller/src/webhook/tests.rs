use clap::Parser;
use fleetgate_policy::backends::BackendKind;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::sidecar::{ADMIN_PORT, API_PORT, FORWARD_PORT, TRANSPARENT_PORT};
use super::*;
use crate::crd::{EgressMode, FleetPolicy, SharedListRef};
use crate::desired::policy as rendered;

/// A pod in `agents` labelled for injection, edited by `edit` (as JSON).
fn pod(edit: impl FnOnce(&mut Value)) -> Pod {
    let mut v = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "agent-0", "namespace": "agents",
                     "labels": {"app": "hermes", INJECT_LABEL: INJECT_ENABLED}},
        "spec": {"containers": [{"name": "hermes", "image": "hermes:0.19.0"}]}
    });
    edit(&mut v);
    serde_json::from_value(v).expect("the test pod must be a Pod")
}

fn cfg() -> InjectorConfig {
    InjectorConfig::with_image("ghcr.io/fleetgate/fleetgate-proxy:0.1.0")
}

fn decide(pod: &Pod, fps: &[FleetPolicy]) -> Decision {
    let refs: Vec<&FleetPolicy> = fps.iter().collect();
    mutate(pod, "agents", &refs, &cfg())
}

fn named(name: &str, ns: &str) -> FleetPolicy {
    let mut fp = FleetPolicy::test();
    fp.metadata.name = Some(name.into());
    fp.metadata.namespace = Some(ns.into());
    fp
}

#[test]
fn the_injected_annotation_alone_does_not_skip_injection() {
    // Written by hand on a pod template, the marker must not be a way around the gate.
    let got = decide(
        &pod(|p| p["metadata"]["annotations"] = json!({INJECTED_ANNOTATION: "bypass"})),
        &[FleetPolicy::test()],
    );
    assert!(
        matches!(got, Decision::Patch { .. }),
        "a pod marked injected but without the gate must be injected: {got:?}"
    );
}

#[test]
fn pods_that_are_not_ours_pass_unchanged() {
    type Case = (&'static str, fn(&mut Value), Skip);
    let cases: &[Case] = &[
        (
            "no label",
            |p| p["metadata"]["labels"] = json!({"app": "hermes"}),
            Skip::NotLabelled,
        ),
        (
            "label not enabled",
            |p| p["metadata"]["labels"][INJECT_LABEL] = json!("true"),
            Skip::NotLabelled,
        ),
        (
            "opt-out annotation over the label",
            |p| p["metadata"]["annotations"] = json!({INJECT_ANNOTATION: INJECT_DISABLED}),
            Skip::OptedOut,
        ),
        (
            "injected annotation with the gate container",
            |p| {
                p["metadata"]["annotations"] = json!({INJECTED_ANNOTATION: "0.0.9"});
                p["spec"]["containers"] = json!([{"name": "hermes", "image": "h"}, {"name": PROXY_CONTAINER, "image": "x"}]);
            },
            Skip::AlreadyInjected,
        ),
        (
            "gate container without annotation",
            |p| {
                p["spec"]["containers"] = json!([{"name": "hermes", "image": "h"}, {"name": PROXY_CONTAINER, "image": "x"}])
            },
            Skip::AlreadyInjected,
        ),
    ];
    for (what, edit, want) in cases {
        let got = decide(&pod(edit), &[FleetPolicy::test()]);
        assert_eq!(
            got,
            Decision::Unchanged(*want),
            "{what} must pass unchanged"
        );
    }
}

#[test]
fn pods_that_cannot_be_injected_are_refused_with_the_reason() {
    type Case = (&'static str, fn(&mut Value), Vec<FleetPolicy>, &'static str);
    let invalid =
        FleetPolicy::test().with_spec(|s| s.egress.allow_cidrs = vec!["169.254.0.0/16".into()]);
    let cases: Vec<Case> = vec![
        (
            "hostNetwork",
            |p| p["spec"]["hostNetwork"] = json!(true),
            vec![FleetPolicy::test()],
            "uses hostNetwork",
        ),
        (
            "no policy at all",
            |_| {},
            vec![],
            "no FleetPolicy in namespace agents selects this pod (labels {app=hermes,fleetgate.dev/inject=enabled})",
        ),
        (
            "a policy of another namespace only",
            |_| {},
            vec![named("fleet", "elsewhere")],
            "no FleetPolicy in namespace agents",
        ),
        (
            "two policies",
            |_| {},
            vec![named("b-fleet", "agents"), named("a-fleet", "agents")],
            "several FleetPolicies in namespace agents select this pod (a-fleet, b-fleet)",
        ),
        (
            "a volume named like the injector's",
            |p| p["spec"]["volumes"] = json!([{"name": "fleetgate-cache", "emptyDir": {}}]),
            vec![FleetPolicy::test()],
            "already has a volume named fleetgate-cache",
        ),
        (
            "a mount at /etc/hermes",
            |p| {
                p["spec"]["containers"][0]["volumeMounts"] =
                    json!([{"name": "x", "mountPath": "/etc/hermes/"}])
            },
            vec![FleetPolicy::test()],
            "already mounts a volume at /etc/hermes",
        ),
        (
            "an invalid FleetPolicy",
            |_| {},
            vec![invalid],
            "FleetPolicy fleet is invalid",
        ),
    ];
    for (what, edit, fps, want) in cases {
        match decide(&pod(edit), &fps) {
            Decision::Refuse(message) => {
                assert!(
                    message.contains(want),
                    "{what}: the refusal must say {want:?}, got {message:?}"
                );
            }
            other => panic!("{what} must be refused, got {other:?}"),
        }
    }
}

#[test]
fn the_agent_container_is_the_configured_one_or_the_first() {
    let two = |p: &mut Value| {
        p["spec"]["containers"] =
            json!([{"name": "shipper", "image": "s"}, {"name": "hermes", "image": "h"}])
    };
    let cases: &[(Option<&str>, Option<&str>, &str)] = &[
        (
            None,
            Some("/spec/containers/0/env"),
            "the first container by default",
        ),
        (
            Some("hermes"),
            Some("/spec/containers/1/env"),
            "the named container",
        ),
        (Some("missing"), None, "a missing name refuses"),
    ];
    for (agent, want_path, what) in cases {
        let mut c = cfg();
        c.agent_container = agent.map(str::to_string);
        let fp = FleetPolicy::test();
        match (mutate(&pod(two), "agents", &[&fp], &c), want_path) {
            (Decision::Patch { ops, .. }, Some(path)) => {
                assert!(
                    ops.iter().any(|o| o.path == *path),
                    "{what}: the env must be set at {path}"
                );
            }
            (Decision::Refuse(m), None) => assert!(m.contains("\"missing\""), "{what}: {m}"),
            (other, _) => panic!("{what}: unexpected {other:?}"),
        }
    }
}

/// The patched pod of `fp` for a bare labelled pod, as JSON.
fn patched(fp: &FleetPolicy) -> Value {
    let Decision::Patch { ops, .. } = decide(&pod(|_| {}), std::slice::from_ref(fp)) else {
        panic!("the pod must be patched");
    };
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::to_value(ops).expect("ops serialize"))
            .expect("an RFC 6902 patch");
    let mut doc = serde_json::to_value(pod(|_| {})).expect("the pod serializes");
    json_patch::patch(&mut doc, &patch).expect("the patch must apply");
    doc
}

fn container<'a>(doc: &'a Value, list: &str, name: &str) -> &'a Value {
    doc["spec"][list]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .expect("the container must be present")
}

#[test]
fn every_file_the_rendered_gate_policy_reads_is_mounted_in_the_gate() {
    let fp = FleetPolicy::test().with_spec(|s| {
        s.web.extract_backend = Some(crate::crd::ExtractBackend::new(BackendKind::Exa).unwrap());
        s.web.credentials_secret = Some("vendor-keys".into());
        s.website_blocklist.shared_lists = vec![SharedListRef {
            config_map: "lists".into(),
            key: "ads.txt".into(),
        }];
        s.secrets.rules_config_maps = vec![SharedListRef {
            config_map: "secret-rules".into(),
            key: "corp.toml".into(),
        }];
        s.llm = Some(
            serde_json::from_value(json!({
                "providers": {
                    "oai": {"kind": "openai", "baseURL": "https://api.openai.com",
                            "secretRef": {"name": "llm-keys", "key": "openai"}},
                    "claude": {"kind": "anthropic", "baseURL": "https://api.anthropic.com",
                               "secretRef": {"name": "llm-keys", "key": "anthropic"}},
                    "or": {"kind": "openrouter", "baseURL": "https://openrouter.ai/api",
                           "secretRef": {"name": "router-key", "key": "token"}}
                },
                "roles": {"main": "oai", "delegation": "claude", "cron": "or"}
            }))
            .expect("the test llm spec must parse"),
        );
    });
    let policy: Value =
        serde_yaml::from_str(&rendered::render(&fp.spec).expect("renders").yaml).expect("YAML");
    let doc = patched(&fp);
    let gate = container(&doc, "containers", PROXY_CONTAINER);
    let volumes = doc["spec"]["volumes"].as_array().expect("volumes");
    let mut files: Vec<&str> = vec![
        policy
            .pointer("/web/vendors/exa/apiKeyFile")
            .and_then(Value::as_str)
            .expect("a key file"),
        policy
            .pointer("/websiteBlocklist/sharedFiles/0")
            .and_then(Value::as_str)
            .expect("a shared file"),
        policy
            .pointer("/secrets/rulesFiles/0")
            .and_then(Value::as_str)
            .expect("a secret rule file"),
        policy
            .pointer("/report/tokenFile")
            .and_then(Value::as_str)
            .expect("a token file"),
        sidecar::POLICY_PATH,
    ];
    files.extend(
        ["/report/managedDir", "/store/root"]
            .iter()
            .filter_map(|p| policy.pointer(p)?.as_str()),
    );
    files.extend(["oai", "claude", "or"].iter().filter_map(|p| {
        policy
            .pointer(&format!("/llm/providers/{p}/keyFile"))?
            .as_str()
    }));
    assert_eq!(files.len(), 10, "every path must be in the rendered policy");
    for file in files {
        let mount = gate["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| file.starts_with(m["mountPath"].as_str().unwrap_or("-")))
            .unwrap_or_else(|| panic!("{file} must be under a gate mount"));
        let volume = volumes
            .iter()
            .find(|v| v["name"] == mount["name"])
            .expect("the mount's volume");
        if let Some(sources) = volume
            .pointer("/projected/sources")
            .and_then(Value::as_array)
        {
            let rel = file
                .trim_start_matches(sidecar::GATE_ETC)
                .trim_start_matches('/');
            let found = sources
                .iter()
                .flat_map(|s| s.as_object().into_iter().flat_map(|o| o.values()))
                .flat_map(|src| src["items"].as_array().into_iter().flatten())
                .any(|item| item["path"] == rel);
            assert!(found, "{file} must be an item of the projected volume");
        }
    }
}

#[test]
fn the_injected_commands_parse_with_the_gate_binary() {
    let fp = FleetPolicy::test().with_spec(|s| s.egress.mode = Some(EgressMode::Transparent));
    let mut c = cfg();
    c.ignore_outbound_ports = vec![
        config::PortSpec::Port(22),
        config::PortSpec::Text("8000-8100".into()),
    ];
    c.ignore_outbound_cidrs = vec!["10.0.0.0/8".into(), "fd00::/8".into()];
    // Transparent mode: the agent runs as a uid of its own (the image's user is refused).
    let agent = pod(|p| p["spec"]["containers"][0]["securityContext"] = json!({"runAsUser": 1000}));
    let decision = mutate(&agent, "agents", &[&fp], &c);
    let Decision::Patch { ops, .. } = decision else {
        panic!("the pod must be patched")
    };
    let mut checked = Vec::new();
    for op in ops
        .iter()
        .filter(|o| o.path.ends_with("/-") || o.path.contains("/initContainers"))
    {
        for c in std::iter::once(&op.value).chain(op.value.as_array().into_iter().flatten()) {
            let Some(args) = c["args"].as_array() else {
                continue;
            };
            let argv =
                std::iter::once("fleetgate-proxy").chain(args.iter().filter_map(Value::as_str));
            let parsed = fleetgate_proxy::cli::Cli::try_parse_from(argv);
            assert!(parsed.is_ok(), "{} args must parse: {parsed:?}", c["name"]);
            checked.push(c["name"].clone());
        }
    }
    assert_eq!(
        checked,
        [json!(INIT_CONTAINER), json!(PROXY_CONTAINER)],
        "both commands must be checked"
    );
}

#[test]
fn the_pod_layout_matches_the_rendered_policy_listeners() {
    let port = |addr: &str| addr.rsplit(':').next().and_then(|p| p.parse::<u16>().ok());
    let cases = [
        (rendered::LISTEN_API, API_PORT),
        (rendered::LISTEN_FORWARD_PROXY, FORWARD_PORT),
        (rendered::LISTEN_TRANSPARENT, TRANSPARENT_PORT),
        (rendered::LISTEN_ADMIN, ADMIN_PORT),
    ];
    for (addr, want) in cases {
        assert_eq!(
            port(addr),
            Some(want),
            "{addr} must be the injected port {want}"
        );
    }
}

#[test]
fn the_agent_sees_the_cache_at_the_policy_root_whatever_its_home() {
    for home in ["/opt/data", "/home/agent/.hermes"] {
        let mut c = cfg();
        c.hermes_home_path = home.into();
        let p = pod(|p| {
            p["spec"]["containers"][0]["volumeMounts"] =
                json!([{"name": "home", "mountPath": home}]);
            p["spec"]["volumes"] = json!([{"name": "home", "emptyDir": {}}]);
        });
        let fp = FleetPolicy::test();
        let Decision::Patch { ops, .. } = mutate(&p, "agents", &[&fp], &c) else {
            panic!("a labelled pod with home {home} must be patched");
        };
        let agent_mounts: Vec<&Value> = ops
            .iter()
            .filter(|o| o.path.starts_with("/spec/containers/0/volumeMounts"))
            .flat_map(|o| std::iter::once(&o.value).chain(o.value.as_array().into_iter().flatten()))
            .filter(|m| m["mountPath"] == json!(rendered::STORE_AGENT_ROOT))
            .collect();
        assert_eq!(
            agent_mounts.len(),
            1,
            "with home {home} the agent must see the cache at the agent-visible root {}: {ops:?}",
            rendered::STORE_AGENT_ROOT
        );
        assert_eq!(
            agent_mounts[0]["readOnly"],
            json!(true),
            "the agent's cache mount must be read-only"
        );
    }
}

#[test]
fn the_injector_config_takes_defaults_and_refuses_what_it_cannot_use() {
    let minimal =
        InjectorConfig::parse("proxyImage: img:1\n").expect("the image alone must be enough");
    assert_eq!(
        minimal,
        InjectorConfig::with_image("img:1"),
        "every other field must default"
    );
    let no_resources =
        InjectorConfig::parse("proxyImage: i\nproxyResources: null\n").expect("null is allowed");
    assert_eq!(
        no_resources.proxy_resources, None,
        "null resources must set none"
    );
    let cases = [
        ("proxyImagePullPolicy: Sometimes", "proxyImagePullPolicy"),
        ("proxyUid: 0", "proxyUid"),
        ("hermesHomePath: opt/data", "hermesHomePath"),
        ("ignoreOutboundCIDRs: [10.0.0.0/33]", "ignoreOutboundCIDRs"),
        ("ignoreOutboundPorts: [\"90-80\"]", "ignoreOutboundPorts"),
        ("proxyImge: typo", "unknown field"),
        ("proxyImage: \" \"", "proxyImage"),
    ];
    for (line, want) in cases {
        let text = if line.starts_with("proxyImage:") || line.starts_with("proxyImge") {
            line.to_string()
        } else {
            format!("proxyImage: i\n{line}\n")
        };
        let err = InjectorConfig::parse(&text)
            .expect_err("the value must be refused")
            .to_string();
        assert!(
            err.contains(want),
            "{line:?} must be refused naming {want:?}, got {err}"
        );
    }
}

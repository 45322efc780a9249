//! The pure injection decision: one pod, the FleetPolicies of its namespace and the injector
//! configuration in; allow unchanged, allow with a JSON patch, or refuse with a message out.
//!
//! Rules, in order:
//! 1. a pod already running `fleetgate-proxy` is left alone, so injection is idempotent (the
//!    `fleetgate.dev/injected` marker alone is not enough: written by hand on a pod template it
//!    would be a way around the gate);
//! 2. the annotation `fleetgate.dev/inject: disabled` opts out, whatever the label says;
//! 3. a pod without the label `fleetgate.dev/inject: enabled` is not ours;
//! 4. `hostNetwork: true` is refused (capture rules and loopback ports would hit the node);
//! 5. exactly one FleetPolicy of the namespace must select the pod; none or several refuse;
//! 6. the agent container must exist and must not already use the injector's paths or names;
//! 7. no container may rewrite the capture (privileged, NET_ADMIN / NET_RAW / ALL) or reach
//!    the gate's process (SYS_PTRACE with a shared process namespace, hostPID) and, in
//!    transparent mode, none may run as, or be able to switch to, the gate's uid or gid
//!    ([`super::identity`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::ResourceExt;
use kube::core::{Selector, SelectorExt};
use serde_json::{Value, json};

use super::identity;
use super::patch::{Ops, PatchOp};
use super::sidecar::{Plan, VOLUME_NAMES};
use super::{
    EGRESS_MODE_ANNOTATION, INIT_CONTAINER, INJECT_ANNOTATION, INJECT_DISABLED, INJECT_ENABLED,
    INJECT_LABEL, INJECTED_ANNOTATION, INJECTOR_VERSION, InjectorConfig, POLICY_ANNOTATION,
    PROXY_CONTAINER,
};
use crate::crd::{EgressMode, FleetPolicy};
use crate::desired::llm::LLM_KEYS_DIR;
use crate::desired::policy::{BLOCKLISTS_DIR, SECRET_RULES_DIR, VENDOR_KEYS_DIR};

/// Why a pod is admitted unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// The pod runs the gate container already.
    AlreadyInjected,
    /// The opt-out annotation is set.
    OptedOut,
    /// The pod is not labelled for injection.
    NotLabelled,
    /// Not a pod creation (another kind or operation).
    NotAPodCreate,
}

/// The injector's answer for one pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Admit the pod as it is.
    Unchanged(Skip),
    /// Admit the pod with this JSON patch.
    Patch {
        /// The FleetPolicy the pod follows.
        policy: String,
        /// The operations, in order.
        ops: Vec<PatchOp>,
    },
    /// Refuse the pod; the message tells the user why and what to do.
    Refuse(String),
}

// === impl Skip ===

impl Skip {
    /// Stable snake_case name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AlreadyInjected => "already_injected",
            Self::OptedOut => "opted_out",
            Self::NotLabelled => "not_labelled",
            Self::NotAPodCreate => "not_a_pod_create",
        }
    }
}

/// Decide what to do with `pod`, created in `namespace`, given the FleetPolicies of that
/// namespace (others are ignored) and the injector configuration.
pub fn mutate(
    pod: &Pod,
    namespace: &str,
    policies: &[&FleetPolicy],
    cfg: &InjectorConfig,
) -> Decision {
    if let Some(skip) = skip_reason(pod) {
        return Decision::Unchanged(skip);
    }
    let name = pod_name(pod);
    let Some(spec) = pod.spec.as_ref() else {
        return Decision::Refuse(format!("fleetgate: pod {name} has no spec to inject into"));
    };
    if spec.host_network == Some(true) {
        return Decision::Refuse(format!(
            "fleetgate: pod {name} uses hostNetwork: the gate's loopback ports and capture rules would apply to the node; remove hostNetwork or opt out with the annotation {INJECT_ANNOTATION}: {INJECT_DISABLED}"
        ));
    }
    let fp = match select(pod, namespace, policies) {
        Ok(fp) => fp,
        Err(message) => return Decision::Refuse(message),
    };
    match build(pod, spec, fp, cfg) {
        Ok(ops) => Decision::Patch {
            policy: fp.name_any(),
            ops,
        },
        Err(message) => Decision::Refuse(format!("fleetgate: pod {name}: {message}")),
    }
}

fn skip_reason(pod: &Pod) -> Option<Skip> {
    let annotations = pod.annotations();
    let has_gate = pod
        .spec
        .as_ref()
        .is_some_and(|s| s.containers.iter().any(|c| c.name == PROXY_CONTAINER));
    if has_gate {
        return Some(Skip::AlreadyInjected);
    }
    if annotations.get(INJECT_ANNOTATION).map(String::as_str) == Some(INJECT_DISABLED) {
        return Some(Skip::OptedOut);
    }
    if pod.labels().get(INJECT_LABEL).map(String::as_str) != Some(INJECT_ENABLED) {
        return Some(Skip::NotLabelled);
    }
    None
}

fn pod_name(pod: &Pod) -> String {
    pod.metadata
        .name
        .clone()
        .or_else(|| pod.metadata.generate_name.as_ref().map(|g| format!("{g}*")))
        .unwrap_or_else(|| "(unnamed)".into())
}

/// The one FleetPolicy of `namespace` whose selector matches the pod's labels.
fn select<'a>(
    pod: &Pod,
    namespace: &str,
    policies: &[&'a FleetPolicy],
) -> Result<&'a FleetPolicy, String> {
    let labels = pod.labels();
    let mut matching: Vec<&FleetPolicy> = policies
        .iter()
        .copied()
        .filter(|fp| fp.namespace().as_deref() == Some(namespace))
        .filter(|fp| Selector::try_from(fp.spec.selector.clone()).is_ok_and(|s| s.matches(labels)))
        .collect();
    matching.sort_by_key(|fp| fp.name_any());
    match matching.as_slice() {
        [one] => Ok(one),
        [] => Err(format!(
            "fleetgate: no FleetPolicy in namespace {namespace} selects this pod (labels {}); create one whose spec.selector matches, or opt out with the annotation {INJECT_ANNOTATION}: {INJECT_DISABLED}",
            render_labels(labels)
        )),
        several => Err(format!(
            "fleetgate: several FleetPolicies in namespace {namespace} select this pod ({}); narrow their spec.selector so exactly one matches",
            several
                .iter()
                .map(|fp| fp.name_any())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn render_labels(labels: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", pairs.join(","))
}

/// The patch for a pod that passed every check up to the policy selection.
fn build(
    pod: &Pod,
    spec: &PodSpec,
    fp: &FleetPolicy,
    cfg: &InjectorConfig,
) -> Result<Vec<PatchOp>, String> {
    let (agent_idx, agent) = agent_container(spec, cfg)?;
    check_names(spec)?;
    let mode = fp.spec.egress.mode.unwrap_or(EgressMode::Proxy);
    let gate = identity::Gate {
        uid: cfg.proxy_uid,
        gid: cfg.proxy_uid,
        image: &cfg.proxy_image,
    };
    let violations = identity::check(spec, &gate, mode == EgressMode::Transparent);
    if !violations.is_empty() {
        return Err(identity::message(&violations, &gate));
    }
    let policy_name = fp.name_any();
    let GateFiles {
        vendor_keys,
        blocklists,
        secret_rules,
        llm_keys,
    } = gate_files(fp)?;
    let plan = Plan {
        cfg,
        policy_name: &policy_name,
        mode,
        vendor_keys: fp
            .spec
            .web
            .credentials_secret
            .clone()
            .and_then(|s| (!vendor_keys.is_empty()).then_some((s, vendor_keys))),
        blocklists,
        secret_rules,
        llm_keys,
        hermes_home: agent
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path.trim_end_matches('/') == cfg.hermes_home())
            .cloned(),
    };
    let mut ops = Ops::default();
    let annotations = [
        (INJECTED_ANNOTATION, INJECTOR_VERSION),
        (POLICY_ANNOTATION, policy_name.as_str()),
        (EGRESS_MODE_ANNOTATION, plan.mode.name()),
    ];
    ops.set_entries(
        "/metadata/annotations",
        pod.metadata.annotations.is_some(),
        &annotations,
    );
    ops.append("/spec/volumes", spec.volumes.is_some(), plan.volumes());
    agent_ops(&mut ops, agent_idx, agent, &plan)?;
    if plan.mode == EgressMode::Transparent {
        // First: an init container that ran before the capture would have unfiltered egress.
        ops.prepend(
            "/spec/initContainers",
            spec.init_containers.is_some(),
            plan.init_container(),
        );
    }
    ops.add("/spec/containers/-", plan.gate_container());
    Ok(ops.0)
}

fn agent_container<'a>(
    spec: &'a PodSpec,
    cfg: &InjectorConfig,
) -> Result<(usize, &'a Container), String> {
    match &cfg.agent_container {
        Some(name) => spec
            .containers
            .iter()
            .enumerate()
            .find(|(_, c)| &c.name == name)
            .ok_or_else(|| {
                format!("the agent container {name:?} (injector agentContainer) is not in the pod")
            }),
        None => spec
            .containers
            .first()
            .map(|c| (0, c))
            .ok_or_else(|| "the pod has no containers".to_string()),
    }
}

/// Refuse a pod that already uses a volume or init container name the injector adds.
fn check_names(spec: &PodSpec) -> Result<(), String> {
    for v in spec.volumes.iter().flatten() {
        if VOLUME_NAMES.contains(&v.name.as_str()) {
            return Err(format!(
                "the pod already has a volume named {}, which fleetgate injects; rename it",
                v.name
            ));
        }
    }
    if spec
        .init_containers
        .iter()
        .flatten()
        .any(|c| c.name == INIT_CONTAINER)
    {
        return Err(format!(
            "the pod already has an init container named {INIT_CONTAINER}, which fleetgate injects; rename it"
        ));
    }
    Ok(())
}

/// Mounts and env of the agent container. An env var the injector sets replaces the agent's
/// own (the gate must win); a mount path the agent already uses is refused.
fn agent_ops(ops: &mut Ops, idx: usize, agent: &Container, plan: &Plan<'_>) -> Result<(), String> {
    let base = format!("/spec/containers/{idx}");
    let mut mounts = Vec::new();
    for (path, mount) in plan.agent_mounts() {
        let clash = agent
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_path.trim_end_matches('/') == path);
        if clash {
            return Err(format!(
                "container {} already mounts a volume at {path}, where fleetgate mounts its own; move it",
                agent.name
            ));
        }
        mounts.push(mount);
    }
    ops.append(
        &format!("{base}/volumeMounts"),
        agent.volume_mounts.is_some(),
        mounts,
    );
    let existing = agent.env.as_deref().unwrap_or_default();
    let mut added = Vec::new();
    for (name, value) in plan.agent_env() {
        let var = json!({"name": name, "value": value});
        match existing.iter().position(|e| e.name == name) {
            Some(j) => ops.replace(format!("{base}/env/{j}"), var),
            None => added.push(var),
        }
    }
    ops.append(&format!("{base}/env"), agent.env.is_some(), added);
    Ok(())
}

/// Files the gate policy reads from mounted Secrets and ConfigMaps.
struct GateFiles {
    /// File names under the vendor-keys directory (keys of the credentials Secret).
    vendor_keys: Vec<String>,
    /// Shared blocklists: (ConfigMap, key).
    blocklists: Vec<(String, String)>,
    /// Secret-rule files: (ConfigMap, key).
    secret_rules: Vec<(String, String)>,
    /// LLM provider keys: (Secret, key).
    llm_keys: Vec<(String, String)>,
}

/// The vendor-key file names and shared blocklists the FleetPolicy's gate policy reads,
/// taken from the rendered policy itself so the mounts always match it.
fn gate_files(fp: &FleetPolicy) -> Result<GateFiles, String> {
    let rendered = crate::desired::policy::render(&fp.spec).map_err(|e| {
        format!(
            "FleetPolicy {} is invalid ({e}); fix it (kubectl describe fleetpolicy {}) before creating agent pods",
            fp.name_any(),
            fp.name_any()
        )
    })?;
    let policy: Value = serde_yaml::from_str(&rendered.yaml)
        .map_err(|e| format!("failed to read the rendered gate policy: {e}"))?;
    let under = |path: &str, dir: &str| -> Option<String> {
        path.strip_prefix(dir)?
            .strip_prefix('/')
            .map(str::to_string)
    };
    let mut keys: Vec<String> = policy
        .pointer("/web/vendors")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|vendors| vendors.values())
        .filter_map(|v| v.get("apiKeyFile").and_then(Value::as_str))
        .filter_map(|p| under(p, VENDOR_KEYS_DIR))
        .collect();
    keys.sort();
    keys.dedup();
    let config_map_files = |pointer: &str, dir: &str| -> Vec<(String, String)> {
        policy
            .pointer(pointer)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter_map(|p| under(p, dir))
            .filter_map(|rel| {
                let (cm, key) = rel.split_once('/')?;
                Some((cm.to_string(), key.to_string()))
            })
            .collect()
    };
    let lists = config_map_files("/websiteBlocklist/sharedFiles", BLOCKLISTS_DIR);
    let secret_rules = config_map_files("/secrets/rulesFiles", SECRET_RULES_DIR);
    let mut llm_keys: Vec<(String, String)> = policy
        .pointer("/llm/providers")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|providers| providers.values())
        .filter_map(|p| p.get("keyFile").and_then(Value::as_str))
        .filter_map(|p| under(p, LLM_KEYS_DIR))
        .filter_map(|rel| {
            let (secret, key) = rel.split_once('/')?;
            Some((secret.to_string(), key.to_string()))
        })
        .collect();
    llm_keys.sort();
    llm_keys.dedup();
    Ok(GateFiles {
        vendor_keys: keys,
        blocklists: lists,
        secret_rules,
        llm_keys,
    })
}

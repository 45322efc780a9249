//! Who may send as the gate: the security-context rules of an injected pod, in one table
//! ([`RULES`]) that the webhook applies here and that the chart's ValidatingAdmissionPolicy
//! (`charts/fleetgate/templates/admissionpolicy.yaml`) states in CEL with the same words, and
//! one table of pods ([`cases`]) that the webhook's tests, the client-side policy tests and the
//! real API server suite all run.
//!
//! Why: in transparent mode `init-iptables` exempts the gate's uid from capture
//! (`-m owner --uid-owner`), so any other container that runs as that uid, or can switch to it,
//! has unfiltered egress. A container can reach the gate's identity by
//! - running as it: its effective `runAsUser` (the container's, else the pod's) is the gate's
//!   uid, or left to the image, whose `USER` may be the gate's uid (or root);
//! - holding the gate's group: `runAsGroup` of the container or the pod, the pod's
//!   `supplementalGroups` or `fsGroup` (only the uid is exempt by default; the gid rules keep
//!   `init-iptables --proxy-gid` safe too);
//! - switching to it: a root container (uid 0) that keeps `SETUID` or `SETGID`, or that may
//!   gain privileges (`allowPrivilegeEscalation` not `false`: it could `chown` a program to the
//!   gate's uid, make it set-uid and run it);
//! - going under the capture: a root container that keeps `NET_RAW`, which the runtimes grant
//!   by default (a packet socket, `AF_PACKET`, writes frames straight to the interface, where
//!   no iptables rule sees them);
//! - running before it: an init container ahead of the gate's `fleetgate-init` (the capture is
//!   installed by the first init container, which the injector makes `fleetgate-init`);
//! - rewriting the capture itself: a privileged container, or one adding `NET_ADMIN`,
//!   `NET_RAW` or `ALL`;
//! - driving the gate's own process: `SYS_PTRACE` in a pod that shares its process namespace
//!   (it could trace the gate and make it connect, or read the keys in its memory), or the
//!   host's process namespace (`hostPID`: with SYS_PTRACE or SYS_ADMIN a container reaches the
//!   host's processes and their network namespace).
//!
//! The capture-rewriting and tracing rules hold for every pod labelled for injection (the
//! policy always refused the first); the identity rules only where the capture is installed:
//! a pod injected in transparent mode (the webhook) or carrying the gate's `fleetgate-init`
//! container (the policy). The gate container (`fleetgate-proxy`) and the gate's init
//! container (`fleetgate-init`) run the gate image and are exempt, as in the policy: by name
//! and image repository.

use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, SecurityContext};
use serde_json::{Value, json};

use super::config::DEFAULT_PROXY_UID;
use super::{INIT_CONTAINER, PROXY_CONTAINER};

#[cfg(test)]
mod tests;

/// Where a rule applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every pod labelled for injection.
    Always,
    /// Pods where the capture is installed (transparent mode).
    Captured,
}

/// One forbidden security context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `capabilities.add` holds NET_ADMIN, NET_RAW or ALL.
    NetCaps,
    /// `privileged: true`.
    Privileged,
    /// `capabilities.add` holds SYS_PTRACE and the pod shares its process namespace.
    Ptrace,
    /// `hostPID: true`.
    HostPid,
    /// The effective `runAsUser` is the gate's uid.
    GateUid,
    /// Neither the container nor the pod sets `runAsUser`: the image decides.
    UnsetUid,
    /// `runAsGroup` (container or pod), `supplementalGroups` or `fsGroup` is the gate's gid.
    GateGid,
    /// Runs as uid 0 and keeps SETUID, SETGID or NET_RAW.
    RootKeepsSetuid,
    /// Runs as uid 0 and `allowPrivilegeEscalation` is not `false`.
    RootEscalates,
    /// The first init container is not the gate's `fleetgate-init`.
    InitNotFirst,
}

/// A row of the table: the rule, where it applies, and what the refusal says after the fields.
#[derive(Clone, Copy, Debug)]
pub struct RuleRow {
    /// The rule.
    pub rule: Rule,
    /// Where it applies.
    pub scope: Scope,
    /// The text after the offending fields; `{uid}` and `{gid}` are the gate's.
    pub says: &'static str,
}

/// The rules, in the order the policy checks them (the API server reports the first that
/// fails; the webhook reports them all).
pub static RULES: [RuleRow; 10] = [
    RuleRow {
        rule: Rule::NetCaps,
        scope: Scope::Always,
        says: "must not add NET_ADMIN, NET_RAW or ALL: they let a container rewrite the capture rules or send raw packets (only the gate's fleetgate-init container may)",
    },
    RuleRow {
        rule: Rule::Privileged,
        scope: Scope::Always,
        says: "must not be true: a privileged container can rewrite the capture rules and take any uid",
    },
    RuleRow {
        rule: Rule::Ptrace,
        scope: Scope::Always,
        says: "must not add SYS_PTRACE while spec.shareProcessNamespace is true: it could trace the gate's process, connect as it and read its keys",
    },
    RuleRow {
        rule: Rule::HostPid,
        scope: Scope::Always,
        says: "must not be true: with the host's processes in view, SYS_PTRACE or SYS_ADMIN reaches the gate's process and the host's network namespace",
    },
    RuleRow {
        rule: Rule::GateUid,
        scope: Scope::Captured,
        says: "is {uid}, the gate's uid: capture exempts the gate's uid, so no other container may run as it",
    },
    RuleRow {
        rule: Rule::UnsetUid,
        scope: Scope::Captured,
        says: "is unset: the image's user would run, which may be root or the gate's uid {uid}; set runAsUser on the container or the pod",
    },
    RuleRow {
        rule: Rule::GateGid,
        scope: Scope::Captured,
        says: "holds {gid}, the gate's gid: no other container of a captured pod may hold the gate's group",
    },
    RuleRow {
        rule: Rule::RootKeepsSetuid,
        scope: Scope::Captured,
        says: "must drop SETUID, SETGID and NET_RAW in a container that runs as root (uid 0): with SETUID or SETGID it could switch to the gate's uid {uid}, which capture exempts, and with NET_RAW send packets under the capture",
    },
    RuleRow {
        rule: Rule::RootEscalates,
        scope: Scope::Captured,
        says: "must be false in a container that runs as root (uid 0): otherwise it could run a program set-uid to the gate's uid {uid}, which capture exempts",
    },
    RuleRow {
        rule: Rule::InitNotFirst,
        scope: Scope::Captured,
        says: "must be the gate's fleetgate-init: the first init container installs the capture, and one that runs before it has unfiltered egress",
    },
];

/// Who the gate is: its uid and gid, and its image (the repository names it).
#[derive(Clone, Copy, Debug)]
pub struct Gate<'a> {
    /// The gate's uid (`proxyUid`).
    pub uid: i64,
    /// The gate's gid (the injector sets `runAsGroup` to `proxyUid`).
    pub gid: i64,
    /// The gate image as the injector writes it (`repo:tag` or `repo@digest`).
    pub image: &'a str,
}

/// One rule a pod breaks, with the fields that break it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// The offending fields, e.g. `spec.containers[1].securityContext.runAsUser`.
    pub fields: Vec<String>,
}

// === impl Rule ===

impl Rule {
    /// The rule's row in [`RULES`] (which lists the rules in declaration order).
    pub fn row(self) -> &'static RuleRow {
        &RULES[self as usize]
    }

    /// What the refusal says after the fields, for `gate`.
    pub fn says(self, gate: &Gate<'_>) -> String {
        self.row()
            .says
            .replace("{uid}", &gate.uid.to_string())
            .replace("{gid}", &gate.gid.to_string())
    }
}

// === impl Gate ===

impl Gate<'_> {
    /// The repository of the gate image: what the policy matches (`repo:` or `repo@`).
    pub fn repository(&self) -> &str {
        let image = self.image.split('@').next().unwrap_or(self.image);
        match image.rfind(':') {
            Some(colon) if !image[colon..].contains('/') => &image[..colon],
            _ => image,
        }
    }

    /// `image` is the gate image (any tag or digest of its repository).
    fn runs(&self, image: Option<&str>) -> bool {
        let repo = self.repository();
        image.is_some_and(|i| {
            i.strip_prefix(repo)
                .is_some_and(|rest| rest.starts_with(':') || rest.starts_with('@'))
        })
    }
}

/// A container of the pod, where it is and what it says about itself.
struct Member<'a> {
    /// `spec.containers[1]`.
    at: String,
    sc: Option<&'a SecurityContext>,
    /// The gate's own container (`fleetgate-proxy` or `fleetgate-init`, gate image).
    is_gate: bool,
    /// The gate's init container (`fleetgate-init`, gate image).
    is_gate_init: bool,
}

fn members<'a>(spec: &'a PodSpec, gate: &Gate<'_>) -> Vec<Member<'a>> {
    let mut out = Vec::new();
    for (i, c) in spec.containers.iter().enumerate() {
        let is_gate = c.name == PROXY_CONTAINER && gate.runs(c.image.as_deref());
        out.push(Member {
            at: format!("spec.containers[{i}]"),
            sc: c.security_context.as_ref(),
            is_gate,
            is_gate_init: false,
        });
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let is_gate_init = c.name == INIT_CONTAINER && gate.runs(c.image.as_deref());
        out.push(Member {
            at: format!("spec.initContainers[{i}]"),
            sc: c.security_context.as_ref(),
            is_gate: is_gate_init,
            is_gate_init,
        });
    }
    for (i, c) in spec.ephemeral_containers.iter().flatten().enumerate() {
        out.push(Member {
            at: format!("spec.ephemeralContainers[{i}]"),
            sc: c.security_context.as_ref(),
            is_gate: false,
            is_gate_init: false,
        });
    }
    out
}

/// The capture is installed: the pod carries the gate's init container.
pub fn captured(spec: &PodSpec, gate: &Gate<'_>) -> bool {
    members(spec, gate).iter().any(|m| m.is_gate_init)
}

/// `cap` (e.g. `SETUID`) in a Kubernetes capability list, in any spelling the runtimes accept
/// (`setuid`, `CAP_SETUID`).
fn names(list: Option<&Vec<String>>, caps: &[&str]) -> bool {
    list.into_iter().flatten().any(|c| {
        let upper = c.to_ascii_uppercase();
        let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
        caps.contains(&bare)
    })
}

/// The container keeps `cap`: not dropped (by name or ALL), or added back.
fn keeps(sc: Option<&SecurityContext>, cap: &str) -> bool {
    let caps = sc.and_then(|s| s.capabilities.as_ref());
    let dropped = names(caps.and_then(|c| c.drop.as_ref()), &[cap, "ALL"]);
    let added = names(caps.and_then(|c| c.add.as_ref()), &[cap, "ALL"]);
    !dropped || added
}

/// The rules `spec` breaks. `captured`: the capture is (or will be) installed in the pod.
pub fn check(spec: &PodSpec, gate: &Gate<'_>, captured: bool) -> Vec<Violation> {
    let pod = spec.security_context.as_ref();
    let pod_uid = pod.and_then(|p| p.run_as_user);
    let shared_pids = spec.share_process_namespace == Some(true);
    let all = members(spec, gate);
    let mut found = Vec::new();
    for row in &RULES {
        if row.scope == Scope::Captured && !captured {
            continue;
        }
        let mut fields = Vec::new();
        for m in &all {
            let exempt = match row.scope {
                Scope::Always => m.is_gate_init,
                Scope::Captured => m.is_gate,
            };
            if exempt {
                continue;
            }
            if let Some(field) = member_field(row.rule, m, pod_uid, shared_pids, gate) {
                fields.push(field);
            }
        }
        if row.rule == Rule::GateGid {
            fields.extend(pod_group_fields(pod, gate));
        }
        if row.rule == Rule::HostPid && spec.host_pid == Some(true) {
            fields.push("spec.hostPID".to_string());
        }
        if row.rule == Rule::InitNotFirst
            && self::captured(spec, gate)
            && spec
                .init_containers
                .as_ref()
                .and_then(|cs| cs.first())
                .is_some_and(|c| !(c.name == INIT_CONTAINER && gate.runs(c.image.as_deref())))
        {
            fields.push("spec.initContainers[0]".to_string());
        }
        if !fields.is_empty() {
            found.push(Violation {
                rule: row.rule,
                fields,
            });
        }
    }
    found
}

/// The field of `m` that breaks `rule`, if any.
fn member_field(
    rule: Rule,
    m: &Member<'_>,
    pod_uid: Option<i64>,
    shared_pids: bool,
    gate: &Gate<'_>,
) -> Option<String> {
    let sc = m.sc;
    let own_uid = sc.and_then(|s| s.run_as_user);
    let uid = own_uid.or(pod_uid);
    let uid_field = || match own_uid {
        Some(_) => format!("{}.securityContext.runAsUser", m.at),
        None => format!("spec.securityContext.runAsUser (inherited by {})", m.at),
    };
    let caps = sc.and_then(|s| s.capabilities.as_ref());
    match rule {
        Rule::NetCaps => names(
            caps.and_then(|c| c.add.as_ref()),
            &["NET_ADMIN", "NET_RAW", "ALL"],
        )
        .then(|| format!("{}.securityContext.capabilities.add", m.at)),
        Rule::Privileged => (sc.and_then(|s| s.privileged) == Some(true))
            .then(|| format!("{}.securityContext.privileged", m.at)),
        Rule::Ptrace => (shared_pids && names(caps.and_then(|c| c.add.as_ref()), &["SYS_PTRACE"]))
            .then(|| format!("{}.securityContext.capabilities.add", m.at)),
        Rule::HostPid | Rule::InitNotFirst => None,
        Rule::GateUid => (uid == Some(gate.uid)).then(uid_field),
        Rule::UnsetUid => uid
            .is_none()
            .then(|| format!("{}.securityContext.runAsUser", m.at)),
        Rule::GateGid => (sc.and_then(|s| s.run_as_group) == Some(gate.gid))
            .then(|| format!("{}.securityContext.runAsGroup", m.at)),
        Rule::RootKeepsSetuid => (uid == Some(0)
            && ["SETUID", "SETGID", "NET_RAW"]
                .iter()
                .any(|cap| keeps(sc, cap)))
        .then(|| format!("{}.securityContext.capabilities.drop", m.at)),
        Rule::RootEscalates => (uid == Some(0)
            && sc.and_then(|s| s.allow_privilege_escalation) != Some(false))
        .then(|| format!("{}.securityContext.allowPrivilegeEscalation", m.at)),
    }
}

/// The pod-level group fields that hold the gate's gid.
fn pod_group_fields(pod: Option<&PodSecurityContext>, gate: &Gate<'_>) -> Vec<String> {
    let Some(pod) = pod else { return Vec::new() };
    let mut out = Vec::new();
    if pod.run_as_group == Some(gate.gid) {
        out.push("spec.securityContext.runAsGroup".to_string());
    }
    if pod
        .supplemental_groups
        .iter()
        .flatten()
        .any(|g| *g == gate.gid)
    {
        out.push("spec.securityContext.supplementalGroups".to_string());
    }
    if pod.fs_group == Some(gate.gid) {
        out.push("spec.securityContext.fsGroup".to_string());
    }
    out
}

/// The refusal text for `violations`: per rule, the fields then what the rule says.
pub fn message(violations: &[Violation], gate: &Gate<'_>) -> String {
    violations
        .iter()
        .map(|v| format!("{} {}", v.fields.join(", "), v.rule.says(gate)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// One pod of the shared table: what it is, the rule it breaks (`None`: admitted) and the
/// field the refusal must name.
#[derive(Clone, Debug)]
pub struct Case {
    /// What the pod does.
    pub name: &'static str,
    /// The rule it breaks, or `None` when it must be admitted.
    pub rule: Option<Rule>,
    /// The field the refusal names (empty when admitted).
    pub field: &'static str,
    /// The pod, as the API server would see it after injection (JSON).
    pub pod: Value,
    /// The case adds an ephemeral container (`kubectl debug`): the policy sees it on an
    /// UPDATE of `pods/ephemeralcontainers`; the webhook never does.
    pub ephemeral: bool,
}

// === impl Case ===

impl Case {
    /// The field as the webhook names it: the webhook sees the pod before injection, where
    /// the gate's `fleetgate-init` (which the injector puts first) is not there yet, so a
    /// captured pod's other init containers sit one index lower.
    pub fn field_before_injection(&self, gate: &Gate<'_>) -> String {
        let carries_init = serde_json::from_value::<PodSpec>(self.pod["spec"].clone())
            .is_ok_and(|spec| captured(&spec, gate));
        let shifted = self
            .field
            .strip_prefix("spec.initContainers[")
            .and_then(|rest| rest.split_once(']'))
            .and_then(|(i, rest)| Some((i.parse::<usize>().ok()?.checked_sub(1)?, rest)));
        match shifted {
            Some((i, rest)) if carries_init => format!("spec.initContainers[{i}]{rest}"),
            _ => self.field.to_string(),
        }
    }
}

/// An injected pod in transparent mode whose agent runs as uid 1000 with every capability
/// dropped and no privilege escalation: the gate (`gate_image`, uid and gid 15000, the
/// injector's defaults) last among the containers and `fleetgate-init` first among the init
/// containers, where the injector puts them. Removing them (the pod before injection) leaves
/// every container's index as it is and moves other init containers one down
/// ([`Case::field_before_injection`]).
pub fn base_pod(gate_image: &str) -> Value {
    let uid = DEFAULT_PROXY_UID;
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "agent",
            "labels": {"app": "hermes", "fleetgate.dev/inject": "enabled"},
        },
        "spec": {
            "containers": [
                {"name": "hermes", "image": "example.com/hermes:1", "securityContext": {
                    "runAsUser": 1000, "runAsNonRoot": true, "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}}},
                {"name": PROXY_CONTAINER, "image": gate_image, "securityContext": {
                    "runAsUser": uid, "runAsGroup": uid, "runAsNonRoot": true,
                    "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}},
            ],
            "initContainers": [
                {"name": INIT_CONTAINER, "image": gate_image, "securityContext": {
                    "runAsUser": 0, "runAsNonRoot": false, "allowPrivilegeEscalation": false,
                    "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]}}},
            ],
        },
    })
}

/// The pod before injection: without the gate's containers (and so without capture).
pub fn without_gate(pod: &Value) -> Value {
    let mut p = pod.clone();
    for (list, name) in [
        ("containers", PROXY_CONTAINER),
        ("initContainers", INIT_CONTAINER),
    ] {
        if let Some(cs) = p["spec"][list].as_array_mut() {
            cs.retain(|c| c["name"] != name);
        }
    }
    let no_init = p["spec"]["initContainers"]
        .as_array()
        .is_some_and(Vec::is_empty);
    if let Some(spec) = p["spec"].as_object_mut().filter(|_| no_init) {
        spec.remove("initContainers");
    }
    p
}

/// The table of pods: every forbidden security context with the field its refusal names, and
/// the pods that must still be admitted. `gate_image` is the gate image the pod carries.
pub fn cases(gate_image: &str) -> Vec<Case> {
    let uid = DEFAULT_PROXY_UID;
    // A second container, at index 1, with `sc`.
    let tool =
        |sc: Value| json!({"name": "tool", "image": "example.com/tool:1", "securityContext": sc});
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut p = base_pod(gate_image);
        edit(&mut p);
        p
    };
    let insert = |p: &mut Value, list: &str, c: Value| {
        if let Some(cs) = p["spec"][list].as_array_mut() {
            // After the agent, and after `fleetgate-init`, which the injector puts first.
            let at = 1;
            cs.insert(at, c);
        }
    };
    let proxy_mode = |edit: &dyn Fn(&mut Value)| {
        let mut p = without_gate(&base_pod(gate_image));
        if let Some(cs) = p["spec"]["containers"].as_array_mut() {
            cs.push(
                json!({"name": PROXY_CONTAINER, "image": gate_image, "securityContext": {
                "runAsUser": uid, "runAsGroup": uid, "runAsNonRoot": true,
                "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}),
            );
        }
        edit(&mut p);
        p
    };
    let refused = |name, rule, field, pod| Case {
        name,
        rule: Some(rule),
        field,
        pod,
        ephemeral: false,
    };
    let admitted = |name, pod| Case {
        name,
        rule: None,
        field: "",
        pod,
        ephemeral: false,
    };
    let root = |extra: Value| {
        let mut sc = json!({"runAsUser": 0});
        if let (Some(sc), Some(extra)) = (sc.as_object_mut(), extra.as_object()) {
            sc.extend(extra.clone());
        }
        sc
    };
    let mut out = vec![
        refused(
            "a container running as the gate's uid",
            Rule::GateUid,
            "spec.containers[1].securityContext.runAsUser",
            with(&|p| insert(p, "containers", tool(json!({"runAsUser": uid})))),
        ),
        refused(
            "a container inheriting the gate's uid from the pod",
            Rule::GateUid,
            "spec.securityContext.runAsUser (inherited by spec.containers[1])",
            with(&|p| {
                p["spec"]["securityContext"] = json!({"runAsUser": uid});
                insert(
                    p,
                    "containers",
                    tool(json!({"allowPrivilegeEscalation": false})),
                );
            }),
        ),
        refused(
            "an init container running as the gate's uid",
            Rule::GateUid,
            "spec.initContainers[1].securityContext.runAsUser",
            with(&|p| {
                insert(
                    p,
                    "initContainers",
                    json!({"name": "setup", "image": "example.com/tool:1",
                           "securityContext": {"runAsUser": uid}}),
                )
            }),
        ),
        refused(
            "a container whose uid the image decides",
            Rule::UnsetUid,
            "spec.containers[1].securityContext.runAsUser",
            with(&|p| insert(p, "containers", tool(json!({"runAsNonRoot": true})))),
        ),
        refused(
            "a container in the gate's group",
            Rule::GateGid,
            "spec.containers[1].securityContext.runAsGroup",
            with(&|p| {
                insert(
                    p,
                    "containers",
                    tool(json!({"runAsUser": 1001, "runAsGroup": uid})),
                )
            }),
        ),
        refused(
            "the pod's runAsGroup is the gate's gid",
            Rule::GateGid,
            "spec.securityContext.runAsGroup",
            with(&|p| p["spec"]["securityContext"] = json!({"runAsGroup": uid})),
        ),
        refused(
            "the pod's supplementalGroups hold the gate's gid",
            Rule::GateGid,
            "spec.securityContext.supplementalGroups",
            with(&|p| p["spec"]["securityContext"] = json!({"supplementalGroups": [5000, uid]})),
        ),
        refused(
            "the pod's fsGroup is the gate's gid",
            Rule::GateGid,
            "spec.securityContext.fsGroup",
            with(&|p| p["spec"]["securityContext"] = json!({"fsGroup": uid})),
        ),
        refused(
            "a root container keeping SETUID and SETGID",
            Rule::RootKeepsSetuid,
            "spec.containers[1].securityContext.capabilities.drop",
            with(&|p| {
                insert(
                    p,
                    "containers",
                    tool(root(json!({"allowPrivilegeEscalation": false}))),
                )
            }),
        ),
        refused(
            "a root container dropping SETUID only",
            Rule::RootKeepsSetuid,
            "spec.containers[1].securityContext.capabilities.drop",
            with(&|p| {
                insert(
                    p,
                    "containers",
                    tool(root(json!({"allowPrivilegeEscalation": false,
                                     "capabilities": {"drop": ["CAP_SETUID"]}}))),
                )
            }),
        ),
        refused(
            "a root container dropping ALL but adding SETGID back",
            Rule::RootKeepsSetuid,
            "spec.containers[1].securityContext.capabilities.drop",
            with(&|p| {
                insert(
                    p,
                    "containers",
                    tool(root(json!({"allowPrivilegeEscalation": false,
                                     "capabilities": {"drop": ["ALL"], "add": ["setgid"]}}))),
                )
            }),
        ),
        refused(
            "a container running as root through the pod, keeping SETGID",
            Rule::RootKeepsSetuid,
            "spec.containers[1].securityContext.capabilities.drop",
            with(&|p| {
                p["spec"]["securityContext"] = json!({"runAsUser": 0});
                insert(
                    p,
                    "containers",
                    tool(json!({"allowPrivilegeEscalation": false,
                                "capabilities": {"drop": ["SETUID"]}})),
                );
            }),
        ),
        refused(
            "a root init container keeping SETUID and SETGID",
            Rule::RootKeepsSetuid,
            "spec.initContainers[1].securityContext.capabilities.drop",
            with(&|p| {
                insert(
                    p,
                    "initContainers",
                    json!({"name": "setup", "image": "example.com/tool:1",
                           "securityContext": root(json!({"allowPrivilegeEscalation": false}))}),
                )
            }),
        ),
        refused(
            "a root container that may escalate privileges",
            Rule::RootEscalates,
            "spec.containers[1].securityContext.allowPrivilegeEscalation",
            with(&|p| {
                insert(
                    p,
                    "containers",
                    tool(root(
                        json!({"capabilities": {"drop": ["SETUID", "SETGID", "NET_RAW"]}}),
                    )),
                )
            }),
        ),
        refused(
            "a privileged container",
            Rule::Privileged,
            "spec.containers[1].securityContext.privileged",
            with(&|p| {
                insert(
                    p,
                    "containers",
                    tool(json!({"runAsUser": 1001, "privileged": true})),
                )
            }),
        ),
        refused(
            "a container adding NET_ADMIN",
            Rule::NetCaps,
            "spec.containers[1].securityContext.capabilities.add",
            with(&|p| {
                insert(
                    p,
                    "containers",
                    tool(json!({"runAsUser": 1001, "capabilities": {"add": ["NET_ADMIN"]}})),
                )
            }),
        ),
        refused(
            "a container adding cap_net_raw",
            Rule::NetCaps,
            "spec.containers[1].securityContext.capabilities.add",
            with(&|p| {
                insert(
                    p,
                    "containers",
                    tool(json!({"runAsUser": 1001, "capabilities": {"add": ["cap_net_raw"]}})),
                )
            }),
        ),
        refused(
            "an init container adding ALL",
            Rule::NetCaps,
            "spec.initContainers[1].securityContext.capabilities.add",
            with(&|p| {
                insert(
                    p,
                    "initContainers",
                    json!({"name": "setup", "image": "example.com/tool:1", "securityContext":
                           {"runAsUser": 1001, "capabilities": {"add": ["ALL"]}}}),
                )
            }),
        ),
        refused(
            "a privileged container in proxy mode (no capture)",
            Rule::Privileged,
            "spec.containers[0].securityContext.privileged",
            proxy_mode(&|p| {
                p["spec"]["containers"][0]["securityContext"] = json!({"privileged": true})
            }),
        ),
        refused(
            "a container adding SYS_PTRACE in a pod sharing its process namespace",
            Rule::Ptrace,
            "spec.containers[1].securityContext.capabilities.add",
            with(&|p| {
                p["spec"]["shareProcessNamespace"] = json!(true);
                insert(
                    p,
                    "containers",
                    tool(json!({"runAsUser": 1001, "capabilities": {"add": ["SYS_PTRACE"]}})),
                );
            }),
        ),
        refused(
            "a pod sharing the host's process namespace",
            Rule::HostPid,
            "spec.hostPID",
            with(&|p| p["spec"]["hostPID"] = json!(true)),
        ),
        admitted(
            "an agent as uid 1000 with every capability dropped",
            base_pod(gate_image),
        ),
        admitted(
            "an agent as uid 1000 that drops ALL and leaves escalation unset",
            with(&|p| {
                p["spec"]["containers"][0]["securityContext"] =
                    json!({"runAsUser": 1000, "capabilities": {"drop": ["ALL"]}})
            }),
        ),
        admitted(
            "an agent as uid 1000 with the runtime's capabilities",
            with(&|p| p["spec"]["containers"][0]["securityContext"] = json!({"runAsUser": 1000})),
        ),
        admitted(
            "a root container without SETUID, SETGID and NET_RAW that cannot escalate",
            with(&|p| {
                insert(
                    p,
                    "containers",
                    tool(root(json!({"allowPrivilegeEscalation": false,
                                     "capabilities": {"drop": ["setuid", "CAP_SETGID", "net_raw"]}}))),
                )
            }),
        ),
        refused(
            "a root container dropping SETUID and SETGID but keeping the runtime's NET_RAW",
            Rule::RootKeepsSetuid,
            "spec.containers[1].securityContext.capabilities.drop",
            with(&|p| {
                insert(
                    p,
                    "containers",
                    tool(root(json!({"allowPrivilegeEscalation": false,
                                     "capabilities": {"drop": ["SETUID", "SETGID"]}}))),
                )
            }),
        ),
        refused(
            "an init container that runs before fleetgate-init",
            Rule::InitNotFirst,
            "spec.initContainers[0]",
            with(&|p| {
                if let Some(cs) = p["spec"]["initContainers"].as_array_mut() {
                    cs.insert(
                        0,
                        json!({"name": "setup", "image": "example.com/tool:1", "securityContext":
                               {"runAsUser": 1001, "allowPrivilegeEscalation": false,
                                "capabilities": {"drop": ["ALL"]}}}),
                    );
                }
            }),
        ),
        admitted(
            "an init container after fleetgate-init",
            with(&|p| {
                insert(
                    p,
                    "initContainers",
                    json!({"name": "setup", "image": "example.com/tool:1", "securityContext":
                           {"runAsUser": 1001, "allowPrivilegeEscalation": false,
                            "capabilities": {"drop": ["ALL"]}}}),
                )
            }),
        ),
        admitted(
            "the pod's uid is the gate's but every container sets its own",
            with(&|p| p["spec"]["securityContext"] = json!({"runAsUser": uid})),
        ),
        admitted(
            "SYS_PTRACE in a pod that does not share its process namespace",
            with(&|p| {
                insert(
                    p,
                    "containers",
                    tool(json!({"runAsUser": 1001, "capabilities": {"add": ["SYS_PTRACE"]}})),
                )
            }),
        ),
        admitted(
            "groups other than the gate's",
            with(&|p| {
                p["spec"]["securityContext"] = json!({"runAsUser": 1000, "runAsGroup": 1000, "supplementalGroups": [2000],
                           "fsGroup": 3000})
            }),
        ),
        admitted(
            "a proxy-mode agent (no capture) whose image decides its uid",
            proxy_mode(&|p| {
                if let Some(c) = p["spec"]["containers"][0].as_object_mut() {
                    c.remove("securityContext");
                }
            }),
        ),
        admitted(
            "a proxy-mode root agent (no capture) keeping SETUID",
            proxy_mode(&|p| {
                p["spec"]["containers"][0]["securityContext"] = json!({"runAsUser": 0})
            }),
        ),
    ];
    let debug = |sc: Value| {
        with(&|p| {
            p["spec"]["ephemeralContainers"] = json!([{"name": "debugger",
                "image": "example.com/tool:1", "securityContext": sc.clone()}]);
        })
    };
    out.extend([
        Case {
            ephemeral: true,
            ..refused(
                "an ephemeral debug container whose uid the image decides",
                Rule::UnsetUid,
                "spec.ephemeralContainers[0].securityContext.runAsUser",
                debug(json!({})),
            )
        },
        Case {
            ephemeral: true,
            ..refused(
                "an ephemeral debug container running as the gate's uid",
                Rule::GateUid,
                "spec.ephemeralContainers[0].securityContext.runAsUser",
                debug(json!({"runAsUser": uid})),
            )
        },
        Case {
            ephemeral: true,
            ..admitted(
                "an ephemeral debug container as uid 1000 that cannot escalate",
                debug(json!({"runAsUser": 1000, "allowPrivilegeEscalation": false})),
            )
        },
    ]);
    out
}

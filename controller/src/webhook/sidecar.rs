//! What the injector adds to a pod, as JSON: the gate container, the transparent-mode init
//! container, the volumes, and the agent's mounts and env.
//!
//! Paths and listener addresses are the ones the rendered gate policy names
//! ([`crate::desired::policy`]), so the policy and the pod layout cannot drift apart.

use k8s_openapi::api::core::v1::VolumeMount;
use serde_json::{Value, json};

use super::InjectorConfig;
use super::{INIT_CONTAINER, PROXY_CONTAINER};
use crate::crd::EgressMode;
use crate::desired::llm::LLM_KEYS_DIR;
use crate::desired::policy::{
    BLOCKLISTS_DIR, HERMES_HOME, MANAGED_DIR, REPORT_TOKEN_FILE, SECRET_RULES_DIR, STORE_ROOT,
    VENDOR_KEYS_DIR,
};
use crate::desired::{CONFIG_KEY, POLICY_KEY, config_map_name};

/// Gate API port (Firecrawl / Tavily / SearXNG fronts).
pub const API_PORT: u16 = 15180;
/// Gate forward-proxy port (`HTTP(S)_PROXY`).
pub const FORWARD_PORT: u16 = 15181;
/// Gate transparent-capture port (iptables REDIRECT target).
pub const TRANSPARENT_PORT: u16 = 15182;
/// Gate admin port (probes, metrics, status, report).
pub const ADMIN_PORT: u16 = 15190;

/// The gate's configuration directory (a projected volume).
pub const GATE_ETC: &str = "/etc/fleetgate";
/// The gate's policy file.
pub const POLICY_PATH: &str = "/etc/fleetgate/policy.yaml";

/// Projected volume at [`GATE_ETC`] in the gate.
pub const VOLUME_ETC: &str = "fleetgate-etc";
/// The managed `config.yaml`, at `/etc/hermes` in the agent and the gate.
pub const VOLUME_MANAGED: &str = "fleetgate-managed";
/// The shared cache and store.
pub const VOLUME_CACHE: &str = "fleetgate-cache";
/// Scratch `/run` of the init container (the iptables lock file; its root is read-only).
pub const VOLUME_XTABLES: &str = "fleetgate-xtables-lock";
/// Every volume name the injector may add.
pub const VOLUME_NAMES: [&str; 4] = [VOLUME_ETC, VOLUME_MANAGED, VOLUME_CACHE, VOLUME_XTABLES];

/// Everything the builders need to know about one injection.
#[derive(Debug)]
pub struct Plan<'a> {
    /// The injector configuration.
    pub cfg: &'a InjectorConfig,
    /// Name of the FleetPolicy the pod follows.
    pub policy_name: &'a str,
    /// How agent egress is captured.
    pub mode: EgressMode,
    /// `spec.web.credentialsSecret` with the keys the gate policy reads from it.
    pub vendor_keys: Option<(String, Vec<String>)>,
    /// Shared blocklists the gate policy reads: (ConfigMap, key).
    pub blocklists: Vec<(String, String)>,
    /// Secret-rule files the gate policy reads: (ConfigMap, key).
    pub secret_rules: Vec<(String, String)>,
    /// LLM provider keys the gate policy reads: (Secret, key), sorted.
    pub llm_keys: Vec<(String, String)>,
    /// The agent's mount at `hermesHomePath`, shared read-only with the gate.
    pub hermes_home: Option<VolumeMount>,
}

impl Plan<'_> {
    /// Directory where the agent sees the shared cache: always the rendered policy's
    /// `store.agentVisibleRoot`, whatever `hermesHomePath` is, because the store paths the gate
    /// hands the agent are built from that root.
    pub fn agent_cache_dir(&self) -> String {
        crate::desired::policy::STORE_AGENT_ROOT.to_string()
    }

    /// Volumes the pod gains.
    pub fn volumes(&self) -> Vec<Value> {
        let managed = config_map_name(self.policy_name);
        let cache = match &self.cfg.cache_claim_name {
            Some(claim) => {
                json!({"name": VOLUME_CACHE, "persistentVolumeClaim": {"claimName": claim}})
            }
            None => json!({"name": VOLUME_CACHE, "emptyDir": {}}),
        };
        let mut volumes = vec![
            json!({"name": VOLUME_ETC, "projected": {"sources": self.etc_sources()}}),
            json!({"name": VOLUME_MANAGED, "configMap": {
                "name": managed, "items": [{"key": CONFIG_KEY, "path": CONFIG_KEY}]}}),
            cache,
        ];
        if self.mode == EgressMode::Transparent {
            volumes.push(json!({"name": VOLUME_XTABLES, "emptyDir": {}}));
        }
        volumes
    }

    // One projected volume, because a mount nested inside a ConfigMap or Secret mount needs a
    // mount point in a read-only directory, which container runtimes cannot create.
    fn etc_sources(&self) -> Vec<Value> {
        let rel = |path: &str| {
            path.trim_start_matches(GATE_ETC)
                .trim_start_matches('/')
                .to_string()
        };
        let mut sources = vec![json!({"configMap": {
            "name": config_map_name(self.policy_name),
            "items": [{"key": POLICY_KEY, "path": POLICY_KEY}]}})];
        if let Some(secret) = &self.cfg.report_token_secret {
            sources.push(json!({"secret": {"name": secret, "optional": true,
                "items": [{"key": "token", "path": rel(REPORT_TOKEN_FILE)}]}}));
        }
        if let Some((secret, keys)) = &self.vendor_keys {
            let items: Vec<Value> = keys
                .iter()
                .map(|k| json!({"key": k, "path": format!("{}/{k}", rel(VENDOR_KEYS_DIR))}))
                .collect();
            sources.push(json!({"secret": {"name": secret, "optional": true, "items": items}}));
        }
        for (cm, key) in &self.blocklists {
            sources.push(json!({"configMap": {"name": cm, "optional": true,
                "items": [{"key": key, "path": format!("{}/{cm}/{key}", rel(BLOCKLISTS_DIR))}]}}));
        }
        // Not optional: a pod whose secret rules are missing waits for them rather than start
        // a gate without them.
        for (cm, key) in &self.secret_rules {
            sources.push(json!({"configMap": {"name": cm,
                "items": [{"key": key, "path": format!("{}/{cm}/{key}", rel(SECRET_RULES_DIR))}]}}));
        }
        // One projected source per Secret: a Secret listed twice in one projection would be
        // two sources writing the same directory.
        let mut secrets: Vec<(&str, Vec<Value>)> = Vec::new();
        for (secret, key) in &self.llm_keys {
            let item = json!({"key": key, "path": format!("{}/{secret}/{key}", rel(LLM_KEYS_DIR))});
            match secrets.last_mut() {
                Some((name, items)) if *name == secret.as_str() => items.push(item),
                _ => secrets.push((secret.as_str(), vec![item])),
            }
        }
        for (secret, items) in secrets {
            sources.push(json!({"secret": {"name": secret, "optional": true, "items": items}}));
        }
        sources
    }

    /// The gate sidecar.
    pub fn gate_container(&self) -> Value {
        let cfg = self.cfg;
        let mut mounts = vec![
            json!({"name": VOLUME_ETC, "mountPath": GATE_ETC, "readOnly": true}),
            json!({"name": VOLUME_MANAGED, "mountPath": MANAGED_DIR, "readOnly": true}),
            json!({"name": VOLUME_CACHE, "mountPath": STORE_ROOT}),
        ];
        if let Some(home) = &self.hermes_home {
            let mut m = json!({"name": home.name, "mountPath": HERMES_HOME, "readOnly": true});
            if let Some(sub) = &home.sub_path {
                m["subPath"] = json!(sub);
            }
            mounts.push(m);
        }
        let probe = |path: &str, period: u16| {
            json!({"httpGet": {"path": path, "port": ADMIN_PORT}, "periodSeconds": period,
                   "timeoutSeconds": 2, "failureThreshold": 3})
        };
        let mut c = json!({
            "name": PROXY_CONTAINER,
            "image": cfg.proxy_image,
            "imagePullPolicy": cfg.proxy_image_pull_policy,
            "args": ["serve", "--policy", POLICY_PATH],
            "ports": [
                {"name": "fg-api", "containerPort": API_PORT, "protocol": "TCP"},
                {"name": "fg-forward", "containerPort": FORWARD_PORT, "protocol": "TCP"},
                {"name": "fg-transparent", "containerPort": TRANSPARENT_PORT, "protocol": "TCP"},
                {"name": "fg-admin", "containerPort": ADMIN_PORT, "protocol": "TCP"},
            ],
            "readinessProbe": probe("/ready", 5),
            "livenessProbe": probe("/live", 10),
            "securityContext": {
                "runAsUser": cfg.proxy_uid,
                "runAsGroup": cfg.proxy_uid,
                "runAsNonRoot": true,
                "readOnlyRootFilesystem": true,
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "volumeMounts": mounts,
        });
        if let Some(res) = &cfg.proxy_resources {
            c["resources"] = json!(res);
        }
        c
    }

    /// The transparent-mode init container: installs the capture rules, then exits. The one
    /// exception to the restricted profile: iptables needs root, NET_ADMIN and NET_RAW.
    pub fn init_container(&self) -> Value {
        let cfg = self.cfg;
        let mut args = vec![
            "init-iptables".to_string(),
            "--proxy-uid".into(),
            cfg.proxy_uid.to_string(),
            "--to-port".into(),
            TRANSPARENT_PORT.to_string(),
        ];
        let ports: Vec<String> = cfg
            .ignore_outbound_ports
            .iter()
            .filter_map(|p| p.as_arg())
            .collect();
        if !ports.is_empty() {
            args.extend(["--ignore-ports".to_string(), ports.join(",")]);
        }
        if !cfg.ignore_outbound_cidrs.is_empty() {
            args.extend([
                "--ignore-cidrs".to_string(),
                cfg.ignore_outbound_cidrs.join(","),
            ]);
        }
        let mut c = json!({
            "name": INIT_CONTAINER,
            "image": cfg.proxy_image,
            "imagePullPolicy": cfg.proxy_image_pull_policy,
            "args": args,
            "securityContext": {
                "runAsUser": 0,
                "runAsNonRoot": false,
                "readOnlyRootFilesystem": true,
                "allowPrivilegeEscalation": false,
                "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "volumeMounts": [{"name": VOLUME_XTABLES, "mountPath": "/run"}],
        });
        if let Some(res) = &cfg.proxy_resources {
            c["resources"] = json!(res);
        }
        c
    }

    /// Mounts the agent container gains, with their paths (to detect clashes).
    pub fn agent_mounts(&self) -> Vec<(String, Value)> {
        let cache = self.agent_cache_dir();
        vec![
            (
                MANAGED_DIR.to_string(),
                json!({"name": VOLUME_MANAGED, "mountPath": MANAGED_DIR, "readOnly": true}),
            ),
            (
                cache.clone(),
                json!({"name": VOLUME_CACHE, "mountPath": cache, "readOnly": true}),
            ),
        ]
    }

    /// Env the agent container gets; the proxy variables only in proxy mode.
    pub fn agent_env(&self) -> Vec<(&'static str, String)> {
        let api = format!("http://127.0.0.1:{API_PORT}");
        let mut env = vec![
            ("FIRECRAWL_API_URL", api.clone()),
            ("TAVILY_BASE_URL", format!("{api}/tavily")),
            ("SEARXNG_URL", format!("{api}/searxng")),
            ("HERMES_MANAGED_DIR", MANAGED_DIR.to_string()),
        ];
        if self.mode == EgressMode::Proxy {
            let proxy = format!("http://127.0.0.1:{FORWARD_PORT}");
            let no_proxy = "127.0.0.1,localhost,::1".to_string();
            for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
                env.push((name, proxy.clone()));
            }
            env.push(("NO_PROXY", no_proxy.clone()));
            env.push(("no_proxy", no_proxy));
        }
        env
    }
}

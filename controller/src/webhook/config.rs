//! The injector configuration file (`--injector-config`): what the chart decides about every
//! injected pod (image, uid, resources, volumes, capture exceptions).

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

/// Default uid of the gate container; `init-iptables` exempts its traffic.
pub const DEFAULT_PROXY_UID: i64 = 15000;
/// Default `HERMES_HOME` of the agent container.
pub const DEFAULT_HERMES_HOME: &str = "/opt/data";
/// Default Secret holding the report bearer token (key `token`).
pub const DEFAULT_REPORT_TOKEN_SECRET: &str = "fleetgate-report-token";

/// The injector configuration, as the chart renders it (YAML, camelCase, unknown keys refused).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InjectorConfig {
    /// Image of the gate sidecar and of the transparent-mode init container. Required.
    pub proxy_image: String,
    /// Pull policy of both. Default `IfNotPresent`.
    #[serde(default = "default_pull_policy")]
    pub proxy_image_pull_policy: String,
    /// uid (and gid) the gate runs as; iptables exempts it. Default 15000.
    #[serde(default = "default_uid")]
    pub proxy_uid: i64,
    /// Resources of the gate container. Default requests 50m / 64Mi, limit 256Mi memory;
    /// `null` sets none.
    #[serde(default = "default_resources")]
    pub proxy_resources: Option<ResourceRequirements>,
    /// PVC (ReadWriteMany) holding the shared cache; `null` gives each pod an emptyDir.
    #[serde(default)]
    pub cache_claim_name: Option<String>,
    /// The agent's `HERMES_HOME`; the volume the agent mounts there is mounted read-only at
    /// `/hermes` in the gate. The cache appears in the agent at the policy's agent-visible root
    /// (`/opt/data/cache/fleetgate`), which is inside the home only for the default path.
    #[serde(default = "default_hermes_home")]
    pub hermes_home_path: String,
    /// Name of the agent container; `null` means the first container.
    #[serde(default)]
    pub agent_container: Option<String>,
    /// Secret (key `token`) mounted in the gate for `/v1/report`; `null` turns reports off.
    #[serde(default = "default_report_token_secret")]
    pub report_token_secret: Option<String>,
    /// Destination ports `init-iptables` never redirects (transparent mode), e.g. `22` or
    /// `"8000-8100"`.
    #[serde(default)]
    pub ignore_outbound_ports: Vec<PortSpec>,
    /// Destination networks `init-iptables` never redirects (transparent mode).
    #[serde(default, rename = "ignoreOutboundCIDRs")]
    pub ignore_outbound_cidrs: Vec<String>,
}

/// A port or a `first-last` range, as a number or a string.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PortSpec {
    /// One port.
    Port(u16),
    /// A port or a range written as text (`"8000-8100"`).
    Text(String),
}

/// Why the injector configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("failed to read the injector config {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not match the schema.
    #[error("failed to parse the injector config: {0}")]
    Parse(String),
    /// A field holds a value the injector cannot use.
    #[error("failed to accept the injector config: {field}: {message}")]
    Invalid {
        /// The camelCase field name.
        field: &'static str,
        /// What is wrong and how to fix it.
        message: String,
    },
}

// === impl InjectorConfig ===

impl InjectorConfig {
    /// Parse and check the YAML text of an injector configuration.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let cfg: Self =
            serde_yaml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        cfg.check()?;
        Ok(cfg)
    }

    /// Read, parse and check an injector configuration file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text)
    }

    /// A configuration with every default and `image`.
    pub fn with_image(image: &str) -> Self {
        Self {
            proxy_image: image.to_string(),
            proxy_image_pull_policy: default_pull_policy(),
            proxy_uid: DEFAULT_PROXY_UID,
            proxy_resources: default_resources(),
            cache_claim_name: None,
            hermes_home_path: default_hermes_home(),
            agent_container: None,
            report_token_secret: default_report_token_secret(),
            ignore_outbound_ports: Vec::new(),
            ignore_outbound_cidrs: Vec::new(),
        }
    }

    /// The Hermes home path without a trailing slash.
    pub fn hermes_home(&self) -> &str {
        let trimmed = self.hermes_home_path.trim_end_matches('/');
        if trimmed.is_empty() { "/" } else { trimmed }
    }

    fn check(&self) -> Result<(), ConfigError> {
        if self.proxy_image.trim().is_empty() {
            return Err(invalid("proxyImage", "must name the fleetgate-proxy image"));
        }
        if !["Always", "IfNotPresent", "Never"].contains(&self.proxy_image_pull_policy.as_str()) {
            return Err(invalid(
                "proxyImagePullPolicy",
                "must be Always, IfNotPresent or Never",
            ));
        }
        if !(1..=2_147_483_647).contains(&self.proxy_uid) {
            return Err(invalid(
                "proxyUid",
                "must be a non-root uid (1..2147483647); the gate runs as non-root",
            ));
        }
        if !self.hermes_home_path.starts_with('/') || self.hermes_home() == "/" {
            return Err(invalid(
                "hermesHomePath",
                "must be an absolute path below / (the agent's HERMES_HOME, e.g. /opt/data)",
            ));
        }
        for cidr in &self.ignore_outbound_cidrs {
            if cidr.parse::<ipnet::IpNet>().is_err() && cidr.parse::<std::net::IpAddr>().is_err() {
                return Err(invalid(
                    "ignoreOutboundCIDRs",
                    format!("{cidr:?} is not a CIDR such as 10.0.0.0/8 or fd00::/8"),
                ));
            }
        }
        for port in &self.ignore_outbound_ports {
            if port.as_arg().is_none() {
                return Err(invalid(
                    "ignoreOutboundPorts",
                    format!("{port:?} is not a port (1..65535) or a range such as 8000-8100"),
                ));
            }
        }
        Ok(())
    }
}

// === impl PortSpec ===

impl PortSpec {
    /// The `--ignore-ports` text of this entry, `None` when it is not a port or a range.
    pub fn as_arg(&self) -> Option<String> {
        let port = |s: &str| s.trim().parse::<u16>().ok().filter(|p| *p > 0);
        match self {
            Self::Port(p) => (*p > 0).then(|| p.to_string()),
            Self::Text(t) => match t.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (port(a)?, port(b)?);
                    (a <= b).then(|| format!("{a}-{b}"))
                }
                None => port(t).map(|p| p.to_string()),
            },
        }
    }
}

fn invalid(field: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        message: message.into(),
    }
}

fn default_pull_policy() -> String {
    "IfNotPresent".to_string()
}

fn default_uid() -> i64 {
    DEFAULT_PROXY_UID
}

fn default_hermes_home() -> String {
    DEFAULT_HERMES_HOME.to_string()
}

fn default_report_token_secret() -> Option<String> {
    Some(DEFAULT_REPORT_TOKEN_SECRET.to_string())
}

fn default_resources() -> Option<ResourceRequirements> {
    let q = |s: &str| Quantity(s.to_string());
    Some(ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), q("50m")),
            ("memory".to_string(), q("64Mi")),
        ])),
        limits: Some(BTreeMap::from([("memory".to_string(), q("256Mi"))])),
        ..ResourceRequirements::default()
    })
}

//! Where the rendered files and the gate sit in an agent pod: the ConfigMap's keys, the gate's
//! listeners and the paths it reads. Shared by the gate policy ([`super::policy`]) and the LLM
//! routes ([`super::llm`]) that point Hermes at the gate's API listener.

/// Key of the Hermes managed config in the rendered ConfigMap.
pub const CONFIG_KEY: &str = "config.yaml";
/// Key of the gate policy in the rendered ConfigMap.
pub const POLICY_KEY: &str = "policy.yaml";
/// Gate API listener (Firecrawl / Tavily / SearXNG fronts, LLM route).
pub const LISTEN_API: &str = "127.0.0.1:15180";
/// Gate forward proxy listener (`HTTP(S)_PROXY`).
pub const LISTEN_FORWARD_PROXY: &str = "127.0.0.1:15181";
/// Gate transparent listener (iptables REDIRECT target).
pub const LISTEN_TRANSPARENT: &str = "127.0.0.1:15182";
/// Gate admin listener; all addresses, since one ConfigMap serves every pod of the fleet.
pub const LISTEN_ADMIN: &str = "0.0.0.0:15190";
/// The shared cache volume in the gate container.
pub const STORE_ROOT: &str = "/var/cache/fleetgate";
/// The same volume as the agent sees it.
pub const STORE_AGENT_ROOT: &str = "/opt/data/cache/fleetgate";
/// The agent's `$HERMES_HOME`, mounted read-only in the gate.
pub const HERMES_HOME: &str = "/hermes";
/// The managed ConfigMap as mounted in the gate (for the report's managed digest).
pub const MANAGED_DIR: &str = "/etc/hermes";
/// The report bearer token (Secret created by the chart) in the gate.
pub const REPORT_TOKEN_FILE: &str = "/etc/fleetgate/report-token/token";
/// Where the vendor credentials Secret is mounted in the gate, one file per key.
pub const VENDOR_KEYS_DIR: &str = "/etc/fleetgate/vendor-keys";
/// Where blocklist ConfigMaps are mounted in the gate: `<dir>/<configMap>/<key>`.
pub const BLOCKLISTS_DIR: &str = "/etc/fleetgate/blocklists";
/// Where secret-rule ConfigMaps (gitleaks rule files) are mounted: `<dir>/<configMap>/<key>`.
pub const SECRET_RULES_DIR: &str = "/etc/fleetgate/secret-rules";

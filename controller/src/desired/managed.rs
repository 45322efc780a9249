//! The Hermes managed scope (`config.yaml`): `spec.managed` plus the pins that route Hermes'
//! web tools through the gate.
//!
//! Hermes deep-merges this file last, over the user config and env-derived values, so every
//! leaf here wins on every agent. The two web pins point Hermes' extract and search providers
//! at the gate's Firecrawl- and SearXNG-compatible fronts (the injector sets
//! `FIRECRAWL_API_URL` and `SEARXNG_URL` to the gate); the gate then picks the real upstream
//! from `spec.web`, strictly.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::problems::RenderError;

/// The keys under `web` the controller pins, with their values.
pub const WEB_PINS: [(&str, &str); 2] = [
    ("extract_backend", "firecrawl"),
    ("search_backend", "searxng"),
];

/// First line of every rendered `config.yaml`.
pub const HEADER: &str = "# Hermes managed scope rendered by fleetgate-controller; edit the FleetPolicy, not this file.\n";

/// The rendered managed config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedManaged {
    /// The `config.yaml` text.
    pub yaml: String,
    /// sha256 (hex) of `yaml`.
    pub sha256: String,
    /// Number of dotted leaf keys pinned (Hermes' count: recursion into non-empty mappings).
    pub pinned_keys: usize,
}

/// Render `config.yaml` from `spec.managed` (absent means only the pins).
pub fn render(managed: Option<&Map<String, Value>>) -> Result<RenderedManaged, RenderError> {
    let mut config = managed.cloned().unwrap_or_default();
    let web = config
        .entry("web")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(web) = web else {
        return Err(RenderError::invalid(
            "spec.managed.web",
            "must be a mapping; the controller pins web.extract_backend and web.search_backend under it",
        ));
    };
    for (key, pin) in WEB_PINS {
        match web.get(key) {
            None => {
                web.insert(key.to_string(), Value::String(pin.to_string()));
            }
            Some(Value::String(v)) if v == pin => {}
            Some(other) => {
                return Err(RenderError::invalid(
                    format!("spec.managed.web.{key}"),
                    format!(
                        "is {other} but the controller pins it to '{pin}' so Hermes goes through the gate; remove it and choose the upstream with spec.web"
                    ),
                ));
            }
        }
    }
    let pinned_keys = fleetgate_policy::managed::pinned_keys(&config).len();
    let body = serde_yaml::to_string(&config).map_err(|e| RenderError::Serialize {
        file: super::pod_layout::CONFIG_KEY,
        message: e.to_string(),
    })?;
    let yaml = format!("{HEADER}{body}");
    Ok(RenderedManaged {
        sha256: hex::encode(Sha256::digest(yaml.as_bytes())),
        yaml,
        pinned_keys,
    })
}

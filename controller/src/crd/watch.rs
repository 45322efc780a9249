//! `spec.watches` and `spec.watch`: watches the gate runs for the agents' cron jobs, and the
//! MCP endpoint an administrator pins for all of them.
//!
//! The field names are the gate policy's (`watches:` / `watch:`), so the controller renders
//! these values as they are; the gate's own validator judges them at render time.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `spec.watch`: settings shared by every watch.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WatchSettingsSpec {
    /// The only streamable-HTTP MCP endpoint watches may call; a watch naming another one
    /// is refused. Watches then omit `serverUrl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 8, max = 2048), regex(pattern = r"^https?://"))]
    pub pinned_server_url: Option<String>,
}

/// One entry of `spec.watches`: an MCP read tool whose new items wake the agent, served on
/// the gate's `/v1/watch/<name>` for a one-line cron pre-run script.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WatchSpec {
    /// Name: the route segment and the state file name.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9][a-z0-9_-]*$"))]
    pub name: String,
    /// Streamable-HTTP MCP endpoint; omit it when `spec.watch.pinnedServerUrl` is set. An
    /// in-cluster server must be allowed by `spec.egress.allowCIDRs` / `allowHosts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 8, max = 2048), regex(pattern = r"^https?://"))]
    pub server_url: Option<String>,
    /// The read tool to call.
    #[schemars(length(min = 1, max = 256))]
    pub tool: String,
    /// Tool arguments. Default `{}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "arguments_schema")]
    pub arguments: Option<Map<String, Value>>,
    /// Field that identifies an item (outermost objects carrying it, at any depth).
    #[schemars(length(min = 1, max = 256))]
    pub id_field: String,
    /// Fields printed per new item: `a.b` follows a path, a bare name is searched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 1, max = 256)))]
    pub show_fields: Vec<String>,
    /// Item lines per run, 1..100 (the rest is counted). Default 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub max_new: Option<u32>,
    /// Bound on stored ids, 1..100000. Default 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub max_seen: Option<u32>,
    /// HTTP headers; `${VAR}` expands from the gate's environment and `${file:/path}` from
    /// a file (a mounted Secret), so no secret sits in the FleetPolicy.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Call timeout in seconds, 1..600. Default 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 600))]
    pub timeout_seconds: Option<u32>,
}

fn arguments_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "Tool arguments (free-form mapping).",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::FleetPolicySpec;
    use crate::desired::RenderError;
    use crate::desired::policy::render;

    fn watch(server_url: Option<&str>) -> WatchSpec {
        WatchSpec {
            name: "inbox".into(),
            server_url: server_url.map(str::to_string),
            tool: "list_items".into(),
            arguments: Some(Map::from_iter([(
                "folder".to_string(),
                Value::from("inbox"),
            )])),
            id_field: "messageId".into(),
            show_fields: vec!["subject".into()],
            max_new: Some(3),
            headers: BTreeMap::from([("Authorization".into(), "Bearer ${MCP_TOKEN}".into())]),
            ..WatchSpec::default()
        }
    }

    fn spec(pinned: Option<&str>, server_url: Option<&str>) -> FleetPolicySpec {
        FleetPolicySpec {
            watch: pinned.map(|p| WatchSettingsSpec {
                pinned_server_url: Some(p.into()),
            }),
            watches: vec![watch(server_url)],
            ..FleetPolicySpec::default()
        }
    }

    #[test]
    fn watches_render_into_the_gate_policy_and_the_gate_reads_them() {
        let cases = [
            ("own endpoint", None, Some("http://mcp.tools.svc:8787/mcp")),
            (
                "pinned endpoint",
                Some("http://mcp.tools.svc:8787/mcp"),
                None,
            ),
        ];
        for (name, pinned, own) in cases {
            let rendered = render(&spec(pinned, own)).expect("a valid watch must render");
            let policy = fleetgate_policy::Policy::parse(
                rendered.yaml.as_bytes(),
                std::path::Path::new("/"),
            )
            .expect("the rendered policy must parse");
            let w = policy.watches.first().expect("the watch must be rendered");
            assert_eq!(
                (w.server_url.as_str(), w.max_new, w.tool.as_str()),
                ("http://mcp.tools.svc:8787/mcp", 3, "list_items"),
                "{name}: the gate must read the watch as written"
            );
            assert_eq!(
                w.arguments["folder"], "inbox",
                "{name}: arguments must pass"
            );
        }
    }

    #[test]
    fn an_endpoint_other_than_the_pinned_one_is_refused_naming_the_spec_field() {
        let err = render(&spec(
            Some("http://mcp.tools.svc:8787/mcp"),
            Some("https://elsewhere.example/mcp"),
        ))
        .expect_err("an unpinned endpoint must be refused");
        let RenderError::InvalidSpec(problems) = err else {
            panic!("the refusal must be a spec problem");
        };
        assert_eq!(
            problems.first().map(|p| p.field.as_str()),
            Some("spec.watches[0].serverUrl"),
            "the problem must name the FleetPolicy field"
        );
    }
}

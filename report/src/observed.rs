//! Observed tiers per role: what was really sent to the provider (model, reasoning effort,
//! requested and served service tier), one entry per role.
//!
//! Two sources feed the same structure: `$HERMES_HOME/fleet-policy/observed.json` (written by
//! the observer plugin, when installed) and the gate's own LLM route, which sees the same
//! requests on the wire. [`Observed::merge`] combines them, newest entry per role winning.
//! Roles are `main`, `delegation`, `cron`, `auxiliary:<task>` and `unknown`.

use std::path::Path;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde::{Deserialize, Serialize as DeriveSerialize};
use serde_json::Value;

use super::time::parse_iso;

/// The last real provider request seen for one role.
#[derive(Clone, Debug, Default, PartialEq, Eq, DeriveSerialize, Deserialize)]
pub struct RoleObservation {
    /// Model id on the wire.
    #[serde(default, deserialize_with = "scalar")]
    pub model: Option<String>,
    /// Effort on the wire (`high`, `budget:<n>`, `none`, ...).
    #[serde(default, deserialize_with = "scalar")]
    pub reasoning_effort: Option<String>,
    /// Service tier requested.
    #[serde(default, deserialize_with = "scalar")]
    pub service_tier: Option<String>,
    /// Service tier the provider says it served.
    #[serde(default, deserialize_with = "scalar")]
    pub response_service_tier: Option<String>,
    /// When it was seen (ISO 8601, UTC).
    #[serde(default, deserialize_with = "scalar")]
    pub ts: Option<String>,
    /// What the gate's LLM route counted for this role (absent in the observer's entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateCounters>,
}

/// Counters the gate keeps per role, next to the last observation.
#[derive(Clone, Debug, Default, PartialEq, Eq, DeriveSerialize, Deserialize)]
pub struct GateCounters {
    /// Requests sent upstream.
    pub requests: u64,
    /// Turns refused (enforce mode): a refused request that is a further attempt of a turn
    /// refused within the last minute (a retry, or another call of the same user message) is
    /// counted in `refused_attempts` only.
    pub refused: u64,
    /// Requests refused (enforce mode), every attempt counted.
    #[serde(default)]
    pub refused_attempts: u64,
    /// Requests the gate rewrote (pinned effort or tier).
    pub rewritten: u64,
    /// The rewrites of the last request (`field: from -> to`); in observe mode, the ones
    /// enforce mode would have made.
    pub last_rewrites: Vec<String>,
    /// Whether `last_rewrites` were applied (enforce) or only reported (observe).
    pub applied: bool,
}

/// Observations keyed by role, in first-seen order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    roles: Vec<(String, RoleObservation)>,
}

/// Why `observed.json` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ObservedError {
    /// The file exists but could not be read.
    #[error("failed to read fleet-policy/observed.json: {0}")]
    Io(#[from] std::io::Error),
    /// The file is not JSON or not an object of role entries.
    #[error("failed to parse fleet-policy/observed.json: {0}")]
    Json(#[from] serde_json::Error),
}

impl Observed {
    /// Parse the observer's JSON: an object of role → entry (or `{"roles": {...}}`).
    /// Entries that are not objects are skipped.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        let value: Value = serde_json::from_str(text)?;
        let Value::Object(mut top) = value else {
            return Err(serde::de::Error::custom("expected an object of roles"));
        };
        if let Some(Value::Object(roles)) = top.remove("roles") {
            top = roles;
        }
        let mut observed = Self::default();
        for (role, entry) in top {
            if entry.is_object() {
                observed.insert(role, serde_json::from_value(entry)?);
            }
        }
        Ok(observed)
    }

    /// Read `fleet-policy/observed.json` under `home`; absent means no observations.
    pub fn load(home: &Path) -> Result<Self, ObservedError> {
        match std::fs::read_to_string(home.join("fleet-policy").join("observed.json")) {
            Ok(text) => Ok(Self::from_json(&text)?),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(err) => Err(err.into()),
        }
    }

    /// The observation for `role`.
    pub fn get(&self, role: &str) -> Option<&RoleObservation> {
        self.roles.iter().find(|(r, _)| r == role).map(|(_, o)| o)
    }

    /// The roles in order.
    pub fn roles(&self) -> impl Iterator<Item = (&str, &RoleObservation)> {
        self.roles.iter().map(|(r, o)| (r.as_str(), o))
    }

    /// Record `observation` for `role`, replacing any earlier entry unconditionally.
    pub fn insert(&mut self, role: String, observation: RoleObservation) {
        match self.roles.iter_mut().find(|(r, _)| *r == role) {
            Some((_, slot)) => *slot = observation,
            None => self.roles.push((role, observation)),
        }
    }

    /// Merge `other` in: per role the newer entry (by `ts`) wins. An entry with a readable
    /// timestamp beats one without; on a tie, or when neither is readable, `other` wins.
    pub fn merge(&mut self, other: Observed) {
        for (role, theirs) in other.roles {
            let keep_ours = self.get(&role).is_some_and(|ours| is_newer(ours, &theirs));
            if !keep_ours {
                self.insert(role, theirs);
            }
        }
    }

    /// Whether there is no observation at all.
    pub fn is_empty(&self) -> bool {
        self.roles.is_empty()
    }
}

fn is_newer(ours: &RoleObservation, theirs: &RoleObservation) -> bool {
    let ts = |o: &RoleObservation| o.ts.as_deref().and_then(parse_iso);
    match (ts(ours), ts(theirs)) {
        (Some(a), Some(b)) => a > b,
        (Some(_), None) => true,
        _ => false,
    }
}

impl Serialize for Observed {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.roles.len()))?;
        for (role, observation) in &self.roles {
            map.serialize_entry(role, observation)?;
        }
        map.end()
    }
}

/// A short scalar as a string: strings as-is, numbers and booleans printed, null as none.
fn scalar<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Null => None,
        Value::String(s) => Some(s),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => return Err(serde::de::Error::custom("expected a scalar")),
    })
}

#[cfg(test)]
mod tests;

//! The I/O shell: one reconcile of one FleetPolicy and its error policy.
//!
//! Third layer of the controller. Per reconcile, in this order:
//!
//! 1. render the spec ([`crate::desired::render`], pure), with the namespace LLM budgets the
//!    last fleet poll found spent;
//! 2. valid: read the managed ConfigMap and server-side apply the rendered one with the field
//!    manager [`FIELD_MANAGER`] only when it differs (a steady fleet writes nothing);
//!    invalid: touch nothing, so the last good ConfigMap stays in place;
//! 3. when a [`FleetConfig`] is set and the spec is valid, take the fleet's view from the last
//!    poll of the selected pods' gates ([`crate::fleet_poll`], which starts a poll in the
//!    background when one is due and requeues the FleetPolicy when it ends);
//! 4. compute the status ([`crate::status::compute`], pure) and, only when it changed, publish
//!    an event and server-side apply it on the `/status` subresource; with a fleet, only once a
//!    view of the current rendering exists (a status without the fleet's fields would remove
//!    them);
//! 5. requeue after `spec.resyncSeconds`.
//!
//! Only the replica holding the lease ([`crate::leader`]) reconciles: a follower's reconcile
//! returns at once and waits for a change, and every write (ConfigMap, status, event) first
//! passes [`Leadership::confirm`], so a deposed leader stops before its next write.
//!
//! Failures go to [`error_policy`], which counts them by [`Error::code`] and requeues with an
//! exponential backoff per object. What brings a FleetPolicy here (its watches, the polls'
//! ends, leadership and baseline changes) is [`crate::controller_loop`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use crate::cluster_baselines::ClusterBaselines;
use crate::crd::{FleetPolicy, FleetPolicyStatus};
use crate::desired::{self, Desired};
use crate::fleet_poll::{FleetConfig, FleetPolls};
use crate::leader::Leadership;
use crate::metrics::{Metrics, Write};
use crate::status;
use crate::{Error, Result};

#[cfg(test)]
mod tests;

/// Server-side apply field manager of every write.
pub const FIELD_MANAGER: &str = "fleetgate-controller";
/// First retry delay after a failed reconcile; doubles per consecutive failure.
pub const BACKOFF_BASE: Duration = Duration::from_secs(5);
/// Longest retry delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// How long a reconcile waits for the first list of the cluster baselines before it fails.
const BASELINE_WAIT: Duration = Duration::from_secs(5);

/// What every reconcile shares.
#[derive(Clone)]
pub struct Context {
    /// The API client.
    pub client: Client,
    /// Publishes events on FleetPolicies.
    pub recorder: Recorder,
    /// The controller's metrics.
    pub metrics: Metrics,
    /// How to scrape the fleet; `None` leaves the fleet fields of the status alone.
    pub fleet: Option<FleetConfig>,
    /// Whether this replica may reconcile and write.
    pub leader: Leadership,
    /// The cluster baselines every FleetPolicy is rendered under; `None` when the controller
    /// does not read them (the cluster part is not installed).
    pub baselines: Option<ClusterBaselines>,
    /// Consecutive failures per object (`namespace/name`), for the backoff.
    failures: Arc<Mutex<HashMap<String, u32>>>,
    /// Per object, the status this controller last wrote (as [`status::digest_but_times`])
    /// and the resourceVersion of the object it was computed from: until the watch delivers
    /// the patched object, a reconcile (say, triggered by the ConfigMap's own watch event)
    /// still sees the old status and would write the same one again.
    written: Arc<Mutex<HashMap<String, Written>>>,
    /// The fleet polls per object, with the pods they select from and what the gates spent.
    polls: FleetPolls,
}

/// A status this controller wrote (its [`status::digest_but_times`]), with the
/// resourceVersion of the object it came from.
type Written = (Option<String>, [u8; 32]);

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

// === impl Context ===

impl Context {
    /// A context publishing events as `fleetgate-controller` (instance `instance`, the pod name).
    pub fn new(client: Client, metrics: Metrics, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.into(),
            instance,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            leader: Leadership::sole(None),
            baselines: None,
            metrics,
            fleet: None,
            failures: Arc::default(),
            written: Arc::default(),
            polls: FleetPolls::default(),
        }
    }

    /// The fleet polls (tests and the controller loop wire their completions and pods).
    pub fn polls(&self) -> &FleetPolls {
        &self.polls
    }

    /// The same context, reconciling only while `leader` leads.
    pub fn with_leader(mut self, leader: Leadership) -> Self {
        self.leader = leader;
        self
    }

    /// The same context, rendering every FleetPolicy under `baselines`.
    pub fn with_baselines(mut self, baselines: ClusterBaselines) -> Self {
        self.baselines = Some(baselines);
        self
    }

    /// The same context, scraping the fleet with `fleet`.
    pub fn with_fleet(mut self, fleet: FleetConfig) -> Self {
        self.fleet = Some(fleet);
        self
    }

    fn record_failure(&self, key: &str) -> u32 {
        let Ok(mut map) = self.failures.lock() else {
            return 1;
        };
        let n = map.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    /// Whether this controller already wrote `wanted` for `fp` as it is now seen (the watch
    /// has not caught up with that write yet).
    fn already_wrote(&self, fp: &FleetPolicy, wanted: &FleetPolicyStatus) -> bool {
        let Ok(map) = self.written.lock() else {
            return false;
        };
        map.get(&fp.key()).is_some_and(|(version, digest)| {
            *version == fp.resource_version() && *digest == status::digest_but_times(wanted)
        })
    }

    fn remember_written(&self, fp: &FleetPolicy, wanted: &FleetPolicyStatus) {
        if let Ok(mut map) = self.written.lock() {
            map.insert(
                fp.key(),
                (fp.resource_version(), status::digest_but_times(wanted)),
            );
        }
    }

    /// Forget what is kept per object for objects not in `live` (`namespace/name`): without
    /// a finalizer a deletion never reaches `reconcile`.
    pub(crate) fn retain(&self, live: &std::collections::HashSet<String>) {
        if let Ok(mut map) = self.written.lock() {
            map.retain(|k, _| live.contains(k));
        }
        if let Ok(mut map) = self.failures.lock() {
            map.retain(|k, _| live.contains(k));
        }
        self.polls.retain(live);
    }

    fn clear_failures(&self, key: &str) {
        if let Ok(mut map) = self.failures.lock() {
            map.remove(key);
        }
    }
}

/// Reconcile one FleetPolicy: apply its ConfigMap when valid and changed, then its status when
/// changed. A follower, or a leader that cannot confirm its lease, writes nothing and waits.
pub async fn reconcile(fp: Arc<FleetPolicy>, ctx: Arc<Context>) -> Result<Action> {
    if !ctx.leader.is_leader() {
        return Ok(Action::await_change());
    }
    match reconcile_leading(fp, ctx.clone()).await {
        // Still the leader by its own election, but the Lease could not be confirmed (a renewal
        // late under load, a slow read): try again soon. Nothing else would bring this
        // FleetPolicy back, since the replica never stopped leading and so never acquires.
        Err(Error::Fenced(crate::leader::Fenced::Unconfirmed { .. })) if ctx.leader.is_leader() => {
            Ok(Action::requeue(UNCONFIRMED_RETRY))
        }
        // Not the leader, or deposed: the next acquisition reconciles everything.
        Err(Error::Fenced(_)) => Ok(Action::await_change()),
        other => other,
    }
}

/// How soon a leader whose Lease could not be confirmed before a write tries that write again:
/// by then the renewal has landed, or the lease is lost and a later acquisition reconciles
/// every FleetPolicy.
pub const UNCONFIRMED_RETRY: Duration = Duration::from_secs(2);

async fn reconcile_leading(fp: Arc<FleetPolicy>, ctx: Arc<Context>) -> Result<Action> {
    ctx.metrics.runs.inc();
    let _timer = ctx.metrics.duration.start_timer();
    let ns = fp
        .namespace()
        .ok_or(Error::MissingObjectKey("metadata.namespace"))?;
    let baselines = match &ctx.baselines {
        None => None,
        Some(b) => Some(
            b.current_within(BASELINE_WAIT)
                .await
                .ok_or(Error::BaselineUnavailable)?,
        ),
    };
    let spent = ctx.polls.exhausted_for(&fp.key());
    let mut rendered = desired::render_with_budgets(&fp, baselines.as_deref(), spent.as_ref());
    if rendered.is_ok()
        && let Err(problem) = check_secret_rules(&ctx, &fp, &ns).await?
    {
        rendered = Err(problem);
    }
    match &rendered {
        Ok(d) => apply_config_map(&ctx, &fp, &ns, d).await?,
        Err(e) => {
            ctx.metrics.invalid_specs.inc();
            warn!(namespace = %ns, name = %fp.name_any(), error = %e, "fleetpolicy.invalid");
        }
    }
    let fleet = match (&ctx.fleet, &rendered) {
        (Some(cfg), Ok(d)) => match ctx.polls.view(&ctx.client, &ctx.metrics, cfg, &fp, d) {
            Some(view) => Some(view),
            // No view of this rendering yet: the poll's end requeues this reconcile, which
            // writes the status with it.
            None => {
                ctx.clear_failures(&fp.key());
                return Ok(Action::requeue(Duration::from_secs(u64::from(
                    fp.resync_seconds(),
                ))));
            }
        },
        _ => None,
    };
    let wanted = status::compute(&fp, &rendered, fleet.as_ref(), &Time(Timestamp::now()));
    if ctx.fleet.is_some() {
        ctx.metrics.observe_fleet(&ns, &fp.name_any(), &wanted);
    }
    if !status::unchanged(&fp, &wanted) && !ctx.already_wrote(&fp, &wanted) {
        if let Err(e) = &rendered {
            publish(&ctx, &fp, EventType::Warning, e.reason(), e.to_string()).await;
        }
        patch_status(&ctx, &fp, &ns, &wanted).await?;
        ctx.remember_written(&fp, &wanted);
    }
    ctx.clear_failures(&fp.key());
    Ok(Action::requeue(Duration::from_secs(u64::from(
        fp.resync_seconds(),
    ))))
}

/// After a failed reconcile: count the failure by code and retry with backoff.
pub fn error_policy(fp: Arc<FleetPolicy>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.failures.with_label_values(&[err.code()]).inc();
    let failures = ctx.record_failure(&fp.key());
    let delay = backoff_delay(failures);
    warn!(name = %fp.name_any(), code = err.code(), error = %err, retry_in_s = delay.as_secs(), "fleetpolicy.reconcile_failed");
    Action::requeue(delay)
}

/// Retry delay after `failures` consecutive failures: 5 s, 10 s, 20 s, ... up to 5 min.
pub fn backoff_delay(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    BACKOFF_BASE.saturating_mul(1 << exp).min(BACKOFF_MAX)
}

/// Apply the rendered ConfigMap unless the stored one already matches it.
async fn apply_config_map(ctx: &Context, fp: &FleetPolicy, ns: &str, d: &Desired) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), ns);
    let name = d.config_map.name_any();
    let current = api.get_opt(&name).await.map_err(|source| Error::Kube {
        action: "read the managed ConfigMap",
        source,
    })?;
    if current
        .as_ref()
        .is_some_and(|c| up_to_date(c, &d.config_map))
    {
        return Ok(());
    }
    let mut body = serde_json::to_value(&d.config_map).map_err(|source| Error::Serialize {
        what: "the managed ConfigMap",
        source,
    })?;
    if let Some(obj) = body.as_object_mut() {
        obj.insert("apiVersion".into(), json!("v1"));
        obj.insert("kind".into(), json!("ConfigMap"));
    }
    ctx.leader.confirm().await?;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(&body))
        .await
        .map_err(|source| Error::Kube {
            action: "apply the managed ConfigMap",
            source,
        })?;
    ctx.metrics.wrote(Write::ConfigMap);
    info!(namespace = %ns, config_map = %name, policy_sha256 = %d.policy_sha256, "fleetpolicy.applied");
    let note = format!(
        "applied ConfigMap {name} (policy sha256 {}, managed sha256 {})",
        short(&d.policy_sha256),
        short(&d.managed_sha256)
    );
    publish(ctx, fp, EventType::Normal, "Applied", note).await;
    Ok(())
}

/// Compile the gitleaks rule files `spec.secrets.rulesConfigMaps` names, as the gate will: a
/// missing ConfigMap or key, or a rule that does not compile, makes the spec invalid (the
/// `Valid` condition names the ConfigMap, the rule id and the reason) and the last good
/// ConfigMap stays. The outer error is an API failure; the inner one a spec problem.
async fn check_secret_rules(
    ctx: &Context,
    fp: &FleetPolicy,
    ns: &str,
) -> Result<std::result::Result<(), desired::RenderError>> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), ns);
    let mut problems = Vec::new();
    for (i, r) in fp.spec.secrets.rules_config_maps.iter().enumerate() {
        let field = format!("spec.secrets.rulesConfigMaps[{i}]");
        let found = api
            .get_opt(&r.config_map)
            .await
            .map_err(|source| Error::Kube {
                action: "read a secret-rules ConfigMap",
                source,
            })?;
        let text = found.and_then(|cm| cm.data.and_then(|d| d.get(&r.key).cloned()));
        let Some(text) = text else {
            problems.push(desired::SpecProblem {
                field,
                message: format!(
                    "ConfigMap {} has no key {:?} in namespace {ns}; agent pods would wait for it",
                    r.config_map, r.key
                ),
            });
            continue;
        };
        let origin = format!("ConfigMap {}/{}", r.config_map, r.key);
        if let Err(e) = fleetgate_policy::secret_rules::RuleSet::parse(&text, &origin) {
            problems.push(desired::SpecProblem {
                field,
                message: e.to_string(),
            });
        }
    }
    Ok(match problems.is_empty() {
        true => Ok(()),
        false => Err(desired::RenderError::InvalidSpec(problems)),
    })
}

/// Whether `current` already carries everything `wanted` sets.
fn up_to_date(current: &ConfigMap, wanted: &ConfigMap) -> bool {
    let contains = |have: &Option<std::collections::BTreeMap<String, String>>,
                    want: &Option<std::collections::BTreeMap<String, String>>| {
        want.iter()
            .flatten()
            .all(|(k, v)| have.as_ref().and_then(|h| h.get(k)) == Some(v))
    };
    let owners = |m: &ConfigMap| m.metadata.owner_references.clone().unwrap_or_default();
    current.data == wanted.data
        && contains(&current.metadata.labels, &wanted.metadata.labels)
        && contains(&current.metadata.annotations, &wanted.metadata.annotations)
        && owners(wanted).iter().all(|o| owners(current).contains(o))
}

/// Server-side apply `status` on the `/status` subresource.
async fn patch_status(
    ctx: &Context,
    fp: &FleetPolicy,
    ns: &str,
    status: &FleetPolicyStatus,
) -> Result<()> {
    let api: Api<FleetPolicy> = Api::namespaced(ctx.client.clone(), ns);
    let body = json!({
        "apiVersion": FleetPolicy::api_version(&()),
        "kind": FleetPolicy::kind(&()),
        "status": status,
    });
    ctx.leader.confirm().await?;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch_status(&fp.name_any(), &params, &Patch::Apply(&body))
        .await
        .map_err(|source| Error::Kube {
            action: "patch the FleetPolicy status",
            source,
        })?;
    ctx.metrics.wrote(Write::Status);
    Ok(())
}

/// Publish an event on `fp`; a failure is logged, never fails the reconcile.
async fn publish(ctx: &Context, fp: &FleetPolicy, type_: EventType, reason: &str, note: String) {
    if ctx.leader.confirm().await.is_err() {
        return;
    }
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(note.chars().take(1000).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &fp.object_ref(&())).await {
        warn!(name = %fp.name_any(), error = %e, "fleetpolicy.event_failed");
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

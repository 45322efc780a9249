//! The I/O shell: one reconcile of one FleetPolicy, its error policy, and the controller loop.
//!
//! Third layer of the controller. Per reconcile, in this order:
//!
//! 1. render the spec ([`crate::desired::render`], pure);
//! 2. valid: read the managed ConfigMap and server-side apply the rendered one with the field
//!    manager [`FIELD_MANAGER`] only when it differs (a steady fleet writes nothing);
//!    invalid: touch nothing, so the last good ConfigMap stays in place;
//! 3. when a [`FleetConfig`] is set and the spec is valid, take the fleet's view from the last
//!    poll of the selected pods' gates, and start a poll in the background when one is due
//!    ([`FleetPolls`]): never polled, the view judged against an earlier rendering, a resync
//!    elapsed, or pods changed. The poll ([`crate::gate_poll`], each answer folded in as it
//!    lands by [`crate::fleet::Aggregator`], pure) runs outside the reconcile and requeues it
//!    when done, so an edit is never queued behind a status cycle of 10,000 gates;
//! 4. compute the status ([`crate::status::compute`], pure) and, only when it changed, publish
//!    an event and server-side apply it on the `/status` subresource; with a fleet, only once a
//!    view of the current rendering exists (a status without the fleet's fields would remove
//!    them);
//! 5. requeue after `spec.resyncSeconds`.
//!
//! At most [`RECONCILES_IN_FLIGHT`] reconciles and [`POLLS_IN_FLIGHT`] polls run at once.
//!
//! Only the replica holding the lease ([`crate::leader`]) reconciles: a follower's reconcile
//! returns at once and waits for a change, and every write (ConfigMap, status, event) first
//! passes [`Leadership::confirm`], so a deposed leader stops before its next write. When a
//! replica becomes the leader, every FleetPolicy is reconciled.
//!
//! Failures go to [`error_policy`], which counts them by [`Error::code`] and requeues with an
//! exponential backoff per object.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt as _};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::{Selector, SelectorExt};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store, reflector};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use crate::cluster_baselines::ClusterBaselines;
use crate::crd::{FleetPolicy, FleetPolicyStatus};
use crate::desired::{self, Desired, MANAGED_BY};
use crate::fleet::{self, Expected, FleetView};
use crate::gate_poll::{ScrapeConfig, failure_code, scrape_each};
use crate::leader::Leadership;
use crate::metrics::{Metrics, Write};
use crate::status;
use crate::{Error, Result};

#[cfg(test)]
mod fleet_sim;
mod pods;
#[cfg(test)]
mod tests;

pub use pods::PodIndex;

/// Server-side apply field manager of every write.
pub const FIELD_MANAGER: &str = "fleetgate-controller";
/// First retry delay after a failed reconcile; doubles per consecutive failure.
pub const BACKOFF_BASE: Duration = Duration::from_secs(5);
/// Longest retry delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// How long a reconcile waits for the first list of the cluster baselines before it fails.
const BASELINE_WAIT: Duration = Duration::from_secs(5);
/// How often the fleet gauges of deleted FleetPolicies are removed.
const GAUGE_PRUNE_INTERVAL: Duration = Duration::from_secs(60);
/// Reconciles running at once (renders and ConfigMap writes: short).
pub const RECONCILES_IN_FLIGHT: u16 = 16;
/// Fleet polls running at once, over every FleetPolicy (each bounded by its own pod
/// concurrency and the shared [`crate::gate_poll::MAX_IN_FLIGHT`] scrapes).
pub const POLLS_IN_FLIGHT: usize = 8;
/// Least time between two polls of one FleetPolicy started because its pods changed.
pub const POD_CHANGE_POLL_GAP: Duration = Duration::from_secs(2);

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
    /// Scrapes in flight over every FleetPolicy ([`crate::gate_poll::MAX_IN_FLIGHT`]).
    scrapes_in_flight: Arc<tokio::sync::Semaphore>,
    /// Consecutive failures per object (`namespace/name`), for the backoff.
    failures: Arc<Mutex<HashMap<String, u32>>>,
    /// Per object, the status this controller last wrote (as [`status::digest_but_times`])
    /// and the resourceVersion of the object it was computed from: until the watch delivers
    /// the patched object, a reconcile (say, triggered by the ConfigMap's own watch event)
    /// still sees the old status and would write the same one again.
    written: Arc<Mutex<HashMap<String, Written>>>,
    /// The pods of the controller's watch, as the few fields a reconcile reads; reconciles
    /// select from it once it listed.
    pods: PodIndex,
    /// Per object, the roles whose namespace LLM budget its gates have spent today, from the
    /// last poll ([`crate::budgets`]): rendered into the gates' policy at the next reconcile.
    exhausted: Arc<Mutex<HashMap<String, fleetgate_policy::llm::spend::RawExhausted>>>,
    /// Per object, its gates' LLM spend today as far as the polls saw it
    /// ([`crate::budgets::high_water`]).
    spend_seen: Arc<Mutex<HashMap<String, crate::budgets::NamespaceSpend>>>,
    /// The fleet polls per object.
    polls: FleetPolls,
}

/// The fleet polls: per object, the last view and the rendering it was judged against, when
/// the last poll started, whether one runs and whether pods changed since; where a finished
/// poll asks for its object's reconcile; and the bound on polls at once.
#[derive(Clone)]
pub struct FleetPolls {
    state: Arc<Mutex<HashMap<String, PollState>>>,
    done: Arc<std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<ObjectRef<FleetPolicy>>>>,
    in_flight: Arc<tokio::sync::Semaphore>,
}

impl Default for FleetPolls {
    fn default() -> Self {
        Self {
            state: Arc::default(),
            done: Arc::default(),
            in_flight: Arc::new(tokio::sync::Semaphore::new(POLLS_IN_FLIGHT)),
        }
    }
}

#[derive(Default)]
struct PollState {
    /// The last view, with the (policy, managed) sha256 it was judged against.
    view: Option<(FleetView, (String, String))>,
    started: Option<tokio::time::Instant>,
    running: bool,
    pods_changed: bool,
}

impl std::fmt::Debug for FleetPolls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetPolls").finish_non_exhaustive()
    }
}

// === impl FleetPolls ===

impl FleetPolls {
    /// Send each finished poll's object to `tx` (the controller reconciles it).
    pub fn notify(&self, tx: tokio::sync::mpsc::UnboundedSender<ObjectRef<FleetPolicy>>) {
        let _ = self.done.set(tx);
    }

    /// Pods selected by `fp` changed: its next reconcile polls (at most every
    /// [`POD_CHANGE_POLL_GAP`]).
    pub fn pods_changed(&self, fp: &ObjectRef<FleetPolicy>) {
        let key = format!(
            "{}/{}",
            fp.namespace.as_deref().unwrap_or_default(),
            fp.name
        );
        let mut map = self.state.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(key).or_default().pods_changed = true;
    }

    /// The view judged against `digests`, and whether a poll should start now (marked started
    /// when so).
    fn view_and_due(
        &self,
        key: &str,
        digests: &(String, String),
        resync: Duration,
    ) -> (Option<FleetView>, bool) {
        let now = tokio::time::Instant::now();
        let mut map = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let p = map.entry(key.to_string()).or_default();
        let current = p
            .view
            .as_ref()
            .filter(|(_, judged)| judged == digests)
            .map(|(v, _)| v.clone());
        let since = p.started.map(|s| now.saturating_duration_since(s));
        let due = !p.running
            && match since {
                None => true,
                Some(_) if current.is_none() => true,
                Some(e) => {
                    e + Duration::from_secs(1) >= resync
                        || (p.pods_changed && e >= POD_CHANGE_POLL_GAP)
                }
            };
        if due {
            p.running = true;
            p.started = Some(now);
            p.pods_changed = false;
        }
        (current, due)
    }

    /// A poll ended: keep its view (a failed poll keeps the last one).
    fn finished(&self, key: &str, view: Option<(FleetView, (String, String))>) {
        let mut map = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let p = map.entry(key.to_string()).or_default();
        p.running = false;
        if view.is_some() {
            p.view = view;
        }
    }

    /// Forget objects that no longer exist.
    fn retain(&self, live: &std::collections::HashSet<String>) {
        let mut map = self.state.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|k, _| live.contains(k));
    }
}

/// A status this controller wrote (its [`status::digest_but_times`]), with the
/// resourceVersion of the object it came from.
type Written = (Option<String>, [u8; 32]);

/// Where the report token lives and how to scrape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetConfig {
    /// Secret (in the policy's namespace) holding the report bearer token.
    pub token_secret: String,
    /// Key of the token in that Secret.
    pub token_key: String,
    /// The gates' admin port.
    pub admin_port: u16,
    /// Deadline of one pod.
    pub per_pod_timeout: Duration,
    /// Pods scraped at once.
    pub concurrency: usize,
}

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
            scrapes_in_flight: Arc::new(tokio::sync::Semaphore::new(
                crate::gate_poll::MAX_IN_FLIGHT,
            )),
            failures: Arc::default(),
            written: Arc::default(),
            pods: PodIndex::default(),
            exhausted: Arc::default(),
            spend_seen: Arc::default(),
            polls: FleetPolls::default(),
        }
    }

    /// The fleet polls (tests and the controller loop wire their completions).
    pub fn polls(&self) -> &FleetPolls {
        &self.polls
    }

    fn exhausted_for(&self, key: &str) -> Option<fleetgate_policy::llm::spend::RawExhausted> {
        let map = self.exhausted.lock().unwrap_or_else(|p| p.into_inner());
        map.get(key).cloned()
    }

    /// What the gates of `key` spent today: `now` (this poll's sum) raised to what earlier
    /// polls of the day saw, and remembered.
    fn spend_today(
        &self,
        key: &str,
        now: crate::budgets::NamespaceSpend,
    ) -> crate::budgets::NamespaceSpend {
        let mut map = self.spend_seen.lock().unwrap_or_else(|p| p.into_inner());
        let today = crate::budgets::high_water(map.get(key), now);
        map.insert(key.to_string(), today.clone());
        today
    }

    /// Remember `now` (nothing spent: forget); whether it differs from what was rendered.
    fn update_exhausted(
        &self,
        key: &str,
        now: Option<fleetgate_policy::llm::spend::RawExhausted>,
    ) -> bool {
        let now = now.filter(|e| !e.roles.is_empty());
        let mut map = self.exhausted.lock().unwrap_or_else(|p| p.into_inner());
        let before = match &now {
            Some(e) => map.insert(key.to_string(), e.clone()),
            None => map.remove(key),
        };
        before != now
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
        map.get(&key(fp)).is_some_and(|(version, digest)| {
            *version == fp.resource_version() && *digest == status::digest_but_times(wanted)
        })
    }

    fn remember_written(&self, fp: &FleetPolicy, wanted: &FleetPolicyStatus) {
        if let Ok(mut map) = self.written.lock() {
            map.insert(
                key(fp),
                (fp.resource_version(), status::digest_but_times(wanted)),
            );
        }
    }

    /// Forget what is kept per object for objects not in `live` (`namespace/name`): without
    /// a finalizer a deletion never reaches `reconcile`.
    fn retain(&self, live: &std::collections::HashSet<String>) {
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
    let spent = ctx.exhausted_for(&key(&fp));
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
        (Some(cfg), Ok(d)) => match fleet_view(&ctx, cfg, &fp, &ns, d) {
            Some(view) => Some(view),
            // No view of this rendering yet: the poll's end requeues this reconcile, which
            // writes the status with it.
            None => {
                ctx.clear_failures(&key(&fp));
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
    ctx.clear_failures(&key(&fp));
    Ok(Action::requeue(Duration::from_secs(u64::from(
        fp.resync_seconds(),
    ))))
}

/// After a failed reconcile: count the failure by code and retry with backoff.
pub fn error_policy(fp: Arc<FleetPolicy>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.failures.with_label_values(&[err.code()]).inc();
    let failures = ctx.record_failure(&key(&fp));
    let delay = backoff_delay(failures);
    warn!(name = %fp.name_any(), code = err.code(), error = %err, retry_in_s = delay.as_secs(), "fleetpolicy.reconcile_failed");
    Action::requeue(delay)
}

/// Retry delay after `failures` consecutive failures: 5 s, 10 s, 20 s, ... up to 5 min.
pub fn backoff_delay(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    BACKOFF_BASE.saturating_mul(1 << exp).min(BACKOFF_MAX)
}

fn key(fp: &FleetPolicy) -> String {
    format!("{}/{}", fp.namespace().unwrap_or_default(), fp.name_any())
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

/// The view of `fp`'s fleet judged against the rendering `d`, starting a poll in the
/// background when one is due (its end requeues the object); `None` until a poll of this
/// rendering has ended.
fn fleet_view(
    ctx: &Arc<Context>,
    cfg: &FleetConfig,
    fp: &Arc<FleetPolicy>,
    ns: &str,
    d: &Desired,
) -> Option<FleetView> {
    let key = key(fp);
    let digests = (d.policy_sha256.clone(), d.managed_sha256.clone());
    let resync = Duration::from_secs(u64::from(fp.resync_seconds()));
    let (view, due) = ctx.polls.view_and_due(&key, &digests, resync);
    if due {
        let job = PollJob {
            cfg: cfg.clone(),
            fp: fp.clone(),
            ns: ns.to_string(),
            expected: expected(fp, d),
            egress_mode: d.egress_mode,
            digests,
        };
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let permit = ctx.polls.in_flight.clone().acquire_owned().await;
            let fp = job.fp.clone();
            poll(&ctx, job).await;
            drop(permit);
            if let Some(tx) = ctx.polls.done.get() {
                let _ = tx.send(ObjectRef::from_obj(fp.as_ref()));
            }
        });
    }
    view
}

/// One fleet poll's inputs, taken from the reconcile that started it.
struct PollJob {
    cfg: FleetConfig,
    fp: Arc<FleetPolicy>,
    ns: String,
    expected: Expected,
    egress_mode: crate::crd::EgressMode,
    digests: (String, String),
}

/// What the gates are checked against.
fn expected(fp: &FleetPolicy, d: &Desired) -> Expected {
    Expected {
        policy_sha256: d.policy_sha256.clone(),
        managed_sha256: d.managed_sha256.clone(),
        pins: fleet::pins_from_managed(fp.spec.managed.as_ref()),
        allowed_models: d.cron.allowed_models.clone(),
        max_cost_per_job_per_day: d.cron.max_cost_per_job_per_day,
    }
}

/// Poll `job`'s gates and keep the view; the namespace LLM budgets' verdict is updated from
/// the spend the gates report (rendered at the reconcile the poll's end requeues). A failure is
/// counted and logged, and the last view stays.
async fn poll(ctx: &Context, job: PollJob) {
    let key = key(&job.fp);
    match observe_fleet(ctx, &job).await {
        Ok(mut view) => {
            // A gate missing from this poll keeps the spend it reported earlier today.
            view.llm_spend = view.llm_spend.take().map(|now| ctx.spend_today(&key, now));
            let budgets = job.fp.spec.llm.as_ref().and_then(|l| l.budgets.as_ref());
            match (view.llm_spend.as_ref(), budgets) {
                (Some(spend), Some(b)) => {
                    ctx.update_exhausted(&key, Some(crate::budgets::exhausted(spend, b)));
                }
                (_, None) => {
                    ctx.update_exhausted(&key, None);
                }
                (None, Some(_)) => {}
            }
            ctx.polls.finished(&key, Some((view, job.digests)));
        }
        Err(e) => {
            ctx.metrics.failures.with_label_values(&[e.code()]).inc();
            warn!(name = %job.fp.name_any(), code = e.code(), error = %e, "fleetpolicy.poll_failed");
            ctx.polls.finished(&key, None);
        }
    }
}

/// Poll `fp`'s fleet now, in this task (what a due poll does in the background).
#[cfg(test)]
pub(crate) async fn poll_now(fp: &FleetPolicy, ctx: &Context) {
    let Some(cfg) = ctx.fleet.clone() else {
        return;
    };
    let Ok(d) = desired::render_with_budgets(fp, None, ctx.exhausted_for(&key(fp)).as_ref()) else {
        return;
    };
    let job = PollJob {
        cfg,
        fp: Arc::new(fp.clone()),
        ns: fp.namespace().unwrap_or_default(),
        expected: expected(fp, &d),
        egress_mode: d.egress_mode,
        digests: (d.policy_sha256.clone(), d.managed_sha256.clone()),
    };
    // Marked as started, as a due poll is, so the next reconcile takes its view.
    let resync = Duration::from_secs(u64::from(fp.resync_seconds()));
    let _ = ctx.polls.view_and_due(&key(fp), &job.digests, resync);
    poll(ctx, job).await;
}

/// Scrape the gates of the pods `job`'s FleetPolicy selects and aggregate what they serve.
async fn observe_fleet(ctx: &Context, job: &PollJob) -> Result<FleetView> {
    let (cfg, fp, ns) = (&job.cfg, &job.fp, job.ns.as_str());
    let selector =
        Selector::try_from(fp.spec.selector.clone()).map_err(|e| Error::Selector(e.to_string()))?;
    // From the pod watch's index once it listed; until then from the API server.
    let selected = match ctx.pods.selected(ns, &selector) {
        Some(pods) => pods,
        None => {
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
            let listed = pods
                .list(&ListParams::default().labels_from(&selector))
                .await
                .map_err(|source| Error::Kube {
                    action: "list the selected pods",
                    source,
                })?;
            listed
                .items
                .iter()
                .map(pods::SelectedPod::from_pod)
                .collect()
        }
    };
    let targets = pods::scrape_targets(&selected, cfg.admin_port);
    let token = read_token(ctx, cfg, ns).await;
    let scrape = ScrapeConfig {
        token,
        per_pod_timeout: cfg.per_pod_timeout,
        concurrency: cfg.concurrency,
        days: fp.spec.cron.window_days,
        in_flight: Some(ctx.scrapes_in_flight.clone()),
    };
    // Each answer is folded in as it lands: at most the scrapes in flight are held at once.
    let mut view = fleet::Aggregator::new(targets.len(), &job.expected);
    let mut scrapes = std::pin::pin!(scrape_each(&targets, &scrape));
    while let Some((_, s)) = scrapes.next().await {
        if let Err(f) = &s.outcome {
            ctx.metrics
                .scrape_failures
                .with_label_values(&[failure_code(f)])
                .inc();
        }
        view.add(&s);
    }
    let mut view = view.finish();
    let modes = pods::egress_modes(&selected);
    let below = fleet::injected_below(&modes, job.egress_mode);
    fleet::check_capture(&mut view, &below, job.egress_mode);
    Ok(view)
}

/// The report token; a missing Secret gives an empty token, so every gate answers
/// `unauthorized` and `Propagated` names the pods instead of failing the reconcile.
async fn read_token(ctx: &Context, cfg: &FleetConfig, ns: &str) -> String {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    match secrets.get_opt(&cfg.token_secret).await {
        Ok(Some(secret)) => secret
            .data
            .and_then(|d| {
                d.get(&cfg.token_key)
                    .map(|b| String::from_utf8_lossy(&b.0).trim().to_string())
            })
            .unwrap_or_default(),
        Ok(None) => {
            warn!(namespace = %ns, secret = %cfg.token_secret, "fleetpolicy.report_token_missing");
            String::new()
        }
        Err(e) => {
            warn!(namespace = %ns, secret = %cfg.token_secret, error = %e, "fleetpolicy.report_token_unreadable");
            String::new()
        }
    }
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

/// Run the controller on the FleetPolicies of `namespace` (every namespace when `None`) until
/// a shutdown signal: owned ConfigMaps and pods matching a policy's selector requeue it, and
/// each item of `baseline_changes` reconciles every FleetPolicy. `synced` is set once the
/// FleetPolicy reflector has listed (followers keep it warm too).
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<&str>,
    synced: Arc<AtomicBool>,
    baseline_changes: impl futures_util::Stream<Item = ()> + Send + 'static,
) {
    let client = ctx.client.clone();
    let (fps, cms, pods): (Api<FleetPolicy>, Api<ConfigMap>, Api<Pod>) = match namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client, ns),
        ),
        None => (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client),
        ),
    };
    let owned =
        watcher::Config::default().labels(&format!("app.kubernetes.io/managed-by={MANAGED_BY}"));
    // The reflector is built here rather than by `Controller::new` so that its first full list
    // is seen on the event stream. Awaiting the store's readiness from a second task would not
    // do: the store's ready signal wakes only its most recent waiter, and the controller's own
    // runner waits on it too (one of the two would sleep forever).
    let (store, writer) = reflector::store();
    let listed = synced.clone();
    let trigger = reflector(
        writer,
        watcher(fps, watcher::Config::default().any_semantic()).modify(|fp| {
            // Nothing reads them, and the status writes' managed fields (a key per listed
            // cron job) are the largest part of a FleetPolicy.
            fp.metadata.managed_fields = None;
        }),
    )
    .inspect(move |event| {
        if matches!(event, Ok(watcher::Event::InitDone)) {
            listed.store(true, Ordering::Relaxed);
        }
    })
    .applied_objects();
    // One pod watch both requeues the FleetPolicies that select a pod and keeps the index of
    // pods every reconcile selects its scrape targets from (see `pods`).
    let index = ctx.pods.clone();
    let pod_events = watcher(pods, watcher::Config::default().any_semantic())
        .inspect_ok(move |event| index.apply(event))
        .touched_objects();
    let controller = Controller::for_stream(trigger, store.clone())
        .with_config(kube::runtime::controller::Config::default().concurrency(RECONCILES_IN_FLIGHT))
        .trigger_backoff(crate::watch_backoff::WatchBackoff::default());
    tokio::spawn(prune_fleet_gauges(ctx.clone(), store.clone(), synced));
    // A finished fleet poll requeues its FleetPolicy, whose reconcile writes the status.
    let (polled_tx, polled_rx) = tokio::sync::mpsc::unbounded_channel();
    ctx.polls.notify(polled_tx);
    let polled = futures_util::stream::unfold(polled_rx, |mut rx| async move {
        rx.recv().await.map(|r| (r, rx))
    });
    let polls = ctx.polls.clone();
    controller
        .owns(cms, owned)
        .watches_stream(pod_events, move |pod: Pod| {
            let selecting = policies_selecting(&store.state(), &pod);
            for fp in &selecting {
                polls.pods_changed(fp);
            }
            selecting
        })
        .reconcile_on(polled)
        .reconcile_all_on(ctx.leader.acquisitions())
        .reconcile_all_on(baseline_changes)
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                warn!(error = %e, "fleetpolicy.controller_error");
            }
        })
        .await;
}

/// Every minute, drop the fleet gauges, poll state and written statuses of FleetPolicies that
/// no longer exist: without a finalizer a deletion never reaches `reconcile`, so the store is
/// the source of truth.
async fn prune_fleet_gauges(ctx: Arc<Context>, store: Store<FleetPolicy>, synced: Arc<AtomicBool>) {
    // Before the first list the store is empty and pruning would wipe every series.
    while !synced.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let mut tick = tokio::time::interval(GAUGE_PRUNE_INTERVAL);
    loop {
        tick.tick().await;
        let live = store
            .state()
            .iter()
            .map(|fp| (fp.namespace().unwrap_or_default(), fp.name_any()))
            .collect();
        ctx.metrics.retain_fleet(&live);
        ctx.retain(
            &live
                .iter()
                .map(|(ns, name)| format!("{ns}/{name}"))
                .collect(),
        );
    }
}

/// The FleetPolicies of the pod's namespace whose selector matches the pod's labels.
pub fn policies_selecting(policies: &[Arc<FleetPolicy>], pod: &Pod) -> Vec<ObjectRef<FleetPolicy>> {
    let labels = pod.labels();
    policies
        .iter()
        .filter(|fp| fp.namespace() == pod.namespace())
        .filter(|fp| Selector::try_from(fp.spec.selector.clone()).is_ok_and(|s| s.matches(labels)))
        .map(|fp| ObjectRef::from_obj(fp.as_ref()))
        .collect()
}

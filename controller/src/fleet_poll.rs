//! The fleet polls: per FleetPolicy, when its gates are polled, which pods they are, and the
//! view of the fleet its reconcile writes into the status.
//!
//! A reconcile asks `FleetPolls::view` for the view judged against its rendering, and a poll
//! starts in the background when one is due: never polled, the view judged against an earlier
//! rendering, a resync elapsed, or pods changed (at most every [`POD_CHANGE_POLL_GAP`]). A poll
//! selects the FleetPolicy's pods from the pod watch's index ([`PodIndex`]; from the API server
//! until the watch listed), reads the report token, scrapes the gates ([`crate::gate_poll`])
//! and folds each answer in as it lands ([`crate::fleet::Aggregator`], pure). Its end hands the
//! FleetPolicy to the controller loop ([`FleetPolls::notify`]), whose reconcile writes the
//! status, so an edit is never queued behind a status cycle of 10,000 gates.
//!
//! A poll also keeps what the gates spent today ([`crate::budgets`]): the roles whose namespace
//! LLM budget is spent are rendered into the gates' policy at the next reconcile
//! (`FleetPolls::exhausted_for`).
//!
//! At most [`POLLS_IN_FLIGHT`] polls run at once, and at most
//! [`crate::gate_poll::MAX_IN_FLIGHT`] scrapes over all of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams};
use kube::core::Selector;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use tokio::sync::Semaphore;
use tokio::sync::mpsc::UnboundedSender;
use tracing::warn;

use crate::crd::{EgressMode, FleetPolicy};
use crate::desired::Desired;
use crate::fleet::{self, Expected, FleetView};
use crate::gate_poll::{ScrapeConfig, failure_code, scrape_each};
use crate::metrics::Metrics;
use crate::{Error, Result};

mod pods;

pub use pods::PodIndex;

/// Fleet polls running at once, over every FleetPolicy (each bounded by its own pod
/// concurrency and the shared [`crate::gate_poll::MAX_IN_FLIGHT`] scrapes).
pub const POLLS_IN_FLIGHT: usize = 8;
/// Least time between two polls of one FleetPolicy started because its pods changed.
pub const POD_CHANGE_POLL_GAP: Duration = Duration::from_secs(2);

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

/// The fleet polls: per object, the last view and the rendering it was judged against, when
/// the last poll started, whether one runs and whether pods changed since; where a finished
/// poll asks for its object's reconcile; the bounds on polls and scrapes at once; the pods the
/// polls select from; and what the gates spent today.
#[derive(Clone)]
pub struct FleetPolls {
    state: Arc<Mutex<HashMap<String, PollState>>>,
    done: Arc<OnceLock<UnboundedSender<ObjectRef<FleetPolicy>>>>,
    in_flight: Arc<Semaphore>,
    /// Scrapes in flight over every FleetPolicy ([`crate::gate_poll::MAX_IN_FLIGHT`]).
    scrapes_in_flight: Arc<Semaphore>,
    /// The pods of the controller's watch, as the few fields a poll reads; polls select from
    /// it once it listed.
    pods: PodIndex,
    /// Per object, the roles whose namespace LLM budget its gates have spent today, from the
    /// last poll ([`crate::budgets`]): rendered into the gates' policy at the next reconcile.
    exhausted: Arc<Mutex<HashMap<String, fleetgate_policy::llm::spend::RawExhausted>>>,
    /// Per object, its gates' LLM spend today as far as the polls saw it
    /// ([`crate::budgets::high_water`]).
    spend_seen: Arc<Mutex<HashMap<String, crate::budgets::NamespaceSpend>>>,
}

impl Default for FleetPolls {
    fn default() -> Self {
        Self {
            state: Arc::default(),
            done: Arc::default(),
            in_flight: Arc::new(Semaphore::new(POLLS_IN_FLIGHT)),
            scrapes_in_flight: Arc::new(Semaphore::new(crate::gate_poll::MAX_IN_FLIGHT)),
            pods: PodIndex::default(),
            exhausted: Arc::default(),
            spend_seen: Arc::default(),
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

/// One fleet poll's inputs, taken from the reconcile that started it.
struct PollJob {
    cfg: FleetConfig,
    fp: Arc<FleetPolicy>,
    ns: String,
    expected: Expected,
    egress_mode: EgressMode,
    digests: (String, String),
}

// === impl FleetPolls ===

impl FleetPolls {
    /// Send each finished poll's object to `tx` (the controller reconciles it).
    pub fn notify(&self, tx: UnboundedSender<ObjectRef<FleetPolicy>>) {
        let _ = self.done.set(tx);
    }

    /// The pods the polls select from; the controller's pod watch keeps it.
    pub(crate) fn pods(&self) -> &PodIndex {
        &self.pods
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

    /// The roles whose namespace LLM budget the gates of `key` (`namespace/name`) have spent
    /// today, as the last poll saw them.
    pub(crate) fn exhausted_for(
        &self,
        key: &str,
    ) -> Option<fleetgate_policy::llm::spend::RawExhausted> {
        let map = self.exhausted.lock().unwrap_or_else(|p| p.into_inner());
        map.get(key).cloned()
    }

    /// The view of `fp`'s fleet judged against the rendering `d`, starting a poll in the
    /// background when one is due (its end is sent to [`FleetPolls::notify`]'s channel);
    /// `None` until a poll of this rendering has ended. The poll reads through `client` and
    /// counts its failures in `metrics`.
    pub(crate) fn view(
        &self,
        client: &Client,
        metrics: &Metrics,
        cfg: &FleetConfig,
        fp: &Arc<FleetPolicy>,
        d: &Desired,
    ) -> Option<FleetView> {
        let digests = (d.policy_sha256.clone(), d.managed_sha256.clone());
        let resync = Duration::from_secs(u64::from(fp.resync_seconds()));
        let (view, due) = self.view_and_due(&fp.key(), &digests, resync);
        if due {
            let job = PollJob::new(cfg, fp.clone(), d);
            let (polls, client, metrics) = (self.clone(), client.clone(), metrics.clone());
            tokio::spawn(async move {
                let permit = polls.in_flight.clone().acquire_owned().await;
                let fp = job.fp.clone();
                polls.poll(&client, &metrics, job).await;
                drop(permit);
                if let Some(tx) = polls.done.get() {
                    let _ = tx.send(ObjectRef::from_obj(fp.as_ref()));
                }
            });
        }
        view
    }

    /// Poll `fp`'s fleet for the rendering `d` now, in this task (what a due poll does in the
    /// background).
    #[cfg(test)]
    pub(crate) async fn poll_now(
        &self,
        client: &Client,
        metrics: &Metrics,
        cfg: &FleetConfig,
        fp: &FleetPolicy,
        d: &Desired,
    ) {
        let job = PollJob::new(cfg, Arc::new(fp.clone()), d);
        // Marked as started, as a due poll is, so the next reconcile takes its view.
        let resync = Duration::from_secs(u64::from(fp.resync_seconds()));
        let _ = self.view_and_due(&fp.key(), &job.digests, resync);
        self.poll(client, metrics, job).await;
    }

    /// Forget objects that no longer exist.
    pub(crate) fn retain(&self, live: &std::collections::HashSet<String>) {
        let mut map = self.state.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|k, _| live.contains(k));
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

    /// Poll `job`'s gates and keep the view; the namespace LLM budgets' verdict is updated
    /// from the spend the gates report (rendered at the reconcile the poll's end requeues). A
    /// failure is counted and logged, and the last view stays.
    async fn poll(&self, client: &Client, metrics: &Metrics, job: PollJob) {
        let key = job.fp.key();
        match self.observe_fleet(client, metrics, &job).await {
            Ok(mut view) => {
                // A gate missing from this poll keeps the spend it reported earlier today.
                view.llm_spend = view.llm_spend.take().map(|now| self.spend_today(&key, now));
                let budgets = job.fp.spec.llm.as_ref().and_then(|l| l.budgets.as_ref());
                match (view.llm_spend.as_ref(), budgets) {
                    (Some(spend), Some(b)) => {
                        self.update_exhausted(&key, Some(crate::budgets::exhausted(spend, b)));
                    }
                    (_, None) => {
                        self.update_exhausted(&key, None);
                    }
                    (None, Some(_)) => {}
                }
                self.finished(&key, Some((view, job.digests)));
            }
            Err(e) => {
                metrics.failures.with_label_values(&[e.code()]).inc();
                warn!(name = %job.fp.name_any(), code = e.code(), error = %e, "fleetpolicy.poll_failed");
                self.finished(&key, None);
            }
        }
    }

    /// Scrape the gates of the pods `job`'s FleetPolicy selects and aggregate what they serve.
    async fn observe_fleet(
        &self,
        client: &Client,
        metrics: &Metrics,
        job: &PollJob,
    ) -> Result<FleetView> {
        let (cfg, fp, ns) = (&job.cfg, &job.fp, job.ns.as_str());
        let selector = Selector::try_from(fp.spec.selector.clone())
            .map_err(|e| Error::Selector(e.to_string()))?;
        // From the pod watch's index once it listed; until then from the API server.
        let selected = match self.pods.selected(ns, &selector) {
            Some(pods) => pods,
            None => {
                let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
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
        let token = read_token(client, cfg, ns).await;
        let scrape = ScrapeConfig {
            token,
            per_pod_timeout: cfg.per_pod_timeout,
            concurrency: cfg.concurrency,
            days: fp.spec.cron.window_days,
            in_flight: Some(self.scrapes_in_flight.clone()),
        };
        // Each answer is folded in as it lands: at most the scrapes in flight are held at once.
        let mut view = fleet::Aggregator::new(targets.len(), &job.expected);
        let mut scrapes = std::pin::pin!(scrape_each(&targets, &scrape));
        while let Some((_, s)) = scrapes.next().await {
            if let Err(f) = &s.outcome {
                metrics
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
}

// === impl PollJob ===

impl PollJob {
    /// The poll of `fp`'s gates against the rendering `d`.
    fn new(cfg: &FleetConfig, fp: Arc<FleetPolicy>, d: &Desired) -> Self {
        Self {
            cfg: cfg.clone(),
            ns: fp.namespace().unwrap_or_default(),
            expected: expected(&fp, d),
            egress_mode: d.egress_mode,
            digests: (d.policy_sha256.clone(), d.managed_sha256.clone()),
            fp,
        }
    }
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

/// The report token; a missing Secret gives an empty token, so every gate answers
/// `unauthorized` and `Propagated` names the pods instead of failing the reconcile.
async fn read_token(client: &Client, cfg: &FleetConfig, ns: &str) -> String {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
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

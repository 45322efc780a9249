//! The controller loop: what brings a FleetPolicy to [`crate::reconcile`], and the upkeep of
//! what is kept per FleetPolicy.
//!
//! A FleetPolicy is reconciled when it changes, when a ConfigMap it owns changes, when a pod its
//! selector matches changes (which also makes its fleet poll due,
//! [`crate::fleet_poll::FleetPolls::pods_changed`]), when its fleet poll ends, and every
//! FleetPolicy when this replica becomes the leader or the cluster baselines change. At most
//! [`RECONCILES_IN_FLIGHT`] reconciles run at once, and a failed one is retried by
//! [`crate::reconcile::error_policy`]. The one pod watch also keeps the index the fleet polls
//! select their pods from. Every minute, the fleet gauges, poll state and written statuses of
//! FleetPolicies that no longer exist are dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt as _};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::Api;
use kube::core::{Selector, SelectorExt};
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{self, ObjectRef, Store, reflector};
use kube::runtime::{WatchStreamExt as _, watcher};
use tracing::warn;

use crate::crd::FleetPolicy;
use crate::desired::MANAGED_BY;
use crate::reconcile::{Context, error_policy, reconcile};

#[cfg(test)]
mod tests;

/// Reconciles running at once (renders and ConfigMap writes: short).
pub const RECONCILES_IN_FLIGHT: u16 = 16;
/// How often the fleet gauges of deleted FleetPolicies are removed.
const GAUGE_PRUNE_INTERVAL: Duration = Duration::from_secs(60);

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
    // pods every fleet poll selects its scrape targets from (see `fleet_poll::pods`).
    let index = ctx.polls().pods().clone();
    let pod_events = watcher(pods, watcher::Config::default().any_semantic())
        .inspect_ok(move |event| index.apply(event))
        .touched_objects();
    let controller = Controller::for_stream(trigger, store.clone())
        .with_config(kube::runtime::controller::Config::default().concurrency(RECONCILES_IN_FLIGHT))
        .trigger_backoff(crate::watch_backoff::WatchBackoff::default());
    tokio::spawn(prune_fleet_gauges(ctx.clone(), store.clone(), synced));
    // A finished fleet poll requeues its FleetPolicy, whose reconcile writes the status.
    let (polled_tx, polled_rx) = tokio::sync::mpsc::unbounded_channel();
    ctx.polls().notify(polled_tx);
    let polled = futures_util::stream::unfold(polled_rx, |mut rx| async move {
        rx.recv().await.map(|r| (r, rx))
    });
    let polls = ctx.polls().clone();
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

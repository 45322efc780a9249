//! The cluster baselines as this controller sees them: one reflector of every
//! `ClusterFleetPolicy`, shared by the reconciler (which renders each FleetPolicy under them
//! and reconciles every FleetPolicy when one changes) and the webhook (which raises the
//! injected egress mode to the baselines' floor).
//!
//! Fail closed: until the reflector has listed, [`ClusterBaselines::current`] answers `None`, the
//! reconciler writes nothing and the webhook does not serve. Once listed, the store keeps the
//! last state it saw while the watch reconnects, so an API hiccup never drops a baseline.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::{Stream, StreamExt};
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::{self, Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::crd::cluster_fleet_policy::ClusterFleetPolicy;
use crate::watch_backoff::WatchBackoff;

/// The shared view of every ClusterFleetPolicy.
#[derive(Clone)]
pub struct ClusterBaselines {
    store: Store<ClusterFleetPolicy>,
    synced: Arc<AtomicBool>,
}

impl std::fmt::Debug for ClusterBaselines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterBaselines")
            .field("synced", &self.synced.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

// === impl ClusterBaselines ===

impl ClusterBaselines {
    /// Start the reflector. Returns the view, a stream that yields once per change of any
    /// baseline (and once per relist), and the reflector's task.
    pub fn watch(
        client: Client,
    ) -> (
        Self,
        impl Stream<Item = ()> + Send + 'static,
        JoinHandle<()>,
    ) {
        let api: Api<ClusterFleetPolicy> = Api::all(client);
        let (store, writer) = reflector::store();
        let synced = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::unbounded_channel();
        let flag = synced.clone();
        let events = reflector(writer, watcher(api, watcher::Config::default()))
            .backoff(WatchBackoff::default());
        let task = tokio::spawn(async move {
            futures_util::pin_mut!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::InitDone) => {
                        if !flag.swap(true, Ordering::Relaxed) {
                            info!("baseline.synced");
                        }
                        let _ = tx.send(());
                    }
                    Ok(watcher::Event::Apply(b) | watcher::Event::Delete(b)) => {
                        info!(name = %b.metadata.name.as_deref().unwrap_or_default(), generation = b.metadata.generation, "baseline.changed");
                        let _ = tx.send(());
                    }
                    Ok(_) => {}
                    Err(e) => warn!(error = %e, "baseline.watch_failed"),
                }
            }
        });
        let changes =
            futures_util::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|()| ((), rx)) },
            );
        (Self { store, synced }, changes, task)
    }

    /// A view over a fixed list (tests and the offline renderer).
    pub fn fixed(baselines: Vec<ClusterFleetPolicy>) -> Self {
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Init);
        for b in baselines {
            writer.apply_watcher_event(&watcher::Event::InitApply(b));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        Self {
            store,
            synced: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Every baseline, or `None` until the first list has completed.
    pub fn current(&self) -> Option<Vec<ClusterFleetPolicy>> {
        self.synced.load(Ordering::Relaxed).then(|| {
            self.store
                .state()
                .iter()
                .map(|b| ClusterFleetPolicy::clone(b))
                .collect()
        })
    }

    /// Every baseline, waiting up to `limit` for the first list; `None` if it has not come.
    pub async fn current_within(
        &self,
        limit: std::time::Duration,
    ) -> Option<Vec<ClusterFleetPolicy>> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(all) = self.current() {
                return Some(all);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// True once the first list has completed (for `/ready`).
    pub fn synced(&self) -> Arc<AtomicBool> {
        self.synced.clone()
    }
}

#[cfg(test)]
mod tests;

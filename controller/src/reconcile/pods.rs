//! The pods a reconcile scrapes, kept by the controller's one pod watch.
//!
//! The pod watch that requeues FleetPolicies also feeds a reflector store, with each pod
//! trimmed to the few fields a reconcile reads (name, namespace, labels, deletion mark, pod
//! IP). A reconcile then selects its pods from memory instead of listing them from the API
//! server: at 10k pods and 500 FleetPolicies a LIST per reconcile held every selected pod's
//! whole object (spec, status, managed fields) in memory at once and loaded the API server
//! with a list per policy per resync. Until the watch's first list is complete the store is
//! not trusted and a reconcile lists, as before.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::ResourceExt;
use kube::core::{Selector, SelectorExt};
use kube::runtime::reflector::Store;

use crate::gate_poll::ScrapeTarget;
use crate::webhook::EGRESS_MODE_ANNOTATION;

#[cfg(test)]
mod tests;

/// The trimmed pods of the controller's watch, once it runs (shared by every reconcile).
#[derive(Clone, Debug, Default)]
pub struct PodIndex(Arc<OnceLock<Watched>>);

#[derive(Debug)]
struct Watched {
    store: Store<Pod>,
    synced: Arc<AtomicBool>,
}

// === impl PodIndex ===

impl PodIndex {
    /// Serve from `store` once `synced` is set (the watch's first list is in the store).
    /// Only the first call takes effect: one controller loop runs per process.
    pub fn attach(&self, store: Store<Pod>, synced: Arc<AtomicBool>) {
        let _ = self.0.set(Watched { store, synced });
    }

    /// The pods in `namespace` that `selector` selects, in name order (as a LIST answers), or
    /// `None` while there is no complete store to read them from (then the caller lists).
    pub fn selected(&self, namespace: &str, selector: &Selector) -> Option<Vec<Arc<Pod>>> {
        let watched = self.0.get()?;
        if !watched.synced.load(Ordering::Acquire) {
            return None;
        }
        let mut selected: Vec<Arc<Pod>> = watched
            .store
            .state()
            .into_iter()
            .filter(|p| p.namespace().as_deref() == Some(namespace))
            .filter(|p| selector.matches(p.labels()))
            .collect();
        selected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Some(selected)
    }
}

/// One scrape target per pod not being deleted: its name and, once it has one, its IP.
pub fn scrape_targets<'a>(pods: impl IntoIterator<Item = &'a Pod>, port: u16) -> Vec<ScrapeTarget> {
    pods.into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| ScrapeTarget {
            pod: p.name_any(),
            addr: p
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.as_deref())
                .and_then(|ip| ip.parse::<IpAddr>().ok())
                .map(|ip| SocketAddr::new(ip, port)),
        })
        .collect()
}

/// Each pod not being deleted with its egress mode annotation, for the capture check.
pub fn egress_modes<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Vec<(String, Option<String>)> {
    pods.into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let mode = p.annotations().get(EGRESS_MODE_ANNOTATION).cloned();
            (p.name_any(), mode)
        })
        .collect()
}

/// Keep only what the requeue mapper and a reconcile read: name, namespace, uid,
/// resourceVersion, labels, the egress mode annotation, the deletion mark and the pod IP.
pub fn trim(pod: &mut Pod) {
    let pod_ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone());
    pod.spec = None;
    pod.status = pod_ip.map(|ip| PodStatus {
        pod_ip: Some(ip),
        ..PodStatus::default()
    });
    let meta = &mut pod.metadata;
    meta.annotations = meta
        .annotations
        .take()
        .and_then(|mut all| all.remove_entry(EGRESS_MODE_ANNOTATION))
        .map(|(k, v)| [(k, v)].into());
    meta.managed_fields = None;
    meta.owner_references = None;
    meta.finalizers = None;
    meta.generate_name = None;
}

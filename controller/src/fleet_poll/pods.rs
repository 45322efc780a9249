//! The pods a fleet poll scrapes, kept by the controller's one pod watch.
//!
//! The pod watch that requeues FleetPolicies also feeds a [`PodIndex`]: per namespace and
//! pod name, only the few fields a poll reads (labels, the egress mode annotation, the
//! deletion mark, the pod IP). A poll then selects its pods from memory instead of listing
//! them from the API server: at 10k pods and 500 FleetPolicies a LIST per poll held every
//! selected pod's whole object (spec, status, managed fields) in memory at once and loaded the
//! API server with a list per policy per resync. Until the watch's first list is complete the
//! index is not trusted and a poll lists, as before.
//!
//! The index keeps a [`PodEntry`], not a `Pod`: a k8s-openapi `Pod` is about 2 KiB of mostly
//! empty fields even with its spec and status dropped (about 22 MiB at 10,000 pods, most of
//! the controller's heap), where an entry is a few hundred bytes.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::core::{Expression, Selector};
use kube::runtime::watcher;

use crate::gate_poll::ScrapeTarget;
use crate::webhook::EGRESS_MODE_ANNOTATION;

#[cfg(test)]
mod tests;

/// The pods of the controller's watch, once it listed (shared by every reconcile).
#[derive(Clone, Debug, Default)]
pub struct PodIndex(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    pods: RwLock<Pods>,
    synced: AtomicBool,
}

/// Namespace → pod name → entry.
type ByNamespace = HashMap<String, BTreeMap<String, PodEntry>>;

#[derive(Debug, Default)]
struct Pods {
    /// What reconciles read.
    live: ByNamespace,
    /// A (re-)list in progress: swapped in whole when it completes, as kube's reflector does,
    /// so a relist never shows a half-listed namespace.
    listing: Option<ByNamespace>,
}

/// What the index keeps of one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodEntry {
    /// Labels, sorted by key.
    labels: Box<[(String, String)]>,
    /// The pod IP, once it has one.
    ip: Option<IpAddr>,
    /// The egress mode annotation the webhook wrote.
    egress_mode: Option<String>,
    /// Whether the pod is being deleted.
    deleting: bool,
}

/// One selected pod, as [`PodIndex::selected`] returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectedPod {
    /// Pod name.
    pub name: String,
    /// The pod IP, once it has one.
    pub ip: Option<IpAddr>,
    /// The egress mode annotation.
    pub egress_mode: Option<String>,
    /// Whether the pod is being deleted.
    pub deleting: bool,
}

// === impl PodIndex ===

impl PodIndex {
    /// Apply one event of the pod watch, as a reflector store would: the index answers once
    /// the first list is complete, and a relist replaces it when complete.
    pub fn apply(&self, event: &watcher::Event<Pod>) {
        let mut pods = self.0.pods.write().unwrap_or_else(|p| p.into_inner());
        match event {
            watcher::Event::Apply(pod) => insert(&mut pods.live, pod),
            watcher::Event::Delete(pod) => {
                let ns = pod.namespace().unwrap_or_default();
                if let Some(names) = pods.live.get_mut(&ns) {
                    names.remove(&pod.name_any());
                    if names.is_empty() {
                        pods.live.remove(&ns);
                    }
                }
            }
            watcher::Event::Init => pods.listing = Some(ByNamespace::new()),
            watcher::Event::InitApply(pod) => insert(pods.listing.get_or_insert_default(), pod),
            watcher::Event::InitDone => {
                pods.live = pods.listing.take().unwrap_or_default();
                self.0.synced.store(true, Ordering::Release);
            }
        }
    }

    /// The pods in `namespace` that `selector` selects, in name order (as a LIST answers), or
    /// `None` while the watch has not listed (then the caller lists).
    pub fn selected(&self, namespace: &str, selector: &Selector) -> Option<Vec<SelectedPod>> {
        if !self.0.synced.load(Ordering::Acquire) {
            return None;
        }
        let expressions: Vec<Expression> = selector.clone().into_iter().collect();
        let pods = self.0.pods.read().unwrap_or_else(|p| p.into_inner());
        let Some(names) = pods.live.get(namespace) else {
            return Some(Vec::new());
        };
        Some(
            names
                .iter()
                .filter(|(_, p)| expressions.iter().all(|e| matches(e, &p.labels)))
                .map(|(name, p)| SelectedPod {
                    name: name.clone(),
                    ip: p.ip,
                    egress_mode: p.egress_mode.clone(),
                    deleting: p.deleting,
                })
                .collect(),
        )
    }
}

fn insert(into: &mut ByNamespace, pod: &Pod) {
    into.entry(pod.namespace().unwrap_or_default())
        .or_default()
        .insert(pod.name_any(), PodEntry::from_pod(pod));
}

// === impl PodEntry ===

impl PodEntry {
    /// What the index keeps of `pod`.
    pub fn from_pod(pod: &Pod) -> Self {
        Self {
            // A BTreeMap iterates in key order: the slice is sorted for `label`.
            labels: pod
                .labels()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            ip: pod_ip(pod),
            egress_mode: pod.annotations().get(EGRESS_MODE_ANNOTATION).cloned(),
            deleting: pod.metadata.deletion_timestamp.is_some(),
        }
    }
}

// === impl SelectedPod ===

impl SelectedPod {
    /// What a reconcile reads of `pod` (a listed pod, before the watch has listed).
    pub fn from_pod(pod: &Pod) -> Self {
        Self {
            name: pod.name_any(),
            ip: pod_ip(pod),
            egress_mode: pod.annotations().get(EGRESS_MODE_ANNOTATION).cloned(),
            deleting: pod.metadata.deletion_timestamp.is_some(),
        }
    }
}

fn pod_ip(pod: &Pod) -> Option<IpAddr> {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.as_deref())
        .and_then(|ip| ip.parse::<IpAddr>().ok())
}

/// The value of label `key` in `labels` (sorted by key).
fn label<'a>(labels: &'a [(String, String)], key: &str) -> Option<&'a str> {
    labels
        .binary_search_by(|(k, _)| k.as_str().cmp(key))
        .ok()
        .map(|i| labels[i].1.as_str())
}

/// Whether `labels` satisfy `e`: kube's `SelectorExt::matches` for one expression, on the
/// sorted slice the index keeps instead of a `BTreeMap`.
fn matches(e: &Expression, labels: &[(String, String)]) -> bool {
    match e {
        Expression::In(key, values) => label(labels, key).is_some_and(|v| values.contains(v)),
        Expression::NotIn(key, values) => label(labels, key).is_none_or(|v| !values.contains(v)),
        Expression::Exists(key) => label(labels, key).is_some(),
        Expression::DoesNotExist(key) => label(labels, key).is_none(),
        Expression::Equal(key, value) => label(labels, key) == Some(value.as_str()),
        Expression::NotEqual(key, value) => label(labels, key) != Some(value.as_str()),
    }
}

/// One scrape target per pod not being deleted: its name and, once it has one, its IP.
pub fn scrape_targets(pods: &[SelectedPod], port: u16) -> Vec<ScrapeTarget> {
    pods.iter()
        .filter(|p| !p.deleting)
        .map(|p| ScrapeTarget {
            pod: p.name.clone(),
            addr: p.ip.map(|ip| SocketAddr::new(ip, port)),
        })
        .collect()
}

/// Each pod not being deleted with its egress mode annotation, for the capture check.
pub fn egress_modes(pods: &[SelectedPod]) -> Vec<(String, Option<String>)> {
    pods.iter()
        .filter(|p| !p.deleting)
        .map(|p| (p.name.clone(), p.egress_mode.clone()))
        .collect()
}

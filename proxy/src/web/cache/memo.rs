//! The search memo: successful search responses kept in this process's memory for the cache TTL,
//! keyed by `(provider, normalised query, bucketed limit)`, with one vendor call per key at a time.
//!
//! The vendor is asked for the bucket (10, 20, 50 or 100 results), so a later call with a
//! smaller or nearby limit is a hit; the caller cuts the results to its own limit (the search
//! pipeline keeps the first `limit` hits). Only `Ok` responses are stored (and not one whose `success` is `false`).
//! A rescued response is never stored: wrap only the configured backend's call in
//! [`SearchMemo::get_or_fetch`] and run the rescue on its `Err`, outside the memo. Expiry runs on tokio's clock, so paused-time tests are exact.
//! Values are cloned on store and on hit (a deep copy for `serde_json::Value` and `Vec<SearchHit>`).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::policy::CachePolicy;

/// The result-count buckets a vendor is asked for.
pub(crate) const BUCKETS: [usize; 4] = [10, 20, 50, 100];

/// Unheld per-key locks are pruned once the lock table grows past this many.
pub(crate) const LOCK_TABLE_PRUNE_AT: usize = 256;

/// The memo key: provider, normalised query, bucket.
type MemoKey = (String, String, usize);

/// A response the memo can hold: cloned on store and on hit.
pub(crate) trait Memoizable: Clone {
    /// Whether this `Ok` response may be stored. Default: always.
    fn is_storable(&self) -> bool {
        true
    }
}

/// The per-process search memo over responses of type `T` (a JSON response by default, or
/// the vendor layer's `Vec<SearchHit>`). Share it behind an `Arc` (or inside the runtime).
#[derive(Debug)]
pub(crate) struct SearchMemo<T = Value> {
    enabled: bool,
    ttl: Duration,
    entries: Mutex<HashMap<MemoKey, (Instant, T)>>,
    locks: Mutex<HashMap<MemoKey, Arc<tokio::sync::Mutex<()>>>>,
}

// === impl Memoizable ===

impl Memoizable for Value {
    /// A JSON response saying `"success": false` is not stored.
    fn is_storable(&self) -> bool {
        self.get("success") != Some(&Value::Bool(false))
    }
}

impl<T: Clone> Memoizable for Vec<T> {}

// === impl SearchMemo ===

impl<T: Memoizable> SearchMemo<T> {
    /// A memo keeping responses for `ttl`; when `enabled` is false every call goes to the vendor.
    pub(crate) fn new(enabled: bool, ttl: Duration) -> Self {
        Self {
            enabled,
            ttl,
            entries: Mutex::new(HashMap::new()),
            locks: Mutex::new(HashMap::new()),
        }
    }

    /// The memo for the policy's `web.cache` (its switch and TTL cover the memo too).
    pub(crate) fn from_policy(policy: &CachePolicy) -> Self {
        Self::new(policy.enabled, policy.ttl)
    }

    /// The response for `(provider, query, limit)`: from the memo when a fresh one is held, else
    /// from `fetch(bucket(limit))`, stored when `Ok` and [`Memoizable::is_storable`]. Concurrent calls for one key make one
    /// fetch: the others wait and then hit. Returns the response and whether it was a hit; the
    /// caller slices it to `limit`.
    pub(crate) async fn get_or_fetch<F, Fut, E>(
        &self,
        provider: &str,
        query: &str,
        limit: usize,
        fetch: F,
    ) -> (Result<T, E>, bool)
    where
        F: FnOnce(usize) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let bucket = bucket(limit);
        if !self.enabled {
            return (fetch(bucket).await, false);
        }
        let key: MemoKey = (provider.to_owned(), normalize_query(query), bucket);
        if let Some(value) = self.fresh(&key) {
            return (Ok(value), true);
        }
        let lock = self.lock_for(&key);
        let held = lock.lock().await;
        // Another caller may have fetched while this one waited.
        if let Some(value) = self.fresh(&key) {
            return (Ok(value), true);
        }
        let result = fetch(bucket).await;
        if let Ok(value) = &result
            && value.is_storable()
        {
            self.store(key, value.clone());
        }
        drop(held);
        drop(lock);
        self.prune_locks();
        (result, false)
    }

    /// How many responses are held (expired ones included until the next store).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no response is held.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many per-key locks the table holds.
    #[cfg(test)]
    pub(crate) fn lock_count(&self) -> usize {
        self.locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn fresh(&self, key: &MemoKey) -> Option<T> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let (stored_at, value) = entries.get(key)?;
        (stored_at.elapsed() < self.ttl).then(|| value.clone())
    }

    fn store(&self, key: MemoKey, value: T) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        // Expired entries go opportunistically, on store.
        entries.retain(|_, (stored_at, _)| now.duration_since(*stored_at) < self.ttl);
        entries.insert(key, (now, value));
    }

    fn lock_for(&self, key: &MemoKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(locks.entry(key.clone()).or_default())
    }

    /// Drop locks nobody holds or waits on, once the table is past [`LOCK_TABLE_PRUNE_AT`].
    fn prune_locks(&self) {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        if locks.len() > LOCK_TABLE_PRUNE_AT {
            // Only the table's own reference left: no caller holds or awaits this lock.
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        }
    }
}

/// The bucket a limit is served from: the first of 10/20/50/100 that holds it; over 100 is 100.
pub(crate) fn bucket(limit: usize) -> usize {
    BUCKETS
        .iter()
        .copied()
        .find(|&b| limit <= b)
        .unwrap_or(BUCKETS[BUCKETS.len() - 1])
}

/// The query as the memo keys it: trimmed, lowercased, whitespace runs collapsed to one space.
pub(crate) fn normalize_query(query: &str) -> String {
    query
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Cut a search response to `limit` results: every array directly under `data` (`web`, `news`,
/// `images`), or `data` itself when it is the array. Other shapes are left alone.
#[cfg(test)]
pub(crate) fn slice_results(response: &mut Value, limit: usize) {
    match response.get_mut("data") {
        Some(Value::Array(items)) => items.truncate(limit),
        Some(Value::Object(groups)) => {
            for group in groups.values_mut() {
                if let Value::Array(items) = group {
                    items.truncate(limit);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;

//! What this pod spent today, per budget role (`main`, `delegation`, `cron`, `auxiliary`),
//! and the budgets checked against it before a call goes upstream.
//!
//! - **Days** are UTC days: spend resets at 00:00 UTC.
//! - **Dollars** add up each answered call's cost (usage × `llm.prices`); a call whose usage
//!   or price is unknown adds no dollars and is counted (`unknown_usage`, `unpriced`).
//! - **Tokens per minute** are the tokens of the calls answered in the last 60 seconds.
//! - Budgets are checked before a call, against what earlier calls used: a call is never cut
//!   off mid-answer, so the overshoot is at most the calls in flight when the cap is reached.
//! - The day's spend is kept in `llm.spendFile` (default `<store.root>/llm/spend.json`,
//!   the gate's own volume), written atomically at most twice a second after a change, so
//!   it survives a gate restart. A file that exists but cannot be read is an error that
//!   keeps the stricter state: every role with a dollar budget counts as spent until the day
//!   ends (the refusal says why), never as a fresh day.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::policy::llm::spend::{Budgets, budget_role};
use crate::report::time::format_iso_z;

/// Format version of the spend file.
const SPEND_VERSION: u32 = 1;
/// The rolling window of `tokensPerMinute`.
const MINUTE: u64 = 60;
/// Least time between two writes of the file.
const WRITE_EVERY: Duration = Duration::from_millis(500);

/// One role's spend today.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct RoleSpend {
    /// Dollars of the calls whose usage and price were known.
    pub(crate) usd: f64,
    /// Tokens of the calls whose usage was known.
    pub(crate) tokens: u64,
    /// Answered calls.
    pub(crate) calls: u64,
    /// Calls answered without usage (nothing counted for them).
    pub(crate) unknown_usage: u64,
    /// Calls with usage but no price for their model (tokens counted, no dollars).
    pub(crate) unpriced: u64,
}

/// The spend file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct SpendFile {
    version: u32,
    /// UTC day, `YYYY-MM-DD`.
    day: String,
    /// The file was unreadable earlier this day: budgets count as spent until it ends.
    #[serde(default)]
    corrupt: bool,
    roles: BTreeMap<String, RoleSpend>,
}

/// Why a call is over budget.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Exceeded {
    /// `pod` or `namespace`.
    pub(crate) scope: &'static str,
    /// The budget role.
    pub(crate) role: String,
    /// `daily_usd`, `tokens_per_minute` or `spend_file_unreadable`.
    pub(crate) limit: &'static str,
    /// What was used against the limit.
    pub(crate) used: f64,
    /// The limit.
    pub(crate) cap: f64,
    /// Seconds until the limit frees up (the next UTC day, or the minute window).
    pub(crate) retry_after: u64,
}

/// What one answered call adds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Charge {
    /// Its cost, when its usage and price are known.
    pub(crate) usd: Option<f64>,
    /// Its tokens, when its usage is known.
    pub(crate) tokens: Option<u64>,
}

#[derive(Debug, Default)]
struct Ledger {
    file: SpendFile,
    /// Role → (second, tokens) of the calls of the last minute.
    minute: BTreeMap<String, VecDeque<(u64, u64)>>,
}

/// The pod's spend, shared by every call of the route.
#[derive(Debug)]
pub(crate) struct SpendLedger {
    inner: Mutex<Ledger>,
    path: Option<PathBuf>,
    dirty: AtomicBool,
    wake: tokio::sync::Notify,
}

/// A snapshot of the day for reports and metrics.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct SpendSnapshot {
    /// UTC day.
    pub(crate) day: String,
    /// Whether the spend file was unreadable this day.
    pub(crate) corrupt: bool,
    /// Role → spend today.
    pub(crate) roles: BTreeMap<String, RoleSpend>,
    /// Role → tokens in the last minute.
    pub(crate) tokens_last_minute: BTreeMap<String, u64>,
}

/// The UTC day of Unix second `secs`.
pub(crate) fn utc_day(secs: u64) -> String {
    let iso = format_iso_z(secs as f64);
    iso.get(..10).unwrap_or(&iso).to_string()
}

/// Seconds from `secs` to the next 00:00 UTC.
fn to_next_day(secs: u64) -> u64 {
    86_400 - secs % 86_400
}

// === impl SpendLedger ===

impl SpendLedger {
    /// A ledger kept in memory only (tests, or a gate without a store).
    #[cfg(test)]
    pub(crate) fn in_memory() -> Self {
        Self {
            inner: Mutex::new(Ledger::default()),
            path: None,
            dirty: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
        }
    }

    /// The ledger of `path` as of Unix second `now`: today's spend when the file holds
    /// today, a fresh day when it holds another day or does not exist, and a day counted as
    /// spent when it exists but cannot be read (the error is logged, and returned).
    pub(crate) fn open(path: &Path, now: u64) -> (Self, Option<String>) {
        let today = utc_day(now);
        let (file, problem) = match std::fs::read(path) {
            Ok(bytes) => match serde_json::from_slice::<SpendFile>(&bytes) {
                Ok(f) if f.version == SPEND_VERSION && f.day == today => (f, None),
                Ok(f) if f.version == SPEND_VERSION => (fresh(&today), None),
                Ok(f) => (
                    unreadable(&today),
                    Some(format!("unknown version {}", f.version)),
                ),
                Err(e) => (unreadable(&today), Some(e.to_string())),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (fresh(&today), None),
            Err(e) => (unreadable(&today), Some(e.to_string())),
        };
        if let Some(why) = &problem {
            tracing::error!(
                event = "llm.spend_file_unreadable", path = %path.display(), error = %why,
                "the spend file cannot be read: every role with a dollar budget counts as spent until the UTC day ends"
            );
        }
        let ledger = Self {
            inner: Mutex::new(Ledger {
                file,
                minute: BTreeMap::new(),
            }),
            path: Some(path.to_path_buf()),
            dirty: AtomicBool::new(problem.is_some()),
            wake: tokio::sync::Notify::new(),
        };
        (ledger, problem)
    }

    fn with<T>(&self, now: u64, f: impl FnOnce(&mut Ledger) -> T) -> T {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let today = utc_day(now);
        if guard.file.day != today {
            // A new UTC day: yesterday's spend (and an unreadable file's penalty) ends.
            guard.file = fresh(&today);
            self.dirty.store(true, Ordering::Relaxed);
        }
        let horizon = now.saturating_sub(MINUTE);
        for window in guard.minute.values_mut() {
            while window.front().is_some_and(|(at, _)| *at <= horizon) {
                window.pop_front();
            }
        }
        f(&mut guard)
    }

    /// Whether a call of `role` may go out now: the first budget it is over, if any. The
    /// namespace budget is over when the controller says so for today.
    pub(crate) fn check(&self, role: &str, budgets: &Budgets, now: u64) -> Result<(), Exceeded> {
        let key = budget_role(role);
        if budgets.pod_for(key).is_none() && budgets.exhausted.is_none() {
            return Ok(());
        }
        let today = utc_day(now);
        if budgets.namespace_exhausted(key, &today) {
            let cap = budgets
                .namespace
                .get(key)
                .and_then(|b| b.daily_usd)
                .unwrap_or(0.0);
            return Err(Exceeded {
                scope: "namespace",
                role: key.to_string(),
                limit: "daily_usd",
                used: cap,
                cap,
                retry_after: to_next_day(now),
            });
        }
        let Some(budget) = budgets.pod_for(key) else {
            return Ok(());
        };
        self.with(now, |l| {
            let spent = l.file.roles.get(key).cloned().unwrap_or_default();
            if let Some(cap) = budget.daily_usd {
                if l.file.corrupt {
                    return Err(Exceeded {
                        scope: "pod",
                        role: key.to_string(),
                        limit: "spend_file_unreadable",
                        used: spent.usd,
                        cap,
                        retry_after: to_next_day(now),
                    });
                }
                if spent.usd >= cap {
                    return Err(Exceeded {
                        scope: "pod",
                        role: key.to_string(),
                        limit: "daily_usd",
                        used: spent.usd,
                        cap,
                        retry_after: to_next_day(now),
                    });
                }
            }
            if let Some(cap) = budget.tokens_per_minute {
                let window = l.minute.get(key);
                let used: u64 = window.map(|w| w.iter().map(|(_, t)| t).sum()).unwrap_or(0);
                if used >= cap {
                    let oldest = window.and_then(|w| w.front()).map_or(now, |(at, _)| *at);
                    return Err(Exceeded {
                        scope: "pod",
                        role: key.to_string(),
                        limit: "tokens_per_minute",
                        used: used as f64,
                        cap: cap as f64,
                        retry_after: (oldest + MINUTE).saturating_sub(now).max(1),
                    });
                }
            }
            Ok(())
        })
    }

    /// Add one answered call of `role`.
    pub(crate) fn record(&self, role: &str, charge: Charge, now: u64) {
        let key = budget_role(role).to_string();
        self.with(now, |l| {
            let spent = l.file.roles.entry(key.clone()).or_default();
            spent.calls += 1;
            match (charge.tokens, charge.usd) {
                (None, _) => spent.unknown_usage += 1,
                (Some(tokens), usd) => {
                    spent.tokens = spent.tokens.saturating_add(tokens);
                    match usd {
                        Some(usd) if usd.is_finite() && usd >= 0.0 => spent.usd += usd,
                        _ => spent.unpriced += 1,
                    }
                    l.minute.entry(key).or_default().push_back((now, tokens));
                }
            }
        });
        self.dirty.store(true, Ordering::Relaxed);
        self.wake.notify_one();
    }

    /// Today's spend per role, as of `now`.
    pub(crate) fn snapshot(&self, now: u64) -> SpendSnapshot {
        self.with(now, |l| SpendSnapshot {
            day: l.file.day.clone(),
            corrupt: l.file.corrupt,
            roles: l.file.roles.clone(),
            tokens_last_minute: l
                .minute
                .iter()
                .map(|(role, w)| (role.clone(), w.iter().map(|(_, t)| t).sum()))
                .collect(),
        })
    }

    /// Write the file now if anything changed since the last write.
    pub(crate) fn flush(&self) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if !self.dirty.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        let body = {
            let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            serde_json::to_vec_pretty(&guard.file).map_err(std::io::Error::other)?
        };
        crate::base::file_write::write_atomically(path, "spend", &body).inspect_err(|_| {
            // Kept in memory; the next change tries again.
            self.dirty.store(true, Ordering::Relaxed);
        })
    }

    /// Write the file after each change, at most every [`WRITE_EVERY`], until the runtime
    /// ends. A failed write (a full disk) is logged and retried at the next change; the
    /// spend stays in memory and budgets keep being enforced from it.
    pub(crate) async fn keep_written(self: std::sync::Arc<Self>) {
        if self.path.is_none() {
            return;
        }
        loop {
            if !self.dirty.load(Ordering::Relaxed) {
                self.wake.notified().await;
            }
            tokio::time::sleep(WRITE_EVERY).await;
            let me = std::sync::Arc::clone(&self);
            let written = tokio::task::spawn_blocking(move || me.flush()).await;
            if let Ok(Err(e)) = written {
                tracing::error!(
                    event = "llm.spend_file_write_failed", error = %e,
                    "the spend file could not be written; spend is kept in memory"
                );
            }
        }
    }
}

fn fresh(day: &str) -> SpendFile {
    SpendFile {
        version: SPEND_VERSION,
        day: day.to_string(),
        corrupt: false,
        roles: BTreeMap::new(),
    }
}

fn unreadable(day: &str) -> SpendFile {
    SpendFile {
        corrupt: true,
        ..fresh(day)
    }
}

#[cfg(test)]
mod tests;

//! The cache sweep: expired entries first, then the oldest until the folder is within both the
//! entry and the byte bound; plus temporary files abandoned by crashed writers.
//!
//! Any gate may sweep the shared folder at any time. The sweep works from one directory listing
//! and the files' own metadata (mtime is `fetched_at`, size is the entry's bytes), so it needs no
//! index and never opens an entry. Races are harmless by construction: a file that vanished
//! before its removal was removed by another gate (counted as `vanished`), and an entry rewritten
//! between the listing and the removal is lost, which costs one miss.
//!
//! **Trigger policy.** A put sweeps when, in this process, [`SweepPolicy::every_puts`] puts have
//! happened since the last sweep, or [`SweepPolicy::every`] has passed since it (checked on
//! puts only; the first put of a process sweeps). One thread per process sweeps at a time.
//! So the folder can exceed `max_entries` by at most `processes × (every_puts − 1)` entries (plus
//! puts in flight during a sweep), and `max_bytes` by as many entries' worth of bytes, until the
//! next sweep anywhere.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::key::ENTRY_SUFFIX;
use crate::base::clock::unix_millis;

/// A temporary file untouched this long belongs to a writer that died; the sweep removes it.
pub(crate) const TEMP_GRACE: Duration = Duration::from_secs(10 * 60);

/// When a put triggers a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepPolicy {
    /// Sweep after this many puts in this process. Default 32; 1 sweeps on every put.
    pub every_puts: u64,
    /// Sweep when this long has passed since this process's last sweep. Default 60 s.
    pub every: Duration,
}

/// What one sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SweepStats {
    /// Entry files listed.
    pub(crate) scanned: u64,
    /// Entries removed because they were past the TTL.
    pub(crate) expired: u64,
    /// Entries removed, oldest first, to get within the bounds.
    pub(crate) evicted: u64,
    /// Entries another gate removed first (a lost race, harmless).
    pub(crate) vanished: u64,
    /// Abandoned temporary files and planted symlinks removed.
    pub(crate) debris: u64,
    /// Removals that failed (read-only volume, permissions).
    pub failed: u64,
    /// Entries left, as this sweep saw them.
    pub remaining_entries: u64,
    /// Bytes left, as this sweep saw them.
    pub remaining_bytes: u64,
}

/// One entry file as listed: what the planner needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EntryMeta {
    /// The file.
    pub(crate) path: PathBuf,
    /// Its mtime (the entry's `fetched_at`), in Unix milliseconds.
    pub(crate) fetched_ms: u64,
    /// Its size in bytes.
    pub(crate) bytes: u64,
}

/// Why the planner removes an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Removal {
    /// Past the TTL (or implausibly far in the future).
    Expired,
    /// Oldest while the folder is over a bound.
    Evicted,
}

/// Per-process sweep trigger state (see the module docs).
#[derive(Debug)]
pub(crate) struct SweepTrigger {
    policy: SweepPolicy,
    puts: AtomicU64,
    last_ms: AtomicU64,
    running: AtomicBool,
}

/// Held while this process sweeps; dropping it lets the next sweep run.
#[derive(Debug)]
pub(crate) struct SweepClaim<'a> {
    running: &'a AtomicBool,
}

// === impl SweepPolicy ===

impl Default for SweepPolicy {
    fn default() -> Self {
        Self {
            every_puts: 32,
            every: Duration::from_secs(60),
        }
    }
}

// === impl SweepTrigger ===

impl SweepTrigger {
    pub(crate) fn new(policy: SweepPolicy) -> Self {
        Self {
            policy,
            puts: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
            running: AtomicBool::new(false),
        }
    }

    /// Count a put made at `now`; when a sweep is due and no other thread runs one, claim it.
    pub(crate) fn claim(&self, now: SystemTime) -> Option<SweepClaim<'_>> {
        let puts = self.puts.fetch_add(1, Ordering::Relaxed) + 1;
        let now_ms = unix_millis(now);
        let since = now_ms.saturating_sub(self.last_ms.load(Ordering::Relaxed));
        let due = puts >= self.policy.every_puts.max(1)
            || u128::from(since) >= self.policy.every.as_millis();
        if !due
            || self
                .running
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return None;
        }
        self.puts.store(0, Ordering::Relaxed);
        self.last_ms.store(now_ms, Ordering::Relaxed);
        Some(SweepClaim {
            running: &self.running,
        })
    }
}

impl Drop for SweepClaim<'_> {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Release);
    }
}

/// Sweep `dir` as of `now` with the given TTL and bounds.
pub(crate) fn sweep_dir(
    dir: &Path,
    now: SystemTime,
    ttl: Duration,
    max_entries: u64,
    max_bytes: u64,
) -> SweepStats {
    let mut stats = SweepStats::default();
    let entries = match list_entries(dir, now, &mut stats) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return stats,
        Err(_) => {
            stats.failed += 1;
            return stats;
        }
    };
    stats.scanned = entries.len() as u64;
    let plan = plan_sweep(&entries, unix_millis(now), ttl, max_entries, max_bytes);
    let mut removed = vec![false; entries.len()];
    for (index, why) in plan {
        let Some(entry) = entries.get(index) else {
            continue;
        };
        match fs::remove_file(&entry.path) {
            Ok(()) if why == Removal::Expired => stats.expired += 1,
            Ok(()) => stats.evicted += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => stats.vanished += 1,
            Err(_) => {
                stats.failed += 1;
                continue;
            }
        }
        removed[index] = true;
    }
    for (entry, gone) in entries.iter().zip(removed) {
        if !gone {
            stats.remaining_entries += 1;
            stats.remaining_bytes += entry.bytes;
        }
    }
    stats
}

/// Decide which entries go: every expired one, then the oldest (by `fetched_ms`, then path)
/// while more than `max_entries` remain or their bytes exceed `max_bytes`. Returns indexes
/// into `entries`.
pub(crate) fn plan_sweep(
    entries: &[EntryMeta],
    now_ms: u64,
    ttl: Duration,
    max_entries: u64,
    max_bytes: u64,
) -> Vec<(usize, Removal)> {
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let expired = |e: &EntryMeta| {
        now_ms.saturating_sub(e.fetched_ms) >= ttl_ms
            || e.fetched_ms.saturating_sub(now_ms) >= ttl_ms
    };
    let mut plan = Vec::new();
    let mut live: Vec<usize> = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        if expired(entry) {
            plan.push((index, Removal::Expired));
        } else {
            live.push(index);
        }
    }
    live.sort_by(|&a, &b| {
        (entries[a].fetched_ms, &entries[a].path).cmp(&(entries[b].fetched_ms, &entries[b].path))
    });
    let mut count = live.len() as u64;
    let mut bytes: u64 = live.iter().map(|&i| entries[i].bytes).sum();
    for index in live {
        if count <= max_entries && bytes <= max_bytes {
            break;
        }
        plan.push((index, Removal::Evicted));
        count -= 1;
        bytes -= entries[index].bytes;
    }
    plan
}

/// The entry files of `dir`; abandoned temporary files and symlinks are removed on the way.
fn list_entries(dir: &Path, now: SystemTime, stats: &mut SweepStats) -> io::Result<Vec<EntryMeta>> {
    let now_s = i64::try_from(unix_millis(now) / 1000).unwrap_or(i64::MAX);
    let grace_s = TEMP_GRACE.as_secs() as i64;
    let mut entries = Vec::new();
    for dirent in fs::read_dir(dir)? {
        let Ok(dirent) = dirent else { continue };
        let name = dirent.file_name();
        let name = name.to_string_lossy();
        let is_temp = name.starts_with('.') && name.ends_with(".tmp");
        if !is_temp && !name.ends_with(ENTRY_SUFFIX) {
            continue;
        }
        // Not following symlinks; a file gone by now was swept or replaced by another gate.
        let Ok(meta) = dirent.metadata() else {
            continue;
        };
        let path = dirent.path();
        // ctime, not mtime: a writer sets the temp file's mtime to `fetched_at` before renaming.
        let debris = meta.file_type().is_symlink()
            || (is_temp && now_s.saturating_sub(meta.ctime()) >= grace_s);
        if debris {
            if fs::remove_file(&path).is_ok() {
                stats.debris += 1;
            }
        } else if !is_temp && meta.file_type().is_file() {
            let fetched_ms = meta.modified().map_or(0, unix_millis);
            entries.push(EntryMeta {
                path,
                fetched_ms,
                bytes: meta.len(),
            });
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests;

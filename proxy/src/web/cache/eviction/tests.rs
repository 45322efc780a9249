//! Tests of the sweep: the planner, bounds by entries and by bytes, TTL, debris, concurrent
//! sweeps, and the trigger policy.

use std::fs::File;
use std::os::unix::fs::symlink;
use std::sync::Barrier;
use std::time::UNIX_EPOCH;

use proptest::prelude::*;

use super::*;
use crate::web::cache::{CacheSettings, DiskCache, NewEntry};

const T0_MS: u64 = 1_760_000_000_000;
const HOUR: Duration = Duration::from_secs(3600);

fn t(ms_after_t0: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(T0_MS + ms_after_t0)
}

fn meta(name: &str, fetched_ms: u64, bytes: u64) -> EntryMeta {
    EntryMeta {
        path: PathBuf::from(name),
        fetched_ms,
        bytes,
    }
}

/// One planner case: name, entry bound, byte bound, expected removals.
type PlanCase<'a> = (&'a str, u64, u64, &'a [(&'a str, Removal)]);

fn names(entries: &[EntryMeta], plan: &[(usize, Removal)]) -> Vec<(String, Removal)> {
    plan.iter()
        .map(|&(i, why)| (entries[i].path.display().to_string(), why))
        .collect()
}

#[test]
fn the_planner_removes_expired_then_oldest_past_the_bounds() {
    use Removal::{Evicted, Expired};
    let entries = [
        meta("c", 300, 10),
        meta("a", 100, 10),
        meta("old", 0, 10),
        meta("b", 200, 50),
        meta("future", 10_000_000, 10),
    ];
    let ttl = Duration::from_millis(1000);
    let cases: &[PlanCase<'_>] = &[
        (
            "within both bounds only the expired go",
            10,
            1000,
            &[("old", Expired), ("future", Expired)],
        ),
        (
            "the entry bound evicts the oldest",
            2,
            1000,
            &[("old", Expired), ("future", Expired), ("a", Evicted)],
        ),
        (
            "the byte bound evicts until the bytes fit",
            10,
            20,
            &[
                ("old", Expired),
                ("future", Expired),
                ("a", Evicted),
                ("b", Evicted),
            ],
        ),
        (
            "a zero byte bound empties the folder",
            10,
            0,
            &[
                ("old", Expired),
                ("future", Expired),
                ("a", Evicted),
                ("b", Evicted),
                ("c", Evicted),
            ],
        ),
    ];
    for (name, max_entries, max_bytes, want) in cases {
        let plan = plan_sweep(&entries, 1000, ttl, *max_entries, *max_bytes);
        let want: Vec<(String, Removal)> =
            want.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect();
        assert_eq!(names(&entries, &plan), want, "{name}");
    }
}

#[test]
fn ties_on_fetched_at_are_broken_by_path() {
    let entries = [meta("b", 5, 1), meta("a", 5, 1), meta("c", 5, 1)];
    let plan = plan_sweep(&entries, 5, HOUR, 1, u64::MAX);
    assert_eq!(
        names(&entries, &plan),
        vec![
            ("a".to_owned(), Removal::Evicted),
            ("b".to_owned(), Removal::Evicted)
        ],
        "equal times must evict in path order"
    );
}

proptest! {
    #[test]
    fn the_plan_always_ends_within_bounds_keeping_the_newest(
        files in prop::collection::vec((0u64..5000, 0u64..400), 0..60),
        max_entries in 0u64..40,
        max_bytes in 0u64..8000,
    ) {
        let entries: Vec<EntryMeta> = files.iter().enumerate()
            .map(|(i, &(ms, bytes))| meta(&format!("{i:03}"), ms, bytes)).collect();
        let plan = plan_sweep(&entries, 4000, Duration::from_millis(3000), max_entries, max_bytes);
        let removed: std::collections::HashSet<usize> = plan.iter().map(|&(i, _)| i).collect();
        prop_assert_eq!(removed.len(), plan.len(), "no entry may be planned twice");
        let kept: Vec<&EntryMeta> = entries.iter().enumerate()
            .filter(|(i, _)| !removed.contains(i)).map(|(_, e)| e).collect();
        prop_assert!(kept.len() as u64 <= max_entries);
        prop_assert!(kept.iter().map(|e| e.bytes).sum::<u64>() <= max_bytes);
        let oldest_kept = kept.iter().map(|e| (e.fetched_ms, e.path.clone())).min();
        for &(i, why) in &plan {
            let e = &entries[i];
            if why == Removal::Evicted {
                prop_assert!(e.fetched_ms > 1000, "an evicted entry must not be expired");
                if let Some(oldest) = &oldest_kept {
                    prop_assert!((e.fetched_ms, e.path.clone()) < *oldest, "eviction must take the oldest");
                }
            } else {
                prop_assert!(e.fetched_ms <= 1000, "only entries past the ttl may expire");
            }
        }
    }
}

fn settings(max_entries: u64, max_bytes: u64) -> CacheSettings {
    CacheSettings {
        ttl: HOUR,
        max_entries,
        max_bytes,
        sweep: SweepPolicy {
            every_puts: u64::MAX,
            every: Duration::from_secs(u64::MAX / 4),
        },
        ..CacheSettings::default()
    }
}

fn url(i: usize) -> String {
    format!("https://example.com/page/{i}")
}

fn fill(cache: &DiskCache, count: usize, content_bytes: usize) {
    for i in 0..count {
        let entry = NewEntry {
            url: url(i),
            provider: "direct".into(),
            content: "x".repeat(content_bytes),
            status: 200,
            textual: true,
            ..NewEntry::default()
        };
        cache
            .put_at(&entry, t(i as u64 * 1000))
            .expect("the entry must be stored");
    }
}

fn hits(cache: &DiskCache, count: usize, now: SystemTime) -> Vec<bool> {
    (0..count)
        .map(|i| cache.lookup_at(&url(i), "direct", now).outcome.is_hit())
        .collect()
}

#[test]
fn a_sweep_bounds_the_folder_by_entries() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let cache = DiskCache::new(dir.path(), settings(4, u64::MAX));
    fill(&cache, 10, 100);
    let stats = cache.sweep_at(t(20_000));
    assert_eq!(
        (stats.scanned, stats.evicted, stats.remaining_entries),
        (10, 6, 4),
        "six must go: {stats:?}"
    );
    let status = cache.status();
    assert_eq!(
        status.last_sweep,
        Some(stats),
        "the status must show the last sweep"
    );
    assert_eq!(
        status.volume_fault, None,
        "a healthy volume must show no fault"
    );
    let want: Vec<bool> = (0..10).map(|i| i >= 6).collect();
    assert_eq!(
        hits(&cache, 10, t(20_000)),
        want,
        "the four newest must remain"
    );
}

#[test]
fn a_sweep_bounds_the_folder_by_bytes() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let cache = DiskCache::new(dir.path(), settings(u64::MAX, 3_600));
    fill(&cache, 10, 1000);
    let stats = cache.sweep_at(t(20_000));
    assert!(
        stats.remaining_bytes <= 3_600,
        "the bytes must fit: {stats:?}"
    );
    assert_eq!(
        stats.remaining_entries, 3,
        "three entries of ~1.17 KB must fit: {stats:?}"
    );
    let on_disk: u64 = fs::read_dir(cache.dir())
        .expect("list")
        .map(|d| d.expect("dirent").metadata().expect("meta").len())
        .sum();
    assert_eq!(
        on_disk, stats.remaining_bytes,
        "the reported bytes must match the folder"
    );
    assert_eq!(
        hits(&cache, 10, t(20_000))[7..],
        [true, true, true],
        "the newest must remain"
    );
}

#[test]
fn a_sweep_removes_expired_entries() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let cache = DiskCache::new(dir.path(), settings(100, u64::MAX));
    fill(&cache, 5, 10);
    // Entry i was fetched at i s; at 1 h + 2.5 s entries 0, 1 and 2 are past the hour.
    let stats = cache.sweep_at(t(3_602_500));
    assert_eq!(
        (stats.expired, stats.remaining_entries),
        (3, 2),
        "three must expire: {stats:?}"
    );
}

#[test]
fn a_sweep_removes_abandoned_temporary_files_and_symlinks_only() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let cache = DiskCache::new(dir.path(), settings(100, u64::MAX));
    fill(&cache, 1, 10);
    let temp = cache.dir().join(".x.cache.md.1-2-3.tmp");
    File::create(&temp).expect("a temp file must be created");
    let link = cache.dir().join("evil-0000000000000000.cache.md");
    symlink("/etc/passwd", &link).expect("a symlink must be created");
    let unrelated = cache.dir().join("README");
    fs::write(&unrelated, b"keep").expect("an unrelated file must be written");
    let now = SystemTime::now();
    let fresh = sweep_dir(
        cache.dir(),
        now,
        Duration::from_secs(u64::MAX / 4),
        100,
        u64::MAX,
    );
    assert!(
        temp.exists(),
        "a fresh temporary file belongs to a live writer and must stay"
    );
    assert!(
        fs::symlink_metadata(&link).is_err(),
        "a planted symlink must go"
    );
    assert_eq!(fresh.debris, 1, "only the symlink is debris now: {fresh:?}");
    let later = sweep_dir(
        cache.dir(),
        now + TEMP_GRACE + Duration::from_secs(1),
        Duration::from_secs(u64::MAX / 4),
        100,
        u64::MAX,
    );
    assert!(!temp.exists(), "a temporary file past the grace must go");
    assert_eq!(
        (later.debris, later.remaining_entries),
        (1, 1),
        "the entry must stay: {later:?}"
    );
    assert!(
        unrelated.exists(),
        "files that are not entries must be left alone"
    );
}

#[test]
fn concurrent_sweeps_remove_each_entry_once_and_keep_the_newest() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let cache = DiskCache::new(dir.path(), settings(50, u64::MAX));
    fill(&cache, 200, 10);
    let barrier = Barrier::new(4);
    let all: Vec<SweepStats> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    cache.sweep_at(t(300_000))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a sweeper must not panic"))
            .collect()
    });
    let evicted: u64 = all.iter().map(|s| s.evicted).sum();
    let failed: u64 = all.iter().map(|s| s.failed).sum();
    assert_eq!(
        evicted, 150,
        "each surplus entry must be removed exactly once: {all:?}"
    );
    assert_eq!(
        failed, 0,
        "a lost race must not count as a failure: {all:?}"
    );
    let want: Vec<bool> = (0..200).map(|i| i >= 150).collect();
    assert_eq!(
        hits(&cache, 200, t(300_000)),
        want,
        "exactly the 50 newest must remain"
    );
}

#[test]
fn the_trigger_sweeps_every_n_puts_or_after_the_interval() {
    let trigger = SweepTrigger::new(SweepPolicy {
        every_puts: 3,
        every: Duration::from_secs(60),
    });
    let mut fired = Vec::new();
    // The first put of a process sweeps (the interval since "never" has passed).
    for (i, ms) in [
        0u64, 1_000, 2_000, 3_000, 4_000, 5_000, 6_000, 70_000, 71_000,
    ]
    .iter()
    .enumerate()
    {
        if trigger.claim(t(*ms)).is_some() {
            fired.push(i);
        }
    }
    assert_eq!(
        fired,
        vec![0, 3, 6, 7],
        "sweeps must fire on put 1, every third put, and after 60 s"
    );
}

#[test]
fn only_one_thread_of_a_process_sweeps_at_a_time() {
    let trigger = SweepTrigger::new(SweepPolicy {
        every_puts: 1,
        every: HOUR,
    });
    let first = trigger.claim(t(0));
    assert!(first.is_some(), "a due sweep must be claimed");
    assert!(
        trigger.claim(t(1)).is_none(),
        "a second claim while one runs must be refused"
    );
    drop(first);
    assert!(
        trigger.claim(t(2)).is_some(),
        "after the first ends, the next due sweep must run"
    );
}

#[test]
fn puts_sweep_by_the_trigger_policy() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let mut s = settings(2, u64::MAX);
    s.sweep = SweepPolicy {
        every_puts: 3,
        every: HOUR,
    };
    let cache = DiskCache::new(dir.path(), s);
    let count = || fs::read_dir(cache.dir()).expect("list").count();
    let mut seen = Vec::new();
    for i in 0..7 {
        fill_one(&cache, i);
        seen.push(count());
    }
    // Put 1 sweeps (first of the process), then puts 4 and 7.
    assert_eq!(
        seen,
        vec![1, 2, 3, 2, 3, 4, 2],
        "the folder must shrink on triggered puts only"
    );
}

fn fill_one(cache: &DiskCache, i: usize) {
    let entry = NewEntry {
        url: url(i),
        provider: "direct".into(),
        content: "y".into(),
        status: 200,
        textual: true,
        ..NewEntry::default()
    };
    cache
        .put_at(&entry, t(i as u64))
        .expect("the entry must be stored");
}

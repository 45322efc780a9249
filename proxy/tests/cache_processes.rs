//! The shared cache across processes and on real volumes: four processes hammering one folder,
//! a read-only volume and a full volume.
//!
//! Child processes are this test binary re-executed (`current_exe()` with `--exact <worker>`
//! and an env var naming the job), because cargo exposes no path for an example binary to an
//! integration test and building one from inside a test would contend for cargo's lock. The
//! hammer itself is `examples/cache_hammer.rs`, compiled into this binary as a module, so the
//! standalone example and the test run the same code. The worker entry points are no-ops in a
//! normal run.
//!
//! The volume tests need root and `unshare`: the child runs in a private mount namespace on a
//! fresh tmpfs (remounted read-only, or 64 KiB small). Without root they print a skip line.
#![cfg(test)]

use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use fleetgate_proxy::web::cache::{
    CacheOutcome, CacheSettings, DiskCache, NewEntry, NoCacheReason,
};

#[path = "../examples/cache_hammer.rs"]
mod cache_hammer;

use cache_hammer::{HammerConfig, HammerReport};

const HAMMER_ENV: &str = "FLEETGATE_HAMMER_DIR";
const NS_ENV: &str = "FLEETGATE_CACHE_NS_CASE";
const NS_DIR_ENV: &str = "FLEETGATE_CACHE_NS_DIR";
const REPORT_PREFIX: &str = "HAMMER_REPORT ";
const PROCESSES: u64 = 4;

fn hammer_config(dir: &Path) -> HammerConfig {
    HammerConfig {
        dir: dir.to_path_buf(),
        duration: Duration::from_millis(3000),
        keys: 20,
        max_entries: 5,
        max_bytes: 24 * 1024,
        every_puts: 2,
        max_body: 6000,
    }
}

fn run_self(test: &str, envs: &[(&str, &str)]) -> std::io::Result<Output> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", test, "--nocapture", "--test-threads", "1"]);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output()
}

/// Worker entry point of the hammer test; a no-op unless the parent set [`HAMMER_ENV`].
#[test]
fn hammer_worker_process() {
    let Ok(dir) = std::env::var(HAMMER_ENV) else {
        return;
    };
    let report = cache_hammer::hammer(&hammer_config(Path::new(&dir)));
    let line = serde_json::to_string(&report).expect("the report must serialise");
    // libtest prints "test <name> ... " without a newline before the test runs.
    println!("\n{REPORT_PREFIX}{line}");
}

#[test]
fn four_processes_hammering_one_folder_never_see_a_partial_entry() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let root = dir.path().to_str().expect("a utf-8 temp path").to_owned();
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            let root = root.clone();
            std::thread::spawn(move || run_self("hammer_worker_process", &[(HAMMER_ENV, &root)]))
        })
        .collect();
    let mut reports = Vec::new();
    for child in children {
        let out = child
            .join()
            .expect("the spawner must not panic")
            .expect("a worker must start");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "a worker must not crash: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout
            .lines()
            .find_map(|l| l.split_once(REPORT_PREFIX).map(|(_, report)| report))
            .expect("a worker must print its report");
        let report: HammerReport = serde_json::from_str(line).expect("the report must parse");
        reports.push(report);
    }
    let total = |f: fn(&HammerReport) -> u64| reports.iter().map(f).sum::<u64>();
    println!("hammer reports: {reports:?}");
    assert_eq!(
        total(|r| r.bad_hits),
        0,
        "no reader may see a partial or mixed entry"
    );
    assert_eq!(total(|r| r.corrupt), 0, "no reader may see a corrupt entry");
    assert_eq!(
        total(|r| r.other_bypass),
        0,
        "no lookup may bypass on a healthy volume"
    );
    assert_eq!(
        total(|r| r.put_failures),
        0,
        "no put may fail on a healthy volume"
    );
    assert!(
        total(|r| r.hits) > 100,
        "the workers must have read each other's entries"
    );
    assert!(total(|r| r.puts) > 100, "the workers must have written");
    check_final_folder(&dir.path().join("extract"), &reports);
}

/// The folder holds no temporary files and is within the bounds plus the documented slack:
/// each process may have put `every_puts - 1` entries since its last sweep.
fn check_final_folder(extract: &Path, reports: &[HammerReport]) {
    let cfg = hammer_config(extract);
    let slack_entries = PROCESSES * (cfg.every_puts - 1);
    let largest = reports.iter().map(|r| r.largest_file).max().unwrap_or(0);
    let (mut entries, mut bytes) = (0u64, 0u64);
    for dirent in fs::read_dir(extract).expect("the extract folder must exist") {
        let dirent = dirent.expect("a dirent must read");
        let name = dirent.file_name().to_string_lossy().into_owned();
        assert!(
            !name.ends_with(".tmp"),
            "no temporary file may be left: {name}"
        );
        entries += 1;
        bytes += dirent.metadata().expect("metadata").len();
    }
    assert!(
        entries <= cfg.max_entries + slack_entries,
        "{entries} entries must be within {} + {slack_entries}",
        cfg.max_entries
    );
    assert!(
        bytes <= cfg.max_bytes + slack_entries * largest,
        "{bytes} bytes must be within {} + {slack_entries} × {largest}",
        cfg.max_bytes
    );
    let cache = DiskCache::new(extract.parent().expect("a root"), settings_like(&cfg));
    let stats = cache.sweep();
    assert!(
        stats.remaining_entries <= cfg.max_entries && stats.remaining_bytes <= cfg.max_bytes,
        "one more sweep must bring the folder within the exact bounds: {stats:?}"
    );
}

fn settings_like(cfg: &HammerConfig) -> CacheSettings {
    CacheSettings {
        ttl: Duration::from_secs(3600),
        max_entries: cfg.max_entries,
        max_bytes: cfg.max_bytes,
        ..CacheSettings::default()
    }
}

/// Whether this process may create mount namespaces (root with `unshare` on the path).
fn can_unshare() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    root && Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

/// Run the namespace worker for `case` on a fresh tmpfs of `size` in a private mount namespace.
fn run_in_namespace(case: &str, size: &str) -> Option<Output> {
    if !can_unshare() {
        println!("skipped: the {case} volume test needs root and unshare (mount namespaces)");
        return None;
    }
    let exe = std::env::current_exe().expect("the test binary must have a path");
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let script = format!(
        "mount -t tmpfs -o size={size} tmpfs \"$1\" && exec \"$0\" --exact namespace_worker_process --nocapture --test-threads 1"
    );
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .arg(&exe)
        .arg(dir.path())
        .env(NS_ENV, case)
        .env(NS_DIR_ENV, dir.path())
        .output()
        .expect("unshare must start");
    Some(out)
}

fn assert_worker_passed(case: &str, out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the {case} worker must pass:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(&format!("NS_CASE_DONE {case}")),
        "the {case} worker must have run its checks:\n{stdout}"
    );
}

#[test]
fn a_read_only_volume_degrades_to_no_cache() {
    if let Some(out) = run_in_namespace("readonly", "1m") {
        assert_worker_passed("readonly", &out);
    }
}

#[test]
fn a_full_volume_degrades_to_no_cache() {
    if let Some(out) = run_in_namespace("full", "64k") {
        assert_worker_passed("full", &out);
    }
}

/// Worker entry point of the volume tests, inside the namespace; a no-op unless [`NS_ENV`] is set.
#[test]
fn namespace_worker_process() {
    let (Ok(case), Ok(dir)) = (std::env::var(NS_ENV), std::env::var(NS_DIR_ENV)) else {
        return;
    };
    let root = Path::new(&dir);
    match case.as_str() {
        "readonly" => read_only_checks(root),
        "full" => full_checks(root),
        other => panic!("unknown namespace case {other}"),
    }
    println!("NS_CASE_DONE {case}");
}

fn page(i: usize, bytes: usize) -> NewEntry {
    NewEntry {
        url: format!("https://volume.example/{i}"),
        provider: "direct".into(),
        title: format!("page {i}"),
        content: "v".repeat(bytes),
        status: 200,
        textual: true,
        ..NewEntry::default()
    }
}

fn read_only_checks(root: &Path) {
    let cache = DiskCache::new(root, CacheSettings::default());
    cache
        .put(&page(0, 100))
        .expect("a writable tmpfs must accept a put");
    let remount = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(root)
        .status()
        .expect("mount must start");
    assert!(remount.success(), "the tmpfs must remount read-only");
    assert_eq!(
        cache.put(&page(1, 100)),
        Err(NoCacheReason::VolumeUnwritable),
        "a put on a read-only volume must report volume_unwritable"
    );
    assert_eq!(
        cache.volume_fault(),
        Some(NoCacheReason::VolumeUnwritable),
        "the fault must show"
    );
    let hit = cache.lookup("https://volume.example/0", "direct");
    assert_eq!(
        hit.outcome,
        CacheOutcome::Hit,
        "entries must stay readable on a read-only volume"
    );
    let miss = cache.lookup("https://volume.example/1", "direct");
    assert_eq!(
        miss.outcome,
        CacheOutcome::Miss,
        "a refused put must leave a plain miss"
    );
    let stats = cache.sweep_at(SystemTime::now() + Duration::from_secs(86_400));
    assert!(
        stats.failed > 0 && stats.remaining_entries == 1,
        "a sweep must fail softly: {stats:?}"
    );
}

fn full_checks(root: &Path) {
    let cache = DiskCache::new(root, CacheSettings::default());
    let mut stored = Vec::new();
    let failure = (0..64).find_map(|i| match cache.put(&page(i, 16 * 1024)) {
        Ok(()) => {
            stored.push(i);
            None
        }
        Err(reason) => Some(reason),
    });
    assert_eq!(
        failure,
        Some(NoCacheReason::VolumeFull),
        "a full tmpfs must report volume_full"
    );
    assert!(
        !stored.is_empty(),
        "some entries must fit before the volume fills"
    );
    assert_eq!(
        cache.volume_fault(),
        Some(NoCacheReason::VolumeFull),
        "the fault must show"
    );
    let extract = root.join("extract");
    let debris: Vec<String> = fs::read_dir(&extract)
        .expect("list")
        .map(|d| {
            d.expect("dirent")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(
        debris.is_empty(),
        "a failed write must remove its temporary file: {debris:?}"
    );
    for i in &stored {
        let found = cache.lookup(&format!("https://volume.example/{i}"), "direct");
        assert!(
            found.outcome.is_hit(),
            "entry {i} must stay readable on a full volume"
        );
    }
    let first = extract.join(
        fleetgate_proxy::web::cache::CacheKey::new(
            "https://volume.example/0",
            "markdown",
            "direct",
        )
        .file_name(),
    );
    fs::remove_file(first).expect("an entry must be removable");
    cache
        .put(&page(99, 1000))
        .expect("freed space must accept a put again");
    assert_eq!(
        cache.volume_fault(),
        None,
        "a successful put must clear the fault"
    );
}

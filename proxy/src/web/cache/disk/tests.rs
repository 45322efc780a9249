//! Tests of the disk cache: round trips, TTL edges, never-cache rules, corrupt entries, volume
//! faults. Multi-process and namespace-backed volume tests live in `tests/cache_processes.rs`.

use std::os::unix::fs::symlink;
use std::sync::Mutex as StdMutex;

use proptest::prelude::*;

use super::*;
use crate::web::cache::SweepPolicy;

const URL: &str = "https://example.com/article";
const T0_MS: u64 = 1_760_000_000_123;

fn t(ms_after_t0: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(T0_MS + ms_after_t0)
}

fn settings() -> CacheSettings {
    CacheSettings {
        // No automatic sweep in these tests unless one asks for it.
        sweep: SweepPolicy {
            every_puts: u64::MAX,
            every: Duration::from_secs(u64::MAX / 4),
        },
        ..CacheSettings::default()
    }
}

fn page(url: &str, content: &str) -> NewEntry {
    NewEntry {
        url: url.to_owned(),
        final_url: String::new(),
        provider: "firecrawl".to_owned(),
        title: "A title\nwith a newline".to_owned(),
        content: content.to_owned(),
        status: 200,
        textual: true,
        rescued: false,
        hops: Vec::new(),
    }
}

fn cache_in(dir: &tempfile::TempDir) -> DiskCache {
    DiskCache::new(dir.path(), settings())
}

fn entry_path(cache: &DiskCache, url: &str) -> PathBuf {
    cache
        .dir()
        .join(CacheKey::new(url, FORMAT_MARKDOWN, "firecrawl").file_name())
}

#[test]
fn a_put_entry_is_a_hit_with_its_age() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let cache = cache_in(&dir);
    cache
        .put_at(&page(URL, "# Hello\n\nbody ✓"), t(0))
        .expect("a cacheable page must be stored");
    let found = cache.lookup_at(URL, "firecrawl", t(61_500));
    assert_eq!(
        found.outcome,
        CacheOutcome::Hit,
        "a fresh entry must be a hit"
    );
    let entry = found.entry.expect("a hit must carry the entry");
    assert_eq!(
        entry.content, "# Hello\n\nbody ✓",
        "content must round-trip"
    );
    assert_eq!(
        entry.title, "A title\nwith a newline",
        "the title must round-trip"
    );
    assert_eq!(
        entry.final_url, URL,
        "no redirect means final_url is the url"
    );
    assert_eq!(
        entry.fetched_at,
        t(0),
        "fetched_at must keep millisecond precision"
    );
    assert_eq!(
        entry.age_secs(),
        61,
        "the age must be whole seconds since fetched_at"
    );
    let text = fs::read_to_string(entry_path(&cache, URL)).expect("the entry file must exist");
    let header: serde_json::Value =
        serde_json::from_str(text.lines().next().expect("a header line must exist"))
            .expect("the header must be JSON");
    for field in ["url", "title", "provider", "fetched_at", "status"] {
        assert!(header.get(field).is_some(), "the header must carry {field}");
    }
}

#[test]
fn ttl_edges_and_clock_skew() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let cache = cache_in(&dir);
    cache
        .put_at(&page(URL, "x"), t(20 * 60 * 1000))
        .expect("the page must be stored");
    let ttl_ms = 20 * 60 * 1000;
    let cases = [
        (
            "one millisecond before the ttl",
            t(ttl_ms + ttl_ms - 1),
            CacheOutcome::Hit,
        ),
        ("exactly the ttl", t(ttl_ms + ttl_ms), CacheOutcome::Stale),
        ("long after", t(10 * ttl_ms), CacheOutcome::Stale),
        (
            "a writer clock slightly ahead",
            t(ttl_ms - 5_000),
            CacheOutcome::Hit,
        ),
        (
            "a writer clock a whole ttl ahead",
            t(0),
            CacheOutcome::Stale,
        ),
    ];
    for (name, now, want) in cases {
        let found = cache.lookup_at(URL, "firecrawl", now);
        assert_eq!(found.outcome, want, "{name}: the outcome must be {want:?}");
        assert_eq!(
            found.entry.is_some(),
            want.is_hit(),
            "{name}: only a hit carries the entry"
        );
    }
    let skewed = cache.lookup_at(URL, "firecrawl", t(ttl_ms - 5_000));
    assert_eq!(
        skewed.entry.map(|e| e.age),
        Some(Duration::ZERO),
        "a future fetched_at must read as age zero"
    );
}

#[test]
fn misses_and_bypasses_on_lookup() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let cache = cache_in(&dir);
    assert_eq!(
        cache.lookup_at(URL, "firecrawl", t(0)).outcome,
        CacheOutcome::Miss,
        "a cache without its folder yet must miss"
    );
    cache
        .put_at(&page(URL, "x"), t(0))
        .expect("the page must be stored");
    let disabled = DiskCache::new(
        dir.path(),
        CacheSettings {
            enabled: false,
            ..settings()
        },
    );
    let cases = [
        (
            "another provider",
            URL,
            "direct",
            &cache,
            CacheOutcome::Miss,
        ),
        (
            "another url",
            "https://example.com/other",
            "firecrawl",
            &cache,
            CacheOutcome::Miss,
        ),
        (
            "a disabled cache",
            URL,
            "firecrawl",
            &disabled,
            CacheOutcome::Bypass(NoCacheReason::Disabled),
        ),
        (
            "a loopback url",
            "http://127.0.0.1/x",
            "firecrawl",
            &cache,
            CacheOutcome::Bypass(NoCacheReason::PrivateAddress),
        ),
    ];
    for (name, url, provider, cache, want) in cases {
        assert_eq!(
            cache.lookup_at(url, provider, t(1)).outcome,
            want,
            "{name}: the lookup must be {want:?}"
        );
    }
}

#[test]
fn an_entry_under_a_colliding_name_for_another_url_is_a_miss_and_kept() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let cache = cache_in(&dir);
    let other = "https://example.com/other";
    cache
        .put_at(&page(other, "other page"), t(0))
        .expect("the page must be stored");
    // Simulate a 64-bit collision: the other url's entry sits under this url's name.
    fs::rename(entry_path(&cache, other), entry_path(&cache, URL)).expect("rename must work");
    assert_eq!(
        cache.lookup_at(URL, "firecrawl", t(1)).outcome,
        CacheOutcome::Miss,
        "an entry naming another url must not be served"
    );
    assert!(
        entry_path(&cache, URL).exists(),
        "a valid entry of another key must not be removed"
    );
}

#[test]
fn never_cache_rules_on_put() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let cache = DiskCache::new(
        dir.path(),
        CacheSettings {
            exempt_hosts: vec!["*.exempt.org".into()],
            ..settings()
        },
    );
    let big_ascii = "a".repeat(MAX_CACHED_CHARS + 1);
    let with = |f: &dyn Fn(&mut NewEntry)| {
        let mut e = page(URL, "content");
        f(&mut e);
        e
    };
    let cases: Vec<(&str, NewEntry, Result<(), NoCacheReason>)> = vec![
        ("a plain page", with(&|_| {}), Ok(())),
        ("an unknown status", with(&|e| e.status = 0), Ok(())),
        ("a 2xx status", with(&|e| e.status = 203), Ok(())),
        (
            "a rescued page",
            with(&|e| e.rescued = true),
            Err(NoCacheReason::Rescued),
        ),
        (
            "a 404 page",
            with(&|e| e.status = 404),
            Err(NoCacheReason::ErrorRow),
        ),
        (
            "a 500 page",
            with(&|e| e.status = 500),
            Err(NoCacheReason::ErrorRow),
        ),
        (
            "a redirect status",
            with(&|e| e.status = 302),
            Err(NoCacheReason::ErrorRow),
        ),
        (
            "a binary body",
            with(&|e| e.textual = false),
            Err(NoCacheReason::NotText),
        ),
        (
            "an empty page",
            with(&|e| e.content.clear()),
            Err(NoCacheReason::EmptyContent),
        ),
        (
            "a page over 2,000,000 characters",
            with(&|e| e.content = big_ascii.clone()),
            Err(NoCacheReason::TooLarge),
        ),
        (
            "a page over 2,000,000 bytes but not characters",
            with(&|e| e.content = "€".repeat(700_000)),
            Ok(()),
        ),
        (
            "a local url",
            with(&|e| e.url = "http://localhost/".into()),
            Err(NoCacheReason::LocalHost),
        ),
        (
            "a redirect into an exempt host",
            with(&|e| e.final_url = "https://a.exempt.org/".into()),
            Err(NoCacheReason::ExemptHost),
        ),
        (
            "a redirect into a private address",
            with(&|e| e.final_url = "http://10.0.0.1/".into()),
            Err(NoCacheReason::PrivateAddress),
        ),
    ];
    for (name, entry, want) in cases {
        let _ = fs::remove_dir_all(cache.dir());
        assert_eq!(
            cache.put_at(&entry, t(0)),
            want,
            "{name}: the put must be {want:?}"
        );
        let stored = entry_path(&cache, &entry.url).exists();
        assert_eq!(
            stored,
            want.is_ok(),
            "{name}: a file must exist exactly when stored"
        );
    }
    let disabled = DiskCache::new(
        dir.path(),
        CacheSettings {
            enabled: false,
            ..settings()
        },
    );
    assert_eq!(
        disabled.put_at(&page(URL, "x"), t(0)),
        Err(NoCacheReason::Disabled),
        "a disabled cache must refuse puts"
    );
}

#[test]
fn a_write_leaves_no_temporary_file_and_sets_mtime_to_fetched_at() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let cache = cache_in(&dir);
    cache
        .put_at(&page(URL, "one"), t(0))
        .expect("the first put must work");
    cache
        .put_at(&page(URL, "two"), t(5))
        .expect("an overwrite must work");
    let names: Vec<String> = fs::read_dir(cache.dir())
        .expect("the folder must be listable")
        .map(|d| {
            d.expect("a dirent must read")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        names.len(),
        1,
        "only the entry must remain, found {names:?}"
    );
    let mtime = fs::metadata(entry_path(&cache, URL))
        .and_then(|m| m.modified())
        .expect("the entry must have an mtime");
    assert_eq!(mtime, t(5), "the mtime must be the latest fetched_at");
    let hit = cache
        .lookup_at(URL, "firecrawl", t(6))
        .entry
        .expect("the entry must hit");
    assert_eq!(hit.content, "two", "the last writer must win");
}

/// One corrupt-entry case: its name and how it damages the file at the path.
type Damage = (&'static str, fn(&Path));

#[test]
fn corrupt_entries_are_misses_and_removed() {
    let cases: &[Damage] = &[
        ("a header that is not json", |p| {
            rewrite_header(p, "not json")
        }),
        ("no header line at all", |p| {
            fs::write(p, b"just text").expect("write")
        }),
        ("an empty file", |p| fs::write(p, b"").expect("write")),
        ("a truncated body", |p| {
            let bytes = fs::read(p).expect("read");
            fs::write(p, &bytes[..bytes.len() - 3]).expect("write");
        }),
        ("a body longer than the header says", |p| {
            let mut bytes = fs::read(p).expect("read");
            bytes.extend_from_slice(b"tail");
            fs::write(p, bytes).expect("write");
        }),
        ("invalid utf-8 in the body", |p| {
            let mut bytes = fs::read(p).expect("read");
            let n = bytes.len();
            bytes[n - 2] = 0xff;
            fs::write(p, bytes).expect("write");
        }),
        ("an unknown layout version", |p| {
            edit_header(p, "\"v\":1", "\"v\":9")
        }),
        ("a negative fetched_at", |p| {
            edit_header(p, "\"fetched_at\":", "\"fetched_at\":-")
        }),
        ("a missing field", |p| {
            edit_header(p, "\"provider\":", "\"provider_x\":")
        }),
        ("an oversized file", |p| {
            let file = OpenOptions::new().write(true).open(p).expect("open");
            file.set_len(MAX_ENTRY_BYTES + 1).expect("set_len");
        }),
        ("a symlink planted as the entry", |p| {
            let target = p.with_extension("target");
            fs::rename(p, &target).expect("rename");
            symlink(&target, p).expect("symlink");
        }),
        // Nobody writes to it: a blocking open would park the lookup's thread for good.
        ("a FIFO planted as the entry", |p| {
            fs::remove_file(p).expect("remove");
            let made = std::process::Command::new("mkfifo")
                .arg(p)
                .status()
                .expect("mkfifo runs");
            assert!(made.success(), "mkfifo");
        }),
    ];
    for (name, damage) in cases {
        let dir = tempfile::tempdir().expect("a temp dir must be created");
        let cache = cache_in(&dir);
        cache
            .put_at(&page(URL, "héllo wörld"), t(0))
            .expect("the page must be stored");
        let path = entry_path(&cache, URL);
        damage(&path);
        let found = cache.lookup_at(URL, "firecrawl", t(1));
        assert_eq!(
            found.outcome,
            CacheOutcome::Bypass(NoCacheReason::CorruptEntry),
            "{name}: the lookup must report corrupt_entry"
        );
        assert!(found.entry.is_none(), "{name}: nothing must be served");
        assert!(
            fs::symlink_metadata(&path).is_err(),
            "{name}: the entry must be removed"
        );
        cache
            .put_at(&page(URL, "fresh"), t(2))
            .expect("a new put must replace it");
        assert!(
            cache.lookup_at(URL, "firecrawl", t(3)).outcome.is_hit(),
            "{name}: it must heal"
        );
    }
}

fn rewrite_header(path: &Path, header: &str) {
    let text = fs::read_to_string(path).expect("read");
    let (_, body) = text.split_once('\n').expect("a header line");
    fs::write(path, format!("{header}\n{body}")).expect("write");
}

fn edit_header(path: &Path, from: &str, to: &str) {
    let text = fs::read_to_string(path).expect("read");
    assert!(text.contains(from), "the header must contain {from}");
    fs::write(path, text.replacen(from, to, 1)).expect("write");
}

#[test]
fn an_unusable_volume_degrades_to_no_cache() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    // A root below a regular file: every create fails with ENOTDIR, as on a broken mount.
    let blocker = dir.path().join("volume");
    fs::write(&blocker, b"not a directory").expect("the blocker must be written");
    let cache = DiskCache::new(&blocker, settings());
    assert_eq!(
        cache.put_at(&page(URL, "x"), t(0)),
        Err(NoCacheReason::VolumeUnwritable),
        "a root under a file must be unwritable"
    );
    assert_eq!(
        cache.volume_fault(),
        Some(NoCacheReason::VolumeUnwritable),
        "the fault must show"
    );
    assert_eq!(
        cache.lookup_at(URL, "firecrawl", t(1)).outcome,
        CacheOutcome::Bypass(NoCacheReason::VolumeUnreadable),
        "the lookup must bypass, not fail"
    );
    fs::remove_file(&blocker).expect("the blocker must be removed");
    cache
        .put_at(&page(URL, "x"), t(2))
        .expect("a repaired volume must accept puts");
    assert_eq!(
        cache.volume_fault(),
        None,
        "a successful put must clear the fault"
    );
}

#[test]
fn a_symlinked_extract_folder_is_refused() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let elsewhere = tempfile::tempdir().expect("a second temp dir must be created");
    symlink(elsewhere.path(), dir.path().join(EXTRACT_SUBDIR)).expect("symlink must work");
    let cache = cache_in(&dir);
    assert_eq!(
        cache.put_at(&page(URL, "x"), t(0)),
        Err(NoCacheReason::VolumeUnwritable),
        "a symlinked folder must not be written through"
    );
    assert_eq!(
        fs::read_dir(elsewhere.path()).expect("list").count(),
        0,
        "nothing must land in the symlink target"
    );
}

#[test]
fn io_errors_map_to_volume_reasons() {
    let cases = [
        (libc::EROFS, NoCacheReason::VolumeUnwritable),
        (libc::EACCES, NoCacheReason::VolumeUnwritable),
        (libc::EPERM, NoCacheReason::VolumeUnwritable),
        (libc::ENOTDIR, NoCacheReason::VolumeUnwritable),
        (libc::ENOSPC, NoCacheReason::VolumeFull),
        (libc::EDQUOT, NoCacheReason::VolumeFull),
        (libc::EIO, NoCacheReason::VolumeError),
    ];
    for (errno, want) in cases {
        assert_eq!(
            volume_reason(&io::Error::from_raw_os_error(errno)),
            want,
            "errno {errno} must map to {want:?}"
        );
    }
}

/// Captured log output for one test.
#[derive(Clone, Default)]
struct Captured(Arc<StdMutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .expect("the log buffer must lock")
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_lasting_volume_fault_is_logged_once_a_minute() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let blocker = dir.path().join("volume");
    fs::write(&blocker, b"x").expect("the blocker must be written");
    let cache = DiskCache::new(&blocker, settings());
    let logs = Captured::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        for ms in [0, 1_000, 30_000, 61_000] {
            let _ = cache.put_at(&page(URL, "x"), t(ms));
        }
    });
    let text = String::from_utf8(logs.0.lock().expect("lock").clone()).expect("utf-8 logs");
    let warnings = text.matches("cache volume degraded").count();
    assert_eq!(
        warnings, 2,
        "the fault must be logged at 0 s and again after a minute:\n{text}"
    );
    assert!(
        text.contains("code=\"volume_unwritable\"") || text.contains("code=volume_unwritable"),
        "the log line must carry the code:\n{text}"
    );
}

#[tokio::test]
async fn put_async_stores_from_the_blocking_pool() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let cache = cache_in(&dir);
    cache
        .put_async(page(URL, "async body"))
        .await
        .expect("the async put must store");
    let hit = cache.lookup(URL, "firecrawl");
    assert_eq!(
        hit.entry.map(|e| e.content),
        Some("async body".to_owned()),
        "the async put must be visible to a lookup"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_content_round_trips(content in "\\PC{1,400}", title in "\\PC{0,40}", path in "[a-z0-9/]{0,20}") {
        let dir = tempfile::tempdir().expect("a temp dir must be created");
        let cache = cache_in(&dir);
        let url = format!("https://example.com/{path}");
        let mut entry = page(&url, &content);
        entry.title = title.clone();
        cache.put_at(&entry, t(0)).expect("a cacheable page must be stored");
        let hit = cache.lookup_at(&url, "firecrawl", t(1)).entry.expect("it must hit");
        prop_assert_eq!(hit.content, content);
        prop_assert_eq!(hit.title, title);
    }
}

#[test]
fn the_hops_round_trip_and_an_entry_without_them_is_not_served() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let cache = cache_in(&dir);
    let mut entry = page(URL, "redirected body");
    entry.final_url = "https://moved.example.com/final".to_owned();
    entry.hops = vec![
        "https://cdn.example.com/hop".to_owned(),
        "https://moved.example.com/final".to_owned(),
    ];
    cache.put_at(&entry, t(0)).expect("stored");
    let found = cache.lookup_at(URL, "firecrawl", t(1_000));
    assert_eq!(found.outcome, CacheOutcome::Hit);
    assert_eq!(found.entry.expect("hit").hops, entry.hops);

    // The same entry as an older gate wrote it, without `hops`: never served, never deleted.
    let path = entry_path(&cache, URL);
    let bytes = fs::read_to_string(&path).expect("entry");
    let (header, body) = bytes.split_once('\n').expect("header line");
    let mut header: serde_json::Value = serde_json::from_str(header).expect("json header");
    header.as_object_mut().expect("object").remove("hops");
    fs::write(&path, format!("{header}\n{body}")).expect("rewritten");
    let found = cache.lookup_at(URL, "firecrawl", t(1_000));
    assert_eq!(
        found.outcome,
        CacheOutcome::Bypass(NoCacheReason::UnrecordedHops)
    );
    assert!(found.entry.is_none());
    assert!(path.exists(), "the entry is left for the sweep");
}

#[test]
fn reading_an_entry_by_its_length_gets_every_byte_of_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("f");
    for (content, claimed) in [
        (&b""[..], 0),
        (b"exact", 5),
        (b"grown past its length", 5),
        (b"short", 9),
    ] {
        fs::write(&path, content).expect("writable");
        let mut file = File::open(&path).expect("openable");
        let read = read_known_len(&mut file, claimed).expect("readable");
        assert_eq!(read, content, "claimed {claimed}");
    }
    let mut folder = File::open(dir.path()).expect("a folder opens read-only");
    assert_eq!(
        read_known_len(&mut folder, 4096)
            .expect_err("a folder is not read")
            .kind(),
        io::ErrorKind::IsADirectory
    );
}

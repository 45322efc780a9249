//! [`DiskCache`]: lookup and atomic put of extract entries on the shared volume.
//!
//! An entry is one file, `<root>/extract/<host>-<16 hex>.cache.md`: a JSON header line (`url`,
//! `title`, `provider`, `fetched_at` in Unix seconds, `status`, plus `format`, `final_url`, `hops`,
//! `bytes` and the layout version `v`), then the markdown. A put writes a fresh temporary file
//! in the same directory (`O_CREAT|O_EXCL|O_NOFOLLOW`), sets its mtime to `fetched_at`, fsyncs
//! it and renames it over the entry, so a reader on any pod opens either the old or the new
//! complete file. A lookup re-checks everything it reads (header, byte count, UTF-8, that the
//! header names the same url and provider): a broken file is a `corrupt_entry` miss and is
//! removed best-effort, never an error to the caller. A volume that refuses writes or is full
//! makes `put` return `volume_unwritable` / `volume_full` and logs one warning (at most once a
//! minute while it lasts); the gate then simply runs without a cache.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::cacheable::{self, ExemptHosts};
use super::eviction::{self, SweepStats, SweepTrigger};
use super::key::{CacheKey, FORMAT_MARKDOWN};
use super::{CacheOutcome, CacheSettings, NoCacheReason};

/// Name of the cache directory under the volume root.
pub(crate) const EXTRACT_SUBDIR: &str = "extract";

/// Pages over this many characters are never cached (a capped copy must not be served whole).
pub(crate) const MAX_CACHED_CHARS: usize = 2_000_000;

/// Longest header line accepted, in bytes.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Largest entry file a lookup reads: the character cap at 4 bytes each, plus the header.
const MAX_ENTRY_BYTES: u64 = (MAX_CACHED_CHARS * 4 + MAX_HEADER_BYTES + 1) as u64;

/// Layout version written in every header.
const LAYOUT_VERSION: u32 = 1;

/// How often a lasting volume fault is logged again.
const FAULT_LOG_EVERY: Duration = Duration::from_secs(60);

/// The extract cache on one volume. Cheap to clone (one shared inner); safe to use from many
/// threads, and from many processes on the same folder.
#[derive(Clone, Debug)]
pub struct DiskCache {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    settings: CacheSettings,
    exempt: ExemptHosts,
    trigger: SweepTrigger,
    health: VolumeHealth,
    last_sweep: Mutex<Option<SweepStats>>,
}

/// A page to store, as the vendor returned it (before E7).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewEntry {
    /// The normalised requested URL: the key, and what a lookup asks with.
    pub url: String,
    /// The URL after redirects; empty or equal to `url` when there were none.
    pub final_url: String,
    /// The resolved backend that produced the page (part of the key).
    pub provider: String,
    /// Page title.
    pub title: String,
    /// Clean page text (markdown).
    pub content: String,
    /// Upstream HTTP status; `0` when the vendor did not report one. Only 2xx (or 0) is cached.
    pub status: u16,
    /// False for a non-text body; such pages are never cached.
    pub textual: bool,
    /// True when a rescue backend produced the page; such pages are never cached.
    pub rescued: bool,
    /// Every URL after the requested one (redirect hops, a vendor's final URL), in order;
    /// a hit re-admits each under the policy of the day.
    pub hops: Vec<String>,
}

/// A fresh entry found by a lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedPage {
    /// The requested URL the entry was stored under.
    pub(crate) url: String,
    /// The URL after redirects (equals `url` when there were none).
    pub(crate) final_url: String,
    /// Page title.
    pub title: String,
    /// Clean page text, exactly as stored.
    pub content: String,
    /// The backend that produced it.
    pub(crate) provider: String,
    /// Every URL after the requested one, in order (see [`NewEntry::hops`]).
    pub(crate) hops: Vec<String>,
    /// Upstream status at fetch time (`0` when unknown).
    pub(crate) status: u16,
    /// When it was fetched (millisecond precision).
    pub(crate) fetched_at: SystemTime,
    /// How old it is at lookup time (zero when another pod's clock is ahead).
    pub(crate) age: Duration,
}

/// The result of a lookup: the outcome (for metrics and the log line) and, on a hit, the entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookup {
    /// What the lookup found.
    pub outcome: CacheOutcome,
    /// The entry, present exactly when `outcome` is [`CacheOutcome::Hit`].
    pub entry: Option<CachedPage>,
}

/// The cache's state for the status endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CacheStatus {
    /// Whether the cache is on.
    pub(crate) enabled: bool,
    /// The entry folder, as the gate sees it.
    pub(crate) dir: String,
    /// Entry lifetime in seconds.
    pub(crate) ttl_seconds: u64,
    /// Entry bound.
    pub(crate) max_entries: u64,
    /// Byte bound.
    pub(crate) max_bytes: u64,
    /// The code of the volume fault the last put hit, if it failed on the volume.
    pub(crate) volume_fault: Option<&'static str>,
    /// This process's most recent sweep, if any.
    pub(crate) last_sweep: Option<SweepStats>,
}

/// The header line of an entry, as written.
#[derive(Serialize)]
struct HeaderOut<'a> {
    v: u32,
    url: &'a str,
    title: &'a str,
    provider: &'a str,
    fetched_at: f64,
    status: u16,
    format: &'a str,
    final_url: &'a str,
    hops: &'a [String],
    bytes: usize,
}

/// The header line of an entry, as read back.
#[derive(Deserialize)]
struct HeaderIn {
    v: u32,
    url: String,
    title: String,
    provider: String,
    fetched_at: f64,
    status: u16,
    format: String,
    #[serde(default)]
    final_url: String,
    /// Absent in entries written before hops were recorded.
    #[serde(default)]
    hops: Option<Vec<String>>,
    bytes: usize,
}

/// The last volume fault seen by puts, and when it was last logged.
#[derive(Debug, Default)]
struct VolumeHealth {
    /// 0 when healthy, else 1 + the fault's index in [`NoCacheReason::ALL`].
    fault: AtomicU8,
    last_log_ms: AtomicU64,
}

// === impl DiskCache ===

impl DiskCache {
    /// A cache whose entries live in `root/extract/` (created on the first put).
    pub fn new(root: &Path, settings: CacheSettings) -> Self {
        let exempt = ExemptHosts::new(&settings.exempt_hosts);
        let trigger = SweepTrigger::new(settings.sweep);
        Self {
            inner: Arc::new(Inner {
                dir: root.join(EXTRACT_SUBDIR),
                exempt,
                trigger,
                settings,
                health: VolumeHealth::default(),
                last_sweep: Mutex::new(None),
            }),
        }
    }

    /// The directory entries live in.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Whether `url` may be served from or stored in the cache: the cache is enabled and the
    /// host is not local, private, single-label or exempt (hostname heuristics, no DNS).
    pub(crate) fn cacheable(&self, url: &str) -> Result<(), NoCacheReason> {
        if !self.inner.settings.enabled {
            return Err(NoCacheReason::Disabled);
        }
        cacheable::check_url(url, &self.inner.exempt)
    }

    /// [`lookup_at`](Self::lookup_at) the current time.
    pub fn lookup(&self, url: &str, provider: &str) -> Lookup {
        self.lookup_at(url, provider, SystemTime::now())
    }

    /// Look up the entry for the normalised requested `url` and the resolved `provider`, as of
    /// `now`. Never fails: problems become a bypass outcome.
    pub(crate) fn lookup_at(&self, url: &str, provider: &str, now: SystemTime) -> Lookup {
        if let Err(reason) = self.cacheable(url) {
            return Lookup::without(CacheOutcome::Bypass(reason));
        }
        let path = self
            .inner
            .dir
            .join(CacheKey::new(url, FORMAT_MARKDOWN, provider).file_name());
        let bytes = match self.read_entry(&path) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Lookup::without(CacheOutcome::Miss),
            Err(reason) => return Lookup::without(CacheOutcome::Bypass(reason)),
        };
        let Some((header, content)) = decode(bytes) else {
            tracing::debug!(target: "fleetgate.cache", path = %path.display(), "removing a corrupt cache entry");
            let _ = fs::remove_file(&path);
            return Lookup::without(CacheOutcome::Bypass(NoCacheReason::CorruptEntry));
        };
        // Sixteen hex digits can collide; an entry for another url or provider is not ours.
        if header.url != url || header.provider != provider || header.format != FORMAT_MARKDOWN {
            return Lookup::without(CacheOutcome::Miss);
        }
        let Some(hops) = header.hops else {
            return Lookup::without(CacheOutcome::Bypass(NoCacheReason::UnrecordedHops));
        };
        let fetched_at = UNIX_EPOCH + Duration::from_millis(seconds_to_millis(header.fetched_at));
        let age = now.duration_since(fetched_at).unwrap_or_default();
        let ahead = fetched_at.duration_since(now).unwrap_or_default();
        let ttl = self.inner.settings.ttl;
        if age >= ttl || ahead >= ttl {
            return Lookup::without(CacheOutcome::Stale);
        }
        let final_url = if header.final_url.is_empty() {
            header.url.clone()
        } else {
            header.final_url
        };
        Lookup {
            outcome: CacheOutcome::Hit,
            entry: Some(CachedPage {
                url: header.url,
                final_url,
                title: header.title,
                content,
                provider: header.provider,
                hops,
                status: header.status,
                fetched_at,
                age,
            }),
        }
    }

    /// [`put_at`](Self::put_at) the current time.
    pub fn put(&self, entry: &NewEntry) -> Result<(), NoCacheReason> {
        self.put_at(entry, SystemTime::now())
    }

    /// Store `entry` as fetched at `now`, unless a never-cache rule or the volume refuses it.
    /// The write is atomic (temporary file, fsync, rename). Every
    /// [`SweepPolicy`](super::SweepPolicy) interval the put then sweeps the folder.
    pub(crate) fn put_at(&self, entry: &NewEntry, now: SystemTime) -> Result<(), NoCacheReason> {
        self.admit(entry)?;
        let key = CacheKey::new(&entry.url, FORMAT_MARKDOWN, &entry.provider);
        let header = encode_header(entry, now)?;
        let written = self.write_atomically(&key.file_name(), &header, &entry.content, now);
        self.inner
            .health
            .record(written.as_ref().err(), &self.inner.dir, now);
        written.map_err(|(reason, _)| reason)?;
        self.maybe_sweep_at(now);
        Ok(())
    }

    /// [`put`](Self::put) on tokio's blocking pool, so an fsync on a slow volume never stalls
    /// the async workers. Resolves when the entry is in place (or refused).
    pub(crate) async fn put_async(&self, entry: NewEntry) -> Result<(), NoCacheReason> {
        let cache = self.clone();
        tokio::task::spawn_blocking(move || cache.put(&entry))
            .await
            .unwrap_or(Err(NoCacheReason::VolumeError))
    }

    /// Sweep the folder now: expired entries, then the oldest past the bounds, plus temporary
    /// files abandoned by crashed writers. Safe to run from many processes at once.
    pub fn sweep(&self) -> SweepStats {
        self.sweep_at(SystemTime::now())
    }

    /// [`sweep`](Self::sweep) as of `now`.
    pub fn sweep_at(&self, now: SystemTime) -> SweepStats {
        let s = &self.inner.settings;
        let stats = eviction::sweep_dir(&self.inner.dir, now, s.ttl, s.max_entries, s.max_bytes);
        *self
            .inner
            .last_sweep
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(stats);
        stats
    }

    /// Sweep when the trigger policy says one is due (and no other thread of this process is
    /// sweeping); `put` calls this after each successful write.
    pub(crate) fn maybe_sweep_at(&self, now: SystemTime) -> Option<SweepStats> {
        let _running = self.inner.trigger.claim(now)?;
        let stats = self.sweep_at(now);
        tracing::debug!(target: "fleetgate.cache", ?stats, "cache sweep");
        Some(stats)
    }

    /// The volume fault the most recent put hit, or `None` when the last put succeeded (or
    /// none has failed yet). For the status endpoint.
    pub fn volume_fault(&self) -> Option<NoCacheReason> {
        let index = self.inner.health.fault.load(Ordering::Relaxed);
        (index > 0)
            .then(|| NoCacheReason::ALL.get(usize::from(index) - 1).copied())
            .flatten()
    }

    /// What `/v1/status` shows about the cache: settings, the current volume fault, and what
    /// this process's last sweep saw (entries and bytes on the volume).
    pub(crate) fn status(&self) -> CacheStatus {
        let s = &self.inner.settings;
        CacheStatus {
            enabled: s.enabled,
            dir: self.inner.dir.display().to_string(),
            ttl_seconds: s.ttl.as_secs(),
            max_entries: s.max_entries,
            max_bytes: s.max_bytes,
            volume_fault: self.volume_fault().map(|r| r.code()),
            last_sweep: *self
                .inner
                .last_sweep
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// The never-cache rules for a result.
    fn admit(&self, entry: &NewEntry) -> Result<(), NoCacheReason> {
        self.cacheable(&entry.url)?;
        if !entry.final_url.is_empty() && entry.final_url != entry.url {
            self.cacheable(&entry.final_url)?;
        }
        if entry.rescued {
            return Err(NoCacheReason::Rescued);
        }
        if entry.status != 0 && !(200..300).contains(&entry.status) {
            return Err(NoCacheReason::ErrorRow);
        }
        if !entry.textual {
            return Err(NoCacheReason::NotText);
        }
        if entry.content.is_empty() {
            return Err(NoCacheReason::EmptyContent);
        }
        // Fewer bytes than the cap means fewer characters too: no count needed.
        if entry.content.len() > MAX_CACHED_CHARS
            && entry.content.chars().count() > MAX_CACHED_CHARS
        {
            return Err(NoCacheReason::TooLarge);
        }
        Ok(())
    }

    /// The entry's bytes; `None` when there is none.
    fn read_entry(&self, path: &Path) -> Result<Option<Vec<u8>>, NoCacheReason> {
        match fs::symlink_metadata(&self.inner.dir) {
            Ok(meta) if meta.file_type().is_dir() => {}
            Ok(_) => return Err(NoCacheReason::VolumeUnreadable),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(_) => return Err(NoCacheReason::VolumeUnreadable),
        }
        // O_NONBLOCK: a FIFO planted in the folder (the agent shares the volume) must not hang
        // the open; it is refused below as not a regular file.
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path);
        let mut file = match opened {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            // A symlink planted in the cache folder is never followed.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                let _ = fs::remove_file(path);
                return Err(NoCacheReason::CorruptEntry);
            }
            Err(_) => return Err(NoCacheReason::VolumeUnreadable),
        };
        let meta = file
            .metadata()
            .map_err(|_| NoCacheReason::VolumeUnreadable)?;
        if !meta.file_type().is_file() && !meta.file_type().is_dir() {
            let _ = fs::remove_file(path);
            return Err(NoCacheReason::CorruptEntry);
        }
        let len = meta.len();
        if len > MAX_ENTRY_BYTES {
            let _ = fs::remove_file(path);
            return Err(NoCacheReason::CorruptEntry);
        }
        match read_known_len(&mut file, usize::try_from(len).unwrap_or(0)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::IsADirectory => Err(NoCacheReason::CorruptEntry),
            Err(_) => Err(NoCacheReason::VolumeUnreadable),
        }
    }

    /// Temporary file, header and content, mtime, fsync, rename. The io error travels with the
    /// reason for the log line.
    fn write_atomically(
        &self,
        name: &str,
        header: &str,
        content: &str,
        fetched_at: SystemTime,
    ) -> Result<(), (NoCacheReason, io::Error)> {
        self.ensure_dir()?;
        let target = self.inner.dir.join(name);
        let (temp, mut file) = create_temp(&self.inner.dir, name).map_err(with_reason)?;
        let written = file
            .write_all(header.as_bytes())
            .and_then(|()| file.write_all(content.as_bytes()))
            // The sweep orders and expires entries by mtime, without opening them.
            .and_then(|()| file.set_modified(fetched_at))
            .and_then(|()| file.sync_all())
            .and_then(|()| {
                drop(file);
                fs::rename(&temp, &target)
            });
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(with_reason(e));
        }
        Ok(())
    }

    fn ensure_dir(&self) -> Result<(), (NoCacheReason, io::Error)> {
        let dir = &self.inner.dir;
        fs::create_dir_all(dir).map_err(with_reason)?;
        // create_dir_all accepts a symlink to a directory; the cache must be the real thing.
        match fs::symlink_metadata(dir) {
            Ok(meta) if meta.file_type().is_dir() => Ok(()),
            Ok(_) => Err((
                NoCacheReason::VolumeUnwritable,
                io::Error::other("the extract folder is a symlink"),
            )),
            Err(e) => Err(with_reason(e)),
        }
    }
}

// === impl Lookup ===

impl Lookup {
    /// A lookup that serves nothing, for `outcome`.
    pub(crate) fn without(outcome: CacheOutcome) -> Self {
        Self {
            outcome,
            entry: None,
        }
    }
}

// === impl CachedPage ===

impl CachedPage {
    /// The age in whole seconds, for the row's `cache_age_s`.
    pub(crate) fn age_secs(&self) -> u64 {
        self.age.as_secs()
    }
}

// === impl VolumeHealth ===

impl VolumeHealth {
    /// Remember the outcome of a put; log a volume fault when it starts, changes, or has lasted
    /// another [`FAULT_LOG_EVERY`], and log the recovery.
    fn record(&self, fault: Option<&(NoCacheReason, io::Error)>, dir: &Path, now: SystemTime) {
        let Some((reason, error)) = fault.filter(|(r, _)| r.is_volume_fault()) else {
            if fault.is_none() && self.fault.swap(0, Ordering::Relaxed) != 0 {
                tracing::info!(target: "fleetgate.cache", dir = %dir.display(), "cache volume writable again");
            }
            return;
        };
        let index = NoCacheReason::ALL
            .iter()
            .position(|r| r == reason)
            .map_or(0, |i| u8::try_from(i + 1).unwrap_or(0));
        let previous = self.fault.swap(index, Ordering::Relaxed);
        let now_ms = unix_millis(now);
        let last = self.last_log_ms.load(Ordering::Relaxed);
        let due = now_ms.saturating_sub(last) >= FAULT_LOG_EVERY.as_millis() as u64;
        if (previous != index || due)
            && self
                .last_log_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                target: "fleetgate.cache",
                code = reason.code(), dir = %dir.display(), %error,
                "cache volume degraded; serving without the cache"
            );
        }
    }
}

/// The header line (with its newline) for `entry` fetched at `now`.
fn encode_header(entry: &NewEntry, now: SystemTime) -> Result<String, NoCacheReason> {
    let header = HeaderOut {
        v: LAYOUT_VERSION,
        url: &entry.url,
        title: &entry.title,
        provider: &entry.provider,
        fetched_at: unix_millis(now) as f64 / 1000.0,
        status: entry.status,
        format: FORMAT_MARKDOWN,
        final_url: if entry.final_url == entry.url {
            ""
        } else {
            &entry.final_url
        },
        hops: &entry.hops,
        bytes: entry.content.len(),
    };
    let mut line = serde_json::to_string(&header).map_err(|_| NoCacheReason::VolumeError)?;
    if line.len() > MAX_HEADER_BYTES {
        return Err(NoCacheReason::TooLarge);
    }
    line.push('\n');
    Ok(line)
}

/// Header and content of an entry file; `None` when anything about it is off.
fn decode(mut bytes: Vec<u8>) -> Option<(HeaderIn, String)> {
    let newline = memchr::memchr(b'\n', &bytes[..bytes.len().min(MAX_HEADER_BYTES + 1)])?;
    let header: HeaderIn = serde_json::from_slice(&bytes[..newline]).ok()?;
    let valid_time = header.fetched_at.is_finite() && header.fetched_at >= 0.0;
    if header.v != LAYOUT_VERSION || !valid_time || bytes.len() - newline - 1 != header.bytes {
        return None;
    }
    bytes.drain(..=newline);
    let content = String::from_utf8(bytes).ok()?;
    Some((header, content))
}

/// The whole file, `len` bytes by its metadata: read into a buffer of that size, then one
/// probe for anything past it (read too, should the file have grown). The same bytes as
/// `read_to_end`, without its second `fstat` and `lseek`.
fn read_known_len(file: &mut File, len: usize) -> io::Result<Vec<u8>> {
    let mut bytes = vec![0; len];
    let mut filled = 0;
    while filled < len {
        match file.read(&mut bytes[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    bytes.truncate(filled);
    if filled == len {
        let mut probe = [0u8; 1];
        loop {
            match file.read(&mut probe) {
                Ok(0) => break,
                Ok(_) => {
                    bytes.push(probe[0]);
                    file.read_to_end(&mut bytes)?;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(bytes)
}

/// A new, exclusively created temporary file next to the target.
fn create_temp(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = crate::base::clock::now_subsec_nanos();
    let mut attempt = 0;
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".{name}.{}-{nanos}-{n}.tmp", std::process::id()));
        let opened = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path);
        match opened {
            Ok(file) => return Ok((path, file)),
            // Pods sharing the volume can share a pid; another name settles it.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 3 => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

/// The no-cache reason for an I/O failure on the volume.
pub(crate) fn volume_reason(error: &io::Error) -> NoCacheReason {
    use io::ErrorKind as K;
    match error.kind() {
        K::ReadOnlyFilesystem | K::PermissionDenied | K::NotADirectory => {
            NoCacheReason::VolumeUnwritable
        }
        K::StorageFull | K::QuotaExceeded | K::FileTooLarge => NoCacheReason::VolumeFull,
        _ => NoCacheReason::VolumeError,
    }
}

fn with_reason(error: io::Error) -> (NoCacheReason, io::Error) {
    (volume_reason(&error), error)
}

pub(crate) use crate::base::clock::unix_millis;

/// A header's `fetched_at` seconds as whole milliseconds.
fn seconds_to_millis(seconds: f64) -> u64 {
    (seconds * 1000.0).round() as u64
}

#[cfg(test)]
mod tests;

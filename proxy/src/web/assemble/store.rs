//! The full-text store: `<root>/store/<host>-<10 hex>.md`, written atomically, never through a
//! symlink.
//!
//! A truncated page's complete clean text goes here so the agent can page through the omitted
//! middle with `read_file`. The volume may be shared by many gate pods and read by agents while a
//! write is in flight, so a file is written to a fresh temporary name in the same directory
//! (`O_CREAT|O_EXCL|O_NOFOLLOW`) and renamed over the target: readers see the old or the new
//! copy, never half of one, and a symlink planted at the target is replaced rather than followed.
//! A `store/` directory that is itself a symlink is refused.
//!
//! A cache hit of a truncated page stores the same text again; when the copy on disk is
//! already exactly that text it is left in place. The first such check reads the file and
//! compares it; the store then remembers the verified copy (its text and the file's identity:
//! device, inode, size, mtime and ctime), so a repeat costs an `lstat` of the folder and of the
//! file and a memory compare, not another read. Any change to the file on the shared volume
//! (a rename over it, a rewrite, a removal) changes its inode or ctime, and the next write
//! reads it again or replaces it. As git does for racily clean files, a copy whose ctime is
//! less than [`SETTLE`] old is not remembered: a rewrite within the same timestamp tick could
//! leave its ctime unchanged. A volume whose attributes are cached (NFS `actimeo`) may report a
//! replaced copy late; that copy is another writer's full text of the same url.

use std::collections::HashMap;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

/// Stored copies are cut to this many characters.
pub(crate) const MAX_STORED_CHARS: usize = 2_000_000;

/// Name of the store directory under the volume root.
pub(crate) const STORE_SUBDIR: &str = "store";

/// How many hex digits of `sha256(url)` name a stored file.
const DIGEST_HEX: usize = 10;

/// Bytes of verified stored text a store keeps in memory; older copies are forgotten first.
const VERIFIED_MAX_BYTES: usize = 8 * 1024 * 1024;

/// A larger stored copy is never kept in memory (it is re-read on every repeat).
const VERIFIED_MAX_ENTRY_BYTES: usize = VERIFIED_MAX_BYTES / 8;

/// How old a copy's ctime must be before its verification is remembered.
const SETTLE: Duration = Duration::from_secs(1);

/// Why a page's full text could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The url's host does not parse, so no file name can be derived from it.
    #[error("failed to derive a file name from the url: {reason}")]
    InvalidUrl {
        /// What the host parser refused.
        reason: &'static str,
    },
    /// The store directory could not be created.
    #[error("failed to create the store directory {path}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// `store/` exists but is a symlink or not a directory.
    #[error("failed to use the store directory {path}: it is not a real directory (symlink?)")]
    NotADirectory {
        /// The directory.
        path: PathBuf,
    },
    /// The temporary file could not be created or written.
    #[error("failed to write the temporary file {path}")]
    Write {
        /// The temporary file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The finished copy could not be moved to its name (for example, a directory sits there).
    #[error("failed to move the stored copy into place at {path}")]
    Rename {
        /// The target file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Where full texts of truncated pages are written.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
    dir: PathBuf,
    agent_visible_root: Option<PathBuf>,
    verified: Arc<Verified>,
}

/// Who a stored file is: a rename over it, a rewrite in place or a removal changes one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// Stored copies this process has read back and found identical to what it meant to store,
/// by target path (see the module docs).
#[derive(Debug, Default)]
struct Verified {
    inner: Mutex<VerifiedInner>,
}

#[derive(Debug, Default)]
struct VerifiedInner {
    copies: HashMap<PathBuf, (FileId, Arc<str>, u64)>,
    bytes: usize,
    next: u64,
}

// === impl Store ===

impl Store {
    /// A store under the volume `root` (files go in `root/store/`, created on demand). Footer
    /// paths name `agent_visible_root` instead of `root` when it is set: the agent mounts the
    /// volume elsewhere.
    pub fn new(root: &Path, agent_visible_root: Option<&Path>) -> Self {
        Self {
            root: root.to_path_buf(),
            dir: root.join(STORE_SUBDIR),
            agent_visible_root: agent_visible_root.map(Path::to_path_buf),
            verified: Arc::default(),
        }
    }

    /// The directory files are written to, as the gate sees it.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file name for `url`: `<host_slug>-<sha256(url)[:10]>.md`.
    pub fn file_name(url: &str) -> Result<String, StoreError> {
        let slug = try_host_slug(url)?;
        let digest = hex::encode(Sha256::digest(url.as_bytes()));
        Ok(format!("{slug}-{}.md", &digest[..DIGEST_HEX]))
    }

    /// `path` as the agent sees it: the root prefix replaced by the agent-visible root.
    pub(crate) fn agent_visible(&self, path: &Path) -> PathBuf {
        match (&self.agent_visible_root, path.strip_prefix(&self.root)) {
            (Some(visible), Ok(rel)) => visible.join(rel),
            _ => path.to_path_buf(),
        }
    }

    /// Stores `content` (capped at [`MAX_STORED_CHARS`] with a note) for `url` and returns the
    /// **agent-visible** path of the file.
    pub(crate) fn write(&self, url: &str, content: &str) -> Result<PathBuf, StoreError> {
        self.write_at(url, content, SystemTime::now())
    }

    /// [`write`](Self::write) at `now` (which decides only whether a verified copy has settled).
    fn write_at(&self, url: &str, content: &str, now: SystemTime) -> Result<PathBuf, StoreError> {
        let name = Self::file_name(url)?;
        let target = self.dir.join(&name);
        let comparable = content.len() <= MAX_STORED_CHARS;
        // A cache hit re-assembles the same page: a copy this process verified and that is
        // still the same file is left alone (two lstats and a memory compare).
        if comparable && self.verified.still_there(&self.dir, &target, content) {
            return Ok(self.agent_visible(&target));
        }
        self.ensure_dir()?;
        // When the stored copy is already exactly this text, leave it (a compare is far cheaper
        // than create + write + rename) and remember it for the next repeat.
        if comparable && let Some(id) = already_stored(&target, content) {
            if id.settled(now) {
                self.verified.remember(target.clone(), id, content);
            }
            return Ok(self.agent_visible(&target));
        }
        let (temp, mut file) = self.create_temp(&name)?;
        let written = write_capped(&mut file, content).and_then(|()| file.flush());
        drop(file);
        if let Err(source) = written {
            let _ = fs::remove_file(&temp);
            return Err(StoreError::Write { path: temp, source });
        }
        if let Err(source) = fs::rename(&temp, &target) {
            let _ = fs::remove_file(&temp);
            return Err(StoreError::Rename {
                path: target,
                source,
            });
        }
        Ok(self.agent_visible(&target))
    }

    fn ensure_dir(&self) -> Result<(), StoreError> {
        fs::create_dir_all(&self.dir).map_err(|source| StoreError::CreateDir {
            path: self.dir.clone(),
            source,
        })?;
        // create_dir_all accepts a symlink to a directory; the store must be the real thing.
        match fs::symlink_metadata(&self.dir) {
            Ok(meta) if meta.file_type().is_dir() => Ok(()),
            _ => Err(StoreError::NotADirectory {
                path: self.dir.clone(),
            }),
        }
    }

    /// A new, exclusively created temporary file next to the target.
    fn create_temp(&self, name: &str) -> Result<(PathBuf, File), StoreError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = crate::base::clock::now_subsec_nanos();
        let mut attempt = 0;
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = self
                .dir
                .join(format!(".{name}.{}-{nanos}-{n}.tmp", std::process::id()));
            let opened = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path);
            match opened {
                Ok(file) => return Ok((path, file)),
                // Pods sharing the volume can share a pid; another name settles it.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 3 => attempt += 1,
                Err(source) => return Err(StoreError::Write { path, source }),
            }
        }
    }
}

// === impl FileId ===

impl FileId {
    fn of(meta: &Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether the file's last change is at least [`SETTLE`] before `now`: any later change
    /// then gets another ctime.
    fn settled(&self, now: SystemTime) -> bool {
        let (secs, nanos) = self.ctime;
        let (Ok(secs), Ok(nanos)) = (u64::try_from(secs), u32::try_from(nanos)) else {
            return false;
        };
        UNIX_EPOCH
            .checked_add(Duration::new(secs, nanos))
            .and_then(|changed| now.duration_since(changed).ok())
            .is_some_and(|age| age >= SETTLE)
    }
}

// === impl Verified ===

impl Verified {
    /// Whether `target` is the copy of `content` this process verified, still in place: the
    /// remembered text equals `content`, `dir` is a real directory, and `target` is a regular
    /// file with the remembered identity. A copy that changed is forgotten.
    fn still_there(&self, dir: &Path, target: &Path, content: &str) -> bool {
        let id = {
            let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            match inner.copies.get(target) {
                Some((id, text, _)) if **text == *content => *id,
                _ => return false,
            }
        };
        let dir_ok = fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_dir());
        let same = dir_ok
            && fs::symlink_metadata(target)
                .is_ok_and(|m| m.file_type().is_file() && FileId::of(&m) == id);
        if !same {
            self.forget(target);
        }
        same
    }

    /// Remember that `target`, as `id`, holds exactly `content`.
    fn remember(&self, target: PathBuf, id: FileId, content: &str) {
        if content.len() > VERIFIED_MAX_ENTRY_BYTES {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.remove(&target);
        while inner.bytes + content.len() > VERIFIED_MAX_BYTES {
            let Some(oldest) = inner
                .copies
                .iter()
                .min_by_key(|(_, (_, _, seq))| *seq)
                .map(|(path, _)| path.clone())
            else {
                break;
            };
            inner.remove(&oldest);
        }
        inner.next += 1;
        let seq = inner.next;
        inner.bytes += content.len();
        inner.copies.insert(target, (id, Arc::from(content), seq));
    }

    fn forget(&self, target: &Path) {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(target);
    }
}

impl VerifiedInner {
    fn remove(&mut self, target: &Path) {
        if let Some((_, text, _)) = self.copies.remove(target) {
            self.bytes -= text.len();
        }
    }
}

/// When `target` is a regular file (never a symlink) holding exactly `content`, its identity
/// as read (from the open file, so it names the bytes compared).
fn already_stored(target: &Path, content: &str) -> Option<FileId> {
    // O_NONBLOCK: a FIFO planted at the target must not hang the open.
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(target)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.file_type().is_file() || meta.len() != content.len() as u64 {
        return None;
    }
    let mut bytes = Vec::with_capacity(content.len());
    file.read_to_end(&mut bytes).ok()?;
    (bytes == content.as_bytes()).then(|| FileId::of(&meta))
}

/// Writes `content`, or its first [`MAX_STORED_CHARS`] characters plus the cap note.
fn write_capped(file: &mut File, content: &str) -> io::Result<()> {
    // Fewer bytes than the cap means fewer characters too: no count needed.
    if content.len() <= MAX_STORED_CHARS {
        return file.write_all(content.as_bytes());
    }
    let Some((cut, _)) = content.char_indices().nth(MAX_STORED_CHARS) else {
        return file.write_all(content.as_bytes());
    };
    let total = MAX_STORED_CHARS + content[cut..].chars().count();
    let note = format!(
        "\n\n[... stored copy truncated at {} chars of {}; re-extract a more specific URL for the rest ...]",
        super::thousands::thousands(MAX_STORED_CHARS),
        super::thousands::thousands(total),
    );
    file.write_all(&content.as_bytes()[..cut])?;
    file.write_all(note.as_bytes())
}

/// The file-name fragment for `url`'s host (`page` when there is none or it does not parse):
/// the lowercase hostname, `:` → `_`, anything outside `[A-Za-z0-9._-]` → `-`, cut to 60
/// characters, `-` trimmed from both ends.
pub(crate) fn host_slug(url: &str) -> String {
    try_host_slug(url).unwrap_or_else(|_| "page".to_owned())
}

/// [`host_slug`], but an error where Hermes' URL parser raises (its store write then fails).
pub(crate) fn try_host_slug(url: &str) -> Result<String, StoreError> {
    let host = hostname(url).map_err(|reason| StoreError::InvalidUrl { reason })?;
    let Some(host) = host else {
        return Ok("page".to_owned());
    };
    let slug: String = host
        .chars()
        .map(|c| match c {
            ':' => '_',
            c if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') => c,
            _ => '-',
        })
        .take(60)
        .collect();
    let slug = slug.trim_matches('-');
    Ok(if slug.is_empty() {
        "page".to_owned()
    } else {
        slug.to_owned()
    })
}

/// Python's `urlsplit(url).hostname`: `Ok(None)` without a host, `Err` where it raises.
fn hostname(url: &str) -> Result<Option<String>, &'static str> {
    let url = url.trim_start_matches(|c: char| c <= ' ');
    let cleaned: String = url
        .chars()
        .filter(|c| !matches!(c, '\t' | '\r' | '\n'))
        .collect();
    let rest = strip_scheme(&cleaned);
    let Some(after) = rest.strip_prefix("//") else {
        return Ok(None);
    };
    let netloc = &after[..after.find(['/', '?', '#']).unwrap_or(after.len())];
    match (netloc.contains('['), netloc.contains(']')) {
        (true, true) => check_bracketed_host(between_brackets(netloc))?,
        (false, false) => {}
        _ => return Err("invalid IPv6 URL"),
    }
    let hostinfo = netloc.rsplit_once('@').map_or(netloc, |(_, h)| h);
    let host = match hostinfo.split_once('[') {
        Some((_, bracketed)) => between_brackets_after_open(bracketed),
        None => hostinfo.split_once(':').map_or(hostinfo, |(h, _)| h),
    };
    if host.is_empty() {
        return Ok(None);
    }
    // A scope id keeps its case.
    Ok(Some(match host.split_once('%') {
        Some((addr, zone)) => format!("{}%{zone}", addr.to_lowercase()),
        None => host.to_lowercase(),
    }))
}

/// The url after `scheme:`, when it starts with one (an ASCII letter, then letters, digits,
/// `+`, `-`, `.`).
fn strip_scheme(url: &str) -> &str {
    let Some(colon) = url.find(':') else {
        return url;
    };
    let scheme = &url[..colon];
    let valid = scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if valid { &url[colon + 1..] } else { url }
}

fn between_brackets(netloc: &str) -> &str {
    netloc
        .split_once('[')
        .map_or("", |(_, rest)| between_brackets_after_open(rest))
}

fn between_brackets_after_open(rest: &str) -> &str {
    rest.split_once(']').map_or(rest, |(inside, _)| inside)
}

/// Python's check of a bracketed host: an IPvFuture literal or an IPv6 address.
fn check_bracketed_host(host: &str) -> Result<(), &'static str> {
    if let Some(future) = host.strip_prefix('v') {
        let (version, rest) = future.split_once('.').unwrap_or((future, ""));
        let ok = !version.is_empty()
            && version.chars().all(|c| c.is_ascii_hexdigit())
            && !rest.is_empty();
        return if ok {
            Ok(())
        } else {
            Err("invalid IPvFuture address")
        };
    }
    if host.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err("an IPv4 address cannot be in brackets");
    }
    let addr = match host.split_once('%') {
        Some((addr, zone)) if !zone.is_empty() && !zone.contains('%') => addr,
        Some(_) => return Err("invalid IPv6 scope id"),
        None => host,
    };
    addr.parse::<std::net::Ipv6Addr>()
        .map(|_| ())
        .map_err(|_| "bracketed host is not an IP address")
}

#[cfg(test)]
mod tests;

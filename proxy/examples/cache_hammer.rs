//! cache_hammer: one process hammering a shared extract-cache folder, and the cache benchmark.
//!
//! `cache_hammer hammer DIR` reads and writes the same few keys in `DIR` for a while with small
//! bounds, so its puts trigger sweeps that race with other processes' reads, writes and sweeps.
//! Every stored page embeds the sha256 of its own body; a hit whose checksum, key or title does
//! not match, or a `corrupt_entry` lookup, means a reader saw a partial or mixed entry. It prints
//! one JSON line of counters. `tests/cache_processes.rs` runs four of these at once (this file is
//! compiled into that test, which re-executes itself as the workers).
//!
//! `cache_hammer bench` times a lookup hit and a put of a 50 KB entry:
//! `cargo run --release -p fleetgate-proxy --example cache_hammer -- bench`.
#![cfg_attr(test, allow(dead_code))]
// A command-line tool reports on stdout.
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use fleetgate_proxy::web::cache::{
    CacheOutcome, CacheSettings, DiskCache, NewEntry, NoCacheReason, SweepPolicy,
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

/// How one hammer process runs.
#[derive(Clone, Debug)]
pub struct HammerConfig {
    /// The shared volume root (entries go to `DIR/extract`).
    pub dir: PathBuf,
    /// How long to hammer.
    pub duration: Duration,
    /// How many distinct URLs are read and written.
    pub keys: usize,
    /// The cache's entry bound.
    pub max_entries: u64,
    /// The cache's byte bound.
    pub max_bytes: u64,
    /// Sweep after this many puts.
    pub every_puts: u64,
    /// Largest page body written, in bytes (before the checksum line).
    pub max_body: usize,
}

/// What one hammer process saw.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct HammerReport {
    /// Lookups made.
    pub lookups: u64,
    /// Verified hits.
    pub hits: u64,
    /// Misses (including stale).
    pub misses: u64,
    /// Lookups that reported `corrupt_entry`.
    pub corrupt: u64,
    /// Hits whose checksum, key or title did not verify.
    pub bad_hits: u64,
    /// Any other bypass outcome.
    pub other_bypass: u64,
    /// Puts that stored.
    pub puts: u64,
    /// Puts the cache refused.
    pub put_failures: u64,
    /// The largest entry file this process wrote, in bytes.
    pub largest_file: u64,
}

fn settings(cfg: &HammerConfig) -> CacheSettings {
    CacheSettings {
        ttl: Duration::from_secs(3600),
        max_entries: cfg.max_entries,
        max_bytes: cfg.max_bytes,
        sweep: SweepPolicy {
            every_puts: cfg.every_puts,
            every: Duration::from_secs(3600),
        },
        ..CacheSettings::default()
    }
}

fn url(key: usize) -> String {
    format!("https://hammer.example/page/{key}")
}

/// A page body for `key` of about `len` bytes (multi-byte characters included), ending in a
/// line with the sha256 of everything before it.
fn page_body(key: usize, writer: u32, seq: u64, len: usize) -> String {
    let mut body = format!("key={key} writer={writer} seq={seq}\n");
    let filler = "fleetgate ü € 漢 ";
    while body.len() < len {
        body.push_str(filler);
    }
    let digest = hex::encode(Sha256::digest(body.as_bytes()));
    body.push_str("\nsha256=");
    body.push_str(&digest);
    body
}

/// Whether a served body is whole and belongs to `key`.
fn verify(key: usize, content: &str) -> bool {
    let Some((body, digest)) = content.rsplit_once("\nsha256=") else {
        return false;
    };
    hex::encode(Sha256::digest(body.as_bytes())) == digest
        && body.starts_with(&format!("key={key} "))
}

/// A small xorshift generator: no dependency, different per process.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Hammer `cfg.dir` until the deadline; never panics on what the cache returns.
pub fn hammer(cfg: &HammerConfig) -> HammerReport {
    let cache = DiskCache::new(&cfg.dir, settings(cfg));
    let writer = std::process::id();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| u64::from(d.subsec_nanos()));
    let mut rng = Rng((u64::from(writer) << 32) ^ nanos | 1);
    let mut report = HammerReport::default();
    let deadline = Instant::now() + cfg.duration;
    let mut seq = 0u64;
    while Instant::now() < deadline {
        let key = (rng.next() % cfg.keys as u64) as usize;
        if rng.next().is_multiple_of(2) {
            check_lookup(&cache, key, &mut report);
            continue;
        }
        seq += 1;
        let len = 200 + (rng.next() % cfg.max_body.max(1) as u64) as usize;
        let entry = NewEntry {
            url: url(key),
            provider: "direct".into(),
            title: format!("title {key}"),
            content: page_body(key, writer, seq, len),
            status: 200,
            textual: true,
            ..NewEntry::default()
        };
        match cache.put(&entry) {
            Ok(()) => report.puts += 1,
            Err(_) => report.put_failures += 1,
        }
        report.largest_file = report.largest_file.max(entry.content.len() as u64 + 512);
    }
    report
}

fn check_lookup(cache: &DiskCache, key: usize, report: &mut HammerReport) {
    report.lookups += 1;
    let found = cache.lookup(&url(key), "direct");
    match (found.outcome, found.entry) {
        (CacheOutcome::Hit, Some(page)) => {
            if verify(key, &page.content) && page.title == format!("title {key}") {
                report.hits += 1;
            } else {
                report.bad_hits += 1;
            }
        }
        (CacheOutcome::Miss | CacheOutcome::Stale, _) => report.misses += 1,
        (CacheOutcome::Bypass(NoCacheReason::CorruptEntry), _) => report.corrupt += 1,
        _ => report.other_bypass += 1,
    }
}

/// Median and 99th percentile of `iters` runs of `op`, in microseconds.
fn time_us(iters: usize, mut op: impl FnMut()) -> (f64, f64) {
    let mut samples: Vec<Duration> = (0..iters)
        .map(|_| {
            let started = Instant::now();
            op();
            started.elapsed()
        })
        .collect();
    samples.sort();
    let at = |q: usize| samples[(samples.len() * q / 100).min(samples.len() - 1)];
    (at(50).as_secs_f64() * 1e6, at(99).as_secs_f64() * 1e6)
}

/// A 50 KB markdown page as most of the web is: ASCII text with a few accented words.
fn markdown_page() -> String {
    let paragraph = "## Section\n\nThe gate keeps a shared cache of extracted pages; a café \
        or a naïve résumé appears now and then. [A link](https://example.com/a) and `code`.\n\n";
    paragraph.repeat(50 * 1024 / paragraph.len() + 1)[..50 * 1024].to_owned()
}

/// Timings of one page: lookup hit, the bare file read it builds on, and put.
fn bench_page(
    cache: &DiskCache,
    name: &str,
    content: String,
    iters: usize,
) -> Result<serde_json::Value> {
    let entry = NewEntry {
        url: format!("https://bench.example/{name}"),
        provider: "firecrawl".into(),
        title: "Bench page".into(),
        content,
        status: 200,
        textual: true,
        ..NewEntry::default()
    };
    cache
        .put(&entry)
        .context("failed to store the bench entry")?;
    let (hit_p50, hit_p99) = time_us(iters, || {
        let found = cache.lookup(&entry.url, &entry.provider);
        assert!(found.outcome.is_hit(), "the bench entry must hit");
    });
    // The floor: reading the same file with no checks at all.
    let file = cache.dir().join(
        fleetgate_proxy::web::cache::CacheKey::new(&entry.url, "markdown", &entry.provider)
            .file_name(),
    );
    let (read_p50, read_p99) = time_us(iters, || {
        let _ = std::fs::read(&file);
    });
    let (put_p50, put_p99) = time_us(iters.min(2000), || {
        let _ = cache.put(&entry);
    });
    Ok(serde_json::json!({
        "entry_bytes": entry.content.len(),
        "lookup_hit_us": {"p50": hit_p50, "p99": hit_p99},
        "raw_file_read_us": {"p50": read_p50, "p99": read_p99},
        "put_us": {"p50": put_p50, "p99": put_p99},
    }))
}

/// Time a 50 KB lookup hit and put in `dir`, for a mostly-ASCII page and a page dense in
/// multi-byte characters (UTF-8 validation is the lookup's main cost).
fn bench(dir: &Path, iters: usize) -> Result<()> {
    let cache = DiskCache::new(dir, CacheSettings::default());
    let ascii = bench_page(&cache, "markdown", markdown_page(), iters)?;
    let dense = bench_page(&cache, "multibyte", page_body(0, 0, 0, 50 * 1024), iters)?;
    println!(
        "{}",
        serde_json::json!({"markdown": ascii, "multibyte": dense})
    );
    Ok(())
}

fn flag<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => match args.get(i + 1).map(|v| v.parse::<T>()) {
            Some(Ok(v)) => Ok(v),
            _ => bail!("failed to read the value of {name}"),
        },
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("hammer") => {
            let dir = args
                .get(1)
                .context("usage: cache_hammer hammer DIR [--millis N]")?;
            let cfg = HammerConfig {
                dir: PathBuf::from(dir),
                duration: Duration::from_millis(flag(&args, "--millis", 3000)?),
                keys: flag(&args, "--keys", 20)?,
                max_entries: flag(&args, "--max-entries", 5)?,
                max_bytes: flag(&args, "--max-bytes", 24 * 1024)?,
                every_puts: flag(&args, "--every-puts", 2)?,
                max_body: flag(&args, "--max-body", 6000)?,
            };
            println!("{}", serde_json::to_string(&hammer(&cfg))?);
            Ok(())
        }
        Some("bench") => {
            let temp = tempfile_dir()?;
            let dir: PathBuf = flag(&args, "--dir", temp.clone())?;
            let result = bench(&dir, flag(&args, "--iters", 20_000)?);
            let _ = std::fs::remove_dir_all(&temp);
            result
        }
        _ => bail!("usage: cache_hammer hammer DIR [--millis N] | cache_hammer bench [--dir DIR]"),
    }
}

/// A fresh folder under the system temp dir for the benchmark.
fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("fleetgate-cache-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).context("failed to create the bench folder")?;
    Ok(dir)
}

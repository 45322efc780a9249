//! Timings of stage E7 on a 1 MB page: truncate-and-store (with and without the store), the
//! base64 image passes, and binary detection; with `FLEETGATE_VENV` set, Hermes' own Python
//! truncation and image pass on the same page, side by side.
//!
//! Run: `cargo bench -p fleetgate-proxy --bench assemble`.
// A bench reports on stdout.
#![allow(clippy::print_stdout)]

use std::hint::black_box;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use fleetgate_proxy::web::assemble::{Store, binary, images, truncate};
use tokio::time::Instant;

const PAGE_BYTES: usize = 1_000_000;
const LIMIT: usize = 15_000;

/// Hermes' side: times its truncation (which always stores) and image pass on the page file.
const HERMES_SIDE: &str = r#"
import json, sys, time
try:
    from tools.web_tools_truncate import _truncate_with_footer, convert_base64_images_to_links
except ImportError:
    from tools.web_tools import _truncate_with_footer, convert_base64_images_to_links
page = open(sys.argv[1], encoding="utf-8").read()
iters = int(sys.argv[2])
def timed(fn):
    samples = []
    for _ in range(iters):
        t = time.perf_counter_ns(); fn(); samples.append(time.perf_counter_ns() - t)
    samples.sort()
    return {"median_ns": samples[len(samples) // 2], "p99_ns": samples[min(len(samples) - 1, len(samples) * 99 // 100)]}
print(json.dumps({
    "truncate_store": timed(lambda: _truncate_with_footer(page, "https://bench.example/page", 15000)),
    "images": timed(lambda: convert_base64_images_to_links(page)),
}))
"#;

/// Median and 99th percentile of one operation, in nanoseconds.
#[derive(Clone, Copy)]
struct Timing {
    median_ns: u128,
    p99_ns: u128,
}

fn time(iters: usize, mut op: impl FnMut()) -> Timing {
    for _ in 0..iters.min(20) {
        op();
    }
    let mut samples: Vec<u128> = (0..iters)
        .map(|_| {
            let started = Instant::now();
            op();
            started.elapsed().as_nanos()
        })
        .collect();
    samples.sort_unstable();
    Timing {
        median_ns: samples[samples.len() / 2],
        p99_ns: samples[(samples.len() * 99 / 100).min(samples.len() - 1)],
    }
}

/// About 1 MB of markdown-like text: lines of varying length, some multibyte characters, and a
/// base64 image every few kilobytes.
fn page() -> String {
    let mut out = String::with_capacity(PAGE_BYTES + 1_000);
    let mut state: u64 = 0x5EED;
    let mut n = 0;
    while out.len() < PAGE_BYTES {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let len = (state >> 33) as usize % 160;
        n += 1;
        if n % 40 == 0 {
            out.push_str("![figure](data:image/png;base64,");
            out.push_str(&"iVBORw0KGgoAAAANSUhEUgAA".repeat(40));
            out.push_str(")\n");
        }
        for i in 0..len {
            out.push(match (i + n) % 23 {
                0 => 'é',
                7 => ' ',
                13 => '€',
                _ => char::from(b'a' + ((i * 7 + n) % 26) as u8),
            });
        }
        out.push('\n');
    }
    out
}

fn fmt_us(ns: u128) -> String {
    format!("{:.1} µs", ns as f64 / 1_000.0)
}

fn hermes_timings(venv: &Path, page_path: &Path, home: &Path) -> Result<serde_json::Value> {
    let output = Command::new(venv.join("bin/python"))
        .args(["-c", HERMES_SIDE])
        .arg(page_path)
        .arg("50")
        .env("HERMES_HOME", home)
        .env("TERMINAL_ENV", "local")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .context("failed to start the venv python")?;
    if !output.status.success() {
        bail!(
            "hermes side failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).context("failed to parse the hermes timings")
}

fn main() -> Result<()> {
    let raw = page();
    let clean = images::convert_base64_images_to_links(&raw).into_owned();
    let dir = tempfile::tempdir().context("failed to create a temp dir")?;
    let store = Store::new(&dir.path().join("gate"), None);
    let url = "https://bench.example/page";
    println!(
        "page: {} bytes, {} characters; limit {LIMIT}",
        raw.len(),
        raw.chars().count()
    );

    let rows = [
        (
            "truncate_and_store, no store",
            time(500, || {
                black_box(truncate::truncate_and_store(
                    black_box(&clean),
                    LIMIT,
                    url,
                    None,
                ));
            }),
        ),
        (
            "truncate_and_store, store to temp dir",
            time(200, || {
                black_box(truncate::truncate_and_store(
                    black_box(&clean),
                    LIMIT,
                    url,
                    Some(&store),
                ));
            }),
        ),
        (
            "convert_base64_images_to_links (images)",
            time(200, || {
                black_box(images::convert_base64_images_to_links(black_box(&raw)));
            }),
        ),
        (
            "convert_base64_images_to_links (none)",
            time(500, || {
                black_box(images::convert_base64_images_to_links(black_box(&clean)));
            }),
        ),
        (
            "detect_binary",
            time(10_000, || {
                black_box(binary::detect_binary(black_box(&raw)));
            }),
        ),
    ];
    println!("{:<42} {:>12} {:>12}", "operation", "median", "p99");
    for (name, t) in &rows {
        println!(
            "{name:<42} {:>12} {:>12}",
            fmt_us(t.median_ns),
            fmt_us(t.p99_ns)
        );
    }

    let Some(venv) = std::env::var_os("FLEETGATE_VENV") else {
        println!("(set FLEETGATE_VENV to time Hermes' Python on the same page)");
        return Ok(());
    };
    let page_path = dir.path().join("page.md");
    std::fs::write(&page_path, &clean).context("failed to write the page")?;
    let hermes = hermes_timings(
        Path::new(&venv),
        &page_path,
        &dir.path().join("hermes-home"),
    )?;
    let raw_path = dir.path().join("raw.md");
    std::fs::write(&raw_path, &raw).context("failed to write the raw page")?;
    let hermes_raw = hermes_timings(Path::new(&venv), &raw_path, &dir.path().join("hermes-home"))?;
    println!("\nside by side (median): Hermes Python vs fleetgate");
    let pairs = [
        ("truncate + store", &hermes["truncate_store"], rows[1].1),
        (
            "image pass (1 MB with images)",
            &hermes_raw["images"],
            rows[2].1,
        ),
    ];
    for (name, theirs, ours) in pairs {
        let py = theirs["median_ns"].as_u64().unwrap_or(0);
        let ratio = py as f64 / ours.median_ns.max(1) as f64;
        println!(
            "{name:<32} {:>12} {:>12}   ×{ratio:.1}",
            fmt_us(u128::from(py)),
            fmt_us(ours.median_ns)
        );
    }
    Ok(())
}

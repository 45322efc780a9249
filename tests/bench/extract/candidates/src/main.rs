//! `fleetgate-extract-candidates`: the Rust main-content extractors of the extraction benchmark,
//! with the input/output contract of `fleetgate-proxy convert`.
//!
//! ```text
//! fleetgate-extract-candidates --candidate NAME [--content-type CT] [--stack-kib N] FILE...
//! fleetgate-extract-candidates --list
//! ```
//!
//! Prints one JSON line per file: `{"file", "title", "markdown", "micros", "error"}`, where
//! `markdown` is the candidate's output (markdown or plain text, as [`CANDIDATES`] says) and
//! `micros` the in-process time of the page: UTF-8 decoding, the crate's own parse and
//! extraction, and its output conversion. The bytes are decoded as UTF-8 (lossy); a
//! `--content-type` whose charset is not UTF-8 is refused, as every benchmark page is UTF-8.
//! A panic in the crate is caught per page (`error: "panic"`, empty output) and counted in the
//! summary line on stderr. A stack overflow cannot be caught: the process aborts, and the
//! runner (run_candidates.py) reruns the rest of the batch.
//!
//! `--stack-kib N` runs the extraction on a thread with an N KiB stack (tokio's worker and
//! blocking threads have 2048) instead of the main thread (8 MiB by default on Linux).

use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::process::ExitCode;
// The repository's clippy.toml asks for tokio's Instant in async code; this binary has none.
#[allow(clippy::disallowed_types)]
use std::time::Instant;

/// name, what the crate gives, what is scored.
const CANDIDATES: &[(&str, &str)] = &[
    (
        "dom_smoothie",
        "dom_smoothie 0.19: Readability::parse(), TextMode::Markdown (its own markdown)",
    ),
    (
        "dom_smoothie-text",
        "dom_smoothie 0.19: Readability::parse(), TextMode::Raw (the text of the article)",
    ),
    (
        "rs_trafilatura",
        "rs-trafilatura 0.2: extract_with_options(output_markdown: true), content_markdown",
    ),
    (
        "rs_trafilatura-text",
        "rs-trafilatura 0.2: extract(), content_text",
    ),
    (
        "readability_rs",
        "readabilityrs 0.1: Readability::parse() with output_markdown(true), markdown_content",
    ),
    (
        "readability_rs-text",
        "readabilityrs 0.1: Readability::parse(), text_content",
    ),
    (
        "readability_kumabook",
        "readability 0.3 (kumabook): extractor::extract(), text",
    ),
];

/// The page's URL for the one crate that requires one (readability 0.3, which resolves links
/// and images against it; it fetches nothing). The others get none, as `convert` has none, so
/// relative links stay as the page has them.
const BASE_URL: &str = "http://127.0.0.1/page.html";

struct Output {
    title: String,
    text: String,
}

fn run(candidate: &str, html: &str) -> Result<Output, String> {
    match candidate {
        "dom_smoothie" | "dom_smoothie-text" => {
            let cfg = dom_smoothie::Config {
                text_mode: if candidate == "dom_smoothie" {
                    dom_smoothie::TextMode::Markdown
                } else {
                    dom_smoothie::TextMode::Raw
                },
                ..Default::default()
            };
            let mut r = dom_smoothie::Readability::new(html, None, Some(cfg))
                .map_err(|e| format!("dom_smoothie: {e}"))?;
            let a = r.parse().map_err(|e| format!("dom_smoothie: {e}"))?;
            Ok(Output {
                title: a.title,
                text: a.text_content.to_string(),
            })
        }
        "rs_trafilatura" | "rs_trafilatura-text" => {
            let opts = rs_trafilatura::Options {
                output_markdown: candidate == "rs_trafilatura",
                ..Default::default()
            };
            let r = rs_trafilatura::extract_with_options(html, &opts)
                .map_err(|e| format!("rs_trafilatura: {e}"))?;
            let text = if candidate == "rs_trafilatura" {
                r.content_markdown.unwrap_or_default()
            } else {
                r.content_text
            };
            Ok(Output {
                title: r.metadata.title.unwrap_or_default(),
                text,
            })
        }
        "readability_rs" | "readability_rs-text" => {
            let opts = readabilityrs::ReadabilityOptions::builder()
                .output_markdown(candidate == "readability_rs")
                .build();
            let r = readabilityrs::Readability::new(html, None, Some(opts))
                .map_err(|e| format!("readability_rs: {e}"))?;
            // None: "no article worth extracting", an empty output.
            let Some(a) = r.parse() else {
                return Ok(Output {
                    title: String::new(),
                    text: String::new(),
                });
            };
            let text = if candidate == "readability_rs" {
                a.markdown_content.unwrap_or_default()
            } else {
                a.text_content.unwrap_or_default()
            };
            Ok(Output {
                title: a.title.unwrap_or_default(),
                text,
            })
        }
        "readability_kumabook" => {
            let url = url::Url::parse(BASE_URL).map_err(|e| e.to_string())?;
            let p = readability::extractor::extract(&mut html.as_bytes(), &url)
                .map_err(|e| format!("readability_kumabook: {e:?}"))?;
            Ok(Output {
                title: p.title,
                text: p.text,
            })
        }
        other => Err(format!("unknown candidate {other}")),
    }
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: fleetgate-extract-candidates --candidate NAME [--content-type CT] [--stack-kib N] FILE...\n       fleetgate-extract-candidates --list"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut candidate = None;
    let mut content_type = None;
    let mut stack_kib = None;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--list" => {
                for (name, what) in CANDIDATES {
                    println!("{name}\t{what}");
                }
                return ExitCode::SUCCESS;
            }
            "--candidate" => candidate = args.next(),
            "--content-type" => content_type = args.next(),
            "--stack-kib" => match args.next().and_then(|s| s.parse::<usize>().ok()) {
                Some(n) => stack_kib = Some(n),
                None => return usage(),
            },
            _ if a.starts_with("--") => return usage(),
            _ => files.push(PathBuf::from(a)),
        }
    }
    let Some(candidate) = candidate else {
        return usage();
    };
    if !CANDIDATES.iter().any(|(n, _)| *n == candidate) {
        eprintln!("fleetgate-extract-candidates: unknown candidate {candidate}");
        return ExitCode::from(2);
    }
    if let Some(ct) = &content_type {
        let lower = ct.to_ascii_lowercase();
        if let Some(cs) = lower
            .split(';')
            .find_map(|p| p.trim().strip_prefix("charset="))
        {
            let cs = cs.trim_matches('"');
            if cs != "utf-8" && cs != "utf8" {
                eprintln!("fleetgate-extract-candidates: only UTF-8 pages are read (got {ct})");
                return ExitCode::from(2);
            }
        }
    }
    // A caught panic is recorded per page; the default hook's message would only be noise.
    std::panic::set_hook(Box::new(|_| {}));
    match stack_kib {
        None => convert_all(&candidate, &files),
        Some(kib) => {
            let spawned = std::thread::Builder::new()
                .stack_size(kib * 1024)
                .spawn(move || convert_all(&candidate, &files));
            match spawned.map(|h| h.join()) {
                Ok(Ok(code)) => code,
                _ => ExitCode::from(1),
            }
        }
    }
}

fn convert_all(candidate: &str, files: &[PathBuf]) -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let (mut panics, mut errors, mut empty) = (0usize, 0usize, 0usize);
    for file in files {
        let line = match std::fs::read(file) {
            Err(e) => {
                errors += 1;
                serde_json::json!({"file": file, "title": "", "markdown": "", "micros": 0,
                                   "error": "read_failed", "message": e.to_string()})
            }
            Ok(body) => {
                #[allow(clippy::disallowed_types)]
                let started = Instant::now();
                let result = catch_unwind(AssertUnwindSafe(|| {
                    let html = String::from_utf8_lossy(&body);
                    run(candidate, &html)
                }));
                let micros = started.elapsed().as_micros() as u64;
                match result {
                    Ok(Ok(o)) => {
                        if o.text.trim().is_empty() {
                            empty += 1;
                        }
                        serde_json::json!({"file": file, "title": o.title, "markdown": o.text,
                                           "micros": micros, "error": null})
                    }
                    Ok(Err(msg)) => {
                        errors += 1;
                        serde_json::json!({"file": file, "title": "", "markdown": "",
                                           "micros": micros, "error": "failed", "message": msg})
                    }
                    Err(p) => {
                        panics += 1;
                        let msg = p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        serde_json::json!({"file": file, "title": "", "markdown": "",
                                           "micros": micros, "error": "panic", "message": msg})
                    }
                }
            }
        };
        if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
            return ExitCode::from(1);
        }
    }
    eprintln!(
        "fleetgate-extract-candidates: {candidate}: {} files, {panics} panics, {errors} errors, {empty} empty",
        files.len()
    );
    ExitCode::SUCCESS
}

//! Differential test of stage E7 against the real Hermes in the test venv.
//!
//! Generated pages (fixed seed: random line lengths, multibyte and Python-whitespace characters,
//! embedded data-URI images in every form, binary magic prefixes, newlines placed on the snapping
//! thresholds) go through Hermes' own Python functions in one process — image conversion,
//! truncation with the store in a temp dir, binary detection when the installed version has it,
//! the store's host slug — and through fleetgate's. Outputs must be equal character for character;
//! only the store directory in the footer path is normalised, and the stored files must hold the
//! same bytes.
// Test-only helpers below may panic with expect(), like the tests they serve.
#![cfg(test)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use fleetgate_proxy::web::assemble::{Store, binary, images, truncate};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Runs Hermes' functions over the cases file; writes the results file.
const HERMES_SIDE: &str = r#"
import hashlib, json, os, sys

try:
    from tools.web_tools_truncate import _truncate_with_footer, convert_base64_images_to_links
except ImportError:
    from tools.web_tools import _truncate_with_footer, convert_base64_images_to_links
try:
    from tools.web_tools_truncate import _store_full_text
except ImportError:
    from tools.web_tools import _store_full_text
try:
    from tools.web_tools_truncate import _binary_payload_kind
except ImportError:
    _binary_payload_kind = None

SAVED = "Full text saved to: "

def stored_digest(out):
    for line in out.split("\n"):
        if line.startswith(SAVED):
            with open(line[len(SAVED):], "rb") as fh:
                return hashlib.sha256(fh.read()).hexdigest()
    return None

cases_path, results_path, blocked_home = sys.argv[1:4]
with open(cases_path, encoding="utf-8") as fh:
    cases = json.load(fh)
pages = []
for page in cases["pages"]:
    kind = _binary_payload_kind(page["text"]) if _binary_payload_kind else None
    clean = convert_base64_images_to_links(page["text"])
    outs = []
    for limit in page["limits"]:
        out, _ = _truncate_with_footer(clean, page["url"], limit)
        outs.append({"text": out, "stored_sha256": stored_digest(out)})
    pages.append({"binary": kind or None, "clean": clean, "truncated": outs})
slugs = []
for url in cases["slug_urls"]:
    path = _store_full_text(url, "x")
    slugs.append(os.path.basename(path) if path else None)
os.environ["HERMES_HOME"] = blocked_home
unstorable = _truncate_with_footer(cases["unstorable"], "https://e.com/u", 2000)[0]
with open(results_path, "w", encoding="utf-8") as fh:
    json.dump({"binary_available": _binary_payload_kind is not None, "pages": pages,
               "slugs": slugs, "unstorable": unstorable}, fh)
"#;

const LIMITS: &[usize] = &[2_000, 2_001, 2_002, 2_003, 2_999, 4_000, 15_000];

const URLS: &[&str] = &[
    "https://example.com/a",
    "https://Docs.Example.COM:8443/x?y=1",
    "http://[::1]:8080/p",
    "https://bücher.de/p",
    "https://user:pw@host.example/",
    "https://e.com/",
];

const SLUG_URLS: &[&str] = &[
    "https://example.com/a",
    "https://WWW.Example.COM/",
    "http://e.com:8080/x",
    "https://a@b@e.com/",
    "http://[::1]:8080/",
    "http://[fe80::1%25Eth0]/",
    "example.com/path",
    "//cdn.example/x",
    "https:///path",
    "file:///etc/passwd",
    "https://bücher.de/",
    "https://-a-/",
    "ht\ttps://e\n.com/",
    "\u{1} https://e.com/",
    "ht*tp://e.com/",
    "https://e.com?q=1",
    "http://[v1.fe]/",
    "http://[::1/",
    "http://e.com]/",
    "http://[127.0.0.1]/",
    "http://[example.com]/",
    "http://[vz.x]/",
    "http://[fe80::1%]/",
    "https://UPPER_case-host.Example:99/x",
    "mailto:someone@example.com",
];

/// Leading bytes of binary files, listed kinds and others, as latin-1 text.
const MAGIC: &[&[u8]] = &[
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    b"\xff\xd8\xff\xe0",
    b"GIF89a",
    b"PK\x03\x04",
    b"\x1f\x8b\x08",
    b"BZh9",
    b"\xfd7zXZ\x00\x00",
    b"7z\xbc\xaf\x27\x1c",
    b"\x7fELF",
    b"\xcf\xfa\xed\xfe",
    b"SQLite format 3\x00",
    b"OggS",
    b"fLaC",
    b"II*\x00",
    b"MM\x00*",
    b"%PDF-1.7",
    b"MZ\x90\x00",
    b"RIFF\x24\x00\x00\x00WAVE",
    b"\x00\x00\x00\x18ftypmp42",
];

const TEXT_PIECES: &[&str] = &[
    "a", "b", "e", "t", "x", "z", "Q", "0", "9", " ", " ", " ", "é", "€", "😀", "中", "ß",
    "\u{3000}", "\u{1c}", "\u{85}", "\u{a0}", "[", "]", "(", ")", "!", ";", "=", "/", "+", "\t",
    ",", ".",
];

const ALTS: &[&str] = &[
    "",
    " ",
    "logo",
    " a cat ",
    "x]y",
    "a[b",
    "\u{3000}z\u{3000}",
    "\u{1c}x\u{1f}",
    "multi\nline",
    "é😀",
];
const TYPES: &[&str] = &["png", "svg+xml", "jpeg", "gif", "x-icon", "p\nng"];
const SPACES: &[&str] = &["", " ", "\n ", "\u{1c}", "\u{85}", "\u{3000}"];

/// SplitMix64: a fixed seed gives the same pages on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T: ?Sized>(&mut self, items: &[&'a T]) -> &'a T {
        items[self.below(items.len())]
    }
}

fn payload(rng: &mut Rng, spaced: bool) -> String {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=";
    let mut out = String::new();
    for _ in 0..1 + rng.below(120) {
        if spaced && rng.below(12) == 0 {
            out.push_str(rng.pick(&[" ", "\n", "\u{3000}", "\t"]));
        }
        out.push(char::from(B64[rng.below(B64.len())]));
    }
    out
}

/// One image reference in a random form, matching or deliberately not.
fn image(rng: &mut Rng) -> String {
    let alt = rng.pick(ALTS);
    let ty = rng.pick(TYPES);
    let ws = rng.pick(SPACES);
    match rng.below(9) {
        0 | 1 => format!(
            "![{alt}]({ws}data:image/{ty};base64,{})",
            payload(rng, true)
        ),
        2 => format!("({ws}data:image/{ty};base64,{})", payload(rng, true)),
        3 => format!("data:image/{ty};base64,{}", payload(rng, true)),
        4 => format!("![{alt}](https://img.example/{}.png)", rng.below(100)),
        5 => format!("![{alt}](data:image/{ty};base64,{}", payload(rng, false)),
        6 => format!("DATA:IMAGE/png;base64,{}", payload(rng, false)),
        7 => format!("data:image/{ty},{}", payload(rng, false)),
        _ => format!("![{alt}](data:image/;base64,{})", payload(rng, false)),
    }
}

fn line(rng: &mut Rng, max_len: usize, multibyte: bool) -> String {
    let len = rng.below(max_len + 1);
    (0..len)
        .map(|_| {
            if multibyte || rng.below(4) == 0 {
                rng.pick(TEXT_PIECES)
            } else {
                rng.pick(&["a", "b", "c", " "])
            }
        })
        .collect()
}

/// A page of one of several shapes, with images and sometimes a binary prefix.
fn page(rng: &mut Rng, shape: usize) -> String {
    let (target, max_line, multibyte) = match shape {
        0 => (1_500, 80, false),
        1 => (12_000, 120, false),
        2 => (9_000, 20_000, false),
        3 => (6_000, 4, false),
        _ => (8_000, 60, true),
    };
    let mut out = String::new();
    if rng.below(6) == 0 {
        let magic = MAGIC[rng.below(MAGIC.len())];
        out.extend(magic.iter().map(|&b| char::from(b)));
    }
    while out.chars().count() < target {
        if rng.below(5) == 0 {
            out.push_str(&image(rng));
        }
        out.push_str(&line(rng, max_line, multibyte));
        out.push('\n');
    }
    out
}

/// Pages with newlines on the head and tail snapping thresholds for `limit`.
fn threshold_pages(limit: usize) -> Vec<String> {
    let head_budget = limit * 3 / 4;
    let tail_budget = limit - head_budget;
    let total = 10_000;
    let mut pages = Vec::new();
    for (head_nl, tail_nl) in [
        (head_budget / 2, tail_budget.div_ceil(2)),
        (head_budget / 2 + 1, tail_budget.div_ceil(2) - 1),
    ] {
        // Multibyte filler so character and byte positions differ.
        let mut chars: Vec<char> = "é😀a".chars().cycle().take(total).collect();
        chars[head_nl] = '\n';
        chars[total - tail_budget + tail_nl] = '\n';
        pages.push(chars.into_iter().collect());
    }
    pages
}

fn cases() -> Value {
    let mut rng = Rng(0x00F1_EE79_A7E5_0007);
    let mut pages = Vec::new();
    for i in 0..60 {
        let text = page(&mut rng, i % 5);
        pages.push(json!({"url": URLS[i % URLS.len()], "text": text, "limits": LIMITS}));
    }
    for &limit in &LIMITS[..4] {
        for text in threshold_pages(limit) {
            pages.push(json!({"url": "https://edge.example/t", "text": text, "limits": [limit]}));
        }
    }
    // Over the store cap: the stored copy gets the note.
    let big: String = "abcdefghé\n".repeat(210_000);
    pages.push(json!({"url": "https://big.example/", "text": big, "limits": [500_000]}));
    json!({"pages": pages, "slug_urls": SLUG_URLS, "unstorable": "u".repeat(3_000)})
}

fn venv() -> Option<PathBuf> {
    match std::env::var_os("FLEETGATE_VENV") {
        Some(v) => Some(PathBuf::from(v)),
        None if std::env::var("FLEETGATE_REQUIRE_VENV").as_deref() == Ok("1") => {
            panic!("FLEETGATE_VENV must be set when FLEETGATE_REQUIRE_VENV=1")
        }
        None => {
            eprintln!("skipped: FLEETGATE_VENV not set (run tests/run)");
            None
        }
    }
}

fn run_hermes(venv: &Path, work: &Path, cases: &Value) -> Value {
    let cases_path = work.join("cases.json");
    let results_path = work.join("results.json");
    let blocked = work.join("blocked-home");
    std::fs::create_dir_all(&blocked).expect("the blocked home must be creatable");
    // A regular file where the cache directory should be makes Hermes' store fail.
    std::fs::write(blocked.join("cache"), "x").expect("the blocker must be writable");
    std::fs::write(
        &cases_path,
        serde_json::to_vec(cases).expect("cases serialize"),
    )
    .expect("cases written");
    let output = Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(HERMES_SIDE)
        .arg(&cases_path)
        .arg(&results_path)
        .arg(&blocked)
        .env("HERMES_HOME", work.join("hermes-home"))
        .env("TERMINAL_ENV", "local")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(work)
        .output()
        .expect("the venv python must start");
    assert!(
        output.status.success(),
        "hermes side failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&std::fs::read(results_path).expect("results must exist"))
        .expect("results must parse")
}

/// Where two texts first differ, for a readable failure.
fn first_difference(a: &str, b: &str) -> String {
    let at = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let around = |s: &str| {
        s.chars()
            .skip(at.saturating_sub(40))
            .take(100)
            .collect::<String>()
    };
    format!(
        "first difference at char {at}\n  fleetgate: {:?}\n  hermes:    {:?}",
        around(a),
        around(b)
    )
}

fn stored_digest(text: &str) -> Option<String> {
    let path = text
        .lines()
        .find_map(|l| l.strip_prefix("Full text saved to: "))?;
    Some(hex::encode(Sha256::digest(
        std::fs::read(path).expect("the stored file must exist"),
    )))
}

#[test]
fn assembly_matches_hermes_on_generated_pages() {
    let Some(venv) = venv() else { return };
    let work = tempfile::tempdir().expect("a temp dir must be creatable");
    let cases = cases();
    let hermes = run_hermes(&venv, work.path(), &cases);
    let hermes_dir = format!("{}/", work.path().join("hermes-home/cache/web").display());
    let store = Store::new(&work.path().join("gate"), None);
    let our_dir = format!("{}/", store.dir().display());
    let mut failures = String::new();
    let mut compared = 0;
    let (mut with_images, mut stored) = (0, 0);
    let binary_available = hermes["binary_available"].as_bool() == Some(true);

    for (i, (case, theirs)) in cases["pages"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(hermes["pages"].as_array().into_iter().flatten())
        .enumerate()
    {
        let text = case["text"].as_str().expect("page text");
        let url = case["url"].as_str().expect("page url");
        if binary_available && binary::detect_binary(text) != theirs["binary"].as_str() {
            let _ = writeln!(
                failures,
                "page {i}: binary kind {:?} vs {:?}",
                binary::detect_binary(text),
                theirs["binary"]
            );
        }
        let clean = images::convert_base64_images_to_links(text);
        with_images += usize::from(clean != text);
        if clean != theirs["clean"].as_str().expect("clean text") {
            let _ = writeln!(
                failures,
                "page {i}: images {}",
                first_difference(&clean, theirs["clean"].as_str().unwrap_or(""))
            );
            continue;
        }
        for (limit, their) in case["limits"]
            .as_array()
            .into_iter()
            .flatten()
            .zip(theirs["truncated"].as_array().into_iter().flatten())
        {
            let limit = usize::try_from(limit.as_u64().expect("limit")).expect("limit fits");
            let ours = truncate::truncate_and_store(&clean, limit, url, Some(&store));
            let our_digest = stored_digest(&ours);
            stored += usize::from(our_digest.is_some());
            let ours = ours.replace(&our_dir, "<STORE>/");
            let their_text = their["text"]
                .as_str()
                .expect("hermes text")
                .replace(&hermes_dir, "<STORE>/");
            compared += 1;
            if ours != their_text {
                let _ = writeln!(
                    failures,
                    "page {i} limit {limit}: {}",
                    first_difference(&ours, &their_text)
                );
            } else if our_digest.as_deref() != their["stored_sha256"].as_str() {
                let _ = writeln!(failures, "page {i} limit {limit}: stored copies differ");
            }
        }
    }

    for (url, theirs) in SLUG_URLS
        .iter()
        .zip(hermes["slugs"].as_array().into_iter().flatten())
    {
        let ours = Store::file_name(url).ok();
        if ours.as_deref() != theirs.as_str() {
            let _ = writeln!(failures, "file name for {url:?}: {ours:?} vs {theirs}");
        }
    }

    let unstorable = cases["unstorable"].as_str().expect("unstorable text");
    let ours = truncate::truncate_and_store(unstorable, 2_000, "https://e.com/u", None);
    if ours != hermes["unstorable"].as_str().expect("hermes unstorable") {
        let _ = writeln!(
            failures,
            "not-stored footer: {}",
            first_difference(&ours, hermes["unstorable"].as_str().unwrap_or(""))
        );
    }

    if !binary_available {
        eprintln!(
            "note: the installed Hermes has no binary-payload check; binary kinds compared by unit tests only"
        );
    }
    eprintln!(
        "compared {compared} truncations ({stored} stored), {with_images} pages with images replaced, {} file names",
        SLUG_URLS.len()
    );
    assert!(
        compared > 400,
        "the differential run must cover the generated pages, got {compared}"
    );
    assert!(
        stored > 200,
        "most long pages must be truncated and stored, got {stored}"
    );
    assert!(
        with_images > 20,
        "many pages must carry replaced images, got {with_images}"
    );
    assert!(
        failures.is_empty(),
        "fleetgate must match Hermes:\n{failures}"
    );
}

//! The credential-prefix scanner: Hermes' `_PREFIX_RE` (56 families) as a hand-written search.
//!
//! Semantics of the regex being matched, which this file reproduces byte for byte:
//! - the leftmost start position wins; at one position the families are tried in list order;
//! - a match may start at the beginning, after a byte outside `[A-Za-z0-9_-]`, or after one of
//!   the escape reliefs `\` + ASCII letter, `\uXXXX`, `\xHH`;
//! - a match must not be followed by a byte of `[A-Za-z0-9_-]`;
//! - bodies are greedy and case-sensitive; the only non-ASCII characters any family accepts
//!   are the Unicode decimal digits of the Slack `xapp-` id (Python `\d`).
//!
//! The scan looks at each position through a table of the first two bytes of every prefix,
//! so nearly all positions cost one load. Every body class is either inside `[A-Za-z0-9_-]`
//! or a superset of it, so the greedy run is the only candidate length (no backtracking); a
//! failed candidate either stops within a bounded distance or consumed a run that holds no
//! further boundary, which keeps the scan linear.

use std::ops::Range;

use fleetgate_policy::secret_rules::LiteralFilter;

/// A set of ASCII bytes as a 128-bit mask (cheap to copy and test).
#[derive(Clone, Copy)]
struct Class(u128);

impl Class {
    const fn new(letters: bool, upper_only: bool, extra: &[u8]) -> Self {
        let mut mask = 0u128;
        let mut b = 0u8;
        while b < 128 {
            let letter = b.is_ascii_uppercase() || (!upper_only && b.is_ascii_lowercase());
            if (letters && letter) || b.is_ascii_digit() {
                mask |= 1 << b;
            }
            b += 1;
        }
        let mut i = 0;
        while i < extra.len() {
            mask |= 1 << extra[i];
            i += 1;
        }
        Self(mask)
    }

    #[inline]
    const fn has(self, b: u8) -> bool {
        b < 128 && (self.0 >> b) & 1 == 1
    }
}

/// `[A-Za-z0-9]`
const ALNUM: Class = Class::new(true, false, b"");
/// `[A-Za-z0-9_]`
const ALNUM_US: Class = Class::new(true, false, b"_");
/// `[A-Za-z0-9-]`
const ALNUM_DASH: Class = Class::new(true, false, b"-");
/// `[A-Za-z0-9_-]`: the word class of both boundaries.
const WORD: Class = Class::new(true, false, b"_-");
/// `[A-Za-z0-9_=-]`
const WORD_EQ: Class = Class::new(true, false, b"_-=");
/// `[A-Za-z0-9_.-]`
const WORD_DOT: Class = Class::new(true, false, b"_-.");
/// `[A-Z0-9]`
const UPPER_DIGIT: Class = Class::new(true, true, b"");

/// The body that follows a family's literal prefix.
#[derive(Clone, Copy)]
enum Body {
    /// `class{min,}`
    AtLeast(Class, usize),
    /// `class{n}`
    Exactly(Class, usize),
    /// `[A-Za-z0-9_-](?:\.?[A-Za-z0-9_-]){9,}`: single dots between body characters.
    DottedUnits,
    /// `\d+-[A-Za-z0-9-]{10,}` with Python's Unicode `\d`.
    SlackAppId,
    /// `(?:org_)?[A-Za-z0-9]{20,}`
    AgentMail,
}

/// One credential family: literal prefix and body.
#[derive(Clone, Copy)]
struct Family {
    prefix: &'static [u8],
    body: Body,
}

const fn at_least(prefix: &'static [u8], class: Class, min: usize) -> Family {
    Family {
        prefix,
        body: Body::AtLeast(class, min),
    }
}

/// Table entries: the 56 families, with `xox[baprs]-` counted as five.
const FAMILY_COUNT: usize = 60;

/// The 56 families in the regex's alternation order (Hermes `agent/redact.py`
/// `_PREFIX_PATTERNS`); the Slack `xox[baprs]-` family is spelled out as five entries.
const TABLE: [Family; FAMILY_COUNT] = [
    Family {
        prefix: b"sk-",
        body: Body::DottedUnits,
    },
    at_least(b"ghp_", ALNUM, 10),
    at_least(b"github_pat_", ALNUM_US, 10),
    at_least(b"gho_", ALNUM, 10),
    at_least(b"ghu_", ALNUM, 10),
    at_least(b"ghs_", ALNUM, 10),
    at_least(b"ghr_", ALNUM, 10),
    Family {
        prefix: b"xapp-",
        body: Body::SlackAppId,
    },
    at_least(b"xoxb-", ALNUM_DASH, 10),
    at_least(b"xoxa-", ALNUM_DASH, 10),
    at_least(b"xoxp-", ALNUM_DASH, 10),
    at_least(b"xoxr-", ALNUM_DASH, 10),
    at_least(b"xoxs-", ALNUM_DASH, 10),
    at_least(b"AIza", WORD, 30),
    at_least(b"pplx-", ALNUM, 10),
    at_least(b"fal_", WORD, 10),
    at_least(b"fc-", ALNUM, 10),
    at_least(b"bb_live_", WORD, 10),
    at_least(b"gAAAA", WORD_EQ, 20),
    Family {
        prefix: b"AKIA",
        body: Body::Exactly(UPPER_DIGIT, 16),
    },
    at_least(b"sk_live_", ALNUM, 10),
    at_least(b"sk_test_", ALNUM, 10),
    at_least(b"rk_live_", ALNUM, 10),
    at_least(b"SG.", WORD, 10),
    at_least(b"hf_", ALNUM, 10),
    at_least(b"r8_", ALNUM, 10),
    at_least(b"npm_", ALNUM, 10),
    at_least(b"pypi-", WORD, 10),
    at_least(b"dop_v1_", ALNUM, 10),
    at_least(b"doo_v1_", ALNUM, 10),
    Family {
        prefix: b"am_",
        body: Body::AgentMail,
    },
    at_least(b"sk_", ALNUM_US, 10),
    at_least(b"tvly-", ALNUM, 10),
    at_least(b"exa_", ALNUM, 10),
    at_least(b"gsk_", ALNUM, 10),
    at_least(b"syt_", ALNUM, 10),
    at_least(b"retaindb_", ALNUM, 10),
    at_least(b"hsk-", ALNUM, 10),
    at_least(b"mem0_", ALNUM, 10),
    at_least(b"brv_", ALNUM, 10),
    at_least(b"xai-", ALNUM, 30),
    at_least(b"ntn_", ALNUM, 10),
    at_least(b"fw-", ALNUM, 30),
    at_least(b"fw_", ALNUM, 30),
    at_least(b"fpk_", ALNUM, 30),
    at_least(b"glpat-", WORD, 10),
    at_least(b"gloas-", WORD, 10),
    at_least(b"gldt-", WORD, 10),
    at_least(b"glrt-", WORD_DOT, 10),
    at_least(b"glrtr-", WORD_DOT, 10),
    at_least(b"glcbt-", WORD, 10),
    at_least(b"glptt-", WORD, 10),
    at_least(b"glft-", WORD, 10),
    at_least(b"glimt-", WORD, 10),
    at_least(b"glagent-", WORD, 10),
    at_least(b"glsoat-", WORD, 10),
    at_least(b"glffct-", WORD, 10),
    at_least(b"glwt-", WORD, 10),
    at_least(b"GR1348941", WORD, 10),
    Family {
        prefix: b"pk-lf-",
        body: Body::AtLeast(ALNUM_DASH, 8),
    },
];

/// The table the scan reads (a `static`, so lookups never copy the `const`).
static FAMILIES: [Family; FAMILY_COUNT] = TABLE;

/// Lookup tables derived from [`TABLE`] at compile time.
struct Index {
    /// Family indices grouped by first prefix byte, list order kept inside a group.
    order: [u8; FAMILY_COUNT],
    /// `(start, len)` into `order` per first byte.
    groups: [(u8, u8); 128],
    /// Per byte pair `(first << 8) | second`: whether the pair opens some prefix. A byte per
    /// pair (64 KiB, of which a scan touches a few cache lines) keeps the test to one load.
    pairs: [bool; 65536],
}

static INDEX: Index = {
    let mut index = Index {
        order: [0; FAMILY_COUNT],
        groups: [(0, 0); 128],
        pairs: [false; 65536],
    };
    let mut n = 0;
    let mut b = 0;
    while b < 128 {
        let start = n;
        let mut i = 0;
        while i < TABLE.len() {
            let prefix = TABLE[i].prefix;
            if prefix[0] as usize == b {
                index.order[n] = i as u8;
                index.pairs[(b << 8) | prefix[1] as usize] = true;
                n += 1;
            }
            i += 1;
        }
        index.groups[b] = (start as u8, (n - start) as u8);
        b += 1;
    }
    index
};

/// The literal prefix of the Hermes family a match of [`find_credential_prefix`] starts with
/// (the longest one when several fit), e.g. `sk-` or `glpat-`.
pub fn family_prefix(matched: &str) -> &'static str {
    FAMILIES
        .iter()
        .map(|f| f.prefix)
        .filter(|p| matched.as_bytes().starts_with(p))
        .max_by_key(|p| p.len())
        .and_then(|p| std::str::from_utf8(p).ok())
        .unwrap_or("")
}

/// Find a credential-shaped token with Hermes' `_PREFIX_RE` semantics; the byte range of the
/// leftmost match.
///
/// One pass over the byte pairs: a position is examined further only when its two bytes open
/// some family's prefix (one table load), then the leading boundary is checked, then the
/// families of that first byte in list order. No allocation.
pub fn find_credential_prefix(s: &str) -> Option<Range<usize>> {
    let bytes = s.as_bytes();
    for (i, pair) in bytes.windows(2).enumerate() {
        let key = (usize::from(pair[0]) << 8) | usize::from(pair[1]);
        if INDEX.pairs[key]
            && leading_ok(bytes, i)
            && let Some(end) = match_group(s, i, pair[0])
        {
            return Some(i..end);
        }
    }
    None
}

/// Where a family's prefix may start in a text (with ASCII letters folded: a superset), for a
/// pass that reads the families with other literals ([`match_at`] at each position).
pub(super) fn prefix_filter() -> LiteralFilter {
    LiteralFilter::of(FAMILIES.iter().map(|f| f.prefix))
}

/// The end of the match of [`find_credential_prefix`]'s semantics that starts at `i` of `s`, if
/// one does: the leading boundary, then the families of its first byte in list order.
#[inline]
pub(super) fn match_at(s: &str, i: usize) -> Option<usize> {
    let bytes = s.as_bytes();
    let (&first, &second) = (bytes.get(i)?, bytes.get(i + 1)?);
    let key = (usize::from(first) << 8) | usize::from(second);
    if INDEX.pairs[key] && leading_ok(bytes, i) {
        match_group(s, i, first)
    } else {
        None
    }
}

/// The leading boundary at `i`: the start, a non-word byte before, or an escape relief.
#[inline]
fn leading_ok(b: &[u8], i: usize) -> bool {
    i == 0 || !WORD.has(b[i - 1]) || escape_relief(b, i)
}

/// The first family (list order) with first byte `b` matching at `i`.
#[inline(never)]
fn match_group(s: &str, i: usize, b: u8) -> Option<usize> {
    let &(start, len) = INDEX.groups.get(usize::from(b))?;
    let group = &INDEX.order[usize::from(start)..usize::from(start) + usize::from(len)];
    group
        .iter()
        .find_map(|&f| match_family(&FAMILIES[usize::from(f)], s, i))
}

/// The escape reliefs of the leading boundary: `\` + letter, `\uXXXX` or `\xHH` right before.
fn escape_relief(b: &[u8], i: usize) -> bool {
    let hex = |r: Range<usize>| b[r].iter().all(u8::is_ascii_hexdigit);
    (i >= 2 && b[i - 2] == b'\\' && b[i - 1].is_ascii_alphabetic())
        || (i >= 6 && b[i - 6] == b'\\' && b[i - 5] == b'u' && hex(i - 4..i))
        || (i >= 4 && b[i - 4] == b'\\' && b[i - 3] == b'x' && hex(i - 2..i))
}

/// The end of `family`'s match starting at `i`, if it matches there.
#[inline]
fn match_family(family: &Family, s: &str, i: usize) -> Option<usize> {
    let b = s.as_bytes();
    // A byte loop: prefixes are short and usually differ early, cheaper than a memcmp call.
    let rest = &b[i..];
    if rest.len() < family.prefix.len() || rest.iter().zip(family.prefix).any(|(x, y)| x != y) {
        return None;
    }
    let p = i + family.prefix.len();
    let end = match family.body {
        Body::AtLeast(class, min) => {
            let run = run_len(b, p, class);
            (run >= min).then_some(p + run)?
        }
        Body::Exactly(class, n) => {
            let ok = b.len() >= p + n && b[p..p + n].iter().all(|&c| class.has(c));
            ok.then_some(p + n)?
        }
        Body::DottedUnits => dotted_units_end(b, p)?,
        Body::SlackAppId => slack_app_end(s, p)?,
        Body::AgentMail => agent_mail_end(b, p)?,
    };
    trailing_ok(b, end).then_some(end)
}

#[inline]
fn run_len(b: &[u8], from: usize, class: Class) -> usize {
    b[from.min(b.len())..]
        .iter()
        .take_while(|&&c| class.has(c))
        .count()
}

#[inline]
fn trailing_ok(b: &[u8], end: usize) -> bool {
    b.get(end).is_none_or(|&c| !WORD.has(c))
}

/// `[W](?:\.?[W]){9,}`: one body byte, then at least nine units of an optional dot and a byte.
fn dotted_units_end(b: &[u8], p: usize) -> Option<usize> {
    if !b.get(p).is_some_and(|&c| WORD.has(c)) {
        return None;
    }
    let mut k = p + 1;
    let mut units = 0;
    loop {
        match (b.get(k), b.get(k + 1)) {
            (Some(&c), _) if WORD.has(c) => k += 1,
            (Some(b'.'), Some(&c)) if WORD.has(c) => k += 2,
            _ => break,
        }
        units += 1;
    }
    (units >= 9).then_some(k)
}

/// `\d+-[A-Za-z0-9-]{10,}` after `xapp-`, `\d` being any Unicode decimal digit.
fn slack_app_end(s: &str, p: usize) -> Option<usize> {
    let b = s.as_bytes();
    let digits: usize = s[p..]
        .chars()
        .take_while(|&c| is_unicode_decimal(c))
        .map(char::len_utf8)
        .sum();
    if digits == 0 || b.get(p + digits) != Some(&b'-') {
        return None;
    }
    let body = p + digits + 1;
    let run = run_len(b, body, ALNUM_DASH);
    (run >= 10).then_some(body + run)
}

/// `(?:org_)?[A-Za-z0-9]{20,}` after `am_`: with `org_` when it leads to a match, else without.
fn agent_mail_end(b: &[u8], p: usize) -> Option<usize> {
    if b[p..].starts_with(b"org_") {
        let run = run_len(b, p + 4, ALNUM);
        if run >= 20 && trailing_ok(b, p + 4 + run) {
            return Some(p + 4 + run);
        }
    }
    let run = run_len(b, p, ALNUM);
    (run >= 20).then_some(p + run)
}

/// Python's `\d` for `str` patterns: Unicode general category Nd (Unicode 14, CPython 3.11).
fn is_unicode_decimal(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    DECIMAL_RANGES
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Unicode 14 Nd ranges (the set CPython 3.11's `\d` matches), ascending.
const DECIMAL_RANGES: &[(char, char)] = &[
    ('\u{30}', '\u{39}'),
    ('\u{660}', '\u{669}'),
    ('\u{6F0}', '\u{6F9}'),
    ('\u{7C0}', '\u{7C9}'),
    ('\u{966}', '\u{96F}'),
    ('\u{9E6}', '\u{9EF}'),
    ('\u{A66}', '\u{A6F}'),
    ('\u{AE6}', '\u{AEF}'),
    ('\u{B66}', '\u{B6F}'),
    ('\u{BE6}', '\u{BEF}'),
    ('\u{C66}', '\u{C6F}'),
    ('\u{CE6}', '\u{CEF}'),
    ('\u{D66}', '\u{D6F}'),
    ('\u{DE6}', '\u{DEF}'),
    ('\u{E50}', '\u{E59}'),
    ('\u{ED0}', '\u{ED9}'),
    ('\u{F20}', '\u{F29}'),
    ('\u{1040}', '\u{1049}'),
    ('\u{1090}', '\u{1099}'),
    ('\u{17E0}', '\u{17E9}'),
    ('\u{1810}', '\u{1819}'),
    ('\u{1946}', '\u{194F}'),
    ('\u{19D0}', '\u{19D9}'),
    ('\u{1A80}', '\u{1A89}'),
    ('\u{1A90}', '\u{1A99}'),
    ('\u{1B50}', '\u{1B59}'),
    ('\u{1BB0}', '\u{1BB9}'),
    ('\u{1C40}', '\u{1C49}'),
    ('\u{1C50}', '\u{1C59}'),
    ('\u{A620}', '\u{A629}'),
    ('\u{A8D0}', '\u{A8D9}'),
    ('\u{A900}', '\u{A909}'),
    ('\u{A9D0}', '\u{A9D9}'),
    ('\u{A9F0}', '\u{A9F9}'),
    ('\u{AA50}', '\u{AA59}'),
    ('\u{ABF0}', '\u{ABF9}'),
    ('\u{FF10}', '\u{FF19}'),
    ('\u{104A0}', '\u{104A9}'),
    ('\u{10D30}', '\u{10D39}'),
    ('\u{11066}', '\u{1106F}'),
    ('\u{110F0}', '\u{110F9}'),
    ('\u{11136}', '\u{1113F}'),
    ('\u{111D0}', '\u{111D9}'),
    ('\u{112F0}', '\u{112F9}'),
    ('\u{11450}', '\u{11459}'),
    ('\u{114D0}', '\u{114D9}'),
    ('\u{11650}', '\u{11659}'),
    ('\u{116C0}', '\u{116C9}'),
    ('\u{11730}', '\u{11739}'),
    ('\u{118E0}', '\u{118E9}'),
    ('\u{11950}', '\u{11959}'),
    ('\u{11C50}', '\u{11C59}'),
    ('\u{11D50}', '\u{11D59}'),
    ('\u{11DA0}', '\u{11DA9}'),
    ('\u{16A60}', '\u{16A69}'),
    ('\u{16AC0}', '\u{16AC9}'),
    ('\u{16B50}', '\u{16B59}'),
    ('\u{1D7CE}', '\u{1D7FF}'),
    ('\u{1E140}', '\u{1E149}'),
    ('\u{1E2F0}', '\u{1E2F9}'),
    ('\u{1E950}', '\u{1E959}'),
    ('\u{1FBF0}', '\u{1FBF9}'),
];

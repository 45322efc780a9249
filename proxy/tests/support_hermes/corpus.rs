//! The seeded differential corpus: spec vectors, tokens of every family at their boundaries,
//! encoded forms, random mutations, random query strings and URLs for the normaliser.

/// A small deterministic generator (SplitMix64), so the corpus is the same on every run.
#[derive(Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n).unwrap_or(1)).unwrap_or(0)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn string_from(&mut self, alphabet: &[char], len: usize) -> String {
        (0..len).map(|_| *self.pick(alphabet)).collect()
    }
}

const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const ALNUM_US: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_";
const ALNUM_DASH: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-";
const WORD: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
const UPPER_DIGIT: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// (prefix, body alphabet, minimum body length, fixed length): the spec's 56 families, with
/// all five Slack `xox?-` letters, Unicode-digit Slack app ids and the `am_org_` form added.
const FAMILIES: &[(&str, &str, usize, bool)] = &[
    ("sk-", WORD, 10, false),
    ("ghp_", ALNUM, 10, false),
    ("github_pat_", ALNUM_US, 10, false),
    ("gho_", ALNUM, 10, false),
    ("ghu_", ALNUM, 10, false),
    ("ghs_", ALNUM, 10, false),
    ("ghr_", ALNUM, 10, false),
    ("xapp-1-", ALNUM_DASH, 10, false),
    ("xapp-\u{661}\u{662}-", ALNUM_DASH, 10, false),
    ("xoxb-", ALNUM_DASH, 10, false),
    ("xoxa-", ALNUM_DASH, 10, false),
    ("xoxp-", ALNUM_DASH, 10, false),
    ("xoxr-", ALNUM_DASH, 10, false),
    ("xoxs-", ALNUM_DASH, 10, false),
    ("AIza", WORD, 30, false),
    ("pplx-", ALNUM, 10, false),
    ("fal_", WORD, 10, false),
    ("fc-", ALNUM, 10, false),
    ("bb_live_", WORD, 10, false),
    ("gAAAA", WORD, 20, false),
    ("AKIA", UPPER_DIGIT, 16, true),
    ("sk_live_", ALNUM, 10, false),
    ("sk_test_", ALNUM, 10, false),
    ("rk_live_", ALNUM, 10, false),
    ("SG.", WORD, 10, false),
    ("hf_", ALNUM, 10, false),
    ("r8_", ALNUM, 10, false),
    ("npm_", ALNUM, 10, false),
    ("pypi-", WORD, 10, false),
    ("dop_v1_", ALNUM, 10, false),
    ("doo_v1_", ALNUM, 10, false),
    ("am_", ALNUM, 20, false),
    ("am_org_", ALNUM, 20, false),
    ("sk_", ALNUM_US, 10, false),
    ("tvly-", ALNUM, 10, false),
    ("exa_", ALNUM, 10, false),
    ("gsk_", ALNUM, 10, false),
    ("syt_", ALNUM, 10, false),
    ("retaindb_", ALNUM, 10, false),
    ("hsk-", ALNUM, 10, false),
    ("mem0_", ALNUM, 10, false),
    ("brv_", ALNUM, 10, false),
    ("xai-", ALNUM, 30, false),
    ("ntn_", ALNUM, 10, false),
    ("fw-", ALNUM, 30, false),
    ("fw_", ALNUM, 30, false),
    ("fpk_", ALNUM, 30, false),
    ("glpat-", WORD, 10, false),
    ("gloas-", WORD, 10, false),
    ("gldt-", WORD, 10, false),
    ("glrt-", WORD, 10, false),
    ("glrtr-", WORD, 10, false),
    ("glcbt-", WORD, 10, false),
    ("glptt-", WORD, 10, false),
    ("glft-", WORD, 10, false),
    ("glimt-", WORD, 10, false),
    ("glagent-", WORD, 10, false),
    ("glsoat-", WORD, 10, false),
    ("glffct-", WORD, 10, false),
    ("glwt-", WORD, 10, false),
    ("GR1348941", WORD, 10, false),
    ("pk-lf-", ALNUM_DASH, 8, false),
];

/// What may precede a token: boundaries, word characters, escape reliefs and near-misses.
const LEADS: &[&str] = &[
    "", " ", "/", "=", "?q=", "&", "#", ".", "%", "é", "a", "Z", "0", "_", "-", "\\n", "\\t",
    "\\u0041", "\\uFFfe", "\\x41", "\\U0041", "\\x4", "\\u004", "\\\\n", "\\", "ask", "\u{661}",
];
/// What may follow a token: boundaries, body characters, dots and near-misses.
const TAILS: &[&str] = &[
    "", " ", "/", "&", "#", "?", ".", "..", "=", "a", "_", "-", "Z", "é", ".x", "%20", "\\n",
];
/// Where a token is placed in a URL (`{}` is the token).
const TEMPLATES: &[&str] = &[
    "{}",
    "https://e.com/{}",
    "https://e.com/?q={}",
    "https://e.com/a?k=v&t={}&z=1",
    "https://e.com/#{}",
    "https://{}.e.com/",
    "https://u:{}@e.com/",
    "http://e.com/path/{}/x",
    "  https://e.com/{} ",
];

/// Characters random mutations insert: printable ASCII plus controls and Unicode that
/// exercise stripping, IDNA, decimal digits, NFKC and the escape rules.
fn mutation_alphabet() -> Vec<char> {
    let mut v: Vec<char> = (0x20u8..0x7f).map(char::from).collect();
    v.extend([
        '\t', '\n', '\r', '\u{0}', '\u{1c}', 'é', 'ß', 'İ', '\u{212a}', 'ａ', '\u{3002}',
        '\u{ff0e}', '\u{200d}', '\u{3000}', '\u{661}', '\u{301}', '💩', '\u{2100}', '\u{ff0f}',
        '\u{ff20}', '\u{a0}', '\u{fffd}', 'ς', 'Ö', '日',
    ]);
    v
}

/// The fixed vectors of the spec (§2.2, §2.4, §2.5, §17 seeds 1-3) and near-misses.
const VECTORS: &[&str] = &[
    "https://x.com/?q=sk-abcdefghij",
    "https://x.com/?q=sk-abcdefghi",
    "https://x.com/a?k=sk-abc.def.ghij.klm",
    "https://x.com/sk-abcdefghij.",
    "https://x.com/%73k-abcdefghij",
    "AKIAIOSFODNN7EXAMPLE",
    "AKIAIOSFODNN7EXAMPLEX",
    "/ask-abcdefghijk",
    "?q=sk-abcdefghij",
    "https://x.com/?token=abc",
    "https://x.com/?token=",
    "https://x.com/?TOKEN=x",
    "https://x.com/?%2574oken=x",
    "https://x.com/?code=x&key=y",
    "https://x.com/?X-Amz-Signature=z",
    "https://x.com/#token=x",
    "https://e.com/?q=sk-abcdefghij",
    "https://e.com/%73k-abcdefghij",
    "https://e.com/?token=x",
    "https://e.com/?token=",
    "https://x.com/a b/é%41[x]|",
    "https://  docs.example/a",
    "https://wttr.in/Köln",
    "ftp://x/a b",
    "",
    "   ",
    "risk-assessment-abcdefghijk",
    "am_example_identifier_123",
];

/// Internationalised hosts on which IDNA 2003 and UTS-46 agree: no exclusion is allowed
/// for URLs built from them.
pub const CURATED_IDN_HOSTS: &[&str] = &[
    "köln.de",
    "bücher.example",
    "münchen.de",
    "例え.jp",
    "日本語.jp",
    "пример.рф",
    "παράδειγμα.δοκιμή",
    "مثال.إختبار",
    "דוגמה.טסט",
    "中文.中国",
    "한국.kr",
    "straße.de",
    "café.fr",
    "ñandú.com",
    "ö\u{3002}de",
    "ａｂｃ.com",
    "ab\u{200d}c.ö",
    "xn--nda.ö",
];

/// Hosts for the normaliser: ASCII, bracketed forms (valid and invalid for Python), exotic
/// Unicode and NFKC traps.
const HOSTS: &[&str] = &[
    "example.com",
    "EXAMPLE.com",
    "a..b",
    "x",
    "[::1]",
    "[::ffff:1.2.3.4]",
    "[1.2.3.4]",
    "[::1",
    "::1]",
    "[v1.abc]",
    "[v1]",
    "[V1.abc]",
    "[fe80::1%25eth0]",
    "[fe80::1%]",
    "[1:2:3:4:5:6:7:8]",
    "[1::2::3]",
    "[::1:2:3:4:5:6:7]",
    "[1:2:3:4:5:6:7::]",
    "[::]",
    "[0:0:0:0:0:0:1.2.3.4]",
    "[::01.2.3.4]",
    "[:1:2:3:4:5:6:7]",
    "[1:2:3:4:5:6:7:8:9]",
    "[12345::]",
    "[::g]",
    "exa\u{2100}mple.com",
    "a\u{ff0f}b",
    "ÖL.de",
    "ﬁ.com",
    "ß.de",
    "ς.gr",
    "İstanbul.tr",
    "💩.la",
    "☃.net",
    "\u{fe0f}a.com",
    "Köln.de",
    "ö..de",
    // Exotic on purpose: IDNA 2003 and UTS-46 part ways on these (combining mark first,
    // a character mapping to a dot, mixed-direction labels, private use, newer scripts).
    "\u{301}a.com",
    "a\u{2488}b.com",
    "\u{5d0}a.com",
    "a\u{5d0}.com",
    "ö\u{e000}.com",
    "\u{1e900}.com",
    "x\u{a8f0}.com",
];

/// Build the whole corpus from `seed`.
pub fn build(seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let mut out: Vec<String> = VECTORS.iter().map(|s| (*s).to_string()).collect();
    out.extend(
        CURATED_IDN_HOSTS
            .iter()
            .map(|h| format!("https://{h}/p?q=1")),
    );
    out.extend(family_tokens(&mut rng));
    let encoded: Vec<String> = (0..400).map(|_| encoded_token(&mut rng)).collect();
    out.extend(encoded);
    let alphabet = mutation_alphabet();
    out.extend((0..300).map(|_| encoded_bytes(&mut rng, &alphabet)));
    out.extend((0..700).map(|_| query_url(&mut rng)));
    out.extend((0..800).map(|_| normaliser_url(&mut rng)));
    let mutated: Vec<String> = (0..1200)
        .map(|_| {
            let base = rng.pick(&out).clone();
            mutate(&mut rng, &base, &alphabet)
        })
        .collect();
    out.extend(mutated);
    out
}

/// Every family at min-1, min, min+1 and random lengths, with random boundaries, sometimes a
/// dot, a double dot or `=` inside, placed in a random URL position.
fn family_tokens(rng: &mut Rng) -> Vec<String> {
    let mut out = Vec::new();
    for &(prefix, alphabet, min, exact) in FAMILIES {
        let chars: Vec<char> = alphabet.chars().collect();
        for variant in 0..32 {
            let len = match (exact, variant % 6) {
                (true, v) => [min - 1, min, min + 1][v % 3],
                (false, 0) => min - 1,
                (false, 1 | 2) => min,
                (false, 3) => min + 1,
                _ => min + rng.below(30),
            };
            let mut body = rng.string_from(&chars, len);
            if rng.chance(20) && !body.is_empty() {
                let at = rng.below(body.len());
                let inner = *rng.pick::<&str>(&[".", "..", "=", "=="]);
                body.insert_str(at, inner);
            }
            let token = format!("{}{prefix}{body}{}", rng.pick(LEADS), rng.pick(TAILS));
            out.push(rng.pick(TEMPLATES).replace("{}", &token));
        }
    }
    out
}

/// Percent-escapes of valid and broken UTF-8 (truncated, overlong, surrogate, out of range),
/// mixed with literal non-ASCII characters and stray `%`.
fn encoded_bytes(rng: &mut Rng, alphabet: &[char]) -> String {
    let mut out = String::from("https://e.com/");
    for _ in 0..1 + rng.below(6) {
        let bytes: Vec<u8> = match rng.below(5) {
            0 => rng.pick(alphabet).to_string().into_bytes(),
            1 => {
                let full = rng.pick(alphabet).to_string().into_bytes();
                full[..1 + rng.below(full.len())].to_vec()
            }
            2 => rng
                .pick(&[
                    &b"\xc0\x80"[..],
                    b"\xed\xa0\x80",
                    b"\xf4\x90\x80\x80",
                    b"\xff",
                    b"\x80",
                ])
                .to_vec(),
            _ => vec![u8::try_from(rng.below(256)).unwrap_or(0)],
        };
        for b in bytes {
            out.push_str(&if rng.chance(50) {
                format!("%{b:02X}")
            } else {
                format!("%{b:02x}")
            });
        }
        match rng.below(4) {
            0 => out.push(*rng.pick(alphabet)),
            1 => out.push('%'),
            _ => {}
        }
    }
    out
}

/// A token with some of its bytes percent-encoded (mixed hex case, sometimes twice).
fn encoded_token(rng: &mut Rng) -> String {
    let &(prefix, alphabet, min, _) = rng.pick(FAMILIES);
    let chars: Vec<char> = alphabet.chars().collect();
    let len = min + rng.below(3);
    let token = format!("{prefix}{}", rng.string_from(&chars, len));
    let mut enc = String::new();
    for b in token.bytes() {
        if !b.is_ascii() || rng.chance(25) {
            let esc = if rng.chance(50) {
                format!("%{b:02X}")
            } else {
                format!("%{b:02x}")
            };
            if rng.chance(15) {
                enc.push_str(&esc.replacen('%', "%25", 1));
            } else {
                enc.push_str(&esc);
            }
        } else {
            enc.push(char::from(b));
        }
    }
    rng.pick(TEMPLATES).replace("{}", &enc)
}

const QUERY_KEYS: &[&str] = &[
    "access_token",
    "api_key",
    "apikey",
    "auth_token",
    "authorization",
    "awsaccesskeyid",
    "client_secret",
    "credential",
    "credentials",
    "jwt",
    "password",
    "passwd",
    "secret",
    "session_id",
    "signature",
    "token",
    "x_amz_security_token",
    "x_amz_signature",
    "x-amz-security-token",
    "x-amz-signature",
    "code",
    "key",
    "auth",
    "session",
    "sig",
    "q",
    "page",
    "refresh_token",
    "id_token",
    "x-goog-signature",
    "tokens",
    "mytoken",
];
const QUERY_VALUES: &[&str] = &[
    "",
    "x",
    "+",
    "%",
    "%2",
    "abc123",
    "%00",
    "a=b",
    "sk-abcdefghij",
    "%20",
    "é",
    "++",
];

/// One spelling of a query key: case changes, escapes (once or twice), `+` for `_`, the
/// Kelvin sign for `k`, stray spaces.
fn spell_key(rng: &mut Rng, key: &str) -> String {
    let cased = match rng.below(4) {
        0 => key.to_uppercase(),
        1 => key
            .chars()
            .map(|c| {
                if rng.chance(50) {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect(),
        _ => key.to_string(),
    };
    let at = rng.below(cased.len().max(1));
    let ch = cased[at..].chars().next().unwrap_or('x');
    let escaped = format!("%{:02X}", u32::from(ch));
    match rng.below(9) {
        0 => format!("{}{escaped}{}", &cased[..at], &cased[at + ch.len_utf8()..]),
        1 => format!(
            "{}%25{}{}",
            &cased[..at],
            &escaped[1..],
            &cased[at + ch.len_utf8()..]
        ),
        2 => cased.replace('_', "+"),
        3 => cased.replace('_', "%5F"),
        4 => cased.replace('k', "\u{212a}"),
        5 => format!("{cased}+"),
        _ => cased,
    }
}

/// A URL with a random query (and sometimes a fragment carrying credentials).
fn query_url(rng: &mut Rng) -> String {
    let mut pairs = Vec::new();
    for _ in 0..1 + rng.below(4) {
        let base = *rng.pick(QUERY_KEYS);
        let key = spell_key(rng, base);
        let pair = match rng.below(10) {
            0 => key,
            1 => String::new(),
            _ => format!("{key}={}", rng.pick(QUERY_VALUES)),
        };
        pairs.push(pair);
    }
    let sep = if rng.chance(10) { ";" } else { "&" };
    let scheme = rng.pick(&["https", "http", "HTTP", "ftp", "https", "https"]);
    let mut url = format!("{scheme}://e.com/p?{}", pairs.join(sep));
    match rng.below(6) {
        0 => url.push_str("#token=x"),
        1 => url.push_str("#/cb?access_token=y&state=1"),
        2 => url.push_str("#frag?token=z"),
        _ => {}
    }
    if rng.chance(10) {
        url = url.replacen('?', "#", 1);
    }
    url
}

/// A URL for the normaliser: scheme variants, whitespace after the separator, userinfo,
/// hosts of every kind, ports, and paths, queries and fragments of arbitrary characters.
fn normaliser_url(rng: &mut Rng) -> String {
    let scheme = rng.pick(&[
        "http",
        "https",
        "HTTP",
        "HtTpS",
        "ftp",
        "mailto",
        "javascript",
        "h-ttp",
        "1http",
        "http+x",
        "",
    ]);
    let sep = rng.pick(&["://", "://", "://", ":", ":/", "//"]);
    let gap = rng.pick(&[
        "", "", " ", "  ", "\t", "\u{3000}", "\n", "\u{a0}", "\u{1c}",
    ]);
    let userinfo = rng.pick(&["", "", "", "user@", "user:pass@", "ö@", ":@", "a@b@"]);
    let host = if rng.chance(30) {
        (*rng.pick(CURATED_IDN_HOSTS)).to_string()
    } else {
        (*rng.pick(HOSTS)).to_string()
    };
    let port = rng.pick(&["", "", "", ":80", ":8080", ":", ":x"]);
    let alphabet = mutation_alphabet();
    let mut url = format!("{scheme}{sep}{gap}{userinfo}{host}{port}");
    if rng.chance(85) {
        url.push('/');
        let len = rng.below(16);
        url.push_str(&rng.string_from(&alphabet, len));
    }
    if rng.chance(40) {
        url.push('?');
        let len = rng.below(12);
        url.push_str(&rng.string_from(&alphabet, len));
    }
    if rng.chance(25) {
        url.push('#');
        let len = rng.below(8);
        url.push_str(&rng.string_from(&alphabet, len));
    }
    let junk = ["", "", "", " ", "\u{1}", "\u{3000}", "\u{1c}", "\t"];
    format!("{}{url}{}", rng.pick(&junk), rng.pick(&junk))
}

/// One to four random edits: insert, delete, replace, or duplicate a span.
fn mutate(rng: &mut Rng, base: &str, alphabet: &[char]) -> String {
    let mut chars: Vec<char> = base.chars().collect();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(chars.len() + 1);
        match rng.below(4) {
            0 => chars.insert(at, *rng.pick(alphabet)),
            1 if at < chars.len() => {
                chars.remove(at);
            }
            2 if at < chars.len() => chars[at] = *rng.pick(alphabet),
            _ => {
                let end = (at + 1 + rng.below(6)).min(chars.len());
                let span: Vec<char> = chars[at.min(end)..end].to_vec();
                chars.splice(at..at, span);
            }
        }
    }
    chars.into_iter().collect()
}

/// Ordinary URLs without credentials, for the per-URL timing of the prefix search.
pub fn bench_urls(seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let words = [
        "docs",
        "api",
        "reference",
        "blog",
        "2024",
        "search",
        "news",
        "item",
        "v2",
    ];
    (0..500)
        .map(|_| {
            let path: Vec<&str> = (0..1 + rng.below(4)).map(|_| *rng.pick(&words)).collect();
            format!(
                "https://www.{}.com/{}?q={}&page={}#section-{}",
                rng.pick(&words),
                path.join("/"),
                rng.pick(&words),
                rng.below(50),
                rng.below(9)
            )
        })
        .collect()
}

//! The `*.`-rule matcher: Python `fnmatch` semantics without a regex engine.
//!
//! `*` matches any run of characters (dots included), `?` one character, `[...]` a set with
//! `!` negation and `a-z` ranges; an unclosed `[` is a literal. Sets are compiled the way
//! `fnmatch.translate` rewrites them (empty ranges removed, `-` at either end literal) and then
//! read the way Python's regex parser reads the rewritten set, so odd sets behave identically.
//! Matching is the classic two-pointer wildcard walk: linear in practice, no allocation.

/// A compiled glob rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Glob {
    tokens: Vec<Token>,
    /// The literal text after the last wildcard: a cheap reject before the walk.
    tail: String,
}

/// A rule that cannot be compiled (Python's regex compiler would raise on it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("failed to compile glob: {0}")]
pub(super) struct GlobError(&'static str);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Literal(char),
    AnyOne,
    Star,
    Set {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

// === impl Glob ===

impl Glob {
    /// Compile a pattern.
    pub(super) fn compile(pattern: &str) -> Result<Self, GlobError> {
        let pat: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < pat.len() {
            let c = pat[i];
            i += 1;
            match c {
                '*' if tokens.last() == Some(&Token::Star) => {}
                '*' => tokens.push(Token::Star),
                '?' => tokens.push(Token::AnyOne),
                '[' => match set_end(&pat, i) {
                    Some(end) => {
                        tokens.push(set_token(&pat[i..end])?);
                        i = end + 1;
                    }
                    None => tokens.push(Token::Literal('[')),
                },
                c => tokens.push(Token::Literal(c)),
            }
        }
        let mut tail: Vec<char> = tokens
            .iter()
            .rev()
            .map_while(|t| match t {
                Token::Literal(c) => Some(*c),
                _ => None,
            })
            .collect();
        tail.reverse();
        Ok(Self {
            tokens,
            tail: tail.into_iter().collect(),
        })
    }

    /// Whether `pattern` (a `*.`-rule) is exactly "any subdomain of a fixed name", i.e. has no
    /// wildcard after the leading `*.`; such rules are matched by suffix lookup instead.
    pub(super) fn plain_subdomain_base(pattern: &str) -> Option<&str> {
        pattern
            .strip_prefix("*.")
            .filter(|base| !base.contains(['*', '?', '[']))
    }

    /// Whether the whole of `text` matches.
    pub(super) fn matches(&self, text: &str) -> bool {
        if !text.ends_with(self.tail.as_str()) {
            return false;
        }
        if text.is_ascii() {
            match_tokens(&self.tokens, text.as_bytes())
        } else {
            let chars: Vec<char> = text.chars().collect();
            match_tokens(&self.tokens, &chars)
        }
    }
}

impl Token {
    fn matches(&self, c: char) -> bool {
        match self {
            Self::Literal(l) => *l == c,
            Self::AnyOne => true,
            Self::Star => false,
            Self::Set { negated, ranges } => {
                negated ^ ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c))
            }
        }
    }
}

fn match_tokens<T: Copy + Into<char>>(tokens: &[Token], text: &[T]) -> bool {
    let (mut t, mut s) = (0, 0);
    // The last star seen and the text position it currently absorbs up to.
    let mut star: Option<(usize, usize)> = None;
    while s < text.len() {
        match tokens.get(t) {
            Some(Token::Star) => {
                star = Some((t, s));
                t += 1;
                continue;
            }
            Some(tok) if tok.matches(text[s].into()) => {
                t += 1;
                s += 1;
                continue;
            }
            _ => {}
        }
        let Some((st, ss)) = star else {
            return false;
        };
        star = Some((st, ss + 1));
        t = st + 1;
        s = ss + 1;
    }
    tokens[t..].iter().all(|tok| *tok == Token::Star)
}

/// Index of the `]` closing a set opened before `start`, fnmatch-style: a leading `!` and a
/// leading `]` belong to the set.
fn set_end(pat: &[char], start: usize) -> Option<usize> {
    let mut j = start;
    if pat.get(j) == Some(&'!') {
        j += 1;
    }
    if pat.get(j) == Some(&']') {
        j += 1;
    }
    (j..pat.len()).find(|&k| pat[k] == ']')
}

/// One escaped-or-plain character of the rewritten set, as Python's regex parser sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SetChar {
    Plain(char),
    Escaped(char),
}

fn set_token(content: &[char]) -> Result<Token, GlobError> {
    let mut stuff = if content.contains(&'-') {
        rewrite_ranges(content)?
    } else {
        content.iter().map(|c| SetChar::Plain(*c)).collect()
    };
    for sc in &mut stuff {
        if let SetChar::Plain(c @ ('&' | '~' | '|' | '\\')) = *sc {
            *sc = SetChar::Escaped(c);
        }
    }
    match stuff.as_slice() {
        [] => {
            return Ok(Token::Set {
                negated: false,
                ranges: Vec::new(),
            });
        }
        [SetChar::Plain('!')] => return Ok(Token::AnyOne),
        _ => {}
    }
    let negated = stuff.first() == Some(&SetChar::Plain('!'));
    let body = if negated { &stuff[1..] } else { &stuff[..] };
    Ok(Token::Set {
        negated,
        ranges: parse_set(body)?,
    })
}

/// fnmatch's range rewrite: split on range hyphens, drop empty ranges (`z-a`), escape the
/// hyphens that are not range operators.
fn rewrite_ranges(content: &[char]) -> Result<Vec<SetChar>, GlobError> {
    let j = content.len();
    let mut chunks: Vec<Vec<char>> = Vec::new();
    let mut i = 0;
    let mut k = if content.first() == Some(&'!') { 2 } else { 1 };
    while let Some(hyphen) = (k..j).find(|&x| content[x] == '-') {
        chunks.push(content[i..hyphen].to_vec());
        i = hyphen + 1;
        k = hyphen + 3;
    }
    if i < j {
        chunks.push(content[i..j].to_vec());
    } else if let Some(last) = chunks.last_mut() {
        last.push('-');
    }
    for k in (1..chunks.len()).rev() {
        let (Some(&lo), Some(&hi)) = (chunks[k - 1].last(), chunks[k].first()) else {
            return Err(GlobError("empty chunk in a character set"));
        };
        if lo > hi {
            let tail = chunks.remove(k);
            chunks[k - 1].pop();
            chunks[k - 1].extend_from_slice(&tail[1..]);
        }
    }
    let mut out = Vec::new();
    for (n, chunk) in chunks.iter().enumerate() {
        if n > 0 {
            out.push(SetChar::Plain('-'));
        }
        out.extend(chunk.iter().map(|&c| match c {
            '-' => SetChar::Escaped('-'),
            c => SetChar::Plain(c),
        }));
    }
    Ok(out)
}

/// Read a rewritten set body as Python's regex parser does: items, `a-b` ranges, a trailing
/// `-` literal. A leading `^` or `[` was escaped by fnmatch, so both are literals here.
fn parse_set(body: &[SetChar]) -> Result<Vec<(char, char)>, GlobError> {
    let value = |sc: SetChar| match sc {
        SetChar::Plain(c) | SetChar::Escaped(c) => c,
    };
    let mut ranges = Vec::new();
    let mut p = 0;
    while p < body.len() {
        let lo = value(body[p]);
        p += 1;
        if body.get(p) != Some(&SetChar::Plain('-')) {
            ranges.push((lo, lo));
            continue;
        }
        match body.get(p + 1) {
            None => {
                ranges.push((lo, lo));
                ranges.push(('-', '-'));
                p += 1;
            }
            Some(&hi) => {
                let hi = value(hi);
                if hi < lo {
                    return Err(GlobError("bad character range"));
                }
                ranges.push((lo, hi));
                p += 2;
            }
        }
    }
    Ok(ranges)
}

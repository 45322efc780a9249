//! The keyword prefilter: which rules have a keyword somewhere in a text, every occurrence
//! counted (overlapping), ASCII letters compared without case.
//!
//! A URL is short and names a keyword rarely, so the index looks at each position through a
//! bit table of the lowercase byte pairs keywords start with (8 KiB, one load per position)
//! and compares whole keywords only where a pair starts one. That is the answer an
//! overlapping Aho-Corasick search gives, at a fraction of its cost per byte and of a DFA's
//! memory; a test holds the two to the same candidates.

use std::fmt;

/// The keywords of a rule set and the rules each belongs to.
pub(super) struct KeywordIndex {
    /// Bit `(a << 8) | b`: a keyword of two bytes or more starts with the lowercase pair `ab`.
    pairs: Box<[u64; 1024]>,
    /// How many bits of `pairs` are set before word `i` of it: with the bits set below a
    /// pair's own in its word, the pair's rank among the pairs keywords start with.
    rank: Box<[u16; 1024]>,
    /// Keywords of two bytes or more, sorted by their first two bytes.
    words: Vec<Word>,
    /// `words[groups[r]..groups[r + 1]]` start with the pair of rank `r`.
    groups: Vec<u16>,
    /// One-byte keywords.
    singles: Vec<Word>,
    /// Bit [`triple`] of the first three lowercase bytes of every keyword of three bytes or
    /// more: a pair that starts a keyword is compared only when its third byte may follow.
    triples: Box<[u64; 1024]>,
    /// Pairs that are a whole keyword (two bytes): compared whatever follows.
    short: Box<[u64; 1024]>,
}

/// The hash of three lowercase bytes into the 65,536 bits of [`KeywordIndex::triples`].
fn triple(key: usize, c: u8) -> usize {
    (key.wrapping_mul(0x9E37) ^ usize::from(c).wrapping_mul(0x2F1)) & 0xFFFF
}

/// One keyword (lowercase) and its rules.
struct Word {
    text: Box<[u8]>,
    rules: Vec<usize>,
}

impl fmt::Debug for KeywordIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeywordIndex")
            .field("keywords", &(self.words.len() + self.singles.len()))
            .finish()
    }
}

/// ASCII lowercase of every byte, one load.
const LOWER: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = (b as u8).to_ascii_lowercase();
        b += 1;
    }
    t
};

fn pair(a: u8, b: u8) -> usize {
    usize::from(LOWER[usize::from(a)]) << 8 | usize::from(LOWER[usize::from(b)])
}

impl KeywordIndex {
    /// The index of `keywords` (lowercase, non-empty, each once) with their rules; `None`
    /// when there is no keyword.
    pub(super) fn new(keywords: Vec<(String, Vec<usize>)>) -> Option<Self> {
        if keywords.is_empty() {
            return None;
        }
        let mut pairs = Box::new([0u64; 1024]);
        let mut triples = Box::new([0u64; 1024]);
        let mut short = Box::new([0u64; 1024]);
        let mut words = Vec::new();
        let mut singles = Vec::new();
        for (text, rules) in keywords {
            let word = Word {
                text: text.into_bytes().into_boxed_slice(),
                rules,
            };
            match *word.text {
                [a, b, ref rest @ ..] => {
                    let key = pair(a, b);
                    pairs[key / 64] |= 1 << (key % 64);
                    match rest.first() {
                        Some(&c) => {
                            let t = triple(key, LOWER[usize::from(c)]);
                            triples[t / 64] |= 1 << (t % 64);
                        }
                        None => short[key / 64] |= 1 << (key % 64),
                    }
                    words.push(word);
                }
                _ => singles.push(word),
            }
        }
        words.sort_by_key(|w| pair(w.text[0], w.text[1]));
        let mut rank = Box::new([0u16; 1024]);
        let mut set = 0u16;
        for (r, bits) in rank.iter_mut().zip(pairs.iter()) {
            *r = set;
            set += bits.count_ones() as u16;
        }
        // One group per pair, in key order: where its words start, and the end.
        let mut groups = Vec::with_capacity(usize::from(set) + 1);
        let mut last = None;
        for (i, w) in words.iter().enumerate() {
            let key = pair(w.text[0], w.text[1]);
            if last != Some(key) {
                groups.push(u16::try_from(i).ok()?);
                last = Some(key);
            }
        }
        groups.push(u16::try_from(words.len()).ok()?);
        Some(Self {
            pairs,
            rank,
            words,
            groups,
            singles,
            triples,
            short,
        })
    }

    /// Append to `out` the rules of every keyword occurrence in `text` (with repeats; the
    /// caller sorts and dedups).
    pub(super) fn candidates(&self, text: &[u8], out: &mut Vec<usize>) {
        if !self.singles.is_empty() {
            for &b in text {
                for word in &self.singles {
                    if word.text[0] == LOWER[usize::from(b)] {
                        out.extend_from_slice(&word.rules);
                    }
                }
            }
        }
        let Some((&head, rest)) = text.split_first() else {
            return;
        };
        // Words already found: a long text (a prompt) names "key" thousands of times, and
        // its rules need adding once. Words past the first 512 are added at every match.
        let mut found = [0u64; 8];
        let mut prev = LOWER[usize::from(head)];
        for (i, &b) in rest.iter().enumerate() {
            let cur = LOWER[usize::from(b)];
            let key = usize::from(prev) << 8 | usize::from(cur);
            if self.pairs[key >> 6] >> (key & 63) & 1 != 0 {
                // `text[i]` and `cur` (at i + 1) are the pair; the third byte, when there is
                // one, must be able to continue a keyword.
                let next = rest.get(i + 1).map(|&c| triple(key, LOWER[usize::from(c)]));
                let may = self.short[key >> 6] >> (key & 63) & 1 != 0
                    || next.is_some_and(|t| self.triples[t >> 6] >> (t & 63) & 1 != 0);
                if may {
                    self.words_at(key, &text[i..], out, &mut found);
                }
            }
            prev = cur;
        }
    }

    /// The rules of the keywords `text` starts with; `key`, its lowercase first two bytes,
    /// starts one.
    #[cold]
    fn words_at(&self, key: usize, text: &[u8], out: &mut Vec<usize>, found: &mut [u64; 8]) {
        let below = self.pairs[key >> 6] & ((1u64 << (key & 63)) - 1);
        let r = usize::from(self.rank[key >> 6]) + below.count_ones() as usize;
        let range = usize::from(self.groups[r])..usize::from(self.groups[r + 1]);
        for (w, word) in self.words[range.clone()].iter().enumerate() {
            let w = range.start + w;
            let bit = found.get(w / 64).map(|bits| bits >> (w % 64) & 1 == 1);
            if bit == Some(true) {
                continue;
            }
            if text.len() >= word.text.len()
                && text[2..word.text.len()].eq_ignore_ascii_case(&word.text[2..])
            {
                out.extend_from_slice(&word.rules);
                if let Some(bits) = found.get_mut(w / 64) {
                    *bits |= 1 << (w % 64);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use aho_corasick::{AhoCorasick, AhoCorasickKind};
    use proptest::prelude::*;

    use super::*;

    /// The built-in rules' keywords with their rules, as the rule set indexes them, plus
    /// one-byte and non-letter keywords the built-in set lacks.
    fn keywords() -> Vec<(String, Vec<usize>)> {
        let mut words: Vec<(String, Vec<usize>)> = Vec::new();
        let raw: super::super::RawFile = toml::from_str(super::super::BUILTIN).expect("rules");
        for (rule, r) in raw.rules.into_iter().enumerate() {
            for w in r.keywords.into_iter().map(|w| w.to_ascii_lowercase()) {
                match words.iter_mut().find(|(k, _)| *k == w) {
                    Some((_, rules)) => rules.push(rule),
                    None => words.push((w, vec![rule])),
                }
            }
        }
        for (extra, rule) in [("q", 1000), ("%", 1001), ("é", 1002), ("a", 1003)] {
            words.push((extra.into(), vec![rule]));
        }
        words
    }

    /// What an overlapping, ASCII case-insensitive Aho-Corasick search finds.
    fn reference(ac: &AhoCorasick, words: &[(String, Vec<usize>)], text: &[u8]) -> Vec<usize> {
        let mut out: Vec<usize> = ac
            .find_overlapping_iter(text)
            .flat_map(|m| words[m.pattern().as_usize()].1.iter().copied())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    fn ours(index: &KeywordIndex, text: &[u8]) -> Vec<usize> {
        let mut out = Vec::new();
        index.candidates(text, &mut out);
        out.sort_unstable();
        out.dedup();
        out
    }

    fn setup() -> (KeywordIndex, AhoCorasick, Vec<(String, Vec<usize>)>) {
        let words = keywords();
        let ac = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .build(words.iter().map(|(w, _)| w))
            .expect("automaton");
        let index = KeywordIndex::new(words.clone()).expect("index");
        (index, ac, words)
    }

    #[test]
    fn finds_what_an_overlapping_aho_corasick_search_finds() {
        let (index, ac, words) = setup();
        let texts: [&[u8]; 8] = [
            b"https://8.8.1.1/search?q=sk-abcdefghij1klmnop",
            b"HTTPS://EXAMPLE.COM/?Q=1&PAT=ABC&xoxb-1",
            b"akiaAKIAasia",
            b"",
            b"s",
            b"sk",
            b"\xc3\xa9t\xc3\xa9 %41 glpat-glc_",
            b"ghp_ghp_ghp_",
        ];
        for text in texts {
            let want = reference(&ac, &words, text);
            assert_eq!(
                ours(&index, text),
                want,
                "{}",
                String::from_utf8_lossy(text)
            );
        }
        // The candidates are not empty for a text that names keywords.
        assert!(!ours(&index, b"xoxb-1 AKIA").is_empty());
    }

    proptest! {
        #[test]
        fn any_text_of_keyword_pieces_gets_the_same_candidates(
            pieces in prop::collection::vec((0usize..400, any::<u64>(), any::<u8>()), 0..12)
        ) {
            let (index, ac, words) = setup();
            let mut text = Vec::new();
            for (pick, flips, byte) in pieces {
                match words.get(pick) {
                    Some((w, _)) => {
                        // A keyword, a prefix of it, or its start glued to the next piece,
                        // with letters in random case.
                        let w = w.as_bytes();
                        let len = if flips % 3 == 0 { w.len().div_ceil(2) } else { w.len() };
                        text.extend(w[..len].iter().enumerate().map(|(i, &b)| {
                            if flips >> (i % 64) & 1 == 1 { b.to_ascii_uppercase() } else { b }
                        }));
                    }
                    None => text.push(byte),
                }
            }
            prop_assert_eq!(ours(&index, &text), reference(&ac, &words, &text));
        }
    }
}

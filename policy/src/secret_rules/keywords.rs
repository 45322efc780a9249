//! The keyword prefilter: which rules have a keyword somewhere in a text, every occurrence
//! counted (overlapping), ASCII letters compared without case.
//!
//! The positions where a keyword may start come from a [`LiteralFilter`] of the keywords (one
//! table load per position, no branch until one passes); at each, the keywords starting with
//! its two bytes are compared whole. That is the answer an overlapping Aho-Corasick search
//! gives, at a fraction of its cost per byte and of a DFA's memory; a test holds the two to
//! the same candidates. A caller that looks for other literals in the same text scans with
//! the union of their filter and this one, then has the keywords compared where it passed
//! ([`KeywordIndex::candidates_at`]).

use std::fmt;
use std::ops::ControlFlow;

use super::filter::LiteralFilter;

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
    /// Where a keyword of two bytes or more may start.
    filter: LiteralFilter,
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

/// Words already found: a long text (a prompt) names "key" thousands of times, and its rules
/// need adding once. Words past the first 512 are added at every match.
type Found = [u64; 8];

impl KeywordIndex {
    /// The index of `keywords` (lowercase, non-empty, each once) with their rules; `None`
    /// when there is no keyword.
    pub(super) fn new(keywords: Vec<(String, Vec<usize>)>) -> Option<Self> {
        if keywords.is_empty() {
            return None;
        }
        let mut pairs = Box::new([0u64; 1024]);
        let mut filter = LiteralFilter::new();
        let mut words = Vec::new();
        let mut singles = Vec::new();
        for (text, rules) in keywords {
            let word = Word {
                text: text.into_bytes().into_boxed_slice(),
                rules,
            };
            match *word.text {
                [a, b, ..] => {
                    let key = pair(a, b);
                    pairs[key / 64] |= 1 << (key % 64);
                    filter.add(&word.text);
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
            filter,
        })
    }

    /// The filter of the keywords (of two bytes or more), to join with a caller's literals.
    pub(super) fn filter(&self) -> &LiteralFilter {
        &self.filter
    }

    /// Append to `out` the rules of every keyword occurrence in `text` (with repeats; the
    /// caller sorts and dedups).
    pub(super) fn candidates(&self, text: &[u8], out: &mut Vec<usize>) {
        let mut found: Found = [0; 8];
        let _ = self.filter.scan::<()>(text, |i| {
            self.words_at(text, i, out, &mut found);
            ControlFlow::Continue(())
        });
        self.singles(text, out);
    }

    /// [`KeywordIndex::candidates`] with the keywords compared only at `positions`, which hold
    /// every position this index's filter passes (those of a filter joined with it).
    pub(super) fn candidates_at(
        &self,
        text: &[u8],
        positions: impl Iterator<Item = usize>,
        out: &mut Vec<usize>,
    ) {
        let mut found: Found = [0; 8];
        for i in positions {
            self.words_at(text, i, out, &mut found);
        }
        self.singles(text, out);
    }

    /// The rules of the one-byte keywords, at every byte of `text`.
    fn singles(&self, text: &[u8], out: &mut Vec<usize>) {
        if self.singles.is_empty() {
            return;
        }
        for &b in text {
            for word in &self.singles {
                if word.text[0] == LOWER[usize::from(b)] {
                    out.extend_from_slice(&word.rules);
                }
            }
        }
    }

    /// The rules of the keywords (of two bytes or more) that start at `i` of `text`.
    #[inline]
    fn words_at(&self, text: &[u8], i: usize, out: &mut Vec<usize>, found: &mut Found) {
        let (Some(&a), Some(&b)) = (text.get(i), text.get(i + 1)) else {
            return;
        };
        let key = pair(a, b);
        if self.pairs[key >> 6] >> (key & 63) & 1 != 0 {
            self.words_of_pair(key, &text[i..], out, found);
        }
    }

    /// The rules of the keywords `text` starts with; `key`, its lowercase first two bytes,
    /// starts one.
    fn words_of_pair(&self, key: usize, text: &[u8], out: &mut Vec<usize>, found: &mut Found) {
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

    /// The candidates compared at the positions of a filter joined with other literals.
    fn ours_joint(index: &KeywordIndex, text: &[u8]) -> Vec<usize> {
        let joint = index
            .filter()
            .union(&LiteralFilter::of([b"ghp_".as_slice(), b"xyz".as_slice()]));
        let mut masks = Vec::new();
        let _ = joint.scan_blocks::<()>(text, |_, mask| {
            masks.push(mask);
            ControlFlow::Continue(())
        });
        let mut out = Vec::new();
        index.candidates_at(text, LiteralFilter::positions(&masks), &mut out);
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
            assert_eq!(ours_joint(&index, text), want);
        }
        // Keywords across the end of the first block of 64 positions, in capitals, and as the
        // last bytes of the text.
        for at in 58..68 {
            let mut text = vec![b'.'; at];
            text.extend_from_slice(b"XOXB-1 GLPAT- AKIA sk");
            let want = reference(&ac, &words, &text);
            assert!(want.len() >= 4, "the text names four keywords");
            assert_eq!(ours(&index, &text), want, "at {at}");
            assert_eq!(ours_joint(&index, &text), want, "at {at}");
        }
        // The candidates are not empty for a text that names keywords.
        assert!(!ours(&index, b"xoxb-1 AKIA").is_empty());
    }

    proptest! {
        #[test]
        fn any_text_of_keyword_pieces_gets_the_same_candidates(
            pieces in prop::collection::vec((0usize..400, any::<u64>(), any::<u8>()), 0..24)
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
            let want = reference(&ac, &words, &text);
            prop_assert_eq!(ours(&index, &text), want.clone());
            prop_assert_eq!(ours_joint(&index, &text), want);
        }
    }
}

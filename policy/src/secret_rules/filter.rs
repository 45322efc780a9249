//! The literal filter: the positions of a text where one of a set of byte strings may start,
//! ASCII letters compared without case, found with one table load per position and no branch
//! until a position passes.
//!
//! The table holds, for each pair of folded bytes (`b | 0x20`, which maps an ASCII letter's
//! two cases to one byte), the classes of the third bytes of the literals starting with that
//! pair; a class is three bits of the folded byte. A position passes when the pair it starts
//! and the class of the byte after them are in the table: every start of a literal passes
//! (folding and classes only merge bytes), and so do some other positions, which the caller
//! checks. On prose that names the literals' first three bytes often ("key", "path", "api",
//! "secret") a few positions in a hundred pass; a URL or a line of code, fewer.
//!
//! Positions are tested 64 at a time into a bit mask, so the loop carries no branch a text can
//! make unpredictable; the few positions that pass are then visited in order.

use std::fmt;
use std::ops::ControlFlow;

/// Positions tested per mask.
const BLOCK: usize = 64;

/// Where the literals of a set may start in a text (a superset, in increasing order).
#[derive(Clone)]
pub struct LiteralFilter {
    /// Per folded pair `a | b << 8`: the classes ([`class`]) of the third bytes of the literals
    /// starting with it; every class for a literal of two bytes.
    table: Box<[u8; 65536]>,
    /// A literal of one byte is in the set: every position is visited.
    every: bool,
}

impl fmt::Debug for LiteralFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiteralFilter")
            .field("pairs", &self.table.iter().filter(|&&c| c != 0).count())
            .field("every", &self.every)
            .finish()
    }
}

/// The class of a byte: one of eight bits, the same for both cases of an ASCII letter.
#[inline(always)]
fn class(b: u8) -> u8 {
    1 << ((b | 0x20) & 7)
}

/// The table index of the pair `a`, `b` (both folded).
#[inline(always)]
fn pair(a: u8, b: u8) -> usize {
    usize::from(u16::from_le_bytes([a, b]) | 0x2020)
}

impl Default for LiteralFilter {
    fn default() -> Self {
        Self::new()
    }
}

impl LiteralFilter {
    /// A filter without literals (no position passes).
    pub fn new() -> Self {
        Self {
            table: Box::new([0; 65536]),
            every: false,
        }
    }

    /// The filter of `literals`.
    pub fn of<'a>(literals: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut filter = Self::new();
        for literal in literals {
            filter.add(literal);
        }
        filter
    }

    /// Add `literal` to the set (an empty one is ignored: it starts nowhere in particular).
    pub fn add(&mut self, literal: &[u8]) {
        match *literal {
            [a, b, c, ..] => self.table[pair(a, b)] |= class(c),
            [a, b] => self.table[pair(a, b)] = u8::MAX,
            [_] => self.every = true,
            [] => {}
        }
    }

    /// The filter of both sets.
    pub fn union(&self, other: &LiteralFilter) -> Self {
        let mut table = self.table.clone();
        for (mine, theirs) in table.iter_mut().zip(other.table.iter()) {
            *mine |= *theirs;
        }
        Self {
            table,
            every: self.every || other.every,
        }
    }

    /// Whether a literal of the set may start at position `i` of `text` (the test [`scan`]
    /// makes at each position).
    ///
    /// [`scan`]: LiteralFilter::scan
    #[inline]
    pub fn passes(&self, text: &[u8], i: usize) -> bool {
        if self.every {
            return i < text.len();
        }
        match (text.get(i), text.get(i + 1)) {
            (Some(&a), Some(&b)) => {
                // The last pair has no third byte: any class.
                let third = text.get(i + 2).map_or(u8::MAX, |&c| class(c));
                self.table[pair(a, b)] & third != 0
            }
            _ => false,
        }
    }

    /// Call `at` with every position of `text` where a literal of the set may start, in
    /// increasing order, until it breaks; every position where one does start is among them.
    pub fn scan<B>(
        &self,
        text: &[u8],
        mut at: impl FnMut(usize) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        self.scan_blocks(text, |start, mut mask| {
            while mask != 0 {
                let i = mask.trailing_zeros() as usize;
                mask &= mask - 1;
                at(start + i)?;
            }
            ControlFlow::Continue(())
        })
    }

    /// [`LiteralFilter::scan`] 64 positions at a time: `block(start, mask)` for each stretch of
    /// 64 positions from the start of `text`, in order (those where nothing passes included),
    /// bit `j` of `mask` set when position `start + j` passes. [`LiteralFilter::positions`]
    /// reads the masks back as positions.
    pub fn scan_blocks<B>(
        &self,
        text: &[u8],
        mut block: impl FnMut(usize, u64) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        let mut start = 0;
        // Whole blocks: 64 positions, each with the two bytes after it in reach.
        while let Some(bytes) = text
            .get(start..start + BLOCK + 2)
            .and_then(|b| <&[u8; BLOCK + 2]>::try_from(b).ok())
            .filter(|_| !self.every)
        {
            let mut mask = 0u64;
            for k in 0..BLOCK / 8 {
                let mut byte = 0u64;
                for j in 0..8 {
                    let i = 8 * k + j;
                    let hit = self.table[pair(bytes[i], bytes[i + 1])] & class(bytes[i + 2]);
                    byte |= u64::from(hit != 0) << j;
                }
                mask |= byte << (8 * k);
            }
            block(start, mask)?;
            start += BLOCK;
        }
        // The rest, one position at a time.
        while start < text.len() {
            let mut mask = 0u64;
            for j in 0..BLOCK.min(text.len() - start) {
                mask |= u64::from(self.passes(text, start + j)) << j;
            }
            block(start, mask)?;
            start += BLOCK;
        }
        ControlFlow::Continue(())
    }

    /// The positions of the masks [`LiteralFilter::scan_blocks`] gave, one per block from the
    /// start of the text, in increasing order.
    pub fn positions(masks: &[u64]) -> impl Iterator<Item = usize> + '_ {
        masks.iter().enumerate().flat_map(|(b, &mask)| {
            let mut mask = mask;
            std::iter::from_fn(move || {
                (mask != 0).then(|| {
                    let j = mask.trailing_zeros() as usize;
                    mask &= mask - 1;
                    b * BLOCK + j
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn visited(filter: &LiteralFilter, text: &[u8]) -> Vec<usize> {
        let mut out = Vec::new();
        let _ = filter.scan::<()>(text, |i| {
            out.push(i);
            ControlFlow::Continue(())
        });
        out
    }

    /// Where a literal starts, ASCII case-insensitively.
    fn starts(literals: &[&[u8]], text: &[u8]) -> Vec<usize> {
        (0..text.len())
            .filter(|&i| {
                literals.iter().any(|l| {
                    !l.is_empty()
                        && text.len() >= i + l.len()
                        && text[i..i + l.len()].eq_ignore_ascii_case(l)
                })
            })
            .collect()
    }

    const LITERALS: [&[u8]; 6] = [b"ghp_", b"sk", b"key", b"AKIA", b"-----begin", b"q~"];

    #[test]
    fn every_start_is_visited_in_order_at_block_edges_and_in_any_case() {
        let filter = LiteralFilter::of(LITERALS);
        // Literals across the end of the first block (position 64), in the tail, and as the
        // text's last two bytes.
        let mut text = vec![b'.'; 62];
        text.extend_from_slice(b"GhP_x Key akia SK");
        let got = visited(&filter, &text);
        let want = starts(&LITERALS, &text);
        assert_eq!(want, [62, 68, 72, 77], "the test text holds four starts");
        assert!(want.iter().all(|i| got.contains(i)), "{got:?}");
        assert!(got.windows(2).all(|w| w[0] < w[1]), "in increasing order");
        // Prose passes rarely.
        let prose =
            b"Notes from the review: keep functions short, name errors for what failed. ".repeat(4);
        assert!(visited(&filter, &prose).len() < prose.len() / 20);
    }

    #[test]
    fn a_break_stops_the_scan_and_one_byte_literals_visit_every_position() {
        let filter = LiteralFilter::of(LITERALS);
        let text = b"key key key".repeat(10);
        let mut seen = 0;
        let stopped = filter.scan(&text, |i| {
            seen += 1;
            if i >= 4 {
                ControlFlow::Break(i)
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(stopped, ControlFlow::Break(4));
        assert_eq!(seen, 2);
        let every = LiteralFilter::of([b"%".as_slice()]);
        assert_eq!(visited(&every, b"a%b"), [0, 1, 2]);
        assert_eq!(
            visited(&LiteralFilter::new(), b"ghp_ key"),
            Vec::<usize>::new()
        );
        let joint =
            LiteralFilter::of([b"ghp_".as_slice()]).union(&LiteralFilter::of([b"key".as_slice()]));
        assert_eq!(visited(&joint, b"ghp_ key"), [0, 5]);
    }

    #[test]
    fn blocks_and_positions_tell_the_same_visits_as_the_scan() {
        let filter = LiteralFilter::of(LITERALS);
        for len in [0, 1, 2, 63, 64, 65, 66, 67, 130, 200] {
            let text: Vec<u8> = b"x KEY ghp_ sk. "
                .iter()
                .copied()
                .cycle()
                .take(len)
                .collect();
            let mut masks = Vec::new();
            let _ = filter.scan_blocks::<()>(&text, |start, mask| {
                assert_eq!(start, 64 * masks.len(), "one mask per block, in order");
                masks.push(mask);
                ControlFlow::Continue(())
            });
            assert_eq!(masks.len(), len.div_ceil(64));
            let from_masks: Vec<usize> = LiteralFilter::positions(&masks).collect();
            let one_by_one: Vec<usize> = (0..len).filter(|&i| filter.passes(&text, i)).collect();
            assert_eq!(from_masks, visited(&filter, &text), "length {len}");
            assert_eq!(from_masks, one_by_one, "length {len}");
            assert!(
                starts(&LITERALS, &text)
                    .iter()
                    .all(|i| from_masks.contains(i))
            );
        }
    }

    proptest! {
        #[test]
        fn any_text_of_literal_pieces_has_every_start_visited(
            pieces in prop::collection::vec((0usize..8, any::<u64>(), any::<u8>()), 0..40)
        ) {
            let filter = LiteralFilter::of(LITERALS);
            let mut text = Vec::new();
            for (pick, flips, byte) in pieces {
                match LITERALS.get(pick) {
                    Some(l) => text.extend(l.iter().enumerate().map(|(i, &b)| {
                        if flips >> (i % 64) & 1 == 1 { b.to_ascii_uppercase() } else { b }
                    })),
                    None => text.push(byte),
                }
            }
            let got = visited(&filter, &text);
            for i in starts(&LITERALS, &text) {
                prop_assert!(got.contains(&i), "start {} not visited", i);
            }
        }
    }
}

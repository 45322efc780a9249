//! A vendor answer's (or a request body's) JSON counted before a tree of it is built.
//!
//! A tree costs dozens of times the text of an answer made of tiny values (`[0,0,0,…]` is two
//! bytes a value in the text and about a hundred in a tree): a 30 MB answer of them would take
//! more than a gigabyte. One validating pass counts the values without allocating (strings
//! borrowed or skipped, every value visited and dropped at once) and refuses an answer past
//! [`MAX_ANSWER_VALUES`] before the tree is built, so an answer costs its own bytes plus a tree
//! of bounded size.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The most JSON values (objects, arrays and scalars, keys not counted) a vendor answer may
/// hold. A search page of a hundred results or a scraped page with its metadata and a few
/// thousand links holds a few tens of thousands at most; the tree of this many is some tens of
/// MiB at worst.
pub(crate) const MAX_ANSWER_VALUES: usize = 200_000;

/// Check that `bytes` is one JSON text of at most `limit` values; the error says which bound
/// was passed, or where the JSON is invalid.
pub(crate) fn count_values(bytes: &[u8], limit: usize) -> Result<usize, String> {
    let seen = Cell::new(0);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    Count { seen: &seen, limit }
        .deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(|e| e.to_string())?;
    Ok(seen.get())
}

#[derive(Clone, Copy)]
struct Count<'a> {
    seen: &'a Cell<usize>,
    limit: usize,
}

impl Count<'_> {
    fn tick<E: de::Error>(self) -> Result<(), E> {
        let n = self.seen.get() + 1;
        self.seen.set(n);
        if n > self.limit {
            return Err(E::custom(format!("more than {} JSON values", self.limit)));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.tick()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.tick()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.tick()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.tick()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.tick()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.tick()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.tick()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.tick()?;
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_counted_and_an_answer_past_the_limit_is_refused() {
        let answer =
            br#"{"success":true,"data":{"markdown":"x","links":["a","b"],"n":1.5,"z":null}}"#;
        assert_eq!(count_values(answer, 100), Ok(9));
        let err = count_values(answer, 8).expect_err("over the limit");
        assert!(err.contains("more than 8 JSON values"), "{err}");
        let err = count_values(b"{\"a\":1} trailing", 100).expect_err("not one JSON text");
        assert!(err.contains("trailing"), "{err}");
        assert!(
            count_values(b"[1,", 100).is_err(),
            "truncated JSON is refused"
        );
    }

    #[test]
    fn an_amplifying_answer_is_refused_without_building_a_tree() {
        // 4 MB of `0,`: two million values.
        let mut answer = br#"{"success":true,"data":{"markdown":"x","metadata":{"x":["#.to_vec();
        while answer.len() < 4 << 20 {
            answer.extend_from_slice(b"0,");
        }
        answer.extend_from_slice(b"0]}}}");
        let err = count_values(&answer, MAX_ANSWER_VALUES).expect_err("amplifying");
        assert!(err.contains("JSON values"), "{err}");
    }
}

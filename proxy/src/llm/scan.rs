//! A request body read for judging without a tree of it. One pass of serde_json validates the
//! whole body and keeps only the members the route judges or rewrites: their key, the raw
//! text of their value and where it sits in the body. Every other value is skipped as it is
//! validated (`RawValue`), so a body costs its own bytes plus a small, fixed record whatever
//! its shape: `{"model":"x","x":[0,0,…]}` builds nothing.
//!
//! A judged key seen twice is recorded (the last one is kept, as a JSON map would): the caller
//! refuses such a body, since a provider whose parser keeps the first one would run another
//! model than the one judged. Keys are compared decoded, so `"mod\u0065l"` is `model`.
//!
//! [`Splice`]s written against a scan rewrite the body in place, byte for byte elsewhere.

use std::fmt;
use std::ops::Range;

use serde::de::{self, DeserializeSeed, Deserializer as _, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// The members of an object that are judged, and the schema of those read as objects too.
#[derive(Debug)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) struct Schema {
    /// Judged keys, with the schema of the object each one holds (when it is read inside).
    pub(crate) keys: &'static [(&'static str, Option<&'static Schema>)],
}

/// `reasoning` (OpenAI responses, OpenRouter).
pub(crate) static REASONING: Schema = Schema {
    keys: &[("effort", None), ("enabled", None)],
};
/// `extra_body`.
pub(crate) static EXTRA_BODY: Schema = Schema {
    keys: &[("reasoning", Some(&REASONING)), ("service_tier", None)],
};
/// `output_config` (Anthropic).
pub(crate) static OUTPUT_CONFIG: Schema = Schema {
    keys: &[("effort", None)],
};
/// `thinking` (Anthropic).
pub(crate) static THINKING: Schema = Schema {
    keys: &[("type", None), ("budget_tokens", None)],
};
/// `search_parameters` (xAI Live Search).
pub(crate) static SEARCH_PARAMETERS: Schema = Schema {
    keys: &[("mode", None)],
};
/// A completion request: the model, every field the observation reads or a pin writes, and
/// the members that ask the provider to run a tool itself ([`super::provider_tools`]).
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) static COMPLETION: Schema = Schema {
    keys: &[
        ("model", None),
        ("reasoning", Some(&REASONING)),
        ("reasoning_effort", None),
        ("output_config", Some(&OUTPUT_CONFIG)),
        ("extra_body", Some(&EXTRA_BODY)),
        ("thinking", Some(&THINKING)),
        ("service_tier", None),
        ("tools", None),
        ("web_search_options", None),
        ("search_parameters", Some(&SEARCH_PARAMETERS)),
        ("plugins", None),
    ],
};
/// One entry of an Anthropic message batch: the completion request sits in `params`.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) static BATCH_ITEM: Schema = Schema {
    keys: &[("params", Some(&COMPLETION))],
};
/// An Anthropic message batch: `requests` is read entry by entry ([`for_each_item`]).
pub(crate) static BATCH: Schema = Schema {
    keys: &[("requests", None)],
};

/// One object of the body, as far as it is judged.
#[derive(Debug)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) struct ObjectScan<'a> {
    /// Judged members, the last of each key.
    pub(crate) members: Vec<Member<'a>>,
    /// Members of any key.
    pub(crate) count: usize,
    /// Offset of the closing `}` in the body.
    pub(crate) close: usize,
    /// The first judged key seen more than once in this object.
    pub(crate) duplicate: Option<&'static str>,
}

/// One judged member.
#[derive(Debug)]
pub(crate) struct Member<'a> {
    /// The key (decoded).
    pub(crate) key: &'static str,
    /// The value's JSON text.
    pub(crate) raw: &'a str,
    /// Offset of the value in the body.
    pub(crate) start: usize,
    /// Where removing the member starts: the end of the previous value (so its comma goes
    /// with it), or just after `{` for the first member.
    pub(crate) lead: usize,
    /// Whether it is the object's first member.
    pub(crate) first: bool,
    /// The value read as an object, when the schema reads inside it and it is one.
    pub(crate) object: Option<ObjectScan<'a>>,
}

/// A replacement of a byte range of the body (an insertion when the range is empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Splice {
    /// The range replaced.
    pub(crate) range: Range<usize>,
    /// What replaces it.
    pub(crate) text: String,
}

/// A body rebuilt from splices applied in order of their place.
#[derive(Debug)]
pub(crate) struct Rewriter<'a> {
    src: &'a str,
    out: String,
    cursor: usize,
}

// === impl ObjectScan ===

impl<'a> ObjectScan<'a> {
    /// The member `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&Member<'a>> {
        self.members.iter().find(|m| m.key == key)
    }

    /// Whether the object has a member `key` (of any type).
    pub(crate) fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The object held by member `key`.
    pub(crate) fn object(&self, key: &str) -> Option<&ObjectScan<'a>> {
        self.get(key).and_then(|m| m.object.as_ref())
    }

    /// The string at `path` (objects all the way), decoded.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn str_at(&self, path: &[&str]) -> Option<String> {
        let (last, objects) = path.split_last()?;
        let mut at = self;
        for key in objects {
            at = at.object(key)?;
        }
        let raw = at.get(last)?.raw;
        raw.starts_with('"')
            .then(|| serde_json::from_str::<String>(raw).ok())
            .flatten()
    }

    /// The boolean member `key`.
    pub(crate) fn bool_of(&self, key: &str) -> Option<bool> {
        match self.get(key)?.raw {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }

    /// The unsigned integer member `key` (a JSON integer that fits `u64`).
    pub(crate) fn u64_of(&self, key: &str) -> Option<u64> {
        let raw = self.get(key)?.raw;
        raw.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| raw.parse().ok())
            .flatten()
    }

    /// The dotted path of the first judged key seen twice, here or in a judged object inside.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn first_duplicate(&self) -> Option<String> {
        if let Some(key) = self.duplicate {
            return Some(key.to_string());
        }
        self.members.iter().find_map(|m| {
            let inner = m.object.as_ref()?.first_duplicate()?;
            Some(format!("{}.{inner}", m.key))
        })
    }
}

// === impl Rewriter ===

impl<'a> Rewriter<'a> {
    /// A rewrite of `src` with nothing applied yet.
    pub(crate) fn new(src: &'a str) -> Self {
        Self {
            src,
            out: String::with_capacity(src.len() + 64),
            cursor: 0,
        }
    }

    /// Apply `splices`, all at or after the splices applied before. Insertions at one place
    /// keep their order; a removal overlapping an earlier one only removes what is left.
    pub(crate) fn apply(&mut self, mut splices: Vec<Splice>) {
        splices.sort_by_key(|s| s.range.start);
        for s in splices {
            let start = s.range.start.max(self.cursor);
            if let Some(kept) = self.src.get(self.cursor..start) {
                self.out.push_str(kept);
            }
            self.out.push_str(&s.text);
            self.cursor = self.cursor.max(s.range.end);
        }
    }

    /// The rewritten body.
    pub(crate) fn finish(mut self) -> String {
        if let Some(rest) = self.src.get(self.cursor..) {
            self.out.push_str(rest);
        }
        self.out
    }
}

/// Scan the object `text` (a slice of `body`) for the members `schema` judges; fails when
/// `text` is not exactly one JSON object.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn scan_object<'a>(
    body: &'a str,
    text: &'a str,
    schema: &'static Schema,
) -> Result<ObjectScan<'a>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let trimmed = text.trim_matches(is_json_ws);
    let open = offset(body, trimmed);
    let visitor = ObjectVisitor {
        body,
        schema,
        open,
        close: open + trimmed.len().saturating_sub(1),
    };
    let scan = (&mut de).deserialize_map(visitor)?;
    de.end()?;
    Ok(scan)
}

/// Call `f` with the index and the JSON text of each entry of the array `text` (a slice of
/// `body`), in order, stopping at the first error `f` returns. The outer error is a
/// malformed array, the inner one `f`'s.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn for_each_item<'a, E>(
    text: &'a str,
    mut f: impl FnMut(usize, &'a str) -> Result<(), E>,
) -> Result<Result<(), E>, serde_json::Error> {
    let mut stopped = None;
    let mut de = serde_json::Deserializer::from_str(text);
    let walked = (&mut de).deserialize_seq(ItemsVisitor {
        f: &mut f,
        stopped: &mut stopped,
    });
    if let Some(e) = stopped {
        return Ok(Err(e));
    }
    walked?;
    de.end()?;
    Ok(Ok(()))
}

/// A JSON string literal of `s`.
pub(crate) fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

fn is_json_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// Where `part` (a slice of `body`) starts in `body`.
fn offset(body: &str, part: &str) -> usize {
    (part.as_ptr() as usize).saturating_sub(body.as_ptr() as usize)
}

struct ObjectVisitor<'a> {
    body: &'a str,
    schema: &'static Schema,
    open: usize,
    close: usize,
}

impl<'de> Visitor<'de> for ObjectVisitor<'de> {
    type Value = ObjectScan<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut scan = ObjectScan {
            members: Vec::new(),
            count: 0,
            close: self.close,
            duplicate: None,
        };
        let mut last_end = self.open + 1;
        while let Some(judged) = map.next_key_seed(KeySeed(self.schema))? {
            let raw: &'de RawValue = map.next_value()?;
            let raw = raw.get();
            let start = offset(self.body, raw);
            if let Some(index) = judged {
                let (key, inner) = self.schema.keys[index];
                let object = match inner {
                    Some(schema) if raw.starts_with('{') => {
                        Some(scan_object(self.body, raw, schema).map_err(de::Error::custom)?)
                    }
                    _ => None,
                };
                let member = Member {
                    key,
                    raw,
                    start,
                    lead: last_end,
                    first: scan.count == 0,
                    object,
                };
                match scan.members.iter().position(|m| m.key == key) {
                    Some(i) => {
                        scan.duplicate.get_or_insert(key);
                        scan.members[i] = member;
                    }
                    None => scan.members.push(member),
                }
            }
            scan.count += 1;
            last_end = start + raw.len();
        }
        Ok(scan)
    }
}

/// Reads a key and answers which judged key it is, without keeping it.
struct KeySeed(&'static Schema);

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Option<usize>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.0.keys.iter().position(|(k, _)| *k == v))
    }
}

struct ItemsVisitor<'f, 'de, E> {
    f: &'f mut dyn FnMut(usize, &'de str) -> Result<(), E>,
    stopped: &'f mut Option<E>,
}

impl<'de, E> Visitor<'de> for ItemsVisitor<'_, 'de, E> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while let Some(item) = seq.next_element::<&'de RawValue>()? {
            if let Err(e) = (self.f)(index, item.get()) {
                *self.stopped = Some(e);
                return Err(de::Error::custom("stopped"));
            }
            index += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

//! Stage E7: assembly of each successful page — binary check, inline-image stripping,
//! truncate-and-store — with Hermes' exact algorithms and footer text.
//!
//! Per row the order is fixed: a binary payload is refused first (its bytes never reach the
//! agent), then base64 images become placeholders, then the page is cut to the character budget
//! and its full text stored. The sweep over the final serialized JSON reuses
//! [`images::convert_base64_images_to_links`].

use serde_json::Value;

pub mod binary;
pub mod images;
pub(crate) mod store;
pub(crate) mod thousands;
pub mod truncate;

pub use store::{Store, StoreError};

pub(crate) use fleetgate_policy::{DEFAULT_CHAR_LIMIT, MAX_CHAR_LIMIT, MIN_CHAR_LIMIT};

/// The effective per-page budget for a `char_limit` argument, as Hermes computes it.
///
/// `None` and JSON `null` take `default`; anything else goes through Python's `int()` on the
/// value Hermes' argument coercion hands over: floats truncate toward zero, `true` is 1, strings
/// holding an integral number (`"3000"`, `" 3e3 "`, `"1_000"`, `"2.0"`) are that number. A value
/// `int()` refuses (`"abc"`, `"2.5"`, arrays, objects) falls back to [`DEFAULT_CHAR_LIMIT`]. The
/// result is clamped to [[`MIN_CHAR_LIMIT`], [`MAX_CHAR_LIMIT`]]. Strings of non-ASCII digits,
/// which Python would also accept, count as non-numeric here.
pub(crate) fn clamp_char_limit(value: Option<&Value>, default: usize) -> usize {
    let as_int = match value {
        None | Some(Value::Null) => Some(i128::try_from(default).unwrap_or(i128::MAX)),
        Some(v) => python_int(v),
    };
    match as_int {
        Some(n) => clamp_budget(n),
        None => DEFAULT_CHAR_LIMIT,
    }
}

/// One assembled page: the model text and, when it was truncated, its sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Assembled {
    /// The base64-cleaned, budgeted model text.
    pub(crate) content: String,
    /// Set when the page was truncated (and a store write was attempted when a store was given).
    pub(crate) truncation: Option<truncate::TruncationStats>,
}

/// E7 for one successful row: `Err(message)` for a binary payload (the content is dropped and the
/// message becomes the row's error), else the base64-cleaned, budgeted model text.
pub(crate) fn assemble_page(
    content: &str,
    limit: usize,
    url: &str,
    store: Option<&Store>,
) -> Result<Assembled, String> {
    if let Some(kind) = binary::detect_binary(content) {
        return Err(binary::binary_error_message(kind));
    }
    let clean = images::convert_base64_images_to_links(content);
    let (text, truncation) = truncate::truncate_with_stats(&clean, limit, url, store);
    let content = match text {
        std::borrow::Cow::Owned(cut) => cut,
        // Not truncated: hand back the cleaned text itself instead of copying it again.
        std::borrow::Cow::Borrowed(_) => clean.into_owned(),
    };
    Ok(Assembled {
        content,
        truncation,
    })
}

fn clamp_budget(n: i128) -> usize {
    // Both bounds fit in usize, so the clamped value always converts.
    usize::try_from(n.clamp(MIN_CHAR_LIMIT as i128, MAX_CHAR_LIMIT as i128))
        .unwrap_or(DEFAULT_CHAR_LIMIT)
}

/// Python `int(v)` after Hermes' schema coercion of the argument; `None` where it raises.
fn python_int(value: &Value) -> Option<i128> {
    match value {
        Value::Bool(b) => Some(i128::from(*b)),
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            // serde_json numbers are finite, and `as` truncates toward zero like int().
            .or_else(|| n.as_f64().map(|f| f.trunc() as i128)),
        Value::String(s) => string_int(s),
        _ => None,
    }
}

/// A string argument: the coercion step turns an integral float literal into an int, and
/// `int()` accepts a plain integer literal; both strip surrounding whitespace.
fn string_int(s: &str) -> Option<i128> {
    let t = s.trim_matches(images::is_python_space);
    if let Some(n) = parse_int_literal(t) {
        return Some(n);
    }
    let f: f64 = without_digit_underscores(t)?.parse().ok()?;
    (f.is_finite() && f.fract() == 0.0).then_some(f as i128)
}

/// `[+-]?digits` with single underscores between digits, saturating.
fn parse_int_literal(t: &str) -> Option<i128> {
    let (negative, digits) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let clean = without_digit_underscores(digits)?;
    if clean.is_empty() || !clean.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude = clean.bytes().fold(0i128, |acc, b| {
        acc.saturating_mul(10).saturating_add(i128::from(b - b'0'))
    });
    Some(if negative { -magnitude } else { magnitude })
}

/// Drops underscores that sit between two ASCII digits; `None` for any other underscore.
fn without_digit_underscores(t: &str) -> Option<String> {
    let bytes = t.as_bytes();
    let mut out = String::with_capacity(t.len());
    for (i, c) in t.char_indices() {
        if c == '_' {
            let before = i.checked_sub(1).map(|j| bytes[j]);
            let after = bytes.get(i + 1).copied();
            if !(before.is_some_and(|b| b.is_ascii_digit())
                && after.is_some_and(|b| b.is_ascii_digit()))
            {
                return None;
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests;

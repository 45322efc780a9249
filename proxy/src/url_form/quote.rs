//! Python `urllib.parse.quote` with Hermes' safe sets: UTF-8 percent-encoding that keeps `%`.
//!
//! `%` is in both safe sets, so existing escapes (and stray `%`) survive unchanged.

/// Safe set for the path: `/ % : @ ! $ & ' ( ) * + , ; =` (unreserved characters always are).
pub(super) const PATH_SAFE: &[u8] = b"/%:@!$&'()*+,;=";

/// Safe set for query and fragment: the path set plus `?`.
pub(super) const QUERY_SAFE: &[u8] = b"/%:@!$&'()*+,;=?";

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Append `quote(s, safe)` to `out`: bytes outside `A-Za-z0-9_.-~` and `safe` become `%XX`.
pub(super) fn quote_into(out: &mut String, s: &str, safe: &[u8]) {
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'~') || safe.contains(&b)
        {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX_UPPER[usize::from(b >> 4)]));
            out.push(char::from(HEX_UPPER[usize::from(b & 0x0f)]));
        }
    }
}

//! Python `urllib.parse.quote` with Hermes' safe sets: UTF-8 percent-encoding that keeps `%`.
//!
//! `%` is in both safe sets, so existing escapes (and stray `%`) survive unchanged.

/// Safe set for the path: `/ % : @ ! $ & ' ( ) * + , ; =` (unreserved characters always are).
const PATH_SAFE: &[u8] = b"/%:@!$&'()*+,;=";

/// Safe set for query and fragment: the path set plus `?`.
const QUERY_SAFE: &[u8] = b"/%:@!$&'()*+,;=?";

/// The bytes `quote` keeps with [`PATH_SAFE`] (unreserved or safe), one lookup per byte.
pub(super) const PATH_KEEPS: [bool; 256] = keeps(PATH_SAFE);

/// The bytes `quote` keeps with [`QUERY_SAFE`].
pub(super) const QUERY_KEEPS: [bool; 256] = keeps(QUERY_SAFE);

/// The byte table of `quote` with `safe`: `A-Za-z0-9_.-~` and the bytes of `safe`.
const fn keeps(safe: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        table[b] = byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'-' | b'~');
        b += 1;
    }
    let mut i = 0;
    while i < safe.len() {
        table[safe[i] as usize] = true;
        i += 1;
    }
    table
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Append `quote(s, safe)` to `out`, `keeps` being the table of `safe` ([`PATH_KEEPS`],
/// [`QUERY_KEEPS`]): bytes outside `A-Za-z0-9_.-~` and `safe` become `%XX`.
pub(super) fn quote_into(out: &mut String, s: &str, keeps: &[bool; 256]) {
    for &b in s.as_bytes() {
        if keeps[usize::from(b)] {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX_UPPER[usize::from(b >> 4)]));
            out.push(char::from(HEX_UPPER[usize::from(b & 0x0f)]));
        }
    }
}

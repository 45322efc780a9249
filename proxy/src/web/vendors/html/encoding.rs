//! Which encoding a fetched body is in, decided as a browser decides it (the WHATWG HTML
//! "encoding sniffing algorithm"), then decoded with `encoding_rs`.
//!
//! In order: a byte-order mark; the HTTP `Content-Type` charset; for HTML, the prescan of the
//! first 1024 bytes for `<meta charset>` or `<meta http-equiv=content-type content=...>`;
//! then, with nothing declared, UTF-8 when the bytes are valid UTF-8 and otherwise the guess
//! of `chardetng` (the detector a major browser ships for undeclared legacy pages).
//!
//! One departure from the browsers: a `<meta>` that names a legacy encoding over a body that is
//! valid UTF-8 with non-ASCII characters in it is read as UTF-8. The standard calls an encoding
//! from the prescan tentative; a page saved or re-served as UTF-8 keeps its old `<meta
//! charset=iso-8859-1>` (archives, mirrors, a CMS that converted its store), and text in a
//! legacy encoding with non-ASCII bytes is almost never valid UTF-8, so the bytes are the better
//! witness. Read by the `<meta>`, each `’` would reach the agent as `â€™`. An HTTP charset and
//! a byte-order mark are still followed as sent.

use encoding_rs::{Encoding, UTF_8, UTF_16BE, UTF_16LE, WINDOWS_1252, X_USER_DEFINED};

/// How many bytes the `<meta>` prescan reads, as the standard says.
const PRESCAN_BYTES: usize = 1024;

/// Where the chosen encoding came from (for tests and the decision line's detail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// A byte-order mark.
    Bom,
    /// The `charset` parameter of `Content-Type`.
    Http,
    /// `<meta charset>` / `http-equiv` found by the prescan.
    Meta,
    /// The prescan named a legacy encoding, but the body is valid UTF-8 with non-ASCII
    /// characters: read as UTF-8.
    Utf8OverMeta,
    /// Nothing declared: valid UTF-8, or the detector's guess.
    Detected,
}

/// The encoding of `body` and where it came from. `html` enables the `<meta>` prescan.
pub(crate) fn sniff(
    content_type: Option<&str>,
    body: &[u8],
    html: bool,
) -> (&'static Encoding, Source) {
    if let Some((encoding, _)) = Encoding::for_bom(body) {
        return (encoding, Source::Bom);
    }
    if let Some(encoding) = content_type
        .and_then(charset_param)
        .and_then(|label| Encoding::for_label(label.as_bytes()))
    {
        return (encoding, Source::Http);
    }
    if html && let Some(encoding) = prescan(&body[..body.len().min(PRESCAN_BYTES)]) {
        if encoding != UTF_8 && is_utf8_beyond_ascii(body) {
            return (UTF_8, Source::Utf8OverMeta);
        }
        return (encoding, Source::Meta);
    }
    (detect(body), Source::Detected)
}

/// Decode `body` as [`sniff`] decides; malformed sequences become U+FFFD, as in a browser.
pub(crate) fn decode(content_type: Option<&str>, body: &[u8], html: bool) -> String {
    let (encoding, _) = sniff(content_type, body, html);
    // `decode` removes a BOM (and lets one override the label, as the standard does).
    let (text, _, _) = encoding.decode(body);
    text.into_owned()
}

/// Whether `body` is valid UTF-8 (a sequence cut at the end of a capped body still counts) and
/// holds at least one character beyond ASCII.
fn is_utf8_beyond_ascii(body: &[u8]) -> bool {
    let valid = match std::str::from_utf8(body) {
        Ok(_) => body.len(),
        Err(e) if e.error_len().is_none() && body.len() - e.valid_up_to() < 4 => e.valid_up_to(),
        Err(_) => return false,
    };
    !body[..valid].is_ascii()
}

/// Undeclared bytes: UTF-8 if they are (a sequence cut at the end of a capped body still
/// counts), else what the detector says.
fn detect(body: &[u8]) -> &'static Encoding {
    match std::str::from_utf8(body) {
        Ok(_) => return UTF_8,
        Err(e) if e.error_len().is_none() && body.len() - e.valid_up_to() < 4 => return UTF_8,
        Err(_) => {}
    }
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Allow);
    detector.feed(body, true);
    detector.guess(None, chardetng::Utf8Detection::Allow)
}

/// The `charset` parameter of a `Content-Type` value.
pub(crate) fn charset_param(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches(['"', '\'']).to_string())
    })
}

/// What a label found by the prescan means: UTF-16 labels are read as UTF-8 (the bytes could
/// not have been ASCII-compatible otherwise), `x-user-defined` as windows-1252.
fn meta_encoding(label: &[u8]) -> Option<&'static Encoding> {
    let encoding = Encoding::for_label(label)?;
    Some(if encoding == UTF_16BE || encoding == UTF_16LE {
        UTF_8
    } else if encoding == X_USER_DEFINED {
        WINDOWS_1252
    } else {
        encoding
    })
}

fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

/// The WHATWG prescan: `<meta>` tags in the first bytes, skipping comments and other tags.
fn prescan(bytes: &[u8]) -> Option<&'static Encoding> {
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        if rest.starts_with(b"<!--") {
            // Skip to the end of the comment ("-->" may share the opening dashes).
            i += 2 + find(&rest[2..], b"-->").map_or(rest.len(), |at| at + 3);
            continue;
        }
        if rest.len() >= 6
            && rest[..5].eq_ignore_ascii_case(b"<meta")
            && (is_space(rest[5]) || rest[5] == b'/')
        {
            i += 5;
            if let Some(encoding) = meta_tag(bytes, &mut i) {
                return Some(encoding);
            }
            continue;
        }
        let tag_start = rest.len() >= 2
            && rest[0] == b'<'
            && (rest[1].is_ascii_alphabetic()
                || (rest[1] == b'/' && rest.get(2).is_some_and(u8::is_ascii_alphabetic)));
        if tag_start {
            // Skip the name, then every attribute of the tag.
            i += 1;
            while i < bytes.len() && !is_space(bytes[i]) && bytes[i] != b'>' {
                i += 1;
            }
            while attribute(bytes, &mut i).is_some() {}
            continue;
        }
        if rest.starts_with(b"<!") || rest.starts_with(b"</") || rest.starts_with(b"<?") {
            i += find(rest, b">").map_or(rest.len(), |at| at + 1);
            continue;
        }
        i += 1;
    }
    None
}

/// The attributes of one `<meta` tag, `i` just past its name: its encoding, if it declares
/// one the way the standard accepts.
fn meta_tag(bytes: &[u8], i: &mut usize) -> Option<&'static Encoding> {
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut got_pragma = false;
    // None: no charset seen; Some(true): from content= (needs the pragma); Some(false): charset=.
    let mut need_pragma: Option<bool> = None;
    let mut charset: Option<&'static Encoding> = None;
    while let Some((name, value)) = attribute(bytes, i) {
        if seen.contains(&name) {
            continue;
        }
        match name.as_slice() {
            b"http-equiv" if value.eq_ignore_ascii_case(b"content-type") => got_pragma = true,
            b"content" if charset.is_none() => {
                if let Some(label) = charset_in_content(&value) {
                    charset = meta_encoding(&label);
                    need_pragma = Some(true);
                }
            }
            b"charset" => {
                charset = meta_encoding(&value);
                need_pragma = Some(false);
            }
            _ => {}
        }
        seen.push(name);
    }
    match need_pragma {
        Some(true) if !got_pragma => None,
        Some(_) => charset,
        None => None,
    }
}

/// One attribute of a tag in the prescan ("get an attribute"), lowercased name and value;
/// `None` at the tag's end (`>` consumed) or the input's.
fn attribute(bytes: &[u8], i: &mut usize) -> Option<(Vec<u8>, Vec<u8>)> {
    let at = |i: usize| bytes.get(i).copied();
    while at(*i).is_some_and(|b| is_space(b) || b == b'/') {
        *i += 1;
    }
    match at(*i) {
        None => return None,
        Some(b'>') => {
            *i += 1;
            return None;
        }
        _ => {}
    }
    let mut name = Vec::new();
    let mut value = Vec::new();
    // The name.
    loop {
        match at(*i) {
            None => return None,
            Some(b'=') if !name.is_empty() => {
                *i += 1;
                break;
            }
            Some(b) if is_space(b) => {
                while at(*i).is_some_and(is_space) {
                    *i += 1;
                }
                if at(*i) != Some(b'=') {
                    return Some((name, value));
                }
                *i += 1;
                break;
            }
            Some(b'/' | b'>') => return Some((name, value)),
            Some(b) => {
                name.push(b.to_ascii_lowercase());
                *i += 1;
            }
        }
    }
    while at(*i).is_some_and(is_space) {
        *i += 1;
    }
    // The value.
    match at(*i) {
        None => None,
        Some(quote @ (b'"' | b'\'')) => {
            *i += 1;
            loop {
                match at(*i) {
                    None => return None,
                    Some(b) if b == quote => {
                        *i += 1;
                        return Some((name, value));
                    }
                    Some(b) => {
                        value.push(b.to_ascii_lowercase());
                        *i += 1;
                    }
                }
            }
        }
        Some(b'>') => Some((name, value)),
        Some(_) => loop {
            match at(*i) {
                None => return None,
                Some(b) if is_space(b) || b == b'>' => return Some((name, value)),
                Some(b) => {
                    value.push(b.to_ascii_lowercase());
                    *i += 1;
                }
            }
        },
    }
}

/// "Extract a character encoding from a meta element": the label after `charset=` in a
/// `content` value.
fn charset_in_content(content: &[u8]) -> Option<Vec<u8>> {
    let mut pos = 0;
    loop {
        let at = pos + find(&content[pos..], b"charset")?;
        let mut j = at + b"charset".len();
        while content.get(j).copied().is_some_and(is_space) {
            j += 1;
        }
        if content.get(j) != Some(&b'=') {
            pos = j;
            continue;
        }
        j += 1;
        while content.get(j).copied().is_some_and(is_space) {
            j += 1;
        }
        return match content.get(j) {
            Some(&quote @ (b'"' | b'\'')) => {
                let body = &content[j + 1..];
                let end = body.iter().position(|&b| b == quote)?;
                Some(body[..end].to_vec())
            }
            Some(_) => {
                let body = &content[j..];
                let end = body
                    .iter()
                    .position(|&b| is_space(b) || b == b';')
                    .unwrap_or(body.len());
                Some(body[..end].to_vec())
            }
            None => None,
        };
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(ct: Option<&str>, body: &[u8]) -> (&'static str, Source) {
        let (e, s) = sniff(ct, body, true);
        (e.name(), s)
    }

    #[test]
    fn the_order_is_bom_then_http_then_meta_then_detection() {
        let meta = b"<meta charset=\"shift_jis\"><p>x</p>";
        assert_eq!(
            name(
                Some("text/html; charset=euc-kr"),
                &[b"\xef\xbb\xbf".as_slice(), meta].concat()
            ),
            ("UTF-8", Source::Bom)
        );
        assert_eq!(
            name(Some("text/html; charset=euc-kr"), meta),
            ("EUC-KR", Source::Http)
        );
        assert_eq!(name(Some("text/html"), meta), ("Shift_JIS", Source::Meta));
        // A legacy `<meta>` over a body that is valid UTF-8 beyond ASCII: the bytes win; over
        // ASCII, or over bytes that are not UTF-8, the `<meta>` does; an HTTP charset always.
        let page = "<meta charset=iso-8859-1><p>It’s café time</p>".as_bytes();
        assert_eq!(name(None, page), ("UTF-8", Source::Utf8OverMeta));
        assert_eq!(
            decode(Some("text/html"), page, true),
            "<meta charset=iso-8859-1><p>It’s café time</p>"
        );
        assert_eq!(
            name(None, b"<meta charset=iso-8859-1><p>plain</p>"),
            ("windows-1252", Source::Meta)
        );
        assert_eq!(
            name(None, b"<meta charset=iso-8859-1><p>caf\xe9</p>"),
            ("windows-1252", Source::Meta)
        );
        assert_eq!(
            name(Some("text/html; charset=iso-8859-1"), page),
            ("windows-1252", Source::Http)
        );
        assert_eq!(name(None, b"<p>plain</p>"), ("UTF-8", Source::Detected));
        // Undeclared Latin-1 bytes: not UTF-8, so the detector decides.
        assert_eq!(
            name(
                None,
                "<p>Caf\u{e9} cr\u{e8}me br\u{fb}l\u{e9}e \u{e0} la fran\u{e7}aise</p>"
                    .chars()
                    .map(|c| c as u8)
                    .collect::<Vec<_>>()
                    .as_slice()
            )
            .0,
            "windows-1252"
        );
    }

    #[test]
    fn the_prescan_reads_http_equiv_and_skips_comments_and_other_tags() {
        for (page, want) in [
            (
                &b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=ISO-8859-2\">"[..],
                Some("ISO-8859-2"),
            ),
            // content= without the pragma is not a declaration.
            (&b"<meta content=\"text/html; charset=gbk\">"[..], None),
            (
                &b"<!-- <meta charset=gbk> --><meta charset=euc-jp>"[..],
                Some("EUC-JP"),
            ),
            (
                &b"<div title='<meta charset=gbk>'><meta charset='koi8-r'>"[..],
                Some("KOI8-R"),
            ),
            (&b"<meta charset=utf-16le>"[..], Some("UTF-8")),
            (&b"<meta charset=x-user-defined>"[..], Some("windows-1252")),
            (&b"<meta charset=no-such-thing>"[..], None),
            (&b"<metax charset=gbk>"[..], None),
            (&b"<META CHARSET=GBK>"[..], Some("GBK")),
        ] {
            assert_eq!(
                prescan(page).map(Encoding::name),
                want,
                "{}",
                String::from_utf8_lossy(page)
            );
        }
    }

    #[test]
    fn a_utf8_sequence_cut_by_the_body_cap_still_counts_as_utf8() {
        let mut body = "<p>日本語</p>".as_bytes().to_vec();
        body.extend_from_slice(&"語".as_bytes()[..2]);
        assert_eq!(name(None, &body), ("UTF-8", Source::Detected));
    }
}

//! The provider path the route judges. A provider decodes the path before it routes
//! (Starlette, FastAPI: `complet%69ons` is `completions`) and some also resolve dot segments,
//! merge slashes or drop `;` parameters; the gate judges the path as such a provider would
//! route it ([`normalize`]) and, in enforce mode, forwards only a path that needs none of
//! that ([`is_canonical`]), so what is judged is exactly what is sent.

/// Bytes a canonical path is made of besides `/`: letters, digits and `-._~:@`.
fn is_path_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':' | b'@')
}

/// `raw` as a decoding provider routes it: percent-decoded once, `\` read as `/`, `;`
/// parameters dropped from each segment, empty and `.` segments removed and `..` resolved.
/// A trailing `/` is kept.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn normalize(raw: &str) -> String {
    let decoded = percent_decode(raw).replace('\\', "/");
    let mut segments: Vec<&str> = Vec::new();
    for segment in decoded.split('/') {
        let segment = segment.split(';').next().unwrap_or_default();
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    let mut out = format!("/{}", segments.join("/"));
    let trailing = decoded.ends_with('/') || decoded.ends_with("/.") || decoded.ends_with("/..");
    if trailing && !segments.is_empty() {
        out.push('/');
    }
    out
}

/// Whether `raw` is already its own normalised form and only made of plain bytes: no
/// percent-encoding, no dot or empty segments, no `;` or `\`. Such a path means the same to
/// every provider, and the URL parser forwards it unchanged.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn is_canonical(raw: &str) -> bool {
    raw.starts_with('/')
        && raw.bytes().all(|b| b == b'/' || is_path_byte(b))
        && raw
            .trim_end_matches('/')
            .split('/')
            .skip(1)
            .all(|s| !matches!(s, "" | "." | ".."))
        && !raw.ends_with("//")
}

/// Percent-decode once; a `%` not followed by two hex digits stays as it is. Bytes that are
/// not UTF-8 become U+FFFD.
fn percent_decode(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let value = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_disguise_of_an_endpoint_normalises_to_it_and_is_not_canonical() {
        let cases = [
            ("/v1/chat/complet%69ons", "/v1/chat/completions"),
            ("/v1/chat/%63ompletions", "/v1/chat/completions"),
            ("/v1/me%73sages", "/v1/messages"),
            ("/v1/./chat/completions", "/v1/chat/completions"),
            ("/v1/x/../chat/completions", "/v1/chat/completions"),
            ("/v1/chat%2Fcompletions", "/v1/chat/completions"),
            ("/v1/chat%2fcompletions", "/v1/chat/completions"),
            ("/v1//chat/completions", "/v1/chat/completions"),
            ("/v1/chat/completions;x=1", "/v1/chat/completions"),
            ("/v1\\chat\\completions", "/v1/chat/completions"),
            ("/v1/%2e%2e/v1/chat/completions", "/v1/chat/completions"),
            ("/v1/chat/completions/.", "/v1/chat/completions/"),
            ("/v1/chat/complet%2569ons", "/v1/chat/complet%69ons"),
        ];
        for (raw, want) in cases {
            assert_eq!(normalize(raw), want, "{raw} must normalise to {want}");
            assert!(!is_canonical(raw), "{raw} must not count as canonical");
        }
    }

    #[test]
    fn plain_paths_are_canonical_and_their_own_normal_form() {
        for raw in [
            "/",
            "/v1/chat/completions",
            "/v1/messages",
            "/api/v1/models",
            "/v1/models/claude-3.5@2024:latest",
            "/v1/models/",
        ] {
            assert!(is_canonical(raw), "{raw} must be canonical");
            assert_eq!(normalize(raw), raw, "{raw} must be its own normal form");
        }
    }

    #[test]
    fn a_bad_escape_is_kept_and_refused() {
        assert_eq!(normalize("/v1/a%zz"), "/v1/a%zz", "not an escape");
        assert!(!is_canonical("/v1/a%zz"), "a lone % is not canonical");
    }
}

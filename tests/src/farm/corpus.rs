//! The payloads of the smuggling farm: the hand-written corpus in `tests/smuggle/corpus.txt`
//! (trophies and techniques from public research, each with its source) and the
//! `Transfer-Encoding` mutations of defparam/smuggler's exhaustive list, generated here.

use std::path::Path;

use anyhow::{Context, bail};

/// One payload: what a client sends to the gate on one connection.
#[derive(Clone, Debug)]
pub struct Payload {
    /// A stable name.
    pub id: String,
    /// The source key (`garden`, `portswigger`, `smuggler`, ...).
    pub source: String,
    /// The bytes, with placeholders (`{T}`, `{H}`, `{BT}`, `{B}`, `{P}`, and `{LEN}`: the
    /// length of what follows the first blank line, once filled).
    template: Vec<u8>,
}

/// How placeholders are filled for one listener.
#[derive(Clone, Debug)]
pub struct Render {
    /// `{T}` and `{BT}` are absolute-form prefixes (forward proxy) or empty (transparent).
    pub absolute: bool,
    /// The origin port behind both names.
    pub port: u16,
}

/// The host name the policy allows.
pub const ALLOWED: &str = "allowed.test";
/// The host name on the website blocklist.
pub const BLOCKED: &str = "blocked.test";

// === impl Payload ===

impl Payload {
    /// The bytes to send, placeholders filled.
    pub fn render(&self, r: &Render) -> Vec<u8> {
        let authority = |name: &str| format!("{name}:{}", r.port);
        let prefix = |name: &str| match r.absolute {
            true => format!("http://{}", authority(name)),
            false => String::new(),
        };
        let subs: [(&[u8], String); 5] = [
            (b"{BT}", prefix(BLOCKED)),
            (b"{T}", prefix(ALLOWED)),
            (b"{B}", authority(BLOCKED)),
            (b"{H}", authority(ALLOWED)),
            (b"{P}", r.port.to_string()),
        ];
        let mut out = Vec::with_capacity(self.template.len() + 64);
        let mut i = 0;
        'next: while i < self.template.len() {
            for (key, value) in &subs {
                if self.template[i..].starts_with(key) {
                    out.extend_from_slice(value.as_bytes());
                    i += key.len();
                    continue 'next;
                }
            }
            out.push(self.template[i]);
            i += 1;
        }
        let (Some(at), Some(end)) = (find(&out, b"{LEN}"), find(&out, b"\r\n\r\n")) else {
            return out;
        };
        let len = (out.len() - end - 4).to_string();
        out.splice(at..at + 5, len.bytes());
        out
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The hand-written corpus and the generated mutations, in a stable order.
pub fn load(corpus_file: &Path) -> anyhow::Result<Vec<Payload>> {
    let text = std::fs::read_to_string(corpus_file)
        .with_context(|| format!("failed to read {}", corpus_file.display()))?;
    let mut payloads = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut cols = line.splitn(3, '\t');
        let (Some(id), Some(source), Some(raw)) = (cols.next(), cols.next(), cols.next()) else {
            bail!(
                "{}:{}: want id<TAB>source<TAB>payload",
                corpus_file.display(),
                n + 1
            );
        };
        let template = unescape(raw)
            .with_context(|| format!("{}:{}: bad escape", corpus_file.display(), n + 1))?;
        payloads.push(Payload {
            id: id.to_string(),
            source: source.to_string(),
            template,
        });
    }
    payloads.extend(generated());
    Ok(payloads)
}

/// `\r \n \t \\ \xHH` escapes.
fn unescape(raw: &str) -> anyhow::Result<Vec<u8>> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let esc = *bytes.get(i + 1).context("a trailing backslash")?;
        match esc {
            b'r' => out.push(b'\r'),
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'\\' => out.push(b'\\'),
            b'"' => out.push(b'"'),
            b'x' => {
                let hex = raw.get(i + 2..i + 4).context("a short \\x escape")?;
                out.push(u8::from_str_radix(hex, 16)?);
                i += 2;
            }
            other => bail!("unknown escape \\{}", other as char),
        }
        i += 2;
    }
    Ok(out)
}

/// The `Transfer-Encoding` header gadgets of defparam/smuggler's `configs/exhaustive.py`
/// (named obfuscations, then one control or high byte placed before the name, after it, between
/// the colon and the value, and after the value), each sent in two shapes: with a
/// `Content-Length` covering a smuggled request behind `0\r\n\r\n` (CL.TE), and alone (TE).
pub fn generated() -> Vec<Payload> {
    let mut gadgets: Vec<(String, Vec<u8>)> = [
        ("nameprefix1", &b" Transfer-Encoding: chunked"[..]),
        ("tabprefix1", b"Transfer-Encoding:\tchunked"),
        ("tabprefix2", b"Transfer-Encoding\t:\tchunked"),
        ("spacejoin1", b"Transfer Encoding: chunked"),
        ("underjoin1", b"Transfer_Encoding: chunked"),
        ("smashed", b"Transfer Encoding:chunked"),
        ("space1", b"Transfer-Encoding : chunked"),
        ("valueprefix1", b"Transfer-Encoding:  chunked"),
        ("vertprefix1", b"Transfer-Encoding:\x0bchunked"),
        ("commaCow", b"Transfer-Encoding: chunked, cow"),
        ("cowComma", b"Transfer-Encoding: cow, chunked"),
        ("contentEnc", b"Content-Encoding: chunked"),
        ("linewrapped1", b"Transfer-Encoding:\n chunked"),
        ("quoted", b"Transfer-Encoding: \"chunked\""),
        ("aposed", b"Transfer-Encoding: 'chunked'"),
        ("lazygrep", b"Transfer-Encoding: chunk"),
        ("sarcasm", b"TrAnSFer-EnCODinG: cHuNkeD"),
        ("yelling", b"TRANSFER-ENCODING: CHUNKED"),
        ("0dsuffix", b"Transfer-Encoding: chunked\r"),
        ("tabsuffix", b"Transfer-Encoding: chunked\t"),
        (
            "revdualchunk",
            b"Transfer-Encoding: cow\r\nTransfer-Encoding: chunked",
        ),
        ("0dspam", b"Transfer\r-Encoding: chunked"),
        ("nested", b"Transfer-Encoding: cow chunked bar"),
        ("spaceFF", b"Transfer-Encoding:\xffchunked"),
        ("accentCH", b"Transfer-Encoding: ch\x96nked"),
        ("accentTE", b"Transf\x82r-Encoding: chunked"),
        ("x-rout", b"X:X\rTransfer-Encoding: chunked"),
        ("x-nout", b"X:X\nTransfer-Encoding: chunked"),
    ]
    .into_iter()
    .map(|(name, g)| (name.to_string(), g.to_vec()))
    .collect();
    for b in (0x01u8..0x20).chain(0x7f..=0xff) {
        let te = b"Transfer-Encoding";
        let place = |before: &[u8], after: &[u8]| [before, after].concat();
        gadgets.push((
            format!("midspace-{b:02x}"),
            place(te, &[&[b':', b][..], b"chunked"].concat()),
        ));
        gadgets.push((
            format!("postspace-{b:02x}"),
            place(te, &[&[b][..], b": chunked"].concat()),
        ));
        gadgets.push((
            format!("prespace-{b:02x}"),
            place(&[b], b"Transfer-Encoding: chunked"),
        ));
        gadgets.push((
            format!("endspace-{b:02x}"),
            place(b"Transfer-Encoding: chunked", &[b]),
        ));
    }
    let smuggled = b"GET {BT}/smuggled HTTP/1.1\r\nHost: {B}\r\n\r\n";
    let mut out = Vec::with_capacity(gadgets.len() * 2);
    for (name, gadget) in gadgets {
        let body = [&b"0\r\n\r\n"[..], smuggled].concat();
        let head = |cl: Option<&str>| {
            let mut h = b"POST {T}/ HTTP/1.1\r\nHost: {H}\r\n".to_vec();
            h.extend_from_slice(&gadget);
            h.extend_from_slice(b"\r\n");
            if let Some(cl) = cl {
                h.extend_from_slice(format!("Content-Length: {cl}\r\n").as_bytes());
            }
            h.extend_from_slice(b"\r\n");
            h
        };
        out.push(Payload {
            id: format!("smuggler-{name}-clte"),
            source: "smuggler".into(),
            // A server reading the Content-Length sees the smuggled request as body; one
            // reading chunked sees it as the next request.
            template: [head(Some("{LEN}")), body.clone()].concat(),
        });
        out.push(Payload {
            id: format!("smuggler-{name}-te"),
            source: "smuggler".into(),
            template: [head(None), body].concat(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_fill_per_listener_and_escapes_decode() {
        let p = Payload {
            id: "x".into(),
            source: "t".into(),
            template: unescape("GET {T}/a HTTP/1.1\\r\\nHost: {H}\\r\\nX: \\x00{BT}{B}{P}")
                .unwrap(),
        };
        let fwd = p.render(&Render {
            absolute: true,
            port: 81,
        });
        assert_eq!(
            fwd,
            b"GET http://allowed.test:81/a HTTP/1.1\r\nHost: allowed.test:81\r\nX: \x00http://blocked.test:81blocked.test:8181"
        );
        let captured = p.render(&Render {
            absolute: false,
            port: 81,
        });
        assert!(captured.starts_with(b"GET /a HTTP/1.1\r\n"));
    }

    #[test]
    fn the_generated_mutations_cover_every_byte_in_four_places_and_two_shapes() {
        let g = generated();
        assert_eq!(g.len(), (28 + 160 * 4) * 2);
        let clte = g
            .iter()
            .find(|p| p.id == "smuggler-midspace-0b-clte")
            .expect("a generated CL.TE payload");
        let bytes = clte.render(&Render {
            absolute: true,
            port: 81,
        });
        let text = String::from_utf8_lossy(&bytes);
        let (head, body) = text.split_once("\r\n\r\n").expect("a head");
        assert!(
            head.ends_with(&format!("Content-Length: {}", body.len())),
            "the length covers the filled body: {text:?}"
        );
    }
}

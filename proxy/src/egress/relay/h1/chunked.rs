//! The chunked transfer coding (RFC 9112 §7.1), decoded strictly and re-encoded canonically.
//!
//! The relay never forwards the chunk framing it received. Each run of chunk data it decodes
//! goes out as `{hex size}\r\n` data `\r\n`; the last chunk goes out as `0\r\n\r\n`. Chunk
//! extensions and the trailer section are parsed (so a malformed one is refused) and dropped.
//! A server behind the gate therefore frames exactly the bytes the gate framed: no trailer line,
//! extension or odd size line can carry a second request past the gates.
//!
//! The grammar is RFC 9112's, without the optional whitespace (`BWS`) around extensions: parsers
//! disagree on `1 ; a = b` and `1 0`, so the relay refuses them rather than pick a reading.
//!
//! ```text
//! chunk          = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! chunk-size     = 1*16HEXDIG
//! chunk-ext      = *( ";" token [ "=" ( token / quoted-string ) ] )
//! last-chunk     = 1*"0" [ chunk-ext ] CRLF
//! trailer-field  = token ":" *( VCHAR / obs-text / SP / HTAB ) CRLF   (parsed, then dropped)
//! ```

use super::FramingError;

/// The largest chunk-size line, or the whole trailer section, accepted in a chunked body.
pub(crate) const MAX_CHUNK_META: usize = 16 * 1024;

/// How the decoded body is written out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encode {
    /// Canonical chunks: `{hex}\r\n` data `\r\n` per run, `0\r\n\r\n` at the end.
    Chunked,
    /// The data alone (for a receiver that cannot read chunks: it reads until the close).
    Identity,
}

/// What one call to [`ChunkedDecoder::decode`] did with its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Input bytes consumed; the rest belongs to the next message.
    pub consumed: usize,
    /// Chunk data bytes decoded (written to the output, re-framed).
    pub(crate) data: usize,
    /// Whether the body ended (last chunk and trailer section read).
    pub done: bool,
}

/// A chunked-body decoder that re-encodes as it goes; feed it the bytes as they arrive.
#[derive(Debug, Default)]
pub struct ChunkedDecoder {
    state: State,
    /// Data bytes left in the current chunk (or the size being read).
    remaining: u64,
    digits: u8,
    /// Bytes of the current size line, or of the trailer section so far.
    meta: usize,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    /// Hex digits of a chunk size.
    #[default]
    Size,
    /// The first character of an extension name (after `;`).
    ExtNameStart,
    /// An extension name.
    ExtName,
    /// The first character of an extension value (after `=`).
    ExtValueStart,
    /// A token extension value.
    ExtToken,
    /// Inside a quoted extension value.
    ExtQuoted,
    /// After a backslash inside a quoted value.
    ExtQuotedPair,
    /// After the closing quote of a value.
    ExtQuotedEnd,
    /// LF after the size line.
    SizeLf,
    /// Chunk data.
    Data,
    /// CR after the data.
    DataCr,
    /// LF after the data.
    DataLf,
    /// The start of a trailer field line, or the final CRLF.
    TrailerStart,
    /// A trailer field name.
    TrailerName,
    /// A trailer field value.
    TrailerValue,
    /// LF after a trailer field line.
    TrailerLf,
    /// LF of the final CRLF.
    EndLf,
}

/// `tchar` of RFC 9110 §5.6.2.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A field-value byte (RFC 9110 §5.5): VCHAR, obs-text, SP or HTAB.
fn is_field_byte(b: u8) -> bool {
    b == b'\t' || b == b' ' || (0x21..=0x7e).contains(&b) || b >= 0x80
}

/// `qdtext` of RFC 9110 §5.6.4.
fn is_qdtext(b: u8) -> bool {
    b == b'\t'
        || b == b' '
        || b == 0x21
        || (0x23..=0x5b).contains(&b)
        || (0x5d..=0x7e).contains(&b)
        || b >= 0x80
}

/// Append the canonical frame header of a chunk of `len` data bytes.
fn put_chunk_size(out: &mut Vec<u8>, len: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut n = len;
    loop {
        i -= 1;
        digits[i] = HEX[n & 0xf];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
}

// === impl ChunkedDecoder ===

impl ChunkedDecoder {
    /// Decode what `input` holds of the body, appending the re-encoded bytes to `out`.
    /// Refuses the body at the first byte that breaks the grammar.
    pub fn decode(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        encode: Encode,
    ) -> Result<Decoded, FramingError> {
        let mut i = 0;
        let mut data = 0;
        while i < input.len() {
            if self.state == State::Data {
                let take = self.remaining.min((input.len() - i) as u64) as usize;
                if encode == Encode::Chunked {
                    put_chunk_size(out, take);
                }
                out.extend_from_slice(&input[i..i + take]);
                if encode == Encode::Chunked {
                    out.extend_from_slice(b"\r\n");
                }
                i += take;
                data += take;
                self.remaining -= take as u64;
                if self.remaining == 0 {
                    self.state = State::DataCr;
                }
                continue;
            }
            let b = input[i];
            i += 1;
            if self.step(b)? {
                if encode == Encode::Chunked {
                    out.extend_from_slice(b"0\r\n\r\n");
                }
                *self = Self::default();
                return Ok(Decoded {
                    consumed: i,
                    data,
                    done: true,
                });
            }
        }
        Ok(Decoded {
            consumed: i,
            data,
            done: false,
        })
    }

    /// Take one framing byte; `true` when it ended the body.
    fn step(&mut self, b: u8) -> Result<bool, FramingError> {
        use State::*;
        self.meta += 1;
        if self.meta > MAX_CHUNK_META {
            return Err(FramingError::Chunked(
                "chunk-size line or trailer section too long",
            ));
        }
        let bad = |what| Err(FramingError::Chunked(what));
        self.state = match (self.state, b) {
            (Size, b) if b.is_ascii_hexdigit() => {
                if self.digits == 16 {
                    return bad("chunk size too large");
                }
                self.digits += 1;
                let d = (b as char).to_digit(16).unwrap_or(0);
                self.remaining = (self.remaining << 4) | u64::from(d);
                Size
            }
            (Size, _) if self.digits == 0 => return bad("chunk size missing"),
            (Size | ExtName | ExtToken | ExtQuotedEnd, b';') => ExtNameStart,
            (Size | ExtName | ExtToken | ExtQuotedEnd, b'\r') => SizeLf,
            (Size, _) => return bad("chunk size followed by something other than ; or CRLF"),
            (ExtNameStart | ExtName, b) if is_tchar(b) => ExtName,
            (ExtName, b'=') => ExtValueStart,
            (ExtValueStart, b'"') => ExtQuoted,
            (ExtValueStart | ExtToken, b) if is_tchar(b) => ExtToken,
            (ExtQuoted, b'"') => ExtQuotedEnd,
            (ExtQuoted, b'\\') => ExtQuotedPair,
            (ExtQuoted, b) if is_qdtext(b) => ExtQuoted,
            (ExtQuotedPair, b) if is_field_byte(b) => ExtQuoted,
            (ExtNameStart | ExtName | ExtValueStart | ExtToken | ExtQuoted | ExtQuotedPair, _)
            | (ExtQuotedEnd, _) => return bad("malformed chunk extension"),
            (SizeLf, b'\n') => {
                self.digits = 0;
                self.meta = 0;
                if self.remaining == 0 {
                    TrailerStart
                } else {
                    Data
                }
            }
            (DataCr, b'\r') => DataLf,
            (DataLf, b'\n') => {
                self.meta = 0;
                Size
            }
            (TrailerStart, b'\r') => EndLf,
            (TrailerStart | TrailerName, b) if is_tchar(b) => TrailerName,
            (TrailerName, b':') => TrailerValue,
            (TrailerStart | TrailerName, _) => return bad("malformed trailer field"),
            (TrailerValue, b'\r') => TrailerLf,
            (TrailerValue, b) if is_field_byte(b) => TrailerValue,
            (TrailerValue, _) => return bad("malformed trailer field"),
            (TrailerLf, b'\n') => TrailerStart,
            (EndLf, b'\n') => return Ok(true),
            (SizeLf | DataCr | DataLf | TrailerLf | EndLf, _) => {
                return bad("bad chunk delimiter (CRLF required)");
            }
            (Data, _) => Data,
        };
        Ok(false)
    }
}

#[cfg(test)]
mod tests;

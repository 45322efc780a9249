//! Binary-payload detection on the first characters of a page (E7, before anything else).
//!
//! A backend that fetched a raw file hands its bytes back as "text", NULs dropped. The first 32
//! characters are mapped to latin-1 bytes (characters above U+00FF skipped, NULs dropped) and
//! compared against the file tool's magic-signature table, restricted to the kinds that never
//! open a real page, with NULs stripped from the signatures too.

/// The file tool's magic-signature table, in its order: first match wins.
const MAGIC_SIGNATURES: &[(&[u8], &str)] = &[
    (b"\x89PNG\r\n\x1a\n", "PNG image data"),
    (b"\xff\xd8\xff", "JPEG image data"),
    (b"GIF87a", "GIF image data"),
    (b"GIF89a", "GIF image data"),
    (b"RIFF", "RIFF container (WAV/AVI/WebP family)"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive (also docx/xlsx/jar/apk)"),
    (b"PK\x05\x06", "ZIP archive (empty)"),
    (b"\x1f\x8b", "gzip compressed data"),
    (b"BZh", "bzip2 compressed data"),
    (b"\xfd7zXZ\x00", "xz compressed data"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (b"\x7fELF", "ELF executable"),
    (b"MZ", "Windows PE executable"),
    (b"\xcf\xfa\xed\xfe", "Mach-O executable (64-bit)"),
    (b"\xca\xfe\xba\xbe", "Mach-O universal binary / Java class"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"OggS", "Ogg container"),
    (b"fLaC", "FLAC audio"),
    (b"ID3", "MP3 audio (ID3 tag)"),
    (b"\x00\x00\x00", "ISO media container (MP4/MOV family)"),
    (b"BM", "BMP image data"),
    (b"II*\x00", "TIFF image data (little-endian)"),
    (b"MM\x00*", "TIFF image data (big-endian)"),
];

/// Kind-name prefixes that count as a binary page; PDF, RIFF, PE, MP3, BMP and ISO media are
/// left out because text pages can start the same way (or another stage handles them).
const UNAMBIGUOUS_KINDS: &[&str] = &[
    "SQLite", "ZIP", "gzip", "bzip2", "xz", "7-Zip", "ELF", "Mach-O", "PNG", "JPEG", "GIF", "TIFF",
    "FLAC", "Ogg",
];

/// How many leading characters are inspected.
const SNIFF_CHARS: usize = 32;

/// The kind name of a binary payload (`"PNG image data"`, `"SQLite database"`, ...), or `None`
/// for text.
pub fn detect_binary(content: &str) -> Option<&'static str> {
    let mut head = [0u8; SNIFF_CHARS];
    let mut len = 0;
    for c in content.chars().take(SNIFF_CHARS) {
        // latin-1 with errors ignored keeps U+0001..=U+00FF; NULs are dropped on top.
        if let Ok(byte) = u8::try_from(u32::from(c))
            && byte != 0
        {
            head[len] = byte;
            len += 1;
        }
    }
    let head = &head[..len];
    MAGIC_SIGNATURES
        .iter()
        .filter(|(_, kind)| UNAMBIGUOUS_KINDS.iter().any(|p| kind.starts_with(p)))
        .find(|(signature, _)| starts_with_ignoring_nul(head, signature))
        .map(|(_, kind)| *kind)
}

/// The row error for a binary payload of `kind`, word for word as Hermes writes it.
pub(crate) fn binary_error_message(kind: &str) -> String {
    format!(
        "URL returned binary content ({kind}), not a page. Download it with the terminal \
         (curl -L -o) and use read_file (SQLite/Office/PDF auto-extract) or terminal utilities \
         on the file."
    )
}

/// `head.startswith(signature.replace(NUL, ""))`, where an all-NUL signature never matches.
fn starts_with_ignoring_nul(head: &[u8], signature: &[u8]) -> bool {
    let mut wanted = signature.iter().filter(|&&b| b != 0).peekable();
    if wanted.peek().is_none() {
        return false;
    }
    let mut have = head.iter();
    wanted.all(|w| have.next() == Some(w))
}

#[cfg(test)]
mod tests;

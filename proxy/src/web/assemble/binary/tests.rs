//! Tests of binary-payload detection: every listed signature, NUL handling, the 32-character window.

use super::*;

/// Bytes as the text a backend hands back: each byte one latin-1 character.
fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

#[test]
fn every_listed_kind_is_detected_by_its_signature() {
    let cases: &[(&str, &[u8], &str)] = &[
        (
            "png",
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
            "PNG image data",
        ),
        ("jpeg", b"\xff\xd8\xff\xe0\x00\x10JFIF", "JPEG image data"),
        ("gif87a", b"GIF87a\x01\x00", "GIF image data"),
        ("gif89a", b"GIF89a\x01\x00", "GIF image data"),
        (
            "zip",
            b"PK\x03\x04\x14\x00",
            "ZIP archive (also docx/xlsx/jar/apk)",
        ),
        ("empty zip", b"PK\x05\x06\x00\x00", "ZIP archive (empty)"),
        ("gzip", b"\x1f\x8b\x08\x00", "gzip compressed data"),
        ("bzip2", b"BZh91AY&SY", "bzip2 compressed data"),
        ("xz", b"\xfd7zXZ\x00\x00\x04", "xz compressed data"),
        ("7-zip", b"7z\xbc\xaf\x27\x1c\x00\x04", "7-Zip archive"),
        ("elf", b"\x7fELF\x02\x01\x01", "ELF executable"),
        (
            "mach-o 64",
            b"\xcf\xfa\xed\xfe\x07\x00",
            "Mach-O executable (64-bit)",
        ),
        (
            "mach-o universal",
            b"\xca\xfe\xba\xbe\x00\x00",
            "Mach-O universal binary / Java class",
        ),
        ("sqlite", b"SQLite format 3\x00\x10\x00", "SQLite database"),
        ("ogg", b"OggS\x00\x02", "Ogg container"),
        ("flac", b"fLaC\x00\x00\x00\x22", "FLAC audio"),
        (
            "tiff little-endian",
            b"II*\x00\x08\x00",
            "TIFF image data (little-endian)",
        ),
        (
            "tiff big-endian",
            b"MM\x00*\x00\x00",
            "TIFF image data (big-endian)",
        ),
    ];
    for (name, bytes, want) in cases {
        assert_eq!(
            detect_binary(&latin1(bytes)),
            Some(*want),
            "{name} must be detected"
        );
    }
}

#[test]
fn kinds_outside_the_list_and_text_pages_pass() {
    let cases: &[(&str, &str)] = &[
        ("pdf", "%PDF-1.7\n%âãÏÓ"),
        ("riff", "RIFF\u{24}\0\0\0WAVEfmt "),
        ("windows pe", "MZ\u{90}\0\u{3}\0"),
        ("mp3", "ID3\u{4}\0\0"),
        ("bmp", "BM6\u{c}\0\0"),
        ("iso media with ftyp", "\0\0\0\u{18}ftypmp42"),
        ("markdown", "# Title\n\nSome text."),
        ("html", "<!doctype html><html>"),
        ("json", "{\"a\": 1}"),
        ("empty", ""),
        ("only nuls", "\0\0\0\0"),
        ("a near miss", "PK\u{3}"),
    ];
    for (name, text) in cases {
        assert_eq!(detect_binary(text), None, "{name} must not count as binary");
    }
}

#[test]
fn nul_bytes_are_ignored_on_both_sides() {
    // Backends drop NULs: "SQLite format 3" without its trailing NUL must still match, and NULs
    // sprinkled into the head must not break a match either.
    assert_eq!(
        detect_binary("SQLite format 3"),
        Some("SQLite database"),
        "the NUL-less form"
    );
    assert_eq!(
        detect_binary("\0P\0K\u{3}\0\u{4}"),
        Some("ZIP archive (also docx/xlsx/jar/apk)"),
        "NULs in the head"
    );
    // "MM\0*" without its NUL is "MM*".
    assert_eq!(
        detect_binary("MM*rest"),
        Some("TIFF image data (big-endian)"),
        "the TIFF form"
    );
}

#[test]
fn characters_above_latin1_are_skipped_not_matched() {
    // latin-1 encoding with errors ignored drops U+0100 and up, so they do not break a prefix.
    assert_eq!(
        detect_binary("€GIF89a"),
        Some("GIF image data"),
        "a dropped character before"
    );
    assert_eq!(
        detect_binary("G€IF89a"),
        Some("GIF image data"),
        "a dropped character inside"
    );
}

#[test]
fn only_the_first_32_characters_are_inspected() {
    let late = format!("{}GIF89a", "\0".repeat(32));
    assert_eq!(
        detect_binary(&late),
        None,
        "a signature after 32 characters must not count"
    );
    let just_in = format!("{}GIF89a", "\0".repeat(26));
    assert_eq!(
        detect_binary(&just_in),
        Some("GIF image data"),
        "32 characters must be enough"
    );
}

#[test]
fn the_error_message_names_the_kind() {
    assert_eq!(
        binary_error_message("SQLite database"),
        "URL returned binary content (SQLite database), not a page. Download it with the terminal (curl -L -o) and use read_file (SQLite/Office/PDF auto-extract) or terminal utilities on the file.",
        "the message must be Hermes' text with the kind filled in"
    );
}

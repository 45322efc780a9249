//! Tests of the cache key: seed 9 file names, a pinned digest, proptest stability.

use proptest::prelude::*;

use super::*;

fn sha16(input: &str) -> String {
    hex::encode(Sha256::digest(input.as_bytes()))[..16].to_owned()
}

#[test]
fn file_name_is_slug_and_first_16_hex_of_url_format_provider() {
    // Seed 9: `<slug>-<sha256("url\nmarkdown\nfirecrawl")[:16]>.cache.md`.
    let cases = [
        (
            "https://Example.com/a?b=1",
            "firecrawl",
            "example.com",
            "https://Example.com/a?b=1\nmarkdown\nfirecrawl",
        ),
        (
            "http://[::1]:8080/x",
            "direct",
            "__1",
            "http://[::1]:8080/x\nmarkdown\ndirect",
        ),
        ("file:///etc/x", "", "page", "file:///etc/x\nmarkdown\n"),
    ];
    for (url, provider, slug, preimage) in cases {
        let key = CacheKey::new(url, FORMAT_MARKDOWN, provider);
        let want = format!("{slug}-{}.cache.md", sha16(preimage));
        assert_eq!(
            key.file_name(),
            want,
            "file name of {url} must follow seed 9"
        );
    }
}

#[test]
fn a_known_vector_pins_the_digest() {
    // Computed independently: printf 'https://example.com/\nmarkdown\nfirecrawl' | sha256sum
    let key = CacheKey::new("https://example.com/", FORMAT_MARKDOWN, "firecrawl");
    assert_eq!(
        key.file_name(),
        "example.com-055112d11ac7303b.cache.md",
        "the digest must match sha256sum of the preimage"
    );
}

#[test]
fn provider_and_format_change_the_key() {
    let base = CacheKey::new("https://e.com/", FORMAT_MARKDOWN, "firecrawl");
    let other_provider = CacheKey::new("https://e.com/", FORMAT_MARKDOWN, "direct");
    let other_format = CacheKey::new("https://e.com/", "html", "firecrawl");
    assert_ne!(base, other_provider, "the provider must be part of the key");
    assert_ne!(base, other_format, "the format must be part of the key");
}

proptest! {
    #[test]
    fn keys_are_stable_and_file_names_well_formed(url in ".{0,200}", provider in "[a-z-]{0,12}") {
        let a = CacheKey::new(&url, FORMAT_MARKDOWN, &provider);
        let b = CacheKey::new(&url, FORMAT_MARKDOWN, &provider);
        prop_assert_eq!(&a, &b);
        let name = a.file_name();
        let (slug, rest) = name.rsplit_once('-').expect("a file name must have a dash");
        prop_assert!(!slug.is_empty() && slug.len() <= 60);
        prop_assert!(slug.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)));
        prop_assert!(!slug.starts_with('-') && !slug.ends_with('-'));
        let hex = rest.strip_suffix(ENTRY_SUFFIX).expect("the suffix must be .cache.md");
        prop_assert_eq!(hex.len(), 16);
        prop_assert!(hex.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        prop_assert_eq!(hex, sha16(&format!("{url}\nmarkdown\n{provider}")));
    }
}

//! E7 on arbitrary pages and limits: never panics, never splits a character, and the head of a
//! truncated page is a prefix of the page.
#![no_main]

use fleetgate_proxy::web::assemble::{images, truncate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let limit = 2000 + (data.len() % 97);
    let _ = images::convert_base64_images_to_links(s);
    let out = truncate::truncate_and_store(s, limit, "https://fuzz.example/page", None);
    if out.len() != s.len() {
        let head: String = out.chars().take(10).collect();
        assert!(s.starts_with(&head));
    }
});

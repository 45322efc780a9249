//! Stage E7: assembly of each successful page — binary check, inline-image stripping,
//! truncate-and-store — with Hermes' exact algorithms and footer text.

pub mod binary;
pub mod images;
pub mod store;
pub mod truncate;

/// Hermes' default extract character limit.
pub const DEFAULT_CHAR_LIMIT: usize = 15_000;
/// Smallest accepted character limit.
pub const MIN_CHAR_LIMIT: usize = 2_000;
/// Largest accepted character limit.
pub const MAX_CHAR_LIMIT: usize = 500_000;

/// The per-row E7 order: binary check, base64 images, truncate-and-store.
pub fn assemble_page(
    content: &str,
    limit: usize,
    url: &str,
    store: Option<&store::Store>,
) -> Result<String, String> {
    if let Some(kind) = binary::detect_binary(content) {
        return Err(format!("binary {kind}"));
    }
    let content = images::convert_base64_images_to_links(content);
    Ok(truncate::truncate_and_store(&content, limit, url, store).into_owned())
}

/// Hermes' char-limit coercion and clamp.
pub fn clamp_char_limit(value: Option<&serde_json::Value>, default: usize) -> usize {
    let n = value
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(default as i64);
    n.clamp(MIN_CHAR_LIMIT as i64, MAX_CHAR_LIMIT as i64) as usize
}

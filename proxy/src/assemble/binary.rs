//! Binary-payload detection on the first characters of a page.

/// The kind name of a binary payload (`PNG`, `ZIP`, ...), or `None` for text.
pub fn detect_binary(_content: &str) -> Option<&'static str> {
    None
}

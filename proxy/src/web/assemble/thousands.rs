//! Counts written for people: `1,234,567`, as the truncation marker and the stored-copy
//! notice print them.

/// `n` with comma thousands separators, as Python's `{n:,}`.
pub(crate) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

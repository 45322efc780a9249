//! The problems a policy file can have: each names its field and the fix.

use std::fmt;

/// One problem in a policy file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path of the field (`web.charLimit`), or `policy` for file-level problems.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// Every problem found in a policy file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct PolicyError {
    /// The problems, in file order.
    pub errors: Vec<FieldError>,
}

// === impl PolicyError ===

impl PolicyError {
    pub(crate) fn one(field: &str, message: impl Into<String>) -> Self {
        Self {
            errors: vec![FieldError {
                field: field.to_string(),
                message: message.into(),
            }],
        }
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", e.field, e.message)?;
        }
        Ok(())
    }
}

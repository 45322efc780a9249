//! What can be wrong with a FleetPolicy when it is rendered: each [`SpecProblem`] names its
//! field and the fix, a [`RenderError`] says why nothing was rendered, a [`Conflict`] why the
//! cluster baselines refuse the spec.

use std::fmt;

/// Why the baselines refuse a FleetPolicy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The baselines involved, by name, with their generation.
    pub baselines: Vec<(String, Option<i64>)>,
    /// Each field that cannot be tightened into something the gate would enforce.
    pub problems: Vec<SpecProblem>,
}

/// One problem of a spec, naming the field (`spec.web.charLimit`) and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecProblem {
    /// Dotted path of the field in the FleetPolicy.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// Why a FleetPolicy cannot be rendered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The object has no `metadata.name`.
    #[error("failed to render: the FleetPolicy has no metadata.name")]
    MissingName,
    /// The spec is invalid; every problem names its field.
    #[error("failed to render an invalid spec: {}", Problems(.0))]
    InvalidSpec(Vec<SpecProblem>),
    /// The cluster baselines refuse the spec: a field they bound would be left empty.
    #[error("failed to render under the cluster baseline: {}", Problems(&.0.problems))]
    Baseline(Conflict),
    /// A rendered file could not be serialized (a bug, not a user error).
    #[error("failed to serialize {file}: {message}")]
    Serialize {
        /// The file being written.
        file: &'static str,
        /// The serializer's message.
        message: String,
    },
}

/// Display helper: `field: message; field: message`.
#[derive(Debug)]
pub struct Problems<'a>(pub &'a [SpecProblem]);

// === impl RenderError ===

impl RenderError {
    /// The fields named by the error, for tests and the `Valid` condition.
    pub fn fields(&self) -> Vec<&str> {
        match self {
            Self::InvalidSpec(problems) => problems.iter().map(|p| p.field.as_str()).collect(),
            Self::Baseline(c) => c.problems.iter().map(|p| p.field.as_str()).collect(),
            Self::MissingName => vec!["metadata.name"],
            Self::Serialize { .. } => Vec::new(),
        }
    }

    /// Stable CamelCase reason for the `Valid=False` condition.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingName => "MissingName",
            Self::InvalidSpec(_) => "InvalidSpec",
            Self::Baseline(_) => "BaselineConflict",
            Self::Serialize { .. } => "RenderFailed",
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidSpec(vec![SpecProblem {
            field: field.into(),
            message: message.into(),
        }])
    }
}

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", p.field, p.message)?;
        }
        Ok(())
    }
}

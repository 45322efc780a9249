//! The offline subcommands: `crd` and `render FILE...` (no cluster needed).

use std::path::Path;

use serde::Deserialize;

use crate::crd::FleetPolicy;
use crate::crd::cluster_fleet_policy::ClusterFleetPolicy;
use crate::desired::{RenderError, render_with};

#[cfg(test)]
mod tests;

/// Why an offline render failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A file could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A YAML document is not a FleetPolicy.
    #[error("failed to parse {path} document {index}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// Zero-based document index in the file.
        index: usize,
        /// The parser's message.
        message: String,
    },
    /// A FleetPolicy is invalid.
    #[error("{path} document {index}: {source}")]
    Render {
        /// The file.
        path: String,
        /// Zero-based document index in the file.
        index: usize,
        /// Why it cannot be rendered.
        #[source]
        source: RenderError,
    },
}

/// Render every FleetPolicy of a YAML text (one or more `---` documents) into ConfigMap YAML
/// documents. Documents of other kinds are skipped; `path` only labels errors.
pub fn render_text(path: &str, text: &str) -> Result<Vec<String>, CliError> {
    render_text_with(path, text, None)
}

/// [`render_text`] under the cluster baselines `baselines` (`None`: baselines not read, as a
/// controller without `--cluster-baseline`).
pub fn render_text_with(
    path: &str,
    text: &str,
    baselines: Option<&[ClusterFleetPolicy]>,
) -> Result<Vec<String>, CliError> {
    let mut out = Vec::new();
    for (index, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = serde_yaml::Value::deserialize(doc).map_err(|e| CliError::Parse {
            path: path.into(),
            index,
            message: e.to_string(),
        })?;
        if value.is_null() || value.get("kind").and_then(|k| k.as_str()) != Some("FleetPolicy") {
            continue;
        }
        let fp: FleetPolicy = serde_yaml::from_value(value).map_err(|e| CliError::Parse {
            path: path.into(),
            index,
            message: e.to_string(),
        })?;
        let desired = render_with(&fp, baselines).map_err(|source| CliError::Render {
            path: path.into(),
            index,
            source,
        })?;
        let mut cm = serde_json::to_value(&desired.config_map).map_err(|e| CliError::Parse {
            path: path.into(),
            index,
            message: e.to_string(),
        })?;
        // apiVersion and kind first, as people write manifests.
        let mut doc = serde_json::Map::new();
        doc.insert("apiVersion".into(), "v1".into());
        doc.insert("kind".into(), "ConfigMap".into());
        if let Some(obj) = cm.as_object_mut() {
            doc.append(obj);
        }
        let yaml = serde_yaml::to_string(&doc).map_err(|e| CliError::Parse {
            path: path.into(),
            index,
            message: e.to_string(),
        })?;
        out.push(format!("{}{yaml}", baseline_comment(&desired)));
    }
    Ok(out)
}

/// Every ClusterFleetPolicy of a YAML text; documents of other kinds are skipped.
pub fn baselines_of(path: &str, text: &str) -> Result<Vec<ClusterFleetPolicy>, CliError> {
    let mut out = Vec::new();
    for (index, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let parse = |message: String| CliError::Parse {
            path: path.into(),
            index,
            message,
        };
        let value = serde_yaml::Value::deserialize(doc).map_err(|e| parse(e.to_string()))?;
        if value.get("kind").and_then(|k| k.as_str()) != Some("ClusterFleetPolicy") {
            continue;
        }
        out.push(serde_yaml::from_value(value).map_err(|e| parse(e.to_string()))?);
    }
    Ok(out)
}

/// Render every FleetPolicy of the given files, in order, as one multi-document YAML stream.
pub fn render_files(paths: &[impl AsRef<Path>]) -> Result<String, CliError> {
    render_files_with(paths, &[] as &[&Path])
}

/// [`render_files`] under the ClusterFleetPolicies of `baseline_files`; with none given, the
/// baselines are not read at all (no `Baseline` outcome), as a controller without them.
pub fn render_files_with(
    paths: &[impl AsRef<Path>],
    baseline_files: &[impl AsRef<Path>],
) -> Result<String, CliError> {
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|source| CliError::Read {
            path: path.display().to_string(),
            source,
        })
    };
    let mut baselines = Vec::new();
    for path in baseline_files {
        let path = path.as_ref();
        baselines.extend(baselines_of(&path.display().to_string(), &read(path)?)?);
    }
    let under = (!baseline_files.is_empty()).then_some(baselines.as_slice());
    let mut docs = Vec::new();
    for path in paths {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| CliError::Read {
            path: shown.clone(),
            source,
        })?;
        docs.extend(render_text_with(&shown, &text, under)?);
    }
    Ok(docs.iter().map(|d| format!("---\n{d}")).collect())
}

/// What the baselines did, as `#` lines ahead of the ConfigMap (empty without baselines).
fn baseline_comment(d: &crate::desired::Desired) -> String {
    let Some(b) = &d.baseline else {
        return String::new();
    };
    let mut out = String::new();
    let names: Vec<&str> = b.baselines.iter().map(|(n, _)| n.as_str()).collect();
    if names.is_empty() {
        out.push_str("# baseline: no ClusterFleetPolicy given\n");
    } else {
        out.push_str(&format!("# baseline: {}\n", names.join(", ")));
    }
    for c in &b.changes {
        out.push_str(&format!("#   tightened {}: {}\n", c.field, c.message));
    }
    for n in &b.notes {
        out.push_str(&format!("#   note: {n}\n"));
    }
    out
}

//! The command line: the flags of every subcommand ([`Cli`]), and the offline subcommands,
//! `crd` and `render FILE...` (no cluster needed). [`crate::app`] runs them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::crd::FleetPolicy;
use crate::crd::cluster_fleet_policy::ClusterFleetPolicy;
use crate::desired::{RenderError, render_with};

#[cfg(test)]
mod tests;

/// The fleetgate controller.
#[derive(Debug, clap::Parser)]
#[command(name = "fleetgate-controller", version)]
pub struct Cli {
    #[command(subcommand)]
    /// The subcommand.
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Run the controller: reconcile FleetPolicies, serve /live /ready /metrics.
    Run(Box<RunArgs>),
    /// Print a CRD as YAML: the FleetPolicy's (default) or the ClusterFleetPolicy's.
    Crd {
        /// Which CRD.
        #[arg(value_enum, default_value = "fleet-policy")]
        kind: CrdKind,
    },
    /// Render the ConfigMaps of FleetPolicy files offline and print them as YAML.
    Render {
        /// FleetPolicy YAML files (several documents per file are fine).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// ClusterFleetPolicy YAML files: render each FleetPolicy under these baselines, as a
        /// controller with `--cluster-baseline` would (repeat the flag for several files).
        #[arg(long = "baseline", value_name = "FILE")]
        baselines: Vec<PathBuf>,
    },
}

/// The CRDs the controller defines.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CrdKind {
    /// `fleetpolicies.fleetgate.dev` (namespaced).
    FleetPolicy,
    /// `clusterfleetpolicies.fleetgate.dev` (cluster-scoped).
    ClusterFleetPolicy,
}

/// `run` options.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Namespace to watch (the chart passes the release namespace).
    #[arg(long, env = "POD_NAMESPACE", conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Watch every namespace instead.
    #[arg(long)]
    pub all_namespaces: bool,
    /// Address of the admin listener.
    #[arg(long, env = "FLEETGATE_ADMIN_ADDR", default_value = "0.0.0.0:8080")]
    pub admin_addr: SocketAddr,
    /// Events name this instance (the pod name).
    #[arg(long, env = "POD_NAME")]
    pub instance: Option<String>,
    /// Secret holding the gates' report bearer token; fleet scraping is off without it.
    #[arg(long, env = "FLEETGATE_REPORT_TOKEN_SECRET")]
    pub report_token_secret: Option<String>,
    /// Key of the token in that Secret.
    #[arg(long, default_value = "token")]
    pub report_token_key: String,
    /// Deadline of one pod's scrape, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub scrape_timeout_ms: u64,
    /// Pods scraped at once.
    #[arg(long, default_value_t = 8)]
    pub scrape_concurrency: usize,
    /// Address of the sidecar-injection webhook's HTTPS listener.
    #[arg(long, env = "FLEETGATE_WEBHOOK_ADDR", default_value = "0.0.0.0:9443")]
    pub webhook_addr: SocketAddr,
    /// Serving certificate chain (PEM) of the webhook; the webhook is off without it.
    #[arg(
        long,
        env = "FLEETGATE_WEBHOOK_CERT",
        requires = "webhook_key",
        requires = "injector_config"
    )]
    pub webhook_cert: Option<PathBuf>,
    /// Private key (PEM) of the webhook certificate; both files are re-read when they change.
    #[arg(long, env = "FLEETGATE_WEBHOOK_KEY", requires = "webhook_cert")]
    pub webhook_key: Option<PathBuf>,
    /// Injector configuration (YAML) the chart renders: image, uid, resources, volumes.
    #[arg(long, env = "FLEETGATE_INJECTOR_CONFIG")]
    pub injector_config: Option<PathBuf>,
    /// Render every FleetPolicy under the cluster's ClusterFleetPolicies (needs their CRD and
    /// get/list/watch on them): nothing is rendered until they are listed.
    #[arg(long, env = "FLEETGATE_CLUSTER_BASELINE", default_value_t = false, action = clap::ArgAction::Set)]
    pub cluster_baseline: bool,
    /// Elect one leader through a Lease among the replicas; `false` makes this replica
    /// reconcile unconditionally (run exactly one replica then).
    #[arg(long, env = "FLEETGATE_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Name of the Lease.
    #[arg(
        long,
        env = "FLEETGATE_LEASE_NAME",
        default_value = "fleetgate-controller"
    )]
    pub lease_name: String,
    /// Namespace of the Lease; defaults to the watched namespace.
    #[arg(long, env = "FLEETGATE_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Seconds one renewal keeps the lease; a new leader takes over at most this long after
    /// the old one stopped renewing.
    #[arg(long, default_value_t = 15)]
    pub lease_duration_seconds: u64,
    /// Seconds before the lease runs out that the holder renews it; also the clock skew
    /// tolerated between nodes.
    #[arg(long, default_value_t = 5)]
    pub lease_grace_seconds: u64,
}

/// The YAML of the CRD `kind`.
pub fn crd_yaml(kind: CrdKind) -> Result<String, serde_yaml::Error> {
    match kind {
        CrdKind::FleetPolicy => crate::crd::crd_yaml(),
        CrdKind::ClusterFleetPolicy => crate::crd::cluster_fleet_policy::crd_yaml(),
    }
}

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

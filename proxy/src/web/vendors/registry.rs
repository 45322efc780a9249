//! Backends built from a policy: the extract backend, the search backend and the rescue list.
//!
//! A ring member (exa, parallel, firecrawl, keenable) is called keylessly on `tier: free`, and
//! on `tier: auto` when no key is configured (Firecrawl: nor a self-hosted base URL), as
//! Hermes' `use_keyless` decides; `tier: paid` always calls the keyed API. `keyless` is the
//! ring itself.
//!
//! Names were checked strictly when the policy loaded (no autodetect walk); here each name
//! becomes a concrete client with its endpoint and key. Keys come from a mounted Secret file
//! (`web.vendors.<name>.apiKeyFile`) or the environment, never from the policy itself, and are
//! re-read on every policy load so a rotated Secret takes effect with the next reload.

use crate::policy::{VendorSettings, VendorTier, WebPolicy};

use super::backend::Backend;
use super::client::Endpoint;
use super::direct::DirectFetcher;
use super::keyless::{KeylessClient, Ring};
use super::xai;
use crate::policy::backends::BackendKind;

/// The backends of one runtime.
#[derive(Clone, Debug)]
pub(crate) struct Backends {
    /// Serves extract.
    pub(crate) extract: Backend,
    /// Serves search, when a search backend is configured.
    pub(crate) search: Option<Backend>,
    /// Tried in order when `extract` fails for every URL of a call, or (those that can
    /// search) when `search` fails; an entry naming the failed backend itself is skipped.
    pub(crate) rescue: Vec<Backend>,
    /// Problems met while building (unreadable key files, ...).
    pub(crate) warnings: Vec<String>,
}

// === impl Backends ===

impl Backends {
    /// Build every backend `web` names.
    pub(crate) fn build(web: &WebPolicy, direct: &DirectFetcher) -> Self {
        let mut warnings = Vec::new();
        let mut build = |name: &str| build_backend(name, &web.vendors, direct, &mut warnings);
        let extract = build(&web.extract_backend);
        let search = web.search_backend.as_deref().map(&mut build);
        let rescue = web.rescue.iter().map(|name| build(name)).collect();
        Self {
            extract,
            search,
            rescue,
            warnings,
        }
    }
}

fn build_backend(
    name: &str,
    settings: &[VendorSettings],
    direct: &DirectFetcher,
    warnings: &mut Vec<String>,
) -> Backend {
    let kind = BackendKind::from_name(name).unwrap_or(BackendKind::Direct);
    match kind {
        BackendKind::Direct => return Backend::Direct(direct.clone()),
        BackendKind::Keyless => return Backend::Ring(Ring::new(settings)),
        _ => {}
    }
    let config = settings.iter().find(|s| s.name == name);
    let endpoint = config
        .and_then(|c| c.base_url.clone())
        .map(Endpoint::new)
        .or_else(|| super::backend::default_endpoint(kind));
    let Some(mut endpoint) = endpoint else {
        // Policy validation requires a base URL for SearXNG; this is unreachable in practice.
        warnings.push(format!(
            "{name}: no base URL configured; using the direct backend instead"
        ));
        return Backend::Direct(direct.clone());
    };
    endpoint.timeout = kind.default_timeout();
    if let Some(c) = config {
        endpoint.timeout = c.timeout.unwrap_or(endpoint.timeout);
        endpoint.max_body_bytes = c.max_body_bytes.unwrap_or(endpoint.max_body_bytes);
        endpoint.retries = c.retries.unwrap_or(endpoint.retries);
    }
    endpoint.api_key = read_key(kind, config, warnings);
    if kind != BackendKind::Keenable
        && uses_keyless(kind, config, &endpoint)
        && let Some(client) = KeylessClient::new(kind, config)
    {
        return Backend::Keyless(client);
    }
    let backend = Backend::vendor(kind, endpoint).unwrap_or(Backend::Direct(direct.clone()));
    match (backend, config) {
        (
            Backend::Parallel(p),
            Some(VendorSettings {
                search_mode: Some(mode),
                ..
            }),
        ) => Backend::Parallel(p.with_search_mode(mode)),
        (Backend::Keenable(k), Some(c)) => Backend::Keenable(k.with_tier(c.tier)),
        (Backend::Xai(x), Some(c)) => Backend::Xai(x.with_options(xai::XaiOptions {
            model: c.model.clone(),
            allowed_domains: c.allowed_domains.clone(),
            excluded_domains: c.excluded_domains.clone(),
        })),
        (backend, _) => backend,
    }
}

/// Hermes' `use_keyless` for a ring member: `free` always, `paid` never, `auto` without a
/// key (and, for Firecrawl, without a self-hosted base URL).
fn uses_keyless(kind: BackendKind, config: Option<&VendorSettings>, endpoint: &Endpoint) -> bool {
    if !kind.has_keyless_tier() {
        return false;
    }
    match config.map(|c| c.tier).unwrap_or_default() {
        VendorTier::Free => true,
        VendorTier::Paid => false,
        VendorTier::Auto => {
            endpoint.key().is_none()
                && (kind != BackendKind::Firecrawl
                    || config.and_then(|c| c.base_url.as_ref()).is_none())
        }
    }
}

/// The key from the Secret file, else the configured or usual environment variable.
fn read_key(
    kind: BackendKind,
    config: Option<&VendorSettings>,
    warnings: &mut Vec<String>,
) -> Option<String> {
    if let Some(path) = config.and_then(|c| c.api_key_file.as_ref()) {
        match crate::policy::file::read_regular_to_string(path) {
            Ok(key) if !key.trim().is_empty() => return Some(key.trim().to_string()),
            Ok(_) => warnings.push(format!(
                "{}: the key file {} is empty",
                kind.name(),
                path.display()
            )),
            Err(e) => warnings.push(format!(
                "{}: failed to read the key file {}: {e}",
                kind.name(),
                path.display()
            )),
        }
    }
    let var = config
        .and_then(|c| c.api_key_env.as_deref())
        .or(kind.key_env())?;
    std::env::var(var).ok().filter(|k| !k.trim().is_empty())
}

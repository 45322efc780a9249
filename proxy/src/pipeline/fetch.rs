//! E5 + E6 + E7 for the items that passed the gates: the shared cache, the configured
//! backend (one batch), one rescue pass when it fails every URL, then assembly.

use tokio::time::Instant;

use super::{Pending, Pipeline, Row};
use crate::cache::{CachedPage, NewEntry};
use crate::context::TargetUrl;
use crate::gates::{DenyReason, Verdict};
use crate::vendors::{Admitted, Backend, HopGate, Page, VendorFailure};

type Fetched = Result<Page, VendorFailure>;

/// Characters of the configured backend's error kept on rescued rows.
const BACKEND_ERROR_CHARS: usize = 300;

impl Pipeline<'_> {
    /// Fetch and assemble every pending item; rows come back with their input index.
    pub(super) async fn fetch_and_assemble(
        &self,
        pending: Vec<Pending>,
        limit: usize,
    ) -> Vec<(usize, Row)> {
        let primary = &self.rt.backends.extract;
        // E5: every gate has already run; a hit only skips the backend call.
        let mut rows = Vec::new();
        let mut misses = Vec::new();
        for mut p in pending {
            let lookup = self
                .rt
                .cache
                .lookup(&p.admitted.target.normalized, primary.name());
            p.cache = lookup.outcome.code();
            self.metrics
                .cache_lookups
                .with_label_values(&[p.cache])
                .inc();
            match lookup.entry {
                Some(entry) => rows.push((p.index, self.cached_row(&p, entry, primary, limit))),
                None => misses.push(p),
            }
        }
        if misses.is_empty() {
            return rows;
        }
        let results = self.fetch_with(primary, &misses).await;
        let every_url_failed = results
            .iter()
            .all(|r| matches!(r, Err(f) if !f.is_gate_refusal()));
        if every_url_failed && !self.rt.backends.rescue.is_empty() {
            rows.extend(self.rescue(&misses, results, limit).await);
            return rows;
        }
        rows.extend(
            misses
                .iter()
                .zip(results)
                .map(|(p, r)| (p.index, self.finish(p, r, primary, limit))),
        );
        rows
    }

    /// E7 over a cached page: the hit is visible (`cached`, `cache_age_s`).
    fn cached_row(
        &self,
        pending: &Pending,
        entry: CachedPage,
        backend: &Backend,
        limit: usize,
    ) -> Row {
        let age = entry.age_secs();
        let url = if entry.final_url.is_empty() {
            entry.url.clone()
        } else {
            entry.final_url.clone()
        };
        let page = Page {
            url,
            title: entry.title,
            content: entry.content,
            status: if entry.status == 0 { 200 } else { entry.status },
            content_type: None,
            textual: true,
        };
        let mut row = self.assemble_row(page, limit, backend.name());
        row.cached = true;
        row.cache_age_s = Some(age);
        self.log_row(pending, &row, backend);
        row
    }

    /// One batch through `backend`: the gate's own fetcher item by item (each hop re-gated),
    /// a vendor in one call (each final URL re-gated).
    async fn fetch_with(&self, backend: &Backend, pending: &[Pending]) -> Vec<Fetched> {
        let started = Instant::now();
        let results = match backend {
            Backend::Direct(direct) => {
                let hops = PortedHops { pipeline: self };
                futures_util::future::join_all(pending.iter().map(|p| async {
                    let port = p.admitted.target.port().unwrap_or(80);
                    self.check_port(port).map_err(VendorFailure::Refused)?;
                    direct.fetch(p.admitted.clone(), &hops).await
                }))
                .await
            }
            vendor => {
                let urls: Vec<String> = pending
                    .iter()
                    .map(|p| p.admitted.target.normalized.clone())
                    .collect();
                let pages = vendor.extract(&urls).await;
                futures_util::future::join_all(
                    pages
                        .into_iter()
                        .zip(pending)
                        .map(|(r, p)| self.regate_final_url(r, p)),
                )
                .await
            }
        };
        for r in &results {
            self.observe_vendor(backend, r.as_ref().ok().map(|p| p.status), started);
        }
        results
    }

    /// A vendor reports where it ended up (after its own redirects): that URL goes through
    /// E1, E2 and E4 too, so a vendor cannot launder a refused target.
    async fn regate_final_url(&self, result: Fetched, pending: &Pending) -> Fetched {
        match result {
            Ok(page) if page.url != pending.admitted.target.normalized => {
                match self.admit(&page.url).await {
                    Ok(_) => Ok(page),
                    Err(reason) => Err(VendorFailure::Refused(reason)),
                }
            }
            other => other,
        }
    }

    /// The configured backend failed every URL: try the rescue backends in order; the first
    /// that serves any URL wins. Rescued rows are marked and never cached; exhausted rescue
    /// keeps the original errors with a suffix naming the rescue failure.
    async fn rescue(
        &self,
        pending: &[Pending],
        original: Vec<Fetched>,
        limit: usize,
    ) -> Vec<(usize, Row)> {
        let primary = &self.rt.backends.extract;
        let original_error = original
            .iter()
            .find_map(|r| r.as_ref().err().map(|f| f.to_string()))
            .unwrap_or_else(|| "extract failed".into());
        let mut last_error = String::from("unknown");
        for backend in &self.rt.backends.rescue {
            let results = self.fetch_with(backend, pending).await;
            if results.iter().any(Result::is_ok) {
                self.count_rescue(primary, backend, "served");
                return pending
                    .iter()
                    .zip(results.into_iter().zip(original.iter()))
                    .map(|(p, (rescued, first))| {
                        let row = match (rescued, first) {
                            (Ok(page), _) => {
                                let mut row = self.finish_uncached(p, Ok(page), backend, limit);
                                row.rescued_from = Some(primary.name().to_string());
                                row.backend_error = Some(
                                    original_error.chars().take(BACKEND_ERROR_CHARS).collect(),
                                );
                                row
                            }
                            (Err(_), first) => self.finish(p, first.clone(), primary, limit),
                        };
                        (p.index, row)
                    })
                    .collect();
            }
            self.count_rescue(primary, backend, "failed");
            if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
                last_error = e.to_string();
            }
        }
        let names: Vec<&str> = self.rt.backends.rescue.iter().map(Backend::name).collect();
        pending
            .iter()
            .zip(original)
            .map(|(p, r)| {
                let mut row = self.finish(p, r, primary, limit);
                if let Some(error) = row.error.as_mut() {
                    error.push_str(&format!(
                        " (rescue via {} also failed: {last_error})",
                        names.join(", ")
                    ));
                }
                (p.index, row)
            })
            .collect()
    }

    /// E7 for one item from the configured backend; a successful page is written to the
    /// shared cache in the background (an fsync must not hold the response).
    fn finish(&self, pending: &Pending, result: Fetched, backend: &Backend, limit: usize) -> Row {
        if let (Ok(page), false) = (&result, reaches_internal_address(pending)) {
            let entry = NewEntry {
                url: pending.admitted.target.normalized.clone(),
                final_url: page.url.clone(),
                provider: backend.name().to_string(),
                title: page.title.clone(),
                content: page.content.clone(),
                status: page.status,
                textual: page.textual,
                rescued: false,
            };
            let cache = self.rt.cache.clone();
            let writes = self.metrics.cache_writes.clone();
            tokio::spawn(async move {
                let outcome = match cache.put_async(entry).await {
                    Ok(()) => "stored",
                    Err(reason) => reason.code(),
                };
                writes.with_label_values(&[outcome]).inc();
            });
        }
        self.finish_uncached(pending, result, backend, limit)
    }

    /// E7 for one item, and its decision line.
    fn finish_uncached(
        &self,
        pending: &Pending,
        result: Fetched,
        backend: &Backend,
        limit: usize,
    ) -> Row {
        let target = &pending.admitted.target;
        let row = match result {
            Ok(page) => self.assemble_row(page, limit, backend.name()),
            Err(failure) => {
                self.count_outcome(failure.code());
                Row::failed(&target.normalized, &failure, backend)
            }
        };
        self.log_row(pending, &row, backend);
        row
    }

    /// The decision line of an item that reached E5/E6.
    fn log_row(&self, pending: &Pending, row: &Row, backend: &Backend) {
        let (verdict, code) = match row.code {
            Some(code) => ("deny", code),
            None => ("allow", "ok"),
        };
        self.log_decision(
            &pending.admitted.target,
            "vendor",
            verdict,
            code,
            Some(backend.name()),
            row.upstream_status,
            pending.cache,
            pending.started,
        );
    }

    /// `egress.ports` for the gate's own connections when the policy sets it, counted like the
    /// other gates: the same `port_not_allowed` refusal as a CONNECT to that port.
    fn check_port(&self, port: u16) -> Result<(), DenyReason> {
        let egress = &self.rt.policy.egress;
        if !egress.ports_explicit {
            return Ok(());
        }
        if egress.ports.contains(&port) {
            self.record("port", &Verdict::Allow);
            return Ok(());
        }
        let reason = DenyReason::PortNotAllowed { port };
        self.record("port", &Verdict::Deny(reason.clone()));
        Err(reason)
    }

    fn count_rescue(&self, from: &Backend, to: &Backend, outcome: &str) {
        self.metrics
            .rescues
            .with_label_values(&[from.name(), to.name(), outcome])
            .inc();
    }
}

/// The hop gate of the `direct` backend: the port allow-list first (before any DNS query),
/// then the pipeline's E1, E2 and E4 like every hop.
struct PortedHops<'p, 'a> {
    pipeline: &'p Pipeline<'a>,
}

impl HopGate for PortedHops<'_, '_> {
    async fn admit(&self, url: &str) -> Result<Admitted, DenyReason> {
        if let Some(port) = TargetUrl::new(url).port() {
            self.pipeline.check_port(port)?;
        }
        self.pipeline.admit(url).await
    }
}

/// Whether any checked address of the item is outside public unicast space (it was let
/// through by an explicit `egress.allowCIDRs` exception).
fn reaches_internal_address(pending: &Pending) -> bool {
    use crate::gates::ip_guard::{AddrClass, classify_addr};
    pending
        .admitted
        .addrs
        .iter()
        .any(|ip| classify_addr(*ip) != AddrClass::Public)
}

//! E5 + E6 + E7 for the items that passed the gates: the shared cache, the configured
//! backend (one batch), one rescue pass when it fails every URL, then assembly.
//!
//! Rescue follows Hermes: it runs when every row of the batch failed; rows refused by a gate
//! (a redirect hop or a vendor's final URL) are never rescued and keep their refusal; the
//! rescue entries of `web.rescue` are tried in order (the keyless ring pinned at the failed
//! backend) and the first that serves any row wins. Rescued rows are never cached.

use tokio::time::Instant;

use super::{Pending, Pipeline, Row};
use crate::judge::admit::{self, Listener};
use crate::judge::gates::DenyReason;
use crate::web::cache::{CacheOutcome, CachedPage, Lookup, NewEntry, NoCacheReason};
use crate::web::vendors::html::Scope;
use crate::web::vendors::keyless::Start;
use crate::web::vendors::{Admitted, Backend, Hop, HopGate, Page, VendorFailure};

type Fetched = Result<Page, VendorFailure>;

/// Characters of the configured backend's error kept on rescued rows.
pub(super) const BACKEND_ERROR_CHARS: usize = 300;

/// Appended to the configured backend's error when every rescue entry failed too: Hermes'
/// `(keyless rescue also failed: ...)` for the ring alone, else the entries by name.
pub(super) fn rescue_failed_suffix(names: &[&str], last_error: &str) -> String {
    if names == ["keyless"] {
        format!(" (keyless rescue also failed: {last_error})")
    } else {
        format!(
            " (rescue via {} also failed: {last_error})",
            names.join(", ")
        )
    }
}

impl Pipeline<'_> {
    /// Fetch and assemble every pending item; rows come back with their input index.
    pub(super) async fn fetch_and_assemble(
        &self,
        pending: Vec<Pending>,
        limit: usize,
    ) -> Vec<(usize, Row)> {
        let primary = &self.web.backends.extract;
        // E5: every gate has already run; a hit only skips the backend call.
        let mut rows = Vec::new();
        let mut misses = Vec::new();
        for mut p in pending {
            let mut lookup = self
                .web
                .cache
                .lookup(&p.admitted.target.normalized, &self.cache_provider(primary));
            // A stored hop the current policy refuses: not served; a fresh fetch re-gates
            // every hop of the page as it is now.
            if let Some(Err(reason)) = lookup.entry.as_ref().map(|e| self.readmit_hops(e)) {
                lookup = Lookup::without(CacheOutcome::Bypass(reason));
            }
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
        let results = self.fetch_with(primary, &misses, Start::Cursor).await;
        let every_url_failed = results.iter().all(Result::is_err);
        let any_rescuable = results
            .iter()
            .any(|r| matches!(r, Err(f) if !f.is_gate_refusal()));
        if every_url_failed && any_rescuable && self.rescuers(primary).next().is_some() {
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

    /// The provider part of a cache key: the whole page and the main content of the same URL
    /// are different entries (`direct+full` beside `direct`).
    fn cache_provider(&self, backend: &Backend) -> String {
        match (backend, self.scope) {
            (Backend::Direct(_), Scope::Full) => format!("{}+full", backend.name()),
            _ => backend.name().to_string(),
        }
    }

    /// Re-admit every stored hop of a hit under the current policy (E1, E2's checks that need
    /// no DNS, E4): a page cached through a redirect to a host blocklisted since is not served.
    fn readmit_hops(&self, entry: &CachedPage) -> Result<(), NoCacheReason> {
        for hop in &entry.hops {
            let target = crate::base::target_url::TargetUrl::new(hop);
            if admit::stored_hop(self.rules, self.metrics, &target).is_err() {
                return Err(NoCacheReason::RefusedHop);
            }
        }
        Ok(())
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
            via: None,
            hops: Vec::new(),
        };
        let mut row = self.assemble_row(page, limit, backend.name());
        row.cached = true;
        row.cache_age_s = Some(age);
        self.log_row(pending, &row, backend);
        row
    }

    /// One batch through `backend`: the gate's own fetcher item by item (each hop re-gated),
    /// a vendor in one call (each final URL re-gated); the ring walks from `start`.
    async fn fetch_with(
        &self,
        backend: &Backend,
        pending: &[Pending],
        start: Start,
    ) -> Vec<Fetched> {
        let started = Instant::now();
        let results = match backend {
            Backend::Direct(direct) => {
                let hops = PortedHops { pipeline: self };
                futures_util::future::join_all(pending.iter().map(|p| async {
                    let port = p.admitted.target.port().unwrap_or(80);
                    self.check_port(port).map_err(VendorFailure::Refused)?;
                    self.check_loop(&p.admitted.addrs, port)
                        .map_err(VendorFailure::Refused)?;
                    direct.fetch(p.admitted.clone(), &hops, self.scope).await
                }))
                .await
            }
            vendor => {
                let urls: Vec<String> = pending
                    .iter()
                    .map(|p| p.admitted.target.normalized.clone())
                    .collect();
                let pages = match vendor {
                    Backend::Ring(ring) => ring.extract(start, &urls).await,
                    other => other.extract(&urls).await,
                };
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
            Ok(mut page) if page.url != pending.admitted.target.normalized => {
                match self.admit_as(Listener::Recheck, &page.url).await {
                    Ok(admitted) => {
                        page.hops.push(Hop {
                            url: admitted.target.normalized,
                            addrs: admitted.addrs,
                        });
                        Ok(page)
                    }
                    Err(reason) => Err(VendorFailure::Refused(reason)),
                }
            }
            other => other,
        }
    }

    /// The rescue entries for `primary`: every entry but the failed backend itself.
    fn rescuers<'b>(&'b self, primary: &'b Backend) -> impl Iterator<Item = &'b Backend> {
        self.web
            .backends
            .rescue
            .iter()
            .filter(move |b| b.capabilities().extract && b.name() != primary.name())
    }

    /// The configured backend failed every URL: try the rescue entries in order on the rows no
    /// gate refused; the first that serves any of them wins. Rescued rows are marked and never
    /// cached; exhausted rescue keeps the original errors with a suffix naming the failure.
    async fn rescue(
        &self,
        pending: &[Pending],
        original: Vec<Fetched>,
        limit: usize,
    ) -> Vec<(usize, Row)> {
        let primary = &self.web.backends.extract;
        // Rows a gate refused keep their refusal: a rescue never re-asks for a blocked URL.
        let (retry, refused): (Vec<_>, Vec<_>) = pending
            .iter()
            .zip(original)
            .partition(|(_, r)| !matches!(r, Err(f) if f.is_gate_refusal()));
        let mut rows: Vec<(usize, Row)> = refused
            .into_iter()
            .map(|(p, r)| (p.index, self.finish(p, r, primary, limit)))
            .collect();
        let (retry, original): (Vec<Pending>, Vec<Fetched>) =
            retry.into_iter().map(|(p, r)| (p.clone(), r)).unzip();
        let original_error = original
            .iter()
            .find_map(|r| r.as_ref().err().map(|f| f.to_string()))
            .unwrap_or_else(|| "extract failed".into());
        let mut last_error = String::from("unknown");
        let rescuers: Vec<&Backend> = self.rescuers(primary).collect();
        for backend in &rescuers {
            let results = self
                .fetch_with(backend, &retry, Start::rescuing(primary))
                .await;
            if results.iter().any(Result::is_ok) {
                self.count_rescue_kind("extract", primary, backend, "served");
                rows.extend(retry.iter().zip(results.into_iter().zip(original)).map(
                    |(p, (rescued, first))| {
                        let row = match (rescued, first) {
                            (Ok(page), _) => {
                                let mut row = self.finish_uncached(p, Ok(page), backend, limit);
                                row.rescued_from = Some(primary.name().to_string());
                                row.backend_error = Some(
                                    original_error.chars().take(BACKEND_ERROR_CHARS).collect(),
                                );
                                row
                            }
                            (Err(_), first) => self.finish(p, first, primary, limit),
                        };
                        (p.index, row)
                    },
                ));
                return rows;
            }
            self.count_rescue_kind("extract", primary, backend, "failed");
            if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
                last_error = e.to_string();
            }
        }
        let names: Vec<&str> = rescuers.iter().map(|b| b.name()).collect();
        let suffix = rescue_failed_suffix(&names, &last_error);
        rows.extend(retry.iter().zip(original).map(|(p, r)| {
            let mut row = self.finish(p, r, primary, limit);
            if let Some(error) = row.error.as_mut() {
                error.push_str(&suffix);
            }
            (p.index, row)
        }));
        rows
    }

    /// E7 for one item from the configured backend; a successful page is written to the
    /// shared cache in the background (an fsync must not hold the response).
    fn finish(&self, pending: &Pending, result: Fetched, backend: &Backend, limit: usize) -> Row {
        if let Ok(page) = &result
            && !reaches_internal_address(pending, page)
        {
            let entry = NewEntry {
                url: pending.admitted.target.normalized.clone(),
                final_url: page.url.clone(),
                hops: page.hops.iter().map(|hop| hop.url.clone()).collect(),
                provider: self.cache_provider(backend),
                title: page.title.clone(),
                content: page.content.clone(),
                status: page.status,
                textual: page.textual,
                rescued: false,
            };
            let cache = self.web.cache.clone();
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
            Ok(page) => {
                let by = page.via.map_or(backend.name(), |member| member.name());
                self.assemble_row(page, limit, by)
            }
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

    /// `egress.ports` for the gate's own fetch (`admit`'s `Fetch` row: when the policy sets it).
    fn check_port(&self, port: u16) -> Result<(), DenyReason> {
        admit::port(self.rules, self.metrics, Listener::Fetch, port).map_err(|r| r.reason)
    }

    /// The gate's own fetch never dials one of the gate's listeners.
    fn check_loop(&self, addrs: &[std::net::IpAddr], port: u16) -> Result<(), DenyReason> {
        match self.own {
            Some(own) => admit::no_loop(self.metrics, own, addrs, port).map_err(|r| r.reason),
            None => Ok(()),
        }
    }

    /// Count a rescue of an `extract` or `search` call.
    pub(super) fn count_rescue_kind(
        &self,
        what: &str,
        from: &Backend,
        to: &Backend,
        outcome: &str,
    ) {
        let counter = if what == "search" {
            &self.metrics.search_rescues
        } else {
            &self.metrics.rescues
        };
        counter
            .with_label_values(&[from.name(), to.name(), outcome])
            .inc();
    }
}

/// The hop gate of the `direct` backend: `admit`'s `Fetch` row (E1, the port list when set,
/// E2, E4) on every hop.
struct PortedHops<'p, 'a> {
    pipeline: &'p Pipeline<'a>,
}

impl HopGate for PortedHops<'_, '_> {
    async fn admit(&self, url: &str) -> Result<Admitted, DenyReason> {
        let admitted = self.pipeline.admit_as(Listener::Fetch, url).await?;
        let port = admitted.target.port().unwrap_or(80);
        self.pipeline.check_loop(&admitted.addrs, port)?;
        Ok(admitted)
    }
}

/// Whether any checked address of the item or of a hop of its page is outside public unicast
/// space (let through by an explicit `egress.allowCIDRs` exception). Such a page is never
/// stored: the shared volume outlives the exception, and a policy without it must not read
/// the internal page back.
fn reaches_internal_address(pending: &Pending, page: &Page) -> bool {
    use crate::judge::gates::ip_guard::{AddrClass, classify_addr};
    pending
        .admitted
        .addrs
        .iter()
        .chain(page.hops.iter().flat_map(|hop| &hop.addrs))
        .any(|ip| classify_addr(*ip) != AddrClass::Public)
}

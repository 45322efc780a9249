//! Live policy reload: the file (a ConfigMap mount swaps a symlink) and the blocklist's gate
//! files are fingerprinted on an interval and on SIGHUP; a change builds a new runtime and
//! swaps it in. An invalid new policy is logged and counted, and the last good one stays.
//!
//! Every file read of a reload (the fingerprint, the policy, its rule, blocklist and key
//! files) runs on a blocking thread, never on the runtime thread that runs the accept loops,
//! and under [`RELOAD_TIMEOUT`]: a FIFO in a file's place is refused at open
//! ([`crate::policy::file`]), and a read that hangs (a network volume gone quiet) is given up
//! on as a failed reload while every listener keeps answering. While a hung read holds its
//! thread, no second one is started.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;

use crate::base::clock::now_secs_i64;
use crate::live::runtime::Runtime;
use crate::live::state::GateState;
use crate::policy::Policy;
use crate::policy::file::read_regular;

/// How long one check or reload may take before it counts as failed
/// (`fleetgate_policy_reloads_total{result="timeout"}`).
pub(crate) const RELOAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Fingerprint of everything a policy load reads: the policy bytes (by their sha256) and the
/// gate blocklist files. Blocking: call it off the runtime threads.
pub(crate) fn fingerprint(policy_sha256: &str, shared_files: &[PathBuf]) -> String {
    let mut h = Sha256::new();
    h.update(policy_sha256.as_bytes());
    for path in shared_files {
        h.update(path.as_os_str().as_encoded_bytes());
        match read_regular(path) {
            Ok(bytes) => {
                h.update(b"\x01");
                h.update(Sha256::digest(&bytes));
            }
            Err(e) => h.update(format!("\x00{:?}", e.kind()).as_bytes()),
        }
    }
    hex::encode(h.finalize())
}

/// Poll `path` every `interval` (and on SIGHUP) and swap in valid changes.
///
/// The starting fingerprint is that of the running policy's own bytes, so an edit made between
/// the first load and the first poll is still seen.
pub(crate) async fn poll_policy_file(gate: Arc<GateState>, path: PathBuf, interval: Duration) {
    poll_with_timeout(gate, path, interval, RELOAD_TIMEOUT).await;
}

/// [`poll_policy_file`] with a chosen limit on each check and reload.
pub(crate) async fn poll_with_timeout(
    gate: Arc<GateState>,
    path: PathBuf,
    interval: Duration,
    limit: Duration,
) {
    let mut last = {
        let rt = gate.runtime.load_full();
        let shared = rt.policy.blocklist.shared_files.clone();
        let sha = rt.policy.sha256.clone();
        let first = tokio::task::spawn_blocking(move || fingerprint(&sha, &shared));
        // Not known in time: the first check then reloads whatever the files hold.
        match tokio::time::timeout(limit, first).await {
            Ok(Ok(f)) => f,
            Ok(Err(_)) | Err(_) => String::new(),
        }
    };
    let mut hup = hangup_signal();
    // A check or reload that outlived its limit and still holds a blocking thread.
    let mut hung: Option<JoinHandle<()>> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = recv(&mut hup) => tracing::info!("SIGHUP: checking the policy"),
        }
        if hung.as_ref().is_some_and(|h| !h.is_finished()) {
            continue;
        }
        hung = None;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let work = {
            let (gate, path, last) = (Arc::clone(&gate), path.clone(), last.clone());
            tokio::task::spawn_blocking(move || {
                let now = current_fingerprint(&gate, &path);
                if now != last {
                    reload_once(&gate, &path);
                }
                let _ = tx.send(now);
            })
        };
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(now)) => last = now,
            Ok(Err(_)) => failed(&path, "the reload task failed"),
            Err(_) => {
                failed(&path, "the policy files did not answer in time");
                gate.metrics
                    .policy_reloads
                    .with_label_values(&["timeout"])
                    .inc();
                hung = Some(work);
            }
        }
    }
}

fn failed(path: &Path, why: &str) {
    tracing::error!(
        error = why,
        path = %path.display(),
        "policy reload failed; keeping the last good policy"
    );
}

fn current_fingerprint(gate: &GateState, path: &Path) -> String {
    let policy_sha = match read_regular(path) {
        Ok(bytes) => hex::encode(Sha256::digest(&bytes)),
        Err(e) => format!("unreadable: {:?} {e}", e.kind()),
    };
    let rt = gate.runtime.load();
    fingerprint(&policy_sha, &rt.policy.blocklist.shared_files)
}

/// Try one reload; keep the running policy on any failure. Blocking (it reads the policy and
/// the files it names): call it off the runtime threads.
pub(crate) fn reload_once(gate: &GateState, path: &Path) -> bool {
    let result = Policy::load(path)
        .map_err(|e| e.to_string())
        .and_then(|p| Runtime::build(p).map_err(|e| e.to_string()));
    match result {
        Ok(rt) => {
            let old = gate.runtime.load();
            if old.policy.listen != rt.policy.listen {
                tracing::warn!(
                    "listener addresses changed in the policy; they take effect on restart"
                );
            }
            for w in &rt.warnings {
                tracing::warn!(warning = %w, "policy loaded with a warning");
            }
            // In force before it is announced: a request sent on reading the line below (the
            // reload runs on its own thread) already meets the new policy.
            let (sha256, rules) = (rt.policy.sha256.clone(), rt.blocklist.len());
            gate.runtime.store(rt);
            gate.metrics.blocklist_rules.set(rules as i64);
            gate.metrics.policy_loaded_at.set(now_secs_i64());
            gate.metrics.policy_reloads.with_label_values(&["ok"]).inc();
            tracing::info!(sha256 = %sha256, rules, "policy reloaded");
            true
        }
        Err(e) => {
            tracing::error!(error = %e, path = %path.display(), "policy reload refused; keeping the last good policy");
            gate.metrics
                .policy_reloads
                .with_label_values(&["invalid"])
                .inc();
            false
        }
    }
}

type Hangup = Option<tokio::signal::unix::Signal>;

fn hangup_signal() -> Hangup {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()
}

async fn recv(sig: &mut Hangup) {
    match sig {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}

#[cfg(test)]
mod tests;

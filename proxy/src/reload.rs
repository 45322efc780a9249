//! Live policy reload: the file (a ConfigMap mount swaps a symlink) and the blocklist's gate
//! files are fingerprinted on an interval and on SIGHUP; a change builds a new runtime and
//! swaps it in. An invalid new policy is logged and counted, and the last good one stays.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::clock::now_secs_i64;
use crate::policy::Policy;
use crate::runtime::Runtime;
use crate::state::GateState;

/// Fingerprint of everything a policy load reads: the policy bytes (by their sha256) and the
/// gate blocklist files.
pub fn fingerprint(policy_sha256: &str, shared_files: &[PathBuf]) -> String {
    let mut h = Sha256::new();
    h.update(policy_sha256.as_bytes());
    for path in shared_files {
        h.update(path.as_os_str().as_encoded_bytes());
        match std::fs::read(path) {
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
pub async fn poll_policy_file(gate: Arc<GateState>, path: PathBuf, interval: Duration) {
    let mut last = {
        let rt = gate.runtime.load();
        fingerprint(&rt.policy.sha256, &rt.policy.blocklist.shared_files)
    };
    let mut hup = hangup_signal();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = recv(&mut hup) => tracing::info!("SIGHUP: checking the policy"),
        }
        let now = current_fingerprint(&gate, &path);
        if now == last {
            continue;
        }
        last = now;
        reload_once(&gate, &path);
    }
}

fn current_fingerprint(gate: &GateState, path: &Path) -> String {
    let policy_sha = match std::fs::read(path) {
        Ok(bytes) => hex::encode(Sha256::digest(&bytes)),
        Err(e) => format!("unreadable: {:?}", e.kind()),
    };
    let rt = gate.runtime.load();
    fingerprint(&policy_sha, &rt.policy.blocklist.shared_files)
}

/// Try one reload; keep the running policy on any failure.
pub fn reload_once(gate: &GateState, path: &Path) -> bool {
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
            tracing::info!(sha256 = %rt.policy.sha256, rules = rt.blocklist.len(), "policy reloaded");
            gate.metrics.blocklist_rules.set(rt.blocklist.len() as i64);
            gate.metrics.policy_loaded_at.set(now_secs_i64());
            gate.metrics.policy_reloads.with_label_values(&["ok"]).inc();
            gate.runtime.store(rt);
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

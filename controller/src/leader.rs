//! Leader election: one replica reconciles and writes; the others keep their reflectors warm,
//! serve the webhook and take over when the lease runs out.
//!
//! The lease is a `coordination.k8s.io/v1` Lease kept by the `kube-lease-manager` crate rather
//! than a hand-written loop: it takes a free lease with server-side apply, so two replicas can
//! never both take it, renews it `grace` seconds before it runs out, and releases it on a clean
//! shutdown so a rolling update hands over at once.
//!
//! Holding the lease is necessary but not enough to write. A replica that was paused,
//! partitioned or starved may still believe it leads after another replica took over, and the
//! crate learns of that only at its next renewal. So every write first passes
//! [`Leadership::confirm`]: this replica must have read the Lease naming it as the holder with
//! a renewal that cannot have run out yet (`renewTime + leaseDurationSeconds - grace`, the
//! grace being the clock skew tolerated between nodes). A confirmation is reused until that
//! instant, so a leader reads the Lease about once per renewal while it writes, and not at
//! all while the fleet is steady. A lease held by another replica, or one that cannot be read,
//! stops the write: the controller fails closed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures_util::Stream;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerError, LeaseParams};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::metrics::Metrics;

#[cfg(test)]
mod tests;

/// How long a clean shutdown waits for the lease to be released.
const RELEASE_DEADLINE: Duration = Duration::from_secs(5);

/// Which Lease to hold and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Name of the Lease (the chart uses the controller's name).
    pub name: String,
    /// Namespace of the Lease (the release namespace).
    pub namespace: String,
    /// This replica's identity, unique among the replicas (the pod name).
    pub identity: String,
    /// How long a renewal keeps the lease (`leaseDurationSeconds`).
    pub duration: Duration,
    /// How long before the lease runs out the holder renews it; also the clock skew
    /// tolerated between nodes when a write is confirmed.
    pub grace: Duration,
}

/// Why a lease configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LeaseConfigError {
    /// Durations are whole seconds, at least one, and the grace is shorter than the duration.
    #[error(
        "the lease duration ({duration} s) must be a whole number of seconds above the grace ({grace} s), which must be at least 1 s"
    )]
    Durations {
        /// The lease duration in seconds.
        duration: u64,
        /// The grace in seconds.
        grace: u64,
    },
    /// The identity is empty.
    #[error("the lease identity must not be empty (set POD_NAME or --instance)")]
    Identity,
}

/// Why this replica may not write now.
#[derive(Debug, thiserror::Error)]
pub enum Fenced {
    /// The election says another replica (or none) holds the lease.
    #[error("this replica does not hold lease {lease}")]
    NotLeader {
        /// The Lease name.
        lease: String,
    },
    /// The Lease names another holder.
    #[error("lease {lease} is held by {holder:?}, not by this replica")]
    Deposed {
        /// The Lease name.
        lease: String,
        /// The holder it names (empty when released).
        holder: String,
    },
    /// The Lease could not be read, or its last renewal may have run out.
    #[error("failed to confirm lease {lease}: {why}")]
    Unconfirmed {
        /// The Lease name.
        lease: String,
        /// Why.
        why: String,
    },
}

/// Whether this replica leads, and the check every write passes first.
#[derive(Clone)]
pub struct Leadership {
    inner: Arc<Inner>,
}

struct Inner {
    /// `None`: no election, this replica always leads (one replica, tests, `--no-leader-elect`).
    elected: Option<Elected>,
    leading: watch::Receiver<bool>,
    /// Keeps `leading` open when nothing else sends on it.
    _sender: Option<watch::Sender<bool>>,
    metrics: Option<Metrics>,
}

struct Elected {
    api: Api<Lease>,
    cfg: LeaseConfig,
    /// Until when a write needs no fresh read of the Lease.
    confirmed_until: Mutex<Option<SystemTime>>,
}

/// The running election; [`Election::step_down`] releases the lease.
#[derive(Debug)]
pub struct Election {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("elected", &self.inner.elected.as_ref().map(|e| &e.cfg))
            .field("leading", &self.is_leader())
            .finish()
    }
}

// === impl LeaseConfig ===

impl LeaseConfig {
    /// Check the durations and the identity.
    pub fn validate(&self) -> Result<(), LeaseConfigError> {
        let (duration, grace) = (self.duration.as_secs(), self.grace.as_secs());
        let whole = self.duration.subsec_nanos() == 0 && self.grace.subsec_nanos() == 0;
        if !whole || grace == 0 || grace >= duration || i32::try_from(duration).is_err() {
            return Err(LeaseConfigError::Durations { duration, grace });
        }
        if self.identity.trim().is_empty() {
            return Err(LeaseConfigError::Identity);
        }
        Ok(())
    }
}

// === impl Fenced ===

impl Fenced {
    /// The `reason` label of `fleetgate_controller_fenced_writes_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotLeader { .. } => "not_leader",
            Self::Deposed { .. } => "deposed",
            Self::Unconfirmed { .. } => "unconfirmed",
        }
    }
}

// === impl Leadership ===

impl Leadership {
    /// No election: this replica always leads. For one replica and for tests.
    pub fn sole(metrics: Option<Metrics>) -> Self {
        let (sender, leading) = watch::channel(true);
        if let Some(m) = &metrics {
            m.leader.set(1);
        }
        Self {
            inner: Arc::new(Inner {
                elected: None,
                leading,
                _sender: Some(sender),
                metrics,
            }),
        }
    }

    /// Join the election for `cfg`'s Lease (created when missing) and follow it from a task.
    pub async fn elect(
        client: Client,
        cfg: LeaseConfig,
        metrics: Option<Metrics>,
    ) -> Result<(Self, Election), LeaseManagerError> {
        let params = LeaseParams::new(
            cfg.identity.clone(),
            cfg.duration.as_secs(),
            cfg.grace.as_secs(),
        )
        .with_field_manager(format!("fleetgate-controller-lease-{}", cfg.identity));
        let manager = LeaseManager::new(
            client.clone(),
            cfg.name.clone(),
            cfg.namespace.clone(),
            params,
            LeaseCreateMode::AutoCreate,
        )
        .await?;
        let (sender, leading) = watch::channel(false);
        if let Some(m) = &metrics {
            m.leader.set(0);
        }
        let leadership = Self {
            inner: Arc::new(Inner {
                elected: Some(Elected {
                    api: Api::namespaced(client, &cfg.namespace),
                    cfg,
                    confirmed_until: Mutex::new(None),
                }),
                leading,
                _sender: None,
                metrics,
            }),
        };
        let (stop, stopped) = oneshot::channel();
        let follower = leadership.clone();
        let task = tokio::spawn(async move {
            let (mut lease, lease_task) = manager.watch().await;
            tokio::pin!(stopped);
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    changed = lease.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        let now = *lease.borrow_and_update();
                        follower.set_leading(&sender, now);
                    }
                }
            }
            follower.set_leading(&sender, false);
            // Closing the channel makes the manager release the lease and end.
            drop(lease);
            match tokio::time::timeout(RELEASE_DEADLINE, lease_task).await {
                Ok(Ok(Ok(_))) => info!("controller.lease_released"),
                Ok(Ok(Err(e))) => warn!(error = %e, "controller.lease_release_failed"),
                Ok(Err(e)) => warn!(error = %e, "controller.lease_release_failed"),
                Err(_) => warn!("controller.lease_release_timed_out"),
            }
        });
        Ok((leadership, Election { stop, task }))
    }

    /// Whether this replica leads now (as far as the election knows).
    pub fn is_leader(&self) -> bool {
        *self.inner.leading.borrow()
    }

    /// Whether an election decides (false: this replica always leads).
    pub fn is_elected(&self) -> bool {
        self.inner.elected.is_some()
    }

    /// Resolves when this replica's leadership changes; `None` when it never will again.
    pub async fn changed(&self) -> Option<bool> {
        let mut rx = self.inner.leading.clone();
        rx.changed().await.ok()?;
        let now = *rx.borrow_and_update();
        Some(now)
    }

    /// One item each time this replica becomes the leader: the controller reconciles every
    /// FleetPolicy then, since as a follower it left them alone.
    pub fn acquisitions(&self) -> impl Stream<Item = ()> + Send + 'static {
        let rx = self.inner.leading.clone();
        futures_util::stream::unfold(rx, |mut rx| async move {
            loop {
                rx.changed().await.ok()?;
                if *rx.borrow_and_update() {
                    return Some(((), rx));
                }
            }
        })
    }

    /// The check before every write: `Ok` only when this replica leads and has read the Lease
    /// naming it, renewed recently enough that no other replica can have taken it since.
    /// Every refusal is counted in `fleetgate_controller_fenced_writes_total`.
    pub async fn confirm(&self) -> Result<(), Fenced> {
        let Some(elected) = &self.inner.elected else {
            return Ok(());
        };
        let checked = self.check(elected).await;
        if let Err(fenced) = &checked {
            if let Some(m) = &self.inner.metrics {
                m.fenced_writes.with_label_values(&[fenced.reason()]).inc();
            }
            warn!(reason = fenced.reason(), error = %fenced, "controller.write_fenced");
        }
        checked
    }

    async fn check(&self, elected: &Elected) -> Result<(), Fenced> {
        let lease = elected.cfg.name.clone();
        if !self.is_leader() {
            return Err(Fenced::NotLeader { lease });
        }
        let now = SystemTime::now();
        let fresh = elected
            .confirmed_until
            .lock()
            .ok()
            .and_then(|until| *until)
            .is_some_and(|until| now < until);
        if fresh {
            return Ok(());
        }
        let read = elected
            .api
            .get(&elected.cfg.name)
            .await
            .map_err(|e| Fenced::Unconfirmed {
                lease: lease.clone(),
                why: e.to_string(),
            })?;
        let spec = read.spec.unwrap_or_default();
        let holder = spec.holder_identity.unwrap_or_default();
        if holder != elected.cfg.identity {
            return Err(Fenced::Deposed { lease, holder });
        }
        let (Some(renewed), Some(seconds)) = (spec.renew_time, spec.lease_duration_seconds) else {
            return Err(Fenced::Unconfirmed {
                lease,
                why: "the lease has no renewTime or leaseDurationSeconds".into(),
            });
        };
        let renewed: SystemTime = renewed.0.into();
        let seconds = u64::try_from(seconds).unwrap_or(0);
        let until = renewed
            .checked_add(Duration::from_secs(seconds))
            .and_then(|t| t.checked_sub(elected.cfg.grace))
            .unwrap_or(SystemTime::UNIX_EPOCH);
        if now >= until {
            return Err(Fenced::Unconfirmed {
                lease,
                why: "its last renewal may have run out".into(),
            });
        }
        if let Ok(mut confirmed) = elected.confirmed_until.lock() {
            *confirmed = Some(until);
        }
        Ok(())
    }

    fn set_leading(&self, sender: &watch::Sender<bool>, now: bool) {
        let before = sender.send_replace(now);
        if before == now {
            return;
        }
        if let Some(elected) = &self.inner.elected
            && let Ok(mut confirmed) = elected.confirmed_until.lock()
        {
            *confirmed = None;
        }
        let lease = self
            .inner
            .elected
            .as_ref()
            .map(|e| e.cfg.name.as_str())
            .unwrap_or_default();
        if let Some(m) = &self.inner.metrics {
            m.leader.set(i64::from(now));
            let change = if now { "acquired" } else { "lost" };
            m.lease_transitions.with_label_values(&[change]).inc();
            if !now {
                m.forget_all_fleets();
            }
        }
        if now {
            info!(lease, "controller.lease_acquired");
        } else {
            warn!(lease, "controller.lease_lost");
        }
    }
}

// === impl Election ===

impl Election {
    /// Leave the election: stop leading at once and release the lease so another replica
    /// takes over without waiting for it to run out.
    pub async fn step_down(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

//! The listeners' threads: one single-threaded runtime per worker, each serving the
//! connections handed to it, with no work stealing between them.
//!
//! A work-stealing runtime wakes an idle worker whenever a task becomes ready on a busy one,
//! so a request's few microseconds of work bounce between cores and pay a cross-CPU wake-up
//! each time (measured in `docs/benchmarks.md`). Here every connection lives on one thread
//! from accept to close: the accept loops run on the first shard (the thread that runs
//! `serve`), and each accepted socket goes to the shard with the fewest open connections, as
//! HAProxy hands an accepted connection to its least loaded thread. A connection placed on
//! another shard is registered with that shard's reactor; everything it spawns (a tunnel's
//! relay, a cache write on the blocking pool) stays on that shard.

use std::future::Future;

use prometheus::{IntGauge, IntGaugeVec, Opts};
use tokio::net::TcpStream;
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The shards a gate serves connections on.
#[derive(Debug)]
pub struct Shards {
    /// Open connections per shard (`fleetgate_shard_connections{shard}`); the first shard is
    /// the runtime that calls [`Shards::spawn`].
    open: Vec<IntGauge>,
    /// The other shards' runtimes, in the order of `open[1..]`.
    handles: Vec<Handle>,
    /// Flipped when the shards are dropped: every other shard's thread then returns.
    exit: watch::Sender<bool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

// === impl Shards ===

impl Shards {
    /// The calling runtime as the only shard.
    #[cfg(test)]
    pub(crate) fn single() -> Self {
        Self::counted_by(&unregistered())
    }

    fn counted_by(gauge: &IntGaugeVec) -> Self {
        Self {
            open: vec![gauge.with_label_values(&["0"])],
            handles: Vec::new(),
            exit: watch::channel(false).0,
            threads: Vec::new(),
        }
    }

    /// The calling runtime and `more` threads, each running a single-threaded runtime.
    pub fn start(more: usize) -> std::io::Result<Self> {
        Self::start_counted(more, &unregistered())
    }

    /// [`Shards::start`], counting each shard's open connections in `gauge`'s `shard` label.
    pub(crate) fn start_counted(more: usize, gauge: &IntGaugeVec) -> std::io::Result<Self> {
        let mut shards = Self::counted_by(gauge);
        for i in 0..more {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            shards.handles.push(rt.handle().clone());
            shards
                .open
                .push(gauge.with_label_values(&[(i + 1).to_string().as_str()]));
            let mut exit = shards.exit.subscribe();
            let thread = std::thread::Builder::new()
                .name(format!("fleetgate-shard-{}", i + 1))
                .spawn(move || {
                    rt.block_on(async move {
                        let _ = exit.wait_for(|stop| *stop).await;
                    });
                    // What a drained gate still holds open is cut, not waited for.
                    rt.shutdown_background();
                })?;
            shards.threads.push(thread);
        }
        Ok(shards)
    }

    /// Open connections on each shard.
    #[cfg(test)]
    pub(crate) fn open(&self) -> Vec<i64> {
        self.open.iter().map(IntGauge::get).collect()
    }

    /// Serve `stream` with `serve` on the shard with the fewest open connections (the
    /// first of those tied). Called on the first shard's runtime, where accept loops run.
    /// The task, unless the socket could not be handed over (then it is closed).
    pub fn spawn<F, Fut>(&self, stream: TcpStream, serve: F) -> Option<JoinHandle<()>>
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (index, open) = self
            .open
            .iter()
            .enumerate()
            .min_by_key(|(_, n)| n.get())
            .unwrap_or((0, &self.open[0])); // never empty: the calling runtime is a shard
        let held = Open::enter(open);
        if index == 0 {
            return Some(tokio::spawn(async move {
                let _held = held;
                serve(stream).await;
            }));
        }
        // Moved to the other shard's reactor: deregistered here, registered there.
        let std = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "could not hand a connection to another shard");
                return None;
            }
        };
        Some(self.handles[index - 1].spawn(async move {
            let _held = held;
            match TcpStream::from_std(std) {
                Ok(stream) => serve(stream).await,
                Err(e) => {
                    tracing::debug!(error = %e, "could not register a handed-over connection")
                }
            }
        }))
    }
}

impl Drop for Shards {
    fn drop(&mut self) {
        let _ = self.exit.send(true);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One open connection counted on its shard until dropped.
struct Open(IntGauge);

impl Open {
    fn enter(count: &IntGauge) -> Self {
        count.inc();
        Self(count.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A gauge family for shards whose counts nobody scrapes.
fn unregistered() -> IntGaugeVec {
    IntGaugeVec::new(
        Opts::new("fleetgate_shard_connections", "open connections per shard"),
        &["shard"],
    )
    .unwrap_or_else(|_| unreachable!("a valid name and one label"))
}

#[cfg(test)]
mod tests;

//! The extraction pool: the threads that turn fetched pages into markdown.
//!
//! Converting a page is CPU work of unbounded shape, so it never runs on the async workers
//! that serve the listeners: a page that takes seconds must not stall `/live` or the forward
//! proxy. The pool has a fixed number of threads with a known stack size ([`STACK_BYTES`]),
//! started on first use; a job that panics is answered as that job's error and the thread
//! lives on. At most [`QUEUED_PER_THREAD`] jobs per thread wait; the permit of a job is held
//! until its thread is done with it, so a job still running after its caller gave up keeps
//! its place and the queue cannot grow behind it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

/// Stack of every pool thread. The converters' walks are bounded in depth; this is the margin.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) const STACK_BYTES: usize = 8 * 1024 * 1024;

/// Jobs admitted per thread (running or waiting).
const QUEUED_PER_THREAD: usize = 8;

/// Why a job gave no result.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PoolError {
    /// The job panicked; the message is the panic's, if it was a string.
    #[error("the page converter failed: {0}")]
    Panicked(String),
    /// No pool thread could be started.
    #[error("no extraction thread could be started: {0}")]
    Unavailable(String),
}

type Job = Box<dyn FnOnce() + Send>;

struct Pool {
    jobs: Mutex<Sender<Job>>,
    permits: Arc<Semaphore>,
}

static POOL: OnceLock<Result<Pool, String>> = OnceLock::new();

fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
}

fn pool() -> Result<&'static Pool, PoolError> {
    POOL.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let n = threads();
        for i in 0..n {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("fleetgate-extract-{i}"))
                .stack_size(STACK_BYTES)
                .spawn(move || {
                    loop {
                        // A poisoned lock only means another thread panicked while receiving,
                        // which `recv` does not do; take the receiver either way.
                        let job = match rx.lock() {
                            Ok(guard) => guard.recv(),
                            Err(poisoned) => poisoned.into_inner().recv(),
                        };
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                })
                .map_err(|e| e.to_string())?;
        }
        Ok(Pool {
            jobs: Mutex::new(tx),
            permits: Arc::new(Semaphore::new(n * QUEUED_PER_THREAD)),
        })
    })
    .as_ref()
    .map_err(|e| PoolError::Unavailable(e.clone()))
}

/// Run `work` on the pool and await its result. Dropping the future abandons the result, not
/// the work: the job runs to its own end (its deadline bounds it).
pub(crate) async fn run<T, F>(work: F) -> Result<T, PoolError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let pool = pool()?;
    let permit: OwnedSemaphorePermit = pool
        .permits
        .clone()
        .acquire_owned()
        .await
        .map_err(|e| PoolError::Unavailable(e.to_string()))?;
    let (tx, rx) = oneshot::channel();
    let job: Job = Box::new(move || {
        let result = catch_unwind(AssertUnwindSafe(work)).map_err(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_string());
            PoolError::Panicked(message)
        });
        drop(permit);
        let _ = tx.send(result);
    });
    let sent = match pool.jobs.lock() {
        Ok(jobs) => jobs.send(job),
        Err(poisoned) => poisoned.into_inner().send(job),
    };
    sent.map_err(|_| PoolError::Unavailable("the extraction threads have stopped".to_string()))?;
    rx.await
        .map_err(|_| PoolError::Unavailable("the extraction thread ended".to_string()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_job_is_its_own_error_and_the_pool_lives_on() {
        let got = run(|| -> u32 { panic!("boom in the converter") }).await;
        assert_eq!(
            got,
            Err(PoolError::Panicked("boom in the converter".to_string()))
        );
        assert_eq!(run(|| 7u32).await, Ok(7));
    }

    #[tokio::test]
    async fn jobs_run_on_named_pool_threads_not_on_the_async_workers() {
        let name = run(|| std::thread::current().name().map(str::to_string))
            .await
            .expect("job ran");
        assert!(
            name.as_deref()
                .is_some_and(|n| n.starts_with("fleetgate-extract-")),
            "ran on {name:?}"
        );
    }
}

//! Ownership of a server's background tasks: they are aborted when the owning handle drops, so
//! no listener outlives the test that started it.

use tokio::task::JoinHandle;

/// Tasks aborted on drop (an accept loop aborts, and with it the connections it owns).
#[derive(Debug, Default)]
pub(crate) struct BackgroundTasks {
    handles: Vec<JoinHandle<()>>,
}

// === impl BackgroundTasks ===

impl BackgroundTasks {
    /// Spawns `task` on the current runtime and keeps it until this value drops.
    pub(crate) fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.handles.push(tokio::spawn(task));
    }
}

impl Drop for BackgroundTasks {
    fn drop(&mut self) {
        for handle in &self.handles {
            handle.abort();
        }
    }
}

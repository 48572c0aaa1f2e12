//! The connector runtime (DESIGN §3): one small multi-thread tokio runtime per node for the
//! clients that exist only for tokio. Shards never block on it: they hand it work through
//! bounded channels and receive results the same way.
//!
//! The last handle to go shuts the runtime down in the background, so it may be dropped from
//! any thread, including from inside another tokio runtime (a plain drop would panic there).

use std::sync::Arc;

/// Worker threads of the connector runtime: its work waits on the network, not the CPU.
pub const CONNECTOR_THREADS: usize = 2;

struct Owned(Option<tokio::runtime::Runtime>);

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// The runtime, shared by every connector of the node.
#[derive(Clone)]
pub struct ConnectorRuntime {
    owned: Arc<Owned>,
    handle: tokio::runtime::Handle,
}

impl ConnectorRuntime {
    pub fn start() -> std::io::Result<ConnectorRuntime> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(CONNECTOR_THREADS)
            .thread_name("nervix-connector")
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        Ok(ConnectorRuntime {
            owned: Arc::new(Owned(Some(runtime))),
            handle,
        })
    }

    pub fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// Runs `task` on the runtime.
    pub fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        debug_assert!(
            self.owned.0.is_some(),
            "the runtime lives while a handle does"
        );
        self.handle.spawn(task)
    }
}

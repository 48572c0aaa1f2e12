//! The data plane: started domains' graphs running on the shards (DESIGN §3–§5).
//!
//! The control core owns a [`DataPlane`]: it starts the shard executors
//! (`nervix_shards::runtime::ShardSet`), and after every committed catalog change it
//! [`DataPlane::reconcile`]s — builds a [`plan::DomainPlan`] for each started domain whose model
//! changed and deploys it, and stops domains that stopped or vanished. Shards never see NSPL
//! or the catalog; they receive compiled plans.
//!
//! Placement (see `shard::mesh`): every shard runs every started domain's graph; client
//! ingestors, unbranched relays and every sink live on shard 0, where the session listener
//! accepts producers and consumers; a branched relay's frames, and the nodes consuming them,
//! live on the shard their branch key hashes to.

pub mod aggregate;
pub mod change;
pub mod clock;
pub mod connection;
pub mod driver;
pub mod envelope;
pub mod exec;
pub mod frame;
pub mod http;
pub mod in_process;
pub mod kafka;
pub mod logical_bytes;
pub mod observe;
pub mod offer;
pub mod plan;
pub mod poll;
pub mod session;
pub mod shard;
pub mod signaling;
pub mod state_store;
pub mod subscribe;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;

use nervix_shards::runtime::{RuntimeConfig, ShardSet};

use crate::catalog::{Catalog, RunState};
pub use driver::{Command, ShardStats};
/// `--shard-spin-us` default (see `nervix_shards::runtime::RuntimeConfig::spin_before_park_us`),
/// and where shards are pinned ([`CpuPlacement`]; the bench keeps its client off their CPUs).
pub use nervix_shards::runtime::{
    applied_spin_before_park_us, CpuPlacement, DEFAULT_SPIN_BEFORE_PARK_US,
};

/// `--shards` default: cores − 1, at least 1 (DESIGN §3).
pub fn default_shards() -> NonZeroUsize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    NonZeroUsize::new(cores.saturating_sub(1)).unwrap_or(NonZeroUsize::MIN)
}

/// The shard every graph runs on (see the module docs).
pub const GRAPH_SHARD: usize = 0;

/// Why the data plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum DataPlaneError {
    #[error("{0}")]
    Shards(#[from] nervix_shards::runtime::RuntimeError),
    #[error("cannot listen for sessions on {addr}: {reason}")]
    Listen { addr: SocketAddr, reason: String },
    #[error("the shards stopped")]
    Stopped,
    #[error("cannot start the connector runtime or the extension workers: {0}")]
    Connectors(String),
    #[error("{0}")]
    State(#[from] state_store::StateStoreError),
}

/// How the data plane runs.
#[derive(Debug, Clone)]
pub struct DataPlaneConfig {
    pub shards: NonZeroUsize,
    /// Pin shards to CPUs (off in tests and where pinning is refused).
    pub pin: bool,
    /// CPUs, io_uring sizes and spinning (`nervix serve --shard-*`).
    pub tuning: ShardTuning,
    pub session_addr: SocketAddr,
    pub data_dir: PathBuf,
    /// HTTP / HTTPS listeners for endpoint ingestors (port 0 picks a free port).
    pub listeners: http::DataListeners,
    /// The most runtime state (snapshots, offsets) the node stores
    /// ([`state_store::DEFAULT_STATE_MAP_BYTES`]).
    pub state_map_bytes: usize,
}

/// How the shards use their machine; the defaults suit a dedicated host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardTuning {
    /// The CPU of each shard (shard `i` on `cpus[i % len]`); `None` = the default placement.
    pub cpus: Option<Vec<usize>>,
    /// io_uring memory registered per shard (`RuntimeConfig::io_memory_bytes`).
    pub io_memory_bytes: usize,
    /// io_uring entries per ring (`RuntimeConfig::ring_depth`).
    pub ring_depth: usize,
    /// How long a pinned shard spins before it parks (`RuntimeConfig::spin_before_park_us`).
    pub spin_before_park_us: u64,
}

impl Default for ShardTuning {
    fn default() -> Self {
        ShardTuning {
            cpus: None,
            io_memory_bytes: nervix_shards::runtime::DEFAULT_IO_MEMORY_BYTES,
            ring_depth: nervix_shards::runtime::DEFAULT_RING_DEPTH,
            spin_before_park_us: DEFAULT_SPIN_BEFORE_PARK_US,
        }
    }
}

/// The control core's handle on the shards.
pub struct DataPlane {
    shards: ShardSet<Command>,
    session_addr: SocketAddr,
    data_dir: PathBuf,
    /// The bound data listeners (ports resolved).
    listeners: http::DataListeners,
    /// TLS certificates of TLS VHOSTs, by host, shared by every shard's HTTPS listener.
    certs: Arc<nervix_net::http::CertStore>,
    /// The bundle directory and hosts installed for each TLS VHOST.
    installed_bundles: std::sync::Mutex<HashMap<String, (PathBuf, Vec<String>)>>,
    /// Deployed domains: what they run.
    deployed: tokio::sync::Mutex<HashMap<String, Deployed>>,
    /// The clock of each started domain with the START generation it belongs to: a model
    /// change redeploys the domain on the same clock; only a new START makes a new one.
    paces: std::sync::Mutex<HashMap<String, (u64, clock::DomainPace)>>,
    /// Domains whose model cannot run here, with why (reported by DESCRIBE and logs).
    pub failures: std::sync::Mutex<HashMap<String, String>>,
    subscriptions: std::sync::Mutex<HashMap<u64, subscribe::SubscriptionSpec>>,
    next_subscription: std::sync::atomic::AtomicU64,
    /// Runtime state that survives restarts (Kafka OFFSET BY DOMAIN offsets).
    state: Arc<state_store::RuntimeState>,
}

impl DataPlane {
    /// Starts the shards and the session listener on shard [`GRAPH_SHARD`].
    pub fn start(config: DataPlaneConfig) -> Result<DataPlane, DataPlaneError> {
        let mut runtime = RuntimeConfig::with_shards(config.shards);
        runtime.mesh_capacity_messages = shard::mesh::MESH_CHANNEL_MESSAGES;
        runtime.spin_before_park_us = config.tuning.spin_before_park_us;
        runtime.io_memory_bytes = config.tuning.io_memory_bytes;
        runtime.ring_depth = config.tuning.ring_depth;
        if let Some(cpus) = &config.tuning.cpus {
            runtime.cpus = nervix_shards::runtime::CpuPlacement::Pinned(cpus.clone());
        }
        if !config.pin {
            runtime = runtime.unpinned();
        }
        // The listener binds on the shard; its address comes back once it is bound.
        let (bound_tx, bound_rx) = std::sync::mpsc::channel::<Result<SocketAddr, String>>();
        let bound_tx = std::sync::Mutex::new(Some(bound_tx));
        let session_addr = config.session_addr;
        let data_dir = config.data_dir.clone();
        let mut listeners = config.listeners.clone();
        // Every shard binds the same address, so a wildcard port is resolved once, here.
        for addr in [&mut listeners.http_addr, &mut listeners.https_addr]
            .into_iter()
            .flatten()
        {
            if addr.port() == 0 {
                let free = std::net::TcpListener::bind(*addr)
                    .and_then(|l| l.local_addr())
                    .map_err(|e| DataPlaneError::Listen {
                        addr: *addr,
                        reason: e.to_string(),
                    })?;
                *addr = free;
            }
        }
        let certs = nervix_net::http::CertStore::new();
        let connectors = nervix_connectors::runtime::ConnectorRuntime::start()
            .map_err(|e| DataPlaneError::Connectors(e.to_string()))?;
        let shard_connectors = connectors.clone();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let extension = Arc::new(
            nervix_shards::workers::WorkerClass::extension(cores)
                .map_err(|e| DataPlaneError::Connectors(format!("extension workers: {e}")))?,
        );
        let state = state_store::RuntimeState::open(&config.data_dir, config.state_map_bytes)?;
        let services = driver::NodeServices {
            data_dir,
            listeners: listeners.clone(),
            certs: certs.clone(),
            connectors: shard_connectors,
            extension,
            runtime_state: state.clone(),
        };
        let shards = ShardSet::start(runtime, move |ctx| {
            let listen = if ctx.shard == GRAPH_SHARD {
                bound_tx.lock().ok().and_then(|mut slot| slot.take())
            } else {
                None
            };
            driver::shard_main(ctx, listen.map(|tx| (session_addr, tx)), services.clone())
        })?;
        let addr = match bound_rx.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(Ok(addr)) => addr,
            Ok(Err(reason)) => {
                let _ = shards.join();
                return Err(DataPlaneError::Listen {
                    addr: session_addr,
                    reason,
                });
            }
            Err(_) => {
                let _ = shards.join();
                return Err(DataPlaneError::Stopped);
            }
        };
        tracing::info!(
            "data plane: {} shard(s), sessions on {addr}, http {}, https {}",
            shards.shard_count(),
            listeners
                .http_addr
                .map_or("off".to_string(), |a| a.to_string()),
            listeners
                .https_addr
                .map_or("off".to_string(), |a| a.to_string()),
        );
        Ok(DataPlane {
            shards,
            session_addr: addr,
            data_dir: config.data_dir,
            listeners,
            certs,
            installed_bundles: std::sync::Mutex::new(HashMap::new()),
            deployed: tokio::sync::Mutex::new(HashMap::new()),
            paces: std::sync::Mutex::new(HashMap::new()),
            failures: std::sync::Mutex::new(HashMap::new()),
            subscriptions: std::sync::Mutex::new(HashMap::new()),
            next_subscription: std::sync::atomic::AtomicU64::new(1),
            state,
        })
    }

    /// Where client sessions connect.
    pub fn session_addr(&self) -> SocketAddr {
        self.session_addr
    }

    /// The bound data listeners (HTTP, HTTPS).
    pub fn listeners(&self) -> &http::DataListeners {
        &self.listeners
    }

    pub fn shard_count(&self) -> NonZeroUsize {
        self.shards.shard_count()
    }

    /// Sends a command to the graph shard.
    pub async fn send(&self, command: Command) -> Result<(), DataPlaneError> {
        self.shards
            .send(GRAPH_SHARD, command)
            .await
            .map_err(|_| DataPlaneError::Stopped)
    }

    /// Sends one command per shard (made by `command` with its reply channel) and waits for
    /// every reply. `root_first`: shard 0 first (stopping intake before the rest), else last
    /// (the rest are ready before intake starts).
    async fn broadcast<R>(
        &self,
        root_first: bool,
        command: impl Fn(tokio::sync::oneshot::Sender<R>) -> Command,
    ) -> Vec<R> {
        let count = self.shards.shard_count().get();
        let order: Vec<usize> = if root_first {
            (0..count).collect()
        } else {
            (1..count).chain(std::iter::once(GRAPH_SHARD)).collect()
        };
        let mut replies = Vec::with_capacity(count);
        for shard in order {
            let (done, wait) = tokio::sync::oneshot::channel();
            if self.shards.send(shard, command(done)).await.is_ok() {
                if let Ok(reply) = wait.await {
                    replies.push(reply);
                }
            }
        }
        replies
    }

    /// Brings the shards in line with `catalog`: deploys started domains whose model changed,
    /// stops the rest. Plans are built here, synchronously, from the borrowed catalog; the
    /// returned commands are sent by [`DataPlane::apply`].
    pub fn prepare(&self, catalog: &Catalog, deployed: &HashMap<String, Deployed>) -> Reconcile {
        let mut reconcile = Reconcile::default();
        let mut known = Vec::new();
        for (name, domain) in &catalog.domains {
            let started = matches!(domain.header.run, RunState::Started { .. });
            known.push((name.clone(), started));
            if !started {
                if deployed.contains_key(name) {
                    reconcile.stop.push(name.clone());
                }
                continue;
            }
            let fingerprint = fingerprint(domain, &catalog.global);
            let globals = globals_fingerprint(&catalog.global);
            let running = deployed.get(name);
            if running.map(|d| d.fingerprint) == Some(fingerprint) {
                continue;
            }
            // Only a change inside the domain, classified dynamic, is applied hot.
            let change = match running {
                Some(Deployed {
                    globals: then,
                    model: Some(old),
                    ..
                }) if *then == globals => change::classify(old, domain),
                _ => change::ModelChange::EntityPause,
            };
            let deployed = Deployed {
                fingerprint,
                globals,
                model: Some(Arc::new(domain.clone())),
            };
            let pace = match self.pace(domain) {
                Ok(pace) => pace,
                Err(error) => {
                    tracing::error!("domain '{name}' cannot run: {error}");
                    reconcile.failed.push((name.clone(), error, fingerprint));
                    continue;
                }
            };
            match plan::build(domain, catalog, &self.data_dir, pace) {
                Ok(plan) => {
                    self.warn_unstorable_windows(&plan);
                    reconcile.deploy.push((Arc::new(plan), change, deployed));
                }
                Err(error) => {
                    tracing::error!("domain '{name}' cannot run: {error}");
                    reconcile
                        .failed
                        .push((name.clone(), error.to_string(), fingerprint));
                }
            }
        }
        for name in deployed.keys() {
            if !catalog.domains.contains_key(name) {
                reconcile.stop.push(name.clone());
            }
        }
        reconcile.known = known;
        reconcile.bundles = tls_bundles(&catalog.global, &self.data_dir);
        reconcile
    }

    /// Warns of window processors whose branches may grow past the largest snapshot the
    /// runtime state store takes (its map, `--state-map-bytes`, or one entry's bound).
    fn warn_unstorable_windows(&self, plan: &plan::DomainPlan) {
        let storable_bytes = self
            .state
            .map_bytes()
            .min(exec::state_codec::MAX_ENCODED_BRANCH_BYTES) as u64;
        let windows = plan
            .processors
            .iter()
            .filter_map(|processor| match &processor.work {
                plan::NodeWork::Window(window) => Some((processor.name.as_str(), window.as_ref())),
                _ => None,
            });
        for (processor, cap_bytes) in plan::windows_over_storable(windows, storable_bytes) {
            tracing::warn!(
                domain = %plan.name,
                %processor,
                cap_bytes,
                storable_bytes,
                "a window branch may hold more state than one snapshot can store; once that large it is not snapshotted and its rows stay unacknowledged until its window emits (lower MAX STATE SIZE or raise --state-map-bytes)"
            );
        }
    }

    /// The clock of a started domain: the one this node already runs for its START, or one
    /// resumed from the START's record (first deploy here, or after a restart).
    fn pace(&self, domain: &crate::catalog::Domain) -> Result<clock::DomainPace, String> {
        let RunState::Started {
            at,
            generation,
            started_wall_ns,
        } = &domain.header.run
        else {
            return Ok(clock::DomainPace::Unpaced);
        };
        let mut paces = self
            .paces
            .lock()
            .map_err(|_| "the clock table is poisoned")?;
        if let Some((running, pace)) = paces.get(domain.name()) {
            if running == generation {
                return Ok(*pace);
            }
        }
        let pace = clock::DomainPace::resume(
            at,
            *started_wall_ns,
            clock::wall_ns(),
            clock::physical_ns(),
        )?;
        paces.insert(domain.name().to_string(), (*generation, pace));
        Ok(pace)
    }

    /// Reconciles against the catalog read through `read`.
    pub async fn reconcile(&self, read: impl FnOnce(&dyn Fn(&Catalog) -> Reconcile) -> Reconcile) {
        let mut deployed = self.deployed.lock().await;
        let snapshot = deployed.clone();
        let reconcile = read(&|catalog| self.prepare(catalog, &snapshot));
        self.apply(reconcile, &mut deployed).await;
    }

    /// Installs the certificates of TLS VHOSTs whose bound bundle changed and withdraws those
    /// of VHOSTs no started domain has any more. A bundle that cannot be read keeps the
    /// previous certificate (if any) and is reported.
    fn install_certificates(&self, bundles: &[(String, Vec<String>, PathBuf)]) {
        let Ok(mut installed) = self.installed_bundles.lock() else {
            return;
        };
        for (key, hosts, dir) in bundles {
            if installed
                .get(key)
                .is_some_and(|(installed, _)| installed == dir)
            {
                continue;
            }
            match nervix_net::http::CertStore::load_bundle(dir) {
                Ok(bundle) => {
                    self.certs.set(hosts, &bundle);
                    installed.insert(key.clone(), (dir.clone(), hosts.clone()));
                    tracing::info!("vhost {key}: serving the certificate of {}", dir.display());
                }
                Err(error) => tracing::error!(
                    "vhost {key}: cannot load the TLS bundle {}: {error}",
                    dir.display()
                ),
            }
        }
        let gone: Vec<String> = installed
            .keys()
            .filter(|key| !bundles.iter().any(|(k, _, _)| k == *key))
            .cloned()
            .collect();
        for key in gone {
            if let Some((_, hosts)) = installed.remove(&key) {
                self.certs.remove(&hosts);
            }
        }
    }

    async fn apply(&self, reconcile: Reconcile, deployed: &mut HashMap<String, Deployed>) {
        self.install_certificates(&reconcile.bundles);
        for shard in 0..self.shards.shard_count().get() {
            let _ = self
                .shards
                .send(shard, Command::Known(reconcile.known.clone()))
                .await;
        }
        for name in reconcile.stop {
            self.broadcast(true, |done| Command::Undeploy {
                domain: name.clone(),
                done,
            })
            .await;
            deployed.remove(&name);
            if let Ok(mut failures) = self.failures.lock() {
                failures.remove(&name);
            }
        }
        for (plan, change, running) in reconcile.deploy {
            let name = plan.name.clone();
            if change == change::ModelChange::Dynamic {
                tracing::info!("domain '{name}': model change applied hot (dynamic)");
            }
            self.broadcast(false, |done| Command::Deploy {
                plan: plan.clone(),
                change,
                done,
            })
            .await;
            deployed.insert(name.clone(), running);
            if let Ok(mut failures) = self.failures.lock() {
                failures.remove(&name);
            }
            let specs: Vec<(u64, subscribe::SubscriptionSpec)> = self
                .subscriptions
                .lock()
                .map(|all| {
                    all.iter()
                        .filter(|(_, s)| s.domain == name)
                        .map(|(id, s)| (*id, s.clone()))
                        .collect()
                })
                .unwrap_or_default();
            for (id, spec) in specs {
                self.attach(id, &spec).await;
            }
        }
        for (name, reason, fingerprint) in reconcile.failed {
            deployed.insert(
                name.clone(),
                Deployed {
                    fingerprint,
                    globals: 0,
                    model: None,
                },
            );
            if let Ok(mut failures) = self.failures.lock() {
                failures.insert(name, reason);
            }
        }
    }

    /// Registers a console subscription; rows flow whenever its domain runs. Returns its id.
    pub async fn subscribe(&self, spec: subscribe::SubscriptionSpec) -> Result<u64, String> {
        subscribe::compile_filter(&spec)?;
        let id = self
            .next_subscription
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let running = self.deployed.lock().await.contains_key(&spec.domain);
        if let Ok(mut all) = self.subscriptions.lock() {
            all.insert(id, spec.clone());
        }
        if running {
            self.attach(id, &spec).await;
        }
        Ok(id)
    }

    async fn attach(&self, id: u64, spec: &subscribe::SubscriptionSpec) {
        // Every shard taps its own share of the relay (branches live on their shards).
        let replies = self
            .broadcast(false, |done| {
                let filter = subscribe::compile_filter(spec).ok().flatten();
                Command::Subscribe {
                    id,
                    label: spec.name.clone(),
                    domain: spec.domain.clone(),
                    relay: spec.relay.clone(),
                    filter,
                    sample_rate: spec.sample_rate,
                    sink: spec.sink.clone(),
                    done,
                }
            })
            .await;
        if let Some(Err(reason)) = replies.into_iter().find(Result::is_err) {
            tracing::debug!("subscription {id} not attached: {reason}");
        }
    }

    /// Ends a subscription (DROP SUBSCRIPTION, or its session closed).
    pub fn unsubscribe(&self, id: u64) {
        if let Ok(mut all) = self.subscriptions.lock() {
            all.remove(&id);
        }
        let _ = self
            .shards
            .try_send(GRAPH_SHARD, Command::Unsubscribe { id });
    }

    /// Runtime figures of every shard.
    pub async fn stats(&self) -> Vec<ShardStats> {
        let mut all = Vec::new();
        for shard in 0..self.shards.shard_count().get() {
            let (reply, wait) = tokio::sync::oneshot::channel();
            if self
                .shards
                .send(shard, Command::Stats { reply })
                .await
                .is_ok()
            {
                if let Ok(stats) = wait.await {
                    all.push(stats);
                }
            }
        }
        all
    }

    /// Graceful stop: every graph force-flushes its route buffers, sinks finish what they hold
    /// (bounded by `drain_ms`), attachments end; then the shards stop.
    pub async fn shutdown(self, drain_ms: u64) {
        self.broadcast(true, |done| Command::Drain {
            deadline_ms: drain_ms,
            done,
        })
        .await;
        let shards = self.shards;
        let state = self.state;
        let _ = tokio::task::spawn_blocking(move || {
            let _ = shards.join();
            // The shards handed their last snapshots over while draining: write them.
            state.close();
        })
        .await;
    }
}

/// What one reconciliation does.
#[derive(Default)]
pub struct Reconcile {
    known: Vec<(String, bool)>,
    /// Every TLS VHOST: its name, its hosts, its bundle directory.
    bundles: Vec<(String, Vec<String>, PathBuf)>,
    deploy: Vec<(Arc<plan::DomainPlan>, change::ModelChange, Deployed)>,
    stop: Vec<String>,
    failed: Vec<(String, String, u64)>,
}

/// What a deployed domain runs: its fingerprint, and for classifying its next change the model
/// and the cluster-wide entities' fingerprint (none for a model that failed to plan).
#[derive(Clone)]
pub struct Deployed {
    fingerprint: u64,
    globals: u64,
    model: Option<Arc<crate::catalog::Domain>>,
}

/// Identifies a domain's model and run: any entity change or restart changes it — except the
/// certificate version a TLS VHOST is bound to, which rotates in the listeners' certificate
/// store without touching the graph (spec: REBIND RESOURCE "without pausing ingestion").
/// The cluster-wide VHOSTs count too (a domain's endpoints route by their hosts).
fn fingerprint(
    domain: &crate::catalog::Domain,
    global: &std::collections::BTreeMap<crate::catalog::EntityKey, crate::catalog::Entity>,
) -> u64 {
    let mut text = domain.header.generation.to_string();
    model_text(domain.entities.values().chain(global.values()), &mut text);
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}

/// Identifies the cluster-wide entities alone (a change there is never applied hot).
fn globals_fingerprint(
    global: &std::collections::BTreeMap<crate::catalog::EntityKey, crate::catalog::Entity>,
) -> u64 {
    let mut text = String::new();
    model_text(global.values(), &mut text);
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}

/// The canonical text of `entities`, TLS VHOSTs without their bound certificate version.
fn model_text<'e>(entities: impl Iterator<Item = &'e crate::catalog::Entity>, text: &mut String) {
    use nervix_nspl::ast::{CatalogStmt, ResourceVersion};
    use nervix_nspl::Statement;
    for entity in entities {
        match &entity.definition {
            Statement::Catalog(CatalogStmt::CreateVhost(vhost)) if vhost.tls.is_some() => {
                let mut unbound = vhost.clone();
                if let Some(mount) = &mut unbound.tls {
                    mount.version = ResourceVersion::Latest;
                }
                text.push_str(&nervix_nspl::render_statement(&Statement::Catalog(
                    CatalogStmt::CreateVhost(unbound),
                )));
            }
            definition => text.push_str(&nervix_nspl::render_statement(definition)),
        }
        text.push('\u{0}');
    }
}

/// Every TLS VHOST with its lower-case hosts and the bundle directory it is bound to.
fn tls_bundles(
    global: &std::collections::BTreeMap<crate::catalog::EntityKey, crate::catalog::Entity>,
    data_dir: &std::path::Path,
) -> Vec<(String, Vec<String>, PathBuf)> {
    use nervix_nspl::ast::{CatalogStmt, ResourceVersion};
    use nervix_nspl::Statement;
    let mut bundles = Vec::new();
    for entity in global.values() {
        if let Statement::Catalog(CatalogStmt::CreateVhost(vhost)) = &entity.definition {
            if let Some(mount) = &vhost.tls {
                if let ResourceVersion::Number(version) = mount.version {
                    bundles.push((
                        vhost.name.name.clone(),
                        vhost.hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
                        data_dir
                            .join("resources")
                            .join(&mount.resource.name)
                            .join(version.to_string()),
                    ));
                }
            }
        }
    }
    bundles
}

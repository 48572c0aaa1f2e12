//! [`MockKafka`]: librdkafka's mock cluster on loopback, for tests and `nervix dev kafka`.
//!
//! Owns the mock cluster's lifetime and the optional fixed bootstrap port. The mock cluster
//! speaks the real Kafka protocol on real TCP ports (DESIGN §12), so every client — ours,
//! kcat — talks to it as to a broker.
//!
//! Why it is correct:
//! - rdkafka's `MockCluster` holds a raw pointer and is not `Send`; tests keep a [`MockKafka`]
//!   alive while nodes run on other threads. So a dedicated owner thread creates the cluster,
//!   reports its bootstrap list over a channel, serves commands (topic creation) and destroys
//!   the cluster when the [`MockKafka`] is dropped (its command sender disconnects); `drop`
//!   joins that thread, so the brokers are gone when `drop` returns.
//! - Ports: librdkafka 2.12 binds every mock broker to an ephemeral loopback port
//!   (`rd_kafka_mock_broker_new` passes no address) and offers no way to pin it
//!   (`rd_kafka_mock_broker_set_host_port` only changes the *advertised* listener, and rdkafka
//!   0.39 does not expose it). For a fixed port a small TCP forwarder listens on
//!   `127.0.0.1:<port>` and relays each connection to the first broker: clients bootstrap
//!   through it, then connect to the brokers at the ports their metadata advertises (their own
//!   ephemeral loopback ports), as with any Kafka cluster.
//! - Partitions of auto-created topics: librdkafka 2.12 hard-codes 4
//!   (`mcluster->defaults.partition_cnt`, no setter), so `default_partitions` applies to topics
//!   created through [`MockKafka::create_topics`] (and `nervix dev kafka --topic`); create a
//!   topic before producing to it to choose its partition count.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::mocking::MockCluster;
use rdkafka::types::RDKafkaErrorCode;

use crate::ConnectorError;

/// Most brokers one mock cluster may have (enough for any multi-broker test).
pub const MAX_MOCK_BROKERS: i32 = 16;

/// Most partitions one mock topic may have.
pub const MAX_MOCK_PARTITIONS: i32 = 10_000;

/// Kafka's usual replication factor ceiling; the mock cluster uses min(brokers, this).
const MAX_REPLICATION_FACTOR: i32 = 3;

/// How long starting the cluster (its owner thread reporting back) may take.
const START_TIMEOUT_MS: u64 = 10_000;

/// How long a forwarded connection may take to reach the first broker.
const UPSTREAM_CONNECT_TIMEOUT_MS: u64 = 5_000;

/// The relay's copy buffer per direction.
const RELAY_BUFFER_BYTES: usize = 64 * 1024;

/// A command for the owner thread.
enum Command {
    CreateTopic {
        topic: String,
        partitions: i32,
        reply: mpsc::Sender<Result<(), ConnectorError>>,
    },
}

/// A running mock Kafka cluster on loopback; dropping it stops it.
pub struct MockKafka {
    brokers: i32,
    default_partitions: i32,
    /// What clients put in `bootstrap.servers`.
    bootstrap: String,
    /// Disconnecting it tells the owner thread to destroy the cluster.
    commands: Option<mpsc::Sender<Command>>,
    owner: Option<JoinHandle<()>>,
    forwarder: Option<Forwarder>,
}

impl MockKafka {
    /// Starts `brokers` mock brokers on ephemeral loopback ports.
    pub fn start(brokers: i32, default_partitions: i32) -> Result<MockKafka, ConnectorError> {
        MockKafka::start_with_port(brokers, default_partitions, None)
    }

    /// Like [`MockKafka::start`]; with `port`, clients bootstrap through `127.0.0.1:<port>`
    /// (a forwarder to the first broker; see the module docs).
    pub fn start_with_port(
        brokers: i32,
        default_partitions: i32,
        port: Option<u16>,
    ) -> Result<MockKafka, ConnectorError> {
        if !(1..=MAX_MOCK_BROKERS).contains(&brokers) {
            return Err(ConnectorError::config(
                "brokers",
                format!("must be between 1 and {MAX_MOCK_BROKERS}, not {brokers}"),
            ));
        }
        check_partitions(default_partitions)?;
        let (ready_sender, ready) = mpsc::channel();
        let (commands, command_receiver) = mpsc::channel();
        let owner = std::thread::Builder::new()
            .name("nervix-mock-kafka".to_string())
            .spawn(move || own_cluster(brokers, ready_sender, command_receiver))
            .map_err(|error| {
                ConnectorError::transient(format!("cannot start the mock Kafka thread: {error}"))
            })?;
        let mut mock = MockKafka {
            brokers,
            default_partitions,
            bootstrap: String::new(),
            commands: Some(commands),
            owner: Some(owner),
            forwarder: None,
        };
        let brokers_list = match ready.recv_timeout(Duration::from_millis(START_TIMEOUT_MS)) {
            Ok(result) => result?,
            Err(_) => {
                return Err(ConnectorError::transient(
                    "the mock Kafka cluster did not start in time",
                ))
            }
        };
        mock.bootstrap = brokers_list;
        if let Some(port) = port {
            let first = mock.bootstrap.split(',').next().unwrap_or_default();
            let target = first
                .to_socket_addrs()
                .ok()
                .and_then(|mut addresses| addresses.next())
                .ok_or_else(|| {
                    ConnectorError::permanent(format!(
                        "mock broker address '{first}' is not usable"
                    ))
                })?;
            let forwarder = Forwarder::start(port, target)?;
            mock.bootstrap = forwarder.address.to_string();
            mock.forwarder = Some(forwarder);
        }
        Ok(mock)
    }

    /// The `bootstrap.servers` value for clients of this cluster.
    pub fn bootstrap_servers(&self) -> String {
        self.bootstrap.clone()
    }

    /// How many brokers the cluster has.
    pub fn brokers(&self) -> i32 {
        self.brokers
    }

    /// The partition count [`MockKafka::create_topics`] uses.
    pub fn default_partitions(&self) -> i32 {
        self.default_partitions
    }

    /// Creates `topic` with `partitions` partitions (an existing topic is an error).
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), ConnectorError> {
        check_partitions(partitions)?;
        let commands = self
            .commands
            .as_ref()
            .ok_or_else(|| ConnectorError::permanent("the mock Kafka cluster is stopped"))?;
        let (reply, answer) = mpsc::channel();
        commands
            .send(Command::CreateTopic {
                topic: topic.to_string(),
                partitions,
                reply,
            })
            .map_err(|_| ConnectorError::permanent("the mock Kafka cluster is stopped"))?;
        answer
            .recv()
            .map_err(|_| ConnectorError::permanent("the mock Kafka cluster is stopped"))?
    }

    /// Creates each topic with [`MockKafka::default_partitions`] partitions.
    pub fn create_topics(&self, topics: &[&str]) -> Result<(), ConnectorError> {
        for topic in topics {
            self.create_topic(topic, self.default_partitions)?;
        }
        Ok(())
    }
}

impl Drop for MockKafka {
    fn drop(&mut self) {
        // Stop accepting bootstrap connections first, then destroy the brokers (which ends the
        // relays' upstream halves).
        self.forwarder.take();
        self.commands.take();
        if let Some(owner) = self.owner.take() {
            if owner.join().is_err() {
                tracing::warn!("the mock Kafka owner thread panicked");
            }
        }
    }
}

fn check_partitions(partitions: i32) -> Result<(), ConnectorError> {
    if (1..=MAX_MOCK_PARTITIONS).contains(&partitions) {
        Ok(())
    } else {
        Err(ConnectorError::config(
            "partitions",
            format!("must be between 1 and {MAX_MOCK_PARTITIONS}, not {partitions}"),
        ))
    }
}

/// The owner thread: creates the cluster, reports its bootstrap list, serves commands until
/// the [`MockKafka`] disconnects, then destroys the cluster by dropping it.
fn own_cluster(
    brokers: i32,
    ready: mpsc::Sender<Result<String, ConnectorError>>,
    commands: mpsc::Receiver<Command>,
) {
    let cluster = match MockCluster::new(brokers) {
        Ok(cluster) => cluster,
        Err(error) => {
            let _ = ready.send(Err(ConnectorError::transient(format!(
                "cannot start the mock Kafka cluster: {error}"
            ))));
            return;
        }
    };
    if ready.send(Ok(cluster.bootstrap_servers())).is_err() {
        return;
    }
    let replication = brokers.min(MAX_REPLICATION_FACTOR);
    while let Ok(command) = commands.recv() {
        match command {
            Command::CreateTopic {
                topic,
                partitions,
                reply,
            } => {
                let result = cluster
                    .create_topic(&topic, partitions, replication)
                    .map_err(|error| topic_error(&topic, &error));
                let _ = reply.send(result);
            }
        }
    }
}

fn topic_error(topic: &str, error: &KafkaError) -> ConnectorError {
    match error {
        KafkaError::MockCluster(RDKafkaErrorCode::TopicAlreadyExists) => {
            ConnectorError::permanent(format!("mock Kafka topic '{topic}' already exists"))
        }
        other => {
            ConnectorError::permanent(format!("cannot create mock Kafka topic '{topic}': {other}"))
        }
    }
}

/// Relays connections from a fixed loopback port to one broker.
struct Forwarder {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl Forwarder {
    fn start(port: u16, target: SocketAddr) -> Result<Forwarder, ConnectorError> {
        let listener = TcpListener::bind(("127.0.0.1", port)).map_err(|error| {
            ConnectorError::config(
                "port",
                format!("{port} cannot be bound on 127.0.0.1: {error}"),
            )
        })?;
        let address = listener.local_addr().map_err(|error| {
            ConnectorError::transient(format!("cannot read the forwarder's address: {error}"))
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor_stop = Arc::clone(&stop);
        let acceptor = std::thread::Builder::new()
            .name("nervix-mock-kafka-forward".to_string())
            .spawn(move || accept_loop(&listener, target, &acceptor_stop))
            .map_err(|error| {
                ConnectorError::transient(format!("cannot start the forwarder thread: {error}"))
            })?;
        Ok(Forwarder {
            address,
            stop,
            acceptor: Some(acceptor),
        })
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept; the acceptor sees `stop` and returns.
        let _ = TcpStream::connect(self.address);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, target: SocketAddr, stop: &AtomicBool) {
    for client in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let client = match client {
            Ok(client) => client,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => {
                tracing::warn!("mock Kafka forwarder accept failed: {error}");
                continue;
            }
        };
        let spawned = std::thread::Builder::new()
            .name("nervix-mock-kafka-relay".to_string())
            .spawn(move || relay(client, target));
        if let Err(error) = spawned {
            tracing::warn!("mock Kafka forwarder cannot start a relay: {error}");
        }
    }
}

/// Copies both directions between `client` and the broker at `target` until either closes.
fn relay(client: TcpStream, target: SocketAddr) {
    let upstream = match TcpStream::connect_timeout(
        &target,
        Duration::from_millis(UPSTREAM_CONNECT_TIMEOUT_MS),
    ) {
        Ok(upstream) => upstream,
        Err(error) => {
            tracing::debug!("mock Kafka forwarder cannot reach {target}: {error}");
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (Ok(client_reader), Ok(upstream_writer)) = (client.try_clone(), upstream.try_clone())
    else {
        return;
    };
    let outbound = std::thread::Builder::new()
        .name("nervix-mock-kafka-relay".to_string())
        .spawn(move || copy_until_closed(client_reader, upstream_writer));
    copy_until_closed(upstream, client);
    if let Ok(outbound) = outbound {
        let _ = outbound.join();
    }
}

/// Copies `from` into `to` until either side closes, then shuts both sockets down so the
/// opposite direction's copy ends too.
fn copy_until_closed(mut from: TcpStream, mut to: TcpStream) {
    let mut buffer = vec![0u8; RELAY_BUFFER_BYTES];
    loop {
        match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => {
                if to.write_all(&buffer[..read]).is_err() {
                    break;
                }
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

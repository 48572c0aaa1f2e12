//! `nervix dev …`: local stand-ins for external systems, for trying graphs and for tests.
//!
//! `nervix dev kafka [--port P] [--partitions N] [--brokers B] [--topic T]…` runs librdkafka's
//! mock cluster (`nervix_connectors::kafka::MockKafka`, the real Kafka protocol on loopback),
//! prints `bootstrap.servers=HOST:PORT` as the first line on standard output (one line, for
//! scripts) and a `kcat` hint on standard error, and runs until Ctrl-C or SIGTERM.
//!
//! Ports and partitions, as librdkafka 2.12 allows (see `MockKafka`): brokers listen on
//! ephemeral loopback ports; `--port` adds a bootstrap forwarder on that port, after which
//! clients follow the brokers' advertised ports. Auto-created topics always get 4 partitions
//! (fixed in librdkafka); topics named with `--topic` are created up front with
//! `--partitions` partitions.

use std::io::Write;

use anyhow::Context;
use clap::{Args, Subcommand};
use nervix_connectors::kafka::MockKafka;

use super::{Status, STDOUT_FAILED};

/// Partitions of `--topic` topics unless `--partitions` says otherwise (the DESIGN bench's 16).
const DEFAULT_PARTITIONS: i32 = 16;
/// Brokers unless `--brokers` says otherwise.
const DEFAULT_BROKERS: i32 = 1;

#[derive(Args)]
pub struct DevArguments {
    #[command(subcommand)]
    system: DevSystem,
}

#[derive(Subcommand)]
enum DevSystem {
    /// librdkafka's mock Kafka cluster on loopback, until Ctrl-C.
    Kafka(KafkaArguments),
}

#[derive(Args)]
struct KafkaArguments {
    /// Bootstrap port on 127.0.0.1 (default: the first broker's own ephemeral port).
    #[arg(long)]
    port: Option<u16>,
    /// Partitions of each --topic topic (auto-created topics get librdkafka's fixed 4).
    #[arg(long, default_value_t = DEFAULT_PARTITIONS)]
    partitions: i32,
    /// How many mock brokers.
    #[arg(long, default_value_t = DEFAULT_BROKERS)]
    brokers: i32,
    /// A topic to create up front with --partitions partitions (repeatable).
    #[arg(long = "topic", value_name = "TOPIC")]
    topics: Vec<String>,
}

/// `nervix dev …`.
pub fn run(arguments: &DevArguments) -> anyhow::Result<Status> {
    match &arguments.system {
        DevSystem::Kafka(kafka) => run_kafka(kafka),
    }
}

fn run_kafka(arguments: &KafkaArguments) -> anyhow::Result<Status> {
    let mock = MockKafka::start_with_port(arguments.brokers, arguments.partitions, arguments.port)
        .context("cannot start the mock Kafka cluster")?;
    for topic in &arguments.topics {
        mock.create_topic(topic, arguments.partitions)
            .with_context(|| format!("cannot create topic '{topic}'"))?;
    }
    let bootstrap = mock.bootstrap_servers();
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "bootstrap.servers={bootstrap}").context(STDOUT_FAILED)?;
        stdout.flush().context(STDOUT_FAILED)?;
    }
    eprintln!(
        "mock Kafka: {} broker(s); try `kcat -b {bootstrap} -L`; Ctrl-C stops",
        arguments.brokers
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the signal runtime")?;
    runtime.block_on(wait_for_termination())?;
    drop(mock);
    Ok(Status::Success)
}

async fn wait_for_termination() -> anyhow::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    tokio::select! {
        _ = terminate.recv() => {}
        result = tokio::signal::ctrl_c() => result.context("cannot watch SIGINT")?,
    }
    Ok(())
}

//! `nervix dev kafka`: the binary starts librdkafka's mock cluster, prints one parseable
//! `bootstrap.servers=HOST:PORT` line, serves real Kafka clients through it (a topic created
//! with `--topic` gets `--partitions` partitions), and exits cleanly on SIGTERM.
//! Every wait polls against a deadline.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nervix_connectors::kafka::{ConsumerGroup, KafkaConsumer, KafkaProducer};

/// Upper bound for anything this test waits for.
const DEADLINE_SECONDS: u64 = 60;
/// Timeout of the blocking metadata lookup.
const LOOKUP_TIMEOUT_MS: u64 = 5_000;
/// Pause between two polls that found nothing.
const IDLE_POLL_MS: u64 = 5;
/// Partitions asked for on the command line.
const PARTITIONS: i32 = 3;

/// Kills the child if the test fails half-way.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn dev_kafka_serves_clients_and_stops_on_sigterm() {
    let child = Command::new(env!("CARGO_BIN_EXE_nervix"))
        .args([
            "dev",
            "kafka",
            "--partitions",
            &PARTITIONS.to_string(),
            "--topic",
            "cli",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn nervix");
    let mut running = Running(child);
    let stdout = running.0.stdout.take().expect("stdout");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("read bootstrap line");
    let bootstrap = first
        .trim()
        .strip_prefix("bootstrap.servers=")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    let config = vec![("bootstrap.servers".to_string(), bootstrap)];

    let mut producer = KafkaProducer::new(&config, "cli").expect("producer");
    producer.send(Some(b"k"), b"hello", &[], 1).expect("send");
    let mut reports = Vec::new();
    let until = Instant::now() + Duration::from_secs(DEADLINE_SECONDS);
    while reports.is_empty() {
        assert!(Instant::now() < until, "no delivery report");
        producer.poll_deliveries(&mut reports);
        std::thread::sleep(Duration::from_millis(IDLE_POLL_MS));
    }
    assert_eq!(reports, vec![(1, Ok(()))]);

    let mut consumer =
        KafkaConsumer::new(&config, ConsumerGroup::Assigned, "cli", false).expect("consumer");
    let lookup = Duration::from_millis(LOOKUP_TIMEOUT_MS);
    assert_eq!(
        consumer.partition_count(lookup).expect("partitions"),
        PARTITIONS
    );
    let positions: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    consumer.assign(&positions).expect("assign");
    let mut got = Vec::new();
    while got.is_empty() {
        assert!(Instant::now() < until, "nothing consumed");
        consumer
            .poll_batch(10, |record| got.push(record.payload.to_vec()))
            .expect("poll");
        std::thread::sleep(Duration::from_millis(IDLE_POLL_MS));
    }
    assert_eq!(got, vec![b"hello".to_vec()]);
    drop(consumer);
    drop(producer);

    let terminated = Command::new("kill")
        .args(["-TERM", &running.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(terminated.success());
    loop {
        if let Some(status) = running.0.try_wait().expect("wait") {
            assert!(status.success(), "nervix dev kafka exited with {status}");
            break;
        }
        assert!(Instant::now() < until, "nervix dev kafka ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(IDLE_POLL_MS));
    }
}

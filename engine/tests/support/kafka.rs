//! Kafka helpers for integration tests: librdkafka's mock cluster (a real broker protocol on
//! loopback ports), a producer that writes JSON records and waits for the broker, and a
//! consumer that reads a topic until it has what the test expects or a deadline passes.

#![allow(dead_code)] // each test file uses its own share

use std::time::{Duration, Instant};

use nervix_connectors::kafka::{ConsumerGroup, KafkaConsumer, KafkaProducer};

/// One record read back: key, value, headers.
#[derive(Debug, Clone)]
pub struct ReadRecord {
    pub key: Option<String>,
    /// The value as text (lossy); `payload` holds its bytes.
    pub value: String,
    pub payload: Vec<u8>,
    pub headers: Vec<(String, String)>,
}

/// A mock cluster whose topics are created with `partitions` partitions.
pub fn cluster(partitions: i32) -> nervix_connectors::kafka::MockKafka {
    nervix_connectors::kafka::MockKafka::start(1, partitions).expect("mock cluster")
}

fn config(bootstrap: &str) -> Vec<(String, String)> {
    vec![("bootstrap.servers".to_string(), bootstrap.to_string())]
}

/// Produces `values` to `topic` (keys `k<i>`) and waits until the broker acknowledged all.
pub fn produce(bootstrap: &str, topic: &str, values: &[String]) {
    let records: Vec<(String, Vec<(String, String)>)> = values
        .iter()
        .map(|value| (value.clone(), Vec::new()))
        .collect();
    produce_with_headers(bootstrap, topic, &records);
}

/// Produces `(value, headers)` records to `topic` (keys `k<i>`) and waits for the broker.
pub fn produce_with_headers(
    bootstrap: &str,
    topic: &str,
    records: &[(String, Vec<(String, String)>)],
) {
    let mut producer = KafkaProducer::new(&config(bootstrap), topic).expect("producer");
    for (i, (value, headers)) in records.iter().enumerate() {
        let key = format!("k{i}");
        let headers: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_bytes()))
            .collect();
        loop {
            match producer.send(Some(key.as_bytes()), value.as_bytes(), &headers, i as u64) {
                Ok(()) => break,
                Err(nervix_connectors::kafka::SendRefused::QueueFull) => {
                    let mut out = Vec::new();
                    producer.poll_deliveries(&mut out);
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(nervix_connectors::kafka::SendRefused::Failed(error)) => {
                    panic!("produce failed: {error}")
                }
            }
        }
    }
    producer
        .flush(Duration::from_secs(30))
        .expect("every record acknowledged by the broker");
    let mut out = Vec::new();
    producer.poll_deliveries(&mut out);
    assert!(
        out.iter().all(|(_, outcome)| outcome.is_ok()),
        "deliveries: {out:?}"
    );
}

/// Reads `topic` from the beginning in a fresh group until `done` says so or `seconds` pass.
pub fn read_until(
    bootstrap: &str,
    topic: &str,
    seconds: u64,
    done: impl Fn(&[ReadRecord]) -> bool,
) -> Vec<ReadRecord> {
    let mut settings = config(bootstrap);
    settings.push(("auto.offset.reset".to_string(), "earliest".to_string()));
    // A fresh group per read: every read starts from the beginning.
    static READS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let read_number = READS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let group = format!("reader-{topic}-{}-{read_number}", std::process::id());
    let mut consumer =
        KafkaConsumer::new(&settings, ConsumerGroup::Named(group), topic, false).expect("reader");
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut read = Vec::new();
    while Instant::now() < deadline && !done(&read) {
        let polled = consumer
            .poll_batch(1_024, |record| {
                read.push(ReadRecord {
                    key: record
                        .key
                        .map(|key| String::from_utf8_lossy(key).into_owned()),
                    value: String::from_utf8_lossy(record.payload).into_owned(),
                    payload: record.payload.to_vec(),
                    headers: record
                        .headers
                        .iter()
                        .map(|header| {
                            (
                                header.name.to_string(),
                                String::from_utf8_lossy(header.value.unwrap_or_default())
                                    .into_owned(),
                            )
                        })
                        .collect(),
                });
            })
            .expect("poll");
        if polled == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    read
}

/// The committed next offsets of `group` on `topic`'s first `partitions` partitions (None:
/// nothing committed), read without joining the group.
pub fn committed(
    bootstrap: &str,
    topic: &str,
    group: &str,
    partitions: i32,
) -> Vec<(i32, Option<i64>)> {
    nervix_connectors::kafka::group_offsets(
        &config(bootstrap),
        group,
        topic,
        &(0..partitions).collect::<Vec<_>>(),
        Duration::from_secs(10),
    )
    .expect("committed offsets")
}

//! Producer and mock-cluster tests of `nervix_connectors::kafka` against librdkafka's mock
//! cluster over loopback TCP.
//!
//! Covers: every delivery report carries its caller token exactly once; a full local queue is
//! refused as `QueueFull`, distinct from a permanent refusal (record too large); an
//! undeliverable record comes back as a transient delivery error; the mock cluster is `Send`
//! and serves clients through a fixed bootstrap port; a batch send partitions keyed records
//! exactly as single sends do, stops at a full local queue and refuses a too-large record
//! alone. Waits poll against deadlines.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use nervix_connectors::kafka::{
    ConsumerGroup, KafkaConsumer, KafkaProducer, MockKafka, OutRecord, SendRefused,
    PRODUCE_BATCH_RECORDS,
};
use nervix_connectors::ConnectorError;

/// Upper bound for anything these tests wait for.
const DEADLINE_SECONDS: u64 = 60;
/// Pause between two polls that found nothing.
const IDLE_POLL_MS: u64 = 5;
/// The local queue bound of the queue-full test.
const SMALL_QUEUE_MESSAGES: u64 = 5;

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(DEADLINE_SECONDS)
}

fn idle() {
    std::thread::sleep(Duration::from_millis(IDLE_POLL_MS));
}

fn config(bootstrap: String, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut config = vec![("bootstrap.servers".to_string(), bootstrap)];
    config.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    config
}

/// Polls until `count` deliveries came back; returns them.
fn deliveries(
    producer: &mut KafkaProducer,
    count: usize,
) -> Vec<(u64, Result<(), ConnectorError>)> {
    let mut all = Vec::new();
    let until = deadline();
    while all.len() < count {
        assert!(
            Instant::now() < until,
            "only {} of {count} reports",
            all.len()
        );
        producer.poll_deliveries(&mut all);
        idle();
    }
    all
}

#[test]
fn delivery_reports_carry_every_token_once() {
    let mock = MockKafka::start(1, 2).expect("mock");
    mock.create_topic("tokens", 2).expect("topic");
    let mut producer =
        KafkaProducer::new(&config(mock.bootstrap_servers(), &[]), "tokens").expect("producer");
    let tokens: Vec<u64> = (1000..1040).collect();
    for &token in &tokens {
        producer
            .send(None, format!("p{token}").as_bytes(), &[("t", b"x")], token)
            .expect("send");
    }
    let reports = deliveries(&mut producer, tokens.len());
    let mut seen = BTreeSet::new();
    for (token, outcome) in reports {
        assert_eq!(outcome, Ok(()), "token {token}");
        assert!(seen.insert(token), "token {token} twice");
    }
    assert_eq!(seen, tokens.into_iter().collect());
    assert_eq!(producer.in_flight(), 0);
}

#[test]
fn full_queue_is_distinct_from_permanent_refusal() {
    let mock = MockKafka::start(1, 1).expect("mock");
    mock.create_topic("small", 1).expect("topic");
    let bound = SMALL_QUEUE_MESSAGES.to_string();
    let settings = [
        ("queue.buffering.max.messages", bound.as_str()),
        // Hold records locally long enough for the queue to fill.
        ("linger.ms", "2000"),
        ("message.max.bytes", "2000"),
    ];
    let mut producer = KafkaProducer::new(&config(mock.bootstrap_servers(), &settings), "small")
        .expect("producer");

    let mut accepted = 0;
    let refused = loop {
        match producer.send(Some(b"k"), b"payload", &[], accepted) {
            Ok(()) => accepted += 1,
            Err(refusal) => break refusal,
        }
        assert!(
            accepted <= SMALL_QUEUE_MESSAGES,
            "the queue bound was not applied"
        );
    };
    assert_eq!(refused, SendRefused::QueueFull);
    assert_eq!(accepted, SMALL_QUEUE_MESSAGES);

    // A record larger than message.max.bytes can never be sent: permanent, not QueueFull.
    let huge = vec![b'x'; 4000];
    match producer.send(None, &huge, &[], 99) {
        Err(SendRefused::Failed(error)) => assert!(!error.retryable(), "{error:?}"),
        other => panic!("expected a permanent refusal, got {other:?}"),
    }

    // Once the queued records are delivered there is room again.
    let reports = deliveries(&mut producer, usize::try_from(accepted).expect("count"));
    let tokens: BTreeSet<u64> = reports.iter().map(|(token, _)| *token).collect();
    assert_eq!(tokens, (0..SMALL_QUEUE_MESSAGES).collect());
    assert!(reports.iter().all(|(_, outcome)| outcome.is_ok()));
    producer.send(None, b"again", &[], 7).expect("room again");
    producer
        .flush(Duration::from_secs(DEADLINE_SECONDS))
        .expect("flush");
    let last = deliveries(&mut producer, 1);
    assert_eq!(last, vec![(7, Ok(()))]);
}

/// Records per partition of `topic` (high watermarks: the topic was created empty).
fn partition_counts(mock: &MockKafka, topic: &str, partitions: i32) -> Vec<i64> {
    let consumer = KafkaConsumer::new(
        &config(mock.bootstrap_servers(), &[]),
        ConsumerGroup::Assigned,
        topic,
        false,
    )
    .expect("consumer");
    (0..partitions)
        .map(|partition| {
            consumer
                .fetch_watermarks(partition, Duration::from_secs(DEADLINE_SECONDS))
                .expect("watermarks")
                .1
        })
        .collect()
}

#[test]
fn batch_send_partitions_keyed_records_as_single_sends_do() {
    const PARTITIONS: i32 = 7;
    // More than one librdkafka batch call, so the split between calls is covered too.
    let count = PRODUCE_BATCH_RECORDS + 300;
    let mock = MockKafka::start(1, PARTITIONS).expect("mock");
    mock.create_topic("single", PARTITIONS).expect("topic");
    mock.create_topic("batched", PARTITIONS).expect("topic");
    let keys: Vec<String> = (0..count)
        .map(|i| format!("key-{}", i * 7919 % 1000))
        .collect();

    let mut single =
        KafkaProducer::new(&config(mock.bootstrap_servers(), &[]), "single").expect("producer");
    for (token, key) in keys.iter().enumerate() {
        single
            .send(Some(key.as_bytes()), b"v", &[], token as u64)
            .expect("send");
    }
    assert!(deliveries(&mut single, count)
        .iter()
        .all(|(_, o)| o.is_ok()));

    let mut batched =
        KafkaProducer::new(&config(mock.bootstrap_servers(), &[]), "batched").expect("producer");
    let records: Vec<OutRecord<'_>> = keys
        .iter()
        .enumerate()
        .map(|(token, key)| OutRecord {
            key: Some(key.as_bytes()),
            payload: b"v",
            token,
        })
        .collect();
    let mut refused = Vec::new();
    let handled = batched.send_batch(&records, |index, error| refused.push((index, error)));
    assert_eq!((handled, refused.len()), (count, 0));
    let reports = deliveries(&mut batched, count);
    let tokens: BTreeSet<u64> = reports.iter().map(|(token, _)| *token).collect();
    assert_eq!(tokens, (0..count as u64).collect(), "every token once");
    assert!(reports.iter().all(|(_, outcome)| outcome.is_ok()));

    let by_single = partition_counts(&mock, "single", PARTITIONS);
    assert_eq!(by_single.iter().sum::<i64>(), count as i64);
    assert!(
        by_single.iter().filter(|&&n| n > 0).count() > 1,
        "{by_single:?}"
    );
    assert_eq!(partition_counts(&mock, "batched", PARTITIONS), by_single);
}

#[test]
fn batch_send_stops_at_a_full_queue_and_refuses_a_too_large_record_alone() {
    let mock = MockKafka::start(1, 1).expect("mock");
    mock.create_topic("small", 1).expect("topic");
    let bound = SMALL_QUEUE_MESSAGES.to_string();
    let settings = [
        ("queue.buffering.max.messages", bound.as_str()),
        ("linger.ms", "2000"),
        ("message.max.bytes", "2000"),
    ];
    let mut producer = KafkaProducer::new(&config(mock.bootstrap_servers(), &settings), "small")
        .expect("producer");
    let huge = vec![b'x'; 4000];
    let records: Vec<OutRecord<'_>> = (0..8)
        .map(|token| OutRecord {
            key: None,
            // Record 1 can never be sent; it takes no room in the queue.
            payload: if token == 1 { &huge } else { b"payload" },
            token,
        })
        .collect();
    let mut refused = Vec::new();
    let handled = producer.send_batch(&records, |index, error| refused.push((index, error)));
    // Records 0 and 2..=5 fill the five slots; record 6 finds the queue full.
    assert_eq!(handled, 6);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].0, 1);
    assert!(!refused[0].1.retryable(), "{:?}", refused[0].1);

    let reports = deliveries(&mut producer, 5);
    let tokens: BTreeSet<u64> = reports.iter().map(|(token, _)| *token).collect();
    assert_eq!(tokens, [0, 2, 3, 4, 5].into_iter().collect());
    let rest = producer.send_batch(&records[6..], |_, error| panic!("refused: {error}"));
    assert_eq!(rest, 2, "room again");
    let last = deliveries(&mut producer, 2);
    assert_eq!(last.len(), 2);
}

#[test]
fn undeliverable_record_reports_a_transient_error_with_its_token() {
    // A port nothing listens on: bind one, then free it.
    let port = free_port();
    let settings = [
        ("message.timeout.ms", "300"),
        ("reconnect.backoff.max.ms", "100"),
    ];
    let mut producer =
        KafkaProducer::new(&config(format!("127.0.0.1:{port}"), &settings), "nowhere")
            .expect("producer");
    producer.send(None, b"lost", &[], 42).expect("enqueued");
    let reports = deliveries(&mut producer, 1);
    assert_eq!(reports.len(), 1);
    let (token, outcome) = &reports[0];
    assert_eq!(*token, 42);
    match outcome {
        Err(error) => assert!(error.retryable(), "timeouts are transient: {error:?}"),
        Ok(()) => panic!("delivered to nothing"),
    }
}

#[test]
fn configuration_errors_are_config() {
    let missing = KafkaProducer::new(&[], "t").err().expect("no brokers");
    assert!(
        matches!(missing, ConnectorError::Config { .. }),
        "{missing:?}"
    );
    let bad = KafkaProducer::new(
        &config("127.0.0.1:1".into(), &[("no.such.setting", "1")]),
        "t",
    )
    .err()
    .expect("bad key");
    assert!(
        matches!(bad, ConnectorError::Config { ref key, .. } if key == "no.such.setting"),
        "{bad:?}"
    );
}

#[test]
fn mock_cluster_is_send_and_serves_a_fixed_bootstrap_port() {
    fn assert_send<T: Send>() {}
    assert_send::<MockKafka>();
    assert_send::<KafkaConsumer>();
    assert_send::<KafkaProducer>();

    let port = free_port();
    let mock = std::thread::spawn(move || MockKafka::start_with_port(1, 3, Some(port)))
        .join()
        .expect("thread")
        .expect("mock");
    assert_eq!(mock.bootstrap_servers(), format!("127.0.0.1:{port}"));
    mock.create_topic("forwarded", 1).expect("topic");
    assert!(
        mock.create_topic("forwarded", 1).is_err(),
        "duplicate topic"
    );

    let mut producer =
        KafkaProducer::new(&config(mock.bootstrap_servers(), &[]), "forwarded").expect("producer");
    producer
        .send(Some(b"k"), b"through the forwarder", &[], 1)
        .expect("send");
    let reports = deliveries(&mut producer, 1);
    assert_eq!(reports, vec![(1, Ok(()))]);

    let consumer_config = config(
        mock.bootstrap_servers(),
        &[("auto.offset.reset", "earliest")],
    );
    let mut consumer = KafkaConsumer::new(
        &consumer_config,
        ConsumerGroup::Assigned,
        "forwarded",
        false,
    )
    .expect("consumer");
    consumer.assign(&[(0, 0)]).expect("assign");
    let mut got = Vec::new();
    let until = deadline();
    while got.is_empty() {
        assert!(
            Instant::now() < until,
            "nothing consumed through the forwarder"
        );
        consumer
            .poll_batch(10, |record| got.push(record.payload.to_vec()))
            .expect("poll");
        idle();
    }
    assert_eq!(got, vec![b"through the forwarder".to_vec()]);
    drop(consumer);
    drop(producer);
    drop(mock);
    // The forwarder is gone with the cluster.
    assert!(
        TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "port still held"
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port()
}

#[test]
fn tls_client_settings_are_accepted() {
    // librdkafka is built with OpenSSL: `security.protocol` = 'ssl' makes a client (its
    // handshake needs a TLS broker, which the mock cluster is not).
    let settings = config(
        "127.0.0.1:9".to_string(),
        &[
            ("security.protocol", "ssl"),
            ("ssl.endpoint.identification.algorithm", "https"),
        ],
    );
    KafkaProducer::new(&settings, "tls-topic").expect("a TLS producer");
}

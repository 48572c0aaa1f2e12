//! Producer and mock-cluster tests of `nervix_connectors::kafka` against librdkafka's mock
//! cluster over loopback TCP.
//!
//! Covers: every delivery report carries its caller token exactly once; a full local queue is
//! refused as `QueueFull`, distinct from a permanent refusal (record too large); an
//! undeliverable record comes back as a transient delivery error; the mock cluster is `Send`
//! and serves clients through a fixed bootstrap port. Waits poll against deadlines.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use nervix_connectors::kafka::{
    ConsumerGroup, KafkaConsumer, KafkaProducer, MockKafka, SendRefused,
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

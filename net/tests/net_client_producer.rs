//! The Rust client's producer against a scripted protocol peer (DESIGN §8; spec: Client
//! Ingestors, "Outcomes" and "Producers"): the peer plays the server's side of each script over
//! a real loopback TCP connection, with the crate's own frame encoding and decoder.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use nervix_net::batch::encode_batch;
use nervix_net::client::{ClientError, Producer, ProducerOptions, Session};
use nervix_net::session::frame::{
    ExpectedField, Frame, OpenRefusal, Outcome, ProducerEndReason, UnknownCause,
};
use support::peer::{connect, Peer};

impl Peer {
    /// Receives the next submit and returns its sequence number and IPC bytes.
    async fn submit(&mut self, producer: u64) -> (u64, Vec<u8>) {
        match self.recv().await {
            Frame::SubmitBatch {
                producer_id,
                batch_seq,
                ipc,
            } => {
                assert_eq!(producer_id, producer);
                (batch_seq, ipc)
            }
            other => panic!("expected a submit, got {other:?}"),
        }
    }

    async fn outcome(&mut self, producer_id: u64, batch_seq: u64, outcome: Outcome) {
        self.send(Frame::BatchOutcome {
            producer_id,
            batch_seq,
            outcome,
        })
        .await;
    }
}

fn fields() -> Vec<ExpectedField> {
    vec![
        ExpectedField {
            name: "region".into(),
            type_text: "STRING".into(),
            optional: false,
            sensitive: false,
        },
        ExpectedField {
            name: "amount".into(),
            type_text: "I64".into(),
            optional: false,
            sensitive: true,
        },
    ]
}

fn batch(rows: usize, base: i64) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("region", DataType::Utf8, false),
        Field::new("amount", DataType::Int64, false),
    ]));
    let regions = StringArray::from_iter_values((0..rows).map(|i| ["eu", "us", "ap"][i % 3]));
    let amounts = Int64Array::from_iter_values((0..rows as i64).map(|i| base + i));
    RecordBatch::try_new(schema, vec![Arc::new(regions), Arc::new(amounts)]).unwrap()
}

fn options(credit_batches: u32, credit_bytes: u64) -> ProducerOptions {
    ProducerOptions {
        domain: "shop".into(),
        ingestor: "orders_in".into(),
        expected_fields: fields(),
        credit_batches,
        credit_bytes,
    }
}

/// The producer-opened answer to `request_id`, with the given credit and retry policy.
fn opened(
    request_id: u64,
    producer_id: u64,
    batches: u32,
    bytes: u64,
    backoff: u64,
    max: u64,
) -> Frame {
    Frame::ProducerOpened {
        request_id,
        producer_id,
        start_generation: 3,
        contract_id: 77,
        granted_batches: batches,
        granted_bytes: bytes,
        admission_open: true,
        retry_backoff_ms: backoff,
        retry_max_ms: max,
    }
}

/// Opens a producer through the peer: checks the open frame and answers it.
async fn open(
    session: &Session,
    peer: &mut Peer,
    producer_id: u64,
    batches: u32,
    bytes: u64,
    backoff_ms: u64,
    max_ms: u64,
) -> Producer {
    let (producer, ()) = tokio::join!(session.open_producer(options(batches, bytes)), async {
        let Frame::OpenProducer {
            request_id,
            domain,
            ingestor,
            expected_fields,
            credit_batches,
            credit_bytes,
        } = peer.recv().await
        else {
            panic!("expected an open");
        };
        assert_eq!((domain.as_str(), ingestor.as_str()), ("shop", "orders_in"));
        assert_eq!(expected_fields, fields());
        assert_eq!((credit_batches, credit_bytes), (batches, bytes));
        peer.send(opened(
            request_id,
            producer_id,
            batches,
            bytes,
            backoff_ms,
            max_ms,
        ))
        .await;
    });
    producer.expect("the open succeeds")
}

#[tokio::test]
async fn open_is_answered_with_the_opened_info() {
    let (session, mut peer) = connect().await;
    let producer = open(&session, &mut peer, 5, 4, 1 << 20, 100, 1000).await;
    let info = producer.opened();
    assert_eq!(info.producer_id, 5);
    assert_eq!((info.start_generation, info.contract_id), (3, 77));
    assert_eq!((info.granted_batches, info.granted_bytes), (4, 1 << 20));
    assert!(info.admission_open && producer.admission_open());
    assert_eq!(info.retry_backoff, Duration::from_millis(100));
    assert_eq!(info.retry_max, Duration::from_millis(1000));
    // Several producers share one session.
    let second = open(&session, &mut peer, 6, 1, 1 << 20, 1, 1).await;
    assert_eq!(second.opened().producer_id, 6);
}

#[tokio::test]
async fn a_refused_open_is_refused_with_its_reason_and_the_session_lives_on() {
    let (session, mut peer) = connect().await;
    for reason in OpenRefusal::ALL.iter().copied() {
        let (result, ()) = tokio::join!(session.open_producer(options(1, 1)), async {
            let Frame::OpenProducer { request_id, .. } = peer.recv().await else {
                panic!("expected an open");
            };
            peer.send(Frame::OpenRefused { request_id, reason }).await;
        });
        let err = result.expect_err("refused");
        assert!(
            matches!(err, ClientError::Refused(r) if r == reason),
            "{err:?}"
        );
        assert_eq!(
            err.is_retryable(),
            matches!(
                reason,
                OpenRefusal::DomainStopped | OpenRefusal::IngestorNotRunning | OpenRefusal::NoRoom
            )
        );
    }
    let producer = open(&session, &mut peer, 1, 1, 1 << 20, 1, 1).await;
    assert_eq!(producer.opened().producer_id, 1);
}

#[tokio::test]
async fn submit_waits_for_batch_credit_until_an_outcome_frees_it() {
    let (session, mut peer) = connect().await;
    let mut producer = open(&session, &mut peer, 9, 2, 1 << 24, 10, 10).await;
    let b = batch(100, 0);
    assert_eq!(producer.submit(&b).await.unwrap(), 0);
    assert_eq!(producer.submit(&b).await.unwrap(), 1);
    let (s0, ipc0) = peer.submit(9).await;
    let (s1, _) = peer.submit(9).await;
    assert_eq!((s0, s1), (0, 1));
    assert_eq!(
        ipc0,
        encode_batch(&b).unwrap(),
        "the canonical encoding, as sent"
    );
    // The third waits: no credit.
    assert!(
        tokio::time::timeout(Duration::from_millis(150), producer.submit(&b))
            .await
            .is_err(),
        "submit returned without credit"
    );
    peer.silence(Duration::from_millis(50)).await;
    // An outcome frees one batch; the waiting submit goes out.
    peer.outcome(9, 0, Outcome::Completed).await;
    assert_eq!(producer.submit(&b).await.unwrap(), 2);
    assert_eq!(peer.submit(9).await.0, 2);
    assert_eq!(
        producer.next_outcome().await.unwrap(),
        Some((0, Outcome::Completed))
    );
    peer.outcome(9, 2, Outcome::Rejected).await;
    peer.outcome(9, 1, Outcome::Completed).await;
    assert_eq!(
        producer.drain().await.unwrap(),
        vec![(2, Outcome::Rejected), (1, Outcome::Completed)],
        "arrival order"
    );
    assert_eq!(producer.next_outcome().await.unwrap(), None);
}

#[tokio::test]
async fn submit_waits_for_byte_credit_and_refuses_a_batch_larger_than_it() {
    let (session, mut peer) = connect().await;
    let b = batch(1000, 0);
    let size = encode_batch(&b).unwrap().len() as u64;
    let mut producer = open(&session, &mut peer, 2, 100, size * 2 + size / 2, 10, 10).await;
    producer.submit(&b).await.unwrap();
    producer.submit(&b).await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(150), producer.submit(&b))
            .await
            .is_err(),
        "submit returned without byte credit"
    );
    peer.submit(2).await;
    peer.submit(2).await;
    peer.outcome(2, 1, Outcome::Completed).await;
    assert_eq!(producer.submit(&b).await.unwrap(), 2);
    assert_eq!(peer.submit(2).await.0, 2);

    // A batch larger than the granted bytes is refused and never sent.
    let big = batch(10_000, 0);
    let err = producer.submit(&big).await.unwrap_err();
    assert!(
        matches!(err, ClientError::BatchTooLarge { max_bytes, .. } if max_bytes == size * 2 + size / 2),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    peer.silence(Duration::from_millis(50)).await;
}

#[tokio::test]
async fn busy_is_resent_after_the_backoff_with_the_same_seq_and_bytes() {
    let (session, mut peer) = connect().await;
    let mut producer = open(&session, &mut peer, 1, 4, 1 << 24, 60, 100).await;
    let seq = producer.submit(&batch(10, 5)).await.unwrap();
    let waiter = tokio::spawn(async move {
        let outcome = producer.next_outcome().await;
        (producer, outcome)
    });
    let (s, first) = peer.submit(1).await;
    assert_eq!(s, seq);
    // Backoff doubles per refusal, capped at MAX: 60, 100, 100 ms.
    for min_ms in [60, 100, 100] {
        peer.outcome(1, seq, Outcome::Busy).await;
        let refused = Instant::now();
        let (again, bytes) = peer.submit(1).await;
        let waited = refused.elapsed();
        assert_eq!((again, &bytes), (seq, &first), "the same batch");
        assert!(
            waited >= Duration::from_millis(min_ms - 5),
            "resent after {waited:?}"
        );
    }
    peer.outcome(1, seq, Outcome::Completed).await;
    let (mut producer, outcome) = waiter.await.unwrap();
    assert_eq!(
        outcome.unwrap(),
        Some((seq, Outcome::Completed)),
        "busy is never returned"
    );
    assert_eq!(producer.unresolved_batches(), 0);
    assert_eq!(producer.next_outcome().await.unwrap(), None);
}

#[tokio::test]
async fn suspended_is_resent_once_admission_reopens() {
    let (session, mut peer) = connect().await;
    let mut producer = open(&session, &mut peer, 4, 4, 1 << 24, 10, 10).await;
    let seq0 = producer.submit(&batch(10, 0)).await.unwrap();
    let (_, first) = peer.submit(4).await;
    peer.send(Frame::AdmissionChanged {
        producer_id: 4,
        open: false,
    })
    .await;
    peer.outcome(4, seq0, Outcome::Suspended).await;
    // Wait until the client has seen the suspension, then submit while it lasts: held back.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let seq1 = producer.submit(&batch(10, 1)).await.unwrap();
    assert!(!producer.admission_open());
    let waiter = tokio::spawn(async move {
        let outcome = producer.next_outcome().await;
        (producer, outcome)
    });
    peer.silence(Duration::from_millis(200)).await;
    peer.send(Frame::AdmissionChanged {
        producer_id: 4,
        open: true,
    })
    .await;
    let (s, bytes) = peer.submit(4).await;
    assert_eq!((s, &bytes), (seq0, &first), "the suspended batch, resent");
    assert_eq!(peer.submit(4).await.0, seq1, "the held batch, sent");
    peer.outcome(4, seq1, Outcome::Completed).await;
    peer.outcome(4, seq0, Outcome::Completed).await;
    let (mut producer, outcome) = waiter.await.unwrap();
    assert_eq!(outcome.unwrap(), Some((seq1, Outcome::Completed)));
    assert_eq!(
        producer.drain().await.unwrap(),
        vec![(seq0, Outcome::Completed)]
    );
}

#[tokio::test]
async fn producer_ended_fails_submit_and_reports_what_was_left() {
    let (session, mut peer) = connect().await;
    let mut producer = open(&session, &mut peer, 3, 4, 1 << 24, 10, 10).await;
    let b = batch(10, 0);
    producer.submit(&b).await.unwrap();
    producer.submit(&b).await.unwrap();
    peer.submit(3).await;
    peer.submit(3).await;
    peer.outcome(3, 0, Outcome::Unknown(UnknownCause::OwnerLost))
        .await;
    peer.send(Frame::ProducerEnded {
        producer_id: 3,
        reason: ProducerEndReason::OwnerLost,
    })
    .await;
    assert_eq!(
        producer.drain().await.unwrap(),
        vec![
            (0, Outcome::Unknown(UnknownCause::OwnerLost)),
            (1, Outcome::Unknown(UnknownCause::ProducerEnded)),
        ]
    );
    assert_eq!(producer.ended_reason(), Some(ProducerEndReason::OwnerLost));
    let err = producer.submit(&b).await.unwrap_err();
    assert!(
        matches!(err, ClientError::Ended(ProducerEndReason::OwnerLost)),
        "{err:?}"
    );
    assert!(err.is_retryable());
    // The session lives on: a new producer opens.
    let again = open(&session, &mut peer, 4, 1, 1 << 20, 1, 1).await;
    assert_eq!(again.opened().producer_id, 4);
}

#[tokio::test]
async fn close_detaches_the_producer() {
    let (session, mut peer) = connect().await;
    let producer = open(&session, &mut peer, 8, 1, 1 << 20, 1, 1).await;
    let (closed, ()) = tokio::join!(producer.close(), async {
        assert_eq!(peer.recv().await, Frame::CloseProducer { producer_id: 8 });
        peer.send(Frame::ProducerEnded {
            producer_id: 8,
            reason: ProducerEndReason::Closed,
        })
        .await;
    });
    closed.unwrap();
    // Dropping a producer detaches it as well.
    let producer = open(&session, &mut peer, 9, 1, 1 << 20, 1, 1).await;
    drop(producer);
    assert_eq!(peer.recv().await, Frame::CloseProducer { producer_id: 9 });
}

/// Each case's server bytes break the protocol; the session ends with a protocol error.
#[tokio::test]
async fn a_bad_frame_from_the_server_ends_the_session_with_a_protocol_error() {
    let garbage: Vec<(&str, Vec<u8>)> = vec![
        ("unknown frame type", vec![0, 0, 0, 3, 200, 1, 2]),
        ("empty frame", vec![0, 0, 0, 0]),
        ("huge length", vec![0xFF, 0xFF, 0xFF, 0xFF, 1]),
        (
            "a client frame",
            Frame::CloseProducer { producer_id: 1 }.encode().unwrap(),
        ),
        (
            "an outcome for a batch never sent",
            Frame::BatchOutcome {
                producer_id: 1,
                batch_seq: 99,
                outcome: Outcome::Completed,
            }
            .encode()
            .unwrap(),
        ),
        (
            "an answer to no open",
            opened(424_242, 2, 1, 1, 1, 1).encode().unwrap(),
        ),
    ];
    for (name, bytes) in garbage {
        let (session, mut peer) = connect().await;
        let mut producer = open(&session, &mut peer, 1, 4, 1 << 24, 10, 10).await;
        producer.submit(&batch(10, 0)).await.unwrap();
        peer.submit(1).await;
        peer.send_raw(&bytes).await;
        let err = producer.next_outcome().await.unwrap_err();
        assert!(matches!(err, ClientError::Protocol(_)), "{name}: {err:?}");
        assert!(!err.is_retryable());
        let err = producer.submit(&batch(10, 0)).await.unwrap_err();
        assert!(matches!(err, ClientError::Protocol(_)), "{name}: {err:?}");
        assert!(session.is_closed(), "{name}");
        let err = session.open_producer(options(1, 1)).await.unwrap_err();
        assert!(matches!(err, ClientError::Protocol(_)), "{name}: {err:?}");
    }
}

#[tokio::test]
async fn a_closed_connection_ends_the_session_as_disconnected() {
    let (session, mut peer) = connect().await;
    let mut producer = open(&session, &mut peer, 1, 4, 1 << 24, 10, 10).await;
    producer.submit(&batch(10, 0)).await.unwrap();
    peer.submit(1).await;
    drop(peer);
    let err = producer.next_outcome().await.unwrap_err();
    assert!(matches!(err, ClientError::Disconnected), "{err:?}");
    assert!(err.is_retryable());
}

/// Hundreds of 65,536-row batches per second over loopback (measured in release; a debug
/// build only has to keep moving).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_size_batches_stream_through_the_credit_window() {
    let (session, mut peer) = connect().await;
    let b = batch(65_536, 0);
    let size = encode_batch(&b).unwrap().len() as u64;
    let mut producer = open(&session, &mut peer, 1, 8, size * 8, 10, 10).await;
    const BATCHES: u64 = 100;
    let server = tokio::spawn(async move {
        for _ in 0..BATCHES {
            let (seq, ipc) = peer.submit(1).await;
            assert_eq!(ipc.len() as u64, size);
            peer.outcome(1, seq, Outcome::Completed).await;
        }
        peer
    });
    let start = Instant::now();
    for i in 0..BATCHES {
        assert_eq!(producer.submit(&b).await.unwrap(), i);
    }
    let outcomes = producer.drain().await.unwrap();
    let elapsed = start.elapsed();
    assert_eq!(outcomes.len() as u64, BATCHES);
    assert!(outcomes.iter().all(|(_, o)| *o == Outcome::Completed));
    server.await.unwrap();
    let per_sec = BATCHES as f64 / elapsed.as_secs_f64();
    println!("{per_sec:.0} batches/s of 65,536 rows ({size} bytes each)");
    assert!(per_sec > 10.0, "{per_sec:.1} batches/s");
}

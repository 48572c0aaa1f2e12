//! The Rust client's consumer against a scripted protocol peer (DESIGN §8: consumers of
//! CLIENT CONSUMER emitters, credit-based and acknowledged): the peer plays the server's side of
//! each script over a real loopback TCP connection, with the crate's own frame encoding and
//! decoder.

mod support;

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use nervix_net::batch::encode_batch;
use nervix_net::client::{ClientError, Consumer, ConsumerOptions, Session};
use nervix_net::session::frame::{ConsumerEndReason, ConsumerRefusal, ExpectedField, Frame};
use support::peer::{connect, Peer};

impl Peer {
    async fn deliver(&mut self, consumer_id: u64, delivery_seq: u64, ipc: Vec<u8>) {
        self.send(Frame::Delivery {
            consumer_id,
            delivery_seq,
            ipc,
        })
        .await;
    }

    /// Receives the next ack or nack: `(delivery_seq, accepted)`.
    async fn ack(&mut self, consumer: u64) -> (u64, bool) {
        match self.recv().await {
            Frame::DeliveryAck {
                consumer_id,
                delivery_seq,
                accepted,
            } => {
                assert_eq!(consumer_id, consumer);
                (delivery_seq, accepted)
            }
            other => panic!("expected an ack, got {other:?}"),
        }
    }
}

/// The emitter's TO SCHEMA: `region STRING, amount_cents I64 OPTIONAL`.
fn fields() -> Vec<ExpectedField> {
    vec![
        ExpectedField {
            name: "region".into(),
            type_text: "STRING".into(),
            optional: false,
            sensitive: false,
        },
        ExpectedField {
            name: "amount_cents".into(),
            type_text: "I64".into(),
            optional: true,
            sensitive: false,
        },
    ]
}

fn batch(rows: usize) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("region", DataType::Utf8, false),
        Field::new("amount_cents", DataType::Int64, true),
    ]));
    let regions = StringArray::from_iter_values((0..rows).map(|i| ["eu", "us"][i % 2]));
    let amounts = Int64Array::from_iter((0..rows as i64).map(|i| (i % 3 != 0).then_some(i * 100)));
    RecordBatch::try_new(schema, vec![Arc::new(regions), Arc::new(amounts)]).unwrap()
}

fn ipc(rows: usize) -> Vec<u8> {
    encode_batch(&batch(rows)).unwrap()
}

fn options(credit_batches: u32) -> ConsumerOptions {
    ConsumerOptions {
        domain: "shop".into(),
        emitter: "orders_out".into(),
        credit_batches,
    }
}

async fn open(session: &Session, peer: &mut Peer, consumer_id: u64, credit: u32) -> Consumer {
    let (consumer, ()) = tokio::join!(session.open_consumer(options(credit)), async {
        let Frame::OpenConsumer {
            request_id,
            domain,
            emitter,
            credit_batches,
        } = peer.recv().await
        else {
            panic!("expected a consumer open");
        };
        assert_eq!((domain.as_str(), emitter.as_str()), ("shop", "orders_out"));
        assert_eq!(credit_batches, credit);
        peer.send(Frame::ConsumerOpened {
            request_id,
            consumer_id,
            fields: fields(),
            granted_batches: credit,
        })
        .await;
    });
    consumer.expect("the open succeeds")
}

#[tokio::test]
async fn deliveries_are_decoded_and_acks_and_nacks_reach_the_server() {
    let (session, mut peer) = connect().await;
    let mut consumer = open(&session, &mut peer, 7, 4).await;
    assert_eq!(consumer.id(), 7);
    assert_eq!(consumer.fields(), &fields()[..]);
    assert_eq!(consumer.granted_batches(), 4);
    peer.deliver(7, 100, ipc(10)).await;
    peer.deliver(7, 101, ipc(3)).await;
    let d = consumer.next().await.unwrap().unwrap();
    assert_eq!((d.seq, &d.batch), (100, &batch(10)));
    let d = consumer.next().await.unwrap().unwrap();
    assert_eq!((d.seq, &d.batch), (101, &batch(3)));
    assert_eq!(consumer.unacked(), 2);
    consumer.nack(101).await.unwrap();
    consumer.ack(100).await.unwrap();
    assert_eq!(peer.ack(7).await, (101, false));
    assert_eq!(peer.ack(7).await, (100, true));
    assert_eq!(consumer.unacked(), 0);
    // Acknowledging twice, or what was never delivered, is refused locally.
    let err = consumer.ack(100).await.unwrap_err();
    assert!(
        matches!(err, ClientError::NotOutstanding { seq: 100 }),
        "{err:?}"
    );
    assert!(matches!(
        consumer.nack(5).await,
        Err(ClientError::NotOutstanding { seq: 5 })
    ));
    peer.silence(Duration::from_millis(50)).await;
}

#[tokio::test]
async fn a_refused_open_is_refused_with_its_reason() {
    let (session, mut peer) = connect().await;
    for reason in ConsumerRefusal::ALL.iter().copied() {
        let (result, ()) = tokio::join!(session.open_consumer(options(1)), async {
            let Frame::OpenConsumer { request_id, .. } = peer.recv().await else {
                panic!("expected a consumer open");
            };
            peer.send(Frame::ConsumerRefused { request_id, reason })
                .await;
        });
        let err = result.expect_err("refused");
        assert!(
            matches!(err, ClientError::ConsumerRefused(r) if r == reason),
            "{err:?}"
        );
    }
    let consumer = open(&session, &mut peer, 1, 1).await;
    assert_eq!(consumer.id(), 1);
}

#[tokio::test]
async fn credit_is_respected_and_returned_by_acks() {
    let (session, mut peer) = connect().await;
    let mut consumer = open(&session, &mut peer, 2, 2).await;
    // Within the credit: two unacknowledged; an ack returns one, so a third may follow.
    peer.deliver(2, 0, ipc(1)).await;
    peer.deliver(2, 1, ipc(1)).await;
    assert_eq!(consumer.next().await.unwrap().unwrap().seq, 0);
    assert_eq!(consumer.next().await.unwrap().unwrap().seq, 1);
    consumer.ack(0).await.unwrap();
    assert_eq!(peer.ack(2).await, (0, true));
    peer.deliver(2, 2, ipc(1)).await;
    assert_eq!(consumer.next().await.unwrap().unwrap().seq, 2);
    // Beyond the credit: the server broke the protocol.
    peer.deliver(2, 3, ipc(1)).await;
    let err = consumer.next().await.unwrap_err();
    assert!(matches!(err, ClientError::Protocol(_)), "{err:?}");
    assert!(session.is_closed());
    assert!(matches!(
        consumer.next().await,
        Err(ClientError::Protocol(_))
    ));
}

#[tokio::test]
async fn a_delivery_sent_again_while_unacknowledged_is_a_protocol_error() {
    let (session, mut peer) = connect().await;
    let mut consumer = open(&session, &mut peer, 2, 8).await;
    peer.deliver(2, 5, ipc(1)).await;
    peer.deliver(2, 5, ipc(1)).await;
    consumer.next().await.unwrap().unwrap();
    let err = consumer.next().await.unwrap_err();
    assert!(matches!(err, ClientError::Protocol(_)), "{err:?}");
}

#[tokio::test]
async fn an_invalid_delivery_is_reported_and_can_be_nacked() {
    let (session, mut peer) = connect().await;
    let mut consumer = open(&session, &mut peer, 3, 8).await;
    let wrong_schema = {
        let schema = Arc::new(Schema::new(vec![
            Field::new("region", DataType::Utf8, false),
            Field::new("amount_cents", DataType::Int32, true),
        ]));
        let b = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["eu"])),
                Arc::new(arrow_array::Int32Array::from(vec![1])),
            ],
        )
        .unwrap();
        encode_batch(&b).unwrap()
    };
    let nulls_in_required = {
        let schema = Arc::new(Schema::new(vec![
            Field::new("region", DataType::Utf8, true),
            Field::new("amount_cents", DataType::Int64, true),
        ]));
        let b = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec![Some("eu"), None])),
                Arc::new(Int64Array::from(vec![1, 2])),
            ],
        )
        .unwrap();
        encode_batch(&b).unwrap()
    };
    let mut truncated = ipc(5);
    truncated.truncate(truncated.len() - 20);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", vec![1, 2, 3, 4, 5, 6, 7, 8, 9]),
        ("empty", vec![]),
        ("truncated", truncated),
        ("wrong type", wrong_schema),
        ("nulls in a required field", nulls_in_required),
    ];
    for (seq, (name, bytes)) in cases.into_iter().enumerate() {
        let seq = seq as u64;
        peer.deliver(3, seq, bytes).await;
        let err = consumer.next().await.unwrap_err();
        assert!(
            matches!(&err, ClientError::InvalidDelivery { seq: s, .. } if *s == seq),
            "{name}: {err:?}"
        );
        consumer.nack(seq).await.unwrap();
        assert_eq!(peer.ack(3).await, (seq, false), "{name}");
    }
    // The consumer goes on.
    peer.deliver(3, 99, ipc(2)).await;
    assert_eq!(consumer.next().await.unwrap().unwrap().batch, batch(2));
}

#[tokio::test]
async fn consumer_ended_ends_the_stream_with_its_reason() {
    let (session, mut peer) = connect().await;
    let mut consumer = open(&session, &mut peer, 4, 2).await;
    peer.deliver(4, 0, ipc(1)).await;
    peer.send(Frame::ConsumerEnded {
        consumer_id: 4,
        reason: ConsumerEndReason::EmitterStopped,
    })
    .await;
    assert_eq!(consumer.next().await.unwrap().unwrap().seq, 0);
    assert!(consumer.next().await.unwrap().is_none());
    assert_eq!(
        consumer.ended_reason(),
        Some(ConsumerEndReason::EmitterStopped)
    );
    assert!(consumer.next().await.unwrap().is_none());
    assert!(matches!(
        consumer.ack(0).await,
        Err(ClientError::ConsumerEnded(
            ConsumerEndReason::EmitterStopped
        ))
    ));
}

#[tokio::test]
async fn close_detaches_the_consumer() {
    let (session, mut peer) = connect().await;
    let consumer = open(&session, &mut peer, 5, 2).await;
    let (closed, ()) = tokio::join!(consumer.close(), async {
        assert_eq!(peer.recv().await, Frame::CloseConsumer { consumer_id: 5 });
        peer.deliver(5, 0, ipc(1)).await;
        peer.send(Frame::ConsumerEnded {
            consumer_id: 5,
            reason: ConsumerEndReason::Closed,
        })
        .await;
    });
    closed.unwrap();
    let consumer = open(&session, &mut peer, 6, 2).await;
    drop(consumer);
    assert_eq!(peer.recv().await, Frame::CloseConsumer { consumer_id: 6 });
}

#[tokio::test]
async fn a_garbage_frame_ends_the_session_with_a_protocol_error() {
    let (session, mut peer) = connect().await;
    let mut consumer = open(&session, &mut peer, 1, 2).await;
    // A consumer-opened frame whose field list claims more fields than the frame holds.
    let mut body = vec![9u8];
    body.extend_from_slice(&[0; 16]);
    body.extend_from_slice(&u32::MAX.to_be_bytes());
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    peer.send_raw(&frame).await;
    let err = consumer.next().await.unwrap_err();
    assert!(matches!(err, ClientError::Protocol(_)), "{err:?}");
    assert!(!err.is_retryable());
    assert!(matches!(
        session.open_consumer(options(1)).await,
        Err(ClientError::Protocol(_))
    ));
}

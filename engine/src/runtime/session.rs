//! The session protocol's server side on a shard (DESIGN §8): accepts TCP connections, decodes
//! frames with the bounded [`FrameDecoder`], and turns each into a call on the shard's state;
//! one writer task per connection sends what the state queues for it.
//!
//! A connection never holds more than one bounded frame of input; a decoding error ends the
//! connection (framing is lost), and every producer and consumer it opened is closed: queued
//! batches are refused, admitted ones become unknown, unacknowledged deliveries are delivered
//! again to another consumer.

use std::cell::RefCell;
use std::rc::Rc;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use nervix_net::session::frame::{
    ConsumerEndReason, Frame as SessionFrame, FrameDecoder, ProducerEndReason,
};

use super::shard::{Outbound, ShardState};

/// Bytes read from a socket at once.
pub const READ_CHUNK_BYTES: usize = 256 << 10;

/// Serves one connection until it closes.
pub async fn serve_connection(state: Rc<RefCell<ShardState>>, stream: glommio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
    let connection = state.borrow_mut().next_id();
    let (sender, outgoing) = async_channel::unbounded::<SessionFrame>();
    let outbound = Outbound::Session(sender.clone());
    let (mut reader, mut writer) = futures_lite::io::split(stream);
    let writer_task = glommio::spawn_local(async move {
        while let Ok(frame) = outgoing.recv().await {
            let bytes = match frame.encode() {
                Ok(bytes) => bytes,
                Err(error) => {
                    tracing::error!("session: cannot encode a frame: {error}");
                    continue;
                }
            };
            if writer.write_all(&bytes).await.is_err() {
                break;
            }
            // Coalesce: write everything already queued before flushing.
            while let Ok(frame) = outgoing.try_recv() {
                match frame.encode() {
                    Ok(bytes) => {
                        if writer.write_all(&bytes).await.is_err() {
                            return;
                        }
                    }
                    Err(error) => tracing::error!("session: cannot encode a frame: {error}"),
                }
            }
            if writer.flush().await.is_err() {
                break;
            }
        }
    })
    .detach();
    let mut decoder = FrameDecoder::new();
    let mut buffer = vec![0u8; READ_CHUNK_BYTES];
    let mut producers: Vec<u64> = Vec::new();
    let mut consumers: Vec<u64> = Vec::new();
    let mut fairness = super::driver::Fairness::new();
    'read: loop {
        fairness.yield_if_due().await;
        let read = match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        decoder.push(&buffer[..read]);
        loop {
            let frame = match decoder.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!("session {connection}: {error}; closing the connection");
                    break 'read;
                }
            };
            let mut shard = state.borrow_mut();
            match frame {
                SessionFrame::OpenProducer {
                    request_id,
                    domain,
                    ingestor,
                    expected_fields,
                    credit_batches,
                    credit_bytes,
                } => {
                    let before: Vec<u64> = shard.producers.keys().copied().collect();
                    shard.open_producer(
                        connection,
                        &outbound,
                        request_id,
                        &domain,
                        &ingestor,
                        &expected_fields,
                        credit_batches,
                        credit_bytes,
                    );
                    producers.extend(
                        shard
                            .producers
                            .iter()
                            .filter(|(id, p)| p.connection == connection && !before.contains(id))
                            .map(|(id, _)| *id),
                    );
                }
                SessionFrame::SubmitBatch {
                    producer_id,
                    batch_seq,
                    ipc,
                } => {
                    if producers.contains(&producer_id) {
                        shard.submit(producer_id, batch_seq, &ipc);
                    } else {
                        tracing::warn!(
                            "session {connection}: batch for producer {producer_id}, which this \
                             session did not open; closing the connection"
                        );
                        break 'read;
                    }
                }
                SessionFrame::CloseProducer { producer_id } => {
                    if producers.contains(&producer_id) {
                        shard.close_producer(producer_id, Some(ProducerEndReason::Closed));
                        producers.retain(|p| *p != producer_id);
                    }
                }
                SessionFrame::OpenConsumer {
                    request_id,
                    domain,
                    emitter,
                    credit_batches,
                } => {
                    let before: Vec<u64> = shard.consumers.keys().copied().collect();
                    shard.open_consumer(
                        connection,
                        &outbound,
                        request_id,
                        &domain,
                        &emitter,
                        credit_batches,
                    );
                    consumers.extend(
                        shard
                            .consumers
                            .iter()
                            .filter(|(id, c)| c.connection == connection && !before.contains(id))
                            .map(|(id, _)| *id),
                    );
                }
                SessionFrame::DeliveryAck {
                    consumer_id,
                    delivery_seq,
                    accepted,
                } => {
                    if consumers.contains(&consumer_id) {
                        shard.consumer_ack(consumer_id, delivery_seq, accepted);
                    }
                }
                SessionFrame::CloseConsumer { consumer_id } => {
                    if consumers.contains(&consumer_id) {
                        shard.close_consumer(consumer_id, Some(ConsumerEndReason::Closed));
                        consumers.retain(|c| *c != consumer_id);
                    }
                }
                other => {
                    tracing::warn!(
                        "session {connection}: a client may not send frame type {}; closing",
                        other.frame_type()
                    );
                    break 'read;
                }
            }
        }
    }
    {
        let mut shard = state.borrow_mut();
        for producer in producers {
            shard.close_producer(producer, None);
        }
        for consumer in consumers {
            shard.close_consumer(consumer, None);
        }
    }
    sender.close();
    drop(writer_task);
}

//! [`FetchQueue`]: many consumed records per librdkafka call, for [`super::KafkaConsumer`].
//!
//! Owns the consumer's record path. rdkafka's `BaseConsumer::poll` returns one message per
//! call (one queue pop, one event and one `Arc` per record); librdkafka's
//! `rd_kafka_consume_batch_queue` pops up to a whole batch under one call. It cannot run on the
//! consumer queue itself: rdkafka enables librdkafka's event API there, and the batch call
//! serves rebalance events by unassigning everything and aborts on commit results. So the
//! records go to a queue of their own: every partition the consumer is assigned has its fetch
//! queue forwarded here ([`FetchQueue::forward`]), while rebalances, commit results and errors
//! stay on the consumer queue that rdkafka's `poll` serves.
//!
//! Why it is correct:
//! * Nothing is lost across the switch: forwarding a fetch queue moves the records already in
//!   it along. Records fetched before a partition was forwarded were queued on the consumer
//!   queue; the consumer drains that queue before it reads this one, so a partition's records
//!   still arrive in offset order.
//! * librdkafka clears a partition's forwarding when it stops fetching it (revocation,
//!   unassign) and, once an application forwarded it, never forwards it to the consumer queue
//!   again; so every assignment must forward its partitions anew, which the consumer does after
//!   each assignment it sees (rebalance or [`super::KafkaConsumer::assign`]).
//! * The batch call applies the same rules as a poll: records from before a seek (an outdated
//!   fetch version) are dropped, the application position advances (with
//!   `enable.auto.offset.store`, NO ACK's auto-commit stores it), partition EOFs and fetch
//!   errors come back as messages with `err` set.
//!
//! Why the unsafe code is sound: the queue handle is created here, used only through
//! librdkafka's thread-safe queue calls and destroyed exactly once on drop (which also drops
//! the records still queued in it). Each message the batch call returns is owned by this module
//! from that call until `rd_kafka_message_destroy`, which [`Batch`] calls exactly once per
//! message, also when the caller's callback panics; a record handed to the callback borrows
//! its message only for the callback's duration.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::ptr::NonNull;

use rdkafka::bindings as rdsys;

use super::headers::KafkaHeaders;
use super::KafkaRecord;

/// Most records one batch call takes from librdkafka (the slots are reused between calls).
pub const FETCH_BATCH_RECORDS: usize = 512;

/// What one consumed message was.
pub(crate) enum Fetched<'a> {
    Record(KafkaRecord<'a>),
    /// The end of a partition was reached (only with `enable.partition.eof`).
    PartitionEof,
    /// A fetch error of one partition.
    Error(rdsys::rd_kafka_resp_err_t),
}

/// The application queue the assigned partitions' records are forwarded to.
pub(crate) struct FetchQueue {
    queue: NonNull<rdsys::rd_kafka_queue_t>,
    /// The topic as librdkafka takes it, for [`FetchQueue::forward`].
    topic: CString,
    /// Slots for one batch call's messages; empty between calls.
    slots: Vec<*mut rdsys::rd_kafka_message_t>,
}

// SAFETY: librdkafka queue handles may be used from any thread (every queue operation takes
// the queue's lock), and `slots` holds no message between calls.
unsafe impl Send for FetchQueue {}

/// The messages of one batch call; destroys each exactly once when dropped.
struct Batch<'q> {
    slots: &'q mut Vec<*mut rdsys::rd_kafka_message_t>,
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        for message in self.slots.drain(..) {
            // SAFETY: each pointer came from one batch call and is destroyed only here.
            unsafe { rdsys::rd_kafka_message_destroy(message) };
        }
    }
}

impl FetchQueue {
    /// A new queue on consumer `client`; `None` when librdkafka cannot make one (the topic
    /// holds a NUL byte, or allocation failed), in which case records stay on the consumer
    /// queue.
    pub(crate) fn new(client: *mut rdsys::rd_kafka_t, topic: &str) -> Option<FetchQueue> {
        let topic = CString::new(topic).ok()?;
        // SAFETY: `client` is the live consumer handle the caller owns.
        let queue = NonNull::new(unsafe { rdsys::rd_kafka_queue_new(client) })?;
        Some(FetchQueue {
            queue,
            topic,
            slots: Vec::with_capacity(FETCH_BATCH_RECORDS),
        })
    }

    /// Forwards `partition`'s fetch queue here (records already in it move along); returns
    /// false when librdkafka knows no such partition handle.
    pub(crate) fn forward(&self, client: *mut rdsys::rd_kafka_t, partition: i32) -> bool {
        // SAFETY: `client` is the live consumer handle and `topic` a NUL-terminated string;
        // the partition queue handle returned is destroyed right after forwarding (the
        // forwarding itself holds its own reference to this queue).
        unsafe {
            let source =
                rdsys::rd_kafka_queue_get_partition(client, self.topic.as_ptr(), partition);
            if source.is_null() {
                return false;
            }
            rdsys::rd_kafka_queue_forward(source, self.queue.as_ptr());
            rdsys::rd_kafka_queue_destroy(source);
        }
        true
    }

    /// Takes at most `max` messages (and at most [`FETCH_BATCH_RECORDS`]) without waiting and
    /// hands each to `each`; returns how many messages were taken.
    pub(crate) fn consume(&mut self, max: usize, mut each: impl FnMut(Fetched<'_>)) -> usize {
        let want = max.min(FETCH_BATCH_RECORDS);
        if want == 0 {
            return 0;
        }
        self.slots.clear();
        // SAFETY: `slots` has room for `want` pointers; librdkafka writes at most that many
        // and returns how many it wrote (or -1, treated as none).
        let taken = unsafe {
            rdsys::rd_kafka_consume_batch_queue(
                self.queue.as_ptr(),
                0,
                self.slots.as_mut_ptr(),
                want,
            )
        };
        let taken = usize::try_from(taken).unwrap_or(0).min(want);
        // SAFETY: the first `taken` slots were just written with valid message pointers.
        unsafe { self.slots.set_len(taken) };
        let batch = Batch {
            slots: &mut self.slots,
        };
        for &message in batch.slots.iter() {
            // SAFETY: the message is alive until `batch` drops, after this loop.
            each(unsafe { fetched(message) });
        }
        taken
    }
}

impl Drop for FetchQueue {
    fn drop(&mut self) {
        // SAFETY: the handle was created in `new` and is destroyed only here; destroying the
        // owner's handle drops the records still queued.
        unsafe { rdsys::rd_kafka_queue_destroy(self.queue.as_ptr()) };
    }
}

/// Reads one consumed message.
///
/// # Safety
/// `message` must be a live consumed message that outlives `'a`.
unsafe fn fetched<'a>(message: *mut rdsys::rd_kafka_message_t) -> Fetched<'a> {
    // SAFETY: the caller guarantees the message is alive for `'a`.
    let raw: &'a rdsys::rd_kafka_message_t = unsafe { &*message };
    if raw.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        if raw.err == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__PARTITION_EOF {
            return Fetched::PartitionEof;
        }
        return Fetched::Error(raw.err);
    }
    let mut kind = rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
    // SAFETY: a live message; librdkafka only writes `kind`.
    let timestamp = unsafe { rdsys::rd_kafka_message_timestamp(message, &mut kind) };
    let key = (!raw.key.is_null())
        // SAFETY: a non-null key points at `key_len` bytes owned by the message.
        .then(|| unsafe { bytes(raw.key, raw.key_len) });
    Fetched::Record(KafkaRecord {
        partition: raw.partition,
        offset: raw.offset,
        // SAFETY: the payload (or null for a tombstone) is owned by the message.
        payload: unsafe { bytes(raw.payload, raw.len) },
        key,
        // -1 is librdkafka's "no timestamp", as rdkafka's `Timestamp::to_millis` reads it.
        timestamp_ms: (kind != rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
            && timestamp != -1)
            .then_some(timestamp),
        // SAFETY: the message is alive for `'a`.
        headers: unsafe { KafkaHeaders::of_raw(message) },
    })
}

/// `len` bytes at `data`, or empty for a null pointer.
///
/// # Safety
/// A non-null `data` must point at `len` readable bytes that outlive `'a`.
unsafe fn bytes<'a>(data: *const std::ffi::c_void, len: usize) -> &'a [u8] {
    if data.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }
}

//! [`ProduceQueue`]: many records per librdkafka call and delivery reports read straight from
//! their events, for [`super::KafkaProducer`].
//!
//! Owns the producer's record path. rdkafka's `BaseProducer::send` makes one
//! `rd_kafka_producev` call per record, which allocates the topic name as a C string and looks
//! the topic up by name under its lock for every record; its `poll` wraps every delivery
//! report in an `Arc`-held event and a borrowed message before the context's callback sees it.
//! Here the topic handle is looked up once, a run of records goes to librdkafka in one
//! `rd_kafka_produce_batch` call, and a delivery-report event's messages are read in one pass.
//!
//! Why it is correct:
//! * Partitioning is librdkafka's own: the batch call is made with `RD_KAFKA_PARTITION_UA`, so
//!   librdkafka runs the topic's configured partitioner for every record exactly as
//!   `rd_kafka_producev` does (murmur2 `consistent_random` for keyed records by default,
//!   sticky partitioning for keyless ones). The payload and key are copied
//!   (`RD_KAFKA_MSG_F_COPY`, librdkafka copies keys always), so nothing borrowed outlives the
//!   call; the token travels as the message's opaque, as before.
//! * The batch call stops enqueuing at the first record that finds the local queue full and
//!   marks it and every later record `__QUEUE_FULL`; records before it are enqueued or refused
//!   one by one (their own `err`), so records keep their order and each is reported once.
//! * The main queue carries the producer's delivery reports, errors and (rdkafka sets
//!   `log.queue`) log lines; [`ProduceQueue::poll`] serves all three as rdkafka's poll would
//!   (statistics and OAUTHBEARER refresh events, which the producer does not enable, are
//!   dropped). rdkafka's own poll, still used by `flush` and on drop, may serve the same queue
//!   in between; its reports reach the context callback instead, so none is lost.
//!
//! Why the unsafe code is sound: the topic and queue handles are created here, used only
//! through librdkafka's thread-safe calls and destroyed exactly once on drop, which the owner
//! runs before the client itself is destroyed. The message array the batch call reads holds
//! pointers into the caller's records only for that call. Each polled event is owned here
//! until `rd_kafka_event_destroy`, called exactly once per event (also when a callback
//! panics); its messages and strings are read only before that.

#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::os::raw::c_void;
use std::ptr::NonNull;

use rdkafka::bindings as rdsys;
use rdsys::rd_kafka_resp_err_t as RespErr;

/// Most records one librdkafka batch call takes (the message array is reused between calls).
pub const PRODUCE_BATCH_RECORDS: usize = 1_024;

/// librdkafka's `RD_KAFKA_PARTITION_UA` (a C macro the bindings lack): "run the partitioner".
const PARTITION_UA: i32 = -1;

/// One record to produce: key, value and the caller's token (returned with its delivery).
#[derive(Debug, Clone, Copy)]
pub struct OutRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub payload: &'a [u8],
    pub token: usize,
}

/// What one served event of the main queue was.
pub(crate) enum Served<'a> {
    /// One record's delivery report: its token and librdkafka's answer.
    Delivery(usize, RespErr),
    /// A client-level error, with librdkafka's reason.
    Error(RespErr, &'a str),
    /// A log line: syslog level, facility, text.
    Log(i32, &'a str, &'a str),
}

/// The producer's topic handle and its own reference to the client's main queue.
pub(crate) struct ProduceQueue {
    topic: NonNull<rdsys::rd_kafka_topic_t>,
    queue: NonNull<rdsys::rd_kafka_queue_t>,
    /// The batch call's message array; empty between calls.
    slots: Vec<rdsys::rd_kafka_message_t>,
}

// SAFETY: librdkafka topic and queue handles may be used from any thread (librdkafka locks
// internally), and `slots` holds no pointer between calls.
unsafe impl Send for ProduceQueue {}

/// A polled event, destroyed exactly once when dropped.
struct Event(NonNull<rdsys::rd_kafka_event_t>);

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: the event came from one queue poll and is destroyed only here.
        unsafe { rdsys::rd_kafka_event_destroy(self.0.as_ptr()) };
    }
}

/// A C string librdkafka owns, as text (lossy: librdkafka's texts are ASCII in practice).
///
/// # Safety
/// `text` is null or a NUL-terminated string alive for `'a`.
unsafe fn text<'a>(text: *const std::os::raw::c_char) -> std::borrow::Cow<'a, str> {
    if text.is_null() {
        return std::borrow::Cow::Borrowed("");
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(text) }.to_string_lossy()
}

impl ProduceQueue {
    /// The handles of producer `client` for `topic`; `None` when librdkafka cannot make them
    /// (a NUL byte in the topic, or an allocation failure).
    pub(crate) fn new(client: *mut rdsys::rd_kafka_t, topic: &str) -> Option<ProduceQueue> {
        let name = CString::new(topic).ok()?;
        // SAFETY: `client` is the live producer handle the caller owns; a null topic
        // configuration takes the client's default one, as `rd_kafka_producev` does.
        let topic = NonNull::new(unsafe {
            rdsys::rd_kafka_topic_new(client, name.as_ptr(), std::ptr::null_mut())
        })?;
        // SAFETY: as above; the queue reference is our own (destroyed on drop).
        let Some(queue) = NonNull::new(unsafe { rdsys::rd_kafka_queue_get_main(client) }) else {
            // SAFETY: the topic handle was made just above and is destroyed once.
            unsafe { rdsys::rd_kafka_topic_destroy(topic.as_ptr()) };
            return None;
        };
        Some(ProduceQueue {
            topic,
            queue,
            slots: Vec::with_capacity(PRODUCE_BATCH_RECORDS),
        })
    }

    /// Enqueues the leading records of `records` (at most [`PRODUCE_BATCH_RECORDS`]) with one
    /// call; `refused` gets the index and error of each record librdkafka would not take.
    /// Returns how many leading records were handled (enqueued or refused): fewer than asked
    /// only when the local queue filled, and the record at that index is the first not taken.
    pub(crate) fn produce(
        &mut self,
        records: &[OutRecord<'_>],
        mut refused: impl FnMut(usize, RespErr),
    ) -> usize {
        let records = &records[..records.len().min(PRODUCE_BATCH_RECORDS)];
        self.slots.clear();
        self.slots.extend(records.iter().map(|record| {
            rdsys::rd_kafka_message_t {
                err: RespErr::RD_KAFKA_RESP_ERR_NO_ERROR,
                rkt: std::ptr::null_mut(),
                partition: PARTITION_UA,
                // librdkafka only reads these (the records are copied).
                payload: record.payload.as_ptr() as *mut c_void,
                len: record.payload.len(),
                key: record
                    .key
                    .map_or(std::ptr::null_mut(), |key| key.as_ptr() as *mut c_void),
                key_len: record.key.map_or(0, <[u8]>::len),
                offset: 0,
                _private: record.token as *mut c_void,
            }
        }));
        // At most PRODUCE_BATCH_RECORDS, which fits a C int.
        let count = self.slots.len() as i32;
        // SAFETY: `topic` is live; the array holds `count` messages whose payload and key
        // point into `records`, which outlive the call; librdkafka copies them.
        unsafe {
            rdsys::rd_kafka_produce_batch(
                self.topic.as_ptr(),
                PARTITION_UA,
                rdsys::RD_KAFKA_MSG_F_COPY,
                self.slots.as_mut_ptr(),
                count,
            );
        }
        let mut handled = self.slots.len();
        for (index, slot) in self.slots.iter().enumerate() {
            match slot.err {
                RespErr::RD_KAFKA_RESP_ERR_NO_ERROR => {}
                RespErr::RD_KAFKA_RESP_ERR__QUEUE_FULL => {
                    handled = index;
                    break;
                }
                err => refused(index, err),
            }
        }
        self.slots.clear();
        handled
    }

    /// Serves at most `max_events` events of the main queue without waiting, each delivery
    /// report, error and log line through `each`; returns the number of events served.
    pub(crate) fn poll(&mut self, max_events: usize, mut each: impl FnMut(Served<'_>)) -> usize {
        for served in 0..max_events {
            // SAFETY: the queue handle is live; a zero timeout never waits.
            let Some(event) =
                NonNull::new(unsafe { rdsys::rd_kafka_queue_poll(self.queue.as_ptr(), 0) })
            else {
                return served;
            };
            let event = Event(event);
            let ev = event.0.as_ptr();
            // SAFETY: `ev` is live until `event` drops at the end of this iteration, and every
            // message or string read from it is used only before that.
            match unsafe { rdsys::rd_kafka_event_type(ev) } {
                rdsys::RD_KAFKA_EVENT_DR => loop {
                    let message = unsafe { rdsys::rd_kafka_event_message_next(ev) };
                    let Some(message) = (unsafe { message.as_ref() }) else {
                        break;
                    };
                    each(Served::Delivery(message._private as usize, message.err));
                },
                rdsys::RD_KAFKA_EVENT_ERROR => {
                    let err = unsafe { rdsys::rd_kafka_event_error(ev) };
                    let reason = unsafe { text(rdsys::rd_kafka_event_error_string(ev)) };
                    each(Served::Error(err, reason.trim()));
                }
                rdsys::RD_KAFKA_EVENT_LOG => {
                    let (mut facility, mut line, mut level) =
                        (std::ptr::null(), std::ptr::null(), 0);
                    let read = unsafe {
                        rdsys::rd_kafka_event_log(ev, &mut facility, &mut line, &mut level)
                    };
                    if read == 0 {
                        let (facility, line) = unsafe { (text(facility), text(line)) };
                        each(Served::Log(level, facility.trim(), line.trim()));
                    }
                }
                _ => {}
            }
        }
        max_events
    }
}

impl Drop for ProduceQueue {
    fn drop(&mut self) {
        // SAFETY: both handles were made in `new` and are destroyed only here, before the
        // client (the owner drops this first).
        unsafe {
            rdsys::rd_kafka_queue_destroy(self.queue.as_ptr());
            rdsys::rd_kafka_topic_destroy(self.topic.as_ptr());
        }
    }
}

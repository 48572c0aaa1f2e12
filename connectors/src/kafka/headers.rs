//! Zero-copy access to a consumed record's headers.
//!
//! Owns the header-reading `unsafe` of the Kafka module. rdkafka 0.39's safe header accessor
//! (`BorrowedHeaders::try_get`) calls `CStr::to_str().unwrap()` on the header name, so a
//! producer that writes a non-UTF-8 header name would panic the shard that consumes it. This
//! reader asks librdkafka for the same (name, value) pairs through `rd_kafka_header_get_all` and
//! substitutes [`INVALID_HEADER_NAME`] for a name that is not UTF-8: no panic, no allocation,
//! and the header still reaches the caller in record order.
//!
//! Why the unsafe code is sound: the pointers come from a live message (a `BorrowedMessage`, or
//! one of a batch the fetch queue owns until its callback returns) that the [`KafkaHeaders`]
//! borrows for `'a`, so librdkafka keeps the message, its header list and every
//! name and value buffer alive for at least `'a`. The list is parsed into the message on the
//! first request and never changed afterwards; a [`KafkaHeaders`] holds raw pointers, so it
//! stays on the thread that consumed the message (it is neither `Send` nor `Sync`); librdkafka returns NUL-terminated names and (pointer, size) values, and a null value
//! pointer means a null header value.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_void, CStr};
use std::marker::PhantomData;
use std::ptr;

use rdkafka::bindings as rdsys;
use rdkafka::message::BorrowedMessage;

/// The name reported for a header whose name is not valid UTF-8 (Kafka names are Java strings,
/// so only a misbehaving producer writes one).
pub const INVALID_HEADER_NAME: &str = "\u{FFFD}";

/// One header of a consumed record: its name and its value (`None` for a null value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KafkaHeader<'a> {
    pub name: &'a str,
    pub value: Option<&'a [u8]>,
}

/// The headers of one consumed record, in record order, borrowed from librdkafka.
///
/// Lazy: librdkafka parses a record's headers out of its fetch buffer on first request (and
/// keeps the result with the message), so a record whose headers nobody reads costs nothing.
#[derive(Clone, Copy)]
pub struct KafkaHeaders<'a> {
    /// The consumed message, or null for a record without headers.
    message: *const rdsys::rd_kafka_message_t,
    marker: PhantomData<&'a BorrowedMessage<'a>>,
}

impl std::fmt::Debug for KafkaHeaders<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// One message's parsed header list.
#[derive(Clone, Copy)]
struct List<'a> {
    list: *const rdsys::rd_kafka_headers_t,
    count: usize,
    marker: PhantomData<&'a ()>,
}

impl<'a> KafkaHeaders<'a> {
    /// The headers of `message`.
    pub(crate) fn of(message: &'a BorrowedMessage<'a>) -> KafkaHeaders<'a> {
        KafkaHeaders {
            message: message.ptr(),
            marker: PhantomData,
        }
    }

    /// The headers of the consumed message at `message`.
    ///
    /// # Safety
    /// `message` must be a live consumed message that outlives `'a`, read by this thread only
    /// while the headers are (librdkafka caches the parsed list in the message).
    pub(crate) unsafe fn of_raw(message: *const rdsys::rd_kafka_message_t) -> KafkaHeaders<'a> {
        KafkaHeaders {
            message,
            marker: PhantomData,
        }
    }

    /// The message's header list, parsed on first request; `None` when it has none.
    fn list(&self) -> Option<List<'a>> {
        if self.message.is_null() {
            return None;
        }
        let mut list: *mut rdsys::rd_kafka_headers_t = ptr::null_mut();
        // SAFETY: `message` is live for `'a` (the constructors' contract); librdkafka writes
        // the message's own header list (or leaves null and reports NOENT) into `list`.
        let err = unsafe { rdsys::rd_kafka_message_headers(self.message, &mut list) };
        if err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || list.is_null() {
            return None;
        }
        // SAFETY: `list` is non-null and owned by the message, alive for `'a`.
        let count = unsafe { rdsys::rd_kafka_header_cnt(list) };
        Some(List {
            list,
            count,
            marker: PhantomData,
        })
    }

    /// How many headers the record carries.
    pub fn len(&self) -> usize {
        self.list().map_or(0, |list| list.count)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The header at `index` in record order, or `None` past the end.
    pub fn get(&self, index: usize) -> Option<KafkaHeader<'a>> {
        self.list()?.get(index)
    }

    /// Every header in record order.
    pub fn iter(&self) -> impl Iterator<Item = KafkaHeader<'a>> + 'a {
        let list = self.list();
        let count = list.map_or(0, |list| list.count);
        (0..count).filter_map(move |index| list.and_then(|list| list.get(index)))
    }
}

impl<'a> List<'a> {
    fn get(&self, index: usize) -> Option<KafkaHeader<'a>> {
        if index >= self.count {
            return None;
        }
        let mut name: *const c_char = ptr::null();
        let mut value: *const c_void = ptr::null();
        let mut size: usize = 0;
        // SAFETY: `list` is the live header list of a message alive for `'a`, and `index` is
        // in range; librdkafka only writes the three out-pointers.
        let err = unsafe {
            rdsys::rd_kafka_header_get_all(self.list, index, &mut name, &mut value, &mut size)
        };
        if err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
            return None;
        }
        // SAFETY: librdkafka stores header names NUL-terminated, alive as long as the list.
        let name_bytes = unsafe { CStr::from_ptr(name) }.to_bytes();
        let name = std::str::from_utf8(name_bytes).unwrap_or(INVALID_HEADER_NAME);
        let value = if value.is_null() {
            None
        } else if size == 0 {
            Some(&[][..])
        } else {
            // SAFETY: a non-null value points at `size` bytes owned by the list, alive for `'a`.
            Some(unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) })
        };
        Some(KafkaHeader { name, value })
    }
}

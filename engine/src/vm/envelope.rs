//! The source envelope as the VM reads it: the transport headers of an ingest group's payloads
//! ([`HeaderTable`]) and, per evaluated row, which payload the row came from plus the source's
//! `metadata.` columns ([`EnvelopeView`]). `read_header` / `read_headers` look names up here.
//!
//! The table is filled by the runtime (`runtime::envelope::EnvelopeBuilder`) and only read
//! here. Why lookups are correct:
//! * **Payload-relative.** Payload `p`'s headers are the half-open span `starts[p]..starts[p+1]`
//!   of `spans`, kept in transport order, so "the first value" and "every value in order" are a
//!   forward scan of that span; an index past the table reads as a payload without headers.
//! * **One name rule per table.** Names compare ASCII case-insensitively when the table was
//!   made with [`NameRule::AsciiCaseInsensitive`] (HTTP, RFC 9110 §5.1) and byte-exactly with
//!   [`NameRule::Exact`] (Kafka record header keys); the stored names are left as received.
//! * **UTF-8 only.** The table stores `&str` text, so every value it returns is valid UTF-8;
//!   the builder decides what happens to bytes that are not (they are skipped).

use std::ops::Range;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, UInt32Array};

/// How header names compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// Byte-exact (Kafka record header keys).
    Exact,
    /// ASCII case-insensitive (HTTP field names).
    AsciiCaseInsensitive,
}

/// Where one header's name and value sit in [`HeaderTable::text`]: `name_start..value_start`
/// is the name, `value_start..value_end` the value.
#[derive(Debug, Clone, Copy)]
struct Span {
    name_start: usize,
    value_start: usize,
    value_end: usize,
}

/// The headers of an ingest group's payloads, in payload order and, within a payload, in
/// transport order. Immutable once shared (the runtime wraps it in an `Arc`).
#[derive(Debug, Clone)]
pub struct HeaderTable {
    rule: NameRule,
    text: String,
    spans: Vec<Span>,
    /// `starts[p]..starts[p + 1]` are payload `p`'s spans; `starts[0] == 0`.
    starts: Vec<usize>,
}

impl HeaderTable {
    /// An empty table whose names compare by `rule`.
    pub fn new(rule: NameRule) -> HeaderTable {
        HeaderTable::with_capacity(rule, 0, 0, 0)
    }

    /// An empty table with room for `payloads` payloads, `headers` headers and `bytes` bytes.
    pub fn with_capacity(
        rule: NameRule,
        payloads: usize,
        headers: usize,
        bytes: usize,
    ) -> HeaderTable {
        let mut starts = Vec::with_capacity(payloads + 1);
        starts.push(0);
        HeaderTable {
            rule,
            text: String::with_capacity(bytes),
            spans: Vec::with_capacity(headers),
            starts,
        }
    }

    pub fn rule(&self) -> NameRule {
        self.rule
    }

    /// Closed payloads.
    pub fn payloads(&self) -> usize {
        self.starts.len() - 1
    }

    /// Headers pushed so far (closed payloads and the open one).
    pub fn headers(&self) -> usize {
        self.spans.len()
    }

    /// Bytes of names and values held.
    pub fn bytes(&self) -> usize {
        self.text.len()
    }

    /// Appends one header to the open payload.
    pub fn push(&mut self, name: &str, value: &str) {
        let name_start = self.text.len();
        self.text.push_str(name);
        let value_start = self.text.len();
        self.text.push_str(value);
        self.spans.push(Span {
            name_start,
            value_start,
            value_end: self.text.len(),
        });
    }

    /// Closes the open payload: it becomes payload `payloads() - 1`.
    pub fn close_payload(&mut self) {
        self.starts.push(self.spans.len());
    }

    /// Forgets every header of the open payload.
    pub fn discard_open(&mut self) {
        let start = self.starts.last().copied().unwrap_or(0);
        let text_end = self
            .spans
            .get(start)
            .map_or(self.text.len(), |s| s.name_start);
        self.spans.truncate(start);
        self.text.truncate(text_end);
    }

    fn span_range(&self, payload: u32) -> Range<usize> {
        let p = payload as usize;
        match (self.starts.get(p), self.starts.get(p + 1)) {
            (Some(&start), Some(&end)) => start..end,
            _ => 0..0,
        }
    }

    fn name_matches(&self, stored: &str, wanted: &str) -> bool {
        match self.rule {
            NameRule::Exact => stored == wanted,
            NameRule::AsciiCaseInsensitive => stored.eq_ignore_ascii_case(wanted),
        }
    }

    /// Every value of `name` in payload `payload`, in transport order.
    pub fn values<'t>(&'t self, payload: u32, name: &'t str) -> impl Iterator<Item = &'t str> + 't {
        self.spans
            .get(self.span_range(payload))
            .unwrap_or(&[])
            .iter()
            .filter(move |s| self.name_matches(&self.text[s.name_start..s.value_start], name))
            .map(|s| &self.text[s.value_start..s.value_end])
    }

    /// The first value of `name` in payload `payload`.
    pub fn first<'t>(&'t self, payload: u32, name: &'t str) -> Option<&'t str> {
        self.values(payload, name).next()
    }
}

/// What one evaluation reads of the envelope: for each of its rows the payload it came from,
/// the group's header table, and the `metadata.` columns (one per metadata field, each with a
/// value per row; empty for a source without metadata).
#[derive(Debug, Clone)]
pub struct EnvelopeView {
    headers: Arc<HeaderTable>,
    payloads: UInt32Array,
    metadata: Vec<ArrayRef>,
}

impl EnvelopeView {
    /// A view over `payloads.len()` rows. Every metadata column must have as many rows.
    pub fn new(
        headers: Arc<HeaderTable>,
        payloads: UInt32Array,
        metadata: Vec<ArrayRef>,
    ) -> EnvelopeView {
        EnvelopeView {
            headers,
            payloads,
            metadata,
        }
    }

    pub fn num_rows(&self) -> usize {
        self.payloads.len()
    }

    pub fn headers(&self) -> &HeaderTable {
        &self.headers
    }

    /// The payload of each row (never null).
    pub fn payloads(&self) -> &UInt32Array {
        &self.payloads
    }

    /// The `metadata.` columns, in the order the plan resolves them.
    pub fn metadata(&self) -> &[ArrayRef] {
        &self.metadata
    }

    /// The view of rows `indices` of this one (in that order).
    pub fn take(&self, indices: &UInt32Array) -> EnvelopeView {
        let payloads = arrow_select::take::take(&self.payloads, indices, None)
            .ok()
            .and_then(|a| a.as_any().downcast_ref::<UInt32Array>().cloned())
            .unwrap_or_else(|| UInt32Array::from(Vec::<u32>::new()));
        let metadata = self
            .metadata
            .iter()
            .map(|c| {
                arrow_select::take::take(c.as_ref(), indices, None)
                    .unwrap_or_else(|_| arrow_array::new_null_array(c.data_type(), indices.len()))
            })
            .collect();
        EnvelopeView {
            headers: self.headers.clone(),
            payloads,
            metadata,
        }
    }
}

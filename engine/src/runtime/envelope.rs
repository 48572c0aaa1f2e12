//! The source envelope of an ingest group (spec "Header Context", `metadata.<field>`): the
//! transport headers of each payload and the per-row source metadata, captured while a source
//! assembles a group ([`EnvelopeBuilder`]) and carried with the group's rows through the
//! ingestor node ([`Envelope`]), where FILTER WHERE, route SET / WHERE / branch keys and
//! ON MESSAGE ERROR SEND TO records read it through a [`crate::vm::EnvelopeView`].
//!
//! Decisions (the spec is silent on them):
//! * **Name case.** [`EnvelopeBuilder::http`] compares names ASCII case-insensitively (HTTP
//!   field names are case-insensitive, RFC 9110 §5.1); [`EnvelopeBuilder::new`] compares them
//!   exactly (Kafka record header keys are opaque strings). Names are stored as received.
//! * **Non-UTF-8.** The spec exposes "UTF-8 values": a header whose name or value is not valid
//!   UTF-8 is skipped (it reads as absent), never replaced lossily.
//!
//! Why it is correct:
//! * **Rows follow payloads.** [`EnvelopeBuilder::end_payload`] appends one payload index per
//!   decoded row, in the order the decoder appended the rows, so row `i` of the group's batch
//!   has payload `payloads[i]`; a payload with no rows, or whose decode failed
//!   ([`EnvelopeBuilder::abandon_payload`]), leaves no headers and no rows behind.
//! * **Filtering keeps the pairing.** The ingestor node filters [`Envelope`] with the very
//!   predicate it applies to its input columns ([`Envelope::filter`]), so rows and payload
//!   indices stay aligned through FILTER WHERE; routes and error records then read views of
//!   exactly their rows.
//! * **Cheap to carry.** The header table is shared (`Arc`); per-row data are Arrow arrays,
//!   which clone by reference count.

use std::sync::Arc;

use arrow_array::builder::{Int32Builder, Int64Builder};
use arrow_array::{Array, ArrayRef, Int32Array, Int64Array, StringArray, UInt32Array};
use arrow_select::filter::FilterPredicate;

use super::plan::SourcePlan;
use crate::vm::{EnvelopeView, HeaderTable, NameRule};

/// The `metadata.` fields a view provides, in column order (the plan resolves
/// `metadata.<field>` to the field's position here; `runtime::plan::route`).
pub const METADATA_FIELDS: [&str; 3] = ["topic", "partition", "offset"];

/// The header capture of one intake; reused across its groups.
pub struct EnvelopeBuilder {
    table: HeaderTable,
    /// Whether a payload is open (between `begin_payload` and `end_payload`/`abandon_payload`).
    open: bool,
    /// One payload index per row.
    payloads: Vec<u32>,
    /// Per-row Kafka partition and offset; filled only once a payload carried them.
    partitions: Int32Builder,
    offsets: Int64Builder,
    kafka: bool,
}

impl Default for EnvelopeBuilder {
    fn default() -> Self {
        EnvelopeBuilder::new()
    }
}

impl EnvelopeBuilder {
    /// A builder whose header names compare exactly (Kafka record headers).
    pub fn new() -> Self {
        EnvelopeBuilder::with_rule(NameRule::Exact)
    }

    /// A builder whose header names compare ASCII case-insensitively (HTTP headers).
    pub fn http() -> Self {
        EnvelopeBuilder::with_rule(NameRule::AsciiCaseInsensitive)
    }

    fn with_rule(rule: NameRule) -> Self {
        EnvelopeBuilder {
            table: HeaderTable::new(rule),
            open: false,
            payloads: Vec::new(),
            partitions: Int32Builder::new(),
            offsets: Int64Builder::new(),
            kafka: false,
        }
    }

    /// Starts a payload's headers (call before `push_header`). An open payload is forgotten.
    pub fn begin_payload(&mut self) {
        self.table.discard_open();
        self.open = true;
    }

    /// One header of the current payload, in transport order. A name or value that is not
    /// UTF-8 is skipped (see the module docs). Starts a payload if none is open.
    pub fn push_header(&mut self, name: &[u8], value: &[u8]) {
        self.open = true;
        if let (Ok(name), Ok(value)) = (std::str::from_utf8(name), std::str::from_utf8(value)) {
            self.table.push(name, value);
        }
    }

    /// Ends the current payload: it decoded into `rows` rows (0: it is dropped), with the
    /// source metadata of these rows (Kafka: partition and offset; None for sources without).
    pub fn end_payload(&mut self, rows: u32, kafka: Option<(i32, i64)>) {
        self.open = false;
        if rows == 0 {
            self.table.discard_open();
            return;
        }
        self.table.close_payload();
        let payload = (self.table.payloads() - 1) as u32;
        let rows = rows as usize;
        if kafka.is_some() && !self.kafka {
            // Earlier rows of this group had no metadata: null for them.
            self.kafka = true;
            self.partitions.append_nulls(self.payloads.len());
            self.offsets.append_nulls(self.payloads.len());
        }
        self.payloads.extend(std::iter::repeat_n(payload, rows));
        if self.kafka {
            match kafka {
                Some((partition, offset)) => {
                    self.partitions.append_value_n(partition, rows);
                    self.offsets.append_value_n(offset, rows);
                }
                None => {
                    self.partitions.append_nulls(rows);
                    self.offsets.append_nulls(rows);
                }
            }
        }
    }

    /// Forgets the current payload (its decode failed).
    pub fn abandon_payload(&mut self) {
        self.open = false;
        self.table.discard_open();
    }

    /// Rows captured so far (closed payloads only).
    pub fn rows(&self) -> usize {
        self.payloads.len()
    }

    /// The envelope of the group so far; resets the builder (an open payload is forgotten).
    pub fn finish(&mut self) -> Envelope {
        self.table.discard_open();
        self.open = false;
        let next = HeaderTable::with_capacity(
            self.table.rule(),
            self.table.payloads(),
            self.table.headers(),
            self.table.bytes(),
        );
        let table = std::mem::replace(&mut self.table, next);
        let rows = self.payloads.len();
        let payloads = UInt32Array::from(std::mem::replace(
            &mut self.payloads,
            Vec::with_capacity(rows),
        ));
        let kafka = std::mem::take(&mut self.kafka)
            .then(|| (self.partitions.finish(), self.offsets.finish()));
        Envelope {
            headers: Arc::new(table),
            payloads,
            kafka,
        }
    }
}

/// A group's (or a filtered part of a group's) envelope: one payload index per row, the
/// payloads' headers and the rows' source metadata. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct Envelope {
    headers: Arc<HeaderTable>,
    payloads: UInt32Array,
    kafka: Option<(Int32Array, Int64Array)>,
}

impl Envelope {
    pub fn num_rows(&self) -> usize {
        self.payloads.len()
    }

    /// The rows `predicate` keeps (the predicate the node applies to its input columns).
    pub fn filter(&self, predicate: &FilterPredicate) -> Envelope {
        let payloads = predicate
            .filter(&self.payloads)
            .ok()
            .and_then(|a| a.as_any().downcast_ref::<UInt32Array>().cloned())
            .unwrap_or_else(|| UInt32Array::from(Vec::<u32>::new()));
        let kafka = self.kafka.as_ref().and_then(|(partitions, offsets)| {
            let partitions = predicate.filter(partitions).ok()?;
            let offsets = predicate.filter(offsets).ok()?;
            Some((
                partitions.as_any().downcast_ref::<Int32Array>()?.clone(),
                offsets.as_any().downcast_ref::<Int64Array>()?.clone(),
            ))
        });
        Envelope {
            headers: self.headers.clone(),
            payloads,
            kafka,
        }
    }

    /// The view expressions read: the payload of each row, the headers, and the
    /// [`METADATA_FIELDS`] columns (`topic` is the ingestor's constant topic). A source with
    /// neither topic nor per-row metadata has no metadata columns.
    pub fn view(&self, topic: Option<&str>) -> EnvelopeView {
        let n = self.num_rows();
        let metadata: Vec<ArrayRef> = if topic.is_none() && self.kafka.is_none() {
            Vec::new()
        } else {
            let topic: ArrayRef = match topic {
                Some(topic) => {
                    Arc::new(StringArray::from_iter_values(std::iter::repeat_n(topic, n)))
                }
                None => Arc::new(StringArray::new_null(n)),
            };
            let (partition, offset): (ArrayRef, ArrayRef) = match &self.kafka {
                Some((p, o)) => (Arc::new(p.clone()), Arc::new(o.clone())),
                None => (
                    Arc::new(Int32Array::new_null(n)),
                    Arc::new(Int64Array::new_null(n)),
                ),
            };
            vec![topic, partition, offset]
        };
        EnvelopeView::new(self.headers.clone(), self.payloads.clone(), metadata)
    }
}

/// The constant `metadata.topic` of an ingestor's source (None for sources without one).
pub fn metadata_topic(source: &SourcePlan) -> Option<&str> {
    match source {
        SourcePlan::Kafka(kafka) => Some(kafka.topic.as_str()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(envelope: &Envelope, row: usize, name: &str) -> Vec<String> {
        let view = envelope.view(None);
        let payload = view.payloads().value(row);
        view.headers()
            .values(payload, name)
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn rows_follow_payloads_and_failed_payloads_leave_nothing() {
        let mut builder = EnvelopeBuilder::http();
        builder.begin_payload();
        builder.push_header(b"X-Tenant", b"a");
        builder.push_header(b"x-tag", b"1");
        builder.push_header(b"X-TAG", b"2");
        builder.end_payload(2, None);
        builder.begin_payload();
        builder.push_header(b"x-tenant", b"broken");
        builder.abandon_payload();
        builder.begin_payload();
        builder.push_header(b"x-tenant", b"empty");
        builder.end_payload(0, None);
        builder.begin_payload();
        builder.push_header(b"x-tenant", b"b");
        builder.push_header(b"x-bin", &[0xff, 0xfe]);
        builder.end_payload(1, None);
        let envelope = builder.finish();
        assert_eq!(envelope.num_rows(), 3);
        assert_eq!(values(&envelope, 0, "x-tenant"), ["a"]);
        assert_eq!(values(&envelope, 1, "X-Tag"), ["1", "2"]);
        assert_eq!(values(&envelope, 2, "x-tenant"), ["b"]);
        assert!(values(&envelope, 2, "x-bin").is_empty());
        assert!(values(&envelope, 2, "x-tag").is_empty());
        // Reused: the next group starts empty.
        builder.begin_payload();
        builder.push_header(b"x-tenant", b"c");
        builder.end_payload(1, None);
        let next = builder.finish();
        assert_eq!(next.num_rows(), 1);
        assert_eq!(values(&next, 0, "x-tenant"), ["c"]);
    }

    #[test]
    fn exact_names_and_kafka_metadata_survive_filtering() {
        let mut builder = EnvelopeBuilder::new();
        builder.begin_payload();
        builder.push_header(b"Key", b"first");
        builder.end_payload(1, Some((3, 40)));
        builder.begin_payload();
        builder.push_header(b"Key", b"second");
        builder.end_payload(2, Some((4, 41)));
        let envelope = builder.finish();
        assert!(values(&envelope, 0, "key").is_empty());
        let mask = arrow_array::BooleanArray::from(vec![false, true, false]);
        let predicate = arrow_select::filter::FilterBuilder::new(&mask).build();
        let kept = envelope.filter(&predicate);
        assert_eq!(kept.num_rows(), 1);
        assert_eq!(values(&kept, 0, "Key"), ["second"]);
        let view = kept.view(Some("orders"));
        let [topic, partition, offset] = view.metadata() else {
            panic!("three metadata columns");
        };
        use arrow_array::cast::AsArray;
        assert_eq!(topic.as_string::<i32>().value(0), "orders");
        let partition = partition.as_primitive::<arrow_array::types::Int32Type>();
        assert_eq!(partition.value(0), 4);
        let offset = offset.as_primitive::<arrow_array::types::Int64Type>();
        assert_eq!(offset.value(0), 41);
    }
}

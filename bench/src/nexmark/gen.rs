//! Nexmark events as Arrow batches: the `nexmark` crate's generator with a pinned base time,
//! its events split into the three streams (person, auction, bid) and laid out in the column
//! order of `bench/nexmark/schema.nspl`.
//!
//! Reproducible by construction: the crate seeds every event's random fields from the event's
//! id (not from a shared stream), its event times are `base time + n × 100 µs` at the default
//! 10,000 events/s with one generator and no out-of-order groups, and we pin the base time
//! ([`BASE_TIME_MS`]) instead of taking the crate's default (the wall clock). So event `n` is the
//! same in every run, whichever stream filter produced it.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use nervix::net::session::frame::ExpectedField;
use nexmark::config::NexmarkConfig;
use nexmark::event::{Auction, Bid, Event, EventType, Person};
use nexmark::EventGenerator;

/// The first event's time: 2023-11-14T22:13:20Z, a multiple of 10 s, so Nexmark's tumbling
/// 10 s and hopping 2 s windows start on the first event.
pub const BASE_TIME_MS: u64 = 1_700_000_000_000;
/// [`BASE_TIME_MS`] as an RFC 3339 instant (a paced domain's `START AT`).
pub const BASE_TIME_RFC3339: &str = "2023-11-14T22:13:20Z";

/// Nanoseconds per generator millisecond (DATETIME is nanoseconds).
const NS_PER_MS: i64 = 1_000_000;

/// The generator's default event rate, events per second of event time (the crate's).
pub const DEFAULT_EVENTS_PER_S: usize = 10_000;

/// The generator configuration every run uses: the crate's defaults (one generator, in order,
/// 1 person : 3 auctions : 46 bids) with the base time pinned, at `events_per_s` events per
/// second of event time (a steady rate).
pub fn config(events_per_s: usize) -> NexmarkConfig {
    NexmarkConfig {
        base_time: BASE_TIME_MS,
        first_rate: events_per_s,
        next_rate: events_per_s,
        ..NexmarkConfig::default()
    }
}

/// The first `events` events of the stream, split by kind (each kind in event order).
#[derive(Debug, Default, Clone)]
pub struct Events {
    pub persons: Vec<Person>,
    pub auctions: Vec<Auction>,
    pub bids: Vec<Bid>,
}

impl Events {
    /// The first `events` events at the default rate.
    pub fn generate(events: usize) -> Events {
        Events::generate_at(events, DEFAULT_EVENTS_PER_S)
    }

    /// The first `events` events at `events_per_s` events per second of event time.
    pub fn generate_at(events: usize, events_per_s: usize) -> Events {
        let mut out = Events::default();
        for event in EventGenerator::new(config(events_per_s)).take(events) {
            match event {
                Event::Person(p) => out.persons.push(p),
                Event::Auction(a) => out.auctions.push(a),
                Event::Bid(b) => out.bids.push(b),
            }
        }
        out
    }
}

/// The first `count` bids of the stream (the same bids [`Events::generate`] yields, without
/// generating the persons and auctions between them).
pub fn bids(count: usize) -> Vec<Bid> {
    EventGenerator::new(config(DEFAULT_EVENTS_PER_S))
        .with_type_filter(EventType::Bid)
        .take(count)
        .filter_map(|event| match event {
            Event::Bid(b) => Some(b),
            _ => None,
        })
        .collect()
}

/// A generator id or price as I64 (they are far below 2^63 for any run this bench makes).
fn int(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A generator time (ms since the epoch) as DATETIME nanoseconds.
pub fn time_ns(ms: u64) -> i64 {
    i64::try_from(ms)
        .unwrap_or(i64::MAX / NS_PER_MS)
        .saturating_mul(NS_PER_MS)
}

fn datetime() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

fn fields(columns: &[(&str, DataType)]) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|(name, ty)| Field::new(*name, ty.clone(), false))
            .collect::<Vec<_>>(),
    ))
}

/// `CREATE SCHEMA person` as Arrow.
pub fn person_schema() -> SchemaRef {
    use DataType::{Int64, Utf8};
    fields(&[
        ("id", Int64),
        ("name", Utf8),
        ("email_address", Utf8),
        ("credit_card", Utf8),
        ("city", Utf8),
        ("state", Utf8),
        ("date_time", datetime()),
        ("extra", Utf8),
    ])
}

/// `CREATE SCHEMA auction` as Arrow.
pub fn auction_schema() -> SchemaRef {
    use DataType::{Int64, Utf8};
    fields(&[
        ("id", Int64),
        ("item_name", Utf8),
        ("description", Utf8),
        ("initial_bid", Int64),
        ("reserve", Int64),
        ("date_time", datetime()),
        ("expires", datetime()),
        ("seller", Int64),
        ("category", Int64),
        ("extra", Utf8),
    ])
}

/// `CREATE SCHEMA bid` as Arrow.
pub fn bid_schema() -> SchemaRef {
    use DataType::{Int64, Utf8};
    fields(&[
        ("auction", Int64),
        ("bidder", Int64),
        ("price", Int64),
        ("channel", Utf8),
        ("url", Utf8),
        ("date_time", datetime()),
        ("extra", Utf8),
    ])
}

/// The fields a producer declares for `schema` (one of the three above): NSPL type names.
pub fn expected_fields(schema: &Schema) -> Vec<ExpectedField> {
    schema
        .fields()
        .iter()
        .map(|field| ExpectedField {
            name: field.name().clone(),
            type_text: match field.data_type() {
                DataType::Int64 => "I64",
                DataType::Utf8 => "STRING",
                _ => "DATETIME",
            }
            .to_string(),
            optional: false,
            sensitive: false,
        })
        .collect()
}

fn strings<'a>(values: impl Iterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(values))
}

fn ints(values: impl Iterator<Item = usize>) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(values.map(int)))
}

fn times(values: impl Iterator<Item = u64>) -> ArrayRef {
    Arc::new(TimestampNanosecondArray::from_iter_values(values.map(time_ns)).with_timezone("UTC"))
}

fn assemble(schema: SchemaRef, columns: Vec<ArrayRef>) -> RecordBatch {
    // The columns are built from the schema's own field list, so this cannot mismatch.
    RecordBatch::try_new(schema, columns).expect("columns follow the schema")
}

/// Bids as batches of at most `batch_rows` rows (`batch_rows` ≥ 1).
pub fn bid_batches(bids: &[Bid], batch_rows: usize) -> Vec<RecordBatch> {
    bids.chunks(batch_rows.max(1))
        .map(|chunk| {
            assemble(
                bid_schema(),
                vec![
                    ints(chunk.iter().map(|b| b.auction)),
                    ints(chunk.iter().map(|b| b.bidder)),
                    ints(chunk.iter().map(|b| b.price)),
                    strings(chunk.iter().map(|b| b.channel.as_str())),
                    strings(chunk.iter().map(|b| b.url.as_str())),
                    times(chunk.iter().map(|b| b.date_time)),
                    strings(chunk.iter().map(|b| b.extra.as_str())),
                ],
            )
        })
        .collect()
}

/// Persons as batches of at most `batch_rows` rows.
pub fn person_batches(persons: &[Person], batch_rows: usize) -> Vec<RecordBatch> {
    persons
        .chunks(batch_rows.max(1))
        .map(|chunk| {
            assemble(
                person_schema(),
                vec![
                    ints(chunk.iter().map(|p| p.id)),
                    strings(chunk.iter().map(|p| p.name.as_str())),
                    strings(chunk.iter().map(|p| p.email_address.as_str())),
                    strings(chunk.iter().map(|p| p.credit_card.as_str())),
                    strings(chunk.iter().map(|p| p.city.as_str())),
                    strings(chunk.iter().map(|p| p.state.as_str())),
                    times(chunk.iter().map(|p| p.date_time)),
                    strings(chunk.iter().map(|p| p.extra.as_str())),
                ],
            )
        })
        .collect()
}

/// Auctions as batches of at most `batch_rows` rows.
pub fn auction_batches(auctions: &[Auction], batch_rows: usize) -> Vec<RecordBatch> {
    auctions
        .chunks(batch_rows.max(1))
        .map(|chunk| {
            assemble(
                auction_schema(),
                vec![
                    ints(chunk.iter().map(|a| a.id)),
                    strings(chunk.iter().map(|a| a.item_name.as_str())),
                    strings(chunk.iter().map(|a| a.description.as_str())),
                    ints(chunk.iter().map(|a| a.initial_bid)),
                    ints(chunk.iter().map(|a| a.reserve)),
                    times(chunk.iter().map(|a| a.date_time)),
                    times(chunk.iter().map(|a| a.expires)),
                    ints(chunk.iter().map(|a| a.seller)),
                    ints(chunk.iter().map(|a| a.category)),
                    strings(chunk.iter().map(|a| a.extra.as_str())),
                ],
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_streams_are_the_same_every_time_and_start_at_the_pinned_base_time() {
        let a = Events::generate(2_000);
        let b = Events::generate(2_000);
        assert_eq!(a.bids, b.bids);
        assert_eq!(a.persons, b.persons);
        assert_eq!(a.persons[0].date_time, BASE_TIME_MS);
        // 1 : 3 : 46 per 50 events.
        assert_eq!(
            (a.persons.len(), a.auctions.len(), a.bids.len()),
            (40, 120, 1_840)
        );
        // The bid-only generator yields the same bids.
        assert_eq!(bids(1_840), a.bids);
    }

    #[test]
    fn batches_follow_the_schemas_and_split_at_the_row_bound() {
        let events = Events::generate(1_000);
        let batches = bid_batches(&events.bids, 400);
        assert_eq!(
            batches
                .iter()
                .map(RecordBatch::num_rows)
                .collect::<Vec<_>>(),
            vec![400, 400, 120]
        );
        assert_eq!(batches[0].schema(), bid_schema());
        let persons = person_batches(&events.persons, 400);
        assert_eq!(persons[0].schema(), person_schema());
        let auctions = auction_batches(&events.auctions, 400);
        assert_eq!(auctions[0].schema(), auction_schema());
        let fields = expected_fields(&auction_schema());
        assert_eq!(fields[6].name, "expires");
        assert_eq!(fields[6].type_text, "DATETIME");
        assert_eq!(fields[0].type_text, "I64");
    }
}

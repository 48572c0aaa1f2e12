//! Helpers for data-plane tests: scripts through the console, order batches, the client
//! library on a current-thread runtime.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use nervix_net::client::{Consumer, Delivery};
use nervix_net::session::frame::ExpectedField;

use super::Client;

/// Runs every statement of `script` through the console; each must succeed.
pub fn define(client: &mut Client, script: &str) {
    for statement in script
        .split_inclusive(';')
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != ";")
    {
        client.ok(statement);
    }
}

/// Producer field declarations: `(name, NSPL type)` all required, none sensitive.
pub fn fields(spec: &[(&str, &str)]) -> Vec<ExpectedField> {
    spec.iter()
        .map(|(name, ty)| ExpectedField {
            name: name.to_string(),
            type_text: ty.to_string(),
            optional: false,
            sensitive: false,
        })
        .collect()
}

/// A batch of `(tenant, item, amount)` rows.
pub fn orders(rows: &[(&str, &str, i64)]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("tenant", DataType::Utf8, false),
        Field::new("item", DataType::Utf8, false),
        Field::new("amount", DataType::Int64, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
    ];
    RecordBatch::try_new(schema, columns).expect("batch")
}

pub fn order_fields() -> Vec<ExpectedField> {
    fields(&[("tenant", "STRING"), ("item", "STRING"), ("amount", "I64")])
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// `(tenant, item, amount)` of every row.
pub fn rows_of(batch: &RecordBatch) -> Vec<(String, String, i64)> {
    let strings = |i: usize| {
        batch
            .column(i)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("a string column")
            .clone()
    };
    let (tenant, item) = (strings(0), strings(1));
    let amount = batch
        .column(2)
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("an I64 column");
    (0..batch.num_rows())
        .map(|i| {
            (
                tenant.value(i).to_string(),
                item.value(i).to_string(),
                amount.value(i),
            )
        })
        .collect()
}

/// The next delivery within `seconds`, or a test failure naming what was awaited.
pub async fn next_delivery(consumer: &mut Consumer, seconds: u64) -> Delivery {
    tokio::time::timeout(Duration::from_secs(seconds), consumer.next())
        .await
        .expect("a delivery in time")
        .expect("the consumer is healthy")
        .expect("the consumer was not ended")
}

/// Every outstanding batch's outcome within `seconds` (`Producer::drain`), or a test failure.
pub async fn drain(
    producer: &mut nervix_net::client::Producer,
    seconds: u64,
) -> Vec<(u64, nervix_net::session::frame::Outcome)> {
    tokio::time::timeout(Duration::from_secs(seconds), producer.drain())
        .await
        .expect("the outcomes in time")
        .expect("the producer drains")
}

/// That `outcomes` are `batches` outcomes, all `Completed`.
pub fn assert_completed(outcomes: &[(u64, nervix_net::session::frame::Outcome)], batches: usize) {
    assert_eq!(outcomes.len(), batches, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|(_, o)| *o == nervix_net::session::frame::Outcome::Completed),
        "{outcomes:?}"
    );
}

/// Whether a delivery arrives within `millis` (none expected).
pub async fn quiet_for(consumer: &mut Consumer, millis: u64) -> bool {
    tokio::time::timeout(Duration::from_millis(millis), consumer.next())
        .await
        .is_err()
}

/// GET `path` from the node's metrics listener; the body.
pub fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("metrics listener");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    response
}

/// The value of one sample line `name{labels} value` in Prometheus text, if present.
pub fn metric(text: &str, name_and_labels: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(name_and_labels) && l[name_and_labels.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Opens a consumer on `emitter` that must succeed.
pub async fn consumer(
    session: &nervix_net::client::Session,
    domain: &str,
    emitter: &str,
    credit_batches: u32,
) -> Consumer {
    session
        .open_consumer(nervix_net::client::ConsumerOptions {
            domain: domain.into(),
            emitter: emitter.into(),
            credit_batches,
        })
        .await
        .unwrap_or_else(|e| panic!("consumer on {domain}.{emitter}: {e}"))
}

/// Opens a producer on `ingestor` that must succeed.
pub async fn producer(
    session: &nervix_net::client::Session,
    domain: &str,
    ingestor: &str,
    expected_fields: Vec<ExpectedField>,
    credit_batches: u32,
    credit_bytes: u64,
) -> nervix_net::client::Producer {
    session
        .open_producer(nervix_net::client::ProducerOptions {
            domain: domain.into(),
            ingestor: ingestor.into(),
            expected_fields,
            credit_batches,
            credit_bytes,
        })
        .await
        .unwrap_or_else(|e| panic!("producer on {domain}.{ingestor}: {e}"))
}

//! Fuzzes submitted-batch validation: any bytes must be accepted or refused with a defect, never
//! panic — not even inside arrow, where `validate_batch`'s last-resort `catch_unwind` would
//! hide it (libfuzzer-sys's panic hook aborts on every panic, caught or not, so a guard that
//! only the unwind catches still counts as a finding). An accepted batch must re-encode to
//! bytes that are accepted again as the same batch.

#![no_main]

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use libfuzzer_sys::fuzz_target;
use nervix_net::batch::{encode_batch, validate_batch, BatchLimits};

/// The byte bound of the fuzzed submissions.
const MAX_FUZZ_BYTES: usize = 1 << 20;

/// One field of every DESIGN §4 type, as `net/tests/net_batch_validation.rs` builds them; seed
/// the corpus with encodings of such batches.
fn schema() -> SchemaRef {
    let item = |t: DataType, nullable: bool| Arc::new(Field::new("item", t, nullable));
    Arc::new(Schema::new(vec![
        Field::new("u8", DataType::UInt8, false),
        Field::new("i8", DataType::Int8, false),
        Field::new("u16", DataType::UInt16, false),
        Field::new("i16", DataType::Int16, false),
        Field::new("u32", DataType::UInt32, false),
        Field::new("i32", DataType::Int32, true),
        Field::new("u64", DataType::UInt64, false),
        Field::new("i64", DataType::Int64, false),
        Field::new("f32", DataType::Float32, false),
        Field::new("f64", DataType::Float64, true),
        Field::new("bool", DataType::Boolean, false),
        Field::new("string", DataType::Utf8, false),
        Field::new(
            "datetime",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
        Field::new("bytes", DataType::Binary, true),
        Field::new(
            "array",
            DataType::FixedSizeList(item(DataType::Int32, false), 2),
            false,
        ),
        Field::new("vec", DataType::List(item(DataType::Float64, false)), false),
        Field::new("headers", DataType::List(item(DataType::Utf8, true)), true),
    ]))
}

fuzz_target!(|bytes: &[u8]| {
    let schema = schema();
    let Ok(batch) = validate_batch(bytes, &schema, BatchLimits::new(MAX_FUZZ_BYTES)) else {
        return;
    };
    let again = encode_batch(&batch).expect("an accepted batch encodes");
    let round = validate_batch(&again, &schema, BatchLimits::new(usize::MAX))
        .expect("the canonical encoding of an accepted batch is accepted");
    // Compare encodings: NaN payloads make `==` on the batches unreliable.
    assert_eq!(encode_batch(&round).expect("encodes"), again);
});

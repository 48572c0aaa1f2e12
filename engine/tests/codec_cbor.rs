//! The WIRE CBOR codec through `nervix::codec`: data-driven decode cases from
//! `tests/codec/cbor/*.json`, the record limit, atomic rollback, arbitrary bytes (never a
//! panic) and the encoder's round trip.
//!
//! A case file holds `nspl` (a wire schema, a schema and a codec), and `cases`, each with a
//! payload — `hex` (spaces allowed), `json` (one JSON value written as CBOR by ciborium,
//! floats in their shortest exact form) or `seq` (several such values back to back, an RFC 8742
//! sequence) — and either `rows` (every buffered row after the case, as JSON objects; DATETIME
//! as UTC nanoseconds, BYTES as `"hex:…"`) or `error` (the exact `DecodeError` text).

use std::sync::Arc;

use nervix::codec::{
    encode_cbor, CborCodecError, CborCodecPlan, CborDecodeCause, CborDecoder,
    MAX_RECORDS_PER_PAYLOAD,
};
use serde_json::{json, Value};

#[path = "support/codec_cases.rs"]
mod codec_cases;

use codec_cases::{rows, unhex, BytesAs};

fn plan(nspl: &str) -> Arc<CborCodecPlan> {
    Arc::new(try_plan(nspl).expect("plan builds"))
}

fn try_plan(nspl: &str) -> Result<CborCodecPlan, CborCodecError> {
    let (wire, codec, fields) = codec_cases::parts(nspl);
    CborCodecPlan::build(&codec, &wire.expect("a wire schema"), &fields)
}

/// One JSON value written as CBOR.
fn cbor_of(value: &Value) -> Vec<u8> {
    let value: ciborium::Value = serde_json::from_value(value.clone()).expect("a CBOR value");
    let mut out = Vec::new();
    ciborium::into_writer(&value, &mut out).expect("written");
    out
}

fn payload_of(case: &Value) -> Vec<u8> {
    if let Some(text) = case.get("hex").and_then(Value::as_str) {
        unhex(text)
    } else if let Some(value) = case.get("json") {
        cbor_of(value)
    } else if let Some(values) = case.get("seq").and_then(Value::as_array) {
        values.iter().flat_map(cbor_of).collect()
    } else {
        panic!("a case needs hex, json or seq: {case}")
    }
}

codec_cases::case_decoders!(CborDecoder);

#[test]
fn decode_cases() {
    let count = codec_cases::run_decode_cases(
        "cbor",
        |nspl| {
            let plan = plan(nspl);
            (plan.schema(), CborDecoder::new(plan))
        },
        |case, key| (key == "payload").then(|| payload_of(case)),
    );
    println!("{count} decode cases");
}

#[test]
fn plans_follow_the_decode_table() {
    let refused = |wire: &str, schema: &str, encode: &str| {
        try_plan(&format!(
            "CREATE WIRE CBOR SCHEMA w MODE STRICT ({wire}); CREATE SCHEMA s ({schema});
             CREATE CODEC c FROM WIRE CBOR SCHEMA w TO SCHEMA s {encode};"
        ))
        .expect_err("refused")
        .to_string()
    };
    assert_eq!(
        refused("a integer", "a F64", ""),
        "wire field 'a' (integer) does not decode into F64"
    );
    assert_eq!(
        refused("a object", "a BYTES", ""),
        "wire field 'a' (object) does not decode into BYTES"
    );
    assert_eq!(
        refused("a string", "a DATETIME", ""),
        "wire field 'a' (string) does not decode into DATETIME"
    );
    assert_eq!(
        refused("a string OPTIONAL", "a BYTES", ""),
        "required field 'a' has no required wire field of the same name"
    );
    assert!(try_plan(
        "CREATE WIRE CBOR SCHEMA w MODE STRICT (a string); CREATE SCHEMA s (a BYTES);
         CREATE CODEC c FROM WIRE CBOR SCHEMA w TO SCHEMA s;"
    )
    .is_ok());
    let json = "CREATE WIRE JSON SCHEMA w MODE STRICT (a string); CREATE SCHEMA s (a STRING);
         CREATE CODEC c FROM WIRE JSON SCHEMA w TO SCHEMA s;";
    assert_eq!(
        try_plan(json).expect_err("refused").to_string(),
        "codec 'c' is not a WIRE CBOR codec"
    );
}

const ORDERS: &str = "
    CREATE WIRE CBOR SCHEMA w MODE STRICT (region string, amount integer);
    CREATE SCHEMA s (region STRING, amount I64);
    CREATE CODEC c FROM WIRE CBOR SCHEMA w TO SCHEMA s;";

#[test]
fn record_limit_and_rollback() {
    let mut decoder = CborDecoder::new(plan(ORDERS));
    let order = |i: usize| cbor_of(&json!({"region": "eu", "amount": i}));
    let records: Vec<u8> = (0..MAX_RECORDS_PER_PAYLOAD).flat_map(order).collect();
    assert_eq!(
        decoder.decode_payload(&records).unwrap() as usize,
        MAX_RECORDS_PER_PAYLOAD
    );
    let mut over = records.clone();
    over.extend(order(0));
    let err = decoder.decode_payload(&over).unwrap_err();
    assert_eq!(err.cause, CborDecodeCause::TooManyRecords);
    assert_eq!(err.record, Some(MAX_RECORDS_PER_PAYLOAD as u32));
    assert_eq!(decoder.buffered_rows(), MAX_RECORDS_PER_PAYLOAD);
    // A failure in the second record leaves the first one's `region` bytes out too.
    let mut two = order(1);
    two.extend(cbor_of(&json!({"region": "partial", "amount": "x"})));
    let err = decoder.decode_payload(&two).unwrap_err();
    assert_eq!(err.record, Some(1));
    assert_eq!(decoder.finish().num_rows(), MAX_RECORDS_PER_PAYLOAD);
}

#[test]
fn arbitrary_bytes_never_panic() {
    let nspl = "
        CREATE WIRE CBOR SCHEMA w MODE LOOSE (a integer OPTIONAL, b string OPTIONAL,
            o object OPTIONAL, v array OPTIONAL, n number OPTIONAL, t string OPTIONAL);
        CREATE SCHEMA s (a I16 OPTIONAL, b BYTES OPTIONAL, o STRING OPTIONAL,
            v VEC<LIST<STRING>> OPTIONAL, n F32 OPTIONAL, t DATETIME OPTIONAL);
        CREATE CODEC c FROM WIRE CBOR SCHEMA w TO SCHEMA s ENCODE t AS RFC3339;";
    let mut decoder = CborDecoder::new(plan(nspl));
    // A deterministic xorshift stream; payloads start from valid records, then are mutated
    // and cut, so most reach deep into the decoder.
    let seed = cbor_of(&json!({"a": 1, "b": "x", "o": {"k": [1, 2.5, null]},
        "v": [["a", {"q": true}], []], "n": 1.5, "t": "2024-01-01T00:00:00Z"}));
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..20_000 {
        let mut payload = seed.clone();
        for _ in 0..(next() % 4) {
            let i = (next() as usize) % payload.len();
            payload[i] = next() as u8;
        }
        payload.truncate((next() as usize) % (payload.len() + 1));
        let before = decoder.buffered_rows();
        if decoder.decode_payload(&payload).is_err() {
            assert_eq!(decoder.buffered_rows(), before);
        }
        let random: Vec<u8> = (0..(next() % 24)).map(|_| next() as u8).collect();
        let _ = decoder.decode_payload(&random);
    }
    decoder.finish();
    // Deep nesting is refused, not a stack overflow: in a skipped value, in an object's JSON
    // text.
    for (key, item) in [(b'x', &[0x81][..]), (b'o', &[0xA1, 0x61, b'k'][..])] {
        let mut deep = vec![0xA1, 0x61, key];
        for _ in 0..100_000 {
            deep.extend_from_slice(item);
        }
        let err = decoder.decode_payload(&deep).unwrap_err();
        assert_eq!(err.cause, CborDecodeCause::TooDeep, "{}", char::from(key));
    }
}

#[test]
fn cbor_round_trips() {
    let nspl = "
        CREATE WIRE CBOR SCHEMA w MODE STRICT (u8 integer, i8 integer, u16 integer, i16 integer,
            u32 integer, i32 integer OPTIONAL, u64 integer, i64 integer, f32 number,
            f64 number OPTIONAL, b boolean, s string, raw string, obj object OPTIONAL,
            'camelCase' string, at string, v array, a array OPTIONAL, l array, n null OPTIONAL,
            dropped integer);
        CREATE SCHEMA s (u8 U8, i8 I8, u16 U16, i16 I16, u32 U32, i32 I32 OPTIONAL, u64 U64,
            i64 I64, f32 F32, f64 F64 OPTIONAL, b BOOL, s STRING, raw BYTES, obj STRING OPTIONAL,
            at DATETIME, v VEC<VEC<I64>>, a ARRAY<F64, 2, 2> OPTIONAL, l LIST<STRING>,
            n BYTES OPTIONAL, missing STRING OPTIONAL);
        CREATE CODEC c FROM WIRE CBOR SCHEMA w TO SCHEMA s ENCODE at AS RFC3339;";
    let plan = plan(nspl);
    let mut decoder = CborDecoder::new(Arc::clone(&plan));
    let mut payload = cbor_of(&json!([
      {"u8":255,"i8":-128,"u16":65535,"i16":-32768,"u32":4294967295_u64,"i32":null,
       "u64":18446744073709551615_u64,"i64":-9223372036854775808_i64,"f32":1.5,"f64":-2.5e300,
       "b":true,"s":"quote \" é","raw":"text","at":"2024-02-29T12:34:56.123456789+02:00",
       "v":[[1,2],[],null,[3]],"a":[[1.0,2.0],[null,4.5]],"l":["x",{"k":[1]},null],
       "n":null,"dropped":7,"obj":{"x":[1,{"y":null}]},"camelCase":"c"},
      {"u8":0,"i8":0,"u16":0,"i16":0,"u32":0,"i32":-1,"u64":0,"i64":0,"f32":-0.0,
       "b":false,"s":"","raw":"","at":"1970-01-01T00:00:00Z","v":[],"l":[],"dropped":-1,
       "camelCase":"d"}
    ]));
    // Record 1's `raw` as a real byte string: h'00ff'.
    let text_raw = [0x63, b'r', b'a', b'w', 0x60];
    let at = payload
        .windows(text_raw.len())
        .rposition(|w| w == text_raw)
        .expect("second raw");
    payload.splice(at + 4..at + 5, [0x42, 0x00, 0xFF]);
    assert_eq!(decoder.decode_payload(&payload).unwrap(), 2);
    let batch = decoder.finish();
    let mut out = Vec::new();
    encode_cbor(&batch, &plan, &mut out);
    let loose = nspl
        .replace("MODE STRICT", "MODE LOOSE")
        .replace("dropped integer", "dropped integer OPTIONAL")
        .replace("'camelCase' string", "'camelCase' string OPTIONAL");
    let mut again = CborDecoder::new(self::plan(&loose));
    assert_eq!(again.decode_payload(&out).unwrap(), 2);
    let round = again.finish();
    assert_eq!(round, batch);
    let first = &rows(&batch, BytesAs::Hex)[0];
    assert_eq!(first["at"], json!(1_709_202_896_123_456_789_i64));
    assert_eq!(first["l"], json!(["x", r#"{"k":[1]}"#, null]));
    assert_eq!(first["obj"], json!(r#"{"x":[1,{"y":null}]}"#));
    assert_eq!(first["raw"], json!("hex:74657874"));
    assert_eq!(rows(&batch, BytesAs::Hex)[1]["raw"], json!("hex:00ff"));
}

//! The WIRE JSON codec through `nervix::codec`: RFC 8259 conformance against JSONTestSuite,
//! data-driven decode cases from `tests/codec/*.json`, the record limit, atomic rollback and
//! the NDJSON encoder's round trip.
//!
//! A case file holds `nspl` (a wire schema, a schema and a codec), and `cases`, each with a
//! `payload` (or `lines`, joined with newlines), optionally a `prefix` payload decoded first,
//! and either `rows` (every buffered row after the case, as JSON objects; DATETIME as UTC
//! nanoseconds) or `error` (the exact `DecodeError` text; the rows are then the prefix's).

use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float64Array, RecordBatch, StringArray};
use nervix::codec::{
    encode_json_rows, encode_ndjson, validate_json_text, CodecError, DecodeCause, EncodedRows,
    JsonCodecPlan, JsonDecoder, MAX_RECORDS_PER_PAYLOAD,
};
use serde_json::{json, Value};

/// The plan of the codec an NSPL script declares.
#[path = "support/codec_cases.rs"]
mod codec_cases;

use codec_cases::{rows, BytesAs};

fn plan(nspl: &str) -> Arc<JsonCodecPlan> {
    Arc::new(try_plan(nspl).expect("plan builds"))
}

fn try_plan(nspl: &str) -> Result<JsonCodecPlan, CodecError> {
    let (wire, codec, fields) = codec_cases::parts(nspl);
    JsonCodecPlan::build(&codec, &wire.expect("a wire schema"), &fields)
}

fn payload_of(case: &Value, key: &str) -> Option<Vec<u8>> {
    match case.get(key) {
        Some(Value::String(s)) => Some(s.clone().into_bytes()),
        _ if key == "payload" => case.get("lines").map(|lines| {
            let lines: Vec<&str> = lines
                .as_array()
                .expect("lines is an array")
                .iter()
                .map(|l| l.as_str().expect("a line is a string"))
                .collect();
            lines.join("\n").into_bytes()
        }),
        _ => None,
    }
}

codec_cases::case_decoders!(JsonDecoder);

#[test]
fn decode_cases() {
    let count = codec_cases::run_decode_cases(
        "",
        |nspl| {
            let plan = plan(nspl);
            (plan.schema(), JsonDecoder::new(plan))
        },
        payload_of,
    );
    println!("{count} decode cases");
}

#[test]
fn plans_follow_the_decode_table() {
    let refused = |wire: &str, schema: &str, encode: &str| {
        try_plan(&format!(
            "CREATE WIRE JSON SCHEMA w MODE STRICT ({wire}); CREATE SCHEMA s ({schema});
             CREATE CODEC c FROM WIRE JSON SCHEMA w TO SCHEMA s {encode};"
        ))
        .expect_err("refused")
        .to_string()
    };
    assert_eq!(
        refused("a integer", "a STRING", ""),
        "wire field 'a' (integer) does not decode into STRING"
    );
    assert_eq!(
        refused("a number", "a I64", ""),
        "wire field 'a' (number) does not decode into I64"
    );
    assert_eq!(
        refused("a string", "a DATETIME", ""),
        "wire field 'a' (string) does not decode into DATETIME"
    );
    assert_eq!(
        refused("a array", "a VEC<DATETIME>", ""),
        "wire field 'a' (array) does not decode into VEC<DATETIME>"
    );
    assert_eq!(
        refused("a string OPTIONAL", "a STRING", ""),
        "required field 'a' has no required wire field of the same name"
    );
    assert_eq!(
        refused("b string", "a STRING", ""),
        "required field 'a' has no required wire field of the same name"
    );
    assert_eq!(
        refused("a integer", "a I64", "ENCODE a AS RFC3339"),
        "ENCODE a AS RFC3339 needs a DATETIME field fed by a wire string"
    );
    let schema = try_plan(
        "CREATE WIRE JSON SCHEMA w MODE LOOSE (a string); CREATE SCHEMA s (a STRING, b I8 OPTIONAL);
         CREATE CODEC c FROM WIRE JSON SCHEMA w TO SCHEMA s;",
    )
    .expect("builds")
    .schema();
    assert_eq!(schema.fields().len(), 2);
    assert!(!schema.field(0).is_nullable() && schema.field(1).is_nullable());
}

const ORDERS: &str = "
    CREATE WIRE JSON SCHEMA w MODE STRICT (region string, order_id string, amount integer,
        value string OPTIONAL);
    CREATE SCHEMA s (region STRING, order_id STRING, amount I64, value STRING OPTIONAL);
    CREATE CODEC c FROM WIRE JSON SCHEMA w TO SCHEMA s;";

fn order(i: usize) -> String {
    format!(r#"{{"region":"eu-west","order_id":"o-{i}","amount":{i},"value":"v"}}"#)
}

#[test]
fn record_limit_is_enforced_per_payload() {
    let mut decoder = JsonDecoder::new(plan(ORDERS));
    let records: Vec<String> = (0..MAX_RECORDS_PER_PAYLOAD).map(order).collect();
    let full = format!("[{}]", records.join(","));
    assert_eq!(
        decoder.decode_payload(full.as_bytes()).unwrap() as usize,
        MAX_RECORDS_PER_PAYLOAD
    );
    let over = format!("{}\n{}", records.join("\n"), order(0));
    let err = decoder.decode_payload(over.as_bytes()).unwrap_err();
    assert_eq!(err.cause, DecodeCause::TooManyRecords);
    assert_eq!(err.record, Some(MAX_RECORDS_PER_PAYLOAD as u32));
    assert_eq!(decoder.buffered_rows(), MAX_RECORDS_PER_PAYLOAD);
    assert_eq!(decoder.finish().num_rows(), MAX_RECORDS_PER_PAYLOAD);
}

#[test]
fn ndjson_round_trips() {
    let nspl = "
        CREATE WIRE JSON SCHEMA w MODE STRICT (u8 integer, i8 integer, u16 integer, i16 integer,
            u32 integer, i32 integer OPTIONAL, u64 integer, i64 integer, f32 number,
            f64 number OPTIONAL, b boolean, s string, obj object OPTIONAL, 'camelCase' string,
            at string, v array, a array OPTIONAL, l array, n null OPTIONAL, dropped integer);
        CREATE SCHEMA s (u8 U8, i8 I8, u16 U16, i16 I16, u32 U32, i32 I32 OPTIONAL, u64 U64,
            i64 I64, f32 F32, f64 F64 OPTIONAL, b BOOL, s STRING, obj STRING OPTIONAL, at DATETIME,
            v VEC<VEC<I64>>, a ARRAY<F64, 2, 2> OPTIONAL, l LIST<STRING>, n BYTES OPTIONAL,
            missing STRING OPTIONAL);
        CREATE CODEC c FROM WIRE JSON SCHEMA w TO SCHEMA s ENCODE at AS RFC3339;";
    let plan = plan(nspl);
    let mut decoder = JsonDecoder::new(Arc::clone(&plan));
    let payload = r#"[
      {"u8":255,"i8":-128,"u16":65535,"i16":-32768,"u32":4294967295,"i32":null,
       "u64":18446744073709551615,"i64":-9223372036854775808,"f32":1.5,"f64":-2.5e300,
       "b":true,"s":"quote \" tab \t é \u0001","at":"2024-02-29T12:34:56.123456789+02:00",
       "v":[[1,2],[],null,[3]],"a":[[1.0,2.0],[null,4.5]],"l":["x",{"k":[1]},null],
       "n":null,"dropped":7,"obj":{ "x" : [1, {"y": null}] },"camelCase":"c"},
      {"u8":0,"i8":0,"u16":0,"i16":0,"u32":0,"i32":-1,"u64":0,"i64":0,"f32":-0.0,
       "b":false,"s":"","at":"1970-01-01T00:00:00Z","v":[],"l":[],"dropped":-1,
       "camelCase":"d"}
    ]"#;
    assert_eq!(decoder.decode_payload(payload.as_bytes()).unwrap(), 2);
    let batch = decoder.finish();
    let mut out = Vec::new();
    encode_ndjson(&batch, &plan, &mut out);
    validate_json_text(out.split(|&b| b == b'\n').next().unwrap()).unwrap();
    // "dropped" has no schema field, so it is not written, and STRICT requires it: decode the
    // encoded rows with a LOOSE plan whose wire field is OPTIONAL.
    let loose = nspl
        .replace("MODE STRICT", "MODE LOOSE")
        .replace("dropped integer", "dropped integer OPTIONAL")
        .replace("'camelCase' string", "'camelCase' string OPTIONAL");
    let mut again = JsonDecoder::new(self::plan(&loose));
    assert_eq!(
        again.decode_payload(&out).unwrap(),
        2,
        "{}",
        String::from_utf8_lossy(&out)
    );
    let round = again.finish();
    assert_eq!(round, batch, "{}", String::from_utf8_lossy(&out));
    assert_eq!(
        rows(&batch, BytesAs::Hex)[0]["at"],
        json!(1_709_202_896_123_456_789_i64)
    );
    assert_eq!(
        rows(&batch, BytesAs::Hex)[0]["l"],
        json!(["x", r#"{"k":[1]}"#, null])
    );
    assert_eq!(
        rows(&batch, BytesAs::Hex)[0]["obj"],
        json!(r#"{ "x" : [1, {"y": null}] }"#)
    );
}

/// Every type the encoder writes (the round-trip schema's), and strings that exercise the
/// escape scan: escapable bytes at every offset of an 8-byte word, every control byte,
/// unicode, long clean text; plus object-as-text that is not an object, and NaN/infinity.
const EVERY_TYPE: &str = "
    CREATE WIRE JSON SCHEMA w MODE LOOSE (u8 integer, i8 integer, u16 integer, i16 integer,
        u32 integer, i32 integer OPTIONAL, u64 integer, i64 integer, f32 number,
        f64 number OPTIONAL, b boolean OPTIONAL, s string OPTIONAL, obj object OPTIONAL,
        at string OPTIONAL, v array OPTIONAL, a array OPTIONAL,
        l array OPTIONAL, n null OPTIONAL);
    CREATE SCHEMA s (u8 U8, i8 I8, u16 U16, i16 I16, u32 U32, i32 I32 OPTIONAL, u64 U64,
        i64 I64, f32 F32, f64 F64 OPTIONAL, b BOOL OPTIONAL, s STRING OPTIONAL,
        obj STRING OPTIONAL, at DATETIME OPTIONAL, v VEC<VEC<I64>> OPTIONAL,
        a ARRAY<F64, 2, 2> OPTIONAL, l LIST<STRING> OPTIONAL, n BYTES OPTIONAL,
        missing STRING OPTIONAL);
    CREATE CODEC c FROM WIRE JSON SCHEMA w TO SCHEMA s ENCODE at AS RFC3339;";

#[test]
fn json_rows_match_the_row_writer() {
    let plan = plan(EVERY_TYPE);
    let mut decoder = JsonDecoder::new(Arc::clone(&plan));
    let mut texts: Vec<String> = vec![
        String::new(),
        "plain words, long enough to span several eight-byte words of the scan".to_string(),
        "é ü 中文 🚀 \u{7f} \u{80}".to_string(),
        (0u8..0x20).map(char::from).collect(),
    ];
    for special in ['"', '\\', '\n', '\u{1}', '\u{1f}'] {
        for at in 0..17 {
            let mut text: String = "abcdefghijklmnopq".chars().take(17).collect();
            text.replace_range(at..at + 1, &special.to_string());
            texts.push(text);
        }
    }
    let mut records = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let i = i as i64;
        records.push(json!({
            "u8": 255 - i, "i8": -128 + i, "u16": 65535 - i, "i16": -32768 + i,
            "u32": 4_294_967_295_i64 - i, "i32": if i % 3 == 0 { Value::Null } else { json!(-i * 1000) },
            "u64": u64::MAX - i as u64, "i64": if i == 0 { i64::MIN } else { i64::MAX / (i + 1) * (1 - 2 * (i % 2)) },
            "f32": i as f64 / 3.0, "f64": if i % 4 == 0 { Value::Null } else { json!(-2.5e300 / (i as f64)) },
            "b": match i % 3 { 0 => Value::Null, 1 => json!(true), _ => json!(false) },
            "s": if i % 5 == 4 { Value::Null } else { json!(text) },
            "obj": if i % 2 == 0 { json!({"k": [i, text]}) } else { Value::Null },
            "at": if i % 2 == 0 { json!("2024-02-29T12:34:56.123456789+02:00") } else { json!("1970-01-01T00:00:00Z") },
            "v": [[i, -i], [], null], "a": [[1.0, 2.0], [null, i]], "l": [text, {"k": [i]}, null],
        }));
    }
    let payload = serde_json::to_vec(&records).expect("records");
    assert_eq!(
        decoder.decode_payload(&payload).unwrap() as usize,
        texts.len()
    );
    let decoded = decoder.finish();
    // Values the decoder never makes: object-as-text that is no object (an expression's
    // output), and floats JSON cannot write.
    let rows = decoded.num_rows();
    let schema = decoded.schema();
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .zip(decoded.columns())
        .map(|(field, column)| match field.name().as_str() {
            "obj" => Arc::new(StringArray::from_iter((0..rows).map(|i| match i % 4 {
                0 => Some(r#"{"x": [1, {"y": null}]}"#),
                1 => Some("not an object \" \n"),
                2 => Some("{broken"),
                _ => None,
            }))) as ArrayRef,
            "f64" => Arc::new(Float64Array::from_iter((0..rows).map(|i| match i % 5 {
                0 => Some(f64::NAN),
                1 => Some(f64::INFINITY),
                2 => Some(-0.0),
                3 => None,
                _ => Some(1e-7),
            }))) as ArrayRef,
            _ => Arc::clone(column),
        })
        .collect();
    let batch = RecordBatch::try_new(schema, columns).expect("batch");
    assert!(batch.column_by_name("obj").expect("obj").null_count() > 0);

    let mut lines = Vec::new();
    encode_ndjson(&batch, &plan, &mut lines);
    let expected: Vec<&[u8]> = lines
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let mut bodies = EncodedRows::with_rows(rows);
    encode_json_rows(&batch, &plan, &mut bodies);
    assert_eq!(bodies.len(), rows);
    assert_eq!(expected.len(), rows);
    for (row, line) in expected.iter().enumerate() {
        let body = bodies.row(row).expect("every row is encoded");
        assert_eq!(
            body,
            *line,
            "row {row}:\n  column-wise {}\n  row writer  {}",
            String::from_utf8_lossy(body),
            String::from_utf8_lossy(line)
        );
        validate_json_text(body).expect("each body is one JSON text");
    }
    // A second batch appended to the same frame keeps both batches' ranges.
    encode_json_rows(&batch, &plan, &mut bodies);
    assert_eq!(bodies.len(), 2 * rows);
    assert_eq!(bodies.row(rows + 1), bodies.row(1));
}

/// The JSONTestSuite directory, when the shared test data is present.
fn suite() -> Option<std::path::PathBuf> {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/testdata/JSONTestSuite/test_parsing"
    ));
    dir.is_dir().then(|| dir.to_path_buf())
}

#[test]
fn json_test_suite() {
    let Some(dir) = suite() else {
        println!("note: shared/testdata/JSONTestSuite is absent; skipped");
        return;
    };
    let loose = plan(
        "CREATE WIRE JSON SCHEMA w MODE LOOSE (a string OPTIONAL);
         CREATE SCHEMA s (a STRING OPTIONAL);
         CREATE CODEC c FROM WIRE JSON SCHEMA w TO SCHEMA s;",
    );
    let mut decoder = JsonDecoder::new(loose);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("suite is readable")
        .map(|e| e.expect("entry").path())
        .collect();
    paths.sort();
    let (mut accepted, mut refused, mut either) = (0, 0, 0);
    for path in &paths {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(path).expect("suite file");
        let result = validate_json_text(&bytes);
        match name.as_bytes().first() {
            Some(b'y') => {
                assert!(result.is_ok(), "{name}: {result:?}");
                accepted += 1;
            }
            Some(b'n') => {
                assert!(result.is_err(), "{name} was accepted");
                refused += 1;
            }
            _ => either += 1,
        }
        // Any bytes through the decoder: a result, never a panic.
        let _ = decoder.decode_payload(&bytes);
    }
    decoder.finish();
    assert!(
        accepted > 90 && refused > 150,
        "{accepted} y_, {refused} n_"
    );
    println!("JSONTestSuite: {accepted} y_ accepted, {refused} n_ refused, {either} i_ ran");
}

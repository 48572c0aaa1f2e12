//! The WIRE AVRO codec through `nervix::codec`: data-driven decode cases from
//! `tests/codec/avro/*.json`, object container files (built here and from
//! `shared/testdata/avro`), malformed input (never a panic), atomic rollback and the datum
//! encoder's round trip.
//!
//! A case file holds `nspl` (a wire schema, a schema and a codec), and `cases`, each with a
//! payload — `hex` (spaces allowed) or `datum`, a list of tokens written in order: `{"l": n}`
//! a zigzag varint, `{"s": "…"}` a length-prefixed string, `{"b": true}` a boolean, `{"f": x}`
//! / `{"d": x}` a little-endian float / double, `{"bytes": "hex"}` length-prefixed bytes and
//! `{"raw": "hex"}` bytes as they are — and either `rows` (every buffered row after the case,
//! as JSON objects; DATETIME as UTC nanoseconds, BYTES as `"hex:…"`) or `error` (the exact
//! `DecodeError` text).

use std::path::Path;
use std::sync::Arc;

use nervix::codec::{
    encode_avro_datum, AvroCodecError, AvroCodecPlan, AvroDecodeCause, AvroDecoder,
    MAX_RECORDS_PER_PAYLOAD,
};
use serde_json::{json, Value};

#[path = "support/codec_cases.rs"]
mod codec_cases;

use codec_cases::{rows, unhex, BytesAs};

fn plan(nspl: &str) -> Arc<AvroCodecPlan> {
    Arc::new(try_plan(nspl).expect("plan builds"))
}

fn try_plan(nspl: &str) -> Result<AvroCodecPlan, AvroCodecError> {
    let (wire, codec, fields) = codec_cases::parts(nspl);
    AvroCodecPlan::build(&codec, &wire.expect("a wire schema"), &fields)
}

fn long(value: i64, out: &mut Vec<u8>) {
    let mut n = ((value << 1) ^ (value >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The bytes of a `datum` token list.
fn datum(tokens: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for token in tokens {
        let (kind, value) = token
            .as_object()
            .and_then(|o| o.iter().next())
            .expect("a token is a one-key object");
        match kind.as_str() {
            "l" => long(value.as_i64().expect("l takes an integer"), &mut out),
            "s" => {
                let s = value.as_str().expect("s takes a string");
                long(s.len() as i64, &mut out);
                out.extend_from_slice(s.as_bytes());
            }
            "b" => out.push(u8::from(value.as_bool().expect("b takes a boolean"))),
            "f" => out.extend_from_slice(&(value.as_f64().expect("f") as f32).to_le_bytes()),
            "d" => out.extend_from_slice(&value.as_f64().expect("d").to_le_bytes()),
            "bytes" => {
                let b = unhex(value.as_str().expect("bytes takes hex"));
                long(b.len() as i64, &mut out);
                out.extend_from_slice(&b);
            }
            "raw" => out.extend(unhex(value.as_str().expect("raw takes hex"))),
            other => panic!("unknown token {other}"),
        }
    }
    out
}

fn payload_of(case: &Value) -> Vec<u8> {
    if let Some(text) = case.get("hex").and_then(Value::as_str) {
        unhex(text)
    } else if let Some(tokens) = case.get("datum").and_then(Value::as_array) {
        datum(tokens)
    } else {
        panic!("a case needs hex or datum: {case}")
    }
}

codec_cases::case_decoders!(AvroDecoder);

#[test]
fn decode_cases() {
    let count = codec_cases::run_decode_cases(
        "avro",
        |nspl| {
            let plan = plan(nspl);
            (plan.schema(), AvroDecoder::new(plan))
        },
        |case, key| (key == "payload").then(|| payload_of(case)),
    );
    println!("{count} decode cases");
}

#[test]
fn plans_follow_the_decode_table() {
    let refused = |wire: &str, schema: &str, encode: &str| {
        try_plan(&format!(
            "CREATE WIRE AVRO SCHEMA w ({wire}); CREATE SCHEMA s ({schema});
             CREATE CODEC c FROM WIRE AVRO SCHEMA w TO SCHEMA s {encode};"
        ))
        .expect_err("refused")
        .to_string()
    };
    assert_eq!(
        refused("a long", "a F64", ""),
        "wire field 'a' (long) does not decode into F64"
    );
    assert_eq!(
        refused("a string", "a BYTES", ""),
        "wire field 'a' (string) does not decode into BYTES"
    );
    assert_eq!(
        refused("a string", "a DATETIME", ""),
        "wire field 'a' (string) does not decode into DATETIME"
    );
    assert_eq!(
        refused("a array<int>", "a ARRAY<I32, 2, 2>", ""),
        "wire field 'a' (array<int>) does not decode into ARRAY<I32, 2, 2>"
    );
    assert_eq!(
        refused("a int OPTIONAL", "a I32", ""),
        "required field 'a' has no required wire field of the same name"
    );
    assert_eq!(
        refused("a null", "a STRING", ""),
        "required field 'a' has no required wire field of the same name"
    );
    assert_eq!(
        refused("a null OPTIONAL", "a STRING OPTIONAL", ""),
        "wire field 'a' is null OPTIONAL, a union listing null twice"
    );
    assert_eq!(
        refused("a long", "a I64", "ENCODE a AS RFC3339"),
        "ENCODE a AS RFC3339 needs a DATETIME field fed by a wire string"
    );
}

/// An object container file of `datums` (each block holds `per_block` of them).
fn container(schema: &str, codec: Option<&str>, datums: &[Vec<u8>], per_block: usize) -> Vec<u8> {
    const SYNC: [u8; 16] = *b"0123456789abcdef";
    let mut out = b"Obj\x01".to_vec();
    let mut meta = vec![("avro.schema", schema.as_bytes().to_vec())];
    if let Some(codec) = codec {
        meta.push(("avro.codec", codec.as_bytes().to_vec()));
    }
    long(meta.len() as i64, &mut out);
    for (k, v) in meta {
        long(k.len() as i64, &mut out);
        out.extend_from_slice(k.as_bytes());
        long(v.len() as i64, &mut out);
        out.extend_from_slice(&v);
    }
    out.push(0);
    out.extend_from_slice(&SYNC);
    for block in datums.chunks(per_block.max(1)) {
        let mut data: Vec<u8> = block.concat();
        if codec == Some("deflate") {
            data = miniz_oxide::deflate::compress_to_vec(&data, 6);
        }
        long(block.len() as i64, &mut out);
        long(data.len() as i64, &mut out);
        out.extend_from_slice(&data);
        out.extend_from_slice(&SYNC);
    }
    out
}

const EVENTS: &str = "
    CREATE WIRE AVRO SCHEMA w (id long, name string OPTIONAL, tags array<string>);
    CREATE SCHEMA s (id I64, name STRING OPTIONAL, tags LIST<STRING>);
    CREATE CODEC c FROM WIRE AVRO SCHEMA w TO SCHEMA s;";

const EVENTS_WRITER: &str = r#"{"type": "record", "name": "e", "namespace": "x", "fields": [
    {"name": "id", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "name", "type": ["null", "string"]},
    {"name": "tags", "type": {"type": "array", "items": "string"}}]}"#;

fn event(id: i64) -> Vec<u8> {
    let name = if id % 2 == 0 {
        json!([{"l": 1}, {"s": format!("n{id}")}])
    } else {
        json!([{"l": 0}])
    };
    let mut tokens = vec![json!({"l": id})];
    tokens.extend(name.as_array().unwrap().iter().cloned());
    tokens.extend([
        json!({"l": -1}),
        json!({"l": 2}),
        json!({"s": "t"}),
        json!({"l": 0}),
    ]);
    datum(&tokens)
}

#[test]
fn container_files() {
    let mut decoder = AvroDecoder::new(plan(EVENTS));
    let datums: Vec<Vec<u8>> = (0..5).map(event).collect();
    for codec in [None, Some("null"), Some("deflate")] {
        let file = container(EVENTS_WRITER, codec, &datums, 2);
        assert_eq!(decoder.decode_payload(&file), Ok(5), "{codec:?}");
        let batch = decoder.finish();
        assert_eq!(
            rows(&batch, BytesAs::Hex)[2],
            json!({"id": 2, "name": "n2", "tags": ["t"]}),
            "{codec:?}"
        );
        assert_eq!(rows(&batch, BytesAs::Hex)[1]["name"], Value::Null);
    }
    let error = |payload: &[u8], decoder: &mut AvroDecoder| {
        let e = decoder.decode_payload(payload).expect_err("refused");
        assert_eq!(decoder.buffered_rows(), 0);
        e.to_string()
    };
    let file = container(EVENTS_WRITER, Some("snappy"), &datums, 2);
    assert_eq!(
        error(&file, &mut decoder),
        "at byte 291: container codec 'snappy' is not supported (supported: null, deflate)"
    );
    let mut bad = container(EVENTS_WRITER, None, &datums, 2);
    bad[3] = 2;
    assert_eq!(
        error(&bad, &mut decoder),
        "at byte 0: bad magic: an object container file starts with 'Obj' 0x01"
    );
    // The last sync marker is damaged: the whole payload is refused.
    let mut bad = container(EVENTS_WRITER, None, &datums, 2);
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert!(error(&bad, &mut decoder).ends_with("a block's sync marker differs from the header's"));
    // A truncated file.
    let good = container(EVENTS_WRITER, None, &datums, 2);
    for cut in [3, 10, 40, good.len() - 20, good.len() - 1] {
        error(&good[..cut], &mut decoder);
    }
    // A block count larger than its datums.
    let mut lying = container(EVENTS_WRITER, None, &datums[..1], 1);
    let at = lying.len() - 16 - datums[0].len() - 2;
    assert_eq!(lying[at], 2);
    lying[at] = 4;
    assert!(
        error(&lying, &mut decoder).contains("record 1"),
        "{lying:?}"
    );
    // Writer schemas of another shape are refused, naming the first difference.
    let differs = |writer: &str| {
        let file = container(writer, None, &datums, 2);
        let mut decoder = AvroDecoder::new(plan(EVENTS));
        let e = decoder
            .decode_payload(&file)
            .expect_err("refused")
            .to_string();
        let at = e.find(": the writer").expect("a schema message");
        e[at + 2..].to_string()
    };
    assert_eq!(
        differs(&EVENTS_WRITER.replace(r#"["null", "string"]"#, r#"["string", "null"]"#)),
        r#"the writer schema does not match the wire schema: wire schema 'w': field 'name': the writer has ["string","null"], the wire schema string OPTIONAL"#
    );
    assert_eq!(
        differs(&EVENTS_WRITER.replace(r#""name": "tags""#, r#""name": "labels""#)),
        "the writer schema does not match the wire schema: wire schema 'w': field 2: the writer has 'labels', the wire schema 'tags'"
    );
    assert_eq!(
        differs(&EVENTS_WRITER.replace(r#""items": "string""#, r#""items": "bytes""#)),
        r#"the writer schema does not match the wire schema: wire schema 'w': field 'tags[]': the writer has "bytes", the wire schema string"#
    );
    assert_eq!(
        differs(r#"{"type": "record", "name": "e", "fields": [{"name": "id", "type": "long"}]}"#),
        "the writer schema does not match the wire schema: wire schema 'w': the writer lacks field 'name'"
    );
    assert_eq!(
        differs(r#""long""#),
        r#"the writer schema does not match the wire schema: the writer schema is "long", not a record"#
    );
}

#[test]
fn framings() {
    let mut decoder = AvroDecoder::new(plan(EVENTS));
    // Bare datums back to back.
    let bare: Vec<u8> = (0..3).flat_map(event).collect();
    assert_eq!(decoder.decode_payload(&bare), Ok(3));
    // Single-object encoding: exactly one datum.
    let mut single = vec![0xC3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8];
    single.extend(event(4));
    assert_eq!(decoder.decode_payload(&single), Ok(1));
    single.extend(event(5));
    let e = decoder.decode_payload(&single).expect_err("one datum only");
    assert_eq!(e.cause, AvroDecodeCause::Trailing(event(5).len()));
    assert_eq!(
        decoder.decode_payload(&single[..5]).unwrap_err().cause,
        AvroDecodeCause::End
    );
    assert_eq!(
        decoder.decode_payload(b"").unwrap_err().cause,
        AvroDecodeCause::Empty
    );
    assert_eq!(decoder.finish().num_rows(), 4);
}

#[test]
fn record_limit_and_rollback() {
    let mut decoder = AvroDecoder::new(plan(EVENTS));
    let one = event(1);
    let mut all: Vec<u8> = one.repeat(MAX_RECORDS_PER_PAYLOAD);
    assert_eq!(
        decoder.decode_payload(&all).unwrap() as usize,
        MAX_RECORDS_PER_PAYLOAD
    );
    all.extend(&one);
    let e = decoder.decode_payload(&all).unwrap_err();
    assert_eq!(e.cause, AvroDecodeCause::TooManyRecords);
    assert_eq!(e.record, Some(MAX_RECORDS_PER_PAYLOAD as u32));
    // The second datum fails in its last field, after `id` and `name` were buffered.
    let mut two = event(2);
    two.extend(&event(4)[..event(4).len() - 1]);
    let e = decoder.decode_payload(&two).unwrap_err();
    assert_eq!(e.record, Some(1));
    assert_eq!(e.field.as_deref(), Some("tags"));
    assert_eq!(decoder.finish().num_rows(), MAX_RECORDS_PER_PAYLOAD);
}

#[test]
fn arbitrary_bytes_never_panic() {
    let nspl = "
        CREATE WIRE AVRO SCHEMA w (a int, b string OPTIONAL, m map<array<double>>,
            r record(x long, y bytes OPTIONAL, e enum('A', 'B')), v array<array<long>>,
            f fixed(3), k boolean);
        CREATE SCHEMA s (a I8, b STRING OPTIONAL, m STRING, r STRING, v ARRAY<I64, 2, 1>,
            f BYTES, k BOOL);
        CREATE CODEC c FROM WIRE AVRO SCHEMA w TO SCHEMA s;";
    let writer = r#"{"type": "record", "name": "t", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": ["null", "string"]},
        {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "double"}}},
        {"name": "r", "type": {"type": "record", "name": "r", "fields": [
            {"name": "x", "type": "long"}, {"name": "y", "type": ["null", "bytes"]},
            {"name": "e", "type": {"type": "enum", "name": "e", "symbols": ["A", "B"]}}]}},
        {"name": "v", "type": {"type": "array", "items": {"type": "array", "items": "long"}}},
        {"name": "f", "type": {"type": "fixed", "name": "f", "size": 3}},
        {"name": "k", "type": "boolean"}]}"#;
    let seed = datum(
        &serde_json::from_str::<Vec<Value>>(
            r#"[{"l": 5}, {"l": 1}, {"s": "hi"}, {"l": -1}, {"l": 12}, {"s": "k"}, {"l": 1},
                {"d": 1.5}, {"l": 0}, {"l": 0}, {"l": 7}, {"l": 1}, {"bytes": "00ff"}, {"l": 1},
                {"l": 2}, {"l": 1}, {"l": 3}, {"l": 0}, {"l": 1}, {"l": 4}, {"l": 0}, {"l": 0},
                {"raw": "616263"}, {"b": true}]"#,
        )
        .unwrap(),
    );
    let mut decoder = AvroDecoder::new(plan(nspl));
    assert_eq!(decoder.decode_payload(&seed), Ok(1));
    let rows = rows(&decoder.finish(), BytesAs::Hex);
    assert_eq!(
        rows[0],
        json!({"a": 5, "b": "hi", "m": "{\"k\":[1.5]}", "r": "{\"x\":7,\"y\":\"\\u0000ÿ\",\"e\":\"B\"}",
               "v": [[3], [4]], "f": "hex:616263", "k": true})
    );
    let file = container(writer, Some("deflate"), &[seed.clone(), seed.clone()], 2);
    assert_eq!(decoder.decode_payload(&file), Ok(2));
    let plain = container(writer, None, &[seed.clone(), seed.clone()], 1);
    let mut state = 0x2545_F491_4F6C_DD1D_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..30_000 {
        let source = match round % 3 {
            0 => &seed,
            1 => &file,
            _ => &plain,
        };
        let mut payload = source.clone();
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
}

#[test]
fn datums_round_trip() {
    let nspl = "
        CREATE WIRE AVRO SCHEMA w (n null, b boolean, i int, l long OPTIONAL, f float,
            d double, raw bytes, s string, at string, e enum('CREATED', 'DELETED'),
            ids array<long>, grid array<array<double>> OPTIONAL,
            attrs map<string> OPTIONAL, digest fixed(4),
            address record(street string, zip int OPTIONAL, geo record(lat double, raw bytes)),
            dropped record(q int, w array<string>), gone string OPTIONAL);
        CREATE SCHEMA s (n STRING OPTIONAL, b BOOL, i I16, l U64 OPTIONAL, f F32, d F64,
            raw BYTES, s STRING, at DATETIME, e STRING, ids VEC<I64>,
            grid ARRAY<F64, 2, 2> OPTIONAL, attrs STRING OPTIONAL, digest BYTES,
            address STRING, extra I8 OPTIONAL);
        CREATE CODEC c FROM WIRE AVRO SCHEMA w TO SCHEMA s ENCODE at AS RFC3339;";
    let plan = plan(nspl);
    let row = |l: Value, grid: Value, attrs: Value| {
        let mut t: Vec<Value> = serde_json::from_value(json!([
            {"b": true}, {"l": -300}]))
        .unwrap();
        t.extend(serde_json::from_value::<Vec<Value>>(l).unwrap());
        t.extend(
            serde_json::from_value::<Vec<Value>>(json!([
                {"f": 1.5}, {"d": -2.25e300}, {"bytes": "00ff10"}, {"s": "é\"x"},
                {"s": "2024-02-29T12:34:56.123456789+02:00"}, {"l": 1},
                {"l": -2}, {"l": 2}, {"l": 20}, {"l": -4}, {"l": 0}]))
            .unwrap(),
        );
        t.extend(serde_json::from_value::<Vec<Value>>(grid).unwrap());
        t.extend(serde_json::from_value::<Vec<Value>>(attrs).unwrap());
        t.extend(
            serde_json::from_value::<Vec<Value>>(json!([
                {"raw": "deadbeef"}, {"s": "Main St"}, {"l": 1}, {"l": 12345},
                {"d": 1.25}, {"bytes": "7f80"}, {"l": 3}, {"l": 1}, {"s": "w"}, {"l": 0},
                {"l": 1}, {"s": "dropped"}]))
            .unwrap(),
        );
        datum(&t)
    };
    let first = row(
        json!([{"l": 1}, {"l": 9}]),
        json!([{"l": 1}, {"l": 2}, {"l": 2}, {"d": 1.0}, {"d": 2.0}, {"l": 0}, {"l": 2},
               {"d": 3.0}, {"d": 4.5}, {"l": 0}, {"l": 0}]),
        json!([{"l": 1}, {"l": 2}, {"s": "k"}, {"s": "v"}, {"s": "k2"}, {"s": ""}, {"l": 0}]),
    );
    let second = row(json!([{"l": 0}]), json!([{"l": 0}]), json!([{"l": 0}]));
    let mut decoder = AvroDecoder::new(Arc::clone(&plan));
    let payload = [first, second].concat();
    assert_eq!(decoder.decode_payload(&payload), Ok(2));
    let batch = decoder.finish();
    let decoded = rows(&batch, BytesAs::Hex);
    assert_eq!(decoded[0]["at"], json!(1_709_202_896_123_456_789_i64));
    assert_eq!(decoded[0]["e"], json!("DELETED"));
    assert_eq!(decoded[0]["ids"], json!([20, -4]));
    assert_eq!(decoded[0]["attrs"], json!(r#"{"k":"v","k2":""}"#));
    assert_eq!(
        decoded[0]["address"],
        json!("{\"street\":\"Main St\",\"zip\":12345,\"geo\":{\"lat\":1.25,\"raw\":\"\u{7f}\u{80}\"}}")
    );
    assert_eq!(decoded[1]["grid"], Value::Null);
    let mut out = Vec::new();
    encode_avro_datum(&batch, &plan, &mut out).expect("encodes");
    let mut again = AvroDecoder::new(Arc::clone(&plan));
    assert_eq!(again.decode_payload(&out), Ok(2));
    assert_eq!(again.finish(), batch);
}

/// The shared Avro test files, when present.
fn testdata() -> Option<std::path::PathBuf> {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/testdata/avro"
    ));
    dir.is_dir().then(|| dir.to_path_buf())
}

/// A wire schema, schema and codec for each shared file whose writer schema the wire types can
/// declare (unions `["null", T]` only, no optional array items), with its expected first row.
fn declared(file: &str) -> Option<(&'static str, &'static str)> {
    Some(match file {
        "alltypes_nulls_plain.avro" => (
            "(string_col string OPTIONAL, int_col int OPTIONAL, bool_col boolean OPTIONAL,
              bigint_col long OPTIONAL, float_col float OPTIONAL, double_col double OPTIONAL,
              bytes_col bytes OPTIONAL)",
            "(string_col STRING OPTIONAL, int_col I32 OPTIONAL, bool_col BOOL OPTIONAL,
              bigint_col I64 OPTIONAL, float_col F32 OPTIONAL, double_col F64 OPTIONAL,
              bytes_col BYTES OPTIONAL)",
        ),
        "duration_uuid.avro" => (
            "(duration_field fixed(12), uuid_field string)",
            "(duration_field BYTES, uuid_field STRING)",
        ),
        "fixed256_decimal.avro" => ("(value fixed(32))", "(value BYTES)"),
        "fixed_length_decimal_legacy_32.avro" => ("(value fixed(4))", "(value BYTES)"),
        "int128_decimal.avro" | "int256_decimal.avro" => ("(value bytes)", "(value BYTES)"),
        "nested_records.avro" => (
            "(f1 record(f1_1 string, f1_2 int, f1_3 record(f1_3_1 double)),
              f2 array<record(f2_1 boolean, f2_2 float)>, f3 record(f3_1 string) OPTIONAL,
              f4 array<record(f4_1 long)>)",
            "(f1 STRING, f2 VEC<STRING>, f3 STRING OPTIONAL, f4 VEC<STRING>)",
        ),
        "simple_enum.avro" => (
            "(f1 enum('a', 'b', 'c', 'd'), f2 enum('e', 'f', 'g', 'h'),
              f3 enum('i', 'j', 'k') OPTIONAL)",
            "(f1 STRING, f2 STRING, f3 STRING OPTIONAL)",
        ),
        "simple_fixed.avro" => (
            "(f1 fixed(5), f2 fixed(10), f3 fixed(6) OPTIONAL)",
            "(f1 BYTES, f2 BYTES, f3 BYTES OPTIONAL)",
        ),
        "timestamp_logical_types.avro" => (
            "(id int, ts_millis long, ts_micros long, ts_nanos long, local_ts_millis long,
              local_ts_micros long, local_ts_nanos long)",
            "(id I32, ts_millis I64, ts_micros I64, ts_nanos I64, local_ts_millis I64,
              local_ts_micros I64, local_ts_nanos I64)",
        ),
        "zero_byte.avro" => ("(data bytes OPTIONAL)", "(data BYTES OPTIONAL)"),
        _ => return None,
    })
}

#[test]
fn shared_avro_files() {
    let Some(dir) = testdata() else {
        println!("note: shared/testdata/avro is absent; skipped");
        return;
    };
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("testdata is readable")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "avro"))
        .collect();
    paths.sort();
    assert!(paths.len() > 20, "{} files", paths.len());
    // Any file against an unrelated plan: refused, never a panic.
    let mut other = AvroDecoder::new(plan(EVENTS));
    let (mut decoded, mut refused) = (Vec::new(), Vec::new());
    for path in &paths {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(path).expect("file");
        assert!(other.decode_payload(&bytes).is_err(), "{name}");
        let (wire, schema) = declared(&name).unwrap_or(("(id int OPTIONAL)", "(id I32 OPTIONAL)"));
        let plan = plan(&format!(
            "CREATE WIRE AVRO SCHEMA w {wire}; CREATE SCHEMA s {schema};
             CREATE CODEC c FROM WIRE AVRO SCHEMA w TO SCHEMA s;"
        ));
        let mut decoder = AvroDecoder::new(plan);
        match decoder.decode_payload(&bytes) {
            Ok(n) => {
                let rows = rows(&decoder.finish(), BytesAs::Hex);
                assert_eq!(rows.len(), n as usize);
                println!(
                    "{name}: {n} rows, first {}",
                    rows.first().unwrap_or(&Value::Null)
                );
                decoded.push((name, rows));
            }
            Err(e) => {
                let message = e.to_string();
                println!("{name}: refused: {message}");
                let codec = message.contains("is not supported (supported: null, deflate)");
                let shape = message.contains("the writer schema does not match");
                assert!(codec || shape, "{name}: {message}");
                if name == "nested_records.avro" {
                    assert!(message.contains("field 'f4[]'"), "{message}");
                } else if declared(&name).is_some() {
                    panic!("{name} should decode: {message}");
                }
                refused.push(name);
            }
        }
    }
    let find = |file: &str| {
        decoded
            .iter()
            .find(|(name, _)| name == file)
            .map(|(_, rows)| rows.clone())
            .unwrap_or_else(|| panic!("{file} decoded"))
    };
    assert_eq!(
        find("simple_enum.avro")[0],
        json!({"f1": "a", "f2": "g", "f3": "j"})
    );
    assert_eq!(find("alltypes_nulls_plain.avro").len(), 1);
    assert_eq!(find("timestamp_logical_types.avro").len(), 2);
    assert!(
        decoded.len() >= 10 && refused.len() >= 15,
        "{} / {}",
        decoded.len(),
        refused.len()
    );
}

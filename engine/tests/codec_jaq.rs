//! JAQ codecs through `nervix::codec::jaq`: data-driven decode cases from
//! `tests/codec/jaq/*.json`, plan errors, the output and runaway bounds, atomicity, unfolding
//! off-thread, and ON EMITTING round trips in every format.
//!
//! A case file holds `nspl` (a schema and a JAQ codec) and `cases`, each with a `payload`
//! (text), `lines` (joined with newlines) or `payload_hex` (bytes, for CBOR), and either
//! `rows` (every row buffered after the case, as JSON objects; DATETIME as UTC nanoseconds,
//! BYTES as an array of byte values) or `error` (the exact `DecodeError` text; nothing is
//! buffered by a refused payload). Rows are checked, then finished, after every case.

use std::path::Path;
use std::sync::Arc;

use nervix::codec::jaq::{
    emit, unfold, CodecError, DecodeCause, EmitError, JaqCodecPlan, JaqDecoder,
    MAX_RECORDS_PER_PAYLOAD,
};
use serde_json::{json, Value};

#[path = "support/codec_cases.rs"]
mod codec_cases;

use codec_cases::{rows, unhex, BytesAs};

fn try_plan(nspl: &str) -> Result<JaqCodecPlan, CodecError> {
    let (_, codec, fields) = codec_cases::parts(nspl);
    JaqCodecPlan::build(&codec, &fields)
}

fn plan(nspl: &str) -> Arc<JaqCodecPlan> {
    Arc::new(try_plan(nspl).expect("plan builds"))
}

fn payload_of(case: &Value) -> Vec<u8> {
    if let Some(text) = case.get("payload").and_then(Value::as_str) {
        return text.as_bytes().to_vec();
    }
    if let Some(text) = case.get("payload_hex").and_then(Value::as_str) {
        return unhex(text);
    }
    let lines: Vec<&str> = case["lines"]
        .as_array()
        .expect("payload, payload_hex or lines")
        .iter()
        .map(|l| l.as_str().expect("a line is a string"))
        .collect();
    lines.join("\n").into_bytes()
}

#[test]
fn decode_cases() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/codec/jaq");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/codec/jaq is readable")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let mut count = 0;
    let mut failures = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("case file");
        let file: Value = serde_json::from_str(&text).expect("case file is JSON");
        let plan = plan(file["nspl"].as_str().expect("nspl"));
        let mut decoder = JaqDecoder::new(plan);
        for case in file["cases"].as_array().expect("cases") {
            count += 1;
            let name = format!(
                "{}: {}",
                path.file_name().unwrap_or_default().to_string_lossy(),
                case["name"].as_str().unwrap_or("?")
            );
            let result = decoder.decode_payload(&payload_of(case));
            let got = rows(&decoder.finish(), BytesAs::Numbers);
            match (case.get("rows"), case.get("error"), result) {
                (Some(want), None, Ok(added)) => {
                    if Value::Array(got.clone()) != *want {
                        failures.push(format!("{name}: rows\n  got  {got:?}\n  want {want}"));
                    } else if added as usize != got.len() {
                        failures.push(format!("{name}: added {added}, buffered {}", got.len()));
                    }
                }
                (None, Some(want), Err(e)) => {
                    if e.to_string() != want.as_str().unwrap_or_default() {
                        failures.push(format!("{name}: error\n  got  {e}\n  want {want}"));
                    } else if !got.is_empty() {
                        failures.push(format!("{name}: refused payload left rows {got:?}"));
                    }
                }
                (_, _, result) => failures.push(format!("{name}: unexpected {result:?}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(count >= 40, "only {count} cases ran");
}

#[test]
fn plans_are_refused_for_bad_codecs() {
    let schema = "CREATE SCHEMA s (id I64);";
    let err = |codec: &str| {
        try_plan(&format!("{schema} {codec}"))
            .expect_err("refused")
            .to_string()
    };
    assert_eq!(
        err(
            "CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON INGESTION '.items[';"
        ),
        "codec 'c': the ON INGESTION program does not compile: expected closing bracket at the end"
    );
    assert_eq!(
        err(
            "CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON INGESTION 'nope(1)';"
        ),
        "codec 'c': the ON INGESTION program does not compile: undefined filter 'nope' at offset 0"
    );
    assert_eq!(
        err("CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON INGESTION '.' ON EMITTING '$x';"),
        "codec 'c': the ON EMITTING program does not compile: undefined variable '$x' at offset 0"
    );
    let p = plan(&format!(
        "{schema} CREATE CODEC c FROM YAML TO SCHEMA s WITH JAQ TRANSFORMATIONS ON EMITTING '.';"
    ));
    assert!(!p.has_ingestion() && p.has_emitting());
    assert_eq!(p.schema().field(0).name(), "id");
    // Module loading and the node's environment are out of reach.
    assert!(err(
        "CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON INGESTION 'include \"x\"; .';"
    )
    .contains("does not compile"));
    let env = plan(&format!(
        "{schema} CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON INGESTION '{{id: (env | length)}}';"
    ));
    let batch = unfold(&env, b"{}").expect("unfolds").into_batch();
    assert_eq!(rows(&batch, BytesAs::Numbers), vec![json!({"id": 0})]);
}

#[test]
fn the_output_bound_refuses_the_whole_payload() {
    let p = plan(
        "CREATE SCHEMA s (id I64);
         CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON INGESTION 'range(.n) | {id: .}';",
    );
    let at_limit = format!("{{\"n\": {MAX_RECORDS_PER_PAYLOAD}}}");
    let unfolded = unfold(&p, at_limit.as_bytes()).expect("at the limit");
    assert_eq!(unfolded.rows(), MAX_RECORDS_PER_PAYLOAD);
    let over = format!("{{\"n\": {}}}", MAX_RECORDS_PER_PAYLOAD + 1);
    let e = unfold(&p, over.as_bytes()).expect_err("over the limit");
    assert_eq!(e.cause, DecodeCause::TooManyRecords);
    assert_eq!(e.to_string(), "more than 65536 records");
    // Without a program, an array's elements are the records.
    let bare = plan(
        "CREATE SCHEMA s (id I64);
         CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON EMITTING '.';",
    );
    let many = format!(
        "[{}]",
        vec!["{\"id\":1}"; MAX_RECORDS_PER_PAYLOAD + 1].join(",")
    );
    let e = unfold(&bare, many.as_bytes()).expect_err("over the limit");
    assert_eq!(e.cause, DecodeCause::TooManyRecords);
}

#[test]
fn runaway_programs_are_refused_not_hung() {
    let schema = "CREATE SCHEMA s (id I64);";
    let cause = |program: &str| {
        let p = plan(&format!(
            "{schema} CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON INGESTION '{program}';"
        ));
        unfold(&p, b"{}").expect_err("refused").cause
    };
    assert_eq!(cause("last(repeat(1))"), DecodeCause::StepLimit);
    assert_eq!(cause("range(1e12) | select(. < 0)"), DecodeCause::StepLimit);
    assert_eq!(
        cause("[range(1e12)] | {id: length}"),
        DecodeCause::StepLimit
    );
    assert_eq!(cause("def f: 1 + f; {id: f}"), DecodeCause::StackLimit);
    // Endless output is cut by the output bound first.
    assert_eq!(cause("repeat({id: 1})"), DecodeCause::TooManyRecords);
    assert_eq!(
        DecodeCause::StepLimit.to_string(),
        "the program took more than 8000000 steps"
    );
}

#[test]
fn unfolding_runs_on_another_thread_and_appends_atomically() {
    let p = plan(
        "CREATE SCHEMA s (id I64, name STRING);
         CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON INGESTION '.items[]';",
    );
    let worker_plan = Arc::clone(&p);
    let unfolded = std::thread::spawn(move || {
        unfold(
            &worker_plan,
            br#"{"items":[{"id":1,"name":"a"},{"id":2,"name":"b"}]}"#,
        )
    })
    .join()
    .expect("worker")
    .expect("unfolds");
    let mut decoder = JaqDecoder::new(Arc::clone(&p));
    assert_eq!(decoder.append(unfolded).expect("same schema"), 2);
    // A payload refused at its second output leaves the first one out too.
    let e = decoder
        .decode_payload(br#"{"items":[{"id":3,"name":"c"},{"id":"x","name":"d"}]}"#)
        .expect_err("refused");
    assert_eq!(
        e.to_string(),
        "output 1, field 'id': expected integer, found string"
    );
    assert_eq!(decoder.buffered_rows(), 2);
    assert_eq!(
        decoder
            .decode_payload(br#"{"items":[{"id":3,"name":"c"}]}"#)
            .expect("decodes"),
        1
    );
    assert_eq!(
        rows(&decoder.finish(), BytesAs::Numbers),
        vec![
            json!({"id": 1, "name": "a"}),
            json!({"id": 2, "name": "b"}),
            json!({"id": 3, "name": "c"})
        ]
    );
    assert_eq!(decoder.buffered_rows(), 0);
    assert_eq!(decoder.finish().num_rows(), 0);
    // Rows unfolded for another schema are refused.
    let other = plan(
        "CREATE SCHEMA s (x STRING);
         CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON INGESTION '.';",
    );
    let foreign = unfold(&other, br#"{"x":"y"}"#).expect("unfolds");
    assert_eq!(
        decoder.append(foreign).expect_err("foreign").cause,
        DecodeCause::ForeignSchema
    );
    fn send<T: Send + Sync>(_: &T) {}
    send(&*p);
}

const ROUND_TRIP_SCHEMA: &str = "CREATE SCHEMA s (id I64, name STRING, price F64 OPTIONAL, \
    tags VEC<STRING> OPTIONAL, at DATETIME OPTIONAL, ok BOOL);";

/// Decodes `payload`, emits every row, decodes what was emitted, and checks the rows match.
fn round_trip(format: &str, ingestion: &str, emitting: &str, payload: &[u8]) -> Vec<Vec<u8>> {
    let p = plan(&format!(
        "{ROUND_TRIP_SCHEMA} CREATE CODEC c FROM {format} TO SCHEMA s WITH JAQ TRANSFORMATIONS \
         ON INGESTION '{ingestion}' ON EMITTING '{emitting}';"
    ));
    let mut decoder = JaqDecoder::new(Arc::clone(&p));
    decoder.decode_payload(payload).expect("decodes");
    let batch = decoder.finish();
    assert!(batch.num_rows() > 0);
    let mut emitted = Vec::new();
    for row in 0..batch.num_rows() {
        let mut out = Vec::new();
        emit(&p, &batch, row, &mut out).expect("emits");
        decoder.decode_payload(&out).unwrap_or_else(|e| {
            panic!(
                "{format}: re-decoding {:?}: {e}",
                String::from_utf8_lossy(&out)
            )
        });
        emitted.push(out);
    }
    assert_eq!(
        rows(&decoder.finish(), BytesAs::Numbers),
        rows(&batch, BytesAs::Numbers),
        "{format}"
    );
    emitted
}

#[test]
fn on_emitting_round_trips_in_every_format() {
    let json = round_trip(
        "JSON",
        ".items[]",
        "{items: [.]}",
        br#"{"items":[{"id":1,"name":"a \"q\"","price":2.5,"tags":["x","y"],"at":"2024-05-01T10:00:00.5Z","ok":true},
                     {"id":-2,"name":"b","ok":false}]}"#,
    );
    assert_eq!(
        String::from_utf8_lossy(&json[1]),
        r#"{"items":[{"id":-2,"name":"b","price":null,"tags":null,"at":null,"ok":false}]}"#
    );
    round_trip(
        "YAML",
        ".items[]",
        "{items: [.]}",
        b"items:\n  - {id: 1, name: a, price: 2.5, tags: [x], at: '2024-05-01T10:00:00Z', ok: true}\n",
    );
    round_trip(
        "TOML",
        ".items[]",
        "{items: [with_entries(select(.value != null))]}",
        b"[[items]]\nid = 1\nname = \"a\"\ntags = [\"x\"]\nok = true\n",
    );
    round_trip(
        "CBOR",
        ".",
        ".",
        &unhex("a4 62 6964 07 64 6e616d65 61 61 62 6f6b f5 64 74616773 81 61 78"),
    );
    let xml = round_trip(
        "XML",
        ".order | {id: (.id | tonumber), name, ok: (.ok == \"true\")}",
        "{order: {id, name, ok}}",
        b"<order><id>7</id><name>x &amp; y</name><ok>true</ok></order>",
    );
    assert_eq!(
        String::from_utf8_lossy(&xml[0]),
        "<order><id>7</id><name>x &amp; y</name><ok>true</ok></order>"
    );
}

#[test]
fn on_emitting_must_yield_exactly_one_writable_value() {
    let emit_with = |format: &str, program: &str| {
        let p = plan(&format!(
            "CREATE SCHEMA s (id I64); CREATE CODEC c FROM {format} TO SCHEMA s WITH JAQ \
             TRANSFORMATIONS ON INGESTION '.' ON EMITTING '{program}';"
        ));
        let batch = unfold(
            &p,
            if format == "JSON" {
                b"{\"id\":1}"
            } else {
                b"id = 1"
            },
        )
        .expect("unfolds")
        .into_batch();
        let mut out = b"kept".to_vec();
        let result = emit(&p, &batch, 0, &mut out);
        if result.is_err() {
            assert_eq!(out, b"kept");
        }
        result.map(|()| String::from_utf8_lossy(&out[4..]).into_owned())
    };
    assert_eq!(emit_with("JSON", "{id: .id}"), Ok(r#"{"id":1}"#.into()));
    assert_eq!(emit_with("JSON", "empty"), Err(EmitError::NoOutput));
    assert_eq!(emit_with("JSON", "., ."), Err(EmitError::ManyOutputs));
    assert_eq!(
        emit_with("JSON", "error(\"bad\")"),
        Err(EmitError::Program("bad".into()))
    );
    assert_eq!(
        emit_with("JSON", "last(repeat(.))"),
        Err(EmitError::StepLimit)
    );
    assert_eq!(
        emit_with("TOML", "null"),
        Err(EmitError::Write {
            format: "TOML",
            message: "TOML has no null".into()
        })
    );
    assert_eq!(
        emit_with("TOML", "{a: {b: .id}}"),
        Ok("[a]\nb = 1\n".into())
    );
    let p = plan("CREATE SCHEMA s (id I64); CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON INGESTION '.';");
    let batch = unfold(&p, b"{\"id\":1}").expect("unfolds").into_batch();
    assert_eq!(
        emit(&p, &batch, 0, &mut Vec::new()),
        Err(EmitError::NoProgram)
    );
}

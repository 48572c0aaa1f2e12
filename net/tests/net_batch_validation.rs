//! Submitted-batch validation (spec: Client Ingestors, "Submitted Batches"): a canonical batch
//! round-trips, each of the eight defects is produced by a crafted stream, hostile bytes never
//! panic, and every Arrow IPC integration stream is accepted or refused with a defect.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, DictionaryArray, FixedSizeListArray, Float32Array,
    Float64Array, Int16Array, Int32Array, Int64Array, Int8Array, ListArray, RecordBatch,
    StringArray, TimestampNanosecondArray, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use arrow_ipc::writer::{IpcWriteOptions, StreamWriter};
use arrow_ipc::CompressionType;
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use nervix_net::batch::{encode_batch, validate_batch, BatchDefect, BatchLimits, MAX_BATCH_ROWS};

/// A byte bound no test batch reaches unless it means to.
const ROOMY_BYTES: usize = 64 << 20;

fn limits() -> BatchLimits {
    BatchLimits::new(ROOMY_BYTES)
}

fn datetime() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

/// One field of every DESIGN §4 type, some OPTIONAL.
fn every_type_schema() -> SchemaRef {
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
        Field::new("datetime", datetime(), false),
        Field::new("bytes", DataType::Binary, true),
        Field::new(
            "array",
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Int32, false)), 2),
            false,
        ),
        Field::new(
            "vec",
            DataType::List(Arc::new(Field::new("item", DataType::Float64, false))),
            false,
        ),
        Field::new(
            "headers",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            true,
        ),
    ]))
}

fn every_type_batch() -> RecordBatch {
    let schema = every_type_schema();
    let fixed = FixedSizeListArray::new(
        Arc::new(Field::new("item", DataType::Int32, false)),
        2,
        Arc::new(Int32Array::from(vec![1, 2, 3, 4, 5, 6])),
        None,
    );
    let vec = ListArray::new(
        Arc::new(Field::new("item", DataType::Float64, false)),
        arrow_buffer::OffsetBuffer::from_lengths([2, 0, 1]),
        Arc::new(Float64Array::from(vec![0.5, 1.5, 2.5])),
        None,
    );
    let mut headers = ListBuilder::new(StringBuilder::new());
    headers.values().append_value("a: b");
    headers.append(true);
    headers.append(false);
    headers.values().append_null();
    headers.append(true);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt8Array::from(vec![1, 2, 3])),
        Arc::new(Int8Array::from(vec![-1, 0, 1])),
        Arc::new(UInt16Array::from(vec![1, 2, 3])),
        Arc::new(Int16Array::from(vec![-1, 0, 1])),
        Arc::new(UInt32Array::from(vec![1, 2, 3])),
        Arc::new(Int32Array::from(vec![Some(-1), None, Some(1)])),
        Arc::new(UInt64Array::from(vec![1, 2, u64::MAX])),
        Arc::new(Int64Array::from(vec![i64::MIN, 0, 1])),
        Arc::new(Float32Array::from(vec![0.25, 1.0, -3.5])),
        Arc::new(Float64Array::from(vec![None, Some(2.0), Some(f64::NAN)])),
        Arc::new(BooleanArray::from(vec![true, false, true])),
        Arc::new(StringArray::from(vec!["héllo", "", "MARKERQ"])),
        Arc::new(
            TimestampNanosecondArray::from(vec![0, 1, 1_700_000_000_000_000_000])
                .with_timezone("UTC"),
        ),
        Arc::new(BinaryArray::from(vec![
            Some(&b"\xff\x00"[..]),
            None,
            Some(&b""[..]),
        ])),
        Arc::new(fixed),
        Arc::new(vec),
        Arc::new(headers.finish()),
    ];
    RecordBatch::try_new(schema, columns).expect("the test batch is valid")
}

fn one_string(nullable: bool, values: Vec<Option<&str>>) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, nullable)]));
    RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(values))]).expect("valid")
}

/// The messages of an encoded stream, each with its prefix and body, without the end marker.
fn messages(stream: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let len = i32::from_le_bytes(stream[pos + 4..pos + 8].try_into().expect("4 bytes"));
        if len == 0 {
            return out;
        }
        let meta = &stream[pos + 8..pos + 8 + len as usize];
        let message = arrow_ipc::root_as_message(meta).expect("test streams are valid");
        let end = pos + 8 + len as usize + message.bodyLength() as usize;
        out.push(stream[pos..end].to_vec());
        pos = end;
    }
}

const EOS: [u8; 8] = [0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0];

fn splice(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn defect(bytes: &[u8], expected: &SchemaRef, limits: BatchLimits) -> BatchDefect {
    match validate_batch(bytes, expected, limits) {
        Ok(batch) => panic!("accepted a defective batch of {} rows", batch.num_rows()),
        Err(d) => d,
    }
}

#[test]
fn canonical_batch_round_trips() {
    let batch = every_type_batch();
    let bytes = encode_batch(&batch).expect("encodes");
    let decoded = validate_batch(&bytes, &batch.schema(), limits()).expect("canonical is accepted");
    assert_eq!(decoded.schema(), batch.schema());
    // NaN != NaN, so compare the encodings.
    assert_eq!(encode_batch(&decoded).expect("encodes"), bytes);
    // Exactly at both bounds is accepted.
    let at_bound = BatchLimits {
        max_rows: 3,
        max_bytes: bytes.len(),
    };
    assert!(validate_batch(&bytes, &batch.schema(), at_bound).is_ok());
}

#[test]
fn spec_names() {
    let names: Vec<&str> = [
        BatchDefect::Malformed(String::new()),
        BatchDefect::UnexpectedMessage(String::new()),
        BatchDefect::Compressed(String::new()),
        BatchDefect::SchemaMismatch(String::new()),
        BatchDefect::NotOneBatch(String::new()),
        BatchDefect::TooManyRows {
            rows: 0,
            max_rows: 0,
        },
        BatchDefect::TooLarge {
            bytes: 0,
            max_bytes: 0,
        },
        BatchDefect::InvalidData(String::new()),
    ]
    .iter()
    .map(BatchDefect::spec_name)
    .collect();
    assert_eq!(
        names,
        [
            "malformed",
            "unexpected message",
            "compressed",
            "schema mismatch",
            "not one batch",
            "too many rows",
            "too large",
            "invalid data"
        ]
    );
}

#[test]
fn every_truncation_is_malformed() {
    let batch = every_type_batch();
    let bytes = encode_batch(&batch).expect("encodes");
    for end in 0..bytes.len() {
        let d = defect(&bytes[..end], &batch.schema(), limits());
        assert!(matches!(d, BatchDefect::Malformed(_)), "prefix {end}: {d}");
    }
}

#[test]
fn batch_count_and_trailing_data() {
    let batch = every_type_batch();
    let schema = batch.schema();
    let bytes = encode_batch(&batch).expect("encodes");
    let m = messages(&bytes);
    assert_eq!(m.len(), 2);
    for (name, stream) in [
        ("two batches", splice(&[&m[0], &m[1], &m[1], &EOS])),
        ("no batch", splice(&[&m[0], &EOS])),
        ("data after EOS", splice(&[&bytes, &[0]])),
        ("a second stream", splice(&[&bytes, &bytes])),
    ] {
        let d = defect(&stream, &schema, limits());
        assert!(matches!(d, BatchDefect::NotOneBatch(_)), "{name}: {d}");
        println!("{name}: {d}");
    }
}

#[test]
fn unexpected_messages() {
    let batch = every_type_batch();
    let schema = batch.schema();
    let m = messages(&encode_batch(&batch).expect("encodes"));
    for (name, stream) in [
        ("batch first", splice(&[&m[1], &EOS])),
        ("schema twice", splice(&[&m[0], &m[0], &m[1], &EOS])),
    ] {
        let d = defect(&stream, &schema, limits());
        assert!(
            matches!(d, BatchDefect::UnexpectedMessage(_)),
            "{name}: {d}"
        );
    }

    // A dictionary-encoded column: against its own schema the dictionary batch is unexpected,
    // against a STRING schema the schema differs.
    let dict: DictionaryArray<Int32Type> = vec!["a", "b", "a"].into_iter().collect();
    let dict_schema = Arc::new(Schema::new(vec![Field::new(
        "s",
        dict.data_type().clone(),
        false,
    )]));
    let dict_batch =
        RecordBatch::try_new(Arc::clone(&dict_schema), vec![Arc::new(dict)]).expect("valid");
    let bytes = encode_batch(&dict_batch).expect("encodes");
    let d = defect(&bytes, &dict_schema, limits());
    assert!(matches!(d, BatchDefect::UnexpectedMessage(_)), "{d}");
    let d = defect(&bytes, &one_string(false, vec![]).schema(), limits());
    assert!(matches!(d, BatchDefect::SchemaMismatch(_)), "{d}");
}

#[test]
fn compressed_is_refused() {
    // ZSTD needs arrow-ipc's `zstd` feature, which 60.1 does not offer; the check reads only
    // the batch header's compression field, so LZ4 covers it.
    let batch = every_type_batch();
    let options = IpcWriteOptions::default()
        .try_with_compression(Some(CompressionType::LZ4_FRAME))
        .expect("compression options");
    let mut bytes = Vec::new();
    let mut writer =
        StreamWriter::try_new_with_options(&mut bytes, &batch.schema(), options).expect("writer");
    writer.write(&batch).expect("writes");
    writer.finish().expect("finishes");
    drop(writer);
    let d = defect(&bytes, &batch.schema(), limits());
    assert!(matches!(d, BatchDefect::Compressed(_)), "{d}");
    println!("{d}");
}

#[test]
fn schema_mismatches() {
    let batch = one_string(false, vec![Some("x")]);
    let bytes = encode_batch(&batch).expect("encodes");
    let expect = |fields: Vec<Field>| Arc::new(Schema::new(fields));
    let cases: Vec<(&str, SchemaRef)> = vec![
        (
            "extra field",
            expect(vec![
                Field::new("s", DataType::Utf8, false),
                Field::new("t", DataType::Utf8, false),
            ]),
        ),
        ("missing field", expect(vec![])),
        (
            "other name",
            expect(vec![Field::new("t", DataType::Utf8, false)]),
        ),
        (
            "other type",
            expect(vec![Field::new("s", DataType::Binary, false)]),
        ),
        (
            "large string",
            expect(vec![Field::new("s", DataType::LargeUtf8, false)]),
        ),
        (
            "nullable",
            expect(vec![Field::new("s", DataType::Utf8, true)]),
        ),
    ];
    for (name, expected) in cases {
        let d = defect(&bytes, &expected, limits());
        assert!(matches!(d, BatchDefect::SchemaMismatch(_)), "{name}: {d}");
        println!("{name}: {d}");
    }

    // Metadata on the stream's schema, on a field, or an extension type is refused even when
    // everything else matches.
    let plain = batch.schema();
    let with_schema_meta = Schema::new(plain.fields().clone()).with_metadata([("k", "v")]);
    let with_field_meta = Schema::new(vec![
        Field::new("s", DataType::Utf8, false).with_metadata([("k", "v")])
    ]);
    let extension = Schema::new(vec![Field::new("s", DataType::Utf8, false)
        .with_metadata([("ARROW:extension:name", "arrow.json")])]);
    for (name, schema) in [
        ("schema metadata", with_schema_meta),
        ("field metadata", with_field_meta),
        ("extension type", extension),
    ] {
        let b = RecordBatch::try_new(Arc::new(schema), batch.columns().to_vec()).expect("valid");
        let d = defect(&encode_batch(&b).expect("encodes"), &plain, limits());
        assert!(matches!(d, BatchDefect::SchemaMismatch(_)), "{name}: {d}");
        println!("{name}: {d}");
    }

    // A difference deep inside a nested type names the child.
    let list = |nullable| {
        Arc::new(Schema::new(vec![Field::new(
            "v",
            DataType::List(Arc::new(Field::new("item", DataType::Float64, nullable))),
            false,
        )]))
    };
    let b = RecordBatch::try_new(
        list(true),
        vec![Arc::new(ListArray::new(
            Arc::new(Field::new("item", DataType::Float64, true)),
            arrow_buffer::OffsetBuffer::from_lengths([1]),
            Arc::new(Float64Array::from(vec![1.0])),
            None,
        ))],
    )
    .expect("valid");
    let d = defect(&encode_batch(&b).expect("encodes"), &list(false), limits());
    assert!(
        matches!(&d, BatchDefect::SchemaMismatch(m) if m.contains("child")),
        "{d}"
    );

    // DATETIME is nanoseconds in UTC exactly.
    let ts = |tz: &str| {
        Arc::new(Schema::new(vec![Field::new(
            "t",
            DataType::Timestamp(TimeUnit::Nanosecond, Some(tz.into())),
            false,
        )]))
    };
    let b = RecordBatch::try_new(
        ts("+00:00"),
        vec![Arc::new(
            TimestampNanosecondArray::from(vec![1]).with_timezone("+00:00"),
        )],
    )
    .expect("valid");
    let d = defect(&encode_batch(&b).expect("encodes"), &ts("UTC"), limits());
    assert!(matches!(d, BatchDefect::SchemaMismatch(_)), "{d}");
}

#[test]
fn row_and_byte_bounds() {
    let rows = MAX_BATCH_ROWS + 1;
    let schema = Arc::new(Schema::new(vec![Field::new("u", DataType::UInt8, false)]));
    let values: Vec<u8> = (0..rows).map(|i| (i % 251) as u8).collect();
    let big = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new(UInt8Array::from(values))],
    )
    .expect("valid");
    let bytes = encode_batch(&big).expect("encodes");
    let d = defect(&bytes, &schema, limits());
    assert!(
        matches!(
            d,
            BatchDefect::TooManyRows {
                rows: 65_537,
                max_rows: MAX_BATCH_ROWS
            }
        ),
        "{d}"
    );
    assert!(validate_batch(
        &bytes,
        &schema,
        BatchLimits {
            max_rows: rows,
            ..limits()
        }
    )
    .is_ok());

    let batch = every_type_batch();
    let bytes = encode_batch(&batch).expect("encodes");
    let tight = BatchLimits::new(bytes.len() - 1);
    let d = defect(&bytes, &batch.schema(), tight);
    assert!(matches!(d, BatchDefect::TooLarge { .. }), "{d}");
    // Size comes first: even garbage over the bound is too large, not malformed.
    let d = defect(&[0xAB; 100], &batch.schema(), BatchLimits::new(99));
    assert!(
        matches!(
            d,
            BatchDefect::TooLarge {
                bytes: 100,
                max_bytes: 99
            }
        ),
        "{d}"
    );
}

/// Replaces the first occurrence of `needle` in `haystack`.
fn patch(haystack: &mut [u8], needle: &[u8], with: &[u8]) {
    let at = haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the marker is in the stream");
    haystack[at..at + with.len()].copy_from_slice(with);
}

#[test]
fn invalid_data() {
    // Invalid UTF-8 in a STRING column.
    let batch = every_type_batch();
    let mut bytes = encode_batch(&batch).expect("encodes");
    patch(&mut bytes, b"MARKERQ", &[0xFF, 0xFE]);
    let d = defect(&bytes, &batch.schema(), limits());
    assert!(matches!(d, BatchDefect::InvalidData(_)), "{d}");
    println!("invalid utf-8: {d}");

    // A null in a non-nullable column: the schema of a non-nullable stream with the batch of a
    // nullable one.
    let strict = encode_batch(&one_string(false, vec![Some("a"), Some("b")])).expect("encodes");
    let loose = encode_batch(&one_string(true, vec![Some("a"), None])).expect("encodes");
    let (s, l) = (messages(&strict), messages(&loose));
    let stream = splice(&[&s[0], &l[1], &EOS]);
    let d = defect(&stream, &one_string(false, vec![]).schema(), limits());
    assert!(matches!(d, BatchDefect::InvalidData(_)), "{d}");
    println!("null in non-nullable: {d}");

    // Offsets that run backwards: the last offset of "ab","cd" is 4; make the middle one 9.
    let batch = one_string(false, vec![Some("ab"), Some("cd")]);
    let mut bytes = encode_batch(&batch).expect("encodes");
    let offsets: Vec<u8> = [0i32, 2, 4].iter().flat_map(|o| o.to_le_bytes()).collect();
    let bad: Vec<u8> = [0i32, 9, 4].iter().flat_map(|o| o.to_le_bytes()).collect();
    patch(&mut bytes, &offsets, &bad);
    let d = defect(&bytes, &batch.schema(), limits());
    assert!(matches!(d, BatchDefect::InvalidData(_)), "{d}");
    println!("bad offsets: {d}");
}

/// Every single-byte corruption of a canonical batch is accepted or refused — never a panic,
/// not even one the decoder's guard caught.
#[test]
fn corrupted_bytes_never_panic() {
    let batch = every_type_batch();
    let schema = batch.schema();
    let bytes = encode_batch(&batch).expect("encodes");
    let mut by_defect: BTreeMap<&str, usize> = BTreeMap::new();
    for at in 0..bytes.len() {
        for value in [0x00, 0xFF, 0x7F, 0x80, bytes[at] ^ 0x01] {
            let mut b = bytes.clone();
            b[at] = value;
            let name = match validate_batch(&b, &schema, limits()) {
                Ok(_) => "accepted",
                Err(d) => {
                    assert!(
                        !d.to_string().contains("panic"),
                        "byte {at} = {value:#x}: {d}"
                    );
                    d.spec_name()
                }
            };
            *by_defect.entry(name).or_default() += 1;
        }
    }
    println!("single-byte corruptions: {by_defect:?}");
}

fn integration_dir() -> Option<PathBuf> {
    // `shared/` lies beside the workspace root (`../shared` from it, `../../shared` from here).
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/testdata/arrow-ipc-integration"
    ));
    dir.is_dir().then(|| dir.to_path_buf())
}

fn streams_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            streams_under(&path, out);
        } else if path.extension().is_some_and(|e| e == "stream") {
            out.push(path);
        }
    }
}

#[test]
fn integration_streams_are_accepted_or_refused() {
    let Some(dir) = integration_dir() else {
        println!("note: shared/testdata/arrow-ipc-integration is absent; skipped");
        return;
    };
    let mut paths = Vec::new();
    streams_under(&dir, &mut paths);
    paths.sort();
    assert!(
        !paths.is_empty(),
        "no .stream files under {}",
        dir.display()
    );
    let mut by_defect: BTreeMap<&str, usize> = BTreeMap::new();
    let mut per_batch: BTreeMap<&str, usize> = BTreeMap::new();
    for path in &paths {
        let bytes = std::fs::read(path).expect("readable");
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        let reader = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(&bytes), None);
        let outcome = match reader {
            Err(e) => {
                println!(
                    "{name}: arrow cannot read its schema ({e}); validated against an empty one"
                );
                validate_batch(&bytes, &Arc::new(Schema::empty()), limits())
            }
            Ok(reader) => validate_batch(&bytes, &reader.schema(), limits()),
        };
        let word = match &outcome {
            Ok(batch) => {
                println!("{name}: accepted, {} rows", batch.num_rows());
                "accepted"
            }
            Err(d) => {
                assert!(!d.to_string().contains("panic"), "{name}: {d}");
                println!("{name}: {d}");
                d.spec_name()
            }
        };
        *by_defect.entry(word).or_default() += 1;
        split_batches(&name, &bytes, &mut per_batch);
    }
    println!("{} integration streams: {by_defect:?}", paths.len());
    println!("their batches one by one: {per_batch:?}");
}

/// Validates each record batch of a multi-batch stream alone (its schema, the batch, the end
/// marker), so every type the suite covers is decoded, and checks an accepted batch equals what
/// arrow's own reader makes of it.
fn split_batches(name: &str, bytes: &[u8], counts: &mut BTreeMap<&'static str, usize>) {
    let Ok(reader) = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)
    else {
        return;
    };
    let schema = reader.schema();
    let theirs: Vec<RecordBatch> = reader.filter_map(Result::ok).collect();
    let m = messages(bytes);
    let batches = m.iter().skip(1).filter(|msg| {
        arrow_ipc::root_as_message(&msg[8..])
            .is_ok_and(|x| x.header_type() == arrow_ipc::MessageHeader::RecordBatch)
    });
    for (i, batch) in batches.enumerate() {
        let stream = splice(&[&m[0], batch, &EOS]);
        let word = match validate_batch(&stream, &schema, limits()) {
            Ok(ours) => {
                if let Some(theirs) = theirs.get(i) {
                    assert_eq!(&ours, theirs, "{name} batch {i}");
                }
                "accepted"
            }
            Err(d) => {
                assert!(!d.to_string().contains("panic"), "{name} batch {i}: {d}");
                if !matches!(d, BatchDefect::SchemaMismatch(_)) {
                    println!("{name} batch {i}: {d}");
                }
                d.spec_name()
            }
        };
        *counts.entry(word).or_default() += 1;
    }
}

/// `decode_stream` (processor snapshots read back from disk): a stream of several batches
/// decodes to exactly them, and no damaged copy — torn, or one byte complemented — panics;
/// every torn one is refused.
#[test]
fn a_stream_of_batches_decodes_and_damage_is_refused_never_a_panic() {
    let batch = every_type_batch();
    let mut bytes = Vec::new();
    {
        let mut writer = StreamWriter::try_new(&mut bytes, &batch.schema()).expect("writer");
        writer.write(&batch).expect("first");
        writer.write(&batch.slice(1, 1)).expect("second");
        writer.finish().expect("finish");
    }
    let decoded = nervix_net::batch::decode_stream(&bytes).expect("decodes");
    assert_eq!(decoded, vec![batch.clone(), batch.slice(1, 1)]);
    let mut decoded_damaged = 0usize;
    for at in 0..bytes.len() {
        assert!(
            nervix_net::batch::decode_stream(&bytes[..at]).is_err(),
            "a stream torn at byte {at} was read"
        );
        let mut flipped = bytes.clone();
        flipped[at] = !flipped[at];
        decoded_damaged += usize::from(nervix_net::batch::decode_stream(&flipped).is_ok());
    }
    // Most flipped bytes sit in value buffers, where any value is valid.
    assert!(decoded_damaged > 0 && decoded_damaged < bytes.len());
}

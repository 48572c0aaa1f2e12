//! What the codec case-file tests share: reading a case's NSPL (a wire schema, a schema and a
//! codec) into the parts a codec plan is built from, running a folder of decode case files
//! ([`run_decode_cases`]), and showing decoded rows as JSON objects so expectations are
//! readable (DATETIME as UTC nanoseconds; floats that JSON cannot hold as strings; BYTES as
//! `"hex:…"` or as an array of byte values).

#![allow(dead_code)] // each test file uses its own share

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampNanosecondType,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType as Arrow, SchemaRef};
use nervix::nspl::ast::catalog::{CatalogStmt, CreateCodec, CreateWireSchema};
use nervix::nspl::Statement;
use nervix::types::{DataType, FieldType};
use nervix::validate::route::Field;
use serde_json::{json, Map, Value};

/// The statements of a case's NSPL: its wire schema (if any), its codec and the schema's
/// fields.
pub fn parts(nspl: &str) -> (Option<CreateWireSchema>, CreateCodec, Vec<Field>) {
    let script = nervix::nspl::parse_script(nspl);
    assert!(script.errors.is_empty(), "{nspl}: {:?}", script.errors);
    let (mut wire, mut codec, mut fields) = (None, None, Vec::new());
    for s in script.statements {
        match s.statement {
            Statement::Catalog(CatalogStmt::CreateWireSchema(w)) => wire = Some(w),
            Statement::Catalog(CatalogStmt::CreateCodec(c)) => codec = Some(c),
            Statement::Catalog(CatalogStmt::CreateSchema(schema)) => {
                fields = schema
                    .fields
                    .iter()
                    .map(|f| Field {
                        name: f.name.name.clone(),
                        ty: FieldType {
                            data_type: DataType::from_type_name(&f.ty),
                            nullable: f.optional,
                            sensitive: f.sensitive,
                        },
                    })
                    .collect()
            }
            other => panic!("unexpected statement {other:?}"),
        }
    }
    (wire, codec.expect("a codec"), fields)
}

/// A codec's decoder as [`run_decode_cases`] drives it.
pub trait CaseDecoder {
    /// Decodes one payload: the rows it added, or the refusal's text.
    fn decode(&mut self, payload: &[u8]) -> Result<u32, String>;
    fn buffered(&self) -> usize;
    fn take_batch(&mut self) -> RecordBatch;
}

/// Implements [`CaseDecoder`] for codec decoders, which all have `decode_payload`,
/// `buffered_rows` and `finish`.
#[allow(unused_macros)] // each test file uses its own share
macro_rules! case_decoders {
    ($($decoder:ty),+) => {$(
        impl $crate::codec_cases::CaseDecoder for $decoder {
            fn decode(&mut self, payload: &[u8]) -> Result<u32, String> {
                self.decode_payload(payload).map_err(|e| e.to_string())
            }
            fn buffered(&self) -> usize {
                self.buffered_rows()
            }
            fn take_batch(&mut self) -> arrow_array::RecordBatch {
                self.finish()
            }
        }
    )+};
}
#[allow(unused_imports)] // each test file uses its own share
pub(crate) use case_decoders;

/// Runs every `*.json` case file in `tests/codec/<dir>`: a file's `nspl` becomes a decoder
/// (with the schema its batches must have) through `decoder`. For each case, its `prefix`
/// payload, if `payload_of(case, "prefix")` gives one, is decoded first and must succeed; then
/// its `payload_of(case, "payload")` must add the rows it reports, or be refused with exactly
/// the case's `error` text and leave only the prefix's rows buffered; the rows then buffered
/// must be exactly the case's `rows` (BYTES as hex). Returns how many cases ran; panics
/// listing every case that failed.
pub fn run_decode_cases<D: CaseDecoder>(
    dir: &str,
    decoder: impl Fn(&str) -> (SchemaRef, D),
    payload_of: impl Fn(&Value, &str) -> Option<Vec<u8>>,
) -> usize {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/codec")
        .join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{} is readable: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no case files in {}", dir.display());
    let mut count = 0;
    let mut failures = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("case file");
        let file: Value = serde_json::from_str(&text).expect("case file is JSON");
        let (schema, mut decoder) = decoder(file["nspl"].as_str().expect("nspl"));
        for case in file["cases"].as_array().expect("cases") {
            let name = format!("{} / {}", path.display(), case["name"]);
            if let Some(prefix) = payload_of(case, "prefix") {
                decoder
                    .decode(&prefix)
                    .unwrap_or_else(|e| panic!("{name}: prefix: {e}"));
            }
            let before = decoder.buffered();
            let payload = payload_of(case, "payload").unwrap_or_else(|| panic!("{name}: payload"));
            let result = decoder.decode(&payload);
            let expected_error = case.get("error").and_then(Value::as_str);
            match (&result, expected_error) {
                (Err(e), Some(expected)) => {
                    if e != expected {
                        failures.push(format!("{name}:\n  error {e}\n  expected {expected}"));
                    }
                    assert_eq!(decoder.buffered(), before, "{name}: rolled back");
                }
                (Ok(n), None) => {
                    assert_eq!(decoder.buffered(), before + *n as usize, "{name}")
                }
                _ => failures.push(format!(
                    "{name}: got {result:?}, expected {expected_error:?}"
                )),
            }
            let batch = decoder.take_batch();
            assert_eq!(batch.schema(), schema, "{name}");
            let expected = case.get("rows").cloned().unwrap_or(json!([]));
            let actual = Value::Array(rows(&batch, BytesAs::Hex));
            if actual != expected {
                failures.push(format!("{name}:\n  rows {actual}\n  expected {expected}"));
            }
            assert_eq!(decoder.buffered(), 0, "{name}: finished");
            count += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    count
}

/// How BYTES values are shown.
#[derive(Debug, Clone, Copy)]
pub enum BytesAs {
    /// `"hex:0102"`.
    Hex,
    /// `[1, 2]`.
    Numbers,
}

/// Every row of `batch` as a JSON object.
pub fn rows(batch: &RecordBatch, bytes: BytesAs) -> Vec<Value> {
    (0..batch.num_rows())
        .map(|row| {
            let mut object = Map::new();
            for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
                object.insert(field.name().clone(), cell(column.as_ref(), row, bytes));
            }
            Value::Object(object)
        })
        .collect()
}

fn cell(array: &dyn Array, row: usize, bytes: BytesAs) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    match array.data_type() {
        Arrow::UInt8 => json!(array.as_primitive::<UInt8Type>().value(row)),
        Arrow::Int8 => json!(array.as_primitive::<Int8Type>().value(row)),
        Arrow::UInt16 => json!(array.as_primitive::<UInt16Type>().value(row)),
        Arrow::Int16 => json!(array.as_primitive::<Int16Type>().value(row)),
        Arrow::UInt32 => json!(array.as_primitive::<UInt32Type>().value(row)),
        Arrow::Int32 => json!(array.as_primitive::<Int32Type>().value(row)),
        Arrow::UInt64 => json!(array.as_primitive::<UInt64Type>().value(row)),
        Arrow::Int64 => json!(array.as_primitive::<Int64Type>().value(row)),
        Arrow::Float32 => float(f64::from(array.as_primitive::<Float32Type>().value(row))),
        Arrow::Float64 => float(array.as_primitive::<Float64Type>().value(row)),
        Arrow::Boolean => json!(array.as_boolean().value(row)),
        Arrow::Utf8 => json!(array.as_string::<i32>().value(row)),
        Arrow::Binary => {
            let value = array.as_binary::<i32>().value(row);
            match bytes {
                BytesAs::Hex => json!(format!("hex:{}", hex(value))),
                BytesAs::Numbers => json!(value),
            }
        }
        Arrow::Timestamp(..) => json!(array.as_primitive::<TimestampNanosecondType>().value(row)),
        Arrow::List(_) => elements(array.as_list::<i32>().value(row).as_ref(), bytes),
        Arrow::FixedSizeList(..) => elements(array.as_fixed_size_list().value(row).as_ref(), bytes),
        other => panic!("no JSON form for {other}"),
    }
}

/// Floats as JSON numbers; NaN and infinities as strings.
fn float(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        json!(x.to_string())
    }
}

fn elements(values: &dyn Array, bytes: BytesAs) -> Value {
    Value::Array((0..values.len()).map(|i| cell(values, i, bytes)).collect())
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of hex `text` (anything but hex digits, such as spaces, is skipped).
pub fn unhex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| {
            u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex digit")
        })
        .collect()
}

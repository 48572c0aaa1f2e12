//! What the codec case-file tests share: reading a case's NSPL (a wire schema, a schema and a
//! codec) into the parts a codec plan is built from, and showing decoded rows as JSON objects
//! so expectations are readable (DATETIME as UTC nanoseconds; floats that JSON cannot hold as
//! strings; BYTES as `"hex:…"` or as an array of byte values).

#![allow(dead_code)] // each test file uses its own share

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampNanosecondType,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType as Arrow;
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

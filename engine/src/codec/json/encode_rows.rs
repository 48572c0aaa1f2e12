//! Column-wise encoding of a batch into one JSON object per row: the per-message bodies of the
//! emitters (KAFKA TOPIC, HTTP REQUEST), byte-identical to the row writer of [`super::encode`].
//!
//! Why column-wise: the row writer dispatches on each member's Arrow type and downcasts its
//! array for every row, formats integers through `fmt`, and grows its buffer as it goes. Here
//! each member's array is resolved to a typed [`Column`] once per batch and the batch is written
//! in two passes over the columns: the first adds every row's exact byte length member by
//! member, so the rows' offsets are known and the frame's buffer is allocated once at its final
//! size; the second writes each member's bytes into every row's slot. Strings are scanned eight
//! bytes at a time for the bytes JSON must escape (`"`, `\`, control bytes) and copied whole
//! when there are none, the common case.
//!
//! Why the bytes are the row writer's: integers and booleans have one spelling, which both
//! writers produce (optional `-`, decimal digits; `true`/`false`); a string without escapable
//! bytes is copied between quotes exactly as the escaper would copy it, and one with such bytes
//! is written by the row writer's own escaper; every other member (floats, timestamps, lists,
//! object-as-text, types JSON cannot carry) is written by the row writer's `write_member` into
//! a side buffer in the first pass and copied in the second. `json_rows_match_the_row_writer`
//! (engine/tests/codec_json.rs) compares the two on every type, with nulls, unicode and
//! control characters.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, BooleanArray, RecordBatch, StringArray};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType as Arrow;

use super::encode::{write_member, write_string};
use super::JsonCodecPlan;
use crate::codec::document_plan::Rule;
use crate::codec::rows::EncodedRows;

/// An integer type with a JSON spelling: its sign and magnitude.
trait JsonInt: Copy {
    fn split(self) -> (bool, u64);
}

macro_rules! json_int {
    (signed $($t:ty),*) => {$(
        impl JsonInt for $t {
            fn split(self) -> (bool, u64) {
                (self < 0, self.unsigned_abs() as u64)
            }
        }
    )*};
    (unsigned $($t:ty),*) => {$(
        impl JsonInt for $t {
            fn split(self) -> (bool, u64) {
                (false, self as u64)
            }
        }
    )*};
}
json_int!(signed i8, i16, i32, i64);
json_int!(unsigned u8, u16, u32, u64);

/// An integer column's values, by width.
enum Ints<'a> {
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
}

/// Bytes written in the first pass for rows the second pass cannot write from the array:
/// row `r`'s are `bytes[ends[r - 1]..ends[r]]` (from 0 for the first row).
struct Side {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Side {
    fn row(&self, row: usize) -> &[u8] {
        let start = if row == 0 { 0 } else { self.ends[row - 1] };
        &self.bytes[start..self.ends[row]]
    }
}

/// One member's values over the batch, resolved once.
enum Column<'a> {
    /// Always `null`: a `null`-typed member, or a column the batch lacks.
    Null,
    Int(Ints<'a>, Option<&'a NullBuffer>),
    Bool(&'a BooleanArray),
    /// `escaped`: the rows holding a byte to escape, in order, each with the end of its
    /// escaped text in `bytes` (each starts where the previous one ended); every other row is
    /// copied from the array. Clean batches, the common case, allocate nothing per row.
    Text {
        strings: &'a StringArray,
        escaped: Vec<(usize, usize)>,
        bytes: Vec<u8>,
    },
    /// Everything else, written by the row writer during the first pass.
    Written(Side),
}

impl<'a> Column<'a> {
    fn of(array: Option<&'a dyn Array>, rule: Rule, rows: usize) -> Column<'a> {
        let Some(array) = array.filter(|_| rule != Rule::Null) else {
            return Column::Null;
        };
        let nulls = array.nulls();
        macro_rules! ints {
            ($variant:ident, $t:ty) => {
                array
                    .as_primitive_opt::<$t>()
                    .map(|a| Column::Int(Ints::$variant(a.values()), nulls))
            };
        }
        let typed = match (rule, array.data_type()) {
            (Rule::ObjectText, _) => None,
            (_, Arrow::Int8) => ints!(I8, Int8Type),
            (_, Arrow::Int16) => ints!(I16, Int16Type),
            (_, Arrow::Int32) => ints!(I32, Int32Type),
            (_, Arrow::Int64) => ints!(I64, Int64Type),
            (_, Arrow::UInt8) => ints!(U8, UInt8Type),
            (_, Arrow::UInt16) => ints!(U16, UInt16Type),
            (_, Arrow::UInt32) => ints!(U32, UInt32Type),
            (_, Arrow::UInt64) => ints!(U64, UInt64Type),
            (_, Arrow::Boolean) => array.as_boolean_opt().map(Column::Bool),
            (_, Arrow::Utf8) => array.as_string_opt::<i32>().map(|strings| Column::Text {
                strings,
                escaped: Vec::new(),
                bytes: Vec::new(),
            }),
            _ => None,
        };
        typed.unwrap_or_else(|| {
            let mut side = Side {
                bytes: Vec::new(),
                ends: Vec::with_capacity(rows),
            };
            for row in 0..rows {
                if array.is_valid(row) {
                    write_member(array, row, rule, &mut side.bytes);
                } else {
                    side.bytes.extend_from_slice(b"null");
                }
                side.ends.push(side.bytes.len());
            }
            Column::Written(side)
        })
    }

    /// First pass: adds each row's byte length of this member's value to `lens`.
    fn measure(&mut self, lens: &mut [usize]) {
        match self {
            Column::Null => lens.iter_mut().for_each(|len| *len += 4),
            Column::Int(ints, nulls) => {
                let nulls = *nulls;
                match ints {
                    Ints::I8(v) => measure_ints(v, nulls, lens),
                    Ints::I16(v) => measure_ints(v, nulls, lens),
                    Ints::I32(v) => measure_ints(v, nulls, lens),
                    Ints::I64(v) => measure_ints(v, nulls, lens),
                    Ints::U8(v) => measure_ints(v, nulls, lens),
                    Ints::U16(v) => measure_ints(v, nulls, lens),
                    Ints::U32(v) => measure_ints(v, nulls, lens),
                    Ints::U64(v) => measure_ints(v, nulls, lens),
                }
            }
            Column::Bool(bools) => {
                for (row, len) in lens.iter_mut().enumerate() {
                    *len += match bools.is_valid(row) {
                        false => 4,
                        true if bools.value(row) => 4,
                        true => 5,
                    };
                }
            }
            Column::Text {
                strings,
                escaped,
                bytes,
            } => {
                for (row, len) in lens.iter_mut().enumerate() {
                    if strings.is_null(row) {
                        *len += 4;
                        continue;
                    }
                    let text = strings.value(row).as_bytes();
                    if needs_escape(text) {
                        let start = bytes.len();
                        write_string(text, bytes);
                        *len += bytes.len() - start;
                        escaped.push((row, bytes.len()));
                    } else {
                        *len += text.len() + 2;
                    }
                }
            }
            Column::Written(side) => {
                for (row, len) in lens.iter_mut().enumerate() {
                    *len += side.row(row).len();
                }
            }
        }
    }

    /// Second pass: writes each row's value at `pos[row]` in `buf`, advancing it.
    fn write(&self, buf: &mut [u8], pos: &mut [usize]) {
        match self {
            Column::Null => pos.iter_mut().for_each(|at| put(buf, at, b"null")),
            Column::Int(ints, nulls) => match ints {
                Ints::I8(v) => write_ints(v, *nulls, buf, pos),
                Ints::I16(v) => write_ints(v, *nulls, buf, pos),
                Ints::I32(v) => write_ints(v, *nulls, buf, pos),
                Ints::I64(v) => write_ints(v, *nulls, buf, pos),
                Ints::U8(v) => write_ints(v, *nulls, buf, pos),
                Ints::U16(v) => write_ints(v, *nulls, buf, pos),
                Ints::U32(v) => write_ints(v, *nulls, buf, pos),
                Ints::U64(v) => write_ints(v, *nulls, buf, pos),
            },
            Column::Bool(bools) => {
                for (row, at) in pos.iter_mut().enumerate() {
                    let text: &[u8] = match bools.is_valid(row) {
                        false => b"null",
                        true if bools.value(row) => b"true",
                        true => b"false",
                    };
                    put(buf, at, text);
                }
            }
            Column::Text {
                strings,
                escaped,
                bytes,
            } => {
                let mut escaped = escaped.iter().peekable();
                let mut start = 0;
                for (row, at) in pos.iter_mut().enumerate() {
                    if strings.is_null(row) {
                        put(buf, at, b"null");
                    } else if let Some(&(_, end)) = escaped.next_if(|(next, _)| *next == row) {
                        put(buf, at, &bytes[start..end]);
                        start = end;
                    } else {
                        put(buf, at, b"\"");
                        put(buf, at, strings.value(row).as_bytes());
                        put(buf, at, b"\"");
                    }
                }
            }
            Column::Written(side) => {
                for (row, at) in pos.iter_mut().enumerate() {
                    put(buf, at, side.row(row));
                }
            }
        }
    }
}

/// Copies `bytes` into `buf` at `*at` and moves `*at` past them.
fn put(buf: &mut [u8], at: &mut usize, bytes: &[u8]) {
    buf[*at..*at + bytes.len()].copy_from_slice(bytes);
    *at += bytes.len();
}

fn digit_count(magnitude: u64) -> usize {
    magnitude.checked_ilog10().map_or(1, |log| log as usize + 1)
}

fn measure_ints<N: JsonInt>(values: &[N], nulls: Option<&NullBuffer>, lens: &mut [usize]) {
    for (row, len) in lens.iter_mut().enumerate() {
        *len += if nulls.is_some_and(|n| n.is_null(row)) {
            4
        } else {
            let (negative, magnitude) = values[row].split();
            usize::from(negative) + digit_count(magnitude)
        };
    }
}

/// "00" "01" … "99": two digits per division by 100.
const DIGIT_PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Writes `magnitude`'s decimal digits into `out`, which is exactly that long.
fn write_digits(mut magnitude: u64, out: &mut [u8]) {
    let mut end = out.len();
    while magnitude >= 100 {
        let pair = (magnitude % 100) as usize * 2;
        magnitude /= 100;
        out[end - 2..end].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
        end -= 2;
    }
    if magnitude >= 10 {
        let pair = magnitude as usize * 2;
        out[end - 2..end].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        out[end - 1] = b'0' + magnitude as u8;
    }
}

fn write_ints<N: JsonInt>(
    values: &[N],
    nulls: Option<&NullBuffer>,
    buf: &mut [u8],
    pos: &mut [usize],
) {
    for (row, at) in pos.iter_mut().enumerate() {
        if nulls.is_some_and(|n| n.is_null(row)) {
            put(buf, at, b"null");
            continue;
        }
        let (negative, magnitude) = values[row].split();
        if negative {
            put(buf, at, b"-");
        }
        let digits = digit_count(magnitude);
        write_digits(magnitude, &mut buf[*at..*at + digits]);
        *at += digits;
    }
}

const LOW_BITS: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Whether some byte of `word` is below `n` (`n` ≤ 128): a byte below `n` borrows into its own
/// high bit while its own high bit is clear. Exact as a yes/no answer (a borrow only carries
/// past a byte that already answered yes).
fn has_byte_below(word: u64, n: u8) -> bool {
    word.wrapping_sub(LOW_BITS * u64::from(n)) & !word & HIGH_BITS != 0
}

/// Whether `text` holds a byte JSON strings must escape: `"`, `\` or a control byte.
fn needs_escape(text: &[u8]) -> bool {
    let mut words = text.chunks_exact(8);
    for chunk in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(chunk);
        let word = u64::from_le_bytes(bytes);
        if has_byte_below(word, 0x20)
            || has_byte_below(word ^ (LOW_BITS * u64::from(b'"')), 1)
            || has_byte_below(word ^ (LOW_BITS * u64::from(b'\\')), 1)
        {
            return true;
        }
    }
    words
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// Appends every row of `batch` to `out` as one JSON object (no newline), recording each
/// row's range: the per-message bodies of an emitter, as [`super::encode_ndjson`] writes
/// its lines.
pub fn encode_json_rows(batch: &RecordBatch, plan: &JsonCodecPlan, out: &mut EncodedRows) {
    let rows = batch.num_rows();
    let members = plan.members(batch);
    // What precedes each member's value: `"name":` after a comma (none before the first).
    let prefixes: Vec<Vec<u8>> = members
        .iter()
        .enumerate()
        .map(|(i, (name, _, _))| {
            let mut prefix = Vec::with_capacity(name.len() + 4);
            if i > 0 {
                prefix.push(b',');
            }
            write_string(name.as_bytes(), &mut prefix);
            prefix.push(b':');
            prefix
        })
        .collect();
    let fixed = 2 + prefixes.iter().map(Vec::len).sum::<usize>();
    let mut columns: Vec<Column<'_>> = members
        .iter()
        .map(|&(_, rule, array)| Column::of(array, rule, rows))
        .collect();
    let mut lens = vec![fixed; rows];
    for column in &mut columns {
        column.measure(&mut lens);
    }
    // Row r occupies bounds[r]..bounds[r + 1].
    let mut bounds = Vec::with_capacity(rows + 1);
    let mut total = 0;
    bounds.push(0);
    for len in &lens {
        total += len;
        bounds.push(total);
    }
    let mut buf = vec![0u8; total];
    // Each row's write position, starting at its first byte (the lengths are done with).
    let mut pos = lens;
    pos.copy_from_slice(&bounds[..rows]);
    for at in pos.iter_mut() {
        put(&mut buf, at, b"{");
    }
    for (prefix, column) in prefixes.iter().zip(&columns) {
        for at in pos.iter_mut() {
            put(&mut buf, at, prefix);
        }
        column.write(&mut buf, &mut pos);
    }
    for at in pos.iter_mut() {
        put(&mut buf, at, b"}");
    }
    debug_assert!(pos.iter().zip(&bounds[1..]).all(|(at, end)| at == end));
    out.append_contiguous(buf, &bounds);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_escape_scan_agrees_with_a_byte_test_for_every_byte_at_every_offset() {
        for len in 1..=17 {
            for at in 0..len {
                for byte in 0..=255u8 {
                    let mut text = vec![b'a'; len];
                    text[at] = byte;
                    let expected = byte < 0x20 || byte == b'"' || byte == b'\\';
                    assert_eq!(
                        needs_escape(&text),
                        expected,
                        "byte {byte} at {at} of {len}"
                    );
                }
            }
        }
        // Bytes just above the boundaries, side by side (borrows must not spill).
        assert!(!needs_escape(b" !#[]^\x7f\xff \x80\xc3\xa9 !#]"));
        assert!(!needs_escape(b""));
    }

    #[test]
    fn digits_are_written_as_display_writes_them() {
        let cases = [
            0u64,
            1,
            9,
            10,
            99,
            100,
            101,
            999,
            1_000,
            123_456_789,
            u64::from(u32::MAX),
            u64::MAX,
        ];
        for value in cases {
            let mut out = vec![0u8; digit_count(value)];
            write_digits(value, &mut out);
            assert_eq!(out, value.to_string().as_bytes());
        }
        for value in [i8::MIN, -1, 0, i8::MAX] {
            let (negative, magnitude) = value.split();
            assert_eq!(
                (negative, magnitude),
                (value < 0, value.unsigned_abs() as u64)
            );
        }
        assert_eq!(i64::MIN.split(), (true, 9_223_372_036_854_775_808));
    }
}

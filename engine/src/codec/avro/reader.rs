//! The Avro binary encoding (Avro 1.11 specification, "Binary Encoding") read in place:
//! zigzag varints, length-prefixed bytes, IEEE floats, unions and blocked arrays and maps.
//! [`Reader::skip`] checks and skips a value of a wire type, [`Reader::json_into`] writes one
//! as JSON text.
//!
//! Correctness: every read is bounds-checked; a varint longer than [`MAX_VARINT_BYTES`] (or
//! overflowing 64 bits) and an `int` beyond 32 bits are refused; a length is checked against
//! the bytes left before anything is copied; a block count must fit in the bytes left (every
//! item but `null` takes at least one byte), so a tiny input cannot loop without bound. Wire
//! types cannot refer to themselves, so recursion is bounded by the wire schema's own depth.

use std::io::Write;

use nervix_nspl::ast::catalog::{AvroType, WireField};

use crate::codec::json::encode::write_string;

use super::error::DecodeCause;

/// The longest varint a `long` takes: ⌈64 / 7⌉ bytes.
pub(crate) const MAX_VARINT_BYTES: usize = 10;

pub(crate) use crate::codec::decoding::fail;

/// A failure at a byte offset, before its record and field are attached.
pub(crate) type Fail = crate::codec::decoding::Fail<DecodeCause>;

pub(crate) struct Reader<'a> {
    pub bytes: &'a [u8],
    pub pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, pos: 0 }
    }

    pub fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Fail> {
        if n > self.left() {
            return Err(fail(self.bytes.len(), DecodeCause::End));
        }
        let slice = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(slice)
    }

    /// A zigzag-encoded `long`.
    pub fn long(&mut self) -> Result<i64, Fail> {
        let at = self.pos;
        let mut value: u64 = 0;
        for i in 0..MAX_VARINT_BYTES {
            let Some(&b) = self.bytes.get(self.pos) else {
                return Err(fail(self.pos, DecodeCause::End));
            };
            self.pos += 1;
            let bits = u64::from(b & 0x7F);
            if i == MAX_VARINT_BYTES - 1 && bits > 1 {
                return Err(fail(at, DecodeCause::Varint(MAX_VARINT_BYTES)));
            }
            value |= bits << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err(fail(at, DecodeCause::Varint(MAX_VARINT_BYTES)))
    }

    /// A zigzag-encoded `int`: a `long` within 32 bits.
    pub fn int(&mut self) -> Result<i32, Fail> {
        let at = self.pos;
        let value = self.long()?;
        i32::try_from(value).map_err(|_| fail(at, DecodeCause::Int(value)))
    }

    /// A length prefix, checked against the bytes left.
    pub fn length(&mut self) -> Result<usize, Fail> {
        let at = self.pos;
        let length = self.long()?;
        if length < 0 {
            return Err(fail(at, DecodeCause::NegativeLength(length)));
        }
        match usize::try_from(length) {
            Ok(n) if n <= self.left() => Ok(n),
            _ => Err(fail(
                at,
                DecodeCause::Length {
                    length,
                    left: self.left(),
                },
            )),
        }
    }

    /// Length-prefixed `bytes`.
    pub fn bytes(&mut self) -> Result<&'a [u8], Fail> {
        let n = self.length()?;
        self.take(n)
    }

    /// A length-prefixed UTF-8 `string`.
    pub fn string(&mut self) -> Result<&'a [u8], Fail> {
        let at = self.pos;
        let text = self.bytes()?;
        std::str::from_utf8(text).map_err(|_| fail(at, DecodeCause::Utf8))?;
        Ok(text)
    }

    pub fn boolean(&mut self) -> Result<bool, Fail> {
        let at = self.pos;
        match self.take(1)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(fail(at, DecodeCause::Boolean(b))),
        }
    }

    pub fn float(&mut self) -> Result<f32, Fail> {
        let b = self.take(4)?;
        Ok(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn double(&mut self) -> Result<f64, Fail> {
        let b = self.take(8)?;
        Ok(f64::from_le_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ]))
    }

    /// The union branch of an OPTIONAL value: `true` when it is present (branch 1), `false`
    /// when null (branch 0).
    pub fn present(&mut self) -> Result<bool, Fail> {
        let at = self.pos;
        match self.long()? {
            0 => Ok(false),
            1 => Ok(true),
            branch => Err(fail(at, DecodeCause::Union(branch))),
        }
    }

    /// The item count of the next block of an array or map (0 ends it). A negative count is
    /// followed by the block's byte size, which is read and not needed.
    pub fn block(&mut self, item: &AvroType) -> Result<usize, Fail> {
        let at = self.pos;
        let mut count = self.long()?;
        if count < 0 {
            count = count.checked_neg().unwrap_or(i64::MAX);
            self.long()?;
        }
        let fits = usize::try_from(count)
            .ok()
            .filter(|&n| n <= self.left() || (*item == AvroType::Null && n <= MAX_NULL_ITEMS));
        fits.ok_or_else(|| {
            fail(
                at,
                DecodeCause::Block {
                    count,
                    left: self.left(),
                },
            )
        })
    }

    /// An enum index, checked against its symbols.
    pub fn symbol<'s>(&mut self, symbols: &'s [String]) -> Result<&'s str, Fail> {
        let at = self.pos;
        let index = self.long()?;
        usize::try_from(index)
            .ok()
            .and_then(|i| symbols.get(i))
            .map(String::as_str)
            .ok_or_else(|| {
                fail(
                    at,
                    DecodeCause::Enum {
                        index,
                        symbols: symbols.len(),
                    },
                )
            })
    }

    /// Checks and skips a value of `ty` (an OPTIONAL one when `optional`).
    pub fn skip(&mut self, ty: &AvroType, optional: bool) -> Result<(), Fail> {
        if optional && !self.present()? {
            return Ok(());
        }
        match ty {
            AvroType::Null => {}
            AvroType::Boolean => {
                self.boolean()?;
            }
            AvroType::Int => {
                self.int()?;
            }
            AvroType::Long => {
                self.long()?;
            }
            AvroType::Float => {
                self.take(4)?;
            }
            AvroType::Double => {
                self.take(8)?;
            }
            AvroType::Bytes => {
                self.bytes()?;
            }
            AvroType::String => {
                self.string()?;
            }
            AvroType::Fixed(n) => {
                let n = usize::try_from(*n).unwrap_or(usize::MAX);
                self.take(n)?;
            }
            AvroType::Enum(symbols) => {
                self.symbol(symbols)?;
            }
            AvroType::Record(fields) => {
                for f in fields {
                    self.skip(&f.ty, f.optional)?;
                }
            }
            AvroType::Array(item) => loop {
                let n = self.block(item)?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    self.skip(item, false)?;
                }
            },
            AvroType::Map(value) => loop {
                let n = self.block(value)?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    self.string()?;
                    self.skip(value, false)?;
                }
            },
        }
        Ok(())
    }

    /// Writes a value of `ty` (an OPTIONAL one when `optional`) as JSON text: records and maps
    /// as objects, enums as their symbol, `bytes` and `fixed` as strings of code points
    /// U+0000–U+00FF (Avro's JSON encoding), and NaN or infinite floats as `null`.
    pub fn json_into(
        &mut self,
        ty: &AvroType,
        optional: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), Fail> {
        if optional && !self.present()? {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        match ty {
            AvroType::Null => out.extend_from_slice(b"null"),
            AvroType::Boolean => {
                let b = self.boolean()?;
                out.extend_from_slice(if b { b"true" } else { b"false" });
            }
            AvroType::Int => {
                let _ = write!(out, "{}", self.int()?);
            }
            AvroType::Long => {
                let _ = write!(out, "{}", self.long()?);
            }
            AvroType::Float => write_float(f64::from(self.float()?), out),
            AvroType::Double => write_float(self.double()?, out),
            AvroType::Bytes => {
                let b = self.bytes()?;
                write_latin1(b, out);
            }
            AvroType::Fixed(n) => {
                let n = usize::try_from(*n).unwrap_or(usize::MAX);
                let b = self.take(n)?;
                write_latin1(b, out);
            }
            AvroType::String => {
                let s = self.string()?;
                write_string(s, out);
            }
            AvroType::Enum(symbols) => {
                let s = self.symbol(symbols)?;
                write_string(s.as_bytes(), out);
            }
            AvroType::Record(fields) => self.json_record(fields, out)?,
            AvroType::Array(item) => {
                out.push(b'[');
                let mut first = true;
                loop {
                    let n = self.block(item)?;
                    if n == 0 {
                        break;
                    }
                    for _ in 0..n {
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        self.json_into(item, false, out)?;
                    }
                }
                out.push(b']');
            }
            AvroType::Map(value) => {
                out.push(b'{');
                let mut first = true;
                loop {
                    let n = self.block(value)?;
                    if n == 0 {
                        break;
                    }
                    for _ in 0..n {
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        let key = self.string()?;
                        write_string(key, out);
                        out.push(b':');
                        self.json_into(value, false, out)?;
                    }
                }
                out.push(b'}');
            }
        }
        Ok(())
    }

    fn json_record(
        &mut self,
        fields: &[WireField<AvroType>],
        out: &mut Vec<u8>,
    ) -> Result<(), Fail> {
        out.push(b'{');
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_string(f.name.as_bytes(), out);
            out.push(b':');
            self.json_into(&f.ty, f.optional, out)?;
        }
        out.push(b'}');
        Ok(())
    }
}

/// An array of `null` takes no bytes per item; its blocks may hold at most this many items,
/// so a few bytes cannot make the decoder loop for long.
pub(crate) const MAX_NULL_ITEMS: usize = 65_536;

fn write_float(x: f64, out: &mut Vec<u8>) {
    if x.is_finite() {
        let _ = write!(out, "{x:?}");
    } else {
        out.extend_from_slice(b"null");
    }
}

/// Bytes as a JSON string of the code points U+0000–U+00FF they are.
fn write_latin1(bytes: &[u8], out: &mut Vec<u8>) {
    let text: String = bytes.iter().map(|&b| char::from(b)).collect();
    write_string(text.as_bytes(), out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        let long = |bytes: &[u8]| Reader::new(bytes).long().map_err(|f| f.cause);
        assert_eq!(long(&[0x00]), Ok(0));
        assert_eq!(long(&[0x01]), Ok(-1));
        assert_eq!(long(&[0x02]), Ok(1));
        assert_eq!(long(&[0x80, 0x01]), Ok(64));
        let max = [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01];
        assert_eq!(long(&max), Ok(i64::MAX));
        let min = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01];
        assert_eq!(long(&min), Ok(i64::MIN));
        assert_eq!(long(&[0xFF; 10]), Err(DecodeCause::Varint(10)));
        assert_eq!(long(&[0x80, 0x80]), Err(DecodeCause::End));
        assert_eq!(
            Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x10])
                .int()
                .map_err(|f| f.cause),
            Err(DecodeCause::Int(1 << 31))
        );
    }
}

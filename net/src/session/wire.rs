//! The encoding primitives of session frames: a body writer and a bounds-checked body reader,
//! the code-byte mapping of enumerations, and the encoding of field lists. [`super::frame`]
//! builds every frame from these; they are private to the session module.
//!
//! Why it is correct: every read checks the remaining length before it takes bytes, a length
//! prefix is checked against its bound before anything is copied or allocated, and a list
//! pre-allocates at most what the remaining bytes could hold; every write refuses what the
//! reader would refuse.

use super::frame::{
    ExpectedField, FrameError, MAX_NAME_BYTES, MAX_SESSION_FRAME_BYTES, MAX_TYPE_TEXT_BYTES,
};

/// The fewest body bytes one expected field takes: two empty strings and the flags byte.
pub(super) const MIN_EXPECTED_FIELD_BYTES: usize = 4 + 4 + 1;

/// The most fields a field list may declare: as many as the largest frame could hold.
pub(super) const MAX_FIELDS: usize = MAX_SESSION_FRAME_BYTES / MIN_EXPECTED_FIELD_BYTES;

const FLAG_OPTIONAL: u8 = 0b01;
const FLAG_SENSITIVE: u8 = 0b10;

/// Maps an enumeration to its code byte and back; codes are its position in `ALL`.
pub(super) trait Code: Copy + PartialEq + 'static {
    const ALL: &'static [Self];
    const FIELD: &'static str;
    fn code(self) -> u8 {
        // `ALL` lists every variant, so the position is always found.
        Self::ALL.iter().position(|v| *v == self).unwrap_or(0) as u8
    }
    fn from_code(code: u8) -> Result<Self, FrameError> {
        Self::ALL
            .get(usize::from(code))
            .copied()
            .ok_or(FrameError::UnknownCode {
                field: Self::FIELD,
                code,
            })
    }
}

/// Writes a body, refusing fields longer than their bounds.
pub(super) struct Writer {
    pub(super) out: Vec<u8>,
}

impl Writer {
    pub(super) fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    pub(super) fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(super) fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(super) fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    pub(super) fn len(
        &mut self,
        field: &'static str,
        len: usize,
        max: usize,
    ) -> Result<(), FrameError> {
        match u32::try_from(len) {
            Ok(n) if len <= max => {
                self.u32(n);
                Ok(())
            }
            _ => Err(FrameError::FieldTooLong {
                field,
                len_bytes: len as u64,
                max_bytes: max,
            }),
        }
    }
    pub(super) fn str(
        &mut self,
        field: &'static str,
        v: &str,
        max: usize,
    ) -> Result<(), FrameError> {
        self.len(field, v.len(), max)?;
        self.out.extend_from_slice(v.as_bytes());
        Ok(())
    }
    pub(super) fn bytes(&mut self, field: &'static str, v: &[u8]) -> Result<(), FrameError> {
        self.len(field, v.len(), MAX_SESSION_FRAME_BYTES)?;
        self.out.extend_from_slice(v);
        Ok(())
    }
    pub(super) fn fields(
        &mut self,
        field: &'static str,
        fields: &[ExpectedField],
    ) -> Result<(), FrameError> {
        self.len(field, fields.len(), MAX_FIELDS)?;
        for f in fields {
            self.str("field name", &f.name, MAX_NAME_BYTES)?;
            self.str("field type", &f.type_text, MAX_TYPE_TEXT_BYTES)?;
            let mut flags = 0;
            if f.optional {
                flags |= FLAG_OPTIONAL;
            }
            if f.sensitive {
                flags |= FLAG_SENSITIVE;
            }
            self.u8(flags);
        }
        Ok(())
    }
}

/// Reads a body; every read checks the remaining length first.
pub(super) struct Reader<'a> {
    pub(super) rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], FrameError> {
        if n > self.rest.len() {
            return Err(FrameError::Truncated { field });
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }
    pub(super) fn array<const N: usize>(
        &mut self,
        field: &'static str,
    ) -> Result<[u8; N], FrameError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(field, N)?);
        Ok(a)
    }
    pub(super) fn u8(&mut self, field: &'static str) -> Result<u8, FrameError> {
        Ok(self.array::<1>(field)?[0])
    }
    pub(super) fn u32(&mut self, field: &'static str) -> Result<u32, FrameError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }
    pub(super) fn u64(&mut self, field: &'static str) -> Result<u64, FrameError> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }
    pub(super) fn bool(&mut self, field: &'static str) -> Result<bool, FrameError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            code => Err(FrameError::UnknownCode { field, code }),
        }
    }
    pub(super) fn code<T: Code>(&mut self) -> Result<T, FrameError> {
        T::from_code(self.u8(T::FIELD)?)
    }
    pub(super) fn len(&mut self, field: &'static str, max: usize) -> Result<usize, FrameError> {
        let len = self.u32(field)?;
        match usize::try_from(len) {
            Ok(n) if n <= max => Ok(n),
            _ => Err(FrameError::FieldTooLong {
                field,
                len_bytes: u64::from(len),
                max_bytes: max,
            }),
        }
    }
    pub(super) fn str(&mut self, field: &'static str, max: usize) -> Result<String, FrameError> {
        let len = self.len(field, max)?;
        let raw = self.take(field, len)?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| FrameError::InvalidUtf8 { field })
    }
    pub(super) fn bytes(&mut self, field: &'static str) -> Result<Vec<u8>, FrameError> {
        let len = self.len(field, MAX_SESSION_FRAME_BYTES)?;
        Ok(self.take(field, len)?.to_vec())
    }
    pub(super) fn fields(&mut self, field: &'static str) -> Result<Vec<ExpectedField>, FrameError> {
        let count = self.len(field, MAX_FIELDS)?;
        let mut fields = Vec::with_capacity(count.min(self.rest.len() / MIN_EXPECTED_FIELD_BYTES));
        for _ in 0..count {
            let name = self.str("field name", MAX_NAME_BYTES)?;
            let type_text = self.str("field type", MAX_TYPE_TEXT_BYTES)?;
            let flags = self.u8("field flags")?;
            if flags & !(FLAG_OPTIONAL | FLAG_SENSITIVE) != 0 {
                return Err(FrameError::UnknownCode {
                    field: "field flags",
                    code: flags,
                });
            }
            fields.push(ExpectedField {
                name,
                type_text,
                optional: flags & FLAG_OPTIONAL != 0,
                sensitive: flags & FLAG_SENSITIVE != 0,
            });
        }
        Ok(fields)
    }
}

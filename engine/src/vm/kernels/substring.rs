//! `contains(column, 'literal')` over a whole values buffer at once.
//!
//! The rows of a string column lie end to end in one buffer, so the search runs over the
//! buffer, not row by row, in one of two ways:
//!
//! - Needles up to [`SIMD_NEEDLE_MAX_BYTES`] on x86-64: every position of the buffer is tested
//!   64 at a time with AVX-512BW, 32 with AVX2 or 16 with SSE2 (the x86-64 baseline), whichever
//!   is the widest the CPU has, one compare per needle byte, into
//!   a bitmap of the positions where the needle starts; then each row asks whether a bit is
//!   set between its first position and the last one where the needle still fits inside it.
//!   Neither pass branches on the data (rows of up to 64 candidate positions are one shifted
//!   128-bit read of the bitmap), which is what makes it fast: rows are short and matches
//!   frequent, so a search that stops at each match and walks to its row pays a mispredicted
//!   branch or a function call per row (memchr's `memmem`, used before for every needle, was
//!   a third of the shard in the `producer-filter-map` benchmark). Cost: one load, compare and
//!   AND per needle byte per 64 (32, 16) positions, and 1 bit of scratch per byte of text.
//! - Longer needles and other targets: one `memmem` search from match to match; a match is
//!   mapped to its row by walking the offsets forward, and the scan jumps to that row's end (a
//!   row needs one match; a match that runs past its row's end means the row has none, since
//!   the search finds the leftmost). Linear for any needle.
//!
//! Matching bytes is matching characters: the needle and the text are valid UTF-8, and a
//! UTF-8 sequence cannot match at a position that is not a character boundary.

use arrow_array::{Array, BooleanArray, StringArray};
use arrow_buffer::{BooleanBuffer, BooleanBufferBuilder};

use crate::vm::eval::Col;

/// Needles up to this long take the bitmap scan (one compare per needle byte per block).
pub(crate) const SIMD_NEEDLE_MAX_BYTES: usize = 16;

/// `contains(haystack, needle)` for a string column and a non-null scalar needle; `None` when
/// the arguments are not that shape (the caller then uses Arrow's `like` kernel).
pub(crate) fn contains_scalar(haystack: &Col, needle: &Col) -> Option<BooleanArray> {
    let (Col::Array(haystack), Col::Scalar(needle)) = (haystack, needle) else {
        return None;
    };
    let haystack = haystack.as_any().downcast_ref::<StringArray>()?;
    let needle = needle.as_any().downcast_ref::<StringArray>()?;
    if needle.is_null(0) || haystack.is_empty() {
        return None;
    }
    let needle = needle.value(0).as_bytes();
    let scan = Scan {
        values: haystack.value_data(),
        offsets: haystack.value_offsets(),
        needle,
    };
    let found = if needle.is_empty() {
        BooleanBuffer::new_set(haystack.len())
    } else if cfg!(target_arch = "x86_64") && needle.len() <= SIMD_NEEDLE_MAX_BYTES {
        scan.by_bitmap()
    } else {
        scan.memmem()
    };
    Some(BooleanArray::new(found, haystack.nulls().cloned()))
}

struct Scan<'a> {
    values: &'a [u8],
    /// `rows + 1` offsets; a slice's first offset need not be 0.
    offsets: &'a [i32],
    needle: &'a [u8],
}

impl Scan<'_> {
    fn rows(&self) -> usize {
        self.offsets.len() - 1
    }

    /// One `memmem` search from match to match (module docs).
    fn memmem(&self) -> BooleanBuffer {
        let rows = self.rows();
        let mut found = BooleanBufferBuilder::new(rows);
        found.append_n(rows, false);
        let finder = memchr::memmem::Finder::new(self.needle);
        let end = self.offsets[rows] as usize;
        let mut pos = self.offsets[0] as usize;
        let mut row = 0usize;
        while pos < end {
            let Some(relative) = finder.find(&self.values[pos..end]) else {
                break;
            };
            let at = pos + relative;
            while self.offsets[row + 1] as usize <= at {
                row += 1;
            }
            let row_end = self.offsets[row + 1] as usize;
            if at + self.needle.len() <= row_end {
                found.set_bit(row, true);
            }
            pos = row_end;
        }
        found.finish()
    }

    /// The bitmap of match starts, then one bitmap question per row (module docs).
    fn by_bitmap(&self) -> BooleanBuffer {
        let base = self.offsets[0] as usize;
        let text = &self.values[base..self.offsets[self.rows()] as usize];
        let starts = match_starts(text, self.needle);
        let len = self.needle.len();
        BooleanBuffer::collect_bool(self.rows(), |row| {
            let start = self.offsets[row] as usize - base;
            let end = self.offsets[row + 1] as usize - base;
            // Positions `start..=end - len` are where the needle fits inside the row.
            end >= start + len && any_bit(&starts, start, end + 1 - len - start)
        })
    }
}

/// Bit `i` is set when `needle` starts at `text[i]`; two zero words of padding follow, so
/// [`any_bit`] may read one word past any position.
fn match_starts(text: &[u8], needle: &[u8]) -> Vec<u64> {
    let mut starts = vec![0u64; text.len() / 64 + 2];
    let blocks_end = match_starts_simd(text, needle, &mut starts);
    let last_start = text.len().saturating_sub(needle.len());
    if text.len() >= needle.len() {
        for at in blocks_end..=last_start {
            if &text[at..at + needle.len()] == needle {
                starts[at / 64] |= 1 << (at % 64);
            }
        }
    }
    starts
}

/// Whether any of the `count` bits from bit `from` is set (`count` > 0).
fn any_bit(bits: &[u64], from: usize, count: usize) -> bool {
    let (word, shift) = (from / 64, from % 64);
    if count <= 64 {
        // One 128-bit read covers bits `shift..shift + count` (at most 127).
        let pair = bits[word] as u128 | (bits[word + 1] as u128) << 64;
        let window = (pair >> shift) as u64;
        let mask = if count == 64 {
            u64::MAX
        } else {
            (1u64 << count) - 1
        };
        return window & mask != 0;
    }
    let last = from + count - 1;
    let (last_word, last_shift) = (last / 64, last % 64);
    if bits[word] >> shift != 0 {
        return true;
    }
    if bits[word + 1..last_word].iter().any(|w| *w != 0) {
        return true;
    }
    let keep = if last_shift == 63 {
        u64::MAX
    } else {
        (1u64 << (last_shift + 1)) - 1
    };
    bits[last_word] & keep != 0
}

/// The vector width a match-start scan uses, widest first; each is tried only where the CPU
/// has it (checked at run time, a cached flag read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg(target_arch = "x86_64")]
enum Width {
    /// AVX-512BW: 64 positions per compare, straight into one word of the bitmap.
    Avx512,
    /// AVX2: 32 positions per compare.
    Avx2,
    /// SSE2 (the x86-64 baseline): 16 positions per compare.
    Sse2,
}

#[cfg(target_arch = "x86_64")]
impl Width {
    fn widest() -> Width {
        if std::arch::is_x86_feature_detected!("avx512bw") {
            Width::Avx512
        } else if std::arch::is_x86_feature_detected!("avx2") {
            Width::Avx2
        } else {
            Width::Sse2
        }
    }
}

/// Sets the bits of the match starts in whole blocks whose needle bytes all lie inside
/// `text`, with the widest vectors the CPU has; returns the first position it did not test.
#[cfg(target_arch = "x86_64")]
fn match_starts_simd(text: &[u8], needle: &[u8], starts: &mut [u64]) -> usize {
    match_starts_with(Width::widest(), text, needle, starts)
}

/// [`match_starts_simd`] at one width (`width` must be one the CPU has), finishing the
/// positions a wide block no longer covers with narrower ones.
#[cfg(target_arch = "x86_64")]
fn match_starts_with(width: Width, text: &[u8], needle: &[u8], starts: &mut [u64]) -> usize {
    assert!(
        !needle.is_empty() && needle.len() <= SIMD_NEEDLE_MAX_BYTES,
        "needle length checked by the caller"
    );
    // SAFETY (all three calls): each runs only where its target feature is present —
    // AVX-512BW and AVX2 as `width` says (detected at run time), SSE2 always (the x86-64
    // baseline).
    #[allow(unsafe_code)]
    unsafe {
        let wide_end = match width {
            Width::Avx512 => match_starts_avx512(text, needle, starts),
            Width::Avx2 => match_starts_avx2(text, needle, starts, 0),
            Width::Sse2 => 0,
        };
        match_starts_sse2(text, needle, starts, wide_end)
    }
}

/// 64 positions per block: each needle byte compared into a mask, the masks ANDed; a block
/// starts at a multiple of 64, so its mask is one word of the bitmap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
fn match_starts_avx512(text: &[u8], needle: &[u8], starts: &mut [u64]) -> usize {
    use std::arch::x86_64::{
        __m512i, _mm512_cmpeq_epi8_mask, _mm512_loadu_si512, _mm512_set1_epi8,
    };
    const BLOCK: usize = 64;
    let mut bytes = [_mm512_set1_epi8(0); SIMD_NEEDLE_MAX_BYTES];
    for (lane, byte) in bytes.iter_mut().zip(needle) {
        *lane = _mm512_set1_epi8(*byte as i8);
    }
    let bytes = &bytes[..needle.len()];
    let mut pos = 0usize;
    while pos + BLOCK + needle.len() - 1 <= text.len() {
        let mut found = u64::MAX;
        for (offset, byte) in bytes.iter().enumerate() {
            // SAFETY: `pos + offset + BLOCK <= pos + BLOCK + needle.len() - 1 <= text.len()`,
            // so the 64-byte load reads inside `text`; `loadu` takes any alignment.
            #[allow(unsafe_code)]
            let lane =
                unsafe { _mm512_loadu_si512(text.as_ptr().add(pos + offset) as *const __m512i) };
            found &= _mm512_cmpeq_epi8_mask(lane, *byte);
        }
        starts[pos / 64] = found;
        pos += BLOCK;
    }
    pos
}

/// Defines a match-start scan over `$block`-position blocks from `from` (a multiple of
/// `$block`) with one family of byte-compare intrinsics whose `movemask` yields one bit per
/// position. Blocks start at multiples of their width, so a block's bits never straddle two
/// words of the bitmap.
macro_rules! movemask_scan {
    ($name:ident, $feature:literal, $block:literal, $vector:ident, $set1:ident, $load:ident,
     $cmpeq:ident, $and:ident, $movemask:ident) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        fn $name(text: &[u8], needle: &[u8], starts: &mut [u64], from: usize) -> usize {
            use std::arch::x86_64::{$and, $cmpeq, $load, $movemask, $set1, $vector};
            const BLOCK: usize = $block;
            debug_assert_eq!(from % BLOCK, 0);
            let mut bytes = [$set1(0); SIMD_NEEDLE_MAX_BYTES];
            for (lane, byte) in bytes.iter_mut().zip(needle) {
                *lane = $set1(*byte as i8);
            }
            let bytes = &bytes[..needle.len()];
            let mut pos = from;
            while pos + BLOCK + needle.len() - 1 <= text.len() {
                let mut all = $set1(-1);
                for (offset, byte) in bytes.iter().enumerate() {
                    // SAFETY: as in `match_starts_avx512`, with `BLOCK`-byte loads.
                    #[allow(unsafe_code)]
                    let lane = unsafe { $load(text.as_ptr().add(pos + offset) as *const $vector) };
                    all = $and(all, $cmpeq(lane, *byte));
                }
                let found = $movemask(all) as u32 as u64;
                starts[pos / 64] |= found << (pos % 64);
                pos += BLOCK;
            }
            pos
        }
    };
}

movemask_scan!(
    match_starts_avx2,
    "avx2",
    32,
    __m256i,
    _mm256_set1_epi8,
    _mm256_loadu_si256,
    _mm256_cmpeq_epi8,
    _mm256_and_si256,
    _mm256_movemask_epi8
);
movemask_scan!(
    match_starts_sse2,
    "sse2",
    16,
    __m128i,
    _mm_set1_epi8,
    _mm_loadu_si128,
    _mm_cmpeq_epi8,
    _mm_and_si128,
    _mm_movemask_epi8
);

#[cfg(not(target_arch = "x86_64"))]
fn match_starts_simd(_text: &[u8], _needle: &[u8], _starts: &mut [u64]) -> usize {
    0
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::StringArray;

    use super::*;

    /// Row by row with `str::contains`, the obvious answer.
    fn contains_naive(values: &StringArray, needle: &str) -> Vec<Option<bool>> {
        values
            .iter()
            .map(|v| v.map(|v| v.contains(needle)))
            .collect()
    }

    /// Every vector width this CPU has finds exactly the match starts a plain scan finds,
    /// whatever the text length (so every mix of wide blocks, narrow blocks and scalar tail).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_vector_width_finds_the_same_match_starts() {
        let widths = [Width::Avx512, Width::Avx2, Width::Sse2];
        let available = match Width::widest() {
            Width::Avx512 => &widths[..],
            Width::Avx2 => &widths[1..],
            Width::Sse2 => &widths[2..],
        };
        let text: Vec<u8> = (0..700u32)
            .map(|i| b"nervix n"[(i.wrapping_mul(2_654_435_761) >> 29) as usize])
            .collect();
        for needle in [&b"n"[..], b"nervix", b"x n", b"nervix nervix ne"] {
            for len in (0..text.len()).step_by(7) {
                let text = &text[..len];
                let mut expected = vec![0u64; len / 64 + 2];
                for at in 0..=len.saturating_sub(needle.len()) {
                    if len >= needle.len() && &text[at..at + needle.len()] == needle {
                        expected[at / 64] |= 1 << (at % 64);
                    }
                }
                for width in available {
                    let mut starts = vec![0u64; len / 64 + 2];
                    let tested = match_starts_with(*width, text, needle, &mut starts);
                    for at in tested..=len.saturating_sub(needle.len()) {
                        if len >= needle.len() && &text[at..at + needle.len()] == needle {
                            starts[at / 64] |= 1 << (at % 64);
                        }
                    }
                    assert_eq!(
                        starts, expected,
                        "{width:?}, needle {needle:?}, {len} bytes"
                    );
                }
            }
        }
    }

    #[test]
    fn contains_over_the_buffer_agrees_with_a_row_by_row_search() {
        // Rows that end in part of the needle, matches across row boundaries, repeats, empty
        // rows, nulls, multi-byte text, long rows, and sliced arrays.
        let mut rows: Vec<Option<String>> = vec![
            Some("nervi".into()),
            Some("xnervix".into()),
            Some("".into()),
            None,
            Some("nervixnervix".into()),
            Some("ner".into()),
            Some("vix".into()),
            Some("én nervix é".into()),
            Some("n".into()),
            Some("x".into()),
            Some(
                "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnervix".into(),
            ),
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 80) as usize;
            let text: String = (0..len)
                .map(|i| ['n', 'e', 'r', 'v', 'i', 'x', ' '][((seed >> (i % 50)) % 7) as usize])
                .collect();
            rows.push(Some(text));
        }
        let array = StringArray::from(rows);
        let long_needle = "nervix ".repeat(6);
        for needle in [
            "nervix",
            "x",
            "nn",
            "ix n",
            "zz",
            "é",
            "nervix nervix ne",
            "nervixnervixnervixnervixnervixne",
            long_needle.as_str(),
        ] {
            for (offset, len) in [(0, array.len()), (3, array.len() - 10), (7, 1), (11, 40)] {
                let slice = array.slice(offset, len);
                let col = Col::Array(Arc::new(slice.clone()));
                let pattern = Col::Scalar(Arc::new(StringArray::from(vec![needle])));
                let got = contains_scalar(&col, &pattern).expect("array and scalar");
                let got: Vec<Option<bool>> = got.iter().collect();
                assert_eq!(got, contains_naive(&slice, needle), "needle {needle:?}");
            }
        }
    }
}

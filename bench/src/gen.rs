//! The scenarios' row generator: a fixed-seed xorshift, rows of
//! `(id I64, sent_ns I64, tenant STRING, text STRING)`, texts of 24–40 ASCII characters of which
//! about half contain [`NEEDLE`]. Batches are generated once, before timing, into a ring; each
//! submission reuses a ring batch's Arc-backed columns and builds only a fresh `sent_ns` column.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use nervix::net::session::frame::ExpectedField;

/// What the scenarios' junction filters on (`contains(input.text, NEEDLE)`).
pub const NEEDLE: &str = "nervix";

/// The seed every run starts from, so two runs submit the same rows.
pub const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// Tenants the generator spreads rows over.
pub const TENANTS: [&str; 8] = [
    "acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell",
];

/// Marsaglia's xorshift64: small, fast, reproducible; not for anything but test data.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        XorShift(if seed == 0 { SEED } else { seed })
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `0..bound` (`bound` > 0; 0 gives 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            self.next_u64() % bound
        }
    }
}

/// The Arrow schema of the rows, as the ingestor expects it (no field optional).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("sent_ns", DataType::Int64, false),
        Field::new("tenant", DataType::Utf8, false),
        Field::new("text", DataType::Utf8, false),
    ]))
}

/// The fields a producer declares when it opens, matching [`schema`].
pub fn expected_fields() -> Vec<ExpectedField> {
    [
        ("id", "I64"),
        ("sent_ns", "I64"),
        ("tenant", "STRING"),
        ("text", "STRING"),
    ]
    .iter()
    .map(|(name, ty)| ExpectedField {
        name: (*name).to_string(),
        type_text: (*ty).to_string(),
        optional: false,
        sensitive: false,
    })
    .collect()
}

/// One pre-generated batch: its columns except `sent_ns`, and how many rows match.
#[derive(Debug, Clone)]
pub struct RingBatch {
    pub id: ArrayRef,
    pub tenant: ArrayRef,
    pub text: ArrayRef,
    pub rows: usize,
    /// Rows whose text contains [`NEEDLE`] (counted on the generated text itself).
    pub matching: usize,
}

impl RingBatch {
    /// A record batch of this ring entry with every row's `sent_ns` set to `sent_ns`.
    pub fn with_sent_ns(&self, sent_ns: i64) -> anyhow::Result<RecordBatch> {
        let sent: ArrayRef = Arc::new(Int64Array::from(vec![sent_ns; self.rows]));
        RecordBatch::try_new(
            schema(),
            vec![
                self.id.clone(),
                sent,
                self.tenant.clone(),
                self.text.clone(),
            ],
        )
        .map_err(|e| anyhow::anyhow!("cannot assemble a batch: {e}"))
    }
}

const WORDS: [&str; 16] = [
    "alpha", "stream", "order", "queue", "delta", "packet", "signal", "ledger", "vector", "shard",
    "relay", "branch", "window", "join", "metric", "sink",
];

/// One row's text: words cut to 24–40 characters, the needle spliced in for about half of
/// them (no word contains the needle, and it has no space, so only the splice makes a match).
fn text(rng: &mut XorShift, out: &mut String) {
    out.clear();
    let target = 24 + rng.below(17) as usize;
    while out.len() < target {
        out.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        out.push(' ');
    }
    out.truncate(target);
    if rng.next_u64() & 1 == 0 {
        let at = rng.below((target - NEEDLE.len() + 1) as u64) as usize;
        out.replace_range(at..at + NEEDLE.len(), NEEDLE);
    }
}

/// Generates `batches` batches of `batch_rows` rows from [`SEED`].
pub fn ring(batches: usize, batch_rows: usize) -> Vec<RingBatch> {
    let mut rng = XorShift::new(SEED);
    let mut next_id: i64 = 0;
    let mut line = String::with_capacity(48);
    (0..batches)
        .map(|_| {
            let mut ids = Vec::with_capacity(batch_rows);
            let mut tenants = Vec::with_capacity(batch_rows);
            let mut texts = Vec::with_capacity(batch_rows);
            let mut matching = 0;
            for _ in 0..batch_rows {
                ids.push(next_id);
                next_id += 1;
                tenants.push(TENANTS[rng.below(TENANTS.len() as u64) as usize]);
                text(&mut rng, &mut line);
                if line.contains(NEEDLE) {
                    matching += 1;
                }
                texts.push(line.clone());
            }
            RingBatch {
                id: Arc::new(Int64Array::from(ids)),
                tenant: Arc::new(StringArray::from(tenants)),
                text: Arc::new(StringArray::from(texts)),
                rows: batch_rows,
                matching,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn texts_are_24_to_40_chars_and_about_half_match() {
        let ring = ring(4, 4096);
        let total: usize = ring.iter().map(|b| b.rows).sum();
        let matching: usize = ring.iter().map(|b| b.matching).sum();
        let share = matching as f64 / total as f64;
        assert!((0.4..0.6).contains(&share), "share {share}");
        for batch in &ring {
            let text = batch.text.as_any().downcast_ref::<StringArray>().unwrap();
            let mut counted = 0;
            for i in 0..text.len() {
                let t = text.value(i);
                assert!((24..=40).contains(&t.len()), "{t:?}");
                if t.contains(NEEDLE) {
                    counted += 1;
                }
            }
            assert_eq!(counted, batch.matching);
        }
    }

    #[test]
    fn the_ring_is_the_same_every_time() {
        let a = ring(2, 100);
        let b = ring(2, 100);
        assert_eq!(a[1].text.to_data(), b[1].text.to_data());
        assert_eq!(a[1].matching, b[1].matching);
    }
}

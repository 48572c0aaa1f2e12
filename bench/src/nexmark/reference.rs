//! Reference answers: each Nexmark query computed directly over the generated events with
//! plain Rust collections, in the shape of the query's NSPL output (field order and types of
//! its CLIENT CONSUMER schema), so a port's output can be compared row for row.
//!
//! They are the definitions, written for obviousness rather than speed: q0–q2 map each bid;
//! q5, q7 and q8 bucket event times into epoch-aligned windows (`window_start_s`, whole epoch
//! seconds, as the ports name windows) in ordered maps and read the answers off them. A
//! finite stream closes every window it touched, so windows at the end count what they got.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::{anyhow, bail};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, TimestampNanosecondType};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use nexmark::event::{Auction, Bid, Person};

use super::gen::time_ns;

/// One output value. F64 is kept as its bits so rows compare exactly and sort.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    I64(i64),
    F64Bits(u64),
    Str(String),
    /// DATETIME, nanoseconds since the epoch.
    Time(i64),
}

/// One output row, its values in the schema's field order.
pub type Row = Vec<Value>;

/// The euro rate of q1.
pub const EUROS_PER_DOLLAR: f64 = 0.908;
/// q2 keeps the bids on auctions whose id is a multiple of this.
pub const Q2_AUCTION_MODULUS: i64 = 123;
/// q5's hopping window: width and step, in seconds.
pub const Q5_WIDTH_S: i64 = 10;
pub const Q5_STEP_S: i64 = 2;
/// q7's and q8's tumbling window, in seconds.
pub const TUMBLE_S: i64 = 10;

fn int(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Whole epoch seconds of a generator time (what `extract('epoch', t)` gives).
fn epoch_s(ms: u64) -> i64 {
    int((ms / 1_000) as usize)
}

fn text(s: &str) -> Value {
    Value::Str(s.to_string())
}

/// q0: every bid, every field.
pub fn q0(bids: &[Bid]) -> Vec<Row> {
    bids.iter()
        .map(|b| {
            vec![
                Value::I64(int(b.auction)),
                Value::I64(int(b.bidder)),
                Value::I64(int(b.price)),
                text(&b.channel),
                text(&b.url),
                Value::Time(time_ns(b.date_time)),
                text(&b.extra),
            ]
        })
        .collect()
}

/// q1's price: the cents as F64 times [`EUROS_PER_DOLLAR`].
pub fn euros(price: usize) -> f64 {
    price as f64 * EUROS_PER_DOLLAR
}

/// q1: (auction, bidder, price in euros, date_time, extra).
pub fn q1(bids: &[Bid]) -> Vec<Row> {
    bids.iter()
        .map(|b| {
            vec![
                Value::I64(int(b.auction)),
                Value::I64(int(b.bidder)),
                Value::F64Bits(euros(b.price).to_bits()),
                Value::Time(time_ns(b.date_time)),
                text(&b.extra),
            ]
        })
        .collect()
}

/// Whether q2 keeps a bid.
pub fn q2_keeps(bid: &Bid) -> bool {
    int(bid.auction) % Q2_AUCTION_MODULUS == 0
}

/// q2: (auction, price) of the bids on every 123rd auction.
pub fn q2(bids: &[Bid]) -> Vec<Row> {
    bids.iter()
        .filter(|b| q2_keeps(b))
        .map(|b| vec![Value::I64(int(b.auction)), Value::I64(int(b.price))])
        .collect()
}

/// q5: (auction, num, window_start_s) for every hopping window and every auction whose bid
/// count in it is the window's largest.
pub fn q5(bids: &[Bid]) -> Vec<Row> {
    // window start → auction → bids in that window.
    let mut counts: BTreeMap<i64, HashMap<i64, i64>> = BTreeMap::new();
    for bid in bids {
        let t = epoch_s(bid.date_time);
        let last_start = t - t.rem_euclid(Q5_STEP_S);
        let mut start = last_start;
        while start > t - Q5_WIDTH_S {
            *counts
                .entry(start)
                .or_default()
                .entry(int(bid.auction))
                .or_default() += 1;
            start -= Q5_STEP_S;
        }
    }
    let mut rows = Vec::new();
    for (start, auctions) in counts {
        let most = auctions.values().copied().max().unwrap_or(0);
        let mut hot: Vec<i64> = auctions
            .iter()
            .filter(|(_, n)| **n == most)
            .map(|(a, _)| *a)
            .collect();
        hot.sort_unstable();
        rows.extend(
            hot.into_iter()
                .map(|a| vec![Value::I64(a), Value::I64(most), Value::I64(start)]),
        );
    }
    rows
}

/// The start of the tumbling window holding a generator time.
fn tumble_start(ms: u64) -> i64 {
    let t = epoch_s(ms);
    t - t.rem_euclid(TUMBLE_S)
}

/// q7: (auction, price, bidder, date_time, extra) of every bid whose price is the largest of
/// its tumbling window.
pub fn q7(bids: &[Bid]) -> Vec<Row> {
    let mut highest: HashMap<i64, usize> = HashMap::new();
    for bid in bids {
        let top = highest.entry(tumble_start(bid.date_time)).or_insert(0);
        *top = (*top).max(bid.price);
    }
    bids.iter()
        .filter(|b| highest.get(&tumble_start(b.date_time)) == Some(&b.price))
        .map(|b| {
            vec![
                Value::I64(int(b.auction)),
                Value::I64(int(b.price)),
                Value::I64(int(b.bidder)),
                Value::Time(time_ns(b.date_time)),
                text(&b.extra),
            ]
        })
        .collect()
}

/// q8: (id, name, starttime_s) of every person who created an auction in the tumbling window
/// in which they registered.
pub fn q8(persons: &[Person], auctions: &[Auction]) -> Vec<Row> {
    let sellers: BTreeSet<(i64, i64)> = auctions
        .iter()
        .map(|a| (int(a.seller), tumble_start(a.date_time)))
        .collect();
    persons
        .iter()
        .filter(|p| sellers.contains(&(int(p.id), tumble_start(p.date_time))))
        .map(|p| {
            vec![
                Value::I64(int(p.id)),
                text(&p.name),
                Value::I64(tumble_start(p.date_time)),
            ]
        })
        .collect()
}

/// A batch's rows as [`Row`]s (I64, F64, STRING and DATETIME columns, no nulls).
pub fn rows_of(batch: &RecordBatch) -> anyhow::Result<Vec<Row>> {
    let mut rows: Vec<Row> = vec![Vec::with_capacity(batch.num_columns()); batch.num_rows()];
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if column.null_count() > 0 {
            bail!("column `{}` has nulls", field.name());
        }
        match column.data_type() {
            DataType::Int64 => {
                let values = column.as_primitive::<Int64Type>();
                for (row, v) in rows.iter_mut().zip(values.values()) {
                    row.push(Value::I64(*v));
                }
            }
            DataType::Float64 => {
                let values = column.as_primitive::<Float64Type>();
                for (row, v) in rows.iter_mut().zip(values.values()) {
                    row.push(Value::F64Bits(v.to_bits()));
                }
            }
            DataType::Utf8 => {
                let values = column.as_string::<i32>();
                for (row, v) in rows.iter_mut().zip(values.iter()) {
                    row.push(Value::Str(v.unwrap_or_default().to_string()));
                }
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => {
                let values = column.as_primitive::<TimestampNanosecondType>();
                for (row, v) in rows.iter_mut().zip(values.values()) {
                    row.push(Value::Time(*v));
                }
            }
            other => {
                return Err(anyhow!(
                    "column `{}` is {other}, which the reference does not compare",
                    field.name()
                ))
            }
        }
    }
    Ok(rows)
}

/// How a port's rows differ from the reference's, as multisets: the reference rows it did not
/// send and the rows it sent that the reference does not have (each sorted, repeated as often
/// as the count differs).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RowDiff {
    pub missing: Vec<Row>,
    pub extra: Vec<Row>,
}

impl RowDiff {
    /// `got` against `expected`, in any order.
    pub fn between(expected: &[Row], got: &[Row]) -> RowDiff {
        let mut counts: BTreeMap<&Row, i64> = BTreeMap::new();
        for row in expected {
            *counts.entry(row).or_default() += 1;
        }
        for row in got {
            *counts.entry(row).or_default() -= 1;
        }
        let mut diff = RowDiff::default();
        for (row, count) in counts {
            let side = if count > 0 {
                &mut diff.missing
            } else {
                &mut diff.extra
            };
            side.extend(std::iter::repeat_n(
                row.clone(),
                count.unsigned_abs() as usize,
            ));
        }
        diff
    }

    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty()
    }

    /// One line per differing row (`missing …` / `extra …`, the row's values in the output
    /// schema's field order), at most `limit` lines and a count of the rest.
    pub fn describe(&self, limit: usize) -> Vec<String> {
        let mut lines: Vec<String> = self
            .missing
            .iter()
            .map(|row| format!("missing {}", show(row)))
            .chain(
                self.extra
                    .iter()
                    .map(|row| format!("extra   {}", show(row))),
            )
            .collect();
        if lines.len() > limit {
            let rest = lines.len() - limit;
            lines.truncate(limit);
            lines.push(format!("… and {rest} more"));
        }
        lines
    }
}

/// A row's values, comma-separated (DATETIME as epoch nanoseconds).
fn show(row: &Row) -> String {
    let values: Vec<String> = row
        .iter()
        .map(|value| match value {
            Value::I64(v) | Value::Time(v) => v.to_string(),
            Value::F64Bits(bits) => f64::from_bits(*bits).to_string(),
            Value::Str(s) => format!("{s:?}"),
        })
        .collect();
    format!("({})", values.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nexmark::gen::{bid_batches, Events, BASE_TIME_MS};

    fn bid(auction: usize, price: usize, at_ms: u64) -> Bid {
        Bid {
            auction,
            bidder: 7,
            price,
            channel: "c".into(),
            url: "u".into(),
            date_time: at_ms,
            extra: String::new(),
        }
    }

    #[test]
    fn q5_counts_each_bid_in_five_hopping_windows_and_keeps_ties() {
        let t0 = BASE_TIME_MS;
        // Auction 1: two bids at t0+1 s; auction 2: one at t0+1 s and one at t0+9 s.
        let bids = [
            bid(1, 10, t0 + 1_000),
            bid(1, 10, t0 + 1_500),
            bid(2, 10, t0 + 1_200),
            bid(2, 10, t0 + 9_000),
        ];
        let rows = q5(&bids);
        let start = (t0 / 1_000) as i64;
        let at = |s: i64| -> Vec<&Row> {
            rows.iter()
                .filter(|r| r[2] == Value::I64(start + s))
                .collect()
        };
        // [t0, t0+10) holds all four: auctions 1 and 2 tie at 2 bids.
        let first = at(0);
        assert_eq!(first.len(), 2, "{first:?}");
        assert!(first.iter().all(|r| r[1] == Value::I64(2)));
        // [t0-8, t0+2) .. [t0-2, t0+8) hold the bids around t0+1 s: auction 1 wins with 2.
        for s in [-8, -6, -4, -2] {
            assert_eq!(
                at(s),
                vec![&vec![Value::I64(1), Value::I64(2), Value::I64(start + s)]]
            );
        }
        // [t0+2, t0+12) .. [t0+8, t0+18) hold only auction 2's late bid.
        for s in [2, 4, 6, 8] {
            assert_eq!(
                at(s),
                vec![&vec![Value::I64(2), Value::I64(1), Value::I64(start + s)]]
            );
        }
        assert_eq!(rows.len(), 2 + 4 + 4);
    }

    #[test]
    fn a_diff_counts_repeated_rows_as_multisets() {
        let row = |a: i64| vec![Value::I64(a), Value::I64(1), Value::I64(10)];
        let expected = [row(1), row(2), row(2), row(3)];
        let got = [row(3), row(2), row(4), row(4)];
        let diff = RowDiff::between(&expected, &got);
        assert_eq!(diff.missing, vec![row(1), row(2)]);
        assert_eq!(diff.extra, vec![row(4), row(4)]);
        assert_eq!(
            diff.describe(3),
            vec![
                "missing (1, 1, 10)",
                "missing (2, 1, 10)",
                "extra   (4, 1, 10)",
                "… and 1 more"
            ]
        );
        assert!(RowDiff::between(&got, &got).is_empty());
    }

    #[test]
    fn q7_keeps_every_bid_at_its_window_maximum() {
        let t0 = BASE_TIME_MS;
        let bids = [
            bid(1, 5, t0),
            bid(2, 9, t0 + 3_000),
            bid(3, 9, t0 + 9_999),
            bid(4, 1, t0 + 10_000),
        ];
        let auctions: Vec<Value> = q7(&bids).into_iter().map(|r| r[0].clone()).collect();
        assert_eq!(auctions, vec![Value::I64(2), Value::I64(3), Value::I64(4)]);
    }

    #[test]
    fn q8_joins_a_person_with_an_auction_of_the_same_window_once() {
        let events = Events::generate(20_000);
        let rows = q8(&events.persons, &events.auctions);
        assert!(!rows.is_empty());
        let distinct: BTreeSet<&Row> = rows.iter().collect();
        assert_eq!(distinct.len(), rows.len());
        for row in &rows {
            let Value::I64(id) = row[0] else {
                panic!("{row:?}")
            };
            let person = events
                .persons
                .iter()
                .find(|p| int(p.id) == id)
                .expect("a generated person");
            assert!(events.auctions.iter().any(|a| int(a.seller) == id
                && tumble_start(a.date_time) == tumble_start(person.date_time)));
        }
    }

    #[test]
    fn the_reference_reads_batches_back_as_its_own_rows() {
        let events = Events::generate(500);
        let batches = bid_batches(&events.bids, 100);
        let mut rows = Vec::new();
        for batch in &batches {
            rows.extend(rows_of(batch).unwrap());
        }
        assert_eq!(rows, q0(&events.bids));
        assert_eq!(
            q2(&events.bids).len(),
            events.bids.iter().filter(|b| q2_keeps(b)).count()
        );
    }
}

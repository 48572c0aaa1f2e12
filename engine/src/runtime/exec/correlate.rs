//! The pending rows of one CORRELATOR branch and how a new batch is matched against them
//! (spec "Correlator"; the exact rules are recorded in `docs/decisions.md`).
//!
//! Each side keeps its unmatched rows in arrival order with the domain instant they arrived,
//! their acknowledgement root (one pending unit per row) and, for MATCH ALL, whether they have
//! matched yet. A new batch on one side is matched against the *other* side's pending rows:
//!
//! - **CORRELATE WHERE runs on whole candidate batches.** The new rows × pending rows cross
//!   product is built with `take` in chunks of at most [`MAX_PAIR_CANDIDATES`] pairs (whole new
//!   rows per chunk: every pair of one new row is in the same chunk, since a side holds at most
//!   [`MAX_PENDING_ROWS_PER_SIDE`] ≤ [`MAX_PAIR_CANDIDATES`] rows) and the VM evaluates each
//!   chunk once. Cost is new × pending pairs; the bound caps the memory of one evaluation.
//! - **MATCH EARLIEST / LATEST.** New rows pick in their batch order: each takes the earliest
//!   (latest) pending row that satisfies the condition and that no earlier new row took; both
//!   leave. A new row that finds none becomes pending.
//! - **MATCH ALL.** Every satisfied pair is emitted; new rows become pending too, and pending
//!   rows stay until MAX TIME whether they matched or not.
//! - **A failed condition fails the new row.** A new row for which CORRELATE WHERE fails on any
//!   candidate pair makes no pair and is not kept (the caller refuses it as a message error);
//!   the pending rows it was compared with are untouched.
//! - **Bounded.** A side holds at most [`MAX_PENDING_ROWS_PER_SIDE`] rows per branch; new rows
//!   that would need a slot beyond it are refused (under ALL before matching, since every ALL
//!   row needs a slot; under EARLIEST/LATEST only unmatched rows need one).
//! - **Expiry.** A pending row expires once `arrival + MAX TIME <= now`; the caller applies ON
//!   CORRELATION TIMEOUT to those that never matched. Expiry runs before matching, so rows
//!   correlate only when the later arrives less than MAX TIME after the earlier.
//!
//! Why the acknowledgement bookkeeping is right: every pending row holds exactly one unit on
//! its root, and every path out of this state hands that root back — consumed by a pair,
//! expired, or drained — exactly once, because a row leaves the arrays in the same step its
//! root is returned.

use arrow_array::{new_empty_array, ArrayRef, BooleanArray, UInt32Array};
use arrow_schema::{ArrowError, SchemaRef};
use arrow_select::concat::concat;
use arrow_select::filter::FilterBuilder;
use arrow_select::take::take;
use nervix_nspl::ast::processor::MatchMode;
use nervix_shards::ack::AckHandle;

use crate::runtime::plan::Side;
use crate::vm::{eval_predicate, EvalContext, Program};

/// The most (new row, pending row) pairs one CORRELATE WHERE evaluation builds.
pub const MAX_PAIR_CANDIDATES: usize = 65_536;
/// The most unmatched rows one side of one branch holds.
pub const MAX_PENDING_ROWS_PER_SIDE: usize = 65_536;

// Every pair of one new row must fit one evaluation (module doc).
const _: () = assert!(MAX_PENDING_ROWS_PER_SIDE <= MAX_PAIR_CANDIDATES);

/// One side's unmatched rows, in arrival order.
struct Pending {
    columns: Vec<ArrayRef>,
    arrival_ns: Vec<i64>,
    /// Per row: its root, holding one unit (None when the correlator is DETACHED).
    roots: Vec<Option<AckHandle>>,
    /// Per row: whether it has matched (MATCH ALL keeps matched rows).
    matched: Vec<bool>,
}

impl Pending {
    fn new(schema: &SchemaRef) -> Pending {
        Pending {
            columns: schema
                .fields()
                .iter()
                .map(|f| new_empty_array(f.data_type()))
                .collect(),
            arrival_ns: Vec::new(),
            roots: Vec::new(),
            matched: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.arrival_ns.len()
    }

    /// Keeps the rows `keep` selects; the others' roots go to `leaving`, with whether each
    /// had matched.
    fn retain(
        &mut self,
        keep: &[bool],
        leaving: &mut Vec<(Option<AckHandle>, bool)>,
    ) -> Result<(), ArrowError> {
        if keep.iter().all(|k| *k) {
            return Ok(());
        }
        let mask = BooleanArray::from(keep.to_vec());
        let predicate = FilterBuilder::new(&mask).optimize().build();
        self.columns = self
            .columns
            .iter()
            .map(|c| predicate.filter(c.as_ref()))
            .collect::<Result<_, _>>()?;
        let mut index = 0;
        let mut kept = |_: &i64| {
            index += 1;
            keep[index - 1]
        };
        self.arrival_ns.retain(&mut kept);
        let mut roots = Vec::with_capacity(self.roots.len());
        let mut matched = Vec::with_capacity(self.matched.len());
        for ((root, was_matched), keep) in self.roots.iter().zip(&self.matched).zip(keep) {
            if *keep {
                roots.push(*root);
                matched.push(*was_matched);
            } else {
                leaving.push((*root, *was_matched));
            }
        }
        self.roots = roots;
        self.matched = matched;
        Ok(())
    }

    /// Appends `rows` of `columns`, arrived at `now_ns`.
    fn append(
        &mut self,
        columns: &[ArrayRef],
        rows: &[u32],
        roots: &[Option<AckHandle>],
        matched: &[bool],
        now_ns: i64,
    ) -> Result<(), ArrowError> {
        if rows.is_empty() {
            return Ok(());
        }
        let indices = UInt32Array::from(rows.to_vec());
        self.columns = self
            .columns
            .iter()
            .zip(columns)
            .map(|(held, new)| {
                let picked = take(new.as_ref(), &indices, None)?;
                concat(&[held.as_ref(), picked.as_ref()])
            })
            .collect::<Result<_, _>>()?;
        for row in rows {
            self.arrival_ns.push(now_ns);
            self.roots.push(roots[*row as usize]);
            self.matched.push(matched[*row as usize]);
        }
        Ok(())
    }
}

/// New rows on one side, past the input filters.
pub struct Incoming<'a> {
    pub side: Side,
    pub columns: &'a [ArrayRef],
    pub rows: usize,
    /// Per row: its acknowledgement root (None when DETACHED).
    pub roots: &'a [Option<AckHandle>],
}

/// What matching a new batch did.
#[derive(Debug)]
pub struct Correlation {
    /// The matched pairs in the pair layout (left columns, then right), in new-row order.
    pub pairs: Vec<ArrayRef>,
    /// For each pair, the new row it pairs (ascending).
    pub pair_rows: Vec<u32>,
    /// Roots of pending rows that left with a pair (EARLIEST / LATEST), one unit each.
    pub consumed: Vec<AckHandle>,
    /// New rows now pending (ascending).
    pub held: Vec<u32>,
    /// New rows whose CORRELATE WHERE failed, with the first failure's message (ascending).
    pub failed: Vec<(u32, String)>,
    /// New rows refused because their side is full (ascending).
    pub refused: Vec<u32>,
}

/// Rows that left one side at MAX TIME (or drained).
#[derive(Debug, Default)]
pub struct Expired {
    /// Rows that never matched: ON CORRELATION TIMEOUT applies to them.
    pub unmatched: usize,
    /// Every leaving row's root, one unit each (detached rows have none).
    pub roots: Vec<AckHandle>,
}

/// One branch's pending rows, both sides.
pub struct BranchState {
    sides: [Pending; 2],
}

impl BranchState {
    /// Empty sides with the columns of `side_schemas` (left, right).
    pub fn new(side_schemas: &[SchemaRef; 2]) -> BranchState {
        BranchState {
            sides: [
                Pending::new(&side_schemas[0]),
                Pending::new(&side_schemas[1]),
            ],
        }
    }

    /// Rows pending on both sides.
    pub fn pending_rows(&self) -> usize {
        self.sides.iter().map(Pending::len).sum()
    }

    /// When the earliest pending row expires, domain ns.
    pub fn due_ns(&self, max_time_ns: u64) -> Option<i64> {
        // Rows are appended at the execution snapshot, which does not run backwards on a
        // shard, so each side's first row is its earliest (were it ever later, rows would
        // expire late — `expire` checks every row — never early).
        self.sides
            .iter()
            .filter_map(|side| side.arrival_ns.first())
            .min()
            .map(|earliest| earliest.saturating_add(max_time_ns.min(i64::MAX as u64) as i64))
    }

    /// Removes the rows whose MAX TIME is up at `now_ns` (all of them when `force`), per side.
    pub fn expire(
        &mut self,
        now_ns: i64,
        max_time_ns: u64,
        force: bool,
    ) -> Result<[Expired; 2], ArrowError> {
        let max_time_ns = max_time_ns.min(i64::MAX as u64) as i64;
        let mut out = [Expired::default(), Expired::default()];
        for (side, expired) in self.sides.iter_mut().zip(out.iter_mut()) {
            let keep: Vec<bool> = side
                .arrival_ns
                .iter()
                .map(|arrived| !force && arrived.saturating_add(max_time_ns) > now_ns)
                .collect();
            let mut leaving = Vec::new();
            side.retain(&keep, &mut leaving)?;
            for (root, matched) in leaving {
                expired.unmatched += usize::from(!matched);
                expired.roots.extend(root);
            }
        }
        Ok(out)
    }

    /// Matches `incoming` against the other side's pending rows under `condition` (over the
    /// pair layout) and `matching`; keeps what must wait.
    pub fn correlate(
        &mut self,
        condition: &Program,
        matching: MatchMode,
        incoming: &Incoming<'_>,
        now_ns: i64,
    ) -> Result<Correlation, ArrowError> {
        let own = incoming.side.index();
        let other = incoming.side.other().index();
        let n = incoming.rows;
        let m = self.sides[other].len();
        let mut free = MAX_PENDING_ROWS_PER_SIDE.saturating_sub(self.sides[own].len());
        let mut refused_flag = vec![false; n];
        if matching == MatchMode::All {
            // Every ALL row stays pending, so rows without a slot are refused up front.
            for flag in refused_flag.iter_mut().skip(free) {
                *flag = true;
            }
        }
        let mut failed: Vec<(u32, String)> = Vec::new();
        let mut failed_flag = vec![false; n];
        let mut chosen: Vec<(u32, u32)> = Vec::new();
        let mut taken = vec![false; m];
        let mut matched_pending = vec![false; m];
        let mut matched_new = vec![false; n];
        if m > 0 && n > 0 {
            let rows_per_chunk = (MAX_PAIR_CANDIDATES / m).max(1);
            let mut start = 0;
            while start < n {
                let end = (start + rows_per_chunk).min(n);
                let mask =
                    self.evaluate(condition, incoming, start..end, now_ns, |pair, message| {
                        let row = start + pair / m;
                        if !failed_flag[row] {
                            failed_flag[row] = true;
                            failed.push((row as u32, format!("CORRELATE WHERE: {message}")));
                        }
                    })?;
                for row in start..end {
                    if failed_flag[row] || refused_flag[row] {
                        continue;
                    }
                    let base = (row - start) * m;
                    // Picking is sequential: each new row's choice depends on what the rows
                    // before it took, so no kernel expresses it; it reads mask bits only.
                    let satisfied = |j: &usize| mask.value(base + j) && !taken[*j];
                    let pick = match matching {
                        MatchMode::Earliest => (0..m).find(satisfied),
                        MatchMode::Latest => (0..m).rev().find(satisfied),
                        MatchMode::All => {
                            for j in (0..m).filter(|j| mask.value(base + j)) {
                                chosen.push((row as u32, j as u32));
                                matched_pending[j] = true;
                                matched_new[row] = true;
                            }
                            None
                        }
                    };
                    if let Some(j) = pick {
                        taken[j] = true;
                        matched_new[row] = true;
                        chosen.push((row as u32, j as u32));
                    }
                }
                start = end;
            }
        }
        let pairs = self.pair_columns(incoming, &chosen)?;
        // Pending rows that paired under EARLIEST / LATEST leave now; ALL marks them matched.
        let mut leaving = Vec::new();
        let keep: Vec<bool> = taken.iter().map(|t| !t).collect();
        let pending = &mut self.sides[other];
        for (flag, matched) in pending.matched.iter_mut().zip(&matched_pending) {
            *flag |= *matched;
        }
        pending.retain(&keep, &mut leaving)?;
        let consumed = leaving.into_iter().filter_map(|(root, _)| root).collect();
        let mut held = Vec::new();
        for row in 0..n {
            if failed_flag[row] || refused_flag[row] {
                continue;
            }
            if matching == MatchMode::All {
                held.push(row as u32);
            } else if !matched_new[row] {
                if free == 0 {
                    refused_flag[row] = true;
                    continue;
                }
                free -= 1;
                held.push(row as u32);
            }
        }
        self.sides[own].append(
            incoming.columns,
            &held,
            incoming.roots,
            &matched_new,
            now_ns,
        )?;
        failed.sort_unstable_by_key(|(row, _)| *row);
        Ok(Correlation {
            pairs,
            pair_rows: chosen.iter().map(|(row, _)| *row).collect(),
            consumed,
            held,
            failed,
            refused: (0..n as u32)
                .filter(|row| refused_flag[*row as usize])
                .collect(),
        })
    }

    /// CORRELATE WHERE over new rows `rows` × every pending row of the other side: the mask
    /// (new row major), with each failing pair reported to `failed`.
    fn evaluate(
        &self,
        condition: &Program,
        incoming: &Incoming<'_>,
        rows: std::ops::Range<usize>,
        now_ns: i64,
        mut failed: impl FnMut(usize, &str),
    ) -> Result<BooleanArray, ArrowError> {
        let pending = &self.sides[incoming.side.other().index()];
        let m = pending.len();
        let new_rows: UInt32Array = rows
            .clone()
            .flat_map(|row| std::iter::repeat_n(row as u32, m))
            .collect();
        let pending_rows: UInt32Array = rows.flat_map(|_| 0..m as u32).collect();
        let pair = self.assemble(incoming, &new_rows, &pending_rows)?;
        let sources: [&[ArrayRef]; 6] = [&pair, &[], &[], &[], &[], &[]];
        let (mask, errors) = eval_predicate(
            condition,
            &EvalContext {
                sources: &sources,
                num_rows: new_rows.len(),
                now_ns,
                envelope: None,
            },
        );
        for (pair, message) in errors.iter() {
            failed(pair as usize, message);
        }
        Ok(mask)
    }

    /// The pair columns of `chosen` (new row, pending row) pairs.
    fn pair_columns(
        &self,
        incoming: &Incoming<'_>,
        chosen: &[(u32, u32)],
    ) -> Result<Vec<ArrayRef>, ArrowError> {
        let new_rows: UInt32Array = chosen.iter().map(|(row, _)| *row).collect();
        let pending_rows: UInt32Array = chosen.iter().map(|(_, row)| *row).collect();
        self.assemble(incoming, &new_rows, &pending_rows)
    }

    /// Left columns then right columns, new rows taken at `new_rows` and the other side's
    /// pending rows at `pending_rows`.
    fn assemble(
        &self,
        incoming: &Incoming<'_>,
        new_rows: &UInt32Array,
        pending_rows: &UInt32Array,
    ) -> Result<Vec<ArrayRef>, ArrowError> {
        let pick = |columns: &[ArrayRef], rows: &UInt32Array| {
            columns
                .iter()
                .map(|c| take(c.as_ref(), rows, None))
                .collect::<Result<Vec<_>, _>>()
        };
        let new = pick(incoming.columns, new_rows)?;
        let pending = pick(
            &self.sides[incoming.side.other().index()].columns,
            pending_rows,
        )?;
        Ok(match incoming.side {
            Side::Left => new.into_iter().chain(pending).collect(),
            Side::Right => pending.into_iter().chain(new).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, Int64Array};
    use arrow_schema::{DataType as ArrowType, Field as ArrowField, Schema};
    use nervix_nspl::parse_expression;

    use super::*;
    use crate::types::{check, DataType, ExprContext, FieldType, Scope};
    use crate::vm::ColumnSlot;

    /// Pair layout: `left.id`, `left.n`, `right.id`, `right.n`.
    struct PairScope;

    const PAIR: [&str; 4] = ["left.id", "left.n", "right.id", "right.n"];

    impl Scope for PairScope {
        fn field(&self, path: &[nervix_nspl::ast::Ident]) -> Result<FieldType, String> {
            let key: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
            let key = key.join(".");
            PAIR.iter()
                .find(|n| **n == key)
                .map(|_| FieldType::required(DataType::I64))
                .ok_or_else(|| format!("unknown field `{key}`"))
        }
    }

    fn condition(text: &str) -> Program {
        let expr = parse_expression(text).expect("parse");
        let typed = check(&expr, &PairScope, &ExprContext::default()).expect("check");
        Program::compile(&typed, &|path: &[String]| {
            PAIR.iter()
                .position(|n| *n == path.join("."))
                .map(|column| ColumnSlot { source: 0, column })
        })
        .expect("compile")
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            ArrowField::new("id", ArrowType::Int64, false),
            ArrowField::new("n", ArrowType::Int64, false),
        ]))
    }

    fn state() -> BranchState {
        BranchState::new(&[schema(), schema()])
    }

    fn root(index: u32) -> Option<AckHandle> {
        Some(AckHandle {
            index,
            generation: 0,
        })
    }

    fn ints(values: &[i64]) -> ArrayRef {
        Arc::new(Int64Array::from(values.to_vec()))
    }

    fn values(array: &ArrayRef) -> Vec<i64> {
        array
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("I64")
            .values()
            .to_vec()
    }

    /// Sends `(id, n)` rows on `side`, each its own root `first_root + i`.
    fn send(
        state: &mut BranchState,
        matching: MatchMode,
        side: Side,
        rows: &[(i64, i64)],
        first_root: u32,
        now_ns: i64,
    ) -> Correlation {
        let columns = vec![
            ints(&rows.iter().map(|r| r.0).collect::<Vec<_>>()),
            ints(&rows.iter().map(|r| r.1).collect::<Vec<_>>()),
        ];
        let roots: Vec<_> = (0..rows.len() as u32)
            .map(|i| root(first_root + i))
            .collect();
        state
            .correlate(
                &condition("left.id = right.id"),
                matching,
                &Incoming {
                    side,
                    columns: &columns,
                    rows: rows.len(),
                    roots: &roots,
                },
                now_ns,
            )
            .expect("correlate")
    }

    #[test]
    fn earliest_pairs_each_row_with_the_earliest_untaken_match() {
        let mut state = state();
        let held = send(
            &mut state,
            MatchMode::Earliest,
            Side::Left,
            &[(1, 10), (1, 11), (2, 12)],
            0,
            0,
        );
        assert_eq!(held.held, vec![0, 1, 2]);
        assert!(held.pairs[0].is_empty());
        let out = send(
            &mut state,
            MatchMode::Earliest,
            Side::Right,
            &[(1, 20), (1, 21), (1, 22), (3, 23)],
            10,
            5,
        );
        // Right rows 0 and 1 take left 10 and 11 in order; 22 and 23 find none and wait.
        assert_eq!(values(&out.pairs[1]), vec![10, 11]);
        assert_eq!(values(&out.pairs[3]), vec![20, 21]);
        assert_eq!(out.pair_rows, vec![0, 1]);
        assert_eq!(out.consumed, vec![root(0).unwrap(), root(1).unwrap()]);
        assert_eq!(out.held, vec![2, 3]);
        assert_eq!(state.pending_rows(), 3);
    }

    #[test]
    fn latest_takes_the_newest_match() {
        let mut state = state();
        send(
            &mut state,
            MatchMode::Latest,
            Side::Right,
            &[(1, 20), (1, 21)],
            0,
            0,
        );
        let out = send(&mut state, MatchMode::Latest, Side::Left, &[(1, 10)], 5, 1);
        assert_eq!(values(&out.pairs[1]), vec![10]);
        assert_eq!(values(&out.pairs[3]), vec![21]);
        assert_eq!(out.consumed, vec![root(1).unwrap()]);
        assert!(out.held.is_empty());
    }

    #[test]
    fn all_emits_every_match_and_keeps_both_sides_until_max_time() {
        let mut state = state();
        send(
            &mut state,
            MatchMode::All,
            Side::Left,
            &[(1, 10), (1, 11), (2, 12)],
            0,
            0,
        );
        let out = send(&mut state, MatchMode::All, Side::Right, &[(1, 20)], 5, 50);
        assert_eq!(values(&out.pairs[1]), vec![10, 11]);
        assert_eq!(out.pair_rows, vec![0, 0]);
        assert!(out.consumed.is_empty());
        assert_eq!(out.held, vec![0]);
        assert_eq!(state.pending_rows(), 4);
        assert_eq!(state.due_ns(100), Some(100));
        let [left, right] = state.expire(100, 100, false).expect("expire");
        // Left 10 and 11 matched; 12 never did. The right row arrived at 50 and stays.
        assert_eq!(left.unmatched, 1);
        assert_eq!(left.roots.len(), 3);
        assert_eq!(right.roots.len(), 0);
        assert_eq!(state.due_ns(100), Some(150));
    }

    #[test]
    fn a_failing_condition_fails_the_new_row_only() {
        let mut state = state();
        send(&mut state, MatchMode::Earliest, Side::Left, &[(1, 0)], 0, 0);
        let columns = vec![ints(&[1, 1]), ints(&[0, 5])];
        let roots = [root(7), root(8)];
        let out = state
            .correlate(
                &condition("10 / right.n > 0 AND left.id = right.id"),
                MatchMode::Earliest,
                &Incoming {
                    side: Side::Right,
                    columns: &columns,
                    rows: 2,
                    roots: &roots,
                },
                1,
            )
            .expect("correlate");
        assert_eq!(out.failed.len(), 1);
        assert_eq!(out.failed[0].0, 0);
        assert!(out.failed[0].1.starts_with("CORRELATE WHERE: "));
        assert_eq!(out.pair_rows, vec![1]);
        assert_eq!(state.pending_rows(), 0);
    }

    #[test]
    fn a_full_side_refuses_rows_that_need_a_slot() {
        let mut state = state();
        let ids: Vec<(i64, i64)> = (0..MAX_PENDING_ROWS_PER_SIDE as i64)
            .map(|i| (i, i))
            .collect();
        let held = send(&mut state, MatchMode::Earliest, Side::Left, &ids, 0, 0);
        assert_eq!(held.held.len(), MAX_PENDING_ROWS_PER_SIDE);
        let out = send(
            &mut state,
            MatchMode::Earliest,
            Side::Left,
            &[(-1, 0)],
            1 << 20,
            1,
        );
        assert_eq!(out.refused, vec![0]);
        // The other side still matches against the full one (in chunks of whole rows).
        let out = send(
            &mut state,
            MatchMode::Earliest,
            Side::Right,
            &[(3, 0), (-2, 0)],
            1 << 21,
            2,
        );
        assert_eq!(values(&out.pairs[0]), vec![3]);
        assert_eq!(out.held, vec![1]);
        let [left, right] = state.expire(0, 100, true).expect("drain");
        assert_eq!(left.roots.len(), MAX_PENDING_ROWS_PER_SIDE - 1);
        assert_eq!(right.unmatched, 1);
        assert_eq!(state.pending_rows(), 0);
    }
}

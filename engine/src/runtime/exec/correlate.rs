//! The pending rows of one CORRELATOR branch and how a new batch is matched against them
//! (spec "Correlator"; the exact rules are recorded in `docs/decisions.md`).
//!
//! Each side keeps its unmatched rows ([`PendingRows`]: stored as the batches they came in,
//! sorted by time) with their time (event time, or arrival on the domain clock), their
//! acknowledgement root (one pending unit per row), their equality-key hash and, for MATCH
//! ALL, whether they have matched yet. A new batch on one side is matched against the *other*
//! side's pending rows:
//!
//! - **Equality keys first.** The planner lifts each `left.<expr> = right.<expr>` conjunct of
//!   CORRELATE WHERE into a pair of key programs (one per side). A row's key values are
//!   evaluated once, when it arrives, and hashed; a new row's candidates are the pending rows
//!   with its hash, which the other side lists per hash ([`PendingRows::keyed`]), so finding
//!   them costs the candidates, not the rows pending. Whenever the condition holds, every
//!   conjunct holds, so the keys are equal and the hashes too: no true pair is skipped. A
//!   hash collision only adds a candidate, and CORRELATE WHERE still decides every candidate.
//!   A null key value never satisfies `=`, so such a row has no candidates. Without keys,
//!   every pending row is a candidate.
//! - **CORRELATE WHERE runs on whole candidate batches**: the (new row, pending row)
//!   candidates are gathered in chunks of at most [`MAX_PAIR_CANDIDATES`] pairs and the VM
//!   evaluates each chunk once. Cost is the number of candidates, not new × pending rows.
//! - **MATCH EARLIEST / LATEST.** New rows pick in their batch order: each takes the earliest
//!   (latest) pending row in time that satisfies the condition and that no earlier new row
//!   took; both leave. A new row that finds none becomes pending.
//! - **MATCH ALL.** Every satisfied pair is emitted; new rows become pending too, and pending
//!   rows stay until MAX TIME whether they matched or not.
//! - **A failed condition fails the new row.** A new row for which CORRELATE WHERE (or one of
//!   its key expressions) fails on any candidate makes no pair and is not kept (the caller
//!   refuses it as a message error); the pending rows it was compared with are untouched.
//!   Pairs whose keys differ are not evaluated, as if the equality conjuncts ran first.
//! - **Bounded.** A side holds at most [`MAX_PENDING_ROWS_PER_SIDE`] rows per branch; new rows
//!   that would need a slot beyond it are refused (under ALL before matching, since every ALL
//!   row needs a slot; under EARLIEST/LATEST only unmatched rows need one).
//! - **Expiry.** A pending row expires once `time + MAX TIME <= reached`, where the caller's
//!   `reached` is the later of the correlator's input watermark and the domain clock (the rule
//!   windows use). Expiry runs before matching, so rows correlate only when their times are
//!   less than MAX TIME apart (as far as the watermark has seen).
//!
//! Why the acknowledgement bookkeeping is right: every pending row holds exactly one unit on
//! its root, and every path out of this state hands that root back — consumed by a pair,
//! expired, or drained — exactly once, because a row leaves [`PendingRows`] in the same step
//! its root is returned.

use foldhash::HashSet;

use arrow_array::{Array, ArrayRef, UInt32Array};
use arrow_schema::{ArrowError, SchemaRef};
use arrow_select::take::take;
use nervix_nspl::ast::processor::MatchMode;
use nervix_shards::ack::AckHandle;

use super::dedup::{key_converter, key_hashes};
use super::pending_rows::{KeyMap, PendingRows};
use crate::runtime::plan::Side;
use crate::vm::{eval_predicate, EvalContext, Program};

/// The most (new row, pending row) pairs one CORRELATE WHERE evaluation builds.
pub const MAX_PAIR_CANDIDATES: usize = 65_536;
/// The most unmatched rows one side of one branch holds.
pub const MAX_PENDING_ROWS_PER_SIDE: usize = 1_048_576;

/// What decides a pair: the condition, the equality keys lifted from it, the match policy.
pub struct Matcher<'a> {
    /// CORRELATE WHERE over the pair layout.
    pub condition: &'a Program,
    /// Per side (left, right): the key programs over that side's columns, in conjunct order;
    /// both empty when the condition has no equality conjunct across the sides.
    pub keys: &'a [Vec<Program>; 2],
    pub matching: MatchMode,
}

/// New rows on one side, past the input filters.
pub struct Incoming<'a> {
    pub side: Side,
    pub columns: &'a [ArrayRef],
    pub rows: usize,
    /// Per row: its acknowledgement root (None when DETACHED).
    pub roots: &'a [Option<AckHandle>],
    /// Per row: its event time; None when the rows have none (then each row's time is the
    /// execution snapshot).
    pub times: Option<&'a [i64]>,
}

impl Incoming<'_> {
    fn time_ns(&self, row: usize, now_ns: i64) -> i64 {
        self.times.map_or(now_ns, |times| times[row])
    }
}

/// What matching a new batch did.
#[derive(Debug)]
pub struct Correlation {
    /// The matched pairs in the pair layout (left columns, then right), in new-row order.
    pub pairs: Vec<ArrayRef>,
    /// For each pair, the new row it pairs (ascending).
    pub pair_rows: Vec<u32>,
    /// For each pair, the earlier of its two rows' times.
    pub pair_times: Vec<i64>,
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
    /// Every leaving row's root, one unit each (detached rows, and rows a durable snapshot
    /// holds, have none).
    pub roots: Vec<AckHandle>,
    /// Rows that left.
    pub rows: usize,
}

/// Per row: its key hash, or None when a key value is null or the row failed.
type RowKeys = Vec<Option<u64>>;
/// Failed rows with their first message, ascending.
type RowFailures = Vec<(u32, String)>;

/// Each row's key hash, and the rows whose key expressions failed with the first message.
fn row_keys(
    programs: &[Program],
    columns: &[ArrayRef],
    rows: usize,
    now_ns: i64,
) -> Result<(RowKeys, RowFailures), ArrowError> {
    let sources: [&[ArrayRef]; 6] = [columns, &[], &[], &[], &[], &[]];
    let context = EvalContext {
        sources: &sources,
        num_rows: rows,
        now_ns,
        envelope: None,
    };
    let mut failed: Vec<(u32, String)> = Vec::new();
    let mut usable = vec![true; rows];
    let mut values = Vec::with_capacity(programs.len());
    for program in programs {
        let evaluated = program.eval(&context);
        for (row, message) in evaluated.errors.iter() {
            if usable[row as usize] {
                usable[row as usize] = false;
                failed.push((row, format!("CORRELATE WHERE: {message}")));
            }
        }
        if let Some(nulls) = evaluated.values.logical_nulls() {
            for (row, flag) in usable.iter_mut().enumerate() {
                *flag &= nulls.is_valid(row);
            }
        }
        values.push(evaluated.values);
    }
    failed.sort_unstable_by_key(|(row, _)| *row);
    let mut hashes = Vec::with_capacity(rows);
    key_hashes(&mut key_converter(&values)?, &values, 0..rows, &mut hashes)?;
    let keys = hashes
        .iter()
        .zip(&usable)
        .map(|(hash, usable)| usable.then_some((*hash as u64) ^ ((*hash >> 64) as u64)))
        .collect();
    Ok((keys, failed))
}

/// Turns evaluated candidate pairs into each new row's choice, row by row in batch order.
struct Picker {
    matching: MatchMode,
    current: Option<u32>,
    current_failed: bool,
    best: Option<u32>,
    all: Vec<u32>,
    /// Pending rows taken by an earlier new row (EARLIEST / LATEST), by position.
    taken: HashSet<u32>,
    /// Pending rows matched by some new row (ALL), by position (a row may repeat).
    matched_pending: Vec<u32>,
    /// Per new row.
    matched_new: Vec<bool>,
    failed_new: Vec<bool>,
    failed: Vec<(u32, String)>,
    chosen: Vec<(u32, u32)>,
}

impl Picker {
    fn new(matching: MatchMode, new_rows: usize) -> Picker {
        Picker {
            matching,
            current: None,
            current_failed: false,
            best: None,
            all: Vec::new(),
            taken: HashSet::default(),
            matched_pending: Vec::new(),
            matched_new: vec![false; new_rows],
            failed_new: vec![false; new_rows],
            failed: Vec::new(),
            chosen: Vec::new(),
        }
    }

    /// One candidate pair's outcome; pairs come row-major, each row's in time order.
    fn feed(&mut self, row: u32, pending: u32, satisfied: bool, error: Option<&str>) {
        if self.current != Some(row) {
            self.finish_row();
            self.current = Some(row);
        }
        if let Some(message) = error {
            if !self.current_failed {
                self.current_failed = true;
                self.failed
                    .push((row, format!("CORRELATE WHERE: {message}")));
            }
            return;
        }
        if !satisfied {
            return;
        }
        match self.matching {
            MatchMode::Earliest if self.best.is_none() && !self.taken.contains(&pending) => {
                self.best = Some(pending)
            }
            MatchMode::Latest if !self.taken.contains(&pending) => self.best = Some(pending),
            MatchMode::All => self.all.push(pending),
            _ => {}
        }
    }

    /// Settles the current row: its choice is final only once all its candidates were seen
    /// (a failure on a later candidate still fails it).
    fn finish_row(&mut self) {
        let Some(row) = self.current.take() else {
            return;
        };
        let failed = std::mem::take(&mut self.current_failed);
        let best = self.best.take();
        let all = std::mem::take(&mut self.all);
        if failed {
            self.failed_new[row as usize] = true;
            return;
        }
        if let Some(pending) = best {
            self.taken.insert(pending);
            self.matched_new[row as usize] = true;
            self.chosen.push((row, pending));
        }
        for pending in all {
            self.matched_pending.push(pending);
            self.matched_new[row as usize] = true;
            self.chosen.push((row, pending));
        }
    }
}

/// One branch's pending rows, both sides.
pub struct BranchState {
    sides: [PendingRows; 2],
    /// Changed since its last snapshot.
    dirty: bool,
}

impl BranchState {
    /// Empty sides with the columns of `side_schemas` (left, right).
    pub fn new(side_schemas: &[SchemaRef; 2]) -> BranchState {
        BranchState {
            sides: [
                PendingRows::new(&side_schemas[0]),
                PendingRows::new(&side_schemas[1]),
            ],
            dirty: false,
        }
    }

    /// Whether the pending rows changed since the last snapshot.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Both sides, for a snapshot (which clears the dirty mark) or a restore.
    pub(super) fn sides_mut(&mut self) -> &mut [PendingRows; 2] {
        self.dirty = false;
        &mut self.sides
    }

    /// Rows pending on both sides.
    pub fn pending_rows(&self) -> usize {
        self.sides.iter().map(PendingRows::len).sum()
    }

    /// When the earliest pending row expires (its time + MAX TIME).
    pub fn due_ns(&self, max_time_ns: u64) -> Option<i64> {
        self.sides
            .iter()
            .filter_map(PendingRows::earliest_ns)
            .min()
            .map(|earliest| earliest.saturating_add(max_time_ns.min(i64::MAX as u64) as i64))
    }

    /// Removes the rows whose MAX TIME is up at `reached_ns` (all of them when `force`), per
    /// side.
    pub fn expire(
        &mut self,
        reached_ns: i64,
        max_time_ns: u64,
        force: bool,
    ) -> Result<[Expired; 2], ArrowError> {
        let max_time_ns = max_time_ns.min(i64::MAX as u64) as i64;
        let mut out = [Expired::default(), Expired::default()];
        for (side, expired) in self.sides.iter_mut().zip(out.iter_mut()) {
            let mut leaving = Vec::new();
            side.pop_due(reached_ns, max_time_ns, force, &mut leaving)?;
            self.dirty |= !leaving.is_empty();
            expired.rows = leaving.len();
            for row in leaving {
                expired.unmatched += usize::from(!row.matched);
                expired.roots.extend(row.root);
            }
        }
        Ok(out)
    }

    /// Matches `incoming` against the other side's pending rows under `matcher`; keeps what
    /// must wait. `now_ns` is the execution snapshot (`now()`, and the time of rows without
    /// event time).
    pub fn correlate(
        &mut self,
        matcher: &Matcher<'_>,
        incoming: &Incoming<'_>,
        now_ns: i64,
    ) -> Result<Correlation, ArrowError> {
        let own = incoming.side.index();
        let other = incoming.side.other().index();
        let n = incoming.rows;
        let m = self.sides[other].len();
        self.dirty = true;
        let mut free = MAX_PENDING_ROWS_PER_SIDE.saturating_sub(self.sides[own].len());
        let mut refused_flag = vec![false; n];
        if matcher.matching == MatchMode::All {
            // Every ALL row stays pending, so rows without a slot are refused up front.
            for flag in refused_flag.iter_mut().skip(free) {
                *flag = true;
            }
        }
        let keyed = !matcher.keys[own].is_empty();
        let (keys, key_failures) = if keyed {
            row_keys(&matcher.keys[own], incoming.columns, n, now_ns)?
        } else {
            (vec![None; n], Vec::new())
        };
        let mut picker = Picker::new(matcher.matching, n);
        for (row, message) in key_failures {
            picker.failed_new[row as usize] = true;
            picker.failed.push((row, message));
        }
        let eligible = |row: usize, picker: &Picker| !picker.failed_new[row] && !refused_flag[row];
        if m > 0 {
            // Keyed: the pending rows of each distinct new key, in time order, looked up once
            // per key (a batch costs its candidates, not every pending row).
            let mut groups: KeyMap<usize> = KeyMap::default();
            let mut members: Vec<Vec<u32>> = Vec::new();
            if keyed {
                let pending = &mut self.sides[other];
                for (row, key) in keys.iter().enumerate() {
                    if let (Some(key), true) = (key, eligible(row, &picker)) {
                        groups.entry(*key).or_insert_with(|| {
                            let mut positions = Vec::new();
                            pending.keyed(*key, &mut positions);
                            members.push(positions);
                            members.len() - 1
                        });
                    }
                }
            }
            // Unkeyed: every pending row, for every new row.
            let all_pending: Vec<u32> = if keyed {
                Vec::new()
            } else {
                self.sides[other].live_positions()
            };
            let mut chunk = PairChunk::default();
            for (row, key) in keys.iter().enumerate() {
                if !eligible(row, &picker) {
                    continue;
                }
                let candidates: &[u32] = if !keyed {
                    &all_pending
                } else {
                    match key.and_then(|key| groups.get(&key)) {
                        Some(group) => &members[*group],
                        None => &[],
                    }
                };
                for pending in candidates {
                    chunk.push(row as u32, *pending);
                    if chunk.len() >= MAX_PAIR_CANDIDATES {
                        self.evaluate(
                            matcher.condition,
                            incoming,
                            &mut chunk,
                            now_ns,
                            &mut picker,
                        )?;
                    }
                }
            }
            self.evaluate(matcher.condition, incoming, &mut chunk, now_ns, &mut picker)?;
        }
        picker.finish_row();
        self.settle(incoming, now_ns, picker, refused_flag, &mut free, &keys)
    }

    /// Applies the choices: pairs assembled, taken pending rows out (EARLIEST / LATEST) or
    /// marked matched (ALL), new rows that must wait held.
    #[allow(clippy::too_many_arguments)]
    fn settle(
        &mut self,
        incoming: &Incoming<'_>,
        now_ns: i64,
        picker: Picker,
        mut refused_flag: Vec<bool>,
        free: &mut usize,
        keys: &[Option<u64>],
    ) -> Result<Correlation, ArrowError> {
        let own = incoming.side.index();
        let other = incoming.side.other().index();
        let Picker {
            matching,
            taken,
            matched_pending,
            matched_new,
            failed_new,
            mut failed,
            chosen,
            ..
        } = picker;
        let new_rows: Vec<u32> = chosen.iter().map(|(row, _)| *row).collect();
        let pending_rows: Vec<u32> = chosen.iter().map(|(_, pending)| *pending).collect();
        let pairs = self.assemble(incoming, &new_rows, &pending_rows)?;
        let pair_times = chosen
            .iter()
            .map(|(row, pending)| {
                let new_time = incoming.time_ns(*row as usize, now_ns);
                new_time.min(self.sides[other].get(*pending as usize).time_ns)
            })
            .collect();
        // Pending rows that paired under EARLIEST / LATEST leave now; ALL marks them matched.
        let pending = &mut self.sides[other];
        pending.mark_matched(
            matched_pending
                .into_iter()
                .map(|position| position as usize),
        );
        let mut leaving = Vec::new();
        if !taken.is_empty() {
            let mut taken: Vec<u32> = taken.into_iter().collect();
            taken.sort_unstable();
            pending.remove(&taken, &mut leaving);
        }
        let consumed = leaving.into_iter().filter_map(|row| row.root).collect();
        let mut held = Vec::new();
        for row in 0..incoming.rows {
            if failed_new[row] || refused_flag[row] {
                continue;
            }
            if matching == MatchMode::All {
                held.push(row as u32);
            } else if !matched_new[row] {
                if *free == 0 {
                    refused_flag[row] = true;
                    continue;
                }
                *free -= 1;
                held.push(row as u32);
            }
        }
        self.sides[own].append(incoming.columns, &held, |row| {
            let row = row as usize;
            (
                incoming.time_ns(row, now_ns),
                keys[row],
                incoming.roots[row],
                matched_new[row],
            )
        })?;
        failed.sort_unstable_by_key(|(row, _)| *row);
        Ok(Correlation {
            pairs,
            pair_rows: new_rows,
            pair_times,
            consumed,
            held,
            failed,
            refused: (0..incoming.rows as u32)
                .filter(|row| refused_flag[*row as usize])
                .collect(),
        })
    }

    /// Evaluates CORRELATE WHERE on the gathered candidates and feeds the outcomes to
    /// `picker`; leaves `chunk` empty.
    fn evaluate(
        &self,
        condition: &Program,
        incoming: &Incoming<'_>,
        chunk: &mut PairChunk,
        now_ns: i64,
        picker: &mut Picker,
    ) -> Result<(), ArrowError> {
        if chunk.len() == 0 {
            return Ok(());
        }
        let pair = self.assemble(incoming, &chunk.new_rows, &chunk.pending_rows)?;
        let sources: [&[ArrayRef]; 6] = [&pair, &[], &[], &[], &[], &[]];
        let (mask, errors) = eval_predicate(
            condition,
            &EvalContext {
                sources: &sources,
                num_rows: chunk.len(),
                now_ns,
                envelope: None,
            },
        );
        let mut errors = errors.iter().peekable();
        for (index, (row, pending)) in chunk.new_rows.iter().zip(&chunk.pending_rows).enumerate() {
            let error = errors
                .next_if(|(pair, _)| *pair as usize == index)
                .map(|(_, message)| message);
            picker.feed(*row, *pending, mask.value(index), error);
        }
        chunk.new_rows.clear();
        chunk.pending_rows.clear();
        Ok(())
    }

    /// Left columns then right columns: new rows at `new_rows`, the other side's pending rows
    /// at `pending_rows` (positions).
    fn assemble(
        &self,
        incoming: &Incoming<'_>,
        new_rows: &[u32],
        pending_rows: &[u32],
    ) -> Result<Vec<ArrayRef>, ArrowError> {
        let indices = UInt32Array::from(new_rows.to_vec());
        let new = incoming
            .columns
            .iter()
            .map(|c| take(c.as_ref(), &indices, None))
            .collect::<Result<Vec<_>, _>>()?;
        let pending = self.sides[incoming.side.other().index()].columns_at(pending_rows)?;
        Ok(match incoming.side {
            Side::Left => new.into_iter().chain(pending).collect(),
            Side::Right => pending.into_iter().chain(new).collect(),
        })
    }
}

/// Candidate pairs gathered for one evaluation.
#[derive(Default)]
struct PairChunk {
    new_rows: Vec<u32>,
    pending_rows: Vec<u32>,
}

impl PairChunk {
    fn push(&mut self, row: u32, pending: u32) {
        self.new_rows.push(row);
        self.pending_rows.push(pending);
    }

    fn len(&self) -> usize {
        self.new_rows.len()
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
        keyed: bool,
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
        let keys = if keyed {
            [vec![side_key("id")], vec![side_key("id")]]
        } else {
            [Vec::new(), Vec::new()]
        };
        state
            .correlate(
                &Matcher {
                    condition: &condition("left.id = right.id"),
                    keys: &keys,
                    matching,
                },
                &Incoming {
                    side,
                    columns: &columns,
                    rows: rows.len(),
                    roots: &roots,
                    times: None,
                },
                now_ns,
            )
            .expect("correlate")
    }

    /// A key program over one side's columns (`id`, `n`).
    fn side_key(text: &str) -> Program {
        struct SideScope;
        impl Scope for SideScope {
            fn field(&self, path: &[nervix_nspl::ast::Ident]) -> Result<FieldType, String> {
                match path {
                    [name] if name.name == "id" || name.name == "n" => {
                        Ok(FieldType::required(DataType::I64))
                    }
                    _ => Err("unknown field".to_string()),
                }
            }
        }
        let expr = parse_expression(text).expect("parse");
        let typed = check(&expr, &SideScope, &ExprContext::default()).expect("check");
        Program::compile(&typed, &|path: &[String]| {
            ["id", "n"]
                .iter()
                .position(|n| *n == path.join("."))
                .map(|column| ColumnSlot { source: 0, column })
        })
        .expect("compile")
    }

    #[test]
    fn earliest_pairs_each_row_with_the_earliest_untaken_match() {
        let mut state = state();
        let held = send(
            &mut state,
            false,
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
            false,
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
            false,
            MatchMode::Latest,
            Side::Right,
            &[(1, 20), (1, 21)],
            0,
            0,
        );
        let out = send(
            &mut state,
            false,
            MatchMode::Latest,
            Side::Left,
            &[(1, 10)],
            5,
            1,
        );
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
            false,
            MatchMode::All,
            Side::Left,
            &[(1, 10), (1, 11), (2, 12)],
            0,
            0,
        );
        let out = send(
            &mut state,
            false,
            MatchMode::All,
            Side::Right,
            &[(1, 20)],
            5,
            50,
        );
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
        send(
            &mut state,
            false,
            MatchMode::Earliest,
            Side::Left,
            &[(1, 0)],
            0,
            0,
        );
        let columns = vec![ints(&[1, 1]), ints(&[0, 5])];
        let roots = [root(7), root(8)];
        let out = state
            .correlate(
                &Matcher {
                    condition: &condition("10 / right.n > 0 AND left.id = right.id"),
                    keys: &[Vec::new(), Vec::new()],
                    matching: MatchMode::Earliest,
                },
                &Incoming {
                    side: Side::Right,
                    columns: &columns,
                    rows: 2,
                    roots: &roots,
                    times: None,
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
        let held = send(
            &mut state,
            false,
            MatchMode::Earliest,
            Side::Left,
            &ids,
            0,
            0,
        );
        assert_eq!(held.held.len(), MAX_PENDING_ROWS_PER_SIDE);
        let out = send(
            &mut state,
            false,
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
            false,
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

    #[test]
    fn keyed_matching_pairs_like_the_full_condition() {
        for matching in [MatchMode::Earliest, MatchMode::Latest, MatchMode::All] {
            let mut plain = state();
            let mut keyed = state();
            let left = [(1, 10), (2, 11), (1, 12), (3, 13)];
            let right = [(1, 20), (3, 21), (4, 22), (1, 23)];
            for (state, with_keys) in [(&mut plain, false), (&mut keyed, true)] {
                send(state, with_keys, matching, Side::Left, &left, 0, 0);
            }
            let a = send(&mut plain, false, matching, Side::Right, &right, 10, 1);
            let b = send(&mut keyed, true, matching, Side::Right, &right, 10, 1);
            assert_eq!(a.pair_rows, b.pair_rows, "{matching:?}");
            assert_eq!(values(&a.pairs[1]), values(&b.pairs[1]), "{matching:?}");
            assert_eq!(a.consumed, b.consumed, "{matching:?}");
            assert_eq!(a.held, b.held, "{matching:?}");
            assert_eq!(plain.pending_rows(), keyed.pending_rows());
        }
    }
}

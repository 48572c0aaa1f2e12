//! A CORRELATOR branch with an equality key under steady input
//! (`nervix::runtime::exec::correlate::BranchState`): what matching one batch costs as the
//! other side holds more rows (MAX TIME × rate) shows whether a batch costs its own candidates
//! or everything pending.
//!
//! Per case the left side holds `pending` rows with distinct ids. One step sends a left batch
//! of `BATCH_ROWS` new ids, then a right batch whose ids are the `BATCH_ROWS` oldest pending
//! left ids (`CORRELATE WHERE left.id = right.id`, keys lifted from it):
//! - MATCH EARLIEST: each right row takes its partner, so the left side stays at `pending`.
//! - MATCH ALL: every row stays until MAX TIME; each step expires the oldest batch per side.
//!
//! One measurement runs `STEPS` steps; throughput counts both batches' rows.
//!
//! `cargo bench -p nervix-bench --bench correlate_keyed`

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array};
use arrow_schema::{DataType as ArrowType, Field, Schema, SchemaRef};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use nervix::nspl::ast::processor::MatchMode;
use nervix::nspl::parse_expression;
use nervix::runtime::exec::correlate::{BranchState, Incoming, Matcher};
use nervix::runtime::plan::Side;
use nervix::types::{check, DataType, ExprContext, FieldType, Scope};
use nervix::vm::{ColumnSlot, Program};
use nervix_shards::ack::AckHandle;

/// Rows per batch on each side.
const BATCH_ROWS: usize = 256;
/// Steps per measurement.
const STEPS: usize = 64;
/// Domain ns between batches (each batch's rows share its instant).
const STEP_NS: i64 = 1_000_000;

/// Names one column per side layout, all I64.
struct Columns(&'static [&'static str]);

impl Scope for Columns {
    fn field(&self, path: &[nervix::nspl::ast::Ident]) -> Result<FieldType, String> {
        let name: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
        let name = name.join(".");
        self.0
            .iter()
            .find(|n| **n == name)
            .map(|_| FieldType::required(DataType::I64))
            .ok_or_else(|| format!("unknown field `{name}`"))
    }
}

fn program(text: &str, columns: &'static [&'static str]) -> Program {
    let expr = parse_expression(text).expect("parse");
    let typed = check(&expr, &Columns(columns), &ExprContext::default()).expect("check");
    Program::compile(&typed, &|path: &[String]| {
        columns
            .iter()
            .position(|n| *n == path.join("."))
            .map(|column| ColumnSlot { source: 0, column })
    })
    .expect("compile")
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("id", ArrowType::Int64, false)]))
}

struct Case {
    condition: Program,
    keys: [Vec<Program>; 2],
    matching: MatchMode,
}

impl Case {
    fn new(matching: MatchMode) -> Case {
        Case {
            condition: program("left.id = right.id", &["left.id", "right.id"]),
            keys: [vec![program("id", &["id"])], vec![program("id", &["id"])]],
            matching,
        }
    }

    fn send(&self, state: &mut BranchState, side: Side, ids: &[i64], now_ns: i64) {
        let columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(ids.to_vec()))];
        let roots: Vec<Option<AckHandle>> = vec![None; ids.len()];
        let times = vec![now_ns; ids.len()];
        state
            .correlate(
                &Matcher {
                    condition: &self.condition,
                    keys: &self.keys,
                    matching: self.matching,
                },
                &Incoming {
                    side,
                    columns: &columns,
                    rows: ids.len(),
                    roots: &roots,
                    times: Some(&times),
                },
                now_ns,
            )
            .expect("correlate");
    }
}

/// Ids of left batch `index`.
fn left_ids(index: usize) -> Vec<i64> {
    let first = (index * BATCH_ROWS) as i64;
    (first..first + BATCH_ROWS as i64).collect()
}

/// A branch whose left side holds `pending` rows: `pending / BATCH_ROWS` batches, batch `i` at
/// instant `i × STEP_NS`.
fn filled(case: &Case, pending: usize) -> BranchState {
    let mut state = BranchState::new(&[schema(), schema()]);
    for index in 0..pending / BATCH_ROWS {
        case.send(
            &mut state,
            Side::Left,
            &left_ids(index),
            index as i64 * STEP_NS,
        );
    }
    state
}

/// One step at batch index `next`: under ALL the oldest batch per side expires (MAX TIME =
/// `held` steps); a new left batch; a right batch matching left batch `next - held + 1`, the
/// oldest that ALL still holds (EARLIEST takes it, so its side stays at `held` batches).
fn step(case: &Case, state: &mut BranchState, next: usize, held: usize) {
    let now_ns = next as i64 * STEP_NS;
    if case.matching == MatchMode::All {
        let max_time_ns = (held as i64 * STEP_NS) as u64;
        state.expire(now_ns, max_time_ns, false).expect("expire");
    }
    case.send(state, Side::Left, &left_ids(next), now_ns);
    case.send(state, Side::Right, &left_ids(next + 1 - held), now_ns);
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("correlate_keyed");
    group.throughput(Throughput::Elements((STEPS * 2 * BATCH_ROWS) as u64));
    for (label, matching) in [("earliest", MatchMode::Earliest), ("all", MatchMode::All)] {
        let case = Case::new(matching);
        for pending in [4_096usize, 65_536, 524_288] {
            let held = pending / BATCH_ROWS;
            group.bench_with_input(BenchmarkId::new(label, pending), &pending, |b, _| {
                b.iter_batched_ref(
                    || (filled(&case, pending), held),
                    |(state, next)| {
                        for _ in 0..STEPS {
                            step(&case, state, *next, held);
                            *next += 1;
                        }
                    },
                    BatchSize::LargeInput,
                )
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

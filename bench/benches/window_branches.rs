//! A WINDOW PROCESSOR's branch windows at Nexmark q5's scale, without the graph around them
//! (`nervix::runtime::exec::window::WindowState` in a branch map, with a due index as the
//! processor keeps them): what admitting into, closing and stepping tens of thousands of small
//! windows costs once they no longer fit in cache. End-to-end q5 figures move ±10 % with the
//! host; this isolates the window state's share so a change to its layout can be measured.
//!
//! Shape (q5's, measured in perf/RESULTS.md sessions 30 and 35): every branch window is
//! admitted into once, with `ROWS_PER_WINDOW` rows, and closes `WIDTH_STEPS` steps later
//! with one COUNT. One step admits `WINDOWS_PER_STEP` new branches' rows, then closes the
//! windows that came due (finish, step, remove), so `live` windows stay open: a case per
//! `live` (cache-resident and not).
//!
//! `cargo bench -p nervix-bench --bench window_branches`

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array};
use arrow_schema::{DataType as ArrowType, Field, Schema};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use nervix::nspl::parse_expression;
use nervix::runtime::aggregate::{AggregateCall, Finished};
use nervix::runtime::exec::window::{RunArgs, WindowState};
use nervix::runtime::frame::AckRuns;
use nervix::runtime::plan::{WindowCall, WindowPlan};
use nervix::types::{check, DataType, ExprContext, FieldType, Scope};
use nervix::vm::{ColumnSlot, Program};
use nervix_shards::branch_key::{BranchKey, BranchMap};

/// Rows each window receives (in one admission).
const ROWS_PER_WINDOW: usize = 13;
/// New branch windows per step.
const WINDOWS_PER_STEP: usize = 1_024;
/// Steps per measurement.
const STEPS: usize = 32;
/// Domain ns between steps.
const STEP_NS: i64 = 100_000_000;

/// The input: one required I64 field `x`.
struct Input;

impl Scope for Input {
    fn field(&self, path: &[nervix::nspl::ast::Ident]) -> Result<FieldType, String> {
        match path.iter().map(|i| i.name.as_str()).collect::<Vec<_>>()[..] {
            ["x"] => Ok(FieldType::required(DataType::I64)),
            _ => Err("only `x` is an input field".to_string()),
        }
    }
}

/// A tumbling window of `width_steps` steps computing `COUNT(x)`.
fn plan(width_steps: usize) -> WindowPlan {
    let context = ExprContext {
        aggregates: true,
        ..ExprContext::default()
    };
    let count = check(
        &parse_expression("COUNT(x)").expect("parse"),
        &Input,
        &context,
    )
    .expect("check");
    let argument = check(
        &parse_expression("x").expect("parse"),
        &Input,
        &ExprContext::default(),
    )
    .expect("check");
    let read_x = Program::compile(&argument, &|_: &[String]| {
        Some(ColumnSlot {
            source: 0,
            column: 0,
        })
    })
    .expect("compile");
    let width_ns = width_steps as u64 * STEP_NS as u64;
    WindowPlan {
        width_ns,
        step_ns: width_ns,
        max_state_bytes: None,
        calls: vec![WindowCall {
            call: AggregateCall::from_typed(&count).expect("an aggregate call"),
            args: vec![read_x],
        }],
        results: Arc::new(Schema::new(vec![Field::new(
            "__agg0",
            ArrowType::Int64,
            true,
        )])),
        branch_fields: Vec::new(),
        reserved_bytes: 0,
        model: 1,
    }
}

/// The processor's windows, as `shard/graph/work.rs` keeps them.
struct Windows {
    plan: WindowPlan,
    windows: BranchMap<WindowState>,
    due: BTreeSet<(i64, BranchKey)>,
    next_window: u64,
    next_step: i64,
    /// Rows counted by the windows closed so far (the result, so nothing is optimized away).
    counted: i64,
}

impl Windows {
    fn new(live: usize) -> Windows {
        let mut windows = Windows {
            plan: plan(live / WINDOWS_PER_STEP),
            windows: BranchMap::default(),
            due: BTreeSet::new(),
            next_window: 0,
            next_step: 0,
            counted: 0,
        };
        // Warm: as many steps as a window stays open, so `live` windows are open.
        for _ in 0..live / WINDOWS_PER_STEP {
            windows.step();
        }
        windows
    }

    /// Admits one step's new windows (each a slice of one shared batch, as a fan-out route
    /// hands its branches), then closes the windows due by the step's time.
    fn step(&mut self) {
        let now_ns = self.next_step * STEP_NS;
        self.next_step += 1;
        let rows = WINDOWS_PER_STEP * ROWS_PER_WINDOW;
        let times: Int64Array = (0..rows as i64).map(|row| now_ns + row).collect();
        let values: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows as i64));
        for window in 0..WINDOWS_PER_STEP {
            let offset = window * ROWS_PER_WINDOW;
            let key = BranchKey::Key(self.next_window.to_be_bytes().as_slice().into());
            self.next_window += 1;
            let state = self.windows.entry(key.clone()).or_default();
            state
                .admit(
                    times.slice(offset, ROWS_PER_WINDOW),
                    RunArgs::from_iter([values.slice(offset, ROWS_PER_WINDOW)]),
                    ROWS_PER_WINDOW,
                    AckRuns::new(),
                )
                .expect("admit");
            if let Some(due) = state.due_ns(&self.plan) {
                self.due.insert((due, key));
            }
        }
        let reached_ns = now_ns + rows as i64;
        while let Some((due, key)) = self.due.pop_first() {
            if due > reached_ns {
                self.due.insert((due, key));
                break;
            }
            let Some(state) = self.windows.get_mut(&key) else {
                continue;
            };
            let result = state.finish(&self.plan).expect("finish");
            let Finished::Int64(Some(counted)) = result[0] else {
                panic!("a count: {:?}", result[0]);
            };
            self.counted += counted;
            state.step(&self.plan);
            if state.is_empty() {
                self.windows.remove(&key);
            }
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("window_branches");
    group.throughput(Throughput::Elements(
        (STEPS * WINDOWS_PER_STEP * ROWS_PER_WINDOW) as u64,
    ));
    for live in [4_096usize, 65_536] {
        group.bench_with_input(BenchmarkId::new("count", live), &live, |b, &live| {
            b.iter_batched_ref(
                || Windows::new(live),
                |windows| {
                    for _ in 0..STEPS {
                        windows.step();
                    }
                    assert!(windows.counted > 0, "windows closed");
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

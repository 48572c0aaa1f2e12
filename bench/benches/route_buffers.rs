//! Route-buffer ticks with many buffered branches (`nervix::runtime::shard::buffers`): a shard
//! ticks whenever any deadline comes (every FLUSH IMMEDIATE window, TTL sweeps, timeouts), so
//! the cost of a tick that finds few or no buffers due must not grow with the branches a
//! FLUSH EACH route holds. Two cases over 100,000 branches, one row each, FLUSH EACH 1 s:
//! - `tick_none_due`: a tick before any deadline;
//! - `tick_all_due`: a tick after every deadline (all 100,000 flush; per-buffer cost).
//!
//! `cargo bench -p nervix-bench --bench route_buffers`

use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use nervix::runtime::frame::AckRuns;
use nervix::runtime::shard::buffers::{Frames, RouteBuffers};
use nervix_shards::branch_key::BranchKey;
use nervix_shards::flush::{FlushPolicy, Now};

/// Buffered branches.
const BRANCHES: u32 = 100_000;

/// FLUSH EACH interval (domain-logical ns).
const INTERVAL_NS: u64 = 1_000_000_000;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]))
}

/// `BRANCHES` buffers of one row each, branch `b` opened at logical instant `b` ns.
fn filled() -> RouteBuffers {
    let schema = schema();
    let policy = FlushPolicy::Each {
        interval_ns: INTERVAL_NS,
        max_batch_bytes: u64::MAX,
    };
    let mut route = RouteBuffers::new(policy, schema.clone(), Frames::JoinSmallParts);
    let row = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1]))])
        .expect("one-row batch");
    let (mut openings, mut out) = (0, Vec::new());
    for branch in 0..BRANCHES {
        let key = BranchKey::Key(branch.to_be_bytes().into());
        let now = Now::new(i64::from(branch), 0);
        route.append(
            key,
            row.clone(),
            AckRuns::new(),
            None,
            now,
            &mut openings,
            &mut out,
        );
    }
    assert!(out.is_empty(), "nothing is due while filling");
    route
}

fn ticks(c: &mut Criterion) {
    let mut group = c.benchmark_group("route_buffers");
    let mut route = filled();
    group.bench_function("tick_none_due", |b| {
        let mut out = Vec::new();
        b.iter(|| {
            let next = route.tick(Now::new(1, 0), &mut out);
            assert!(out.is_empty());
            next
        })
    });
    group.throughput(Throughput::Elements(u64::from(BRANCHES)));
    // Each iteration refills 100,000 buffers outside the timing: few samples suffice.
    group.sample_size(10);
    group.bench_function("tick_all_due", |b| {
        b.iter_batched(
            filled,
            |mut route| {
                let mut out = Vec::with_capacity(BRANCHES as usize);
                route.tick(Now::new(i64::MAX, 0), &mut out);
                assert_eq!(out.len(), BRANCHES as usize);
                out
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, ticks);
criterion_main!(benches);

//! The session protocol's per-batch work on one core: encoding a batch as the canonical Arrow
//! IPC stream (what a producer does per submission and a shard per consumer delivery), and
//! validating and decoding it (what a shard does per submission and a consumer per delivery).
//! Batches are the `producer-filter-map` scenario's rows (`nervix_bench::gen`), so the numbers
//! are that scenario's per-batch client and shard costs.
//!
//! `cargo bench -p nervix-bench --bench session_batches`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use nervix::net::batch::{encode_batch, validate_batch, BatchLimits};
use nervix_bench::gen;

// The allocator the nervix binaries use, so allocation costs are theirs.
#[global_allocator]
static GLOBAL: nervix::allocator::DataPlaneAllocator = nervix::allocator::DataPlaneAllocator;

/// Batch sizes measured: the half-load runs' 1,024 rows and the in-process runs' 8,192.
const BATCH_ROWS: [usize; 2] = [1_024, 8_192];

/// The most bytes a validated stream may take here (far above these batches).
const MAX_STREAM_BYTES: usize = 64 * 1024 * 1024;

fn session_batches(c: &mut Criterion) {
    let mut group = c.benchmark_group("session_batches");
    for rows in BATCH_ROWS {
        let batch = gen::ring(1, rows)[0].with_sent_ns(1).expect("ring batch");
        let ipc = encode_batch(&batch).expect("encodes");
        let schema = batch.schema();
        group.throughput(Throughput::Elements(rows as u64));
        group.bench_with_input(BenchmarkId::new("encode", rows), &batch, |b, batch| {
            b.iter(|| encode_batch(batch).expect("encodes"))
        });
        group.bench_with_input(BenchmarkId::new("validate", rows), &ipc, |b, ipc| {
            b.iter(|| {
                validate_batch(ipc, &schema, BatchLimits::new(MAX_STREAM_BYTES)).expect("valid")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, session_batches);
criterion_main!(benches);

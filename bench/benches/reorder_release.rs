//! A REORDERER branch under steady input (`nervix::runtime::exec::reorder::OrderBuffer`): rows
//! arrive in batches, each waits MAX TIME, and every tick releases what is due. What one
//! release costs as the branch holds more rows (MAX TIME × rate) shows whether a release
//! scales with what it lets out or with everything held.
//!
//! Per case: the buffer holds `held_rows` rows as batches of `BATCH_ROWS` rows (sequence-number
//! BY keys out of order by up to two batches, one arrival instant per batch, 1 ms apart); one
//! step holds one more batch and releases at the instant the oldest batch is due, so about one
//! batch's worth leaves per step and the buffer stays at its size. One measurement runs
//! `STEPS` steps; throughput counts the rows they take in. A last case holds one-row batches
//! (a chunk per row until chunks merge).
//!
//! `cargo bench -p nervix-bench --bench reorder_release`

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use nervix::runtime::exec::reorder::OrderBuffer;

/// Rows per held batch in the main cases.
const BATCH_ROWS: usize = 1_024;
/// MAX TIME, and the arrival step between batches, in ns.
const STEP_NS: i64 = 1_000_000;

/// Batch `index`: `BATCH_ROWS` rows whose BY keys are sequence numbers out of order by up to
/// two batches either way (xorshift jitter), as a reorderer sees them in use — so each due
/// batch lets out about one batch and the rest stays held.
fn batch(index: u64, rows: usize) -> (Vec<ArrayRef>, Vec<ArrayRef>) {
    let mut state = index.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let base = index as i64 * rows as i64;
    let keys: Int64Array = (0..rows as i64)
        .map(|row| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let jitter = (state % (4 * rows as u64)) as i64 - 2 * rows as i64;
            base + row + jitter
        })
        .collect();
    let keys: ArrayRef = Arc::new(keys);
    (vec![keys.clone()], vec![keys])
}

/// A buffer holding `batches` batches, arrived 1 ms apart from instant 0, with MAX TIME
/// `batches` ms (so the first is due when batch `batches` arrives).
fn filled(batches: usize, rows: usize) -> OrderBuffer {
    let mut buffer = OrderBuffer::default();
    for index in 0..batches {
        let (columns, keys) = batch(index as u64, rows);
        buffer.hold(
            (columns, None),
            keys,
            rows,
            index as i64 * STEP_NS,
            Vec::new(),
        );
    }
    buffer
}

/// Steps one measurement runs: as many as a branch holds chunks before it merges them, so
/// the merge's cost is in every measurement, spread over the steps it serves.
const STEPS: usize = nervix::runtime::exec::reorder::MAX_CHUNKS_PER_BRANCH;

fn release_steps(c: &mut Criterion) {
    let mut group = c.benchmark_group("reorder_release");
    group.sample_size(20);
    // (rows per batch, batches held): 1,024-row batches, and one-row batches (a branch fed
    // one row at a time holds a chunk per row until they merge).
    for (rows, batches) in [
        (BATCH_ROWS, 16usize),
        (BATCH_ROWS, 128),
        (BATCH_ROWS, 512),
        (1, 16_384),
    ] {
        let max_time_ns = batches as u64 * STEP_NS as u64;
        group.throughput(Throughput::Elements((STEPS * rows) as u64));
        let name = format!("{rows}_row_batches/held_rows");
        group.bench_with_input(
            BenchmarkId::new(name, batches * rows),
            &batches,
            |b, &batches| {
                b.iter_batched_ref(
                    || {
                        let next: Vec<_> = (batches..batches + STEPS)
                            .map(|index| batch(index as u64, rows))
                            .collect();
                        (filled(batches, rows), next)
                    },
                    |(buffer, next)| {
                        let mut released_rows = 0;
                        for (step, (columns, keys)) in next.iter().enumerate() {
                            let now_ns = (batches + step) as i64 * STEP_NS;
                            buffer.hold(
                                (columns.clone(), None),
                                keys.clone(),
                                rows,
                                now_ns,
                                Vec::new(),
                            );
                            let released = buffer
                                .release(now_ns, max_time_ns, false)
                                .expect("a release");
                            released_rows += released.iter().map(|r| r.num_rows).sum::<usize>();
                        }
                        assert!(released_rows > 0, "due batches left");
                        released_rows
                    },
                    BatchSize::LargeInput,
                )
            },
        );
    }
    group.finish();
}

criterion_group!(benches, release_steps);
criterion_main!(benches);

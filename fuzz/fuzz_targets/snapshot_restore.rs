//! Fuzzes the readers of processor snapshots — what a shard restores from its runtime-state
//! store at deploy (windows, reorder buffers, correlator branches, deduplication keyspaces).
//! A store damaged on disk must be refused, never panic the shard. Beyond not panicking:
//! whatever is read back encodes to a snapshot that reads back again (the runtime can go on
//! with it and store it), or to nothing when it holds nothing.
//!
//! The first input byte picks the reader; the rest is the stored value. Each reader checks
//! the model number first (`MODEL`), which libFuzzer's comparison tracing finds.

#![no_main]

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use libfuzzer_sys::fuzz_target;
use nervix::runtime::exec::correlate_snapshot::{restore_branch, snapshot_branch};
use nervix::runtime::exec::dedup::Keyspace;
use nervix::runtime::exec::reorder_snapshot::{restore_buffer, snapshot_buffer};
use nervix::runtime::exec::window::WindowState;
use nervix::runtime::plan::WindowPlan;

const MODEL: u64 = 7;

/// A window with no aggregate call: its snapshot holds the row times alone.
fn window_plan() -> WindowPlan {
    WindowPlan {
        width_ns: 10,
        step_ns: 10,
        max_state_bytes: None,
        calls: Vec::new(),
        results: Arc::new(Schema::empty()),
        branch_fields: Vec::new(),
        reserved_bytes: 0,
        model: MODEL,
    }
}

fn rows_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("tenant", DataType::Utf8, true),
        Field::new("seq", DataType::Int64, true),
    ]))
}

fn side_schemas() -> [SchemaRef; 2] {
    [
        rows_schema(),
        Arc::new(Schema::new(vec![Field::new("paid", DataType::Int64, true)])),
    ]
}

/// A state read back encodes to `again`, which must read back too — or be empty: a state
/// holding nothing encodes as nothing (its stored entry is deleted).
fn assert_reads_back(again: &[u8], read: impl FnOnce(&[u8]) -> bool) {
    assert!(
        again.is_empty() || read(again),
        "a restored state's snapshot does not read back"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&reader, value)) = data.split_first() else {
        return;
    };
    match reader % 4 {
        0 => {
            let plan = window_plan();
            if let Ok(mut state) = WindowState::restore(&plan, value) {
                let again = state
                    .snapshot(&plan, &mut None, &mut Vec::new())
                    .expect("a read window encodes");
                assert_reads_back(&again, |bytes| WindowState::restore(&plan, bytes).is_ok());
            }
        }
        1 => {
            if let Ok(mut buffer) = restore_buffer(value, MODEL, &rows_schema(), 1) {
                let (again, _) = snapshot_buffer(&mut buffer, MODEL).expect("a read buffer encodes");
                assert_reads_back(&again, |bytes| {
                    restore_buffer(bytes, MODEL, &rows_schema(), 1).is_ok()
                });
            }
        }
        2 => {
            if let Ok(restored) = restore_branch(value, MODEL, &side_schemas()) {
                let mut state = restored.state;
                let (again, _) = snapshot_branch(&mut state, MODEL, restored.watermarks_ns)
                    .expect("a read branch encodes");
                assert_reads_back(&again, |bytes| {
                    restore_branch(bytes, MODEL, &side_schemas()).is_ok()
                });
            }
        }
        _ => {
            if let Some(mut space) = Keyspace::from_snapshot(value, MODEL) {
                let again = space.snapshot(MODEL);
                assert_reads_back(&again, |bytes| Keyspace::from_snapshot(bytes, MODEL).is_some());
            }
        }
    }
});

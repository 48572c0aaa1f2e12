//! The Nexmark ports against their references. Every file in `bench/nexmark/` is applied to an
//! embedded node (parse, validation, commit — the console's path); every query then runs end
//! to end (in-process producers → graph → in-process consumer) over the first 20,000 events of
//! the pinned generator, in a domain paced from the generator's base time, and its output must
//! equal the reference's as a multiset of rows.

use std::num::NonZeroUsize;

use nervix::embedded::{scratch_data_dir, EmbeddedConfig, EmbeddedNode};
use nervix_bench::nexmark::gen::Events;
use nervix_bench::nexmark::query::{Query, QUERIES};
use nervix_bench::nexmark::reference::{rows_of, Row, RowDiff};
use nervix_bench::nexmark::run::answer;

/// Events the end-to-end tests submit (18,400 of them bids).
const EVENTS: usize = 20_000;
/// Rows per submitted batch: several batches, and a last one that is partial.
const BATCH_ROWS: usize = 1_500;
/// Differing rows a failure lists at most.
const DIFF_LINES: usize = 50;

#[tokio::test(flavor = "current_thread")]
async fn every_port_is_accepted_by_a_node() {
    let data_dir = scratch_data_dir("nexmark-validate");
    let mut node = EmbeddedNode::start(EmbeddedConfig::loopback(
        data_dir.clone(),
        NonZeroUsize::MIN,
    ))
    .await
    .expect("an embedded node starts");
    let mut refused = Vec::new();
    for query in QUERIES {
        // Each port in a domain of its own, created but not started.
        let script = query.script(&format!("nexmark_{}", query.name));
        if let Err(refusal) = node.run(&script).await {
            refused.push(format!("{}: {refusal}", query.name));
        }
    }
    node.shutdown(1_000).await;
    let _ = std::fs::remove_dir_all(&data_dir);
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
}

/// Runs `name` end to end and compares its rows with the reference, as multisets.
async fn matches_the_reference(name: &str) {
    let query = Query::named(name).expect("a port");
    let events = Events::generate(EVENTS);
    let expected: Vec<Row> = query.reference(&events.persons, &events.auctions, &events.bids);
    assert!(!expected.is_empty(), "{name}: the reference has no rows");
    let batches = answer(&query, &events, BATCH_ROWS, expected.len() as u64)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:#}"));
    let mut got: Vec<Row> = Vec::with_capacity(expected.len());
    for batch in &batches {
        got.extend(rows_of(batch).unwrap_or_else(|e| panic!("{name}: {e:#}")));
    }
    let diff = RowDiff::between(&expected, &got);
    assert!(
        diff.is_empty(),
        "{name}: {} rows out, {} expected:\n{}",
        got.len(),
        expected.len(),
        diff.describe(DIFF_LINES).join("\n")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn q0_passes_every_bid_through() {
    matches_the_reference("q0").await;
}

#[tokio::test(flavor = "current_thread")]
async fn q1_converts_every_price_to_euros() {
    matches_the_reference("q1").await;
}

#[tokio::test(flavor = "current_thread")]
async fn q2_keeps_the_bids_on_every_123rd_auction() {
    matches_the_reference("q2").await;
}

/// `nervix-bench nexmark-q<N>` in its small mode (what CI runs): a second of submitting 20,000
/// pre-generated bids, and the output count equals the reference's for the completed batches.
#[test]
fn the_nexmark_bench_runs_for_a_second_and_matches_the_reference_count() {
    for query in ["q0", "q1", "q2"] {
        let scenario = format!("nexmark-{query}");
        let result = bench_json(&[&scenario, "--seconds", "1", "--events", "20000", "--json"]);
        assert_eq!(result["scenario"], scenario.as_str());
        assert_eq!(result["query"], query);
        let rows_in = result["rows_in"].as_u64().expect("rows_in");
        let rows_out = result["rows_out"].as_u64().expect("rows_out");
        assert!(rows_in > 0, "{result}");
        assert_eq!(rows_out, result["matching"].as_u64().expect("matching"));
        if query == "q2" {
            // About one bid in 123 auctions' worth: far fewer rows out than in, but some.
            assert!(rows_out > 0 && rows_out * 10 < rows_in, "{result}");
        } else {
            assert_eq!(rows_out, rows_in, "{result}");
        }
        assert!(result["events_per_sec_per_shard"].as_f64().unwrap_or(0.0) > 0.0);
        assert!(
            result["p99_us"].as_f64().unwrap_or(-1.0) >= result["p50_us"].as_f64().unwrap_or(0.0)
        );
    }
}

/// `nervix-bench nexmark-q5|q7|q8` in its small mode: 20,000 generated events submitted once in
/// event-time order; every batch completes and the output count equals the reference's.
#[test]
fn the_ordered_nexmark_bench_submits_once_and_matches_the_reference_count() {
    for query in ["q5", "q7", "q8"] {
        let scenario = format!("nexmark-{query}");
        let result = bench_json(&[&scenario, "--events", "20000", "--json"]);
        assert_eq!(result["scenario"], scenario.as_str());
        assert_eq!(result["query"], query);
        assert_eq!(result["events_generated"], 20_000);
        // Of 20,000 events, 18,400 are bids and 1,600 persons and auctions (1 : 3 : 46).
        let submitted = if query == "q8" { 1_600 } else { 18_400 };
        assert_eq!(result["rows_in"], submitted, "{result}");
        assert_eq!(result["batches_not_completed"], 0, "{result}");
        let rows_out = result["rows_out"].as_u64().expect("rows_out");
        assert!(rows_out > 0, "{result}");
        assert_eq!(rows_out, result["matching"].as_u64().expect("matching"));
        assert_eq!(result["reference_rows"], result["matching"]);
        assert!(result["events_per_sec_per_shard"].as_f64().unwrap_or(0.0) > 0.0);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn q7_finds_the_highest_bids_of_each_tumbling_window() {
    matches_the_reference("q7").await;
}

#[tokio::test(flavor = "current_thread")]
async fn q5_finds_the_hot_items_of_each_hopping_window() {
    matches_the_reference("q5").await;
}

#[tokio::test(flavor = "current_thread")]
async fn q8_finds_new_sellers_of_each_tumbling_window() {
    matches_the_reference("q8").await;
}

/// `nervix-bench nexmark-q5 --real-time`: submission follows event time on the wall clock, so
/// the run lasts at least the events' span, the answer is still the reference's, and windows
/// open longer than a snapshot interval show up in the snapshot counters.
#[test]
fn a_real_time_run_follows_event_time_and_counts_its_snapshots() {
    let result = bench_json(&[
        "nexmark-q5",
        "--events",
        "30000",
        "--event-rate",
        "10000",
        "--real-time",
        "--json",
    ]);
    assert_eq!(result["real_time"], true, "{result}");
    assert_eq!(result["event_rate"], 10_000, "{result}");
    // 30,000 events at 10,000 a second span just under 3 s of event time.
    let span_s = result["event_span_s"].as_f64().expect("event_span_s");
    assert!((2.9..=3.0).contains(&span_s), "{result}");
    assert!(
        result["elapsed_s"].as_f64().expect("elapsed_s") >= span_s,
        "{result}"
    );
    assert_eq!(result["batches_not_completed"], 0, "{result}");
    assert_eq!(result["rows_missing"], 0, "{result}");
    assert_eq!(result["rows_extra"], 0, "{result}");
    assert!(
        result["snapshot_states"].as_u64().expect("snapshot_states") > 0,
        "{result}"
    );
    assert!(
        result["snapshot_passes"].as_u64().expect("snapshot_passes") > 0,
        "{result}"
    );
    assert!(
        result["snapshot_bytes"].as_u64().expect("snapshot_bytes") > 0,
        "{result}"
    );
}

/// Runs `nervix-bench` with `args`; it must succeed, and its last line is the JSON report.
fn bench_json(args: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nervix-bench"))
        .args(args)
        .output()
        .expect("nervix-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{args:?}: exit {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().expect("some output");
    serde_json::from_str(last).expect("a JSON line")
}

//! Every scenario of `nervix-bench` runs for a second and its JSON line holds together: this is
//! how CI exercises the benchmarks (a behaviour test, not a timed one). And `compare` on two
//! small files.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nervix-bench"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "nervix-bench-test-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn scenarios() -> Vec<String> {
    let out = bench()
        .arg("list")
        .output()
        .expect("nervix-bench list runs");
    assert!(out.status.success(), "{out:?}");
    // Nexmark scenarios check their own answers (tests/nexmark_queries.rs).
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|name| !name.starts_with("nexmark-"))
        .collect();
    assert!(
        names.contains(&"producer-filter-map".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"producer-filter-map-inproc".to_string()),
        "{names:?}"
    );
    names
}

fn run_for_a_second(scenario: &str) -> Value {
    let out = bench()
        .args([scenario, "--seconds", "1", "--json"])
        .output()
        .expect("nervix-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{scenario}: exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status.code()
    );
    let last = stdout.lines().last().expect("some output");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{scenario}: last line {last:?}: {e}"))
}

#[test]
fn every_scenario_runs_for_a_second_and_delivers_exactly_the_matching_rows() {
    for scenario in scenarios() {
        let result = run_for_a_second(&scenario);
        for field in [
            "scenario",
            "shards",
            "seconds",
            "rows_in",
            "rows_out",
            "rows_per_sec",
            "p50_us",
            "p99_us",
            "rss_bytes",
            "batch_rows",
            "rate",
            "machine",
            "matching",
        ] {
            assert!(
                result.get(field).is_some(),
                "{scenario}: no `{field}` in {result}"
            );
        }
        assert_eq!(result["scenario"], scenario.as_str());
        let rows_in = result["rows_in"].as_u64().expect("rows_in");
        let rows_out = result["rows_out"].as_u64().expect("rows_out");
        let matching = result["matching"].as_u64().expect("matching");
        assert!(rows_in > 0, "{scenario}: {result}");
        assert_eq!(rows_out, matching, "{scenario}: {result}");
        // About half the rows carry the needle.
        assert!(
            matching * 10 > rows_in * 4 && matching * 10 < rows_in * 6,
            "{result}"
        );
        assert!(result["rss_bytes"].as_u64().unwrap_or(0) > 0, "{result}");
        assert!(
            result["p99_us"].as_f64().unwrap_or(-1.0) >= result["p50_us"].as_f64().unwrap_or(0.0)
        );
    }
}

#[test]
fn a_pinned_run_keeps_its_client_off_the_shards_cpus_and_delivers_every_matching_row() {
    let out = bench()
        .args([
            "producer-filter-map",
            "--seconds",
            "1",
            "--batch-rows",
            "1024",
            "--pin",
            "--json",
        ])
        .output()
        .expect("nervix-bench runs");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().expect("some output");
    let result: Value = serde_json::from_str(last).expect("the last line is JSON");
    assert_eq!(result["rows_out"], result["matching"], "{result}");
    let cpus = |field: &str| -> Vec<u64> {
        result[field]
            .as_array()
            .unwrap_or_else(|| panic!("no `{field}` in {result}"))
            .iter()
            .map(|cpu| cpu.as_u64().expect("a CPU number"))
            .collect()
    };
    let (shard_cpus, client_cpus) = (cpus("shard_cpus"), cpus("client_cpus"));
    assert_eq!(shard_cpus.len(), 1, "{result}");
    assert!(
        client_cpus.iter().all(|cpu| !shard_cpus.contains(cpu)),
        "{result}"
    );
    // One shard takes one CPU; the client gets every other one.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(shard_cpus.len() + client_cpus.len(), cores, "{result}");
}

#[test]
fn half_load_paces_the_second_run_to_half_the_first_runs_rate() {
    let out = bench()
        .args([
            "producer-filter-map-inproc",
            "--seconds",
            "1",
            "--batch-rows",
            "1024",
            "--half-load",
            "--json",
        ])
        .output()
        .expect("nervix-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("full speed:") && stdout.contains("half load:"),
        "{stdout}"
    );
    let last = stdout.lines().last().expect("some output");
    let result: Value = serde_json::from_str(last).expect("the last line is JSON");
    let full = result["full_rows_per_sec"]
        .as_f64()
        .expect("full_rows_per_sec");
    let rate = result["rate"].as_u64().expect("the paced run has a rate");
    assert!(
        full > 0.0 && result["full_p99_us"].as_f64().is_some(),
        "{result}"
    );
    assert_eq!(rate, (full / 2.0).floor() as u64, "{result}");
    assert_eq!(result["rows_out"], result["matching"], "{result}");
    // The tail: quantiles in order, slow rows placed in the slots of the measured span.
    let number = |field: &str| {
        result[field]
            .as_f64()
            .unwrap_or_else(|| panic!("no `{field}` in {result}"))
    };
    assert!(
        number("p50_us") <= number("p90_us")
            && number("p90_us") <= number("p99_us")
            && number("p99_us") <= number("p999_us"),
        "{result}"
    );
    let (slow_rows, slow_slots, slots) = (
        number("rows_over_1ms"),
        number("slots_over_1ms"),
        number("slots_50ms"),
    );
    assert!(slots >= 1.0 && slow_slots <= slots, "{result}");
    assert_eq!(slow_rows == 0.0, slow_slots == 0.0, "{result}");
    assert!(slow_rows <= number("rows_out"), "{result}");
    let refused = bench()
        .args(["producer-filter-map", "--half-load", "--rate", "1000"])
        .output()
        .expect("nervix-bench runs");
    assert!(
        !refused.status.success(),
        "--half-load with --rate must be refused"
    );
}

#[test]
fn compare_reports_the_ratio_and_fails_below_the_floor_only_when_asked() {
    let dir = scratch("compare");
    let baseline = dir.join("baseline.jsonl");
    let run = dir.join("run.json");
    std::fs::write(
        &baseline,
        "{\"scenario\":\"producer-filter-map\",\"rows_per_sec\":9000000,\"p99_us\":100}\n\
         {\"scenario\":\"producer-filter-map-inproc\",\"rows_per_sec\":1,\"p99_us\":1}\n\
         {\"scenario\":\"producer-filter-map\",\"rows_per_sec\":4160000,\"p99_us\":901}\n",
    )
    .unwrap();
    std::fs::write(
        &run,
        "scenario table line\n{\"scenario\":\"producer-filter-map\",\"rows_per_sec\":5120000,\"p99_us\":812}\n",
    )
    .unwrap();
    let out = bench()
        .arg("compare")
        .args([&baseline, &run])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "producer-filter-map: 5.12 M rows/s vs baseline 4.16 M rows/s: 1.23× faster; p99 812 µs vs 901 µs"
    );
    // Slower than the baseline: informational unless --fail-below.
    let slow = dir.join("slow.json");
    std::fs::write(
        &slow,
        "{\"scenario\":\"producer-filter-map\",\"rows_per_sec\":2080000,\"p99_us\":900}\n",
    )
    .unwrap();
    let out = bench()
        .arg("compare")
        .args([&baseline, &slow])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("0.50× (slower)"));
    let out = bench()
        .arg("compare")
        .args([&baseline, &slow])
        .args(["--fail-below", "0.8"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // A file without a result line is an error that names the file.
    let empty = dir.join("empty.json");
    std::fs::write(&empty, "nothing here\n").unwrap();
    let out = bench()
        .arg("compare")
        .args([&baseline, &empty])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("empty.json"),
        "{out:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn host_gaps_reports_every_probed_cpu_and_refuses_bad_settings() {
    let out = bench()
        .args([
            "host-gaps",
            "--seconds",
            "0.3",
            "--cpus",
            "0",
            "--threshold-us",
            "50",
        ])
        .arg("--json")
        .output()
        .expect("nervix-bench host-gaps runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("cpu 0: "), "{stdout}");
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["probe"], "host-gaps");
    assert_eq!(result["threshold_us"], 50);
    let cpus = result["cpus"].as_array().expect("cpus");
    assert_eq!(cpus.len(), 1);
    let cpu = &cpus[0];
    assert_eq!(cpu["cpu"], 0);
    let gaps = cpu["gaps"].as_u64().unwrap();
    let bucketed: u64 = cpu["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .sum();
    assert_eq!(
        bucketed, gaps,
        "every gap of a short probe is kept and bucketed"
    );
    assert!(cpu["top_phase_gaps"].as_u64().unwrap() <= gaps);
    let total_ms = cpu["total_ms"].as_f64().unwrap();
    assert!((0.0..300.0).contains(&total_ms), "{total_ms}");
    assert!(cpu["max_us"].as_f64().unwrap() <= total_ms * 1000.0 + 1e-6);
    for bad in [["--seconds", "0"], ["--threshold-us", "0"]] {
        let out = bench().arg("host-gaps").args(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{bad:?}: {out:?}");
    }
}

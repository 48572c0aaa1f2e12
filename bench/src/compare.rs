//! `nervix-bench compare <baseline.json> <run.json>`: sets each scenario of a run against the
//! baseline's last record of the same scenario (and, where one exists, the same `rate` and
//! `batch_rows`). Either file may hold JSON lines (a history, or
//! a captured stdout with the human table): lines that are not JSON objects are skipped.

use anyhow::{bail, Context};
use serde_json::Value;

/// One scenario set against its baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub scenario: String,
    pub rows_per_sec: f64,
    pub baseline_rows_per_sec: f64,
    /// run ÷ baseline throughput (> 1 is faster).
    pub ratio: f64,
    pub p99_us: f64,
    pub baseline_p99_us: f64,
}

impl Comparison {
    pub fn line(&self) -> String {
        let verdict = if self.ratio >= 1.0 {
            format!("{:.2}× faster", self.ratio)
        } else {
            format!("{:.2}× (slower)", self.ratio)
        };
        format!(
            "{}: {} rows/s vs baseline {} rows/s: {verdict}; p99 {:.0} µs vs {:.0} µs",
            self.scenario,
            millions(self.rows_per_sec),
            millions(self.baseline_rows_per_sec),
            self.p99_us,
            self.baseline_p99_us
        )
    }
}

/// `5.12 M` (two decimals, cut not rounded up).
fn millions(rows_per_sec: f64) -> String {
    format!("{:.2} M", (rows_per_sec / 1e4).floor() / 100.0)
}

/// The JSON objects of a file, in order.
pub fn records(text: &str) -> Vec<Value> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("scenario").and_then(Value::as_str).is_some())
        .collect()
}

fn number(record: &Value, field: &str, file: &str) -> anyhow::Result<f64> {
    record
        .get(field)
        .and_then(Value::as_f64)
        .with_context(|| format!("{file}: a record has no number `{field}`"))
}

/// Compares every scenario of `run` (its last record of each) with the last record of the
/// same scenario in `baseline` (measured with the same rate and batch size when there is one).
pub fn compare(
    baseline: &str,
    baseline_name: &str,
    run: &str,
    run_name: &str,
) -> anyhow::Result<Vec<Comparison>> {
    let baseline_records = records(baseline);
    let run_records = records(run);
    if run_records.is_empty() {
        bail!("{run_name}: no JSON result line (run a scenario with --json)");
    }
    let mut scenarios: Vec<&str> = Vec::new();
    for record in &run_records {
        let name = record
            .get("scenario")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !scenarios.contains(&name) {
            scenarios.push(name);
        }
    }
    let last_of = |records: &[Value], scenario: &str| -> Option<Value> {
        records
            .iter()
            .rev()
            .find(|r| r.get("scenario").and_then(Value::as_str) == Some(scenario))
            .cloned()
    };
    let mut out = Vec::new();
    for scenario in scenarios {
        let Some(run_record) = last_of(&run_records, scenario) else {
            continue;
        };
        // Prefer a baseline measured the same way (rate and batch size), so a history with
        // paced runs still compares a full-speed run with a full-speed one.
        let same_settings = baseline_records
            .iter()
            .rev()
            .find(|r| {
                r.get("scenario").and_then(Value::as_str) == Some(scenario)
                    && ["rate", "batch_rows"]
                        .iter()
                        .all(|k| r.get(*k) == run_record.get(*k))
            })
            .cloned();
        let Some(base_record) = same_settings.or_else(|| last_of(&baseline_records, scenario))
        else {
            bail!("{baseline_name}: no record of scenario `{scenario}` to compare with");
        };
        let rows_per_sec = number(&run_record, "rows_per_sec", run_name)?;
        let baseline_rows_per_sec = number(&base_record, "rows_per_sec", baseline_name)?;
        let ratio = if baseline_rows_per_sec > 0.0 {
            rows_per_sec / baseline_rows_per_sec
        } else {
            f64::INFINITY
        };
        out.push(Comparison {
            scenario: scenario.to_string(),
            rows_per_sec,
            baseline_rows_per_sec,
            ratio,
            p99_us: number(&run_record, "p99_us", run_name)?,
            baseline_p99_us: number(&base_record, "p99_us", baseline_name)?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_last_record_of_the_same_scenario() {
        let baseline = r#"{"scenario":"a","rows_per_sec":4160000,"p99_us":901}
{"scenario":"b","rows_per_sec":1,"p99_us":1}
{"scenario":"a","rows_per_sec":4160000,"p99_us":901}"#;
        let run = "table line\n{\"scenario\":\"a\",\"rows_per_sec\":5120000,\"p99_us\":812}\n";
        let out = compare(baseline, "base", run, "run").unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].line(),
            "a: 5.12 M rows/s vs baseline 4.16 M rows/s: 1.23× faster; p99 812 µs vs 901 µs"
        );
    }

    #[test]
    fn a_missing_baseline_scenario_is_an_error() {
        let err = compare(
            "{\"scenario\":\"x\",\"rows_per_sec\":1,\"p99_us\":1}",
            "base",
            "{\"scenario\":\"y\",\"rows_per_sec\":1,\"p99_us\":1}",
            "run",
        )
        .unwrap_err();
        assert!(err.to_string().contains("`y`"), "{err}");
    }

    #[test]
    fn prefers_a_baseline_with_the_same_rate() {
        let baseline = r#"{"scenario":"a","rate":null,"rows_per_sec":8000000,"p99_us":900}
{"scenario":"a","rate":4000000,"rows_per_sec":4000000,"p99_us":100}"#;
        let run = r#"{"scenario":"a","rate":null,"rows_per_sec":8000000,"p99_us":900}"#;
        let out = compare(baseline, "base", run, "run").unwrap();
        assert_eq!(out[0].baseline_rows_per_sec, 8_000_000.0);
    }
}

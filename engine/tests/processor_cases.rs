//! Processor runtime cases through the real interfaces: each `tests/data/processors/*.case`
//! defines a graph in NSPL, then sends rows through a CLIENT PRODUCER ingestor and checks the
//! rows a CLIENT CONSUMER emitter receives, step by step.
//!
//! A case file is a list of sections, each opened by a `== ` line:
//!
//! - `== nspl` — statements run through the console (domain `cases`, producer ingestor
//!   `rows_in`, consumer emitter `rows_out`).
//! - `== fields` — the producer's fields, one `name TYPE` per line.
//! - `== send` — one batch: a JSON object per line.
//! - `== sleep <n>ms` — wait.
//! - `== expect` — the next rows received, in this order (JSON objects, one per line);
//!   `== expect unordered` compares them as a multiset; `… within <n>ms` requires them to
//!   arrive within that long of the step's start (timing cases: paced domains, generators).
//! - `== quiet <n>ms` — nothing arrives for that long.
//!
//! Lines starting with `#` are comments.

#[path = "support/codec_cases.rs"]
mod codec_cases;
mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use codec_cases::{rows, BytesAs};
use serde_json::Value;
use support::dataplane::{consumer, define, fields, producer, quiet_for, runtime};
use support::Node;

enum Step {
    Send(Vec<String>),
    Sleep(u64),
    Expect {
        rows: Vec<Value>,
        ordered: bool,
        within_ms: Option<u64>,
    },
    Quiet(u64),
}

struct Case {
    nspl: String,
    fields: Vec<(String, String)>,
    steps: Vec<Step>,
}

fn parse(path: &Path) -> Case {
    let text = std::fs::read_to_string(path).expect("case file");
    let mut case = Case {
        nspl: String::new(),
        fields: Vec::new(),
        steps: Vec::new(),
    };
    let mut section: Option<(String, Vec<String>)> = None;
    let finish = |case: &mut Case, section: Option<(String, Vec<String>)>| {
        let Some((head, lines)) = section else {
            return;
        };
        let words: Vec<&str> = head.split_whitespace().collect();
        let millis = || {
            words[1]
                .trim_end_matches("ms")
                .parse::<u64>()
                .expect("`<n>ms`")
        };
        let json = |lines: &[String]| -> Vec<Value> {
            lines
                .iter()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
                .collect()
        };
        match words[0] {
            "nspl" => case.nspl = lines.join("\n"),
            "fields" => {
                case.fields = lines
                    .iter()
                    .map(|l| {
                        let (name, ty) = l.split_once(' ').expect("`name TYPE`");
                        (name.to_string(), ty.trim().to_string())
                    })
                    .collect()
            }
            "send" => case.steps.push(Step::Send(lines)),
            "sleep" => case.steps.push(Step::Sleep(millis())),
            "quiet" => case.steps.push(Step::Quiet(millis())),
            "expect" => case.steps.push(Step::Expect {
                rows: json(&lines),
                ordered: !words.contains(&"unordered"),
                within_ms: words.iter().position(|w| *w == "within").map(|at| {
                    words[at + 1]
                        .trim_end_matches("ms")
                        .parse::<u64>()
                        .expect("`within <n>ms`")
                }),
            }),
            other => panic!("{}: unknown section '{other}'", path.display()),
        }
    };
    for line in text.lines() {
        if let Some(head) = line.strip_prefix("== ") {
            finish(&mut case, section.take());
            section = Some((head.trim().to_string(), Vec::new()));
        } else if !line.trim().is_empty() && !line.starts_with('#') {
            if let Some((_, lines)) = section.as_mut() {
                lines.push(line.to_string());
            }
        }
    }
    finish(&mut case, section.take());
    case
}

fn arrow_type(nspl: &str) -> DataType {
    match nspl {
        "STRING" => DataType::Utf8,
        "I64" => DataType::Int64,
        "F64" => DataType::Float64,
        "BOOL" => DataType::Boolean,
        "DATETIME" => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
        other => panic!("no test mapping for type {other}"),
    }
}

fn batch(fields: &[(String, String)], lines: &[String]) -> RecordBatch {
    let schema = Arc::new(Schema::new(
        fields
            .iter()
            .map(|(name, ty)| Field::new(name, arrow_type(ty), false))
            .collect::<Vec<_>>(),
    ));
    // arrow-json parses offset time zones only: read DATETIME at +00:00, then name it UTC.
    let parse_schema = Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Timestamp(unit, Some(_)) => Field::new(
                    f.name(),
                    DataType::Timestamp(*unit, Some("+00:00".into())),
                    false,
                ),
                _ => f.as_ref().clone(),
            })
            .collect::<Vec<_>>(),
    ));
    let mut decoder = arrow_json::ReaderBuilder::new(parse_schema)
        .build_decoder()
        .expect("decoder");
    decoder
        .decode(lines.join("\n").as_bytes())
        .expect("rows match the fields");
    let parsed = decoder.flush().expect("rows").expect("a batch");
    let columns = parsed
        .columns()
        .iter()
        .map(|column| match column.data_type() {
            DataType::Timestamp(TimeUnit::Nanosecond, Some(_)) => {
                let values = column
                    .as_any()
                    .downcast_ref::<arrow_array::TimestampNanosecondArray>()
                    .expect("timestamps")
                    .clone()
                    .with_timezone("UTC");
                Arc::new(values) as arrow_array::ArrayRef
            }
            _ => column.clone(),
        })
        .collect();
    RecordBatch::try_new(schema, columns).expect("batch")
}

fn sorted(mut rows: Vec<Value>) -> Vec<Value> {
    rows.sort_by_key(|row| row.to_string());
    rows
}

fn run(path: &Path) {
    let case = parse(path);
    let name = path.file_stem().unwrap().to_string_lossy().to_string();
    let dir = support::scratch_dir(&format!("processor-{name}"));
    let node = Node::start(&dir);
    define(&mut node.admin(), &case.nspl);
    let field_spec: Vec<(&str, &str)> = case
        .fields
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    runtime().block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut rows_out = consumer(&session, "cases", "rows_out", 64).await;
        let mut rows_in = producer(
            &session,
            "cases",
            "rows_in",
            fields(&field_spec),
            64,
            1 << 24,
        )
        .await;
        for (index, step) in case.steps.iter().enumerate() {
            let at = format!("{name} step {}", index + 1);
            match step {
                Step::Send(lines) => {
                    rows_in
                        .submit(&batch(&case.fields, lines))
                        .await
                        .unwrap_or_else(|e| panic!("{at}: submit: {e}"));
                }
                Step::Sleep(millis) => tokio::time::sleep(Duration::from_millis(*millis)).await,
                Step::Quiet(millis) => {
                    assert!(
                        quiet_for(&mut rows_out, *millis).await,
                        "{at}: rows arrived during quiet {millis} ms"
                    )
                }
                Step::Expect {
                    rows: want,
                    ordered,
                    within_ms,
                } => {
                    let limit = Duration::from_millis(within_ms.unwrap_or(10_000));
                    let deadline = tokio::time::Instant::now() + limit;
                    let mut got: Vec<Value> = Vec::new();
                    while got.len() < want.len() {
                        let delivery = tokio::time::timeout_at(deadline, rows_out.next())
                            .await
                            .unwrap_or_else(|_| {
                                panic!("{at}: waited {limit:?} for {want:?}, got only {got:?}")
                            })
                            .expect("consumer healthy")
                            .expect("consumer open");
                        got.extend(rows(&delivery.batch, BytesAs::Hex));
                        rows_out.ack(delivery.seq).await.expect("ack");
                    }
                    if *ordered {
                        assert_eq!(&got, want, "{at}");
                    } else {
                        assert_eq!(sorted(got), sorted(want.clone()), "{at}");
                    }
                }
            }
        }
    });
}

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/processors");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("case directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "case"))
        .collect();
    files.sort();
    files
}

#[test]
fn processor_cases() {
    let only = std::env::var("CASE").ok();
    let files = cases();
    assert!(!files.is_empty(), "no processor cases");
    for path in files {
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        if only.as_ref().is_some_and(|o| !stem.contains(o.as_str())) {
            continue;
        }
        eprintln!("case {stem}");
        run(&path);
    }
}

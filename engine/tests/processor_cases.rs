//! Processor runtime cases through the real interfaces: each `tests/data/processors/*.case`
//! defines a graph in NSPL, then sends rows through CLIENT PRODUCER ingestors and checks the
//! rows a CLIENT CONSUMER emitter receives, step by step.
//!
//! A case file is a list of sections, each opened by a `== ` line:
//!
//! - `== nspl` — statements run through the console (domain `cases`, producer ingestor
//!   `rows_in` unless named otherwise, consumer emitter `rows_out`).
//! - `== fields [<ingestor>]` — a producer's fields, one `name TYPE` per line; one producer
//!   is opened per `fields` section (the ingestor defaults to `rows_in`); `name TYPE
//!   OPTIONAL` declares a field that may be null.
//! - `== send [<ingestor>]` — one batch to that producer: a JSON object per line.
//! - `== outcomes [<ingestor>]` — waits for the terminal outcomes of that producer's batches,
//!   one `<n> <outcome>` per line: the `n`th batch sent to it (from 1) and `completed`,
//!   `rejected` or `failed`.
//! - `== console` — statements run through the console now (domain `cases` is selected first),
//!   e.g. an ALTER while rows are held.
//! - `== sleep <n>ms` — wait.
//! - `== expect` — the next rows received, in this order (JSON objects, one per line);
//!   `== expect unordered` compares them as a multiset; `… within <n>ms` requires them to
//!   arrive within that long of the step's start (timing cases: paced domains, generators).
//! - `== quiet <n>ms` — nothing arrives for that long.
//!
//! - `== shards <n>` — the node runs `n` shards (default one), so branches spread over them.
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

/// The producer ingestor a section names when it names none.
const DEFAULT_INGESTOR: &str = "rows_in";

enum Step {
    Send {
        ingestor: String,
        lines: Vec<String>,
    },
    Outcomes {
        ingestor: String,
        want: Vec<(usize, String)>,
    },
    Console(String),
    Sleep(u64),
    Expect {
        rows: Vec<Value>,
        ordered: bool,
        within_ms: Option<u64>,
    },
    Quiet(u64),
}

/// One producer's fields: `(name, NSPL type)`.
type Fields = Vec<(String, String)>;

struct Case {
    nspl: String,
    /// Per producer ingestor, in the order the case declares them.
    fields: Vec<(String, Fields)>,
    steps: Vec<Step>,
    shards: usize,
}

fn parse(path: &Path) -> Case {
    let text = std::fs::read_to_string(path).expect("case file");
    let mut case = Case {
        nspl: String::new(),
        fields: Vec::new(),
        steps: Vec::new(),
        shards: 1,
    };
    let mut section: Option<(String, Vec<String>)> = None;
    let finish = |case: &mut Case, section: Option<(String, Vec<String>)>| {
        let Some((head, lines)) = section else {
            return;
        };
        let words: Vec<&str> = head.split_whitespace().collect();
        let ingestor = || words.get(1).unwrap_or(&DEFAULT_INGESTOR).to_string();
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
            "shards" => case.shards = words[1].parse().expect("`shards <n>`"),
            "fields" => case.fields.push((
                ingestor(),
                lines
                    .iter()
                    .map(|l| {
                        let (name, ty) = l.split_once(' ').expect("`name TYPE`");
                        (name.to_string(), ty.trim().to_string())
                    })
                    .collect(),
            )),
            "send" => case.steps.push(Step::Send {
                ingestor: ingestor(),
                lines,
            }),
            "outcomes" => case.steps.push(Step::Outcomes {
                ingestor: ingestor(),
                want: lines
                    .iter()
                    .map(|l| {
                        let (n, outcome) = l.split_once(' ').expect("`<n> <outcome>`");
                        (n.parse().expect("batch number"), outcome.trim().to_string())
                    })
                    .collect(),
            }),
            "console" => case.steps.push(Step::Console(lines.join("\n"))),
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
    match nspl.trim_end_matches(" OPTIONAL") {
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
            .map(|(name, ty)| Field::new(name, arrow_type(ty), ty.ends_with(" OPTIONAL")))
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
                    f.is_nullable(),
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

/// An outcome as case files name it.
fn outcome_name(outcome: &nervix_net::session::frame::Outcome) -> String {
    use nervix_net::session::frame::Outcome;
    match outcome {
        Outcome::Completed => "completed".to_string(),
        Outcome::Rejected => "rejected".to_string(),
        Outcome::Failed(_) => "failed".to_string(),
        other => format!("{other:?}"),
    }
}

/// One open producer: its fields, the sequence number of each batch sent, outcomes read.
struct Open {
    producer: nervix_net::client::Producer,
    fields: Fields,
    sent: Vec<u64>,
    outcomes: std::collections::HashMap<u64, String>,
}

fn sorted(mut rows: Vec<Value>) -> Vec<Value> {
    rows.sort_by_key(|row| row.to_string());
    rows
}

fn run(path: &Path) {
    let case = parse(path);
    let name = path.file_stem().unwrap().to_string_lossy().to_string();
    let dir = support::scratch_dir(&format!("processor-{name}"));
    let shards = case.shards.to_string();
    let node = Node::start_on(
        &dir,
        support::free_addr(),
        support::free_addr(),
        &["--shards", &shards],
    );
    define(&mut node.admin(), &case.nspl);
    runtime().block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut rows_out = consumer(&session, "cases", "rows_out", 64).await;
        let mut producers: std::collections::HashMap<String, Open> =
            std::collections::HashMap::new();
        for (ingestor, spec) in &case.fields {
            let field_spec: Vec<(&str, &str)> =
                spec.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
            let declared: Vec<nervix_net::session::frame::ExpectedField> = fields(&field_spec)
                .into_iter()
                .map(|mut field| {
                    if let Some(ty) = field.type_text.strip_suffix(" OPTIONAL") {
                        field.type_text = ty.to_string();
                        field.optional = true;
                    }
                    field
                })
                .collect();
            let opened = producer(&session, "cases", ingestor, declared, 64, 1 << 24).await;
            producers.insert(
                ingestor.clone(),
                Open {
                    producer: opened,
                    fields: spec.clone(),
                    sent: Vec::new(),
                    outcomes: std::collections::HashMap::new(),
                },
            );
        }
        for (index, step) in case.steps.iter().enumerate() {
            let at = format!("{name} step {}", index + 1);
            match step {
                Step::Send { ingestor, lines } => {
                    let open = producers
                        .get_mut(ingestor)
                        .unwrap_or_else(|| panic!("{at}: no `== fields {ingestor}` section"));
                    let seq = open
                        .producer
                        .submit(&batch(&open.fields, lines))
                        .await
                        .unwrap_or_else(|e| panic!("{at}: submit: {e}"));
                    open.sent.push(seq);
                }
                Step::Outcomes { ingestor, want } => {
                    let open = producers
                        .get_mut(ingestor)
                        .unwrap_or_else(|| panic!("{at}: no `== fields {ingestor}` section"));
                    for (n, expected) in want {
                        let seq = open.sent[n - 1];
                        while !open.outcomes.contains_key(&seq) {
                            let (got_seq, outcome) = tokio::time::timeout(
                                Duration::from_secs(10),
                                open.producer.next_outcome(),
                            )
                            .await
                            .unwrap_or_else(|_| panic!("{at}: no outcome for batch {n}"))
                            .expect("producer healthy")
                            .unwrap_or_else(|| panic!("{at}: batch {n} has no outcome"));
                            open.outcomes.insert(got_seq, outcome_name(&outcome));
                        }
                        assert_eq!(&open.outcomes[&seq], expected, "{at}: batch {n}");
                    }
                }
                Step::Console(statements) => {
                    define(&mut node.admin(), &format!("USE cases;\n{statements}"))
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

//! FILE APPEND and console subscriptions: rows appended as NDJSON and acknowledged after
//! fsync; a subscription streams the relay's rows to its console session with SENSITIVE
//! fields masked.

mod support;

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use nervix_net::client::Session;
use nervix_net::session::frame::{ExpectedField, Outcome};
use support::dataplane::{assert_completed, define, drain, producer, runtime};
use support::Node;

const GRAPH: &str = "
CREATE DOMAIN pay;
USE pay;
CREATE SCHEMA payment (tenant STRING, card STRING SENSITIVE, amount I64);
CREATE RELAY payments SCHEMA payment UNBRANCHED;
CREATE CLIENT PRODUCER INGESTOR payments_in
  FROM SCHEMA payment
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO payments
    INHERIT ALL
    UNBRANCHED
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT files TYPE FILE CONFIG {'root' = 'out'};
CREATE FILE APPEND EMITTER payments_file
  FROM payments
  TO files PATH 'payments.ndjson' FORMAT NDJSON
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 1s
  FLUSH EACH 50ms MAX BATCH SIZE 1MiB
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
";

fn payments(rows: &[(&str, &str, i64)]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("tenant", DataType::Utf8, false),
        Field::new("card", DataType::Utf8, false),
        Field::new("amount", DataType::Int64, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
    ];
    RecordBatch::try_new(schema, columns).expect("batch")
}

fn payment_fields() -> Vec<ExpectedField> {
    vec![
        ExpectedField {
            name: "tenant".into(),
            type_text: "STRING".into(),
            optional: false,
            sensitive: false,
        },
        ExpectedField {
            name: "card".into(),
            type_text: "STRING".into(),
            optional: false,
            sensitive: true,
        },
        ExpectedField {
            name: "amount".into(),
            type_text: "I64".into(),
            optional: false,
            sensitive: false,
        },
    ]
}

#[test]
fn file_append_writes_ndjson_and_completes_after_fsync_and_subscriptions_mask_sensitive_fields() {
    let dir = support::scratch_dir("sinks");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, GRAPH);
    let created = admin.ok("CREATE SUBSCRIPTION watch TO payments WHERE amount > 10;");
    assert!(created[0].contains("watch"), "{created:?}");
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut producer =
            producer(&session, "pay", "payments_in", payment_fields(), 4, 1 << 20).await;
        producer
            .submit(&payments(&[
                ("acme", "4111-1111", 5),
                ("zen", "5500-0000", 25),
            ]))
            .await
            .unwrap();
        producer
            .submit(&payments(&[("acme", "4111-2222", 12)]))
            .await
            .unwrap();
        let outcomes = drain(&mut producer, 10).await;
        assert_completed(&outcomes, 2);
    });
    // Completed means fsynced: the file holds every row now.
    let written = std::fs::read_to_string(dir.join("out/payments.ndjson")).expect("the file");
    let lines: Vec<serde_json::Value> = written
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 3, "{written}");
    assert_eq!(lines[0]["tenant"], "acme");
    assert_eq!(lines[1]["amount"], 25);
    assert_eq!(
        lines[2]["card"], "4111-2222",
        "the file sink writes the data as is"
    );
    // The subscription saw the two rows over 10, with the card masked.
    let mut streamed = Vec::new();
    while streamed.len() < 2 {
        let line = admin
            .read_raw_line(Duration::from_secs(5))
            .expect("a subscription line");
        streamed.push(line);
    }
    assert_eq!(
        streamed,
        vec![
            r#"watch: {"tenant":"zen","card":"<masked>","amount":25}"#.to_string(),
            r#"watch: {"tenant":"acme","card":"<masked>","amount":12}"#.to_string(),
        ]
    );
    // The session goes on answering statements afterwards.
    admin.ok("DROP SUBSCRIPTION watch;");
}

#[test]
fn a_subscription_whose_where_does_not_type_check_is_refused() {
    let dir = support::scratch_dir("sinks-refused");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, GRAPH);
    let answer = admin.send("CREATE SUBSCRIPTION watch TO payments WHERE amount > 'x';");
    let error = answer.status.expect_err("refused");
    assert!(error.contains("I64") && error.contains("STRING"), "{error}");
    let answer = admin.send("CREATE SUBSCRIPTION watch TO payments WHERE nope > 1;");
    let error = answer.status.expect_err("refused");
    assert!(error.contains("nope"), "{error}");
}

#[test]
fn a_failing_file_write_is_retried_on_the_retry_policy_and_holds_its_rows() {
    let dir = support::scratch_dir("sinks-retry");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    // /dev/full accepts the open and refuses every write with ENOSPC.
    let graph = GRAPH
        .replace("CONFIG {'root' = 'out'}", "CONFIG {'root' = '/dev'}")
        .replace("PATH 'payments.ndjson'", "PATH 'full'")
        .replace(
            "MODE ACK SEQUENTIAL ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms",
            "MODE ACK SEQUENTIAL ACK TIMEOUT 1s RETRY POLICY BACKOFF 10ms MAX 100ms",
        );
    define(&mut admin, &graph);
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut producer =
            producer(&session, "pay", "payments_in", payment_fields(), 4, 1 << 20).await;
        producer
            .submit(&payments(&[("acme", "4111-1111", 5)]))
            .await
            .unwrap();
        let outcomes = drain(&mut producer, 10).await;
        // The sink never confirmed: the source's ACK TIMEOUT decides, not a dropped write.
        assert_eq!(
            outcomes,
            vec![(
                0,
                Outcome::Failed(nervix_net::session::frame::FailureCause::AckTimeout)
            )]
        );
    });
    let log = node.log();
    let retries = log.matches("retrying in").count();
    assert!(
        retries >= 3,
        "the write was retried {retries} times:\n{log}"
    );
    assert!(log.contains("No space left on device"), "{log}");
}

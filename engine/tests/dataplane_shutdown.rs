//! SIGTERM is a graceful stop: buffered rows are force-flushed to their sinks before the node
//! exits, and the process exits 0.

mod support;

use std::time::{Duration, Instant};

use nervix_net::client::Session;
use support::dataplane::{define, http_get, metric, order_fields, orders, producer, runtime};
use support::Node;

const GRAPH: &str = "
CREATE DOMAIN shop;
USE shop;
CREATE SCHEMA order_in (tenant STRING, item STRING, amount I64);
CREATE RELAY orders SCHEMA order_in UNBRANCHED;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_in
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO orders
    INHERIT ALL
    UNBRANCHED
    FLUSH EACH 1h MAX BATCH SIZE 64MiB
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT files TYPE FILE CONFIG {'root' = 'out'};
CREATE FILE APPEND EMITTER orders_file
  FROM orders
  TO files PATH 'orders.ndjson' FORMAT NDJSON
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 1s
  FLUSH EACH 1h MAX BATCH SIZE 64MiB
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
";

#[test]
fn sigterm_flushes_buffered_rows_to_their_sink_and_exits_cleanly() {
    let dir = support::scratch_dir("sigterm");
    let mut node = Node::start(&dir);
    define(&mut node.admin(), GRAPH);
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut producer =
            producer(&session, "shop", "orders_in", order_fields(), 8, 1 << 20).await;
        producer
            .submit(&orders(&[("a", "x", 1), ("b", "y", 2)]))
            .await
            .unwrap();
        // Wait until the batch is admitted (it holds a window slot: it then waits in a
        // one-hour FLUSH EACH buffer); a loaded machine may take a while.
        let admitted = "nervix_ingestor_admitted_batches{domain=\"shop\",ingestor=\"orders_in\"}";
        let deadline = Instant::now() + Duration::from_secs(20);
        while metric(&http_get(node.metrics, "/metrics"), admitted) != Some(1) {
            assert!(Instant::now() < deadline, "the batch was never admitted");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let file = dir.join("out/orders.ndjson");
    assert_eq!(std::fs::read_to_string(&file).unwrap_or_default(), "");
    let pid = node.child.id().to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(exit) = node.child.try_wait().expect("wait") {
            break exit;
        }
        assert!(
            Instant::now() < deadline,
            "the node did not stop after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "exit status {exit:?}; log:\n{}", node.log());
    let written = std::fs::read_to_string(&file).expect("the file");
    assert_eq!(written.lines().count(), 2, "{written}");
}

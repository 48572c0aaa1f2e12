//! Console throughput: 10,000 catalog statements through one authenticated console session of
//! an in-process node (Raft over LMDB on a temporary data dir, console on loopback TCP), each
//! answered only after it is committed and applied. Reports statements/s and per-statement
//! latency percentiles.
//!
//! `cargo bench -p nervix-bench --bench console_statements [-- STATEMENTS]`

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nervix::console::{ConsoleConfig, ConsoleServer};
use nervix::control::{ControlNode, ControlStateMachine};

const DEFAULT_STATEMENTS: usize = 10_000;
const PASSWORD: &str = "bench-secret";

fn answer(reader: &mut BufReader<TcpStream>) -> Result<(), String> {
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Err("connection closed".into());
        }
        let line = line.trim_end();
        if line == "OK" {
            return Ok(());
        }
        if let Some(error) = line.strip_prefix("ERROR ") {
            return Err(error.to_string());
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn main() {
    let statements: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(DEFAULT_STATEMENTS);
    let dir = std::env::temp_dir().join(format!("nervix-bench-console-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let (node, server) = runtime.block_on(async {
        // Port 0: the raft listener binds a free port itself.
        let raft_addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let config = nervix_raft::RaftConfig::new(dir.join("raft"), 1, raft_addr);
        let raft = nervix_raft::RaftNode::open(config, ControlStateMachine::default())
            .await
            .expect("catalog opens");
        raft.wait_for_leader(Duration::from_secs(10))
            .await
            .expect("leader");
        let node = Arc::new(ControlNode::new(
            raft,
            dir.join("resources"),
            "node-1".into(),
        ));
        node.bootstrap_admin(PASSWORD).await.expect("admin");
        let addr = "127.0.0.1:0".parse().expect("addr");
        let server = ConsoleServer::start(ConsoleConfig::new(addr), node.clone())
            .await
            .expect("console");
        (node, server)
    });

    let stream = TcpStream::connect(server.local_addr()).expect("connect");
    // A request is one write; without NODELAY a reply can wait on delayed ACKs.
    stream.set_nodelay(true).expect("nodelay");
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    let mut greeting = String::new();
    reader.read_line(&mut greeting).expect("greeting");
    let mut send = |text: &str| -> Result<(), String> {
        writer
            .write_all(text.as_bytes())
            .map_err(|e| e.to_string())?;
        writer.write_all(b"\n").map_err(|e| e.to_string())?;
        answer(&mut reader)
    };
    send(&format!("\\auth admin {PASSWORD}")).expect("auth");
    send("CREATE DOMAIN bench;").expect("domain");
    send("USE bench;").expect("use");

    let mut latencies = Vec::with_capacity(statements);
    let started = Instant::now();
    for i in 0..statements {
        let text = format!(
            "CREATE SCHEMA s{i} (region STRING, order_id STRING, amount I64, card STRING SENSITIVE, note STRING OPTIONAL);"
        );
        let sent = Instant::now();
        send(&text).expect("statement accepted");
        latencies.push(sent.elapsed());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    println!("console_statements: {statements} CREATE SCHEMA statements through one session");
    println!(
        "  {:.0} statements/s over {:.2} s",
        statements as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    println!(
        "  latency p50 {:?}  p99 {:?}  max {:?}",
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.99),
        latencies[latencies.len() - 1]
    );
    runtime.block_on(server.shutdown());
    drop(node);
    let _ = std::fs::remove_dir_all(&dir);
}

//! Observability of the data plane: `/metrics` (Prometheus text), `/livez` and `/readyz`
//! (DESIGN §8 "Observability"), served on the control core.
//!
//! Names follow the spec (`nervix_branch_instances`, `nervix_branch_evictions_total{reason}`,
//! `nervix_relay_buffer_len`) plus the node's own counters. No label ever carries a branch key
//! (unbounded cardinality). The listener reads one request head (at most
//! [`MAX_REQUEST_HEAD_BYTES`]) and answers with `Connection: close`.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::shard::SnapshotCounters;
use super::{DataPlane, ShardStats};

/// The most bytes of a request head the metrics listener reads.
pub const MAX_REQUEST_HEAD_BYTES: usize = 8 << 10;

/// Starts the listener; returns the bound address.
pub async fn serve(addr: SocketAddr, data_plane: Arc<DataPlane>) -> std::io::Result<SocketAddr> {
    // Weak: the listener must not keep the data plane from its graceful stop.
    let data_plane = Arc::downgrade(&data_plane);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let Some(data_plane) = data_plane.upgrade() else {
                return;
            };
            tokio::spawn(async move {
                let _ = answer(stream, &data_plane).await;
            });
        }
    });
    Ok(local)
}

async fn answer(mut stream: tokio::net::TcpStream, data_plane: &DataPlane) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_HEAD_BYTES {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    let path = text.split_whitespace().nth(1).unwrap_or("/");
    let (status, body) = match path {
        "/livez" => ("200 OK", "ok\n".to_string()),
        "/readyz" => {
            if data_plane.stats().await.is_empty() {
                (
                    "503 Service Unavailable",
                    "shards not answering\n".to_string(),
                )
            } else {
                ("200 OK", "ready\n".to_string())
            }
        }
        "/metrics" => ("200 OK", render(&data_plane.stats().await)),
        _ => ("404 Not Found", "not found\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// One metric of a shard's snapshot counters: name, help, and the counter it reports.
type SnapshotMetric = (&'static str, &'static str, fn(&SnapshotCounters) -> u64);

/// The shards' snapshot counters as metrics.
const SNAPSHOT_METRICS: [SnapshotMetric; 7] = [
    (
        "nervix_snapshot_states_total",
        "Processor branch states (windows, keyspaces, reorder buffers, pending correlations) encoded by snapshots.",
        |c| c.states,
    ),
    (
        "nervix_snapshot_deletions_total",
        "Stored processor branch states deleted by snapshots because the state left (emptied, expired, evicted).",
        |c| c.deletions,
    ),
    (
        "nervix_snapshot_bytes_total",
        "Bytes of the processor states snapshots encoded.",
        |c| c.bytes,
    ),
    (
        "nervix_snapshot_passes_total",
        "Snapshot passes that encoded states (a round of many changed states takes several).",
        |c| c.passes,
    ),
    (
        "nervix_snapshot_encode_microseconds_total",
        "Shard time spent encoding snapshot passes.",
        |c| c.encode_us,
    ),
    (
        "nervix_snapshot_deferred_total",
        "Snapshots put off because the state writer was behind; their states stay dirty for the next one.",
        |c| c.deferred,
    ),
    (
        "nervix_snapshot_failed_total",
        "Snapshots the state writer could not commit; the next pass writes every state again.",
        |c| c.failed,
    ),
];

/// Prometheus text exposition of every shard's figures.
pub fn render(stats: &[ShardStats]) -> String {
    let mut out = String::new();
    let mut counter = |name: &str, help: &str, kind: &str, samples: Vec<(String, u64)>| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            if labels.is_empty() {
                let _ = writeln!(out, "{name} {value}");
            } else {
                let _ = writeln!(out, "{name}{{{labels}}} {value}");
            }
        }
    };
    let per_shard = |f: &dyn Fn(&ShardStats) -> u64| -> Vec<(String, u64)> {
        stats
            .iter()
            .map(|s| (format!("shard=\"{}\"", s.shard), f(s)))
            .collect()
    };
    counter(
        "nervix_batches_total",
        "Client batches answered, by outcome.",
        "counter",
        stats
            .iter()
            .flat_map(|s| {
                let c = s.counters;
                [
                    ("completed", c.batches_completed),
                    ("rejected", c.batches_rejected),
                    ("failed", c.batches_failed),
                    ("invalid", c.batches_invalid),
                    ("busy_or_suspended", c.batches_busy),
                ]
                .into_iter()
                .map(move |(o, v)| (format!("shard=\"{}\",outcome=\"{o}\"", s.shard), v))
            })
            .collect(),
    );
    counter(
        "nervix_messages_total",
        "Rows admitted by client ingestors.",
        "counter",
        per_shard(&|s| s.counters.rows_admitted),
    );
    counter(
        "nervix_bytes_total",
        "Bytes of client batches admitted.",
        "counter",
        per_shard(&|s| s.counters.bytes_admitted),
    );
    counter(
        "nervix_delivered_rows_total",
        "Rows confirmed by sinks (consumer acks, fsynced file appends).",
        "counter",
        per_shard(&|s| s.counters.rows_delivered),
    );
    counter(
        "nervix_file_write_failures_total",
        "File appends that failed and were retried on the emitter's RETRY POLICY.",
        "counter",
        per_shard(&|s| s.counters.file_write_failures),
    );
    counter(
        "nervix_ack_roots_open",
        "Payloads awaiting their acknowledgement.",
        "gauge",
        per_shard(&|s| s.open_roots as u64),
    );
    for (name, help, field) in SNAPSHOT_METRICS {
        counter(
            name,
            help,
            "counter",
            per_shard(&|s| field(&s.counters.snapshot)),
        );
    }
    counter(
        "nervix_shard_stalls_total",
        "Task queues that ran past their budget without yielding.",
        "counter",
        per_shard(&|s| s.stalls),
    );
    counter(
        "nervix_shard_watchdog_wakes_total",
        "Times a shard missed its heartbeat and the wake watchdog signalled it (parked past its timers, or busy without yielding).",
        "counter",
        per_shard(&|s| s.watchdog_wakes),
    );
    counter(
        "nervix_process_resident_bytes",
        "Resident memory of the node process (from /proc/self/statm).",
        "gauge",
        vec![(String::new(), resident_bytes())],
    );
    let mut relay_len = Vec::new();
    let mut branch_instances = Vec::new();
    let mut evictions = Vec::new();
    let mut node_rows = Vec::new();
    let mut node_errors = Vec::new();
    let mut ingestor_producers = Vec::new();
    let mut ingestor_admitted = Vec::new();
    let mut payloads = Vec::new();
    let mut decode_failures = Vec::new();
    let mut quiesce_dropped = Vec::new();
    let mut buffered_bytes = Vec::new();
    let mut kafka_counts: [Vec<(String, u64)>; 5] = Default::default();
    let mut kafka_pending = Vec::new();
    let mut dedup_keys = Vec::new();
    for shard in stats {
        for domain in &shard.domains {
            let d = &domain.domain;
            for (relay, len, _) in &domain.relays {
                relay_len.push((format!("domain=\"{d}\",relay=\"{relay}\""), *len as u64));
            }
            for (branch, live, ttl, lru, explicit) in &domain.branches {
                let base = format!(
                    "domain=\"{d}\",branch=\"{branch}\",shard=\"{}\"",
                    shard.shard
                );
                branch_instances.push((base.clone(), *live as u64));
                for (reason, value) in [("ttl", ttl), ("lru", lru), ("explicit", explicit)] {
                    evictions.push((format!("{base},reason=\"{reason}\""), *value));
                }
            }
            for (node, kept, held) in &domain.dedup_keys {
                let base = format!("domain=\"{d}\",node=\"{node}\",shard=\"{}\"", shard.shard);
                dedup_keys.push((format!("{base},state=\"kept\""), *kept));
                dedup_keys.push((format!("{base},state=\"held\""), *held));
            }
            for node in &domain.nodes {
                let base = format!(
                    "domain=\"{d}\",kind=\"{}\",node=\"{}\"",
                    node.kind, node.name
                );
                node_rows.push((format!("{base},direction=\"in\""), node.rows_in));
                node_rows.push((format!("{base},direction=\"out\""), node.rows_out));
                node_errors.push((base, node.message_errors));
            }
            for ingestor in &domain.ingestors {
                let base = format!("domain=\"{d}\",ingestor=\"{}\"", ingestor.name);
                ingestor_producers.push((base.clone(), ingestor.producers as u64));
                ingestor_admitted.push((base.clone(), ingestor.admitted_batches as u64));
                if let Some(intake) = &ingestor.intake {
                    let at = format!("{base},shard=\"{}\"", shard.shard);
                    for (outcome, value) in [
                        ("accepted", intake.payloads_accepted),
                        ("rejected", intake.payloads_rejected),
                        ("retained", intake.payloads_retained),
                    ] {
                        payloads.push((format!("{at},outcome=\"{outcome}\""), value));
                    }
                    decode_failures.push((at.clone(), intake.decode_failures));
                    quiesce_dropped.push((at.clone(), intake.payloads_dropped));
                    buffered_bytes.push((at, ingestor.retained.1));
                }
                for (instance, counters, pending) in &ingestor.kafka {
                    let at = format!("{base},instance=\"{instance}\"");
                    let values = [
                        counters.records,
                        counters.decode_failures,
                        counters.rejections,
                        counters.commits,
                        counters.seeks,
                    ];
                    for (series, value) in kafka_counts.iter_mut().zip(values) {
                        series.push((at.clone(), value));
                    }
                    kafka_pending.push((at, *pending as u64));
                }
            }
        }
    }
    counter(
        "nervix_relay_buffer_len",
        "Frames held by a relay's owner buffer.",
        "gauge",
        relay_len,
    );
    counter(
        "nervix_branch_instances",
        "Live concrete branches per domain, branch declaration and shard.",
        "gauge",
        branch_instances,
    );
    counter(
        "nervix_branch_evictions_total",
        "Branches released, by reason.",
        "counter",
        evictions,
    );
    counter(
        "nervix_dedup_keys",
        "Live deduplication keys: kept (snapshots carry them) or held until the payload of their first row resolves.",
        "gauge",
        dedup_keys,
    );
    counter(
        "nervix_node_rows_total",
        "Rows into and out of each node.",
        "counter",
        node_rows,
    );
    counter(
        "nervix_node_message_errors_total",
        "Rows that failed a node's filters or routes.",
        "counter",
        node_errors,
    );
    counter(
        "nervix_ingestor_producers",
        "Producers attached to a client ingestor.",
        "gauge",
        ingestor_producers,
    );
    counter(
        "nervix_ingestor_admitted_batches",
        "Batches holding a slot of a client ingestor's ACK window.",
        "gauge",
        ingestor_admitted,
    );
    counter(
        "nervix_ingestor_payloads_total",
        "Payloads (HTTP bodies, WebSocket messages, polled bodies) by outcome.",
        "counter",
        payloads,
    );
    counter(
        "nervix_ingestor_decode_failures_total",
        "Payloads the ingestor's codec refused (accepted, reported, not delivered).",
        "counter",
        decode_failures,
    );
    counter(
        "nervix_ingestor_quiesce_dropped_total",
        "Retained payloads a BUFFER … ON OVERFLOW policy dropped.",
        "counter",
        quiesce_dropped,
    );
    counter(
        "nervix_ingestor_buffered_bytes",
        "Bytes a quiesce BUFFER holds.",
        "gauge",
        buffered_bytes,
    );
    let [records, failures, rejections, commits, seeks] = kafka_counts;
    for (name, help, series) in [
        (
            "nervix_kafka_records_total",
            "Kafka records a consumer instance took.",
            records,
        ),
        (
            "nervix_kafka_decode_failures_total",
            "Kafka records the ingestor's codec refused (acknowledged, reported).",
            failures,
        ),
        (
            "nervix_kafka_rejections_total",
            "Kafka records rejected downstream or past ACK TIMEOUT (read again after a seek).",
            rejections,
        ),
        (
            "nervix_kafka_commits_total",
            "Positions committed (to the group, or to runtime state under OFFSET BY DOMAIN).",
            commits,
        ),
        (
            "nervix_kafka_seeks_total",
            "Seeks back to rejected records.",
            seeks,
        ),
    ] {
        counter(name, help, "counter", series);
    }
    counter(
        "nervix_kafka_pending_records",
        "Kafka records awaiting their downstream acknowledgement.",
        "gauge",
        kafka_pending,
    );
    out
}

/// Resident set size of this process, in bytes (0 where /proc is unavailable).
pub fn resident_bytes() -> u64 {
    // statm: size resident shared text lib data dt, in pages.
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|text| text.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    pages * PAGE_BYTES
}

/// The page size statm counts in (4 KiB on every Linux target Nervix runs on).
const PAGE_BYTES: u64 = 4096;

//! `http-filter-map` (DESIGN §10): an [`EmbeddedNode`] with its HTTP listener on loopback runs
//! the bench graph behind an HTTP ENDPOINT ingestor (WIRE JSON codec) — junction `contains`
//! filter + `upper` map → CLIENT CONSUMER. Keep-alive connections POST pre-generated bodies of
//! [`RECORDS_PER_REQUEST`] JSON records of [`RECORD_BYTES`] bytes each (a JSON array); an
//! in-process consumer counts and acknowledges what comes out (the blackhole).
//!
//! Throughput is records in accepted (202) requests per second of the run; latency is per
//! request, from the first byte written to the complete response, after a warm-up. The check
//! is count parity: rows out equal the matching records of accepted requests.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use hdrhistogram::Histogram;
use nervix::embedded::{scratch_data_dir, EmbeddedConfig, EmbeddedNode};
use nervix::runtime::http::DataListeners;
use nervix::runtime::in_process::InProcessConsumer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::gen::{XorShift, NEEDLE, SEED, TENANTS};
use crate::report::{peak_rss_bytes, RunResult};

pub const SCENARIO: (&str, &str) = (
    "http-filter-map",
    "HTTP keep-alive, 1,000 JSON records of 128 B per request → HTTP ENDPOINT → junction contains-filter + upper-map → in-process consumer",
);

/// Records per request body (DESIGN §10).
pub const RECORDS_PER_REQUEST: usize = 1_000;
/// Bytes per JSON record, separators excluded (DESIGN §10).
pub const RECORD_BYTES: usize = 128;
/// Distinct bodies generated before timing; requests cycle through them.
const RING_BODIES: usize = 16;
/// How long the consumer may take to receive the last matching rows after the last response.
const TAIL_WAIT: Duration = Duration::from_secs(30);
/// After the expected rows arrived, how long to wait for rows that should not come.
const EXTRA_WAIT: Duration = Duration::from_millis(200);
/// How long the first request is retried while the graph deploys.
const DEPLOY_WAIT: Duration = Duration::from_secs(10);
const CONSUMER_CREDIT: u32 = 64;
const DRAIN_MS: u64 = 2_000;
/// Latency is recorded after this warm-up (at most a quarter of the run).
const LATENCY_WARMUP: Duration = Duration::from_secs(1);
/// The largest response head the client reads.
const MAX_RESPONSE_HEAD_BYTES: usize = 8 * 1024;

/// A run's settings.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub seconds: f64,
    pub shards: NonZeroUsize,
    /// Keep-alive connections, each with one request outstanding.
    pub connections: usize,
    /// Pace to this many records per second in total (default: full speed).
    pub rate: Option<u64>,
    pub pin: bool,
}

fn graph() -> String {
    crate::scenario::graph_with(
        "CREATE WIRE JSON SCHEMA bench_wire MODE STRICT
  (id integer, sent_ns integer, tenant string, text string);
CREATE CODEC bench_codec FROM WIRE JSON SCHEMA bench_wire TO SCHEMA bench_row;
CREATE VHOST bench_host localhost;
CREATE ENDPOINT rows ON bench_host PATH '/rows' TYPE HTTP;
CREATE HTTP ENDPOINT INGESTOR bench_in
  FROM rows MODE NO ACK ON QUIESCE REJECT RETRY AFTER 1s
  DECODE USING bench_codec",
    )
}

/// One pre-built request: the whole HTTP/1.1 message and the records of it that match.
struct Request {
    bytes: Vec<u8>,
    matching: u64,
}

/// `RING_BODIES` requests of [`RECORDS_PER_REQUEST`] records, from the fixed seed. A record's
/// text is padded with `.` to make the record exactly [`RECORD_BYTES`]; about half contain the
/// needle (spliced into the words, as the producer scenarios do).
fn requests() -> Vec<Request> {
    let mut rng = XorShift::new(SEED);
    let mut next_id: u64 = 0;
    let words = [
        "alpha", "stream", "order", "queue", "delta", "packet", "signal", "ledger",
    ];
    (0..RING_BODIES)
        .map(|_| {
            let mut body = Vec::with_capacity(RECORDS_PER_REQUEST * (RECORD_BYTES + 2));
            let mut matching = 0;
            body.push(b'[');
            for record in 0..RECORDS_PER_REQUEST {
                if record > 0 {
                    body.push(b',');
                }
                let tenant = TENANTS[rng.below(TENANTS.len() as u64) as usize];
                let prefix =
                    format!(r#"{{"id":{next_id},"sent_ns":0,"tenant":"{tenant}","text":""#);
                next_id += 1;
                let text_len = RECORD_BYTES - prefix.len() - 2;
                let mut text = String::with_capacity(text_len);
                while text.len() < text_len.min(40) {
                    text.push_str(words[rng.below(words.len() as u64) as usize]);
                    text.push(' ');
                }
                text.truncate(text_len.min(40));
                if rng.next_u64() & 1 == 0 {
                    text.replace_range(0..NEEDLE.len(), NEEDLE);
                    matching += 1;
                }
                while text.len() < text_len {
                    text.push('.');
                }
                body.extend_from_slice(prefix.as_bytes());
                body.extend_from_slice(text.as_bytes());
                body.extend_from_slice(b"\"}");
            }
            body.push(b']');
            let mut bytes = format!(
                "POST /rows HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            bytes.extend_from_slice(&body);
            Request { bytes, matching }
        })
        .collect()
}

/// What the clients counted.
#[derive(Default)]
struct Sent {
    records_in: u64,
    matching: u64,
    accepted: u64,
    refused: u64,
    first_refusal: Option<u16>,
}

/// Runs the scenario on the current tokio runtime.
pub async fn run(settings: &HttpSettings) -> anyhow::Result<RunResult> {
    if !(settings.seconds > 0.0 && settings.seconds.is_finite()) {
        bail!("--seconds must be a positive number");
    }
    if settings.connections == 0 {
        bail!("--connections must be at least 1");
    }
    if settings.rate == Some(0) {
        bail!("--rate must be at least 1 record/s");
    }
    let data_dir = scratch_data_dir("bench-http");
    let outcome = run_in(settings, &data_dir).await;
    let _ = std::fs::remove_dir_all(&data_dir);
    outcome
}

async fn run_in(settings: &HttpSettings, data_dir: &std::path::Path) -> anyhow::Result<RunResult> {
    let mut node = EmbeddedNode::start(EmbeddedConfig {
        pin: settings.pin,
        listeners: DataListeners {
            http_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            https_addr: None,
            max_body_bytes: 4 << 20,
        },
        ..EmbeddedConfig::loopback(data_dir.to_path_buf(), settings.shards)
    })
    .await
    .with_context(|| format!("cannot start an embedded node in {}", data_dir.display()))?;
    let measured = match node.run(&graph()).await {
        Ok(_) => drive(settings, &node).await,
        Err(refusal) => Err(anyhow!("the bench graph was refused: {refusal}")),
    };
    node.shutdown(DRAIN_MS).await;
    let (sent, rows_out, deliveries, histogram, elapsed) = measured?;
    if let Some(status) = sent.first_refusal {
        eprintln!(
            "{} requests were not accepted; first status {status}",
            sent.refused
        );
    }
    let elapsed_s = elapsed.as_secs_f64();
    Ok(RunResult {
        scenario: SCENARIO.0.to_string(),
        shards: settings.shards.get(),
        seconds: settings.seconds,
        elapsed_s,
        batch_rows: RECORDS_PER_REQUEST,
        rate: settings.rate,
        window: settings.connections as u32,
        client_threads: 1,
        shard_spin_us: nervix::runtime::applied_spin_before_park_us(settings.pin, nervix::runtime::DEFAULT_SPIN_BEFORE_PARK_US),
        rows_in: sent.records_in,
        rows_out,
        matching: sent.matching,
        batches_completed: sent.accepted,
        batches_not_completed: sent.refused,
        deliveries,
        rows_per_sec: if elapsed_s > 0.0 {
            sent.records_in as f64 / elapsed_s
        } else {
            0.0
        },
        p50_us: histogram.value_at_quantile(0.50) as f64 / 1000.0,
        p99_us: histogram.value_at_quantile(0.99) as f64 / 1000.0,
        max_us: histogram.max() as f64 / 1000.0,
        latency_method: "per request after a warm-up of min(1 s, a quarter of the run): first byte written → complete response",
        tail: None,
        rss_bytes: peak_rss_bytes(),
    })
}

type Measured = (Sent, u64, u64, Histogram<u64>, Duration);

async fn drive(settings: &HttpSettings, node: &EmbeddedNode) -> anyhow::Result<Measured> {
    let addr = node
        .data_plane
        .listeners()
        .http_addr
        .ok_or_else(|| anyhow!("the node has no HTTP listener"))?;
    let requests = Arc::new(requests());
    wait_for_route(addr).await?;
    let mut consumer = open_consumer(node).await?;
    let duration = Duration::from_secs_f64(settings.seconds);
    let start = Instant::now();
    let measure_from = start + LATENCY_WARMUP.min(duration / 4);
    // Each connection's share of the rate, as the interval between its requests.
    let interval = settings.rate.map(|rate| {
        Duration::from_secs_f64(
            RECORDS_PER_REQUEST as f64 * settings.connections as f64 / rate as f64,
        )
    });
    let mut clients = tokio::task::JoinSet::new();
    for connection in 0..settings.connections {
        let requests = requests.clone();
        clients.spawn(async move {
            client(
                addr,
                &requests,
                connection,
                start + duration,
                measure_from,
                interval,
            )
            .await
        });
    }
    let counting = async {
        let mut sent = Sent::default();
        let mut histogram = histogram()?;
        while let Some(joined) = clients.join_next().await {
            let (client_sent, client_histogram) = joined.context("a client task failed")??;
            sent.records_in += client_sent.records_in;
            sent.matching += client_sent.matching;
            sent.accepted += client_sent.accepted;
            sent.refused += client_sent.refused;
            sent.first_refusal = sent.first_refusal.or(client_sent.first_refusal);
            histogram
                .add(&client_histogram)
                .map_err(|e| anyhow!("histogram: {e}"))?;
        }
        anyhow::Ok((sent, histogram, start.elapsed()))
    };
    let target = std::cell::Cell::new(None::<(u64, Instant)>);
    let consuming = async {
        let mut rows_out = 0u64;
        let mut deliveries = 0u64;
        let mut reached: Option<Instant> = None;
        loop {
            if let Some((goal, deadline)) = target.get() {
                let now = Instant::now();
                if rows_out >= goal {
                    if now >= *reached.get_or_insert(now) + EXTRA_WAIT {
                        break;
                    }
                } else if now >= deadline {
                    break;
                }
            }
            match tokio::time::timeout(Duration::from_millis(50), consumer.next()).await {
                Err(_) => continue,
                Ok(None) => break,
                Ok(Some((seq, batch))) => {
                    rows_out += batch.num_rows() as u64;
                    deliveries += 1;
                    consumer.ack(seq).await.context("in-process consumer ack")?;
                }
            }
        }
        anyhow::Ok((rows_out, deliveries))
    };
    let counted = async {
        let counted = counting.await;
        match &counted {
            Ok((sent, _, _)) => target.set(Some((sent.matching, Instant::now() + TAIL_WAIT))),
            Err(_) => target.set(Some((0, Instant::now()))),
        }
        counted
    };
    let (counted, consumed) = tokio::join!(counted, consuming);
    let (sent, histogram, elapsed) = counted?;
    let (rows_out, deliveries) = consumed?;
    consumer.close().await;
    Ok((sent, rows_out, deliveries, histogram, elapsed))
}

fn histogram() -> anyhow::Result<Histogram<u64>> {
    Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|e| anyhow!("cannot create the latency histogram: {e}"))
}

/// Posts an empty array until the route answers something other than 404.
async fn wait_for_route(addr: SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + DEPLOY_WAIT;
    let probe = b"POST /rows HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n[]";
    loop {
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .with_context(|| format!("cannot connect to {addr}"))?;
        let mut buffer = Vec::new();
        stream.write_all(probe).await?;
        let status = read_response(&mut stream, &mut buffer).await?;
        if status != 404 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the HTTP endpoint did not come up within {DEPLOY_WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn open_consumer(node: &EmbeddedNode) -> anyhow::Result<InProcessConsumer> {
    let deadline = Instant::now() + DEPLOY_WAIT;
    loop {
        match InProcessConsumer::open(
            node.data_plane.clone(),
            "bench",
            "bench_out",
            CONSUMER_CREDIT,
        )
        .await
        {
            Ok(consumer) => return Ok(consumer),
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(error) => bail!("cannot open the consumer: {error:?}"),
        }
    }
}

/// One keep-alive connection: a request at a time until `until`.
async fn client(
    addr: SocketAddr,
    requests: &[Request],
    connection: usize,
    until: Instant,
    measure_from: Instant,
    interval: Option<Duration>,
) -> anyhow::Result<(Sent, Histogram<u64>)> {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("cannot connect to {addr}"))?;
    stream.set_nodelay(true)?;
    let mut sent = Sent::default();
    let mut histogram = histogram()?;
    let mut buffer = Vec::with_capacity(MAX_RESPONSE_HEAD_BYTES);
    let mut index = connection;
    let begin = tokio::time::Instant::now();
    let mut issued: u32 = 0;
    while Instant::now() < until {
        if let Some(interval) = interval {
            tokio::time::sleep_until(begin + interval * issued).await;
        }
        issued += 1;
        let request = &requests[index % requests.len()];
        index += 1;
        let started = Instant::now();
        stream.write_all(&request.bytes).await?;
        let status = read_response(&mut stream, &mut buffer).await?;
        if started >= measure_from {
            histogram.record(started.elapsed().as_nanos().max(1) as u64)?;
        }
        if status == 202 {
            sent.accepted += 1;
            sent.records_in += RECORDS_PER_REQUEST as u64;
            sent.matching += request.matching;
        } else {
            sent.refused += 1;
            sent.first_refusal.get_or_insert(status);
        }
    }
    Ok((sent, histogram))
}

/// Reads one response (head and Content-Length body); returns its status.
async fn read_response(
    stream: &mut tokio::net::TcpStream,
    buffer: &mut Vec<u8>,
) -> anyhow::Result<u16> {
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buffer[..end]).context("a non-UTF-8 response head")?;
            let status: u16 = head
                .split(' ')
                .nth(1)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| anyhow!("a malformed status line: {head:?}"))?;
            let length: usize = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0);
            let total = end + 4 + length;
            while buffer.len() < total {
                read_more(stream, buffer).await?;
            }
            buffer.drain(..total);
            return Ok(status);
        }
        if buffer.len() > MAX_RESPONSE_HEAD_BYTES {
            bail!("a response head over {MAX_RESPONSE_HEAD_BYTES} bytes");
        }
        read_more(stream, buffer).await?;
    }
}

async fn read_more(stream: &mut tokio::net::TcpStream, buffer: &mut Vec<u8>) -> anyhow::Result<()> {
    let mut chunk = [0u8; 4096];
    let read = stream.read(&mut chunk).await?;
    if read == 0 {
        bail!("the server closed the connection");
    }
    buffer.extend_from_slice(&chunk[..read]);
    Ok(())
}

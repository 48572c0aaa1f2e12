//! `nervix demo [--seconds S]`: the README's main job in one command. An embedded node in a new
//! data directory (kept, and printed) runs `examples/demo.nspl`; synthetic orders flow in over
//! the session protocol (the Rust client library on loopback); once a second a line of live
//! figures and a few `watch` subscription lines are printed, until the time is up or Ctrl-C.
//! Then the node stops gracefully and the command says where the large orders were written.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use clap::Args;
use nervix::embedded::{scratch_data_dir, EmbeddedConfig, EmbeddedNode};
use nervix_net::client::{ClientError, Producer, ProducerOptions, Session};
use nervix_net::session::frame::{ExpectedField, OpenRefusal, Outcome};

use super::Status;

/// The demo graph (the repository's `examples/demo.nspl`).
const DEMO_NSPL: &str = include_str!("../../../examples/demo.nspl");
/// Orders per submitted batch, and the pause between batches: at most ~2 M orders/s offered;
/// the graph (its ACK window and the file emitter's 1 s flush) sets the pace below that.
const BATCH_ROWS: usize = 4_096;
const BATCH_EVERY: Duration = Duration::from_millis(2);
/// The producer's credit in batches.
const CREDIT_BATCHES: u32 = 64;
/// Subscription lines printed per second at most (the rest are counted).
const WATCH_LINES_PER_TICK: usize = 2;
/// How long a graceful stop may wait for the file emitter to confirm.
const DRAIN_MS: u64 = 10_000;
const TENANTS: [&str; 5] = ["acme", "globex", "initech", "umbrella", "hooli"];
const NOTES: [&str; 4] = ["gift wrap", "express", "call first", "fragile"];

#[derive(Args)]
pub struct DemoArguments {
    /// How long to run, in seconds (Ctrl-C stops earlier).
    #[arg(long, default_value_t = 20)]
    seconds: u64,
}

/// `nervix demo`.
pub fn run(arguments: &DemoArguments) -> anyhow::Result<Status> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the control runtime")?;
    runtime.block_on(demo(arguments.seconds))?;
    Ok(Status::Success)
}

async fn demo(seconds: u64) -> anyhow::Result<()> {
    let data_dir = scratch_data_dir("demo");
    println!("data directory: {}", data_dir.display());
    let mut node = EmbeddedNode::start(EmbeddedConfig::loopback(
        data_dir.clone(),
        std::num::NonZeroUsize::MIN,
    ))
    .await
    .with_context(|| format!("cannot start the demo node in {}", data_dir.display()))?;
    if let Err(refusal) = node.run(DEMO_NSPL).await {
        node.shutdown(DRAIN_MS).await;
        bail!("examples/demo.nspl was refused at {refusal}");
    }
    println!("graph: examples/demo.nspl is running (domain demo)");
    let output = data_dir.join("demo-output").join("large_orders.ndjson");
    let driven = drive(&mut node, seconds, &output).await;
    println!("stopping: draining the file emitter …");
    node.shutdown(DRAIN_MS).await;
    let totals = driven?;
    let lines = LineCounter::default().count(&output);
    let output = std::fs::canonicalize(&output).unwrap_or(output);
    println!(
        "submitted {} orders in {} batches ({} completed)",
        totals.rows, totals.batches, totals.completed
    );
    println!(
        "large orders (amount ≥ 1000): {} ({} lines)",
        output.display(),
        lines
    );
    println!("data directory (kept): {}", data_dir.display());
    Ok(())
}

#[derive(Debug, Default)]
struct Totals {
    rows: u64,
    batches: u64,
    completed: u64,
}

async fn drive(node: &mut EmbeddedNode, seconds: u64, output: &Path) -> anyhow::Result<Totals> {
    let addr = node.data_plane.session_addr();
    let session = Session::connect(addr)
        .await
        .with_context(|| format!("cannot connect to the session port {addr}"))?;
    let mut producer = open_producer(&session).await?;
    let mut totals = Totals::default();
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let schema = order_schema();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    let mut ticker = tokio::time::interval(BATCH_EVERY);
    let mut next_report = start + Duration::from_secs(1);
    let mut rows_this_second = 0u64;
    let mut lines = LineCounter::default();
    let mut order_id = 0u64;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    println!(
        "producing up to {} orders/s (a credit of {CREDIT_BATCHES} batches: the graph's backpressure sets the pace); Ctrl-C stops",
        BATCH_ROWS as u64 * 1000 / BATCH_EVERY.as_millis() as u64
    );
    while Instant::now() < deadline {
        tokio::select! {
            _ = &mut ctrl_c => {
                println!("Ctrl-C");
                break;
            }
            _ = ticker.tick() => {}
        }
        // Outcomes already here are read at once; with the credit used up, the producer
        // waits for the next one (the graph's backpressure sets the pace).
        loop {
            let full = producer.unresolved_batches() >= CREDIT_BATCHES as usize;
            let outcome = if full {
                producer.next_outcome().await
            } else {
                match tokio::time::timeout(Duration::ZERO, producer.next_outcome()).await {
                    Ok(outcome) => outcome,
                    Err(_) => break,
                }
            };
            match outcome.context("producer outcome")? {
                Some((_, Outcome::Completed)) => totals.completed += 1,
                Some((seq, other)) => eprintln!("batch {seq}: {other:?}"),
                None => break,
            }
        }
        let batch = orders(&schema, &mut rng, &mut order_id)?;
        producer.submit(&batch).await.context("producer submit")?;
        totals.rows += BATCH_ROWS as u64;
        totals.batches += 1;
        rows_this_second += BATCH_ROWS as u64;
        if Instant::now() >= next_report {
            next_report += Duration::from_secs(1);
            let written = lines.count(output);
            println!(
                "t={:>3}s  submitted {:>6} orders/s  batches completed {:>6}  large orders written {:>8}",
                start.elapsed().as_secs(),
                rows_this_second,
                totals.completed,
                written
            );
            rows_this_second = 0;
            let mut shown = 0;
            let mut more = 0;
            while let Ok(line) = node.subscription_lines().try_recv() {
                if shown < WATCH_LINES_PER_TICK {
                    println!("    {line}");
                    shown += 1;
                } else {
                    more += 1;
                }
            }
            if more > 0 {
                println!("    … and {more} more watch lines");
            }
        }
    }
    let drained = tokio::time::timeout(Duration::from_secs(10), producer.drain()).await;
    match drained {
        Ok(Ok(outcomes)) => {
            for (seq, outcome) in outcomes {
                if outcome == Outcome::Completed {
                    totals.completed += 1;
                } else {
                    eprintln!("batch {seq}: {outcome:?}");
                }
            }
        }
        Ok(Err(error)) => eprintln!("producer drain: {error}"),
        Err(_) => eprintln!("producer drain: outcomes still missing after 10 s"),
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), producer.close()).await;
    drop(session);
    Ok(totals)
}

async fn open_producer(session: &Session) -> anyhow::Result<Producer> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let opened = session
            .open_producer(ProducerOptions {
                domain: "demo".into(),
                ingestor: "orders_in".into(),
                expected_fields: order_fields(),
                credit_batches: CREDIT_BATCHES,
                credit_bytes: 16 << 20,
            })
            .await;
        match opened {
            Ok(producer) => return Ok(producer),
            Err(ClientError::Refused(
                OpenRefusal::DomainStopped
                | OpenRefusal::DomainNotFound
                | OpenRefusal::IngestorNotFound
                | OpenRefusal::IngestorNotRunning,
            )) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => return Err(anyhow!("cannot open the orders_in producer: {error}")),
        }
    }
}

fn order_fields() -> Vec<ExpectedField> {
    [
        ("tenant", "STRING", false, false),
        ("order_id", "STRING", false, false),
        ("amount", "I64", false, false),
        ("card", "STRING", false, true),
        ("note", "STRING", true, false),
    ]
    .iter()
    .map(|(name, ty, optional, sensitive)| ExpectedField {
        name: (*name).to_string(),
        type_text: (*ty).to_string(),
        optional: *optional,
        sensitive: *sensitive,
    })
    .collect()
}

fn order_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("tenant", DataType::Utf8, false),
        Field::new("order_id", DataType::Utf8, false),
        Field::new("amount", DataType::Int64, false),
        Field::new("card", DataType::Utf8, false),
        Field::new("note", DataType::Utf8, true),
    ]))
}

/// A batch of synthetic orders: most below 1000, about a quarter 1000–5000, a few above 5000.
fn orders(
    schema: &SchemaRef,
    rng: &mut XorShift,
    order_id: &mut u64,
) -> anyhow::Result<RecordBatch> {
    let mut tenants = Vec::with_capacity(BATCH_ROWS);
    let mut ids = Vec::with_capacity(BATCH_ROWS);
    let mut amounts = Vec::with_capacity(BATCH_ROWS);
    let mut cards = Vec::with_capacity(BATCH_ROWS);
    let mut notes = Vec::with_capacity(BATCH_ROWS);
    for _ in 0..BATCH_ROWS {
        *order_id += 1;
        tenants.push(TENANTS[rng.below(TENANTS.len() as u64) as usize]);
        ids.push(format!("ord-{:08}", *order_id));
        let band = rng.below(100);
        amounts.push(match band {
            0..=69 => 10 + rng.below(990),
            70..=94 => 1_000 + rng.below(4_000),
            _ => 5_001 + rng.below(15_000),
        } as i64);
        cards.push(format!(
            "4{:03}-{:04}-{:04}-{:04}",
            rng.below(1000),
            rng.below(10_000),
            rng.below(10_000),
            rng.below(10_000)
        ));
        notes.push(if rng.below(3) == 0 {
            Some(NOTES[rng.below(NOTES.len() as u64) as usize])
        } else {
            None
        });
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(tenants)),
        Arc::new(StringArray::from(ids)),
        Arc::new(Int64Array::from(amounts)),
        Arc::new(StringArray::from(cards)),
        Arc::new(StringArray::from(notes)),
    ];
    RecordBatch::try_new(schema.clone(), columns).context("cannot build an orders batch")
}

/// Counts newline bytes of a growing file, reading only what was appended since last time.
#[derive(Debug, Default)]
struct LineCounter {
    offset: u64,
    lines: u64,
}

impl LineCounter {
    fn count(&mut self, path: &Path) -> u64 {
        let Ok(mut file) = std::fs::File::open(path) else {
            return self.lines;
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return self.lines;
        }
        let mut buffer = vec![0u8; 64 << 10];
        loop {
            match file.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    self.offset += n as u64;
                    self.lines += buffer[..n].iter().filter(|&&b| b == b'\n').count() as u64;
                }
            }
        }
        self.lines
    }
}

/// Marsaglia's xorshift64 for the synthetic orders.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, bound: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        if bound == 0 {
            0
        } else {
            x % bound
        }
    }
}

//! `nervix-bench`: runs one end-to-end scenario and prints a table (and with `--json`, one JSON
//! object as the last line of stdout), compares two results, or lists the scenarios.
//!
//! Exit codes: 0 success, 1 a scenario failed its check (rows out ≠ matching rows in; for
//! Nexmark q0–q2, ≠ the reference's output rows for the completed batches; for q5, q7 and q8,
//! ≠ the reference's rows for all events, or a batch did not complete) or could
//! not run, or `compare --fail-below` found a slower run; 2 bad usage.

use std::num::NonZeroUsize;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use nervix_bench::compare;
use nervix_bench::cpu::Steal;
use nervix_bench::scenario::{self, RunSettings, Transport};

/// The node's allocator (DESIGN §13), so the scenarios measure what `nervix` runs.
#[global_allocator]
static GLOBAL: nervix::allocator::DataPlaneAllocator = nervix::allocator::DataPlaneAllocator;

#[derive(Parser)]
#[command(
    name = "nervix-bench",
    version,
    about = "Nervix end-to-end benchmark scenarios (DESIGN §10)"
)]
struct Arguments {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Rust client over loopback → CLIENT PRODUCER → junction filter+map → CLIENT CONSUMER.
    #[command(name = "producer-filter-map")]
    ProducerFilterMap(RunArguments),
    /// The same graph with the in-process producer and consumer.
    #[command(name = "producer-filter-map-inproc")]
    ProducerFilterMapInproc(RunArguments),
    /// HTTP keep-alive JSON bodies → HTTP ENDPOINT → junction filter+map → in-process consumer.
    #[command(name = "http-filter-map")]
    HttpFilterMap(HttpArguments),
    /// A Kafka topic of 128 B JSON records → KAFKA TOPIC INGESTOR filter+map → KAFKA TOPIC
    /// EMITTER → topic, the broker (librdkafka's mock cluster) in a process of its own.
    #[command(name = "kafka-filter-map")]
    KafkaFilterMap(KafkaArguments),
    /// Hosts librdkafka's mock cluster for `kafka-filter-map --broker self` (internal).
    #[command(name = "kafka-broker", hide = true)]
    KafkaBroker(KafkaBrokerArguments),
    /// Nexmark q0 (every bid passed through): in-process producer of generated bids → the
    /// port in bench/nexmark/q0.nspl → in-process consumer; events/s on one shard.
    #[command(name = "nexmark-q0")]
    NexmarkQ0(NexmarkArguments),
    /// Nexmark q1 (every bid's price in euros), as nexmark-q0 runs it.
    #[command(name = "nexmark-q1")]
    NexmarkQ1(NexmarkArguments),
    /// Nexmark q2 (the bids on every 123rd auction: auction, price), as nexmark-q0 runs it.
    #[command(name = "nexmark-q2")]
    NexmarkQ2(NexmarkArguments),
    /// Nexmark q5 (hot items per hopping window): N generated events submitted once in
    /// event-time order → the port in bench/nexmark/q5.nspl → in-process consumer; events/s on
    /// one shard, rows out checked against the reference's count.
    #[command(name = "nexmark-q5")]
    NexmarkQ5(NexmarkOrderedArguments),
    /// Nexmark q7 (highest bids per tumbling window), as nexmark-q5 runs it.
    #[command(name = "nexmark-q7")]
    NexmarkQ7(NexmarkOrderedArguments),
    /// Nexmark q8 (new sellers per tumbling window; persons and auctions), as nexmark-q5 runs it.
    #[command(name = "nexmark-q8")]
    NexmarkQ8(NexmarkOrderedArguments),
    /// Probe the machine: pinned threads that never sleep report every stretch they did not
    /// run (host preemption, steal) — the floor under any latency tail measured here.
    #[command(name = "host-gaps")]
    HostGaps(HostGapsArguments),
    /// Compare a run's JSON with a baseline's (JSON-lines files: the last record per scenario).
    Compare(CompareArguments),
    /// List the scenarios.
    List,
}

#[derive(Args)]
struct RunArguments {
    /// How long the producer submits, in seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Data shards of the embedded node.
    #[arg(long, default_value_t = NonZeroUsize::MIN)]
    shards: NonZeroUsize,
    /// Pace the producer to this many rows per second (default: full speed).
    #[arg(long, value_name = "ROWS_PER_SEC", conflicts_with = "half_load")]
    rate: Option<u64>,
    /// Run twice with the same settings: at full speed, then paced to half the rows/s the
    /// first run reached (the latency-at-half-load measurement; `--json` prints the paced run,
    /// with the full-speed figures as `full_rows_per_sec` and `full_p99_us`).
    #[arg(long)]
    half_load: bool,
    /// Rows per submitted batch.
    #[arg(long, default_value_t = 8192)]
    batch_rows: usize,
    /// Batches without an outcome at most (the producer's credit).
    #[arg(long, default_value_t = 16)]
    window: u32,
    /// Pin the shards to CPUs, and the client (producer, consumer and the node's control
    /// plane) to the CPUs no shard uses, if any.
    #[arg(long)]
    pin: bool,
    /// Microseconds a pinned shard polls before it parks (the node's `--shard-spin-us`;
    /// only with --pin; 0 = off).
    #[arg(long, value_name = "US", default_value_t = nervix::runtime::DEFAULT_SPIN_BEFORE_PARK_US)]
    shard_spin_us: u64,
    /// Client-side tokio threads: 1 is a current-thread runtime (the node's control plane
    /// shares it); more is a multi-thread runtime.
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct HttpArguments {
    /// How long the clients send, in seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Data shards of the embedded node.
    #[arg(long, default_value_t = NonZeroUsize::MIN)]
    shards: NonZeroUsize,
    /// Keep-alive connections, one request outstanding on each.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Pace to this many records per second in total (default: full speed).
    #[arg(long, value_name = "RECORDS_PER_SEC")]
    rate: Option<u64>,
    /// Pin the shards to CPUs.
    #[arg(long)]
    pin: bool,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct KafkaArguments {
    /// Sizes the input: this many seconds at 1.5 M records/s (bounded; a debug build uses at
    /// most 100,000 records). The run lasts as long as the node takes to process it.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Input records, instead of sizing by --seconds (bounded the same way).
    #[arg(long)]
    records: Option<u64>,
    /// Data shards of the embedded node.
    #[arg(long, default_value_t = NonZeroUsize::MIN)]
    shards: NonZeroUsize,
    /// The ingestor's delivery mode: `ack` (ACK PARALLEL MAX 65536 BATCH TIMEOUT 10ms, the
    /// headline) or `noack` (MODE NO ACK).
    #[arg(long, default_value = "ack", value_parser = ["ack", "noack"])]
    mode: String,
    /// Who hosts the broker: `nervix` (`nervix dev kafka`, the binary next to nervix-bench) or
    /// `self` (a nervix-bench child hosting the same mock cluster).
    #[arg(long, default_value = "nervix", value_parser = ["nervix", "self"])]
    broker: String,
    /// Give the node's Kafka clients librdkafka's defaults (plus auto.offset.reset) instead of
    /// the bench's throughput settings.
    #[arg(long)]
    default_client_config: bool,
    /// Pin the shards to CPUs.
    #[arg(long)]
    pin: bool,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct NexmarkArguments {
    /// Bid events generated before timing; the producer cycles through them.
    #[arg(long, default_value_t = 1_000_000)]
    events: usize,
    /// How long the producer submits, in seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Events per submitted batch.
    #[arg(long, default_value_t = 8192)]
    batch_rows: usize,
    /// Batches without an outcome at most (the producer's credit).
    #[arg(long, default_value_t = 16)]
    window: u32,
    /// Pin the shard to a CPU.
    #[arg(long)]
    pin: bool,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct NexmarkOrderedArguments {
    /// Events generated before timing (persons, auctions and bids in the generator's mix; the
    /// port is sent those of the streams it reads), submitted once.
    #[arg(long, default_value_t = 1_000_000)]
    events: usize,
    /// Events per submitted batch.
    #[arg(long, default_value_t = 8192)]
    batch_rows: usize,
    /// Batches without an outcome at most, per stream (each producer's credit): it must cover
    /// the rows windows and correlators hold unacknowledged (see `nexmark/ordered.rs`).
    #[arg(long, default_value_t = 256)]
    window: u32,
    /// Pin the shard to a CPU.
    #[arg(long)]
    pin: bool,
    /// Events per second of event time the generator produces (a steady rate; the crate's
    /// default is 10,000).
    #[arg(long, default_value_t = nervix_bench::nexmark::gen::DEFAULT_EVENTS_PER_S)]
    event_rate: usize,
    /// Submit in real time: a batch waits until as much wall time has passed since the first
    /// submit as event time from the first event to its own last one (events/s is then the
    /// event rate; the figures to read are the shard's CPU share and what snapshots cost).
    #[arg(long)]
    real_time: bool,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct KafkaBrokerArguments {
    /// Partitions of the topics created up front.
    #[arg(long, default_value_t = 16)]
    partitions: i32,
    /// A topic to create up front (repeatable).
    #[arg(long = "topic")]
    topics: Vec<String>,
}

#[derive(Args)]
struct HostGapsArguments {
    /// How long each thread spins, in seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// The CPUs to probe, one spinning thread each (default: 0 to N − 1 for N the available
    /// parallelism, as the node's default shard placement counts them).
    #[arg(long, value_delimiter = ',')]
    cpus: Vec<usize>,
    /// The shortest gap reported, in µs.
    #[arg(long, default_value_t = 250)]
    threshold_us: u64,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CompareArguments {
    /// The baseline: a JSON result or JSON lines (e.g. perf/history.jsonl).
    baseline: std::path::PathBuf,
    /// The run to compare.
    run: std::path::PathBuf,
    /// Exit 1 when a scenario's rows/s is below this fraction of the baseline's.
    #[arg(long, value_name = "RATIO")]
    fail_below: Option<f64>,
}

fn main() -> ExitCode {
    nervix::allocator::tune();
    // Engine warnings (stalls, refusals) go to stderr; NERVIX_LOG overrides the level.
    let filter = tracing_subscriber::EnvFilter::try_from_env("NERVIX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    let arguments = Arguments::parse();
    let outcome = match arguments.command {
        Command::ProducerFilterMap(run) => run_scenario(Transport::Loopback, &run),
        Command::ProducerFilterMapInproc(run) => run_scenario(Transport::InProcess, &run),
        Command::HttpFilterMap(run) => run_http(&run),
        Command::KafkaFilterMap(run) => run_kafka(&run),
        Command::KafkaBroker(args) => {
            nervix_bench::kafka::broker::serve(args.partitions, &args.topics)
                .map(|()| ExitCode::SUCCESS)
        }
        Command::NexmarkQ0(run) => run_nexmark("q0", &run),
        Command::NexmarkQ1(run) => run_nexmark("q1", &run),
        Command::NexmarkQ2(run) => run_nexmark("q2", &run),
        Command::NexmarkQ5(run) => run_nexmark_ordered("q5", &run),
        Command::NexmarkQ7(run) => run_nexmark_ordered("q7", &run),
        Command::NexmarkQ8(run) => run_nexmark_ordered("q8", &run),
        Command::HostGaps(args) => run_host_gaps(&args),
        Command::Compare(args) => run_compare(&args),
        Command::List => {
            for (name, what) in scenario::SCENARIOS
                .into_iter()
                .chain([nervix_bench::http::SCENARIO, nervix_bench::kafka::SCENARIO])
            {
                println!("{name:<28} {what}");
            }
            for (name, what) in nervix_bench::nexmark::run::SCENARIOS
                .into_iter()
                .chain(nervix_bench::nexmark::ordered::SCENARIOS)
            {
                println!("{name:<28} {what}");
            }
            Ok(ExitCode::SUCCESS)
        }
    };
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(1)
        }
    }
}

fn run_scenario(transport: Transport, args: &RunArguments) -> anyhow::Result<ExitCode> {
    // Pinned, the shards get explicit CPUs (so the client's pinning cannot move them) and the
    // client thread, with every thread it starts, the others.
    let mut placement = serde_json::Map::new();
    let mut shard_cpus = None;
    if args.pin {
        let split = nervix_bench::affinity::split(args.shards);
        if !split.client_cpus.is_empty() {
            nervix_bench::affinity::pin_current_thread(&split.client_cpus)?;
        }
        placement.insert("shard_cpus".into(), split.shard_cpus.clone().into());
        placement.insert("client_cpus".into(), split.client_cpus.into());
        shard_cpus = Some(split.shard_cpus);
    }
    let settings = RunSettings {
        seconds: args.seconds,
        shards: args.shards,
        rate: args.rate,
        batch_rows: args.batch_rows,
        window: args.window,
        pin: args.pin,
        shard_cpus,
        shard_spin_us: args.shard_spin_us,
        client_threads: args.client_threads.max(1),
    };
    let runtime = if settings.client_threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(settings.client_threads)
            .enable_all()
            .build()
    }
    .context("cannot start the tokio runtime")?;
    if !args.half_load {
        let (result, steal_ms) =
            with_steal(|| runtime.block_on(scenario::run(transport, &settings)))?;
        drop(runtime);
        return report_with(&result, &[], placement, &steal_ms, args.json);
    }
    let (full, full_steal_ms) =
        with_steal(|| runtime.block_on(scenario::run(transport, &settings)))?;
    println!("full speed:\n{}", full.table());
    if !full.passed() {
        return report(&full, &full_steal_ms, args.json);
    }
    let half_rate = (full.rows_per_sec / 2.0).floor() as u64;
    let paced = RunSettings {
        rate: Some(half_rate.max(1)),
        ..settings
    };
    let (result, steal_ms) = with_steal(|| runtime.block_on(scenario::run(transport, &paced)))?;
    drop(runtime);
    let mut extra = placement;
    extra.insert("full_rows_per_sec".into(), full.rows_per_sec.floor().into());
    extra.insert("full_p99_us".into(), full.p99_us.into());
    extra.insert("full_host_steal_ms".into(), full_steal_ms.into());
    let line = format!(
        "paced to {half_rate} rows/s, half of the full-speed run's {:.0} rows/s",
        full.rows_per_sec.floor()
    );
    println!("half load:");
    report_with(&result, &[line], extra, &steal_ms, args.json)
}

fn run_http(args: &HttpArguments) -> anyhow::Result<ExitCode> {
    let settings = nervix_bench::http::HttpSettings {
        seconds: args.seconds,
        shards: args.shards,
        connections: args.connections,
        rate: args.rate,
        pin: args.pin,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    let (result, steal_ms) = with_steal(|| runtime.block_on(nervix_bench::http::run(&settings)))?;
    drop(runtime);
    report(&result, &steal_ms, args.json)
}

fn run_kafka(args: &KafkaArguments) -> anyhow::Result<ExitCode> {
    use nervix_bench::kafka::{broker::BrokerHost, IngestMode, KafkaSettings};
    let settings = KafkaSettings {
        seconds: args.seconds,
        shards: args.shards,
        records: args.records,
        mode: if args.mode == "noack" {
            IngestMode::NoAck
        } else {
            IngestMode::AckParallel
        },
        broker: if args.broker == "self" {
            BrokerHost::SelfHosted
        } else {
            BrokerHost::Nervix
        },
        pin: args.pin,
        tuned: !args.default_client_config,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    let (run, steal_ms) = with_steal(|| runtime.block_on(nervix_bench::kafka::run(&settings)))?;
    drop(runtime);
    report_with(&run.result, &run.lines, run.extra, &steal_ms, args.json)
}

fn run_nexmark(query: &str, args: &NexmarkArguments) -> anyhow::Result<ExitCode> {
    use nervix_bench::nexmark::{query::Query, run};
    let query = Query::named(query).context("no such Nexmark port")?;
    let settings = run::BenchSettings {
        query,
        events: args.events,
        seconds: args.seconds,
        batch_rows: args.batch_rows,
        window: args.window,
        pin: args.pin,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    let ((result, extra), steal_ms) = with_steal(|| runtime.block_on(run::bench(&settings)))?;
    drop(runtime);
    let line = format!(
        "Nexmark {}: {} bid events generated before timing, replayed; {:.0} events/s on one shard; rows out {} of the reference's {}",
        query.name,
        args.events,
        result.rows_per_sec.floor(),
        result.rows_out,
        result.matching
    );
    report_with(&result, &[line], extra, &steal_ms, args.json)
}

fn run_nexmark_ordered(query: &str, args: &NexmarkOrderedArguments) -> anyhow::Result<ExitCode> {
    use nervix_bench::nexmark::{ordered, query::Query};
    let query = Query::named(query).context("no such Nexmark port")?;
    let settings = ordered::OrderedSettings {
        query,
        events: args.events,
        batch_rows: args.batch_rows,
        window: args.window,
        pin: args.pin,
        events_per_s: args.event_rate,
        real_time: args.real_time,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    let (
        ordered::Ordered {
            result,
            extra,
            diff,
        },
        steal_ms,
    ) = with_steal(|| runtime.block_on(ordered::bench(&settings)))?;
    drop(runtime);
    let line = format!(
        "Nexmark {}: {} events generated before timing, {} of them submitted once in event-time order; \
         {:.0} events/s on one shard (first submit → last output row, {:.3} s); \
         rows out {} of the reference's {}; {} batches not completed",
        query.name,
        args.events,
        result.rows_in,
        result.rows_per_sec.floor(),
        result.elapsed_s,
        result.rows_out,
        result.matching,
        result.batches_not_completed
    );
    let code = report_with(&result, &[line], extra, &steal_ms, args.json)?;
    // A batch that did not complete left its events out of the answer, so a matching count
    // would be a coincidence.
    if result.batches_not_completed > 0 {
        eprintln!(
            "FAILED {}: {} batches did not complete (rows out {}, reference {})",
            result.scenario, result.batches_not_completed, result.rows_out, result.matching
        );
        return Ok(ExitCode::from(1));
    }
    // Equal counts can hide a wrong answer (a row missing, another extra): rows are compared.
    if !diff.is_empty() {
        eprintln!(
            "FAILED {}: {} reference rows missing, {} rows not in the reference (row: the port's output fields in order)",
            result.scenario,
            diff.missing.len(),
            diff.extra.len()
        );
        for line in diff.describe(DIFF_LINES) {
            eprintln!("  {line}");
        }
        return Ok(ExitCode::from(1));
    }
    Ok(code)
}

/// Differing rows a failed Nexmark run prints at most.
const DIFF_LINES: usize = 200;

/// Prints a run's table (and JSON line); exit 1 when rows out differ from matching rows in.
fn report(
    result: &nervix_bench::report::RunResult,
    steal_ms: &[u64],
    json: bool,
) -> anyhow::Result<ExitCode> {
    report_with(result, &[], serde_json::Map::new(), steal_ms, json)
}

/// Runs `run` and returns what it returned with the milliseconds the host stole from each CPU
/// meanwhile (see [`Steal`]).
fn with_steal<T>(run: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<(T, Vec<u64>)> {
    let before = Steal::sample();
    let value = run()?;
    Ok((value, before.ms_until(&Steal::sample())))
}

/// [`report`] with extra lines under the table and extra fields in the JSON object.
fn report_with(
    result: &nervix_bench::report::RunResult,
    lines: &[String],
    mut extra: serde_json::Map<String, serde_json::Value>,
    steal_ms: &[u64],
    json: bool,
) -> anyhow::Result<ExitCode> {
    println!("{}", result.table());
    for line in lines {
        println!("{line}");
    }
    // The latency tail of a virtual machine follows the time its host took from it.
    println!("host steal during the run, ms per CPU: {steal_ms:?}");
    extra.insert("host_steal_ms".into(), steal_ms.into());
    let passed = result.passed();
    if !passed {
        eprintln!(
            "FAILED {}: rows out {} ≠ matching rows in {} (rows in {}, batches completed {}, other outcomes {})",
            result.scenario,
            result.rows_out,
            result.matching,
            result.rows_in,
            result.batches_completed,
            result.batches_not_completed
        );
    }
    println!(
        "latency: {}; max {:.1} µs; {} deliveries; rows out {} of matching {}",
        result.latency_method,
        (result.max_us * 10.0).floor() / 10.0,
        result.deliveries,
        result.rows_out,
        result.matching
    );
    if let Some(tail) = &result.tail {
        println!("{}", tail.line());
    }
    if json {
        let mut object = result.to_json();
        if let Some(fields) = object.as_object_mut() {
            fields.extend(extra);
        }
        println!("{object}");
    }
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn run_host_gaps(args: &HostGapsArguments) -> anyhow::Result<ExitCode> {
    let cpus = if args.cpus.is_empty() {
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
    } else {
        args.cpus.clone()
    };
    let (per_cpu, steal_ms) =
        with_steal(|| nervix_bench::host_gaps::probe(&cpus, args.seconds, args.threshold_us))?;
    println!(
        "host-gaps: {} s, gaps of at least {} µs; host steal {steal_ms:?} ms per CPU",
        args.seconds, args.threshold_us
    );
    for cpu in &per_cpu {
        println!("{}", cpu.line());
    }
    if args.json {
        let object = serde_json::json!({
            "probe": "host-gaps",
            "seconds": args.seconds,
            "threshold_us": args.threshold_us,
            "host_steal_ms": steal_ms,
            "cpus": per_cpu.iter().map(|c| c.to_json()).collect::<Vec<_>>(),
        });
        println!("{object}");
    }
    Ok(ExitCode::SUCCESS)
}

fn run_compare(args: &CompareArguments) -> anyhow::Result<ExitCode> {
    let read = |path: &std::path::Path| {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
    };
    let baseline = read(&args.baseline)?;
    let run = read(&args.run)?;
    let comparisons = compare::compare(
        &baseline,
        &args.baseline.display().to_string(),
        &run,
        &args.run.display().to_string(),
    )?;
    let mut slower = false;
    for comparison in &comparisons {
        println!("{}", comparison.line());
        if let Some(floor) = args.fail_below {
            if comparison.ratio < floor {
                slower = true;
                eprintln!(
                    "{}: {:.2}× is below --fail-below {floor}",
                    comparison.scenario, comparison.ratio
                );
            }
        }
    }
    Ok(if slower {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

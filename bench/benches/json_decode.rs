//! WIRE JSON decode throughput: NDJSON payloads of 1,000 order records of about 128 bytes
//! (region / order_id / value strings, amount integer), decoded into Arrow batches by
//! `nervix::codec::JsonDecoder` on one core. DESIGN's target is at least 3 M records/s.
//!
//! `cargo bench -p nervix-bench --bench json_decode`

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nervix::codec::{JsonCodecPlan, JsonDecoder};
use nervix::nspl::ast::catalog::CatalogStmt;
use nervix::nspl::Statement;
use nervix::types::{DataType, FieldType};
use nervix::validate::route::Field;

/// Records per payload.
const RECORDS: usize = 1_000;

/// Payloads decoded before one `finish`, as an ingest group of DESIGN §5 would gather them.
const PAYLOADS_PER_BATCH: usize = 1;

const NSPL: &str = "
    CREATE WIRE JSON SCHEMA order_wire MODE STRICT (region string, order_id string,
        amount integer, value string, note string OPTIONAL);
    CREATE SCHEMA order_in (region STRING, order_id STRING, amount I64, value STRING,
        note STRING OPTIONAL);
    CREATE CODEC order_codec FROM WIRE JSON SCHEMA order_wire TO SCHEMA order_in;";

fn plan() -> Arc<JsonCodecPlan> {
    let script = nervix::nspl::parse_script(NSPL);
    assert!(script.errors.is_empty(), "{:?}", script.errors);
    let (mut wire, mut codec, mut fields) = (None, None, Vec::new());
    for s in script.statements {
        match s.statement {
            Statement::Catalog(CatalogStmt::CreateWireSchema(w)) => wire = Some(w),
            Statement::Catalog(CatalogStmt::CreateCodec(c)) => codec = Some(c),
            Statement::Catalog(CatalogStmt::CreateSchema(schema)) => {
                fields = schema
                    .fields
                    .iter()
                    .map(|f| Field {
                        name: f.name.name.clone(),
                        ty: FieldType {
                            data_type: DataType::from_type_name(&f.ty),
                            nullable: f.optional,
                            sensitive: f.sensitive,
                        },
                    })
                    .collect();
            }
            _ => {}
        }
    }
    let plan = JsonCodecPlan::build(&codec.expect("codec"), &wire.expect("wire schema"), &fields)
        .expect("plan");
    Arc::new(plan)
}

/// `RECORDS` NDJSON lines, each about 128 bytes.
fn payload(separator: &str) -> Vec<u8> {
    const REGIONS: [&str; 4] = ["eu-west-1", "us-east-2", "ap-south-1", "sa-east-1"];
    let lines: Vec<String> = (0..RECORDS)
        .map(|i| {
            format!(
                r#"{{"region":"{}","order_id":"ord-{:010}","amount":{},"value":"item-{:04} paid by card, shipped to warehouse 7"}}"#,
                REGIONS[i % REGIONS.len()],
                i * 7919,
                (i * 37) % 100_000,
                i % 10_000
            )
        })
        .collect();
    lines.join(separator).into_bytes()
}

fn decode(c: &mut Criterion) {
    let plan = plan();
    let mut group = c.benchmark_group("json_decode");
    group.throughput(Throughput::Elements((RECORDS * PAYLOADS_PER_BATCH) as u64));
    for (form, payload) in [
        ("ndjson", payload("\n")),
        (
            "array",
            format!("[{}]", String::from_utf8(payload(",")).expect("utf8")).into_bytes(),
        ),
    ] {
        let mut decoder = JsonDecoder::new(Arc::clone(&plan));
        decoder.decode_payload(&payload).expect("decodes");
        assert_eq!(decoder.finish().num_rows(), RECORDS);
        group.bench_function(
            format!(
                "{form} {RECORDS} records, {} bytes/record",
                payload.len() / RECORDS
            ),
            |b| {
                b.iter(|| {
                    for _ in 0..PAYLOADS_PER_BATCH {
                        decoder
                            .decode_payload(std::hint::black_box(&payload))
                            .expect("decodes");
                    }
                    decoder.finish()
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);

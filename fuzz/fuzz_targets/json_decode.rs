//! Fuzzes the WIRE JSON codec: any bytes must be accepted or refused, never panic. The input
//! goes through `validate_json_text` and through a decoder whose plan covers every wire type
//! (LOOSE, so unknown keys are skipped). Beyond not panicking: a refused payload leaves the
//! buffered row count unchanged, an accepted one adds the rows it reports, and the decoded
//! batch encodes to NDJSON that decodes back to the same batch.

#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use nervix::codec::{encode_ndjson, validate_json_text, JsonCodecPlan, JsonDecoder};
use nervix::nspl::ast::catalog::CatalogStmt;
use nervix::nspl::Statement;
use nervix::types::{DataType, FieldType};
use nervix::validate::route::Field;

/// Seed the corpus with objects using these keys (and JSONTestSuite's files).
const NSPL: &str = "
    CREATE WIRE JSON SCHEMA w MODE LOOSE (i integer OPTIONAL, u integer OPTIONAL,
        f number OPTIONAL, b boolean OPTIONAL, s string OPTIONAL, o object OPTIONAL,
        t string OPTIONAL, v array OPTIONAL, a array OPTIONAL, l array OPTIONAL,
        n null OPTIONAL, d integer OPTIONAL);
    CREATE SCHEMA s (i I64 OPTIONAL, u U8 OPTIONAL, f F32 OPTIONAL, b BOOL OPTIONAL,
        s STRING OPTIONAL, o STRING OPTIONAL, t DATETIME OPTIONAL, v VEC<VEC<I16>> OPTIONAL,
        a ARRAY<F64, 2, 2> OPTIONAL, l LIST<STRING> OPTIONAL, n STRING OPTIONAL);
    CREATE CODEC c FROM WIRE JSON SCHEMA w TO SCHEMA s ENCODE t AS RFC3339;";

fn plan() -> Arc<JsonCodecPlan> {
    let script = nervix::nspl::parse_script(NSPL);
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
    let plan = JsonCodecPlan::build(&codec.expect("codec"), &wire.expect("wire"), &fields);
    Arc::new(plan.expect("the fuzz plan builds"))
}

static PLAN: OnceLock<Arc<JsonCodecPlan>> = OnceLock::new();

fuzz_target!(|bytes: &[u8]| {
    let _ = validate_json_text(bytes);
    let plan = PLAN.get_or_init(plan);
    let mut decoder = JsonDecoder::new(Arc::clone(plan));
    // A row before the input, so rollback has something to keep.
    decoder
        .decode_payload(b"{\"i\":1}")
        .expect("the seed row decodes");
    match decoder.decode_payload(bytes) {
        Ok(n) => assert_eq!(decoder.buffered_rows(), 1 + n as usize),
        Err(_) => assert_eq!(decoder.buffered_rows(), 1),
    }
    let batch = decoder.finish();
    let mut out = Vec::new();
    encode_ndjson(&batch, plan, &mut out);
    let mut again = JsonDecoder::new(Arc::clone(plan));
    again
        .decode_payload(&out)
        .expect("encoded rows decode again");
    assert_eq!(again.finish(), batch);
});

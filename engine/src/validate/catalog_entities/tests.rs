//! Rules that need resource versions, which only Rust can put in a catalog today (there is no
//! upload path in the planner yet): MOUNT versions, VHOST TLS bundles, LATEST binding, and the
//! spec and golden examples that mount resources. Everything else is tested by the scripts
//! under `engine/tests/validation/catalog/`.

use nervix_nspl::ast::catalog::{
    AvroType, CatalogStmt, ClientOperation, CreateWireSchema, WireDefinition, WireField,
};
use nervix_nspl::ast::ingestor::{IngestorStmt, SignalingFormat};
use nervix_nspl::ast::processor::{ProcessorDef, ProcessorStmt};
use nervix_nspl::ast::{Ident, ResourceVersion};
use nervix_nspl::{ObjectKind, Span, Statement};

use super::{bind_latest, global_references, references, validate_global};
use crate::catalog::plan::{plan_statement, StatementContext};
use crate::catalog::{Catalog, Change, EntityKey, Resource};

const TLS_FILES: &[&str] = &["ca.crt", "tls.crt", "tls.key"];

/// One resource to put in a test catalog: its name and its versions, each a number and the
/// files it holds.
type ResourceSpec<'a> = (&'a str, &'a [(u64, &'a [&'a str])]);

/// A catalog with domain `test` and the given resources.
fn catalog_with(resources: &[ResourceSpec<'_>]) -> Catalog {
    let mut catalog = Catalog::default();
    run(&mut catalog, "CREATE DOMAIN test;").expect("domain is created");
    for (name, versions) in resources {
        let definition = nervix_nspl::parse_statement(&format!("CREATE RESOURCE {name};"))
            .expect("resource statement parses");
        let resource = Resource {
            name: (*name).to_string(),
            definition,
            versions: versions
                .iter()
                .map(|(number, files)| crate::catalog::ResourceVersion {
                    number: *number,
                    files: files.iter().map(|f| ((*f).to_string(), 10)).collect(),
                })
                .collect(),
        };
        catalog.apply_change(&Change::PutResource(resource));
    }
    catalog
}

/// Runs every statement of `src` in domain `test` (binding LATEST first, as the planner
/// will), applying what is accepted; the first refusal's message.
fn run(catalog: &mut Catalog, src: &str) -> Result<(), String> {
    let script = nervix_nspl::parse_script(src);
    if let Some(error) = script.errors.first() {
        return Err(format!("parse error: {}", error.render("test", src)));
    }
    for spanned in &script.statements {
        let mut statement = spanned.statement.clone();
        bind_latest(catalog, &mut statement).map_err(|e| e.message)?;
        let context = StatementContext {
            domain: catalog.domains.contains_key("test").then_some("test"),
            span: spanned.span,
            wall_ns: 0,
        };
        let planned = plan_statement(catalog, context, &statement).map_err(|e| e.message)?;
        for change in &planned.changes {
            catalog.apply_change(change);
        }
    }
    Ok(())
}

fn refused(catalog: &mut Catalog, src: &str) -> String {
    match run(catalog, src) {
        Ok(()) => panic!("accepted, but a refusal was expected: {src}"),
        Err(message) => message,
    }
}

fn client_mounts(catalog: &Catalog, name: &str) -> Vec<(String, ResourceVersion)> {
    let key = EntityKey::new(ObjectKind::Client, name);
    match &catalog.domains["test"].entities[&key].definition {
        Statement::Catalog(CatalogStmt::CreateClient(c)) => c
            .mounts
            .iter()
            .map(|m| (m.resource.name.clone(), m.version))
            .collect(),
        other => panic!("not a client: {other:?}"),
    }
}

const SPEC_KAFKA_TLS: &str =
    include_str!("../../../../nspl/tests/golden/spec/05_catalog_client_kafka_tls.nspl");
const SPEC_HTTP_TLS: &str =
    include_str!("../../../../nspl/tests/golden/spec/06_catalog_client_http_tls.nspl");
const SPEC_VHOST_VERSION: &str =
    include_str!("../../../../nspl/tests/golden/spec/11_catalog_vhost_edge_tls_version.nspl");
const SPEC_VHOST_LATEST: &str =
    include_str!("../../../../nspl/tests/golden/spec/12_catalog_vhost_edge_tls_latest.nspl");
const SPEC_BYBIT: &str =
    include_str!("../../../../nspl/tests/golden/spec/13_signaling_bybit_subscribe.nspl");
const SPEC_PROTOBUF: &str =
    include_str!("../../../../nspl/tests/golden/spec/16_signaling_protobuf_subscribe.nspl");
const SPEC_INFERENCER: &str =
    include_str!("../../../../nspl/tests/golden/spec/24_processor_inferencer_score_events.nspl");
const GOLDEN_CLIENTS: &str = include_str!("../../../../nspl/tests/golden/catalog/clients.nspl");
const GOLDEN_VHOSTS: &str =
    include_str!("../../../../nspl/tests/golden/catalog/vhosts_endpoints.nspl");

#[test]
fn spec_tls_clients_are_accepted_with_their_resource() {
    let mut catalog = catalog_with(&[("dev_tls", &[(1, &["ca.pem"])])]);
    run(&mut catalog, SPEC_KAFKA_TLS).expect("spec Kafka TLS client");
    run(&mut catalog, SPEC_HTTP_TLS).expect("spec HTTP TLS client");
}

#[test]
fn golden_clients_are_accepted_with_their_dependencies() {
    let mut catalog = catalog_with(&[
        ("dev_tls", &[(1, &["ca.pem"])]),
        ("client_id", &[(1, &["id.pem"]), (2, &["id.pem"])]),
        ("pg_tls", &[(3, &["ca.pem"]), (4, &["ca.pem"])]),
        ("ca", &[(7, &["ca.pem"])]),
    ]);
    run(&mut catalog, SPEC_BYBIT).expect("signaling protocol");
    run(&mut catalog, GOLDEN_CLIENTS).expect("golden clients");
    // LATEST was bound when the statements were applied.
    assert_eq!(
        client_mounts(&catalog, "ws_feed"),
        vec![
            ("dev_tls".to_string(), ResourceVersion::Number(1)),
            ("client_id".to_string(), ResourceVersion::Number(2)),
        ]
    );
    assert_eq!(
        client_mounts(&catalog, "warehouse"),
        vec![
            ("pg_tls".to_string(), ResourceVersion::Number(4)),
            ("ca".to_string(), ResourceVersion::Number(7)),
        ]
    );
}

#[test]
fn mount_versions_must_exist() {
    let mut catalog = catalog_with(&[("dev_tls", &[(1, &["ca.pem"])]), ("empty", &[])]);
    let src = SPEC_KAFKA_TLS.replace("VERSION 1", "VERSION 3");
    assert_eq!(
        refused(&mut catalog, &src),
        "resource 'dev_tls' has no version 3"
    );
    let src = SPEC_KAFKA_TLS.replace("dev_tls", "missing");
    assert_eq!(
        refused(&mut catalog, &src),
        "resource 'missing' does not exist"
    );
    let src = "CREATE CLIENT k TYPE KAFKA MOUNT empty VERSION LATEST \
               CONFIG {'bootstrap.servers' = 'b:9092'};";
    assert_eq!(
        refused(&mut catalog, src),
        "resource 'empty' has no version yet: VERSION LATEST binds the highest uploaded \
         version, so upload one first"
    );
}

#[test]
fn latest_binds_the_newest_version_when_applied() {
    // The planner binds LATEST to the newest version, and refuses it when there is none.
    let mut catalog = catalog_with(&[("dev_tls", &[(1, &["ca.pem"])]), ("empty", &[])]);
    let plan = |catalog: &Catalog, src: &str| {
        let statement = nervix_nspl::parse_statement(src).expect("parses");
        let context = StatementContext {
            domain: Some("test"),
            span: Span::default(),
            wall_ns: 0,
        };
        plan_statement(catalog, context, &statement).map_err(|e| e.message)
    };
    let ok = plan(
        &catalog,
        "CREATE CLIENT k TYPE KAFKA MOUNT dev_tls VERSION LATEST \
         CONFIG {'bootstrap.servers' = 'b:9092'};",
    )
    .expect("LATEST of a resource with a version");
    for change in &ok.changes {
        catalog.apply_change(change);
    }
    assert_eq!(
        client_mounts(&catalog, "k"),
        vec![("dev_tls".to_string(), ResourceVersion::Number(1))]
    );
    let refusal = plan(
        &catalog,
        "CREATE CLIENT e TYPE KAFKA MOUNT empty VERSION LATEST \
         CONFIG {'bootstrap.servers' = 'b:9092'};",
    )
    .expect_err("LATEST of a resource without versions");
    assert!(
        refusal.starts_with("resource 'empty' has no version yet"),
        "{refusal}"
    );
}

#[test]
fn templates_must_name_a_mounted_resource() {
    let mut catalog = catalog_with(&[("dev_tls", &[(1, &["ca.pem"])]), ("other", &[(1, &[])])]);
    run(&mut catalog, SPEC_KAFKA_TLS).expect("spec Kafka TLS client");
    // Unmounting the resource a template uses breaks the client.
    assert_eq!(
        refused(
            &mut catalog,
            "ALTER CLIENT kafka_tls SET MOUNT other VERSION 1;"
        ),
        "CONFIG 'ssl.ca.location' uses {{ dev_tls }}, but the client does not MOUNT dev_tls"
    );
    // Replacing both together is fine.
    run(
        &mut catalog,
        "ALTER CLIENT kafka_tls SET MOUNT other VERSION LATEST, \
         SET CONFIG {'bootstrap.servers' = 'b:9092', 'ssl.ca.location' = '{{other}}/ca.pem'};",
    )
    .expect("mount and config replaced together");
    assert_eq!(
        client_mounts(&catalog, "kafka_tls"),
        vec![("other".to_string(), ResourceVersion::Number(1))]
    );
}

#[test]
fn spec_vhosts_are_accepted_with_a_complete_bundle() {
    let mut catalog = catalog_with(&[("tls_bundle", &[(3, TLS_FILES)])]);
    run(&mut catalog, SPEC_VHOST_VERSION).expect("spec VHOST VERSION 3");
    let mut latest = catalog_with(&[("tls_bundle", &[(2, &[]), (3, TLS_FILES)])]);
    run(&mut latest, SPEC_VHOST_LATEST).expect("spec VHOST VERSION LATEST");
    let key = EntityKey::new(ObjectKind::Vhost, "edge");
    match &latest.global[&key].definition {
        Statement::Catalog(CatalogStmt::CreateVhost(v)) => {
            let tls = v.tls.as_ref().expect("WITH TLS");
            assert_eq!(tls.version, ResourceVersion::Number(3), "LATEST binds 3");
        }
        other => panic!("not a vhost: {other:?}"),
    }
}

#[test]
fn vhost_tls_bundles_are_checked() {
    let mut catalog = catalog_with(&[
        ("tls_bundle", &[(1, &["tls.crt"]), (2, TLS_FILES)]),
        ("empty", &[]),
    ]);
    assert_eq!(
        refused(
            &mut catalog,
            "CREATE VHOST edge api.example.com WITH TLS tls_bundle VERSION 1;"
        ),
        "resource 'tls_bundle' version 1 lacks tls.key and ca.crt: a VHOST's TLS bundle must \
         contain tls.crt, tls.key and ca.crt"
    );
    assert_eq!(
        refused(
            &mut catalog,
            "CREATE VHOST edge api.example.com WITH TLS tls_bundle VERSION 3;"
        ),
        "resource 'tls_bundle' has no version 3"
    );
    assert_eq!(
        refused(
            &mut catalog,
            "CREATE VHOST edge api.example.com WITH TLS nope VERSION 1;"
        ),
        "resource 'nope' does not exist"
    );
    assert!(refused(
        &mut catalog,
        "CREATE VHOST edge api.example.com WITH TLS empty VERSION LATEST;"
    )
    .starts_with("resource 'empty' has no version yet"));
    run(
        &mut catalog,
        "CREATE VHOST edge api.example.com WITH TLS tls_bundle VERSION 2;",
    )
    .expect("complete bundle");
    // Without bind_latest the vhost is checked against the latest version's files.
    let statement = nervix_nspl::parse_statement(
        "CREATE VHOST other other.example.com WITH TLS tls_bundle VERSION LATEST;",
    )
    .expect("parses");
    let Statement::Catalog(definition) = &statement else {
        panic!("a catalog statement")
    };
    validate_global(&catalog, definition).expect("latest version 2 is complete");
}

#[test]
fn vhost_hosts_are_unique_across_vhosts() {
    let mut catalog = catalog_with(&[("tls_bundle", &[(3, TLS_FILES)])]);
    run(&mut catalog, SPEC_VHOST_VERSION).expect("spec VHOST");
    assert_eq!(
        refused(
            &mut catalog,
            "CREATE VHOST other localhost, WS.Example.com;"
        ),
        "host 'WS.Example.com' is already served by vhost 'edge'"
    );
}

#[test]
fn golden_vhosts_and_endpoints_are_accepted_with_their_dependencies() {
    let mut catalog = catalog_with(&[("tls_bundle", &[(3, TLS_FILES)])]);
    run(&mut catalog, SPEC_BYBIT).expect("signaling protocol");
    // `mixed` serves API.Example.COM, which `edge` already serves (hosts compare
    // case-insensitively), so the golden runs whole only if `mixed` is checked alone.
    let (before, after) = GOLDEN_VHOSTS
        .split_once("CREATE VHOST mixed")
        .expect("golden declares vhost mixed");
    let mixed_end = after.find(';').expect("statement end") + 1;
    let mixed = format!("CREATE VHOST mixed{}", &after[..mixed_end]);
    run(&mut catalog, &format!("{before}{}", &after[mixed_end..])).expect("golden vhosts");
    assert_eq!(
        refused(&mut catalog, &mixed),
        "host 'API.Example.COM' is already served by vhost 'edge'"
    );
    let mut alone = catalog_with(&[]);
    run(&mut alone, &mixed).expect("vhost mixed on its own");
    // An endpoint depends on its vhost.
    assert_eq!(
        refused(&mut catalog, "DROP VHOST edge;"),
        "cannot drop vhost 'edge': endpoint 'ingress' in domain 'test' depends on it"
    );
}

#[test]
fn bind_latest_covers_processors_and_signaling() {
    let catalog = catalog_with(&[
        ("scoring", &[(1, &["score.onnx"]), (5, &["score.onnx"])]),
        ("proto_bundle", &[(2, &["signaling.proto"])]),
    ]);
    let mut inferencer =
        nervix_nspl::parse_statement(&SPEC_INFERENCER.replace("VERSION 1", "VERSION LATEST"))
            .expect("parses");
    bind_latest(&catalog, &mut inferencer).expect("binds");
    match &inferencer {
        Statement::Processor(ProcessorStmt::Create(create)) => match &create.def {
            ProcessorDef::Inferencer { model, .. } => {
                assert_eq!(model.version, ResourceVersion::Number(5));
            }
            other => panic!("not an inferencer: {other:?}"),
        },
        other => panic!("not a processor: {other:?}"),
    }
    let mut protocol =
        nervix_nspl::parse_statement(&SPEC_PROTOBUF.replace("VERSION 1", "VERSION LATEST"))
            .expect("parses");
    bind_latest(&catalog, &mut protocol).expect("binds");
    match &protocol {
        Statement::Ingestor(IngestorStmt::CreateSignalingProtocol(p)) => match &p.format {
            SignalingFormat::Protobuf(protobuf) => {
                assert_eq!(protobuf.version, ResourceVersion::Number(2));
            }
            other => panic!("not PROTOBUF: {other:?}"),
        },
        other => panic!("not a signaling protocol: {other:?}"),
    }
    let mut alter = nervix_nspl::parse_statement(
        "ALTER CLIENT c SET MOUNT scoring VERSION LATEST, SET POOL SIZE 2;",
    )
    .expect("parses");
    bind_latest(&catalog, &mut alter).expect("binds");
    match &alter {
        Statement::Catalog(CatalogStmt::AlterClient(a)) => {
            assert!(matches!(
                &a.operations[0],
                ClientOperation::SetMount(m) if m[0].version == ResourceVersion::Number(5)
            ));
        }
        other => panic!("not ALTER CLIENT: {other:?}"),
    }
    // A number is left as written, even one the resource lacks (validation refuses it).
    let mut numbered =
        nervix_nspl::parse_statement(&SPEC_INFERENCER.replace("VERSION 1", "VERSION 9"))
            .expect("parses");
    let before = numbered.clone();
    bind_latest(&catalog, &mut numbered).expect("nothing to bind");
    assert_eq!(numbered, before);
}

#[test]
fn references_name_what_a_definition_depends_on() {
    let parse = |src: &str| match nervix_nspl::parse_statement(src).expect("parses") {
        Statement::Catalog(c) => c,
        other => panic!("not a catalog statement: {other:?}"),
    };
    let key = |kind, name: &str| EntityKey::new(kind, name);
    assert_eq!(
        references(&parse(
            "CREATE CODEC c FROM WIRE JSON SCHEMA w TO SCHEMA s;"
        )),
        vec![
            key(ObjectKind::WireSchema, "w"),
            key(ObjectKind::Schema, "s")
        ]
    );
    assert_eq!(
        references(&parse(
            "CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON INGESTION '.';"
        )),
        vec![key(ObjectKind::Schema, "s")]
    );
    assert_eq!(
        references(&parse("CREATE RELAY r SCHEMA s BRANCHED BY b;")),
        vec![key(ObjectKind::Schema, "s"), key(ObjectKind::Branch, "b")]
    );
    assert_eq!(
        references(&parse(
            "CREATE ENDPOINT e ON v PATH '/' TYPE WEBSOCKETS WITH SIGNALING PROTOCOL p;"
        )),
        vec![key(ObjectKind::SignalingProtocol, "p")]
    );
    assert_eq!(
        global_references(&parse("CREATE ENDPOINT e ON v PATH '/' TYPE HTTP;")),
        vec![key(ObjectKind::Vhost, "v")]
    );
    assert_eq!(
        global_references(&parse(
            "CREATE CLIENT c TYPE KAFKA MOUNT a VERSION 1, b VERSION LATEST CONFIG {};"
        )),
        vec![
            key(ObjectKind::Resource, "a"),
            key(ObjectKind::Resource, "b")
        ]
    );
    assert_eq!(
        global_references(&parse("CREATE VHOST v h WITH TLS t VERSION 1;")),
        vec![key(ObjectKind::Resource, "t")]
    );
}

#[test]
fn avro_names_are_checked_without_the_parser() {
    let field = |name: &str, ty: AvroType, optional: bool| WireField {
        name: name.to_string(),
        span: Span::default(),
        ty,
        optional,
    };
    let wire = |fields| {
        CatalogStmt::CreateWireSchema(CreateWireSchema {
            if_not_exists: false,
            name: Ident::new("w"),
            definition: WireDefinition::Avro { fields },
        })
    };
    let check = |definition: &CatalogStmt| -> Result<(), String> {
        let catalog = catalog_with(&[]);
        let scope = crate::catalog::DomainScope::new(&catalog, &catalog.domains["test"]);
        super::validate(&scope, definition).map_err(|e| e.message)
    };
    assert_eq!(
        check(&wire(vec![field("with space", AvroType::Long, false)])),
        Err(
            "wire field 'with space' of wire schema 'w' is not an Avro name: use letters, \
             digits and `_`, not first a digit"
                .to_string()
        )
    );
    assert_eq!(
        check(&wire(vec![field(
            "address",
            AvroType::Record(vec![
                field("zip", AvroType::Int, false),
                field("zip", AvroType::Long, false),
            ]),
            false,
        )])),
        Err("wire field 'zip' is declared twice in wire schema 'w'".to_string())
    );
    assert_eq!(
        check(&wire(vec![field(
            "kind",
            AvroType::Enum(vec!["A".to_string(), "1B".to_string()]),
            false,
        )])),
        Err(
            "enum symbol '1B' of wire field 'kind' is not an Avro name: use letters, digits \
             and `_`, not first a digit"
                .to_string()
        )
    );
    assert_eq!(
        check(&wire(vec![field("digest", AvroType::Fixed(0), false)])),
        Err("wire field 'digest' is fixed(0): a fixed size is at least 1".to_string())
    );
    assert_eq!(
        check(&wire(vec![field("ok", AvroType::Null, false)])),
        Ok(())
    );
}

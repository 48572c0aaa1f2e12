//! Unit tests of processor validation that need trees the parser never builds, or look at
//! references directly. Scripts — including those that need uploaded resource versions — run in
//! `tests/validation_cases.rs` and, through a real node, in `tests/console_node.rs`.

use nervix_nspl::Statement;

use crate::catalog::plan::{plan_statement, StatementContext};
use crate::catalog::Catalog;

#[test]
fn resources_are_global_references_of_inferencers_and_wasm_processors() {
    let src = "CREATE WASM PROCESSOR p FROM e USING RESOURCE normalizer VERSION 1 \
               FILE 'p.wasm' MAX FUEL 1 MAX MEMORY 1MiB UNBRANCHED \
               TO o SET x = x ON MESSAGE ERROR LOG;";
    let Ok(Statement::Processor(nervix_nspl::ast::ProcessorStmt::Create(definition))) =
        nervix_nspl::parse_statement(src)
    else {
        panic!("the statement parses");
    };
    let keys = super::global_references(&definition);
    assert_eq!(
        keys,
        vec![crate::catalog::EntityKey::new(
            nervix_nspl::ObjectKind::Resource,
            "normalizer"
        )]
    );
    let domain_keys = super::references(&definition);
    let names: Vec<String> = domain_keys.iter().map(ToString::to_string).collect();
    assert_eq!(names, vec!["relay 'e'", "relay 'o'"]);
}

/// A catalog after running `script` in domain `test`; every statement must be accepted.
fn catalog_after(script: &str) -> Catalog {
    let mut catalog = Catalog::default();
    let parsed = nervix_nspl::parse_script(&format!("CREATE DOMAIN test;\n{script}"));
    assert!(parsed.errors.is_empty(), "the setup parses");
    for (index, spanned) in parsed.statements.iter().enumerate() {
        let context = StatementContext {
            domain: (index > 0).then_some("test"),
            span: spanned.span,
            wall_ns: 0,
        };
        let planned = plan_statement(&catalog, context, &spanned.statement)
            .unwrap_or_else(|e| panic!("setup statement {index} is refused: {}", e.message));
        for change in &planned.changes {
            catalog.apply_change(change);
        }
    }
    catalog
}

/// The refusal of `create` once `mutate` changed its tree in a way the parser never produces.
fn refusal_of_mutated(
    catalog: &Catalog,
    create: &str,
    mutate: impl FnOnce(&mut nervix_nspl::ast::processor::CreateProcessor),
) -> String {
    let Ok(Statement::Processor(nervix_nspl::ast::ProcessorStmt::Create(mut definition))) =
        nervix_nspl::parse_statement(create)
    else {
        panic!("the CREATE parses: {create}");
    };
    mutate(&mut definition);
    let domain = &catalog.domains["test"];
    let scope = crate::catalog::DomainScope::new(catalog, domain);
    match super::validate(&scope, &definition) {
        Ok(()) => panic!("the mutated definition is accepted"),
        Err(error) => error.message,
    }
}

#[test]
fn trees_the_parser_never_builds_get_the_parsers_refusals() {
    use nervix_nspl::ast::{Attachment, Branching, Flush, RouteBranching};
    let catalog = catalog_after(
        "CREATE SCHEMA s (x I64);
         CREATE RELAY a SCHEMA s UNBRANCHED WITH MATERIALIZED STATE LAST BY TIMESTAMP;
         CREATE RELAY b SCHEMA s UNBRANCHED;",
    );
    let junction = "CREATE JUNCTION j FROM a UNBRANCHED TO b INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG;";
    let window = "CREATE WINDOW PROCESSOR w FROM a WIDTH 2 ROWS STEP 1 ROWS UNBRANCHED \
                  TO b SET x = COUNT(input.x) ON MESSAGE ERROR LOG;";
    let reingestor = "CREATE REINGESTOR r FROM a TO b INHERIT ALL UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG;";
    let generator = "CREATE GENERATOR g USING MATERIALIZED STATE a EACH 1s UNBRANCHED \
                     TO b SET x = relay_state.a.x FLUSH IMMEDIATE ON MESSAGE ERROR LOG;";
    assert_eq!(
        refusal_of_mutated(&catalog, junction, |d| d.routes[0].flush = None),
        "route to `b` needs FLUSH EACH <duration> MAX BATCH SIZE <bytes> or FLUSH IMMEDIATE"
    );
    assert_eq!(
        refusal_of_mutated(&catalog, junction, |d| {
            d.routes[0].branching = Some(RouteBranching::Unbranched);
        }),
        "junction routes do not construct branches: declare BRANCHED BY or UNBRANCHED once for \
         the whole node"
    );
    assert_eq!(
        refusal_of_mutated(&catalog, junction, |d| d.routes.clear()),
        "junction 'j' must retain at least one route"
    );
    assert_eq!(
        refusal_of_mutated(&catalog, junction, |d| d.branching = None),
        "junction 'j' needs BRANCHED BY <branch> or UNBRANCHED before its routes"
    );
    assert_eq!(
        refusal_of_mutated(&catalog, window, |d| d.routes[0].flush =
            Some(Flush::Immediate)),
        "window processor routes take no FLUSH"
    );
    assert_eq!(
        refusal_of_mutated(&catalog, window, |d| d.routes[0].set.clear()),
        "window processor routes are set-only and need a SET clause"
    );
    assert_eq!(
        refusal_of_mutated(&catalog, reingestor, |d| d.routes[0].branching = None),
        "route to `b` needs BRANCHED BY <branch> or UNBRANCHED"
    );
    assert_eq!(
        refusal_of_mutated(&catalog, reingestor, |d| d.branching =
            Some(Branching::Unbranched)),
        "reingestors have no node-wide branching: each route declares BRANCHED BY <branch> or \
         UNBRANCHED"
    );
    assert_eq!(
        refusal_of_mutated(&catalog, generator, |d| d.attachment =
            Some(Attachment::Detached)),
        "generators have no inputs to acknowledge and take no ATTACHED or DETACHED"
    );
}

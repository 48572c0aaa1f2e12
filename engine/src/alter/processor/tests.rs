//! Folding is pure over the stored definition, so its ordering rules are checked here by
//! comparing the folded model's canonical text with the CREATE it must equal.

use nervix_nspl::ast::processor::ProcessorStmt;
use nervix_nspl::{render_statement, Statement};

use super::fold;
use crate::catalog::plan::definition_identity;
use crate::catalog::Entity;

fn entity(create: &str) -> Entity {
    let definition = nervix_nspl::parse_statement(create).expect("the CREATE parses");
    let (key, _, _) = definition_identity(&definition).expect("a CREATE defines an entity");
    Entity::new(key, definition)
}

fn folded(create: &str, alter: &str) -> Result<String, String> {
    let stored = entity(create);
    let Ok(Statement::Processor(ProcessorStmt::Alter(alteration))) =
        nervix_nspl::parse_statement(alter)
    else {
        panic!("the ALTER parses: {alter}");
    };
    fold(&stored, &alteration)
        .map(|s| render_statement(&s))
        .map_err(|e| e.message)
}

fn canonical(create: &str) -> String {
    render_statement(&nervix_nspl::parse_statement(create).expect("the expected CREATE parses"))
}

const JUNCTION: &str = "CREATE JUNCTION j
  FROM a WHERE input.x, b
  UNBRANCHED
  USING MATERIALIZED STATE p REQUIRED WAIT
  USING MATERIALIZED STATE q REQUIRED WAIT
  USING MATERIALIZED STATE r REQUIRED WAIT
  TO x INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  TO y INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  TO z INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG;";

#[test]
fn operations_keep_input_state_and_route_order() {
    let result = folded(
        JUNCTION,
        "ALTER JUNCTION j
           ADD FROM c WHERE input.y,
           ALTER MATERIALIZED STATE q SET REQUIRED SKIP,
           ADD MATERIALIZED STATE s REQUIRED SKIP,
           REPLACE ROUTE TO y INHERIT ALL WHERE output.ok FLUSH IMMEDIATE ON MESSAGE ERROR IGNORE,
           ADD ROUTE TO w INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG;",
    );
    let expected = canonical(
        "CREATE JUNCTION j
           FROM a WHERE input.x, b, c WHERE input.y
           UNBRANCHED
           USING MATERIALIZED STATE p REQUIRED WAIT
           USING MATERIALIZED STATE q REQUIRED SKIP
           USING MATERIALIZED STATE r REQUIRED WAIT
           USING MATERIALIZED STATE s REQUIRED SKIP
           TO x INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG
           TO y INHERIT ALL WHERE output.ok FLUSH IMMEDIATE ON MESSAGE ERROR IGNORE
           TO z INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG
           TO w INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG;",
    );
    assert_eq!(result, Ok(expected));
}

#[test]
fn operations_apply_in_written_order() {
    let result = folded(
        JUNCTION,
        "ALTER JUNCTION j
           SET COLLECT FOR 10ms, DROP COLLECT, SET COLLECT FOR 5ms,
           SET FILTER WHERE input.a, DROP FILTER WHERE,
           DROP FROM a, ADD FROM a,
           SET DETACHED, SET ATTACHED,
           DROP MATERIALIZED STATE p, ADD MATERIALIZED STATE p REQUIRED SKIP;",
    );
    // DROP FROM removed the input with its WHERE; re-adding appends it without one.
    let expected = canonical(
        "CREATE ATTACHED JUNCTION j
           FROM b, a
           COLLECT FOR 5ms
           UNBRANCHED
           USING MATERIALIZED STATE q REQUIRED WAIT
           USING MATERIALIZED STATE r REQUIRED WAIT
           USING MATERIALIZED STATE p REQUIRED SKIP
           TO x INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG
           TO y INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG
           TO z INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG;",
    );
    assert_eq!(result, Ok(expected));
}

#[test]
fn route_targets_must_identify_one_route() {
    let create = "CREATE JUNCTION j FROM a UNBRANCHED
      TO x INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG
      TO x INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR IGNORE;";
    assert_eq!(
        folded(create, "ALTER JUNCTION j DROP ROUTE TO x;"),
        Err(
            "junction 'j' has 2 routes to relay 'x': DROP ROUTE TO must identify exactly one route"
                .into()
        )
    );
    assert_eq!(
        folded(
            create,
            "ALTER JUNCTION j REPLACE ROUTE TO y INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG;"
        ),
        Err("junction 'j' has no route to relay 'y'".into())
    );
}

#[test]
fn kind_clauses_are_replaced_and_resource_file_kept() {
    let create = "CREATE WASM PROCESSOR p FROM e
      USING RESOURCE normalizer VERSION 1 FILE 'p.wasm' MAX FUEL 10 MAX MEMORY 1MiB
      UNBRANCHED TO o SET x = x ON MESSAGE ERROR LOG;";
    let result = folded(
        create,
        "ALTER WASM PROCESSOR p SET RESOURCE other VERSION LATEST, SET MAX FUEL 20,
           SET ON REJECTED STATE RESET, SET ON GLOBAL ERROR LOG;",
    );
    let expected = canonical(
        "CREATE WASM PROCESSOR p FROM e
           USING RESOURCE other VERSION LATEST FILE 'p.wasm' MAX FUEL 20 MAX MEMORY 1MiB
           UNBRANCHED TO o SET x = x ON MESSAGE ERROR LOG
           ON REJECTED STATE RESET ON GLOBAL ERROR LOG;",
    );
    assert_eq!(result, Ok(expected));
}

#[test]
fn an_alter_of_another_kind_is_refused() {
    let stored = entity(JUNCTION);
    let Ok(Statement::Processor(ProcessorStmt::Alter(alteration))) =
        nervix_nspl::parse_statement("ALTER REORDERER j SET MAX TIME 1s;")
    else {
        panic!("the ALTER parses");
    };
    assert_eq!(
        fold(&stored, &alteration).map_err(|e| e.message),
        Err("junction 'j' is not a reorderer".to_string())
    );
}

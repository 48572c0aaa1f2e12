//! Processor parsing beyond the golden files: tree shapes the text alone cannot show, and
//! robustness on every prefix of every golden processor script.

use crate::ast::processor::{AlterOp, ProcessorDef, ProcessorStmt, WindowExtent};
use crate::ast::{Branching, Statement};
use crate::{complete, format_script, parse_script, parse_statement, render_statement};

const GOLDEN: &[&str] = &[
    include_str!("../../../tests/golden/processor/create_junction.nspl"),
    include_str!("../../../tests/golden/processor/create_deduplicator.nspl"),
    include_str!("../../../tests/golden/processor/create_reorderer.nspl"),
    include_str!("../../../tests/golden/processor/create_window.nspl"),
    include_str!("../../../tests/golden/processor/create_inferencer.nspl"),
    include_str!("../../../tests/golden/processor/create_wasm.nspl"),
    include_str!("../../../tests/golden/processor/create_correlator.nspl"),
    include_str!("../../../tests/golden/processor/create_reingestor.nspl"),
    include_str!("../../../tests/golden/processor/create_generator.nspl"),
    include_str!("../../../tests/golden/processor/alter_shared.nspl"),
    include_str!("../../../tests/golden/processor/alter_deduplicator_reorderer.nspl"),
    include_str!("../../../tests/golden/processor/alter_window.nspl"),
    include_str!("../../../tests/golden/processor/alter_inferencer_wasm.nspl"),
    include_str!("../../../tests/golden/processor/alter_correlator.nspl"),
    include_str!("../../../tests/golden/processor/alter_reingestor_generator.nspl"),
    include_str!("../../../tests/golden/processor/reset_wasm.nspl"),
];

fn processor(src: &str) -> ProcessorStmt {
    match parse_statement(src) {
        Ok(Statement::Processor(p)) => p,
        other => panic!("not a processor statement: {other:?}"),
    }
}

#[test]
fn every_golden_script_round_trips() {
    for src in GOLDEN {
        let script = parse_script(src);
        assert!(script.errors.is_empty(), "{:?}", script.errors);
        for s in &script.statements {
            let text = render_statement(&s.statement);
            assert_eq!(parse_statement(&text).as_ref(), Ok(&s.statement), "{text}");
            let again = parse_statement(&text).map(|t| render_statement(&t));
            assert_eq!(again.as_deref(), Ok(text.as_str()));
        }
    }
}

#[test]
fn no_prefix_panics_in_parsing_formatting_or_completion() {
    let catalog = crate::complete::NoCatalog;
    for src in GOLDEN {
        for (i, _) in src.char_indices() {
            let prefix = &src[..i];
            let _ = parse_script(prefix);
            let _ = format_script(prefix);
            let _ = complete(src, i, &catalog);
        }
    }
}

#[test]
fn alter_lists_stop_at_each_operation() {
    let ProcessorStmt::Alter(alter) = processor(GOLDEN[9].split(";\n").next().unwrap_or("")) else {
        panic!("not an ALTER");
    };
    assert_eq!(alter.ops.len(), 22);
    assert!(matches!(alter.ops[0], AlterOp::AddFrom { side: None, .. }));
    let ProcessorStmt::Alter(alter) =
        processor("ALTER REORDERER r SET BY a, b, replace(c, 'x', 'y'), SET MAX TIME 1s")
    else {
        panic!("not an ALTER");
    };
    assert!(matches!(&alter.ops[0], AlterOp::SetBy(exprs) if exprs.len() == 3));
    assert_eq!(alter.ops.len(), 2);
}

#[test]
fn reingestors_carry_no_node_branching_and_windows_count_rows() {
    let ProcessorStmt::Create(c) = processor(GOLDEN[7]) else {
        panic!("not a CREATE");
    };
    assert_eq!(c.branching, None);
    assert!(c.routes.iter().all(|r| r.branching.is_some()));
    let ProcessorStmt::Create(c) = processor(
        "CREATE WINDOW PROCESSOR w FROM a WIDTH 100 ROWS STEP 10 ROWS UNBRANCHED \
         TO out SET n = COUNT(input.x) ON MESSAGE ERROR LOG",
    ) else {
        panic!("not a CREATE");
    };
    assert_eq!(c.branching, Some(Branching::Unbranched));
    assert!(matches!(
        c.def,
        ProcessorDef::Window {
            width: WindowExtent::Rows(100),
            step: WindowExtent::Rows(10),
            max_state_size: None,
            ..
        }
    ));
}

#[test]
fn completion_offers_only_the_kinds_operations() {
    let catalog = crate::complete::NoCatalog;
    let offered = |text: &str| -> Vec<String> {
        complete(text, text.len(), &catalog)
            .into_iter()
            .map(|c| c.text)
            .collect()
    };
    let junction = offered("ALTER JUNCTION j SET ");
    assert!(junction.contains(&"FILTER".to_string()), "{junction:?}");
    assert!(
        !junction.contains(&"DEDUPLICATE".to_string()),
        "{junction:?}"
    );
    let generator = offered("ALTER GENERATOR g SET ");
    assert!(generator.contains(&"EACH".to_string()), "{generator:?}");
    assert!(
        !generator.contains(&"ATTACHED".to_string()),
        "{generator:?}"
    );
}

//! With the `rkyv` feature, every syntax tree survives an rkyv round trip: each statement that
//! parses in the golden files (`tests/golden/**/*.nspl`) is serialised, read back through
//! validation (the bytes may come from disk, so they are checked, never trusted) and compared
//! with the original — by `==` and by its `Debug` text, which also covers the spans that
//! equality ignores.
//!
//! `cargo test -p nervix-nspl --features rkyv --test nspl_rkyv`

#![cfg(feature = "rkyv")]

mod common;

use std::fmt::Debug;
use std::fs;
use std::path::{Path, PathBuf};

use nervix_nspl::ast::{Expr, Spanned, Statement};
use proptest::prelude::*;
use rkyv::rancor::Error;
use rkyv::util::AlignedVec;

fn golden_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("golden directory is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            golden_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "nspl") {
            out.push(path);
        }
    }
}

/// Every statement that parses in the golden files, with the file it came from.
fn golden_statements() -> Vec<(PathBuf, Spanned)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut files = Vec::new();
    golden_files(&root, &mut files);
    files.sort();
    assert!(
        !files.is_empty(),
        "no golden files under {}",
        root.display()
    );
    let mut statements = Vec::new();
    for file in files {
        let src = fs::read_to_string(&file).expect("golden input is UTF-8");
        for statement in nervix_nspl::parse_script(&src).statements {
            statements.push((file.clone(), statement));
        }
    }
    statements
}

/// Serialises `value`, reads it back through validation and checks that nothing changed.
fn round_trip<T>(value: &T, context: &dyn Fn() -> String) -> AlignedVec
where
    T: Debug
        + PartialEq
        + rkyv::Archive
        + for<'a> rkyv::Serialize<
            rkyv::api::high::HighSerializer<
                AlignedVec,
                rkyv::ser::allocator::ArenaHandle<'a>,
                Error,
            >,
        >,
    T::Archived: for<'a> rkyv::bytecheck::CheckBytes<rkyv::api::high::HighValidator<'a, Error>>
        + rkyv::Deserialize<T, rkyv::api::high::HighDeserializer<Error>>,
{
    let bytes = rkyv::to_bytes::<Error>(value)
        .unwrap_or_else(|e| panic!("serialising failed: {e}\n{}", context()));
    let back: T = rkyv::from_bytes::<T, Error>(&bytes)
        .unwrap_or_else(|e| panic!("validated read-back failed: {e}\n{}", context()));
    assert_eq!(
        &back,
        value,
        "tree changed in the round trip\n{}",
        context()
    );
    assert_eq!(
        format!("{back:?}"),
        format!("{value:?}"),
        "spans or fields changed in the round trip\n{}",
        context()
    );
    bytes
}

#[test]
fn golden_statements_round_trip_through_rkyv() {
    let statements = golden_statements();
    assert!(
        statements.len() > 100,
        "expected the golden files to hold many statements, found {}",
        statements.len()
    );
    // [session, catalog, ingestor, processor, emitter]
    let mut families = [0usize; 5];
    for (file, spanned) in &statements {
        let context = || format!("{}: {:?}", file.display(), spanned.statement);
        families[match &spanned.statement {
            Statement::Session(_) => 0,
            Statement::Catalog(_) => 1,
            Statement::Ingestor(_) => 2,
            Statement::Processor(_) => 3,
            Statement::Emitter(_) => 4,
        }] += 1;
        round_trip(&spanned.statement, &context);
        round_trip(spanned, &context);
    }
    assert!(
        families.iter().all(|&n| n > 0),
        "every statement family should be covered: {families:?}"
    );
}

#[test]
fn damaged_bytes_are_refused_not_trusted() {
    // Not an archive at all: an out-of-range variant tag and wild relative pointers.
    let mut garbage = AlignedVec::<16>::new();
    garbage.extend_from_slice(&[0xFF; 64]);
    assert!(rkyv::from_bytes::<Statement, Error>(&garbage).is_err());
    let empty = AlignedVec::<16>::new();
    assert!(rkyv::from_bytes::<Statement, Error>(&empty).is_err());

    // Truncated archives of real statements must be refused or, at worst, read as some other
    // valid tree — never panic or read out of bounds.
    let mut refused = 0;
    for (file, spanned) in golden_statements().iter().step_by(7) {
        let context = || format!("{}: {:?}", file.display(), spanned.statement);
        let bytes = round_trip(&spanned.statement, &context);
        for cut in [1, 4, bytes.len() / 2] {
            if cut >= bytes.len() {
                continue;
            }
            let mut damaged = AlignedVec::<16>::new();
            damaged.extend_from_slice(&bytes[..bytes.len() - cut]);
            if rkyv::from_bytes::<Statement, Error>(&damaged).is_err() {
                refused += 1;
            }
        }
    }
    assert!(refused > 0, "no truncated archive was refused");
}

#[test]
fn maximally_nested_expression_round_trips() {
    // The deepest `(NOT (NOT … x = 1))` the parser accepts: the deepest tree rkyv must carry.
    let max = nervix_nspl::parse::MAX_NESTING_DEPTH as usize;
    let (depth, text, statement) = (1..=max)
        .rev()
        .find_map(|depth| {
            let text = format!(
                "CREATE SUBSCRIPTION s TO r WHERE {}x = 1{};",
                "(NOT ".repeat(depth),
                ")".repeat(depth)
            );
            let statement = nervix_nspl::parse_statement(&text).ok()?;
            Some((depth, text, statement))
        })
        .expect("some nesting parses");
    assert!(depth >= max / 4, "only {depth} levels parse");
    round_trip(&statement, &|| text.clone());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn generated_expressions_round_trip(expr in common::tree()) {
        round_trip::<Expr>(&expr, &|| format!("{expr:?}"));
    }
}

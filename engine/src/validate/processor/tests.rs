//! Scripts that need uploaded resource versions (inferencers, WASM processors).
//!
//! No statement uploads a resource version yet (UPLOAD RESOURCE is the node's, in a later
//! issue), so the shared harness (`tests/validation_cases.rs`) cannot create the resources
//! these processors bind. This runner is the same harness with one test-only addition: before
//! the first statement, each line
//!
//! ```text
//! -- resource: <name> <version> <file> [<file> …]
//! ```
//!
//! puts one completed version of `<name>` holding those files into the catalog through
//! [`Change::PutResource`], exactly as an upload will. Scripts live in
//! `tests/validation/processor/with_resources/*.nsplr` — not `.nspl`, so the shared harness,
//! which has no resources, does not run them. Everything else is the harness's contract: the
//! script runs in domain `test`, and a statement preceded by `-- error: <message>` must be
//! refused with exactly that message while every other statement must be accepted.

use std::fs;
use std::path::{Path, PathBuf};

use nervix_nspl::ast::catalog::{CatalogStmt, CreateResource};
use nervix_nspl::ast::session::SessionStmt;
use nervix_nspl::ast::Ident;
use nervix_nspl::{Span, Statement};

use crate::catalog::plan::{plan_statement, StatementContext};
use crate::catalog::{Catalog, Change, Resource, ResourceVersion};

fn scripts() -> Vec<PathBuf> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/validation/processor/with_resources");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("the with_resources directory is readable")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "nsplr"))
        .collect();
    files.sort();
    files
}

/// The resources a script declares with `-- resource:` lines.
fn declared_resources(src: &str) -> Vec<Resource> {
    let mut resources: Vec<Resource> = Vec::new();
    for line in src.lines() {
        let Some(rest) = line.trim().strip_prefix("-- resource: ") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let name = words.next().expect("a resource line names the resource");
        let number: u64 = words
            .next()
            .and_then(|n| n.parse().ok())
            .expect("a resource line gives a version number");
        let files = words.map(|f| (f.replace("%20", " "), 1024)).collect();
        let version = ResourceVersion { number, files };
        match resources.iter_mut().find(|r| r.name == name) {
            Some(resource) => resource.versions.push(version),
            None => resources.push(Resource {
                name: name.to_string(),
                definition: Statement::Catalog(CatalogStmt::CreateResource(CreateResource {
                    if_not_exists: false,
                    name: Ident::new(name),
                })),
                versions: vec![version],
            }),
        }
    }
    resources
}

/// The expected refusal written on the line before `statement_start`, if any.
fn expectation(src: &str, statement_start: usize) -> Option<String> {
    let before = src[..statement_start].trim_end_matches([' ', '\t', '\n', '\r']);
    let last_line = before.rsplit('\n').next()?;
    last_line
        .trim()
        .strip_prefix("-- error: ")
        .map(|m| m.trim().to_string())
}

fn run_script(path: &Path) -> Vec<String> {
    let src = fs::read_to_string(path).expect("script is UTF-8");
    let script = nervix_nspl::parse_script(&src);
    let mut failures: Vec<String> = script
        .errors
        .iter()
        .map(|e| {
            format!(
                "parse error: {}",
                e.render(&path.display().to_string(), &src)
            )
        })
        .collect();
    let mut catalog = Catalog::default();
    for resource in declared_resources(&src) {
        catalog.apply_change(&Change::PutResource(resource));
    }
    let setup = nervix_nspl::parse_statement("CREATE DOMAIN test;").expect("setup parses");
    let context = StatementContext {
        domain: None,
        span: Span::default(),
    };
    for change in plan_statement(&catalog, context, &setup)
        .expect("setup applies")
        .changes
    {
        catalog.apply_change(&change);
    }
    let mut domain = String::from("test");
    for spanned in &script.statements {
        let at = nervix_nspl::position(&src, spanned.span.start);
        let expected = expectation(&src, spanned.span.start as usize);
        if let Statement::Session(SessionStmt::Use(name)) = &spanned.statement {
            domain = name.name.clone();
            continue;
        }
        let context = StatementContext {
            domain: Some(&domain),
            span: spanned.span,
        };
        match (
            plan_statement(&catalog, context, &spanned.statement),
            expected,
        ) {
            (Ok(planned), None) => {
                for change in &planned.changes {
                    catalog.apply_change(change);
                }
            }
            (Ok(_), Some(message)) => {
                failures.push(format!("{at}: accepted, but expected refusal `{message}`"));
            }
            (Err(error), None) => failures.push(format!("{at}: refused: {}", error.message)),
            (Err(error), Some(message)) if error.message != message => failures.push(format!(
                "{at}: refused with `{}`, expected `{message}`",
                error.message
            )),
            (Err(_), Some(_)) => {}
        }
    }
    failures
}

#[test]
fn scripts_with_resources_behave_as_annotated() {
    let files = scripts();
    assert!(!files.is_empty(), "no .nsplr scripts found");
    let mut report = Vec::new();
    for file in &files {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for failure in run_script(file) {
            report.push(format!("{name}: {failure}"));
        }
    }
    assert!(
        report.is_empty(),
        "{} problems:\n{}",
        report.len(),
        report.join("\n")
    );
}

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

//! Data-driven validation cases: every `tests/validation/**/*.nspl` is a script run statement
//! by statement against a fresh catalog through the planner (the same code the console runs,
//! without the node around it). The script starts in domain `test` (already created and in
//! use). A statement preceded by a line `-- error: <message>` must be refused with exactly that
//! message; every other statement must be accepted and its changes applied. Lines
//! `-- resource: <name> <version> <file> …` put completed resource versions into the catalog
//! first (the console runner uploads them for real).

mod support;

use std::fs;
use std::path::{Path, PathBuf};

use nervix::catalog::plan::{plan_statement, StatementContext};
use nervix::catalog::{Catalog, Change, Resource, ResourceVersion};
use nervix_nspl::ast::catalog::{CatalogStmt, CreateResource};
use nervix_nspl::ast::session::SessionStmt;
use nervix_nspl::ast::Ident;
use nervix_nspl::Statement;

fn scripts(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("validation directory is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            scripts(&path, out);
        } else if path.extension().is_some_and(|e| e == "nspl") {
            out.push(path);
        }
    }
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
    let mut failures = Vec::new();
    for error in &script.errors {
        failures.push(format!(
            "parse error: {}",
            error.render(&path.display().to_string(), &src)
        ));
    }
    let mut catalog = Catalog::default();
    let mut domain = String::from("test");
    let setup = nervix_nspl::parse_statement("CREATE DOMAIN test;").expect("setup parses");
    let context = StatementContext {
        domain: None,
        span: nervix_nspl::Span::default(),
        wall_ns: 0,
    };
    for change in plan_statement(&catalog, context, &setup)
        .expect("setup applies")
        .changes
    {
        catalog.apply_change(&change);
    }
    for (name, versions) in support::resources::declared_resources(&src) {
        let resource = Resource {
            definition: Statement::Catalog(CatalogStmt::CreateResource(CreateResource {
                if_not_exists: false,
                name: Ident::new(name.as_str()),
            })),
            name,
            versions: versions
                .into_iter()
                .map(|v| ResourceVersion {
                    number: v.number,
                    files: v.files.into_iter().map(|f| (f, 1)).collect(),
                })
                .collect(),
        };
        catalog.apply_change(&Change::PutResource(resource));
    }
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
            wall_ns: 0,
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
                failures.push(format!("{at}: accepted, but expected refusal `{message}`"))
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
fn validation_scripts_behave_as_annotated() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/validation");
    let mut files = Vec::new();
    scripts(&root, &mut files);
    files.sort();
    assert!(!files.is_empty(), "no scripts under {}", root.display());
    let mut report = Vec::new();
    for file in &files {
        for failure in run_script(file) {
            report.push(format!(
                "{}: {failure}",
                file.strip_prefix(&root).unwrap_or(file).display()
            ));
        }
    }
    assert!(
        report.is_empty(),
        "{} problems:\n{}",
        report.len(),
        report.join("\n")
    );
    eprintln!("{} validation scripts checked", files.len());
}

//! Golden files: every `tests/golden/**/*.nspl` is parsed and compared with the `.expected`
//! file beside it — the canonical text when the script parses, or one
//! `-- error: <line>:<col> <message>` line per refused statement when it does not.
//!
//! `NERVIX_BLESS=1 cargo test -p nervix-nspl --test nspl_golden` rewrites the expectations;
//! review the diff before committing. Every canonical output must also parse back to an equal
//! tree and format to itself.

use std::fs;
use std::path::{Path, PathBuf};

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

fn actual_output(src: &str) -> String {
    match nervix_nspl::format_script(src) {
        Ok(canonical) => {
            let reparsed = nervix_nspl::parse_script(&canonical);
            let original = nervix_nspl::parse_script(src);
            assert!(
                reparsed.errors.is_empty(),
                "canonical text does not parse: {:?}\n{canonical}",
                reparsed.errors
            );
            let strip = |s: &nervix_nspl::Script| {
                s.statements
                    .iter()
                    .map(|s| s.statement.clone())
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                strip(&original),
                strip(&reparsed),
                "canonical text parses to a different tree:\n{canonical}"
            );
            assert_eq!(
                nervix_nspl::format_script(&canonical).expect("canonical text formats"),
                canonical,
                "formatting is not idempotent"
            );
            canonical
        }
        Err(errors) => errors
            .iter()
            .map(|e| {
                let at = nervix_nspl::position(src, e.span.start);
                format!("-- error: {at} {}\n", e.message)
            })
            .collect(),
    }
}

#[test]
fn golden_files_match() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut files = Vec::new();
    golden_files(&root, &mut files);
    files.sort();
    assert!(
        !files.is_empty(),
        "no golden files under {}",
        root.display()
    );
    let bless = std::env::var_os("NERVIX_BLESS").is_some();
    let mut failures = Vec::new();
    for file in &files {
        let src = fs::read_to_string(file).expect("golden input is UTF-8");
        let actual = actual_output(&src);
        let expected_path = file.with_extension("expected");
        if bless {
            fs::write(&expected_path, &actual).expect("write expectation");
            continue;
        }
        let expected = fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual {
            failures.push(format!(
                "{}:\n--- expected\n{expected}--- actual\n{actual}",
                file.strip_prefix(&root).unwrap_or(file).display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} golden files differ (NERVIX_BLESS=1 rewrites them):\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    eprintln!("{} golden files checked", files.len());
}

//! Fuzzes the NSPL front end: any text must parse without panicking, and any script that parses
//! cleanly must render to canonical text that parses cleanly again and is a fixed point of the
//! formatter.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nervix_nspl::{Script, Statement};

fuzz_target!(|bytes: &[u8]| {
    // Only valid UTF-8 reaches the parser in production (the CLI and console refuse the rest).
    let Ok(src) = std::str::from_utf8(bytes) else {
        return;
    };
    let script = nervix_nspl::parse_script(src);
    if !script.errors.is_empty() {
        return;
    }
    let canonical = match nervix_nspl::format_script(src) {
        Ok(canonical) => canonical,
        Err(errors) => panic!("parse_script accepted what format_script refused: {errors:?}"),
    };
    let reparsed = nervix_nspl::parse_script(&canonical);
    assert!(
        reparsed.errors.is_empty(),
        "canonical text does not parse: {:?}\n--- canonical ---\n{canonical}",
        reparsed.errors
    );
    assert_eq!(
        statements(&script),
        statements(&reparsed),
        "canonical text parses to a different tree\n--- canonical ---\n{canonical}"
    );
    assert_eq!(
        nervix_nspl::format_script(&canonical).as_deref(),
        Ok(canonical.as_str()),
        "formatting is not idempotent"
    );
});

/// A script's statements without the spans that wrap each whole statement.
fn statements(script: &Script) -> Vec<Statement> {
    script
        .statements
        .iter()
        .map(|spanned| spanned.statement.clone())
        .collect()
}

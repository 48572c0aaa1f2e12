//! The `nervix` binary's offline commands, run as a user would: `fmt`, `fmt --check`, `check`
//! and `version` on real files and on standard input, checking output and exit codes.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const NERVIX: &str = env!("CARGO_BIN_EXE_nervix");

/// Statements the parser accepts today, written loosely.
const LOOSE: &str = "use sales; start;\nshow  ingestors; drop relay if exists r;";

const CANONICAL: &str = "USE sales;\n\nSTART;\n\nSHOW INGESTORS;\n\nDROP RELAY IF EXISTS r;\n";

/// One bad statement between two good ones, so the error is on line 2.
const BROKEN: &str = "START;\nSHOW INGESTORZ;\nSTOP;\n";

/// A fresh directory for one test, under cargo's scratch space for integration tests.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli_fmt_check")
        .join(test);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create scratch directory");
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    fs::write(&path, text).expect("write script");
    path.to_str().expect("UTF-8 scratch path").to_owned()
}

fn nervix(args: &[&str]) -> Output {
    nervix_with_stdin(args, "")
}

fn nervix_with_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(NERVIX)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nervix");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("wait for nervix")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("UTF-8 stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("UTF-8 stderr")
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exit code, not a signal")
}

#[test]
fn version_prints_name_and_version() {
    let output = nervix(&["version"]);
    assert_eq!(code(&output), 0);
    assert_eq!(
        stdout(&output),
        format!("nervix {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn fmt_prints_canonical_text() {
    let dir = scratch("fmt_prints_canonical_text");
    let file = write(&dir, "loose.nspl", LOOSE);
    let output = nervix(&["fmt", &file]);
    assert_eq!(code(&output), 0, "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), CANONICAL);
}

#[test]
fn fmt_output_is_a_fixed_point() {
    let dir = scratch("fmt_output_is_a_fixed_point");
    let file = write(&dir, "canonical.nspl", CANONICAL);
    let output = nervix(&["fmt", &file]);
    assert_eq!(code(&output), 0);
    assert_eq!(stdout(&output), CANONICAL);
}

#[test]
fn fmt_of_several_files_prints_each_in_order() {
    let dir = scratch("fmt_of_several_files_prints_each_in_order");
    let first = write(&dir, "first.nspl", "start;");
    let second = write(&dir, "second.nspl", "stop;");
    let output = nervix(&["fmt", &first, &second]);
    assert_eq!(code(&output), 0);
    assert_eq!(stdout(&output), "START;\n\nSTOP;\n");
}

#[test]
fn fmt_reads_stdin() {
    let output = nervix_with_stdin(&["fmt", "-"], LOOSE);
    assert_eq!(code(&output), 0);
    assert_eq!(stdout(&output), CANONICAL);
}

#[test]
fn fmt_refuses_a_script_that_does_not_parse() {
    let dir = scratch("fmt_refuses_a_script_that_does_not_parse");
    let file = write(&dir, "broken.nspl", BROKEN);
    let output = nervix(&["fmt", &file]);
    assert_eq!(code(&output), 2);
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).starts_with(&format!("{file}:2:6: error: ")),
        "stderr: {}",
        stderr(&output)
    );
}

#[test]
fn fmt_check_is_silent_and_succeeds_on_canonical_files() {
    let dir = scratch("fmt_check_is_silent_and_succeeds_on_canonical_files");
    let file = write(&dir, "canonical.nspl", CANONICAL);
    let output = nervix(&["fmt", "--check", &file]);
    assert_eq!(code(&output), 0);
    assert_eq!(stdout(&output), "");
    assert_eq!(stderr(&output), "");
}

#[test]
fn fmt_check_names_files_that_are_not_canonical() {
    let dir = scratch("fmt_check_names_files_that_are_not_canonical");
    let canonical = write(&dir, "canonical.nspl", CANONICAL);
    let loose = write(&dir, "loose.nspl", "START;\n\nshow  ingestors;\n");
    let output = nervix(&["fmt", "--check", &canonical, &loose]);
    assert_eq!(code(&output), 1);
    assert_eq!(
        stdout(&output),
        format!("{loose}: not canonical\n@@ -3,1 +3,1 @@\n-show  ingestors;\n+SHOW INGESTORS;\n")
    );
}

#[test]
fn fmt_check_exits_2_when_any_file_does_not_parse() {
    let dir = scratch("fmt_check_exits_2_when_any_file_does_not_parse");
    let loose = write(&dir, "loose.nspl", LOOSE);
    let broken = write(&dir, "broken.nspl", BROKEN);
    let output = nervix(&["fmt", "--check", &loose, &broken]);
    assert_eq!(code(&output), 2);
    assert!(stdout(&output).starts_with(&format!("{loose}: not canonical\n")));
    assert!(stderr(&output).starts_with(&format!("{broken}:2:6: error: ")));
}

#[test]
fn check_is_silent_on_scripts_that_parse() {
    let dir = scratch("check_is_silent_on_scripts_that_parse");
    let file = write(&dir, "loose.nspl", LOOSE);
    let output = nervix(&["check", &file]);
    assert_eq!(code(&output), 0);
    assert_eq!(stdout(&output), "");
    assert_eq!(stderr(&output), "");
}

#[test]
fn check_reports_every_error_of_every_file() {
    let dir = scratch("check_reports_every_error_of_every_file");
    let broken = write(&dir, "broken.nspl", BROKEN);
    let twice = write(
        &dir,
        "twice.nspl",
        "SHOW INGESTORZ;\nSTART;\n  SHOW INGESTORZ;\n",
    );
    let good = write(&dir, "good.nspl", CANONICAL);
    let output = nervix(&["check", &broken, &good, &twice]);
    assert_eq!(code(&output), 2);
    let out = stdout(&output);
    let positions: Vec<&str> = out
        .lines()
        .map(|line| {
            let (position, message) = line.split_once(": error: ").expect("diagnostic line");
            assert!(message.contains("INGESTORZ"), "message: {message}");
            position
        })
        .collect();
    assert_eq!(
        positions,
        [
            format!("{broken}:2:6"),
            format!("{twice}:1:6"),
            format!("{twice}:3:8")
        ]
    );
    assert_eq!(stderr(&output), "nervix check: 3 errors in 2 of 3 files\n");
}

#[test]
fn check_names_stdin_as_stdin() {
    let output = nervix_with_stdin(&["check", "-"], BROKEN);
    assert_eq!(code(&output), 2);
    let out = stdout(&output);
    assert!(out.starts_with("<stdin>:2:6: error: "), "stdout: {out}");
    assert!(out.contains("(did you mean `INGESTORS`?)"), "stdout: {out}");
}

#[test]
fn unreadable_files_are_reported_and_the_rest_still_checked() {
    let dir = scratch("unreadable_files_are_reported_and_the_rest_still_checked");
    let missing = dir.join("missing.nspl");
    let missing = missing.to_str().expect("UTF-8 scratch path");
    let broken = write(&dir, "broken.nspl", BROKEN);
    let output = nervix(&["check", missing, &broken]);
    assert_eq!(code(&output), 2);
    let err = stderr(&output);
    assert!(
        err.starts_with(&format!("error: cannot read {missing}: ")),
        "stderr: {err}"
    );
    assert!(stdout(&output).starts_with(&format!("{broken}:2:6: error: ")));

    let output = nervix(&["fmt", missing]);
    assert_eq!(code(&output), 2);
    assert!(stderr(&output).starts_with(&format!("error: cannot read {missing}: ")));
}

#[test]
fn input_that_is_not_utf8_is_refused() {
    let dir = scratch("input_that_is_not_utf8_is_refused");
    let path = dir.join("latin1.nspl");
    fs::write(&path, b"SHOW \xff;\n").expect("write script");
    let output = nervix(&["check", path.to_str().expect("UTF-8 scratch path")]);
    assert_eq!(code(&output), 2);
    assert!(
        stderr(&output).contains("it is not UTF-8 text"),
        "stderr: {}",
        stderr(&output)
    );
}

#[test]
fn scripts_over_the_size_limit_are_refused() {
    let dir = scratch("scripts_over_the_size_limit_are_refused");
    let path = dir.join("huge.nspl");
    let file = fs::File::create(&path).expect("create script");
    file.set_len(64 * 1024 * 1024 + 1).expect("size script");
    let output = nervix(&["check", path.to_str().expect("UTF-8 scratch path")]);
    fs::remove_file(&path).expect("remove huge script");
    assert_eq!(code(&output), 2);
    assert!(
        stderr(&output).contains("larger than 64 MiB"),
        "stderr: {}",
        stderr(&output)
    );
}

#[test]
fn missing_file_arguments_are_a_usage_error() {
    let output = nervix(&["check"]);
    assert_eq!(code(&output), 2);
    assert!(stderr(&output).contains("<FILE>"));
}

#[test]
fn the_readme_demo_graph_checks_and_is_canonical() {
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/demo.nspl");
    let checked = nervix(&["check", demo]);
    assert_eq!(code(&checked), 0, "{}", stdout(&checked));
    let formatted = nervix(&["fmt", "--check", demo]);
    assert_eq!(code(&formatted), 0, "{}", stdout(&formatted));
}

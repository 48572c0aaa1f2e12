//! Rules over the whole workspace, run as tests so that `cargo test --workspace` (and so CI)
//! enforces them: the crate dependency graph of DESIGN §2, the size limit on source files,
//! rustfmt and clippy.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// DESIGN §2: each workspace crate and the workspace crates it may depend on (normal and build
/// dependencies; dev-dependencies are free). A new crate fails the test until it has a row.
const ALLOWED_DEPENDENCIES: &[(&str, &[&str])] = &[
    ("nervix-nspl", &[]),
    ("nervix-shards", &[]),
    ("nervix-raft", &[]),
    ("nervix-net", &["nervix-shards"]),
    ("nervix-connectors", &["nervix-shards", "nervix-net"]),
    (
        "nervix",
        &[
            "nervix-nspl",
            "nervix-shards",
            "nervix-raft",
            "nervix-net",
            "nervix-connectors",
        ],
    ),
    ("nervix-bench", &["nervix"]),
];

/// DESIGN §2: no file over ~1,500 lines.
const MAX_LINES_PER_FILE: usize = 1_500;

/// Directories the line-limit walk skips: build output, git's own files and vendored
/// third-party crates (vendor/glommio/NERVIX.md).
const SKIPPED_DIRECTORIES: &[&str] = &["target", ".git", "vendor"];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the engine crate sits one level below the workspace root")
        .to_path_buf()
}

/// The cargo that runs this test, so nested runs use the same toolchain.
fn cargo() -> Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from(env!("CARGO")));
    let mut command = Command::new(program);
    command.current_dir(workspace_root());
    command
}

fn run(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error}"))
}

fn describe(output: &Output) -> String {
    format!(
        "{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn crates_depend_only_as_the_design_allows() {
    let output = run(cargo().args(["metadata", "--format-version", "1", "--no-deps"]));
    assert!(output.status.success(), "{}", describe(&output));
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let packages = metadata["packages"]
        .as_array()
        .expect("metadata lists packages");
    let workspace_crates: BTreeSet<&str> = packages
        .iter()
        .map(|package| package["name"].as_str().expect("package name"))
        .collect();

    let mut violations = Vec::new();
    for package in packages {
        let name = package["name"].as_str().expect("package name");
        let Some((_, allowed)) = ALLOWED_DEPENDENCIES
            .iter()
            .find(|(crate_name, _)| *crate_name == name)
        else {
            violations.push(format!(
                "{name} is not in DESIGN §2's table: add its row to ALLOWED_DEPENDENCIES"
            ));
            continue;
        };
        let dependencies = package["dependencies"]
            .as_array()
            .expect("package lists dependencies");
        for dependency in dependencies {
            let dependency_name = dependency["name"].as_str().expect("dependency name");
            let kind = dependency["kind"].as_str();
            let is_dev = kind == Some("dev");
            if is_dev
                || !workspace_crates.contains(dependency_name)
                || allowed.contains(&dependency_name)
            {
                continue;
            }
            violations.push(format!(
                "{name} depends on {dependency_name} ({} dependency); DESIGN §2 allows only {allowed:?}",
                kind.unwrap_or("normal")
            ));
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn no_rust_file_is_over_the_line_limit() {
    let mut too_long = Vec::new();
    let mut pending = vec![workspace_root()];
    while let Some(directory) = pending.pop() {
        let entries = fs::read_dir(&directory)
            .unwrap_or_else(|error| panic!("cannot list {}: {error}", directory.display()));
        for entry in entries {
            let entry = entry.expect("directory entry");
            let path = entry.path();
            let file_type = entry.file_type().expect("file type");
            if file_type.is_dir() {
                let skipped = SKIPPED_DIRECTORIES
                    .iter()
                    .any(|skipped| entry.file_name() == *skipped);
                if !skipped {
                    pending.push(path);
                }
            } else if file_type.is_file() && path.extension().is_some_and(|ext| ext == "rs") {
                let bytes = fs::read(&path)
                    .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
                let lines = bytes.iter().filter(|&&byte| byte == b'\n').count();
                if lines > MAX_LINES_PER_FILE {
                    too_long.push(format!("{} has {lines} lines", path.display()));
                }
            }
        }
    }
    too_long.sort();
    assert!(
        too_long.is_empty(),
        "files over {MAX_LINES_PER_FILE} lines (split them by concept):\n{}",
        too_long.join("\n")
    );
}

#[test]
fn code_is_formatted() {
    let output = run(cargo().args(["fmt", "--all", "--", "--check", "--color=never"]));
    assert!(
        output.status.success(),
        "`cargo fmt --all -- --check` found differences (run `cargo fmt --all`):\n{}",
        describe(&output)
    );
}

#[test]
fn clippy_finds_no_warnings() {
    let output = run(cargo()
        .args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ])
        .env("CARGO_TARGET_DIR", clippy_target_dir()));
    assert!(
        output.status.success(),
        "`cargo clippy --workspace --all-targets -- -D warnings` failed:\n{}",
        describe(&output)
    );
}

/// A target directory of clippy's own inside this test's, so the nested cargo neither waits on
/// the lock the running `cargo test` holds nor invalidates its build.
fn clippy_target_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    workspace_root().join(target).join("clippy")
}

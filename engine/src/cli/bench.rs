//! `nervix bench <scenario> …`: the scenarios live in the `nervix-bench` binary (the bench
//! crate depends on the engine, so this binary cannot link it). This command runs the
//! `nervix-bench` that sits next to the running `nervix`, passes every argument through, and
//! exits with its exit code.

use std::ffi::OsString;

use anyhow::Context;
use clap::Args;

use super::Status;

#[derive(Args)]
#[command(disable_help_flag = true)]
pub struct BenchArguments {
    /// `<scenario> [--seconds S] [--shards N] [--rate R] [--batch-rows N] [--json]`,
    /// `compare <baseline.json> <run.json>` or `list` (`nervix bench --help` for all).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

/// Runs `nervix-bench` with the arguments; exits with its code. Missing: says how to build it.
pub fn run(arguments: &BenchArguments) -> anyhow::Result<Status> {
    let exe = std::env::current_exe().context("cannot locate the running nervix executable")?;
    let bench = exe.with_file_name(format!("nervix-bench{}", std::env::consts::EXE_SUFFIX));
    if !bench.is_file() {
        eprintln!(
            "error: {} not found; `nervix bench` runs the nervix-bench binary next to nervix.\n\
             Build it with: cargo build --release -p nervix-bench\n\
             (or `cargo build -p nervix-bench` for the debug build next to a debug nervix)",
            bench.display()
        );
        return Ok(Status::Refused);
    }
    let status = std::process::Command::new(&bench)
        .args(&arguments.args)
        .status()
        .with_context(|| format!("cannot run {}", bench.display()))?;
    // The child's exact code (a signal counts as a failure).
    std::process::exit(status.code().unwrap_or(1));
}

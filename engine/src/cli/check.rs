//! `nervix check FILE…|-`: parses scripts offline and reports every error of every script as
//! `<file>:<line>:<col>: error: <message>` on standard output.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::{read_or_report, Status, STDOUT_FAILED};

#[derive(Args)]
pub struct CheckArguments {
    /// Scripts to check; `-` reads standard input (reported as `<stdin>`). Prints nothing when
    /// all parse; otherwise one line per error and a summary on standard error.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
}

pub fn run(arguments: &CheckArguments) -> anyhow::Result<Status> {
    let mut stdout = std::io::stdout().lock();
    let mut errors = 0;
    let mut failed_files = 0;
    for file in &arguments.files {
        let Some(script) = read_or_report(file) else {
            errors += 1;
            failed_files += 1;
            continue;
        };
        let parsed = nervix_nspl::parse_script(&script.text);
        if parsed.errors.is_empty() {
            continue;
        }
        errors += parsed.errors.len();
        failed_files += 1;
        for error in &parsed.errors {
            writeln!(stdout, "{}", error.render(&script.name, &script.text))
                .context(STDOUT_FAILED)?;
        }
    }
    stdout.flush().context(STDOUT_FAILED)?;
    if errors == 0 {
        return Ok(Status::Success);
    }
    eprintln!(
        "nervix check: {} in {} of {}",
        counted(errors, "error"),
        failed_files,
        counted(arguments.files.len(), "file")
    );
    Ok(Status::Refused)
}

fn counted(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

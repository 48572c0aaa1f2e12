//! The offline commands of the `nervix` binary: `fmt`, `check` and `version`.
//!
//! Each command reports problems with single files as it meets them and goes on with the next
//! file, so one run shows everything wrong; the worst [`Status`] seen decides the exit code.

pub mod bench;
pub mod check;
pub mod console;
pub mod demo;
pub mod dev;
mod diff;
pub mod fmt;
mod input;
pub mod serve;
pub mod state;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

/// How a command ended, ordered from best to worst so that results of several files combine
/// with `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Success,
    /// `fmt --check` met a file that parses but is not in canonical form.
    NotCanonical,
    /// Bad usage, unreadable input or parse errors.
    Refused,
}

impl From<Status> for ExitCode {
    fn from(status: Status) -> ExitCode {
        match status {
            Status::Success => ExitCode::SUCCESS,
            Status::NotCanonical => ExitCode::from(1),
            // Also what clap uses for usage errors.
            Status::Refused => ExitCode::from(2),
        }
    }
}

/// `nervix version`.
pub fn print_version() -> anyhow::Result<Status> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "nervix {}", env!("CARGO_PKG_VERSION")).context(STDOUT_FAILED)?;
    Ok(Status::Success)
}

/// Context for a failed write to standard output, such as a closed pipe.
const STDOUT_FAILED: &str = "cannot write to standard output";

/// Reads the script `file` names, or reports on standard error why it cannot.
fn read_or_report(file: &std::path::Path) -> Option<input::Script> {
    match input::read_script(file) {
        Ok(script) => Some(script),
        Err(error) => {
            eprintln!("error: {error:#}");
            None
        }
    }
}

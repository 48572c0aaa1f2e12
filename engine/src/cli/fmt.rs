//! `nervix fmt [--check] FILE…|-`: prints scripts in canonical NSPL, or with `--check` names
//! the scripts that are not canonical.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::{diff, read_or_report, Status, STDOUT_FAILED};

#[derive(Args)]
pub struct FmtArguments {
    /// Print nothing for canonical scripts; name each other one with a diff hint and exit 1.
    #[arg(long)]
    check: bool,
    /// Scripts to format; `-` reads standard input. With several, their canonical texts are
    /// printed in order, separated by a blank line.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
}

pub fn run(arguments: &FmtArguments) -> anyhow::Result<Status> {
    let mut stdout = std::io::stdout().lock();
    let mut status = Status::Success;
    let mut printed_any = false;
    for file in &arguments.files {
        let Some(script) = read_or_report(file) else {
            status = Status::Refused;
            continue;
        };
        let canonical = match nervix_nspl::format_script(&script.text) {
            Ok(canonical) => canonical,
            Err(errors) => {
                for error in &errors {
                    eprintln!("{}", error.render(&script.name, &script.text));
                }
                status = Status::Refused;
                continue;
            }
        };
        if arguments.check {
            if canonical != script.text {
                let hint = diff::hint(&script.text, &canonical);
                write!(stdout, "{}: not canonical\n{hint}", script.name).context(STDOUT_FAILED)?;
                status = status.max(Status::NotCanonical);
            }
        } else if !canonical.is_empty() {
            // A blank line between scripts keeps the concatenation itself canonical.
            if printed_any {
                writeln!(stdout).context(STDOUT_FAILED)?;
            }
            stdout
                .write_all(canonical.as_bytes())
                .context(STDOUT_FAILED)?;
            printed_any = true;
        }
    }
    stdout.flush().context(STDOUT_FAILED)?;
    Ok(status)
}

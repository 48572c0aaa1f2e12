//! Reading the scripts named on the command line: files, or standard input for `-`, bounded
//! in size and required to be UTF-8.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use anyhow::{bail, Context};

/// The largest script the commands read; anything longer is refused rather than buffered.
const MAX_SCRIPT_BYTES: u64 = 64 * MIB;

const MIB: u64 = 1024 * 1024;

/// The argument that stands for standard input.
const STDIN_ARGUMENT: &str = "-";

/// The file name diagnostics use for standard input.
const STDIN_NAME: &str = "<stdin>";

/// One script as read, with the name diagnostics call it by.
pub struct Script {
    pub name: String,
    pub text: String,
}

/// Reads the script `argument` names; `-` is standard input.
pub fn read_script(argument: &Path) -> anyhow::Result<Script> {
    let (name, bytes) = if argument == Path::new(STDIN_ARGUMENT) {
        (STDIN_NAME.to_owned(), read_bounded(io::stdin().lock()))
    } else {
        let name = argument.display().to_string();
        let bytes = File::open(argument).and_then(read_bounded);
        (name, bytes)
    };
    let bytes = bytes.with_context(|| format!("cannot read {name}"))?;
    if bytes.len() as u64 > MAX_SCRIPT_BYTES {
        bail!(
            "cannot read {name}: larger than {} MiB, the limit for one script",
            MAX_SCRIPT_BYTES / MIB
        );
    }
    let text = String::from_utf8(bytes)
        .with_context(|| format!("cannot read {name}: it is not UTF-8 text"))?;
    Ok(Script { name, text })
}

/// Reads at most one byte past the limit, enough to tell that input is too large.
fn read_bounded(reader: impl Read) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(MAX_SCRIPT_BYTES + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

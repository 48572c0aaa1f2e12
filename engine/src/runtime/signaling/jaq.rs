//! Compiling and running signaling programs: jq programs over one frame with the captured
//! handshake state bound to `$state`, run by the JAQ codecs' bounded runner
//! (`crate::codec::jaq::program`: the same step and stack bounds, `range/3` counted, `env`
//! yielding `{}`, `stderr_empty` silent, module loading refused).

use jaq_json::Val;

use crate::codec::jaq::program::{self, RunError};
use crate::codec::jaq::{MAX_JAQ_STACK_BYTES, MAX_JAQ_STEPS};

/// The variable every signaling program may read.
pub const STATE_VAR: &str = "$state";

/// A compiled signaling program.
pub(crate) type Filter = program::Filter;

/// Compiles `code` with `$state` declared, or says why it does not compile.
pub(crate) fn compile(code: &str) -> Result<Filter, String> {
    program::compile_with_vars(code, &[STATE_VAR])
}

/// Runs `filter` on `input` with `$state` bound to `state`; collects at most `max_outputs`
/// outputs. Any jq error, a bound, or one output too many is an `Err` saying which.
pub(crate) fn run(
    filter: &Filter,
    input: Val,
    state: &Val,
    max_outputs: usize,
) -> Result<Vec<Val>, String> {
    let mut outputs = Vec::new();
    program::run_with_vars(
        filter,
        input,
        vec![state.clone()],
        max_outputs,
        |_, value| {
            outputs.push(value);
            Ok::<(), ()>(())
        },
    )
    .map_err(|error| describe(error, max_outputs))?;
    Ok(outputs)
}

/// The first output of `filter` on `input` (later outputs are never computed); an error
/// before it is an `Err`.
pub(crate) fn first(filter: &Filter, input: Val, state: &Val) -> Result<Option<Val>, String> {
    let mut found = None;
    match program::run_with_vars(filter, input, vec![state.clone()], 1, |_, value| {
        found = Some(value);
        // Stop the run: nothing after the first output is computed.
        Err(())
    }) {
        Ok(_) | Err(RunError::Stop(())) => Ok(found),
        Err(error) => Err(describe(error, 1)),
    }
}

fn describe(error: RunError<()>, max_outputs: usize) -> String {
    match error {
        RunError::Program(message) => message,
        RunError::Steps => format!("it ran past {MAX_JAQ_STEPS} steps"),
        RunError::Stack => format!("it used over {MAX_JAQ_STACK_BYTES} bytes of stack"),
        RunError::Outputs | RunError::Stop(()) => {
            format!("it produced more than {max_outputs} value(s)")
        }
    }
}

//! The `nervix` binary: one executable for every Nervix command (DESIGN §8).
//!
//! Exit codes are shared by all commands: 0 success, 1 `fmt --check` found a file that is not
//! canonical, 2 anything refused (bad usage, unreadable input, parse errors).

mod cli;

/// mimalloc is the global allocator (DESIGN §13): per-thread heaps suit thread-per-core shards.
#[global_allocator]
static GLOBAL: nervix::allocator::DataPlaneAllocator = nervix::allocator::DataPlaneAllocator;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "nervix", version, about = "Nervix stream engine")]
struct Arguments {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print canonical NSPL.
    Fmt(cli::fmt::FmtArguments),
    /// Parse NSPL offline and report every error as `file:line:col: error: message`.
    Check(cli::check::CheckArguments),
    /// Print `nervix <version>`.
    Version,
    /// Connect to a node's console: run a script (-c, -f, piped input) or edit interactively.
    Console(cli::console::ConsoleArguments),
    /// Run a node: the replicated catalog and the console.
    Serve(Box<cli::serve::ServeArguments>),
    /// Run a benchmark scenario (execs the `nervix-bench` binary next to this one).
    Bench(cli::bench::BenchArguments),
    /// An embedded node running examples/demo.nspl under synthetic load.
    Demo(cli::demo::DemoArguments),
    /// Local stand-ins for external systems (`nervix dev kafka`: a mock Kafka cluster).
    Dev(cli::dev::DevArguments),
    /// Back up or restore a node's runtime state (keyspaces, windows, Kafka domain offsets).
    State(cli::state::StateArguments),
}

fn main() -> ExitCode {
    nervix::allocator::tune();
    let arguments = Arguments::parse();
    let outcome = match arguments.command {
        Command::Fmt(fmt) => cli::fmt::run(&fmt),
        Command::Check(check) => cli::check::run(&check),
        Command::Version => cli::print_version(),
        Command::Console(console) => cli::console::run(&console),
        Command::Serve(serve) => cli::serve::run(&serve),
        Command::Bench(bench) => cli::bench::run(&bench),
        Command::Demo(demo) => cli::demo::run(&demo),
        Command::Dev(dev) => cli::dev::run(&dev),
        Command::State(state) => cli::state::run(&state),
    };
    match outcome {
        Ok(status) => status.into(),
        Err(error) => {
            eprintln!("error: {error:#}");
            cli::Status::Refused.into()
        }
    }
}

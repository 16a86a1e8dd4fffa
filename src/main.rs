//! The `latencyd` binary: parses the command line and hands over to the
//! subcommand. Exit codes: 0 success, 1 a run-time failure, 2 bad usage,
//! 77 real-time privileges refused (daemon), 78 bad configuration.

use std::process::ExitCode;

use clap::Parser;
use latencyd::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // clap prints help and --version to stdout with status 0, and
            // usage errors to stderr with status 2.
            let _ = err.print();
            return ExitCode::from(err.exit_code().clamp(0, 255) as u8);
        }
    };
    match cli.command {
        None => latencyd::daemon::main(&cli.run),
        Some(Command::Run(args)) => latencyd::daemon::main(&args),
        Some(Command::Measure(args)) => latencyd::measure::main(&args),
        Some(Command::CheckConfig { file }) => latencyd::daemon::check_config(&file),
        Some(Command::Plot(args)) => latencyd::plot::main(&args),
        Some(Command::Report(args)) => latencyd::report::main(&args),
    }
}

//! The `upkeep` binary: parse the command line, set up logging and signals, run, and turn the
//! outcome into an exit code. Everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;
use tokio_util::sync::CancellationToken;
use upkeep::cli::{Cli, Command};
use upkeep::exit::ExitStatus;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The sandbox trampoline re-executes this binary; it must not parse flags or start a runtime.
    if let [_, subcommand, rest @ ..] = args.as_slice() {
        if subcommand == upkeep::exec::SUBCOMMAND {
            return upkeep::exec::trampoline_main(rest);
        }
    }
    // As early as possible: nothing running as this user may read this process's memory or
    // environment (which holds the credentials) through /proc.
    if let Err(error) = upkeep::exec::harden_process() {
        eprintln!("upkeep: warning: cannot make this process non-dumpable: {error}");
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(error) => {
            // --help and --version print and succeed; real usage errors exit 2.
            let _ = error.print();
            return if error.use_stderr() {
                ExitStatus::Usage.into()
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    upkeep::logging::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("upkeep: cannot start the async runtime: {error}");
            return ExitStatus::Failure.into();
        }
    };
    let cancel = CancellationToken::new();
    let status = runtime.block_on(async {
        upkeep::signals::cancel_on_signal(cancel.clone());
        match cli.command {
            Command::Run(args) => upkeep::commands::run(&args, cancel).await,
            Command::Demo(args) => upkeep::demo::run(&args, cancel).await,
            Command::Tools(args) => upkeep::commands::tools(&args),
            Command::Prompt(args) => upkeep::commands::prompt(&args, cancel).await,
            Command::Init(args) => upkeep::init::run(&args),
            Command::Fleet(args) => upkeep::fleet::run(&args, cancel).await,
        }
    });
    // Git work that was left winding down must not keep the process alive, nor its clone on
    // disk after it.
    for (path, error) in upkeep::repo::cleanup::settle(std::time::Duration::from_secs(2)) {
        eprintln!("upkeep: could not remove {}: {error}", path.display());
    }
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    status.into()
}

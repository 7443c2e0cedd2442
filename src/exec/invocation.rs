//! How upkeep calls its sandbox trampoline, and how a trampoline stage says it failed.
//!
//! Why a file of its own: upkeep's runner builds these arguments, and every stage of the
//! trampoline (the dispatcher, the supervisor, the confinement stage) parses them and fails the
//! same way. Keeping that contract in one leaf lets each stage depend on it without depending on
//! the others.
//!
//! Guarantees: a policy names only absolute writable and readable paths (checked when the arguments
//! are built and again when they are parsed); a stage that cannot run the program exits 126, or
//! 127 when the program does not exist, as a shell does, with a message on stderr.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use serde::{Deserialize, Serialize};

use super::limits::Limits;
use super::plan::SandboxPlan;

/// The hidden subcommand upkeep's `main` must route to [`super::trampoline_main`].
pub const SUBCOMMAND: &str = "__sandbox-exec";

/// Exit status when the sandbox or the program could not be set up (as a shell reports a
/// command found but not executable).
pub const EXIT_CANNOT_RUN: u8 = 126;
/// Exit status when the program does not exist (as a shell reports a command not found).
pub const EXIT_NOT_FOUND: u8 = 127;

/// Everything the trampoline needs to know about one command's sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxPolicy {
    /// Absolute directories beneath which writing, creating and removing are allowed.
    pub writable: Vec<PathBuf>,
    /// Absolute files and directories that may be read besides `writable` (see `readable`).
    pub readable: Vec<PathBuf>,
    pub plan: SandboxPlan,
    pub limits: Limits,
}

/// A parsed `supervise` or `confine` invocation.
#[derive(Debug, PartialEq, Eq)]
pub struct Invocation {
    pub policy: SandboxPolicy,
    pub program: OsString,
    pub args: Vec<OsString>,
}

/// The arguments after upkeep's executable that run `program args` in the sandbox `policy`.
pub fn supervise_args(program: &str, args: &[String], policy: &SandboxPolicy) -> io::Result<Vec<String>> {
    if let Some(dir) = policy
        .writable
        .iter()
        .chain(&policy.readable)
        .find(|dir| !dir.is_absolute())
    {
        // Relative directories would be resolved against the command's working directory.
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("sandbox directory {} is not absolute", dir.display()),
        ));
    }
    let policy = serde_json::to_string(policy).map_err(io::Error::other)?;
    let mut out = vec![SUBCOMMAND.to_owned(), "supervise".to_owned(), policy, "--".to_owned()];
    out.push(program.to_owned());
    out.extend(args.iter().cloned());
    Ok(out)
}

pub(crate) fn parse_invocation(args: &[OsString]) -> Result<Invocation, String> {
    let [policy, separator, program, args @ ..] = args else {
        return Err("expected POLICY -- PROGRAM [ARGS...]".to_owned());
    };
    if separator.as_os_str() != OsStr::new("--") {
        return Err("expected `--` after the policy".to_owned());
    }
    let policy = policy.to_str().ok_or("the policy is not UTF-8")?;
    let policy: SandboxPolicy = serde_json::from_str(policy).map_err(|error| format!("invalid policy: {error}"))?;
    if let Some(dir) = policy
        .writable
        .iter()
        .chain(&policy.readable)
        .find(|dir| !dir.is_absolute())
    {
        return Err(format!("sandbox path {} is not absolute", dir.display()));
    }
    Ok(Invocation {
        policy,
        program: program.clone(),
        args: args.to_vec(),
    })
}

/// Writes a message for the command's output (stderr) and returns `code`.
pub fn fail(code: u8, message: &str) -> ExitCode {
    // Not `eprintln!`: a closed or broken stderr must not turn into a panic.
    let _ = writeln!(io::stderr(), "upkeep sandbox: {message}");
    ExitCode::from(code)
}

/// The exit status for a program that could not be started: 127 when it does not exist.
pub fn exit_status_for(error: &io::Error) -> u8 {
    if error.kind() == io::ErrorKind::NotFound {
        EXIT_NOT_FOUND
    } else {
        EXIT_CANNOT_RUN
    }
}

/// Reports that `program` could not be started, with the shell's exit status for it.
pub fn cannot_run(program: &OsStr, error: &io::Error) -> ExitCode {
    fail(
        exit_status_for(error),
        &format!("cannot run {}: {error}", program.to_string_lossy()),
    )
}

#[cfg(test)]
#[path = "invocation_tests.rs"]
mod tests;

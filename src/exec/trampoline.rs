//! The sandbox trampoline: upkeep's own executable, re-run between upkeep and a command.
//!
//! Why: namespaces, Landlock, capabilities and resource limits bind the process that sets them
//! and what it starts, so they must be set between `fork` and the command's `exec`; `pre_exec`
//! would do that but is `unsafe`, which this crate forbids. upkeep runs itself instead, in
//! three stages of the hidden [`SUBCOMMAND`] (arguments as [`super::invocation`] builds them):
//!
//! ```text
//! upkeep __sandbox-exec probe                          prints what this machine offers (JSON)
//!   └─ upkeep __sandbox-exec probe-proc                (Linux) can a private /proc be mounted
//! upkeep __sandbox-exec supervise POLICY -- PROGRAM ARGS...
//!   └─ upkeep __sandbox-exec confine POLICY -- PROGRAM ARGS...   (Linux; see `confine`)
//!        └─ PROGRAM ARGS...
//! ```
//!
//! On Linux (`sys_linux.rs`) the supervisor makes the namespaces (see `namespaces`), joins a
//! pids cgroup when that is the process limit, starts the confinement stage, and then watches
//! two things: its child, and its standard input, which is a pipe from upkeep. When upkeep
//! closes that pipe (the command timed out or was cancelled, or upkeep itself exited in any
//! way, even killed) the supervisor kills the command. When the command ends, every process it
//! started is killed too: in a PID namespace by the kernel (the confinement stage is the
//! namespace's init), and otherwise by the supervisor, a child subreaper (see `reaper`). Then
//! the supervisor exits the way the program did (same exit code, or the same signal), so
//! upkeep reports it as usual.
//!
//! Elsewhere (`sys_other.rs`, macOS) there is nothing to set between the stages but resource
//! limits: the supervisor sets them on itself, starts the program, and kills its process group
//! when upkeep lets go.
//!
//! Guarantees: the program never runs with less than the [`SandboxPlan`](super::plan::SandboxPlan)
//! says (a plan made for another kind of system, or one this system cannot carry out, is
//! refused); any failure is exit status 126 (or 127 for a program that does not exist) with a
//! message on stderr.

use std::ffi::{OsStr, OsString};
use std::process::ExitCode;

use super::invocation::{EXIT_CANNOT_RUN, fail, parse_invocation};
use super::plan::{Kernel, Probe};
use super::sys;

#[cfg(doc)]
use super::invocation::SUBCOMMAND;

/// Entry point for [`SUBCOMMAND`]: `args` are the arguments after it. Call it before starting an
/// async runtime, tracing or anything else: it must stay a thin step between upkeep and the
/// program.
pub fn trampoline_main(args: &[OsString]) -> ExitCode {
    let Some((stage, rest)) = args.split_first() else {
        return fail(EXIT_CANNOT_RUN, "missing stage");
    };
    if stage.as_os_str() == OsStr::new("probe") {
        return sys::probe_stage();
    }
    if stage.as_os_str() == OsStr::new(sys::PROBE_PROC) {
        return sys::probe_proc_stage();
    }
    let invocation = match parse_invocation(rest) {
        Ok(invocation) => invocation,
        Err(message) => return fail(EXIT_CANNOT_RUN, &message),
    };
    // Before anything is set up: a plan made for another kind of kernel cannot be carried out
    // here, and running it with whatever this system has would be less than was reported.
    let planned_for = invocation.policy.plan.kernel;
    if planned_for != Kernel::CURRENT {
        return fail(
            EXIT_CANNOT_RUN,
            &format!("refusing to run the command: its sandbox was planned for {planned_for:?}, not this system"),
        );
    }
    match stage.to_str() {
        Some("supervise") => sys::supervise(&invocation),
        Some("confine") => sys::confine_stage(&invocation),
        _ => fail(EXIT_CANNOT_RUN, &format!("unknown stage {stage:?}")),
    }
}

/// What this machine offers commands, found out once per run (on Linux in a throw-away child
/// process). Anything going wrong means nothing is available.
pub async fn probe() -> Probe {
    sys::probe().await
}

#[cfg(test)]
#[path = "trampoline_tests.rs"]
mod tests;

//! The sandbox on systems other than Linux (macOS): what POSIX offers, and nothing pretended.
//!
//! Why a file of its own: Landlock, namespaces, capability sets, `no_new_privs`, child
//! subreapers, pids cgroups and `/proc` are Linux's. This file has the same functions as
//! `sys_linux.rs` for every other system; `exec/mod.rs` picks one of the two.
//!
//! What a command gets here: it still runs through the trampoline's supervisor, which sets the
//! resource limits POSIX has on itself (so the program it starts inherits them: no core dumps,
//! memory, file size, CPU time), starts the program in its own process group (the runner made
//! the supervisor that group's leader), and kills the whole group when upkeep lets go of it. The
//! runner kills the group again when the program ended. The probe reports no filesystem
//! confinement and no network isolation, so `--require-sandbox` refuses to start and a run
//! without it warns (`docs/commands.md`, "Other systems").
//!
//! Guarantees: a plan that asks for anything only Linux has is refused (exit 126) rather than
//! run with less; a program that cannot start exits 126, or 127 when it does not exist.

use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::time::Instant;

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, getpgrp};

use super::invocation::{EXIT_CANNOT_RUN, Invocation, cannot_run, fail};
use super::limits::{self, ProcessLimit};
use super::plan::{Capabilities, Cleanup, Filesystem, Kernel, Namespaces, Network, Probe, Proc, SandboxPlan};
use super::supervision::{Ended, wait_for_upkeep_to_let_go};

/// The executable the runner starts the trampoline from: upkeep's own.
pub(super) fn self_exe() -> io::Result<PathBuf> {
    std::env::current_exe()
}

/// Nothing to harden with here: there is no `/proc/<pid>/environ` to close, but see
/// `docs/commands.md`: a process of the same user can read upkeep's environment by other means.
pub(super) fn harden_process() -> Result<(), nix::Error> {
    Ok(())
}

/// A pipe whose ends are closed on `exec` (the runner's control pipe to a supervisor). Without
/// `pipe2`, the flag is set right after the pipe is made, as the standard library does here.
pub(super) fn control_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (reader, writer) = nix::unistd::pipe()?;
    for end in [&reader, &writer] {
        fcntl(end, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    }
    Ok((reader, writer))
}

/// No pids cgroups here: nothing is ever left to remove.
pub(super) fn remove_leftover_cgroup(_supervisor: u32) {}

/// No child subreapers here: orphans of a command never reach upkeep.
pub(super) fn adopts_orphans() -> bool {
    false
}

/// Never called: upkeep adopts no orphans here ([`adopts_orphans`]).
pub(super) fn reap_adopted(_keep: &[Pid], _deadline: Instant) {}

/// What this machine offers: resource limits and nothing of Linux's.
fn here() -> Probe {
    Probe {
        root: nix::unistd::geteuid().is_root(),
        ..Probe::nothing(Kernel::Other)
    }
}

/// No throw-away process is needed: finding out changes nothing here.
pub(super) async fn probe() -> Probe {
    here()
}

/// The name of Linux's stage that tries to mount a private `/proc`.
pub(super) const PROBE_PROC: &str = "probe-proc";

/// There is no private `/proc` to mount here.
pub(super) fn probe_proc_stage() -> ExitCode {
    fail(EXIT_CANNOT_RUN, "no private /proc on this system")
}

/// `probe`: prints what [`probe`] finds, as on Linux.
pub(super) fn probe_stage() -> ExitCode {
    match serde_json::to_string(&here()) {
        Ok(json) if writeln!(io::stdout(), "{json}").is_ok() => ExitCode::SUCCESS,
        _ => ExitCode::from(EXIT_CANNOT_RUN),
    }
}

/// What of `plan` only Linux could do, if anything.
fn linux_only(plan: &SandboxPlan) -> Option<&'static str> {
    if plan.kernel != Kernel::Other {
        return Some("a plan made for Linux");
    }
    if plan.filesystem != Filesystem::None {
        return Some("filesystem confinement");
    }
    if !matches!(plan.network, Network::Allowed | Network::None) {
        return Some("network isolation");
    }
    if plan.namespaces != Namespaces::None {
        return Some("namespaces");
    }
    if plan.capabilities != Capabilities::Unchanged {
        return Some("clearing capabilities");
    }
    if plan.process_limit != ProcessLimit::None {
        return Some("a process limit");
    }
    if plan.cleanup != Cleanup::ProcessGroup || plan.signal_scope {
        return Some("cleanup beyond the process group");
    }
    if plan.proc != Proc::Host {
        return Some("a private /proc");
    }
    None
}

/// The supervisor stage: limits, the program, and its process group's end.
pub(super) fn supervise(invocation: &Invocation) -> ExitCode {
    let policy = &invocation.policy;
    if let Some(missing) = linux_only(&policy.plan) {
        return fail(
            EXIT_CANNOT_RUN,
            &format!("refusing to run the command: {missing} is not available on this system"),
        );
    }
    // Before the limits: a small memory limit must not keep the watcher from starting. When
    // upkeep lets go, the whole group goes: the program, what it started in the group, and
    // this supervisor.
    std::thread::spawn(|| {
        wait_for_upkeep_to_let_go();
        let _ = killpg(getpgrp(), Signal::SIGKILL);
    });
    if let Err(message) = limits::apply(&policy.limits) {
        return fail(EXIT_CANNOT_RUN, &message);
    }
    let spawned = Command::new(&invocation.program)
        .args(&invocation.args)
        .stdin(Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => return cannot_run(&invocation.program, &error),
    };
    match child.wait().map(ended) {
        Ok(Some(ended)) => ended.reproduce(),
        Ok(None) => fail(EXIT_CANNOT_RUN, "the command ended in an unknown way"),
        Err(error) => fail(EXIT_CANNOT_RUN, &format!("lost track of the command: {error}")),
    }
}

/// How a child that was waited for ended; `None` for a status that is neither.
fn ended(status: ExitStatus) -> Option<Ended> {
    status
        .code()
        .map(Ended::Code)
        .or_else(|| status.signal().map(Ended::Signal))
}

/// There is no confinement stage here: nothing has to be set between the supervisor and the
/// program but the resource limits, which the supervisor sets on itself.
pub(super) fn confine_stage(_invocation: &Invocation) -> ExitCode {
    fail(EXIT_CANNOT_RUN, "the confinement stage exists only on Linux")
}

#[cfg(test)]
#[path = "sys_other_tests.rs"]
mod tests;

//! The Linux side of the sandbox: the supervisor and probe stages of the trampoline, upkeep's
//! own hardening, and what the runner needs from the kernel.
//!
//! Why a file of its own: everything here uses what only Linux has (namespaces, Landlock,
//! capabilities, `prctl`, pids cgroups, `/proc`). `sys_other.rs` has the same functions for
//! other systems; `exec/mod.rs` picks one of the two, so no other file needs a `#[cfg]`.
//!
//! What each stage does, and what it guarantees, is described in `trampoline`; the details are
//! in `namespaces`, `confine`, `cgroup`, `limits` and `reaper`.

use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::cgroup::PidsCgroup;
use super::invocation::{EXIT_CANNOT_RUN, Invocation, SUBCOMMAND, fail};
use super::limits::ProcessLimit;
use super::namespaces;
use super::plan::{Cleanup, Kernel, Namespaces, Network, Probe, Proc};
use super::supervision::{Ended, wait_for_upkeep_to_let_go};
use super::{confine, reaper};

pub(super) use super::cgroup::remove_leftover as remove_leftover_cgroup;
pub(super) use super::confine::run as confine_stage;
pub(super) use super::reaper::reap_adopted;

/// How upkeep runs itself: robust against the executable being replaced while upkeep runs.
const SELF_EXE: &str = "/proc/self/exe";

/// How long the supervisor may take to kill what a command left, before it gives up.
const CLEANUP_DEADLINE: Duration = Duration::from_secs(10);

/// The executable the runner starts the trampoline from: upkeep's own.
pub(super) fn self_exe() -> io::Result<PathBuf> {
    Ok(PathBuf::from(SELF_EXE))
}

/// Hardens upkeep's own process; call it first thing in `main` (not in the trampoline, which
/// does the same once it has made its namespaces):
///
/// - non-dumpable: no process without `CAP_SYS_PTRACE` over upkeep (a command running as the
///   same user, or as root without capabilities) can read its memory or environment through
///   `/proc/<pid>/{mem,environ}` or attach to it, and upkeep leaves no core dump;
/// - a child subreaper: should a command's sandbox supervisor die before it cleaned up, the
///   command's orphans come to upkeep, which kills them, instead of to init.
pub fn harden_process() -> Result<(), nix::Error> {
    nix::sys::prctl::set_dumpable(false)?;
    nix::sys::prctl::set_child_subreaper(true)
}

/// A pipe whose ends are closed on `exec` (the runner's control pipe to a supervisor).
pub(super) fn control_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(OFlag::O_CLOEXEC)?)
}

/// Whether orphans of a command can reach upkeep (it is a child subreaper), so that the runner
/// must look for them after a supervisor died.
pub(super) fn adopts_orphans() -> bool {
    nix::sys::prctl::get_child_subreaper().unwrap_or(false)
}

/// `probe`: finds out what the machine offers, in this throw-away process (making namespaces
/// changes the process that makes them), and prints it as JSON.
pub(super) fn probe_stage() -> ExitCode {
    let landlock = confine::landlock_support();
    let root = nix::unistd::geteuid().is_root();
    let probe = Probe {
        kernel: Kernel::Linux,
        landlock_filesystem: landlock.filesystem,
        landlock_tcp: landlock.tcp,
        landlock_signal_scope: landlock.signal_scope,
        root,
        can_clear_bounding_set: caps::has_cap(None, caps::CapSet::Effective, caps::Capability::CAP_SETPCAP)
            .unwrap_or(false),
        pids_cgroup: root && super::cgroup::available(),
        // Found below: the probe moves this process into new namespaces.
        namespaces: Namespaces::None,
        private_proc: false,
        seccomp: false,
    };
    let (how, private_proc) = namespaces::probe(|| {
        Command::new(SELF_EXE)
            .args([SUBCOMMAND, PROBE_PROC])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    });
    let probe = Probe {
        namespaces: how,
        private_proc,
        // Last: it applies the filter to this process.
        seccomp: super::seccomp::available(),
        ..probe
    };
    match serde_json::to_string(&probe) {
        Ok(json) if writeln!(io::stdout(), "{json}").is_ok() => ExitCode::SUCCESS,
        _ => ExitCode::from(EXIT_CANNOT_RUN),
    }
}

/// The stage that tries, as the init of a new PID namespace, to mount a private `/proc` (see
/// [`probe_stage`]).
pub(super) const PROBE_PROC: &str = "probe-proc";

/// `probe-proc`: succeeds when a private `/proc` could be mounted here.
pub(super) fn probe_proc_stage() -> ExitCode {
    match namespaces::mount_private_proc() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => fail(EXIT_CANNOT_RUN, &message),
    }
}

/// The supervisor stage (see the module documentation of `trampoline`).
pub(super) fn supervise(invocation: &Invocation) -> ExitCode {
    let policy = &invocation.policy;
    let plan = &policy.plan;
    let pid_namespace = plan.cleanup == Cleanup::PidNamespace;
    let private_proc = plan.proc == Proc::Private;
    if let Err(message) = namespaces::enter(plan.namespaces, plan.network == Network::Namespace, private_proc) {
        return fail(EXIT_CANNOT_RUN, &format!("refusing to run the command: {message}"));
    }
    // Writing the id maps needed this process dumpable; from here on nothing may read it.
    let _ = nix::sys::prctl::set_dumpable(false);
    // The watcher must exist before the PID namespace: after that, no thread can be started.
    let stop = Arc::new(StopSignal::default());
    let watcher = Arc::clone(&stop);
    std::thread::spawn(move || {
        wait_for_upkeep_to_let_go();
        watcher.stop(pid_namespace);
    });
    if pid_namespace {
        if let Err(message) = namespaces::enter_pid_namespace() {
            return fail(EXIT_CANNOT_RUN, &format!("refusing to run the command: {message}"));
        }
    }
    let cgroup = match plan.process_limit {
        ProcessLimit::Cgroup => match PidsCgroup::create_and_join(policy.limits.processes.saturating_add(2)) {
            Ok(cgroup) => Some(cgroup),
            Err(error) => return fail(EXIT_CANNOT_RUN, &format!("cannot limit processes: {error}")),
        },
        _ => None,
    };
    // Here, right after the namespaces were made, is the one place where the capabilities to
    // clear the bounding set exist (inside a user namespace the next stage runs without any),
    // and the supervisor needs none of them either.
    // With a private /proc, the confinement stage gets the one capability to mount it, and
    // drops it before the program runs.
    let dropped = if private_proc {
        namespaces::keep_only_the_mount_capability()
    } else {
        confine::drop_capabilities(plan.capabilities)
    };
    if let Err(message) = dropped {
        return fail(
            EXIT_CANNOT_RUN,
            &format!("refusing to run the command with capabilities: {message}"),
        );
    }
    if !pid_namespace {
        if let Err(error) = nix::sys::prctl::set_child_subreaper(true) {
            return fail(EXIT_CANNOT_RUN, &format!("cannot become a subreaper: {error}"));
        }
    }
    let ended = run_supervised(invocation, pid_namespace, &stop);
    if let Some(cgroup) = cgroup {
        let _ = cgroup.remove();
    }
    match ended {
        Ok(ended) => ended.reproduce(),
        Err(message) => fail(EXIT_CANNOT_RUN, &message),
    }
}

fn run_supervised(invocation: &Invocation, pid_namespace: bool, stop: &StopSignal) -> Result<Ended, String> {
    let policy = serde_json::to_string(&invocation.policy).map_err(|error| error.to_string())?;
    let mut command = Command::new(SELF_EXE);
    command
        .args([SUBCOMMAND, "confine", &policy, "--"])
        .arg(&invocation.program)
        .args(&invocation.args);
    // The namespace's init reports the program's end through its standard input.
    let status_pipe = if pid_namespace {
        let (reader, writer) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|error| error.to_string())?;
        command.stdin(Stdio::from(writer));
        Some(reader)
    } else {
        command.stdin(Stdio::null());
        None
    };
    let child = command
        .spawn()
        .map_err(|error| format!("cannot start the sandbox: {error}"))?;
    // The parent's copy of the write end goes with `command`.
    drop(command);
    let child = Pid::from_raw(i32::try_from(child.id()).map_err(|error| error.to_string())?);
    stop.started(child, pid_namespace);

    let mut ended = loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => break Ended::Code(code),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == child => break Ended::Signal(signal as i32),
            // An orphan re-parented to this subreaper, reaped; or an interrupted wait.
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(error) => return Err(format!("lost track of the command: {error}")),
        }
    };
    if let Some(reader) = status_pipe {
        ended = reported_end(reader).unwrap_or(ended);
    }
    if !reaper::kill_descendants(Instant::now() + CLEANUP_DEADLINE) {
        return Err("processes the command started could not all be killed".to_owned());
    }
    Ok(ended)
}

/// Between the watcher thread (upkeep let go) and the main thread (the child started): whoever
/// comes second kills the command.
#[derive(Default)]
struct StopSignal {
    stopped: AtomicBool,
    child: AtomicI32,
}

impl StopSignal {
    fn stop(&self, pid_namespace: bool) {
        self.stopped.store(true, Ordering::SeqCst);
        let child = self.child.load(Ordering::SeqCst);
        if child != 0 {
            kill_command(Pid::from_raw(child), pid_namespace);
        }
    }

    fn started(&self, child: Pid, pid_namespace: bool) {
        self.child.store(child.as_raw(), Ordering::SeqCst);
        if self.stopped.load(Ordering::SeqCst) {
            kill_command(child, pid_namespace);
        }
    }
}

fn kill_command(child: Pid, pid_namespace: bool) {
    if pid_namespace {
        // The namespace's init: the kernel kills everything else with it.
        let _ = kill(child, Signal::SIGKILL);
    } else {
        reaper::kill_descendants_once();
    }
}

/// What the namespace's init wrote about the program's end, if it got that far.
fn reported_end(reader: OwnedFd) -> Option<Ended> {
    let mut text = String::new();
    std::fs::File::from(reader).read_to_string(&mut text).ok()?;
    let (kind, number) = text.trim().split_once(' ')?;
    let number: i32 = number.parse().ok()?;
    match kind {
        "exit" => Some(Ended::Code(number)),
        "signal" => Some(Ended::Signal(number)),
        _ => None,
    }
}

/// Runs the probe stage in a child process and reads what it found. Anything going wrong
/// means nothing is available.
pub(super) async fn probe() -> Probe {
    let output = tokio::process::Command::new(SELF_EXE)
        .args([SUBCOMMAND, "probe"])
        .env_clear()
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .await;
    match output {
        Ok(output) if output.status.success() => {
            serde_json::from_slice(output.stdout.trim_ascii()).unwrap_or_else(|error| {
                tracing::warn!(%error, "the sandbox probe answered something unreadable");
                Probe::nothing(Kernel::Linux)
            })
        }
        Ok(output) => {
            tracing::warn!(status = %output.status, "the sandbox probe failed");
            Probe::nothing(Kernel::Linux)
        }
        Err(error) => {
            tracing::warn!(%error, "cannot run the sandbox probe");
            Probe::nothing(Kernel::Linux)
        }
    }
}

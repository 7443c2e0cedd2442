//! The runner behind `run_shell_command` and declared command tools: starts a command in its
//! sandbox and brings its result back, whatever the command does.
//!
//! A command started here:
//!
//! - gets exactly the environment in [`CommandSpec::env`] plus [`CommandSpec::upkeep_env`]
//!   (`env_clear`), normally built by [`super::env::allowlisted_environment`], which never lets
//!   a token or API key through;
//! - reads from `/dev/null`, so a command that waits for input gets end-of-file, not a hang;
//! - runs through the sandbox trampoline (see `trampoline`) when [`CommandSpec::sandbox`] is
//!   set, which production always does: namespaces, Landlock, no capabilities, limits;
//! - is stopped at the timeout, on cancellation, and when the running future is dropped: the
//!   runner closes the trampoline's control pipe and its supervisor kills every process the
//!   command started (which it also does when the command ends by itself); the kernel closes
//!   that pipe too when upkeep exits in any way. As a last resort the runner kills the
//!   supervisor's process group, and, when upkeep is a child subreaper (Linux), any orphan
//!   that reached upkeep (see `reaper::reap_adopted`);
//! - returns at most `output_cap` bytes of output (head and tail, with a notice of what was left
//!   out between them), holding no more than that in memory, decoded lossily.
//!
//! Without a sandbox (only in this crate's own tests) the command leads its own process group
//! and that group is killed instead; a process that leaves the group is then out of reach.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::capture::{Capture, READ_CHUNK};
use super::invocation::{SandboxPolicy, supervise_args};
use super::limits::ProcessLimit;
use super::sys;

/// Bytes of output returned to the caller unless configured otherwise.
pub const DEFAULT_OUTPUT_CAP: usize = 30_000;
/// How long a command may run unless configured otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// How long output is still read after the command is over. Only a process that escaped the
/// cleanup could still hold the pipe then; it must not hold up the tool call.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// How long the sandbox's supervisor gets to kill a command after it was told to stop, before
/// the runner kills the supervisor's group itself.
const STOP_GRACE: Duration = Duration::from_secs(12);
/// How long to wait for killed group members to become reapable, when upkeep is their reaper.
const REAP_GRACE: Duration = Duration::from_millis(500);

/// The sandbox supervisors upkeep is running, so its orphan backstop leaves them alone.
static SUPERVISORS: Mutex<Vec<Pid>> = Mutex::new(Vec::new());

/// One command to run.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    /// The program, looked up in `env`'s `PATH`. No shell is involved unless it is `sh`.
    pub program: String,
    pub args: Vec<String>,
    /// The working directory: the clone's root.
    pub cwd: PathBuf,
    /// The environment from the allowlist (and a declared tool's `env`); the command inherits
    /// nothing else.
    pub env: Vec<(String, String)>,
    /// Variables upkeep itself supplies (such as `GIT_DIR` and `GIT_WORK_TREE` for a clone whose
    /// git directory lives outside the work tree). Set after `env`, so nothing overrides them;
    /// never filled from model input.
    pub upkeep_env: Vec<(String, String)>,
    pub timeout: Duration,
    /// Bytes of output returned (see [`DEFAULT_OUTPUT_CAP`]).
    pub output_cap: usize,
    /// The sandbox; `None` runs the command directly, which only this crate's tests do.
    pub sandbox: Option<SandboxPolicy>,
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// The exit code; `None` when the command was killed by a signal.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The timeout expired and the process group was killed.
    pub timed_out: bool,
    /// The caller cancelled and the process group was killed.
    pub interrupted: bool,
    /// The timeout the command ran under, for the report.
    pub timeout: Duration,
    /// Standard output and standard error interleaved in arrival order, decoded lossily,
    /// capped: head and tail kept around an `[... N bytes omitted ...]` notice.
    pub output: String,
    pub omitted_bytes: usize,
}

impl CommandOutput {
    /// The text the model sees: the output, then how the command ended.
    pub fn render(&self) -> String {
        let mut text = if self.output.is_empty() {
            "(no output)\n".to_owned()
        } else {
            self.output.clone()
        };
        if !text.ends_with('\n') {
            text.push('\n');
        }
        if self.timed_out {
            text.push_str(&format!(
                "timed out after {}; the command and its child processes were killed",
                seconds(self.timeout)
            ));
        } else if self.interrupted {
            text.push_str("interrupted; the command and its child processes were killed");
        } else if let Some(code) = self.exit_code {
            text.push_str(&format!("exit status: {code}"));
        } else if let Some(signal) = self.signal {
            match Signal::try_from(signal) {
                Ok(name) => text.push_str(&format!("killed by signal {signal} ({name})")),
                Err(_) => text.push_str(&format!("killed by signal {signal}")),
            }
        } else {
            text.push_str("exit status: unknown");
        }
        text
    }
}

fn seconds(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{:.1}s", duration.as_secs_f64())
    }
}

/// Runs a command to completion, timeout or cancellation (see the module's guarantees).
/// Errors are failures to start it; whatever the command itself does is reported in the
/// [`CommandOutput`].
pub async fn run(spec: &CommandSpec, cancel: &CancellationToken) -> io::Result<CommandOutput> {
    let (program, args) = match &spec.sandbox {
        None => (OsString::from(&spec.program), spec.args.clone()),
        Some(policy) => (
            sys::self_exe()?.into_os_string(),
            supervise_args(&spec.program, &spec.args, policy)?,
        ),
    };

    // One pipe for both streams keeps their interleaving exactly as the command wrote it. The
    // write end must be blocking for the child; the parent reads the other end asynchronously.
    let (writer, mut reader) = tokio::net::unix::pipe::pipe()?;
    let stdout = writer.into_blocking_fd()?;
    let stderr = stdout.try_clone()?;
    // The supervisor's standard input is the control pipe: its end tells it to stop.
    let (stdin, control) = match spec.sandbox {
        Some(_) => {
            let (read, write) = sys::control_pipe()?;
            (Stdio::from(read), Some(write))
        }
        None => (Stdio::null(), None),
    };

    let mut command = Command::new(&program);
    command
        .args(&args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(
            spec.env
                .iter()
                .chain(&spec.upkeep_env)
                .map(|(name, value)| (name, value)),
        )
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        // Without a sandbox, a backstop for the direct child. With one, the supervisor must
        // live to clean up after the command: closing the control pipe stops it.
        .kill_on_drop(spec.sandbox.is_none());
    let (mut child, pid) = {
        let mut supervisors = SUPERVISORS.lock().unwrap_or_else(PoisonError::into_inner);
        let spawned = command.spawn();
        // The command holds the parent's copies of the pipes' child ends: drop them now, or the
        // output pipe would never report end-of-file.
        drop(command);
        let child = spawned?;
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("the command exited before its id was read"))?;
        let pid = Pid::from_raw(i32::try_from(pid).map_err(|_| io::Error::other("process id out of range"))?);
        supervisors.push(pid);
        (child, pid)
    };
    let started = Instant::now();
    // The child called setpgid(0, 0) before exec, so its pid is its group's id.
    let mut guard = Guard {
        pgid: pid,
        kill_group: spec.sandbox.is_none(),
        control,
    };

    let mut capture = Capture::new(spec.output_cap);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut reading = true;
    // A timeout too large to represent is no timeout.
    let deadline = started.checked_add(spec.timeout);
    let mut ending = Ending::Exited;

    let exited = loop {
        tokio::select! {
            read = reader.read(&mut buf), if reading => match read {
                Ok(0) => reading = false,
                Ok(n) => capture.push(buf.get(..n).unwrap_or_default()),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => {
                    tracing::debug!(%error, "stopped reading command output");
                    reading = false;
                }
            },
            status = child.wait() => break Some(status?),
            () = sleep_until(deadline) => {
                ending = Ending::TimedOut;
                break None;
            }
            () = cancel.cancelled() => {
                ending = Ending::Interrupted;
                break None;
            }
        }
    };

    let status = match exited {
        Some(status) => status,
        None => stop(&mut child, &mut guard).await?,
    };
    // Whatever is left in the group goes too. The group id cannot have been reused yet: there
    // was no await since the reaping.
    kill_group(pid);
    guard.disarm();
    reap_group(pid).await;
    if let Some(policy) = &spec.sandbox {
        backstop(pid, policy.plan.process_limit == ProcessLimit::Cgroup).await;
    }

    // Collect what is still in the pipe. Every writer is dead, so end-of-file comes at once
    // unless a process escaped; that one gets a short grace period.
    let drain_deadline = Instant::now() + DRAIN_GRACE;
    while reading {
        match tokio::time::timeout_at(drain_deadline, reader.read(&mut buf)).await {
            Ok(Ok(0)) => reading = false,
            Ok(Ok(n)) => capture.push(buf.get(..n).unwrap_or_default()),
            Ok(Err(error)) if error.kind() == io::ErrorKind::Interrupted => {}
            Ok(Err(_)) => reading = false,
            Err(_) => {
                tracing::debug!("a process that escaped the command's cleanup still holds its output");
                reading = false;
            }
        }
    }

    let (output, omitted_bytes) = capture.finish();
    Ok(CommandOutput {
        exit_code: status.code(),
        signal: status.signal(),
        timed_out: ending == Ending::TimedOut,
        interrupted: ending == Ending::Interrupted,
        timeout: spec.timeout,
        output,
        omitted_bytes,
    })
}

/// Stops a command that is still running: tells the sandbox's supervisor (which kills all of
/// it and exits), or kills the group when there is none or the supervisor does not finish.
async fn stop(child: &mut tokio::process::Child, guard: &mut Guard) -> io::Result<std::process::ExitStatus> {
    if guard.control.take().is_some() {
        if let Ok(status) = tokio::time::timeout(STOP_GRACE, child.wait()).await {
            return status;
        }
        tracing::warn!("the sandbox supervisor did not stop in time; killing it");
    }
    kill_group(guard.pgid);
    // If the group could not be signalled, at least the direct child dies.
    let _ = child.start_kill();
    child.wait().await
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Exited,
    TimedOut,
    Interrupted,
}

/// What happens if `run` is dropped before it finished with the command (its caller gave up
/// on it): dropping `control` tells the sandbox's supervisor to kill everything; without a
/// sandbox the group is killed (`kill_on_drop` alone would reach only the direct child).
struct Guard {
    pgid: Pid,
    kill_group: bool,
    control: Option<std::os::fd::OwnedFd>,
}

impl Guard {
    fn disarm(&mut self) {
        self.kill_group = false;
        self.control = None;
        forget_supervisor(self.pgid);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.kill_group {
            kill_group(self.pgid);
        }
        forget_supervisor(self.pgid);
    }
}

fn forget_supervisor(pid: Pid) {
    SUPERVISORS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|supervisor| *supervisor != pid);
}

fn kill_group(pgid: Pid) {
    match killpg(pgid, Signal::SIGKILL) {
        // ESRCH: nothing is left in the group, which is the goal.
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(error) => {
            tracing::warn!(%error, pgid = pgid.as_raw(), "could not kill a command's process group")
        }
    }
}

/// Reaps killed group members that were re-parented to upkeep (when it runs as a container's
/// init or as a subreaper), so they do not linger as zombies. Otherwise their reaper is someone
/// else, `waitpid` reports no such child at once, and this costs one system call.
async fn reap_group(pgid: Pid) {
    let group = Pid::from_raw(-pgid.as_raw());
    let deadline = Instant::now() + REAP_GRACE;
    loop {
        match waitpid(group, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                if Instant::now() >= deadline {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Ok(_) | Err(Errno::EINTR) => {}
            // ECHILD: no child of upkeep is left in the group.
            Err(_) => return,
        }
    }
}

/// Cleans up after a supervisor that died before it could (it should never happen): removes its
/// pids cgroup, and when upkeep is a child subreaper, kills what reached upkeep from the
/// command (one scan of `/proc`).
async fn backstop(supervisor: Pid, cgroup: bool) {
    if cgroup {
        if let Ok(pid) = u32::try_from(supervisor.as_raw()) {
            let _ = tokio::task::spawn_blocking(move || sys::remove_leftover_cgroup(pid)).await;
        }
    }
    if !sys::adopts_orphans() {
        return;
    }
    let keep: Vec<Pid> = SUPERVISORS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .copied()
        .filter(|pid| *pid != supervisor)
        .collect();
    let deadline = std::time::Instant::now() + REAP_GRACE;
    let _ = tokio::task::spawn_blocking(move || sys::reap_adopted(&keep, deadline)).await;
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;

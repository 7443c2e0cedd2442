//! The contained process runner behind `run_shell_command` and operator-declared command tools.
//!
//! Why: the model's commands are untrusted and its tool calls must come back, whatever the
//! command does. A command started here:
//!
//! - gets exactly the environment in [`CommandSpec::env`] (`env_clear`), normally built by
//!   [`allowlisted_environment`], which never lets a token or API key through;
//! - reads from `/dev/null`, so a command that waits for input gets end-of-file, not a hang;
//! - leads its own process group, and that whole group is killed with `SIGKILL` at the timeout,
//!   on cancellation, when the command's main process exits (background jobs do not outlive
//!   the tool call), and if the running future is dropped;
//! - returns at most `output_cap` bytes of output (the head and the tail, with a notice of what
//!   was left out between them), while holding no more than that in memory however much it
//!   prints, decoded lossily so no byte sequence can make upkeep fail;
//! - optionally runs confined by Landlock through the sandbox trampoline (see `sandbox`).
//!
//! Limits: a process that leaves the group (`setsid`) is out of reach of the group kill; the
//! runner stops reading its output shortly after the command ends instead of waiting for it.

use std::collections::VecDeque;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::sandbox::{self, SandboxKind, SandboxPolicy};

/// Bytes of output returned to the caller unless configured otherwise.
pub const DEFAULT_OUTPUT_CAP: usize = 30_000;
/// How long a command may run unless configured otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Variables taken from upkeep's own environment for every command: enough for tools to find
/// programs, a home directory, a locale and a temporary directory, and nothing that identifies
/// or authorises anyone.
const BASE_ENVIRONMENT: [&str; 8] = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "TZ", "TMPDIR"];

// Names that hold credentials by convention (upkeep's own credential variables) are refused
// even when an operator passes them.
use crate::secrets::SECRET_VARIABLES as SECRET_NAMES;
/// Fragments that mark a name as a credential holder (`NPM_TOKEN`, `AWS_SECRET_ACCESS_KEY`...).
const SECRET_FRAGMENTS: [&str; 7] = [
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "API_KEY",
    "PRIVATE_KEY",
    "CREDENTIAL",
];

/// How long output is still read after the command's process group is gone. Only a process
/// that escaped the group can still hold the pipe then; it must not hold up the tool call.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// How long to wait for killed group members to become reapable, when upkeep is their reaper.
const REAP_GRACE: Duration = Duration::from_millis(500);
const READ_CHUNK: usize = 16 * 1024;

/// One command to run.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    /// The program, looked up in `env`'s `PATH`. No shell is involved unless it is `sh`.
    pub program: String,
    pub args: Vec<String>,
    /// The working directory: the clone's root.
    pub cwd: PathBuf,
    /// The complete environment; the command inherits nothing else.
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    /// Bytes of output returned (see [`DEFAULT_OUTPUT_CAP`]).
    pub output_cap: usize,
    /// Landlock confinement; `None` runs the command unconfined.
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

/// The environment for a command: the base variables ([`BASE_ENVIRONMENT`]) and the names in
/// `pass`, with the values upkeep itself has (unset ones are left out). A name that looks like a
/// credential holder is never included, even when passed; each refusal is logged by name only.
pub fn allowlisted_environment(pass: &[String]) -> Vec<(String, String)> {
    allowlisted_from(pass, |name| std::env::var_os(name))
}

fn allowlisted_from(pass: &[String], lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let names = BASE_ENVIRONMENT.iter().copied().chain(pass.iter().map(String::as_str));
    for name in names {
        if env.iter().any(|(seen, _)| seen == name) {
            continue;
        }
        if is_secret_name(name) {
            tracing::warn!(variable = name, "not passing a credential-like variable to commands");
            continue;
        }
        match lookup(name).map(|value| value.into_string()) {
            Some(Ok(value)) => env.push((name.to_owned(), value)),
            Some(Err(_)) => {
                tracing::warn!(variable = name, "not passing a variable whose value is not UTF-8");
            }
            None => {}
        }
    }
    env
}

/// Whether a variable name looks like it holds a credential.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAMES.contains(&upper.as_str()) || SECRET_FRAGMENTS.iter().any(|fragment| upper.contains(fragment))
}

/// Runs a command to completion, timeout or cancellation (see the module's guarantees).
/// Errors are failures to start it; whatever the command itself does is reported in the
/// [`CommandOutput`].
pub async fn run(spec: &CommandSpec, cancel: &CancellationToken) -> io::Result<CommandOutput> {
    let (program, args) = match &spec.sandbox {
        None => (spec.program.clone(), spec.args.clone()),
        Some(policy) => {
            // The trampoline would refuse anyway; saying so here gives a clearer error.
            if sandbox::probe() != SandboxKind::Landlock {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "a sandbox was requested but this kernel does not enforce Landlock",
                ));
            }
            sandbox::wrap(&spec.program, &spec.args, policy)?
        }
    };

    // One pipe for both streams keeps their interleaving exactly as the command wrote it. The
    // write end must be blocking for the child; the parent reads the other end asynchronously.
    let (writer, mut reader) = tokio::net::unix::pipe::pipe()?;
    let stdout = writer.into_blocking_fd()?;
    let stderr = stdout.try_clone()?;

    let mut command = Command::new(&program);
    command
        .args(&args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        // A backstop for the direct child; the group guard below covers the rest.
        .kill_on_drop(true);
    let spawned = command.spawn();
    // The command holds the parent's copies of the pipe's write end: drop them now, or the
    // pipe would never report end-of-file.
    drop(command);
    let mut child = spawned?;
    let started = Instant::now();

    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("the command exited before its id was read"))?;
    // The child called setpgid(0, 0) before exec, so its pid is its group's id.
    let pgid = Pid::from_raw(i32::try_from(pid).map_err(|_| io::Error::other("process id out of range"))?);
    let mut guard = GroupGuard { pgid, armed: true };

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
        Some(status) => {
            // The main process is gone; whatever it left running in its group goes too. The
            // group id cannot have been reused yet: there was no await since the reaping.
            kill_group(pgid);
            status
        }
        None => {
            kill_group(pgid);
            // If the group could not be signalled, at least the direct child dies.
            let _ = child.start_kill();
            child.wait().await?
        }
    };
    guard.armed = false;
    reap_group(pgid).await;

    // Collect what is still in the pipe. Every writer in the group is dead, so end-of-file
    // comes at once unless a process escaped the group; that one gets a short grace period.
    let drain_deadline = Instant::now() + DRAIN_GRACE;
    while reading {
        match tokio::time::timeout_at(drain_deadline, reader.read(&mut buf)).await {
            Ok(Ok(0)) => reading = false,
            Ok(Ok(n)) => capture.push(buf.get(..n).unwrap_or_default()),
            Ok(Err(error)) if error.kind() == io::ErrorKind::Interrupted => {}
            Ok(Err(_)) => reading = false,
            Err(_) => {
                tracing::debug!("a process outside the command's group still holds its output");
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

/// Kills the command's group if `run` is dropped before it finished with the command (its
/// caller gave up on it): `kill_on_drop` alone would reach only the direct child.
struct GroupGuard {
    pgid: Pid,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            kill_group(self.pgid);
        }
    }
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

/// Bounded output capture: the first half of the cap as it arrives, and a ring holding the
/// latest bytes for the second half, counting what falls out of the middle.
struct Capture {
    head: Vec<u8>,
    head_cap: usize,
    tail: VecDeque<u8>,
    tail_cap: usize,
    omitted: usize,
}

impl Capture {
    fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        let tail_cap = cap - head_cap;
        Capture {
            head: Vec::with_capacity(head_cap.min(READ_CHUNK)),
            head_cap,
            tail: VecDeque::with_capacity(tail_cap.min(READ_CHUNK)),
            tail_cap,
            omitted: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let (first, rest) = bytes.split_at(room.min(bytes.len()));
            self.head.extend_from_slice(first);
            bytes = rest;
        }
        if bytes.len() >= self.tail_cap {
            // The chunk alone fills the tail: everything before its last bytes is dropped.
            let keep_from = bytes.len() - self.tail_cap;
            self.omitted += self.tail.len() + keep_from;
            self.tail.clear();
            self.tail.extend(bytes.iter().skip(keep_from));
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..overflow);
            self.omitted += overflow;
            self.tail.extend(bytes);
        }
    }

    fn finish(self) -> (String, usize) {
        let omitted = self.omitted;
        let mut head = self.head;
        let tail: Vec<u8> = self.tail.into_iter().collect();
        if omitted == 0 {
            // Nothing was cut, so the halves are contiguous: decode them as one so that a
            // character split across them is not mangled.
            head.extend(tail);
            return (String::from_utf8_lossy(&head).into_owned(), 0);
        }
        let mut text = String::from_utf8_lossy(&head).into_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[... {omitted} bytes omitted ...]\n"));
        text.push_str(&String::from_utf8_lossy(&tail));
        (text, omitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn spec(program: &str, args: &[&str]) -> CommandSpec {
        CommandSpec {
            program: program.to_owned(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            cwd: std::env::temp_dir(),
            env: allowlisted_environment(&[]),
            timeout: Duration::from_secs(30),
            output_cap: DEFAULT_OUTPUT_CAP,
            sandbox: None,
        }
    }

    fn sh(script: &str) -> CommandSpec {
        spec("sh", &["-c", script])
    }

    async fn run_it(spec: &CommandSpec) -> io::Result<CommandOutput> {
        run(spec, &CancellationToken::new()).await
    }

    /// Waits until no process of the group exists any more.
    async fn group_is_gone(pgid: Pid) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if killpg(pgid, None) == Err(Errno::ESRCH) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until no live (non-zombie) process of the group exists, reading `/proc`. For when
    /// no one is bound to reap the killed members promptly.
    async fn group_is_dead(pgid: Pid) -> Result<bool, Box<dyn std::error::Error>> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut alive = false;
            for entry in std::fs::read_dir("/proc")? {
                let Ok(stat) = std::fs::read_to_string(entry?.path().join("stat")) else {
                    continue;
                };
                // "pid (comm) state ppid pgrp ...": comm may hold anything, so split after it.
                let Some((_, rest)) = stat.rsplit_once(')') else {
                    continue;
                };
                let fields: Vec<&str> = rest.split_whitespace().collect();
                if let [state, _ppid, pgrp, ..] = fields.as_slice() {
                    if *pgrp == pgid.as_raw().to_string() && *state != "Z" && *state != "X" {
                        alive = true;
                    }
                }
            }
            if !alive {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn first_line_pid(output: &str) -> Result<Pid, Box<dyn std::error::Error>> {
        let line = output.lines().next().ok_or("no output")?;
        Ok(Pid::from_raw(line.trim().parse()?))
    }

    #[tokio::test]
    async fn echo_output_and_exit_status() -> TestResult {
        let out = run_it(&spec("echo", &["hello", "world"])).await?;
        assert_eq!(out.output, "hello world\n");
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(out.signal, None);
        assert!(!out.timed_out && !out.interrupted);
        assert_eq!(out.render(), "hello world\nexit status: 0");

        let out = run_it(&sh("echo failing; exit 3")).await?;
        assert_eq!(out.exit_code, Some(3));
        assert_eq!(out.render(), "failing\nexit status: 3");
        Ok(())
    }

    #[tokio::test]
    async fn stdout_and_stderr_are_interleaved_in_order() -> TestResult {
        let out = run_it(&sh("echo one; echo two >&2; echo three; echo four >&2")).await?;
        assert_eq!(out.output, "one\ntwo\nthree\nfour\n");
        Ok(())
    }

    #[tokio::test]
    async fn killed_by_signal_is_reported() -> TestResult {
        let out = run_it(&sh("kill -TERM $$")).await?;
        assert_eq!(out.exit_code, None);
        assert_eq!(out.signal, Some(15));
        assert_eq!(out.render(), "(no output)\nkilled by signal 15 (SIGTERM)");
        Ok(())
    }

    #[tokio::test]
    async fn stdin_is_closed() -> TestResult {
        let started = Instant::now();
        let out = run_it(&spec("cat", &[])).await?;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(out.output, "");
        let out = run_it(&sh("read line; echo read=$?")).await?;
        assert_eq!(out.output, "read=1\n");
        Ok(())
    }

    #[tokio::test]
    async fn missing_program_is_an_error() {
        let result = run_it(&spec("upkeep-no-such-program-xyz", &[])).await;
        assert!(result.is_err());
    }

    #[tokio::test]
    async fn output_over_the_cap_keeps_head_and_tail() -> TestResult {
        let mut long = spec("seq", &["1", "20000"]);
        long.output_cap = 1000;
        let out = run_it(&long).await?;
        let full: String = (1..=20000).map(|n| format!("{n}\n")).collect();
        assert_eq!(out.omitted_bytes, full.len() - 1000);
        let notice = format!("\n[... {} bytes omitted ...]\n", full.len() - 1000);
        let (head, tail) = out.output.split_once(&notice).ok_or("no notice")?;
        assert_eq!(head.len() + 1, 500, "the head ends with a line break it had");
        assert!(full.starts_with(head));
        assert_eq!(tail.len(), 500);
        assert!(full.ends_with(tail));
        assert!(tail.ends_with("19999\n20000\n"));
        assert!(out.render().ends_with("20000\nexit status: 0"));
        Ok(())
    }

    #[test]
    fn capture_is_independent_of_chunking() {
        let data: Vec<u8> = (0..5000u32).map(|n| (n % 251) as u8).collect();
        let mut reference = Capture::new(777);
        reference.push(&data);
        let expected = reference.finish();
        for chunk in [1, 2, 7, 388, 389, 1000, 5000] {
            let mut capture = Capture::new(777);
            for piece in data.chunks(chunk) {
                capture.push(piece);
            }
            assert_eq!(capture.finish(), expected, "chunks of {chunk}");
        }
        assert_eq!(expected.1, 5000 - 777);
    }

    #[test]
    fn capture_edge_caps() {
        let mut none = Capture::new(0);
        none.push(b"abc");
        assert_eq!(none.finish(), ("[... 3 bytes omitted ...]\n".to_owned(), 3));

        let mut exact = Capture::new(6);
        exact.push(b"abc");
        exact.push(b"def");
        assert_eq!(exact.finish(), ("abcdef".to_owned(), 0));

        let mut one = Capture::new(1);
        one.push(b"abc");
        assert_eq!(one.finish(), ("[... 2 bytes omitted ...]\nc".to_owned(), 2));

        // A character split between head and tail survives when nothing was cut.
        let mut split = Capture::new(4);
        split.push("aé".as_bytes());
        split.push(b"z");
        assert_eq!(split.finish(), ("aéz".to_owned(), 0));
    }

    #[tokio::test]
    async fn binary_output_is_decoded_lossily() -> TestResult {
        let out = run_it(&sh("head -c 1000 /dev/urandom")).await?;
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(out.omitted_bytes, 0);
        assert!(!out.output.is_empty());

        let out = run_it(&sh(r"printf 'ok\377\376done'")).await?;
        assert_eq!(out.output, "ok\u{FFFD}\u{FFFD}done");
        Ok(())
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() -> TestResult {
        // Killed members are zombies until their parent reaps them. Orphans go to init, which
        // in some containers never reaps, and a zombie still counts as a group member for
        // killpg; make the test process their reaper so the runner's reaping applies.
        nix::sys::prctl::set_child_subreaper(true)?;
        let mut slow = sh("echo $$; sleep 100 & sleep 100");
        slow.timeout = Duration::from_secs(1);
        let started = Instant::now();
        let out = run_it(&slow).await?;
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(out.timed_out);
        assert!(!out.interrupted);
        assert_eq!(out.exit_code, None);
        assert_eq!(out.signal, Some(9));
        assert!(
            out.render()
                .ends_with("timed out after 1s; the command and its child processes were killed"),
            "{}",
            out.render()
        );
        let pgid = first_line_pid(&out.output)?;
        assert!(group_is_gone(pgid).await, "group {pgid} survived");
        Ok(())
    }

    #[tokio::test]
    async fn cancellation_kills_the_whole_process_group() -> TestResult {
        nix::sys::prctl::set_child_subreaper(true)?;
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            trigger.cancel();
        });
        let started = Instant::now();
        let out = run(&sh("echo $$; sleep 100 & sleep 100"), &cancel).await?;
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(out.interrupted);
        assert!(!out.timed_out);
        assert!(
            out.render()
                .ends_with("interrupted; the command and its child processes were killed")
        );
        let pgid = first_line_pid(&out.output)?;
        assert!(group_is_gone(pgid).await, "group {pgid} survived");
        Ok(())
    }

    #[tokio::test]
    async fn background_jobs_do_not_outlive_the_command() -> TestResult {
        nix::sys::prctl::set_child_subreaper(true)?;
        let started = Instant::now();
        // The background sleep keeps the output pipe open after the shell exits.
        let out = run_it(&sh("echo $$; sleep 100 & echo done")).await?;
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(!out.timed_out);
        assert_eq!(out.exit_code, Some(0));
        assert!(out.output.ends_with("done\n"));
        let pgid = first_line_pid(&out.output)?;
        assert!(group_is_gone(pgid).await, "group {pgid} survived");
        Ok(())
    }

    #[tokio::test]
    async fn a_process_that_left_the_group_does_not_hang_the_reader() -> TestResult {
        let started = Instant::now();
        // `setsid` puts the sleep out of the group's reach, still holding the pipe; it prints
        // its pid so the test can clean up after itself.
        let out = run_it(&sh("setsid sh -c 'echo $$; exec sleep 30' & sleep 0.5; echo done")).await?;
        let elapsed = started.elapsed();
        let escaped = first_line_pid(&out.output)?;
        let _ = nix::sys::signal::kill(escaped, Signal::SIGKILL);
        // The reader waited out the grace period for the escaped writer, and no longer.
        assert!(elapsed >= DRAIN_GRACE, "{elapsed:?}");
        assert!(elapsed < DRAIN_GRACE + Duration::from_secs(3), "{elapsed:?}");
        assert!(!out.timed_out);
        assert_eq!(out.exit_code, Some(0));
        assert!(out.output.ends_with("\ndone\n"), "{}", out.output);
        Ok(())
    }

    #[tokio::test]
    async fn dropping_the_run_kills_the_group() -> TestResult {
        let dir = tempfile::tempdir()?;
        let pid_file = dir.path().join("pid");
        let script = format!("echo $$ > '{}'; sleep 100 & sleep 100", pid_file.display());
        let command = sh(&script);
        let cancel = CancellationToken::new();
        let result = tokio::time::timeout(Duration::from_millis(500), run(&command, &cancel)).await;
        assert!(result.is_err(), "the command should still have been running");
        let pgid = Pid::from_raw(std::fs::read_to_string(&pid_file)?.trim().parse()?);
        // Nothing reaps here: the runner that would is gone. Killed is what counts.
        assert!(group_is_dead(pgid).await?, "group {pgid} survived");
        Ok(())
    }

    #[test]
    fn secret_names_are_recognised() {
        for name in [
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "NPM_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "my_api_key",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "RUST_BACKTRACE", "CARGO_TERM_COLOR", "LANG"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn allowlist_takes_base_and_passed_names_but_no_secrets() {
        let lookup = |name: &str| match name {
            "PATH" => Some("/usr/bin:/bin".into()),
            "HOME" => Some("/home/bot".into()),
            "GITHUB_TOKEN" => Some("ghp_secret".into()),
            "EXTRA" => Some("1".into()),
            "SHELL" => Some("/bin/bash".into()),
            _ => None,
        };
        let env = allowlisted_from(
            &["GITHUB_TOKEN".into(), "EXTRA".into(), "UNSET".into(), "PATH".into()],
            lookup,
        );
        assert_eq!(
            env,
            [
                ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
                ("HOME".to_owned(), "/home/bot".to_owned()),
                ("EXTRA".to_owned(), "1".to_owned()),
            ]
        );
    }

    /// The environment of the test process cannot be changed without `unsafe` in edition 2024,
    /// so the test runs itself again as a child process whose environment holds a fake token,
    /// and does the real check there.
    #[tokio::test]
    async fn commands_see_only_allowlisted_variables() -> TestResult {
        const CHILD_MARK: &str = "UPKEEP_EXEC_ENV_TEST_CHILD";
        const TEST_NAME: &str = "commands_see_only_allowlisted_variables";
        if std::env::var_os(CHILD_MARK).is_none() {
            let fake = format!("ghp_upkeepFakeToken{}x", std::process::id());
            let out = tokio::process::Command::new(std::env::current_exe()?)
                .args([TEST_NAME, "--test-threads=1", "--nocapture"])
                .env(CHILD_MARK, "1")
                .env("GITHUB_TOKEN", &fake)
                .env("UPKEEP_FAKE_API_KEY", &fake)
                .env("UPKEEP_EXEC_PASSED", "passed-through")
                .env("UPKEEP_EXEC_NOT_PASSED", "left-behind")
                .output()
                .await?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
            assert!(stdout.contains("1 passed"), "the child ran no test: {stdout}");
            return Ok(());
        }

        let fake = std::env::var("GITHUB_TOKEN")?;
        let env = allowlisted_environment(&[
            "GITHUB_TOKEN".into(),
            "UPKEEP_FAKE_API_KEY".into(),
            "UPKEEP_EXEC_PASSED".into(),
        ]);
        let mut command = spec("env", &[]);
        command.env = env;
        let out = run_it(&command).await?;
        assert_eq!(out.exit_code, Some(0));
        assert!(!out.output.contains("GITHUB_TOKEN"), "{}", out.output);
        assert!(!out.output.contains(&fake), "{}", out.output);
        assert!(!out.output.contains("UPKEEP_EXEC_NOT_PASSED"));
        assert!(out.output.contains("UPKEEP_EXEC_PASSED=passed-through\n"));
        for line in out.output.lines() {
            let name = line.split('=').next().unwrap_or_default();
            assert!(
                BASE_ENVIRONMENT.contains(&name) || name == "UPKEEP_EXEC_PASSED",
                "unexpected variable {name}"
            );
        }
        Ok(())
    }

    #[tokio::test]
    async fn sandbox_request_without_landlock_is_refused() -> TestResult {
        if sandbox::probe() == SandboxKind::Landlock {
            // Covered end to end by running upkeep's trampoline; the test binary has none.
            return Ok(());
        }
        let mut confined = spec("true", &[]);
        confined.sandbox = Some(SandboxPolicy {
            writable: vec![std::env::temp_dir()],
        });
        let error = run_it(&confined).await.err().ok_or("ran unconfined")?;
        assert_eq!(error.kind(), io::ErrorKind::Unsupported);
        Ok(())
    }
}

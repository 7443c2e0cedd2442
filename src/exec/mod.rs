//! Commands: everything that runs a program for the model, and what holds it in.
//!
//! The model's commands (`run_shell_command`, declared command tools) are untrusted: the
//! repository chose what they run and the model chose how. This module is the boundary
//! around them (DESIGN section 8, "Commands"):
//!
//! - [`runner`]: starts a command, caps and returns its output, stops it at the timeout;
//! - [`mod@env`]: the allowlisted environment (no credentials);
//! - [`trampoline`] (called as [`invocation`] says): the OS sandbox every command runs in. On
//!   Linux (`sys_linux.rs`, with `namespaces`, `confine`, `cgroup`, `reaper`, `seccomp`): no
//!   network (a network namespace, else a seccomp filter on sockets with Landlock's TCP rules
//!   as a second layer), writes only in the work tree and the scratch
//!   directory (Landlock), no capabilities, resource limits, and no process left behind (a PID
//!   namespace, else a subreaper supervisor). Elsewhere (`sys_other.rs`, macOS): resource
//!   limits and the process group's cleanup only;
//! - [`limits`]: the resource limits, the same on every system;
//! - [`plan`]: what of that this machine offers, decided once per run and reported;
//! - [`readable`]: what a command may read (the system, toolchains, its own clone);
//! - [`declared_command`]: declared tools' templates and validation;
//! - [`blocklist`]: the lexical backstop for shell command lines.
//!
//! `docs/commands.md` is the user's view of all of this.

pub(crate) mod blocklist;
pub(crate) mod declared_command;
pub(crate) mod env;
pub mod invocation;
pub(crate) mod limits;
pub mod plan;
pub mod readable;
pub(crate) mod runner;
pub(crate) mod trampoline;

mod capture;
mod supervision;

// Linux's sandbox: namespaces, Landlock and capabilities, a pids cgroup as root, and cleanup
// through a subreaper and `/proc`. Only `sys_linux.rs` uses them.
#[cfg(target_os = "linux")]
pub(crate) mod cgroup;
#[cfg(target_os = "linux")]
pub(crate) mod confine;
#[cfg(target_os = "linux")]
pub(crate) mod namespaces;
#[cfg(target_os = "linux")]
pub(crate) mod reaper;
#[cfg(target_os = "linux")]
pub(crate) mod seccomp;

/// The system's side of the sandbox: the same functions for Linux (`sys_linux.rs`) and for
/// every other system (`sys_other.rs`), so that nothing else in `exec` needs a `#[cfg]`.
#[cfg_attr(target_os = "linux", path = "sys_linux.rs")]
#[cfg_attr(not(target_os = "linux"), path = "sys_other.rs")]
mod sys;

/// On Linux, the other systems' side is compiled and unit-tested too, so that a change that
/// breaks it shows here and not first on a macOS release build.
#[cfg(all(test, target_os = "linux"))]
#[path = "sys_other.rs"]
#[expect(dead_code, reason = "only its tests use it on Linux")]
mod sys_other;

use std::time::Duration;

pub use env::{allowlisted_environment, command_environment, is_secret_name};
pub use invocation::{SUBCOMMAND, SandboxPolicy};
pub use limits::{Limits, LimitsConfig};
pub use plan::{SandboxPlan, SandboxReport};
pub use runner::{CommandOutput, CommandSpec, DEFAULT_OUTPUT_CAP, DEFAULT_TIMEOUT, run};
pub use sys::harden_process;
pub use trampoline::{probe, trampoline_main};

/// Settings for tools that run programs, from the operator.
#[derive(Debug, Clone)]
pub struct CommandSettings {
    pub timeout: Duration,
    /// Names of variables passed from upkeep's environment (`--env`).
    pub pass_env: Vec<String>,
    /// Bytes of output returned to the model.
    pub output_cap: usize,
    /// `--require-sandbox`.
    pub require_sandbox: bool,
    /// `--allow-network`.
    pub allow_network: bool,
    /// `[limits]` of the operator's `--config`.
    pub limits: Limits,
    /// The sandbox decided at the start of the run ([`SandboxPlan::decide`]). `None` until then;
    /// commands refuse to run without one.
    pub sandbox: Option<SandboxPlan>,
}

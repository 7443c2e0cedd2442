//! Commands: everything that runs a program for the model, and what holds it in.
//!
//! The model's commands (`run_shell_command`, declared command tools) are untrusted: the
//! repository chose what they run and the model chose how. This module is the boundary
//! around them (DESIGN section 8, "Commands"):
//!
//! - [`runner`]: starts a command, caps and returns its output, stops it at the timeout;
//! - [`env`]: the allowlisted environment (no credentials);
//! - [`trampoline`] (called as [`invocation`] says), [`namespaces`], [`confine`], [`limits`], [`cgroup`], [`reaper`]: the OS
//!   sandbox: no network (a network namespace, else Landlock's TCP rules), writes only in the
//!   work tree and the scratch directory (Landlock), no capabilities, resource limits, and no
//!   process left behind (a PID namespace, else a subreaper supervisor);
//! - [`plan`]: what of that this machine offers, decided once per run and reported;
//! - [`declared`]: declared tools' templates and validation;
//! - [`blocklist`]: the lexical backstop for shell command lines.
//!
//! `docs/commands.md` is the user's view of all of this.

pub mod blocklist;
pub mod cgroup;
pub mod confine;
pub mod declared;
pub mod env;
pub mod invocation;
pub mod limits;
pub mod namespaces;
pub mod plan;
pub mod reaper;
pub mod runner;
pub mod trampoline;

mod capture;

use std::time::Duration;

pub use env::{allowlisted_environment, is_secret_name};
pub use invocation::{SUBCOMMAND, SandboxPolicy};
pub use limits::{Limits, LimitsConfig};
pub use plan::{SandboxPlan, SandboxReport};
pub use runner::{CommandOutput, CommandSpec, DEFAULT_OUTPUT_CAP, DEFAULT_TIMEOUT, run};
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

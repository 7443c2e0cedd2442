//! Resource limits for every command: processes, memory, file size, CPU time, no core dumps.
//!
//! Why: a command the model runs must not be able to take the machine down with it (a fork
//! bomb, an allocation loop, a file that fills the disk, a busy loop that outlives reason).
//! The limits are the operator's to set (`[limits]` in `--config`); a repository cannot set or
//! raise them. The defaults are generous enough for `cargo test` or `npm test` of a real
//! project.
//!
//! How: resource limits (`setrlimit`) are set in the sandbox's confinement stage, before the
//! program runs, so they bind it and everything it starts:
//!
//! - memory: `RLIMIT_DATA`, per process. It counts private writable memory (heap and anonymous
//!   mappings) but not address space that is merely reserved, which is why it is used instead
//!   of `RLIMIT_AS`: V8 (Node.js), the JVM, Go and WebAssembly runtimes reserve many gigabytes
//!   of address space up front and fail under an address-space limit. Shared mappings are not
//!   counted, and the total across processes is up to `processes` times the limit.
//! - file size: `RLIMIT_FSIZE`, per file written.
//! - CPU time: `RLIMIT_CPU`, per process (all its threads together); `SIGXCPU` at the limit,
//!   `SIGKILL` a few seconds later. The command's wall-clock timeout is separate.
//! - core dumps: `RLIMIT_CORE` 0.
//! - processes: `RLIMIT_NPROC`, which the kernel counts per user, and since Linux 5.14 per user
//!   *in each user namespace*: inside the sandbox's own user namespace it bounds the command's
//!   processes and threads alone. Without a user namespace it would count every process of
//!   upkeep's user on the machine, so the limit is set to that count plus `processes`. The
//!   kernel never applies `RLIMIT_NPROC` to user id 0, so when upkeep runs as root the limit is
//!   a pids cgroup instead (see `cgroup`), where one can be made; [`ProcessLimit`] says which.
//!
//! On systems other than Linux (macOS) the same memory, file size, CPU time and core dump
//! limits are set; there is no process limit (`RLIMIT_NPROC` would count every process of
//! upkeep's user, which such systems give no safe way to count), so [`ProcessLimit::None`].

use serde::{Deserialize, Serialize};

/// Resource limits per command (see the module documentation for what each one counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Processes and threads the command may have at once.
    pub processes: u64,
    /// Private writable memory per process, in MiB.
    pub memory_mb: u64,
    /// Largest file a command may write, in MiB.
    pub file_size_mb: u64,
    /// CPU time per process, in seconds.
    pub cpu_seconds: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            processes: 4096,
            memory_mb: 8192,
            file_size_mb: 8192,
            cpu_seconds: 3600,
        }
    }
}

/// The operator's `[limits]` table: each key left out keeps its default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub processes: Option<u64>,
    pub memory_mb: Option<u64>,
    pub file_size_mb: Option<u64>,
    pub cpu_seconds: Option<u64>,
}

/// A limit of zero or one too large to express.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid `limits.{key}`: {problem}")]
pub struct LimitError {
    pub key: &'static str,
    pub problem: String,
}

/// The largest value a limit may take, in its unit: far beyond any machine, small enough that
/// converting MiB to bytes cannot overflow.
const MAX_LIMIT: u64 = 1 << 40;

impl LimitsConfig {
    /// The limits this table sets over the defaults; every value must be at least 1.
    pub fn resolve(&self) -> Result<Limits, LimitError> {
        let defaults = Limits::default();
        let pick = |key: &'static str, value: Option<u64>, default: u64| match value {
            None => Ok(default),
            Some(0) => Err(LimitError {
                key,
                problem: "must be at least 1".into(),
            }),
            Some(value) if value > MAX_LIMIT => Err(LimitError {
                key,
                problem: format!("must be at most {MAX_LIMIT}"),
            }),
            Some(value) => Ok(value),
        };
        Ok(Limits {
            processes: pick("processes", self.processes, defaults.processes)?,
            memory_mb: pick("memory_mb", self.memory_mb, defaults.memory_mb)?,
            file_size_mb: pick("file_size_mb", self.file_size_mb, defaults.file_size_mb)?,
            cpu_seconds: pick("cpu_seconds", self.cpu_seconds, defaults.cpu_seconds)?,
        })
    }
}

/// What enforces the process limit on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProcessLimit {
    /// A pids cgroup of the command's own (upkeep runs as root).
    Cgroup,
    /// `RLIMIT_NPROC` counted in the command's own user namespace.
    Rlimit,
    /// `RLIMIT_NPROC` counted over upkeep's whole user: the user's process count plus the limit.
    RlimitPerUser,
    /// Nothing: root without a usable pids cgroup, or a system other than Linux.
    None,
}

/// Seconds between the CPU time soft limit (`SIGXCPU`) and the hard one (`SIGKILL`), so a
/// program that handles `SIGXCPU` can say what happened.
const CPU_GRACE_SECONDS: u64 = 5;
/// Room above `processes` for the sandbox's own supervisor and its watcher thread, which are
/// counted in the same user namespace.
const SUPERVISOR_PROCESSES: u64 = 3;

/// Sets the limits every system has (no core dumps, memory, file size, CPU time) on the calling
/// process; what it starts inherits them. The process limit is separate
/// ([`process_rlimit`]): only Linux has one to set.
pub(crate) fn apply(limits: &Limits) -> Result<(), String> {
    use nix::sys::resource::{Resource, setrlimit};
    let mib = |value: u64| value.saturating_mul(1024 * 1024);
    let set = |resource: Resource, soft: u64, hard: u64, name: &str| {
        setrlimit(resource, soft, hard).map_err(|error| format!("cannot limit {name}: {error}"))
    };
    set(Resource::RLIMIT_CORE, 0, 0, "core dumps")?;
    set(
        Resource::RLIMIT_DATA,
        mib(limits.memory_mb),
        mib(limits.memory_mb),
        "memory",
    )?;
    set(
        Resource::RLIMIT_FSIZE,
        mib(limits.file_size_mb),
        mib(limits.file_size_mb),
        "file size",
    )?;
    set(
        Resource::RLIMIT_CPU,
        limits.cpu_seconds,
        limits.cpu_seconds.saturating_add(CPU_GRACE_SECONDS),
        "CPU time",
    )
}

/// The `RLIMIT_NPROC` value `process_limit` calls for, if any. `processes_already` is what the
/// count starts from when [`ProcessLimit::RlimitPerUser`] applies. [`ProcessLimit::Cgroup`] is
/// set up by the supervisor instead.
pub(crate) fn process_rlimit(limits: &Limits, process_limit: ProcessLimit, processes_already: u64) -> Option<u64> {
    match process_limit {
        ProcessLimit::Rlimit => Some(limits.processes.saturating_add(SUPERVISOR_PROCESSES)),
        ProcessLimit::RlimitPerUser => Some(limits.processes.saturating_add(processes_already)),
        // The kernel ignores RLIMIT_NPROC for root; setting it would only mislead.
        ProcessLimit::Cgroup | ProcessLimit::None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_rlimit_leaves_room_for_the_supervisor_or_the_users_other_processes() {
        let limits = Limits {
            processes: 100,
            ..Limits::default()
        };
        assert_eq!(process_rlimit(&limits, ProcessLimit::Rlimit, 7), Some(103));
        assert_eq!(process_rlimit(&limits, ProcessLimit::RlimitPerUser, 7), Some(107));
        assert_eq!(process_rlimit(&limits, ProcessLimit::Cgroup, 7), None);
        assert_eq!(process_rlimit(&limits, ProcessLimit::None, 7), None);
    }

    #[test]
    fn defaults_fill_what_the_operator_left_out() {
        let config = LimitsConfig {
            processes: Some(64),
            ..LimitsConfig::default()
        };
        let limits = config.resolve().expect("valid");
        assert_eq!(limits.processes, 64);
        assert_eq!(limits.memory_mb, Limits::default().memory_mb);
        assert_eq!(LimitsConfig::default().resolve(), Ok(Limits::default()));
    }

    #[test]
    fn zero_and_absurd_limits_are_refused_naming_the_key() {
        let zero = LimitsConfig {
            memory_mb: Some(0),
            ..LimitsConfig::default()
        };
        let error = zero.resolve().expect_err("zero is refused");
        assert_eq!(error.key, "memory_mb");
        assert!(error.to_string().contains("limits.memory_mb"), "{error}");
        let huge = LimitsConfig {
            cpu_seconds: Some(u64::MAX),
            ..LimitsConfig::default()
        };
        assert_eq!(huge.resolve().expect_err("too large").key, "cpu_seconds");
    }

    /// The `[limits]` example of `docs/commands.md` is valid and shows the defaults.
    #[test]
    fn the_documented_example_is_the_defaults() {
        let docs = include_str!("../../docs/commands.md");
        let example = docs
            .split("```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("a toml block");
        #[derive(Deserialize)]
        struct File {
            limits: LimitsConfig,
        }
        let file: File = toml::from_str(example).expect("valid TOML");
        assert_eq!(file.limits.resolve(), Ok(Limits::default()));
        assert!(file.limits.processes.is_some() && file.limits.cpu_seconds.is_some());
    }
}

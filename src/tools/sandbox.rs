//! Filesystem confinement for the commands the model runs, with Landlock.
//!
//! Why: the shell blocklist (`shell_guard`) is lexical and easy to get around; what protects the
//! machine is the kernel. A confined command may read and execute anything its user can, but it
//! may write, create, remove or rename only beneath the directories its [`SandboxPolicy`] names
//! (the clone and its scratch folder), plus `/dev/null`. It may not send signals to processes
//! outside its sandbox either (so `kill -9 -1` cannot take upkeep down with it), where the kernel
//! supports that (Landlock ABI 6, Linux 6.12).
//!
//! How: Landlock restricts the calling thread and everything it then starts, so the restriction
//! has to be applied in the child between `fork` and `exec`. `pre_exec` would do that but is
//! `unsafe`, which this crate forbids, so the parent runs upkeep's own executable as a
//! trampoline instead:
//!
//! ```text
//! upkeep __sandbox-exec --write DIR [--write DIR]... -- PROGRAM ARGS...
//! ```
//!
//! The trampoline ([`sandbox_exec_main`]) restricts itself, then replaces itself with the
//! program through `exec` (same process, same process group, same environment and standard
//! streams), so the caller's timeout and group kill keep working unchanged.
//!
//! Guarantees: the trampoline never runs the program unconfined. The first Landlock version's
//! filesystem rights are a hard requirement; if the kernel cannot enforce them, or anything in
//! the set-up fails, it exits with status 126 and a message on stderr instead of running the
//! program (the parent decided a sandbox was needed). Rights from newer Landlock versions
//! (cross-directory rename, truncate, device ioctl, signal scoping) are added where the kernel
//! has them. Restricting also sets `no_new_privs`, so set-uid programs such as `sudo` cannot
//! gain privileges inside the sandbox.
//!
//! Not covered: reading (secrets readable by upkeep's user stay readable, which is why the
//! environment is allowlisted separately), network access, and processes that leave the
//! process group.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope,
};

/// The hidden subcommand upkeep's `main` must route to [`sandbox_exec_main`].
pub const SUBCOMMAND: &str = "__sandbox-exec";

/// Exit status when the trampoline could not confine or start the program (as a shell reports a
/// command found but not executable).
const EXIT_CANNOT_RUN: u8 = 126;
/// Exit status when the program does not exist (as a shell reports a command not found).
const EXIT_NOT_FOUND: u8 = 127;

/// The newest Landlock ABI whose filesystem rights were tested with this code. Newer ABIs add
/// rights (e.g. ABI 9's pathname UNIX socket connections) whose denial could break ordinary
/// builds, so they are adopted deliberately, not by a kernel upgrade.
const FS_ABI: ABI = ABI::V5;

/// Which confinement commands get on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxKind {
    Landlock,
    None,
}

/// What a confined command may modify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Absolute directories beneath which writing, creating and removing are allowed.
    pub writable: Vec<PathBuf>,
}

/// Whether this kernel enforces Landlock's filesystem rules. Cached: the answer cannot change
/// while upkeep runs.
pub fn probe() -> SandboxKind {
    static KIND: OnceLock<SandboxKind> = OnceLock::new();
    *KIND.get_or_init(|| {
        // Creating (not applying) a ruleset that requires the first ABI's rights asks the kernel
        // whether it supports and has enabled Landlock; it restricts nothing in this process.
        let created = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V1))
            .and_then(|ruleset| ruleset.create());
        match created {
            Ok(_) => SandboxKind::Landlock,
            Err(error) => {
                tracing::debug!(%error, "Landlock is not available");
                SandboxKind::None
            }
        }
    })
}

/// Rewrites `program args` into the trampoline invocation that runs it confined by `policy`:
/// upkeep's own executable and `__sandbox-exec --write DIR... -- program args...`.
pub fn wrap(program: &str, args: &[String], policy: &SandboxPolicy) -> io::Result<(String, Vec<String>)> {
    let exe = std::env::current_exe()?
        .into_os_string()
        .into_string()
        .map_err(|_| invalid_input("upkeep's executable path is not valid UTF-8"))?;
    Ok((exe, trampoline_args(program, args, policy)?))
}

fn trampoline_args(program: &str, args: &[String], policy: &SandboxPolicy) -> io::Result<Vec<String>> {
    let mut out = Vec::with_capacity(args.len() + 2 * policy.writable.len() + 3);
    out.push(SUBCOMMAND.to_owned());
    for dir in &policy.writable {
        // Relative directories would be resolved against the command's working directory by
        // the trampoline, not against upkeep's: refuse the ambiguity.
        if !dir.is_absolute() {
            return Err(invalid_input(format!(
                "sandbox directory {} is not absolute",
                dir.display()
            )));
        }
        let dir = dir
            .to_str()
            .ok_or_else(|| invalid_input(format!("sandbox directory {} is not valid UTF-8", dir.display())))?;
        out.push("--write".to_owned());
        out.push(dir.to_owned());
    }
    out.push("--".to_owned());
    out.push(program.to_owned());
    out.extend(args.iter().cloned());
    Ok(out)
}

fn invalid_input(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message.into())
}

/// Entry point for the hidden `__sandbox-exec` subcommand. `args` are the arguments after the
/// subcommand's name (a leading `__sandbox-exec` is skipped too). Parses them, restricts this
/// process, and replaces it with the program. Returns only on error: 126 when the sandbox or the
/// program could not be set up, 127 when the program does not exist, with a message on stderr
/// (which the caller captures as the command's output).
///
/// Call it before starting an async runtime, tracing or anything else: it must stay a thin step
/// between upkeep and the program.
pub fn sandbox_exec_main(args: &[OsString]) -> ExitCode {
    let args = match args.split_first() {
        Some((first, rest)) if first.as_os_str() == OsStr::new(SUBCOMMAND) => rest,
        _ => args,
    };
    let invocation = match parse_args(args) {
        Ok(invocation) => invocation,
        Err(message) => return fail(EXIT_CANNOT_RUN, &message),
    };
    if let Err(message) = restrict_current_thread(&invocation.writable) {
        return fail(
            EXIT_CANNOT_RUN,
            &format!("refusing to run the command unconfined: {message}"),
        );
    }
    // `exec` returns only if it failed; on success this process is the program.
    let error = Command::new(&invocation.program).args(&invocation.args).exec();
    let code = if error.kind() == io::ErrorKind::NotFound {
        EXIT_NOT_FOUND
    } else {
        EXIT_CANNOT_RUN
    };
    fail(
        code,
        &format!("cannot run {}: {error}", invocation.program.to_string_lossy()),
    )
}

fn fail(code: u8, message: &str) -> ExitCode {
    // Not `eprintln!`: a closed or broken stderr must not turn into a panic.
    let _ = writeln!(io::stderr(), "upkeep sandbox: {message}");
    ExitCode::from(code)
}

#[derive(Debug, PartialEq, Eq)]
struct Invocation {
    writable: Vec<PathBuf>,
    program: OsString,
    args: Vec<OsString>,
}

fn parse_args(args: &[OsString]) -> Result<Invocation, String> {
    let mut iter = args.iter();
    let mut writable = Vec::new();
    loop {
        match iter.next() {
            None => return Err("missing `-- PROGRAM [ARGS...]`".to_owned()),
            Some(arg) if arg.as_os_str() == OsStr::new("--") => break,
            Some(arg) if arg.as_os_str() == OsStr::new("--write") => {
                let dir = iter.next().ok_or_else(|| "`--write` needs a directory".to_owned())?;
                let dir = PathBuf::from(dir);
                if !dir.is_absolute() {
                    return Err(format!("writable directory {} is not absolute", dir.display()));
                }
                writable.push(dir);
            }
            Some(other) => {
                return Err(format!("unexpected argument {:?} before `--`", other.to_string_lossy()));
            }
        }
    }
    let program = iter
        .next()
        .ok_or_else(|| "missing PROGRAM after `--`".to_owned())?
        .clone();
    Ok(Invocation {
        writable,
        program,
        args: iter.cloned().collect(),
    })
}

/// Confines the calling thread and everything it starts afterwards: read and execute
/// everywhere; every filesystem right beneath `writable`; read and write on `/dev/null`.
/// Fails rather than leaving the thread unconfined.
fn restrict_current_thread(writable: &[PathBuf]) -> Result<(), String> {
    let ruleset = Ruleset::default()
        // Without at least the first ABI's write rights there is no confinement worth the
        // name: make their absence an error instead of a silent no-op.
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .map_err(|error| format!("Landlock is not available: {error}"))?
        // Newer rights and scopes only where the kernel has them.
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(FS_ABI))
        .and_then(|ruleset| ruleset.scope(Scope::Signal))
        .and_then(|ruleset| ruleset.create())
        .map_err(|error| format!("cannot create the Landlock ruleset: {error}"))?;

    let mut ruleset = ruleset
        .add_rule(PathBeneath::new(
            open_path(Path::new("/"))?,
            AccessFs::from_read(FS_ABI),
        ))
        .map_err(|error| format!("cannot allow reading /: {error}"))?;
    // Countless tools redirect to /dev/null. It is a file, so only file rights apply. A system
    // without it loses nothing by the rule's absence.
    if let Ok(dev_null) = PathFd::new("/dev/null") {
        ruleset = ruleset
            .add_rule(PathBeneath::new(dev_null, AccessFs::from_file(FS_ABI)))
            .map_err(|error| format!("cannot allow writing /dev/null: {error}"))?;
    }
    for dir in writable {
        ruleset = ruleset
            .add_rule(PathBeneath::new(open_path(dir)?, AccessFs::from_all(FS_ABI)))
            .map_err(|error| format!("cannot allow writing in {}: {error}", dir.display()))?;
    }

    let status = ruleset
        .restrict_self()
        .map_err(|error| format!("cannot apply the Landlock ruleset: {error}"))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(()),
        RulesetStatus::NotEnforced => Err("the kernel did not enforce the Landlock ruleset".to_owned()),
    }
}

fn open_path(path: &Path) -> Result<PathFd, String> {
    PathFd::new(path).map_err(|error| format!("cannot open {}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(items: &[&str]) -> Vec<OsString> {
        items.iter().map(OsString::from).collect()
    }

    #[test]
    fn trampoline_arguments_round_trip() -> Result<(), Box<dyn std::error::Error>> {
        let policy = SandboxPolicy {
            writable: vec![PathBuf::from("/work/clone"), PathBuf::from("/tmp/scratch")],
        };
        // Program arguments that look like trampoline options must reach the program as is.
        let program_args = vec!["-c".to_owned(), "--write".to_owned(), "--".to_owned()];
        let args = trampoline_args("sh", &program_args, &policy)?;
        assert_eq!(
            args,
            [
                SUBCOMMAND,
                "--write",
                "/work/clone",
                "--write",
                "/tmp/scratch",
                "--",
                "sh",
                "-c",
                "--write",
                "--"
            ]
        );
        let parsed = parse_args(&args.iter().skip(1).map(OsString::from).collect::<Vec<_>>())?;
        assert_eq!(
            parsed,
            Invocation {
                writable: policy.writable.clone(),
                program: OsString::from("sh"),
                args: os(&["-c", "--write", "--"]),
            }
        );
        Ok(())
    }

    #[test]
    fn wrap_names_this_executable() -> Result<(), Box<dyn std::error::Error>> {
        let policy = SandboxPolicy {
            writable: vec![PathBuf::from("/tmp")],
        };
        let (program, args) = wrap("true", &[], &policy)?;
        assert_eq!(PathBuf::from(program), std::env::current_exe()?);
        assert_eq!(args.first().map(String::as_str), Some(SUBCOMMAND));
        Ok(())
    }

    #[test]
    fn relative_writable_directories_are_refused() {
        let policy = SandboxPolicy {
            writable: vec![PathBuf::from("target")],
        };
        assert!(wrap("true", &[], &policy).is_err());
        assert!(parse_args(&os(&["--write", "target", "--", "true"])).is_err());
    }

    #[test]
    fn malformed_trampoline_arguments_are_refused() {
        for args in [
            &[][..],
            &["--write"][..],
            &["--write", "/tmp"][..],
            &["--"][..],
            &["sh", "-c", "true"][..],
            &["--read", "/tmp", "--", "true"][..],
        ] {
            assert!(parse_args(&os(args)).is_err(), "{args:?} was accepted");
        }
    }

    #[test]
    fn trampoline_failure_exits_126() {
        // A bad invocation never gets as far as the program.
        assert_eq!(
            sandbox_exec_main(&os(&[SUBCOMMAND, "--write"])),
            ExitCode::from(EXIT_CANNOT_RUN)
        );
    }

    #[test]
    fn probe_is_stable() {
        assert_eq!(probe(), probe());
    }

    /// Landlock restricts only the calling thread and what it starts, so a scratch thread can be
    /// confined and start a shell without touching the rest of the test process.
    #[test]
    fn confined_commands_write_only_inside_the_writable_directories() -> Result<(), Box<dyn std::error::Error>> {
        if probe() != SandboxKind::Landlock {
            // Not an error: the kernel running the tests has no Landlock.
            let _ = writeln!(io::stderr(), "skipped: this kernel does not enforce Landlock");
            return Ok(());
        }
        let root = tempfile::tempdir()?;
        let inside = root.path().join("inside");
        let outside = root.path().join("outside");
        std::fs::create_dir(&inside)?;
        std::fs::create_dir(&outside)?;
        std::fs::write(outside.join("existing"), "keep")?;

        let writable = vec![inside.clone()];
        let script = format!(
            "echo hi > '{inside}/x'; echo inside=$?; \
             echo hi > '{outside}/y'; echo outside=$?; \
             echo gone > '{outside}/existing'; echo overwrite=$?; \
             rm -f '{outside}/existing'; echo remove=$?; \
             mkdir '{outside}/d'; echo mkdir=$?; \
             echo hi > /dev/null; echo devnull=$?; \
             cat '{outside}/existing' > /dev/null; echo read=$?",
            inside = inside.display(),
            outside = outside.display(),
        );
        let output = std::thread::spawn(move || -> Result<std::process::Output, String> {
            restrict_current_thread(&writable)?;
            Command::new("sh")
                .arg("-c")
                .arg(&script)
                .output()
                .map_err(|error| error.to_string())
        })
        .join()
        .map_err(|_| "confined thread panicked")??;
        let stdout = String::from_utf8_lossy(&output.stdout);
        // Each step printed `name=status`; only the status's zero-ness is portable across shells.
        let status_of = |name: &str| {
            stdout
                .lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_owned)
        };
        for (step, allowed) in [
            ("inside", true),
            ("outside", false),
            ("overwrite", false),
            ("remove", false),
            ("mkdir", false),
            ("devnull", true),
            ("read", true),
        ] {
            let status = status_of(step);
            assert_eq!(
                status.as_deref() == Some("0"),
                allowed,
                "{step}: status {status:?}; output: {stdout}"
            );
        }
        assert_eq!(std::fs::read_to_string(inside.join("x"))?, "hi\n");
        assert!(!outside.join("y").exists());
        assert!(!outside.join("d").exists());
        assert_eq!(std::fs::read_to_string(outside.join("existing"))?, "keep");
        Ok(())
    }

    #[test]
    fn missing_writable_directory_is_an_error_not_an_escape() {
        if probe() != SandboxKind::Landlock {
            return;
        }
        let result =
            std::thread::spawn(|| restrict_current_thread(&[PathBuf::from("/nonexistent/upkeep/sandbox/dir")])).join();
        assert!(matches!(result, Ok(Err(_))), "{result:?}");
    }
}

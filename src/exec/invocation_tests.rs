//! The trampoline's arguments: what upkeep builds is what the stages parse, and nothing else is.

use std::path::PathBuf;

use super::*;
use crate::exec::limits::ProcessLimit;
use crate::exec::plan::{Capabilities, Cleanup, Filesystem, Kernel, Namespaces, Network, Proc};

fn policy() -> SandboxPolicy {
    SandboxPolicy {
        writable: vec![PathBuf::from("/work/clone"), PathBuf::from("/tmp/scratch")],
        readable: vec![PathBuf::from("/usr")],
        plan: SandboxPlan {
            kernel: Kernel::Linux,
            filesystem: Filesystem::Landlock,
            network: Network::Namespace,
            namespaces: Namespaces::User,
            capabilities: Capabilities::None,
            process_limit: ProcessLimit::Rlimit,
            cleanup: Cleanup::PidNamespace,
            signal_scope: true,
            proc: Proc::Private,
        },
        limits: Limits::default(),
    }
}

fn os(items: &[String]) -> Vec<OsString> {
    items.iter().map(OsString::from).collect()
}

#[test]
fn trampoline_arguments_round_trip() -> Result<(), Box<dyn std::error::Error>> {
    // Program arguments that look like trampoline options must reach the program as is.
    let program_args = vec!["-c".to_owned(), "--".to_owned(), "supervise".to_owned()];
    let args = supervise_args("sh", &program_args, &policy())?;
    assert_eq!(args.first().map(String::as_str), Some(SUBCOMMAND));
    assert_eq!(args.get(1).map(String::as_str), Some("supervise"));
    let parsed = parse_invocation(&os(&args[2..]))?;
    assert_eq!(
        parsed,
        Invocation {
            policy: policy(),
            program: OsString::from("sh"),
            args: os(&program_args),
        }
    );
    Ok(())
}

#[test]
fn relative_writable_directories_are_refused() {
    let mut relative = policy();
    relative.writable = vec![PathBuf::from("target")];
    assert!(supervise_args("true", &[], &relative).is_err());
    let json = serde_json::to_string(&relative).unwrap_or_default();
    assert!(parse_invocation(&os(&[json, "--".into(), "true".into()])).is_err());
}

#[test]
fn malformed_trampoline_arguments_are_refused() {
    let json = serde_json::to_string(&policy()).unwrap_or_default();
    for args in [
        vec![],
        vec![json.clone()],
        vec![json.clone(), "--".into()],
        vec![json.clone(), "true".into()],
        vec!["{}".into(), "--".into(), "true".into()],
        vec!["not json".into(), "--".into(), "true".into()],
    ] {
        assert!(parse_invocation(&os(&args)).is_err(), "{args:?} was accepted");
    }
}

#[test]
fn a_program_that_does_not_exist_is_127_and_any_other_failure_126() {
    let missing = io::Error::from(io::ErrorKind::NotFound);
    let denied = io::Error::from(io::ErrorKind::PermissionDenied);
    assert_eq!(exit_status_for(&missing), EXIT_NOT_FOUND);
    assert_eq!(exit_status_for(&denied), EXIT_CANNOT_RUN);
    assert_eq!(cannot_run(OsStr::new("nope"), &missing), ExitCode::from(EXIT_NOT_FOUND));
}

use std::ffi::OsString;

use super::*;

#[test]
fn trampoline_failure_exits_126() {
    let os = |items: &[&str]| items.iter().map(OsString::from).collect::<Vec<_>>();
    assert_eq!(trampoline_main(&os(&["supervise"])), ExitCode::from(EXIT_CANNOT_RUN));
    assert_eq!(trampoline_main(&[]), ExitCode::from(EXIT_CANNOT_RUN));
}

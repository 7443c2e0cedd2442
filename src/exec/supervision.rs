//! What a sandbox supervisor does on every system: notice that upkeep let go of the command,
//! and end the way the program ended.
//!
//! Why a file of its own: Linux's supervisor (`sys_linux.rs`) and the one of other systems
//! (`sys_other.rs`) differ in everything they set up around the program, but not in these two
//! duties, which upkeep's runner relies on: closing the control pipe stops the command, and the
//! supervisor's own exit status is the program's.

use std::io::{self, Read};
use std::process::ExitCode;

use nix::sys::signal::Signal;

/// How the program ended, as the supervisor reproduces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    Code(i32),
    Signal(i32),
}

impl Ended {
    /// Ends this process the way the program ended: the same exit code, or the same signal, so
    /// upkeep reports it as if it had run the program itself.
    pub(super) fn reproduce(self) -> ExitCode {
        match self {
            Ended::Code(code) => ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX)),
            Ended::Signal(number) => {
                // Die the same way, so upkeep reports the signal. Only a signal this process
                // ignores (SIGPIPE) survives the attempt; then the shell's convention stands in.
                if let Ok(signal) = Signal::try_from(number) {
                    let _ = nix::sys::signal::raise(signal);
                }
                ExitCode::from(128u8.saturating_add(u8::try_from(number).unwrap_or(0)))
            }
        }
    }
}

/// Blocks until standard input (the pipe from upkeep) reaches its end or fails: upkeep closed
/// it (the command timed out or was cancelled) or upkeep is gone, however it ended.
pub(super) fn wait_for_upkeep_to_let_go() {
    let mut stdin = io::stdin();
    let mut buffer = [0u8; 64];
    loop {
        match stdin.read(&mut buffer) {
            Ok(0) => return,
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_code_is_reproduced_as_is_or_capped() {
        assert_eq!(Ended::Code(3).reproduce(), ExitCode::from(3));
        assert_eq!(Ended::Code(300).reproduce(), ExitCode::from(u8::MAX));
    }
}

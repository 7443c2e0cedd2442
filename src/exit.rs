//! Exit codes (DESIGN section 1), in one place so the binary, the events and the tests agree.

/// How a run ended, as the process exit code says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Every cycle ended with `finish`, or `--max-cycles` was reached between cycles.
    Done,
    /// Network, git, provider errors after retries, replay script exhausted.
    Failure,
    /// Usage or configuration error, reported before any work starts.
    Usage,
    /// The model asked a question: a human must answer.
    Question,
    /// A budget cut a cycle short.
    Budget,
    /// SIGINT/SIGTERM.
    Interrupted,
}

impl ExitStatus {
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Done => 0,
            ExitStatus::Failure => 1,
            ExitStatus::Usage => 2,
            ExitStatus::Question => 3,
            ExitStatus::Budget => 4,
            ExitStatus::Interrupted => 130,
        }
    }
}

impl From<ExitStatus> for std::process::ExitCode {
    fn from(status: ExitStatus) -> Self {
        std::process::ExitCode::from(status.code())
    }
}

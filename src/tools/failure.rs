//! What ends a run from inside a cycle ([`Failure`]): by concern, each with its source, and
//! where it happened (inside which tool, which sub-agent). The model cannot fix these and
//! retrying does not help: a rejected token, a broken clone, upkeep's own setup. Reported with
//! its whole chain of causes ([`crate::text::error_chain`]).

use crate::forge::ForgeError;
use crate::llm::ProviderError;
use crate::repo::WorkspaceError;

#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Git work in the clone failed; `doing` says what it was.
    #[error("{doing}")]
    Git {
        doing: &'static str,
        #[source]
        source: WorkspaceError,
    },
    /// The forge refused in a way retrying cannot fix (a rejected token, a missing permission).
    #[error(transparent)]
    Forge(ForgeError),
    /// A sub-agent's model provider failed (the main agent's is a [`crate::agent::CycleError`]
    /// of its own).
    #[error(transparent)]
    Provider(ProviderError),
    /// upkeep's own setup does not hold together: an agent missing from its catalogue, an
    /// answer schema that does not compile, a reply only sub-agents may give.
    #[error("{0}")]
    Setup(String),
    /// Where the failure happened: `place` is `tool NAME` or `agent PATH`.
    #[error("{place}")]
    Within {
        place: String,
        #[source]
        source: Box<Failure>,
    },
}

impl Failure {
    /// This failure, said to have happened in `place` (`tool NAME`, `agent PATH`).
    pub fn within(self, place: String) -> Self {
        Failure::Within {
            place,
            source: Box::new(self),
        }
    }
}

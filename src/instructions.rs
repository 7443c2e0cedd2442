//! The repository's own instructions for coding agents: `AGENTS.md` (the convention Codex,
//! Copilot, Jules, Cursor and others read), else `CLAUDE.md`, `.github/copilot-instructions.md`
//! or `GEMINI.md`, the first that exists.
//!
//! Read only through the gate ([`WorkTree::read`]: a symlink out of the clone, a FIFO or a
//! device is refused like a missing file, with a notice), at most [`MAX_INSTRUCTIONS_BYTES`],
//! and cut there with a notice. The system prompt puts them after upkeep's own rules, in a fence
//! their content cannot close, as guidance that cannot change those rules
//! ([`crate::agent::prompt::SystemPrompt`]).

use crate::repo::WorkTree;

/// The files looked for, in order of preference.
pub(crate) const CANDIDATES: &[&str] = &["AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md", "GEMINI.md"];

/// The most of an instructions file that reaches the prompt.
pub(crate) const MAX_INSTRUCTIONS_BYTES: u64 = 32 * 1024;

/// Instructions read from the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentInstructions {
    /// The file they came from (one of [`CANDIDATES`]).
    pub file: String,
    pub text: String,
    /// The file's size when it was cut at [`MAX_INSTRUCTIONS_BYTES`].
    pub cut_from: Option<u64>,
}

/// The first instructions file that can be read; a candidate the gate refuses is skipped with
/// a notice.
pub(crate) fn read(tree: &WorkTree, notice: &dyn Fn(&str)) -> Option<AgentInstructions> {
    for &file in CANDIDATES {
        match tree.read(file, MAX_INSTRUCTIONS_BYTES) {
            Ok((_, bytes)) => {
                let text = match std::str::from_utf8(&bytes.bytes) {
                    Ok(text) => text.to_owned(),
                    // The cut may split a character; anything else that is not UTF-8 is shown
                    // with replacement characters rather than dropped.
                    Err(error) if error.error_len().is_none() => {
                        String::from_utf8_lossy(&bytes.bytes[..error.valid_up_to()]).into_owned()
                    }
                    Err(_) => String::from_utf8_lossy(&bytes.bytes).into_owned(),
                };
                if text.trim().is_empty() {
                    continue;
                }
                return Some(AgentInstructions {
                    file: file.to_owned(),
                    text,
                    cut_from: bytes.truncated.then_some(bytes.size),
                });
            }
            Err(crate::repo::GateError::NotFound(_)) => {}
            Err(error) => notice(&format!("upkeep: {file} is not read: {error}")),
        }
    }
    None
}

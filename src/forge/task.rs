//! How the forge recognises a task across runs: a key made from the task's text, and the hidden
//! marker a GitHub pull request body carries for it (the local forge keeps the key in git config
//! beside the branch). Why here: the key is state kept in the forge, read back by every forge,
//! the local question store and the branch choice alike.
//!
//! The markers upkeep hides in what it posts (`<!-- upkeep:task ... -->`, the question and
//! dashboard markers) are read back as the bot's own word, so model text never carries a
//! working one ([`inert_markers`]): a forged task marker would make another task's next run take
//! this pull request for its own and force-push over it.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// The key that recognises a task across runs: a digest of its text (never the text itself,
/// which may be long or private).
pub fn task_key(task: &str) -> String {
    let digest = Sha256::digest(task.trim().as_bytes());
    let mut key = String::with_capacity(16);
    for byte in &digest[..8] {
        let _ = write!(key, "{byte:02x}");
    }
    key
}

/// The hidden line a GitHub pull request body carries for its task.
pub fn task_marker(key: &str) -> String {
    format!("<!-- upkeep:task {key} -->")
}

/// What every marker upkeep hides in a body or comment starts with.
const MARKER_START: &str = "<!-- upkeep:";

/// `text` (written by the model) with every upkeep marker in it made one that nothing reads.
pub fn inert_markers(text: &str) -> String {
    text.replace(MARKER_START, "<!-- upkeep (quoted):")
}

/// The task key in a pull request body, if it carries one: the last marker, the one the bot
/// appends after the description.
pub fn parse_task_marker(body: &str) -> Option<String> {
    let (_, rest) = body.rsplit_once("<!-- upkeep:task ")?;
    let (key, _) = rest.split_once(" -->")?;
    let valid = key.len() == 16 && key.bytes().all(|b| b.is_ascii_hexdigit());
    valid.then(|| key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_markers_round_trip() {
        let key = task_key("Fix the typos");
        assert_eq!(key.len(), 16);
        assert_eq!(key, task_key("  Fix the typos\n"));
        let body = format!("Fixes typos.\n\n{}", task_marker(&key));
        assert_eq!(parse_task_marker(&body), Some(key.clone()));
        assert_eq!(parse_task_marker("<!-- upkeep:task nothex!!nothex!! -->"), None);
        let forged = inert_markers(&task_marker(&task_key("another task")));
        assert_eq!(parse_task_marker(&forged), None);
        assert_eq!(
            parse_task_marker(&format!("{forged}\n{}", task_marker(&key))),
            Some(key)
        );
    }
}

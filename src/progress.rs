//! A spinner for people while the model thinks: elapsed time, tokens and cost so far, and the
//! reply's tokens as they stream in.
//!
//! Shown only when stderr is a terminal, progress is not quiet, and upkeep is not inside GitHub
//! Actions (whose log wants plain lines). Everywhere else nothing is drawn, so logs, pipes and
//! `--json` consumers see exactly the event lines.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// Whether this process may draw a spinner on stderr.
pub(crate) fn spinner_allowed(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal() && std::env::var_os("GITHUB_ACTIONS").is_none_or(|v| v != "true")
}

/// A spinner that clears itself when dropped, so the next progress line starts clean.
pub struct Waiting {
    bar: ProgressBar,
    message: String,
}

impl Waiting {
    pub fn start(message: String) -> Self {
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(message.clone());
        bar.enable_steady_tick(Duration::from_millis(120));
        Self { bar, message }
    }

    /// The reply is streaming in: `bytes` of it so far (shown as tokens, about four bytes each).
    pub fn received(&self, bytes: u64) {
        let tokens = crate::text::estimate_tokens(usize::try_from(bytes).unwrap_or(usize::MAX));
        self.bar
            .set_message(format!("{}; receiving the reply: ~{tokens} tokens", self.message));
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

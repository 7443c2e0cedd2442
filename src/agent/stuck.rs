//! Noticing a model that is stuck: the same failing call, again and again.
//!
//! Why: a weak model that gets an error back often makes the very same call next turn, and
//! the turn after (16 to 18 times in a row was seen), spending the cycle's turns on one error.
//! After [`WARN_AT`] identical failing calls in a row the error says so plainly; at [`STOP_AT`]
//! the cycle ends with [`Limit::Stuck`] (outcome `stuck`, exit 4), whose message names the share
//! of unusable replies, so the operator can tell a weak model from a hard task.
//!
//! "The same call" is the same tool with the same arguments (as JSON); only the first failed call
//! of a reply counts (the rest of a batch is skipped after it). A reply that could not be used at
//! all neither breaks nor extends the run of repeats: it is counted apart.

use super::budget::Limit;
use super::condense::ToolResult;

/// Identical failing calls in a row after which the error says so.
pub(super) const WARN_AT: u32 = 3;
/// Identical failing calls in a row that end the cycle.
pub(super) const STOP_AT: u32 = 5;

/// The run of repeats so far, and how many replies were unusable.
#[derive(Debug, Default)]
pub(super) struct Repeats {
    last: Option<String>,
    count: u32,
    unusable: u32,
    replies: u32,
}

impl Repeats {
    /// Replies that could not be used, so far.
    pub(super) fn unusable(&self) -> u32 {
        self.unusable
    }

    /// Replies so far.
    pub(super) fn replies(&self) -> u32 {
        self.replies
    }
    /// A reply that could not be used (not the reply's shape, or cut off).
    pub(super) fn unusable_reply(&mut self) {
        self.unusable += 1;
        self.replies += 1;
    }

    /// After a reply's calls ran: extends or breaks the run of repeats, adds the escalated note
    /// to the repeated call's error, and says when the cycle must end.
    pub(super) fn after(&mut self, results: &mut [ToolResult]) -> Option<Limit> {
        self.replies += 1;
        let Some(failed) = results.iter_mut().find(|result| !result.ok && !result.skipped) else {
            self.last = None;
            self.count = 0;
            return None;
        };
        let signature = format!(
            "{}\u{0}{}",
            failed.tool,
            serde_json::Value::Object(failed.arguments.clone())
        );
        if self.last.as_deref() == Some(signature.as_str()) {
            self.count += 1;
        } else {
            self.last = Some(signature);
            self.count = 1;
        }
        if self.count >= STOP_AT {
            return Some(Limit::Stuck {
                tool: failed.tool.clone(),
                times: self.count,
                unusable: self.unusable,
                replies: self.replies,
            });
        }
        if self.count >= WARN_AT {
            tracing::warn!(
                "the model made the same failing {} call {} times in a row; it is told to change course",
                failed.tool,
                self.count
            );
            failed.output.push_str(&format!(
                "\n\nThis is the same failing call (the same tool with the same arguments) {} times in a row, and it fails the same way each time. Do not make it again: read the error, then change the arguments or take another approach. At {STOP_AT} repeats the cycle ends.",
                self.count
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;

    fn failed(path: &str) -> ToolResult {
        let mut arguments = Map::new();
        arguments.insert("path".into(), json!(path));
        ToolResult {
            tool: "read_file".into(),
            arguments,
            ok: false,
            skipped: false,
            output: "no such file".into(),
        }
    }

    #[test]
    fn the_third_repeat_is_told_and_the_fifth_ends_the_cycle() {
        let mut repeats = Repeats::default();
        for turn in 1..=4 {
            let mut results = vec![failed("missing.rs")];
            assert!(repeats.after(&mut results).is_none(), "turn {turn}");
            assert_eq!(
                results[0].output.contains("3 times in a row"),
                turn == 3,
                "turn {turn}: {}",
                results[0].output
            );
        }
        repeats.unusable_reply();
        let limit = repeats.after(&mut [failed("missing.rs")]).expect("stuck");
        assert!(
            matches!(
                limit,
                Limit::Stuck {
                    times: 5,
                    unusable: 1,
                    replies: 6,
                    ..
                }
            ),
            "{limit:?}"
        );
    }

    #[test]
    fn other_arguments_or_a_success_start_over() {
        let mut repeats = Repeats::default();
        for _ in 0..4 {
            assert!(repeats.after(&mut [failed("a.rs")]).is_none());
        }
        for _ in 0..4 {
            assert!(
                repeats.after(&mut [failed("b.rs")]).is_none(),
                "other arguments start over"
            );
        }
        let mut ok = failed("b.rs");
        ok.ok = true;
        assert!(repeats.after(&mut [ok]).is_none());
        for _ in 0..4 {
            assert!(repeats.after(&mut [failed("b.rs")]).is_none(), "a success starts over");
        }
    }
}

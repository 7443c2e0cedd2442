//! What the forge keeps about keeping the bot's pull requests mergeable (DESIGN section 14,
//! "Mergeable"): the hidden markers the bot leaves on a pull request when it said something
//! about one of its head commits, read back so that each thing is said (and each re-doing is
//! tried) once per head commit, by stateless workers alike.
//!
//! Guarantees: a marker counts only on the first line of a note the bot itself left (on GitHub a
//! comment by the token's account; on the local forge a value upkeep wrote into the source's
//! git configuration beside the branch); model text never carries a working marker
//! ([`super::task::inert_markers`]).

use super::Comment;
use super::discussion::Role;

/// What every mergeable marker starts with.
pub(crate) const MERGEABLE_MARKER: &str = "<!-- upkeep:mergeable";

/// Which pull request: GitHub's have numbers, the local forge's only branches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestRef {
    pub number: Option<u64>,
    pub branch: String,
}

/// What a marker records the bot did about head commit `sha`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoteKind {
    /// It said a human's commits keep it from rebasing.
    HumanCommits,
    /// It re-did the change on the current base (one try per head commit).
    Redo,
    /// It said it stops keeping the pull request mergeable.
    GaveUp,
}

impl NoteKind {
    fn word(self) -> &'static str {
        match self {
            NoteKind::HumanCommits => "human-commits",
            NoteKind::Redo => "redo",
            NoteKind::GaveUp => "gave-up",
        }
    }
}

/// The marker line of a note of `kind` about head commit `sha`.
pub(crate) fn mergeable_marker(kind: NoteKind, sha: &str) -> String {
    format!("{MERGEABLE_MARKER} {} sha={sha} -->", kind.word())
}

/// The bot's notes about pull requests' mergeability: the marker lines it left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeableNotes {
    pub markers: Vec<String>,
}

impl MergeableNotes {
    /// The marker lines of the bot's own comments.
    pub(crate) fn from_comments(comments: &[Comment]) -> Self {
        Self {
            markers: comments
                .iter()
                .filter(|comment| comment.role == Role::Bot)
                .filter_map(|comment| comment.body.lines().next())
                .filter(|line| line.trim_start().starts_with(MERGEABLE_MARKER))
                .map(|line| line.trim().to_owned())
                .collect(),
        }
    }

    /// Whether the bot said it leaves the pull request to a human: about head commit `head`, or
    /// about any when the head is not known.
    pub(crate) fn needs_human(&self, head: Option<&str>) -> bool {
        [NoteKind::HumanCommits, NoteKind::GaveUp]
            .into_iter()
            .any(|kind| match head {
                Some(head) => self.has(kind, head),
                None => {
                    let said = format!("{MERGEABLE_MARKER} {} ", kind.word());
                    self.markers.iter().any(|marker| marker.starts_with(&said))
                }
            })
    }

    /// Whether the bot left a note of `kind` about head commit `sha`.
    pub(crate) fn has(&self, kind: NoteKind, sha: &str) -> bool {
        let wanted = mergeable_marker(kind, sha);
        self.markers.iter().any(|marker| marker.eq_ignore_ascii_case(&wanted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bots_own_first_line_markers_count() {
        let marker = mergeable_marker(NoteKind::Redo, "abc");
        let comment = |role: Role, body: &str| Comment {
            id: 1,
            author: "x".into(),
            role,
            body: body.into(),
            created_at: None,
        };
        let notes = MergeableNotes::from_comments(&[
            comment(Role::Maintainer, &marker),
            comment(Role::Bot, &format!("text\n{marker}")),
        ]);
        assert!(!notes.has(NoteKind::Redo, "abc"));
        let notes = MergeableNotes::from_comments(&[comment(Role::Bot, &format!("{marker}\nupkeep re-did it"))]);
        assert!(notes.has(NoteKind::Redo, "abc"));
        assert!(!notes.has(NoteKind::GaveUp, "abc"));
        assert!(!notes.has(NoteKind::Redo, "abd"));
    }
}

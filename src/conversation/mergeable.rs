//! Keeping the bot's pull requests mergeable (DESIGN section 14, "Mergeable"): what a cycle does
//! about a bot pull request that no longer merges into its base, decided before the model is
//! asked anything.
//!
//! Guarantees:
//! - Only a pull request the forge says conflicts (GitHub's `mergeable: false`; a `null` while
//!   GitHub computes it is "not now"), or, on the local forge, a bot branch whose test merge in
//!   the clone conflicts, is touched (a clean test merge in the clone does not overrule
//!   GitHub's `false`: its merge may see what libgit2's does not).
//! - Only the bot's commits are ever rewritten: with a human's commit on the branch upkeep says
//!   so once per head commit and leaves it ([`NoteKind::HumanCommits`]).
//! - A rebase that applies is published with a lease on the tip it rebased (by the run); one
//!   that conflicts becomes a cycle that re-does the change on the base's tip ([`Redo`]), once
//!   per head commit ([`NoteKind::Redo`], counted from the forge); after that upkeep says once
//!   that it stops ([`NoteKind::GaveUp`]) and the dashboard lists the pull request as needing a
//!   human.

use std::fmt::Write as _;

use git2::Oid;

use crate::forge::mergeable::{MergeableNotes, NoteKind, PullRequestRef, mergeable_marker};
use crate::forge::{Forge, ForgeError, postable};
use crate::repo::rebase::{MergeCheck, RebaseOutcome};
use crate::repo::{GitAuth, Identity, Workspace, WorkspaceError};
use crate::text::one_line;

/// Largest earlier change a re-doing cycle is shown, in bytes.
pub(crate) const MAX_REDO_CHANGE_BYTES: usize = 16 * 1024;

/// A bot pull request the forge says no longer merges into its base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub pull: PullRequestRef,
    pub title: String,
    /// Where people open it.
    pub url: String,
    /// The forge computed that it conflicts (GitHub): a clean test merge in the clone does not
    /// overrule that (GitHub's merge may see what libgit2's does not), and a rebase of the
    /// bot's own commits is harmless.
    pub forge_says_conflicts: bool,
}

/// The branch was rebased in the clone: the run publishes it with a lease on `from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rebased {
    pub pull: PullRequestRef,
    pub title: String,
    pub url: String,
    pub from: Oid,
    pub to: Oid,
    pub commits: usize,
}

/// A conflicting bot pull request settled before any model is asked: the cycle ends with it.
#[derive(Debug)]
pub(crate) enum Settled {
    /// Rebased in the clone: the run publishes it, and leaves the `notes` found on the way.
    Rebased { rebased: Rebased, notes: Vec<Note> },
    /// Left as it is: the note is left (when not left before), and `reason` said to people.
    Left { note: Option<Note>, reason: String },
}

/// A cycle that makes the pull request's change again on the base's tip, on its branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redo {
    pub pull: PullRequestRef,
    pub title: String,
    /// The branch's tip when it was read: the re-done branch replaces it only while the forge
    /// still has it.
    pub lease: Oid,
    /// The bot's earlier change (a patch, bounded by [`MAX_REDO_CHANGE_BYTES`]).
    pub change: String,
    /// The paths it conflicts in.
    pub paths: Vec<String>,
}

/// What upkeep says on a pull request it leaves as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    pub pull: PullRequestRef,
    pub sha: String,
    /// The first line, read back so that it is said once per head commit.
    pub marker: String,
    pub text: String,
}

/// What keeping one pull request mergeable calls for.
#[derive(Debug)]
pub(crate) enum Decision {
    Rebased(Rebased),
    Redo(Box<Redo>),
    /// Nothing to do now; with a note to leave when one is due.
    Leave(Option<Note>),
}

/// What a cycle does about the pull requests that conflict.
#[derive(Debug, Default)]
pub(crate) struct Scanned {
    /// The first whose rebase or re-doing is the cycle's work.
    pub work: Option<Decision>,
    /// Notes to leave on pull requests upkeep leaves as they are.
    pub notes: Vec<Note>,
}

/// The candidates among the bot's open pull requests. GitHub says which conflict in `pulls`
/// (read already, [`crate::forge::PullRequestInfo::conflicts`]); the local forge's bot branches
/// are all candidates, the clone's test merge deciding.
pub(crate) async fn candidates(
    forge: &dyn Forge,
    base: &str,
    pulls: &[crate::forge::PullRequestInfo],
) -> Result<Vec<Candidate>, ForgeError> {
    if forge.name() == "github" {
        return Ok(pulls.iter().filter(|pull| pull.conflicts).map(candidate_of).collect());
    }
    if forge.name() != "local" {
        return Ok(Vec::new());
    }
    Ok(forge
        .open_pull_requests(base)
        .await?
        .into_iter()
        .map(|open| Candidate {
            pull: PullRequestRef {
                number: open.number,
                branch: open.branch,
            },
            title: open.title,
            url: open.url,
            forge_says_conflicts: false,
        })
        .collect())
}

pub(crate) fn candidate_of(pull: &crate::forge::PullRequestInfo) -> Candidate {
    Candidate {
        pull: PullRequestRef {
            number: Some(pull.number),
            branch: pull.branch.clone(),
        },
        title: pull.title.clone(),
        url: pull.url.clone(),
        forge_says_conflicts: pull.conflicts,
    }
}

/// Decides about each candidate in turn until one is the cycle's work; a candidate that cannot
/// be read is skipped with a notice.
pub(crate) async fn scan(
    forge: &dyn Forge,
    workspace: &Workspace,
    auth: &GitAuth,
    bot: &Identity,
    candidates: &[Candidate],
    notice: &(dyn Fn(&str) + Sync),
) -> Scanned {
    let mut scanned = Scanned::default();
    for candidate in candidates {
        match decide(forge, workspace, auth, bot, candidate).await {
            Ok(Decision::Leave(note)) => scanned.notes.extend(note),
            Ok(work) => {
                scanned.work = Some(work);
                break;
            }
            Err(error) => notice(&format!(
                "upkeep: could not bring {} up to date with its base: {error}",
                describe(&candidate.pull)
            )),
        }
    }
    scanned
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum DecideError {
    #[error(transparent)]
    Forge(#[from] ForgeError),
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
}

/// Decides about one candidate: test merge, then rebase in the clone, then a re-doing.
pub(crate) async fn decide(
    forge: &dyn Forge,
    workspace: &Workspace,
    auth: &GitAuth,
    bot: &Identity,
    candidate: &Candidate,
) -> Result<Decision, DecideError> {
    let branch = &candidate.pull.branch;
    let (tip, paths) = match workspace.merge_check(branch, auth).await? {
        MergeCheck::Conflicts { tip, paths } => (tip, paths),
        MergeCheck::Clean { tip } if candidate.forge_says_conflicts => (tip, Vec::new()),
        MergeCheck::Merged | MergeCheck::Clean { .. } => return Ok(Decision::Leave(None)),
    };
    let sha = tip.to_string();
    match workspace.rebase_in_clone(branch, bot, auth).await? {
        RebaseOutcome::UpToDate => Ok(Decision::Leave(None)),
        RebaseOutcome::Rebased { from, to, commits } => Ok(Decision::Rebased(Rebased {
            pull: candidate.pull.clone(),
            title: candidate.title.clone(),
            url: candidate.url.clone(),
            from,
            to,
            commits,
        })),
        RebaseOutcome::HumanCommits { commits } => {
            let notes = forge.mergeable_notes(&candidate.pull).await?;
            let whose: Vec<String> = commits
                .iter()
                .map(|commit| {
                    format!(
                        "{} by {}: {}",
                        crate::text::prefix_bytes(&commit.commit.to_string(), 12).0,
                        postable(&one_line(&commit.author)),
                        postable(&one_line(&commit.summary))
                    )
                })
                .collect();
            let text = format!(
                "This pull request no longer merges into its base (conflicts in {}), and it holds commits upkeep did not make ({}). upkeep never rewrites a human's commits, so it left the branch as it is. To bring it up to date, merge the base into the branch (or rebase it) and resolve the conflicts; a maintainer can also close it and let upkeep redo the change.",
                paths_text(&paths),
                whose.join("; ")
            );
            Ok(leave_once(&notes, NoteKind::HumanCommits, candidate, &sha, text))
        }
        RebaseOutcome::Conflict { .. } => {
            let notes = forge.mergeable_notes(&candidate.pull).await?;
            if notes.has(NoteKind::Redo, &sha) {
                let text = format!(
                    "This pull request no longer merges into its base (conflicts in {}). Its commits do not apply on the base, and upkeep already re-did the change once on this head commit; it stops here. A human needs to look: resolve the conflicts, or close the pull request.",
                    paths_text(&paths)
                );
                return Ok(leave_once(&notes, NoteKind::GaveUp, candidate, &sha, text));
            }
            let change = workspace.branch_change(tip, MAX_REDO_CHANGE_BYTES).await?;
            Ok(Decision::Redo(Box::new(Redo {
                pull: candidate.pull.clone(),
                title: candidate.title.clone(),
                lease: tip,
                change,
                paths,
            })))
        }
    }
}

/// A note of `kind` on head commit `sha`, unless one was left already.
fn leave_once(notes: &MergeableNotes, kind: NoteKind, candidate: &Candidate, sha: &str, text: String) -> Decision {
    if notes.has(kind, sha) {
        return Decision::Leave(None);
    }
    Decision::Leave(Some(Note {
        pull: candidate.pull.clone(),
        sha: sha.to_owned(),
        marker: mergeable_marker(kind, sha),
        text,
    }))
}

/// `#N` on GitHub, the branch on the local forge.
pub(crate) fn describe(pull: &PullRequestRef) -> String {
    match pull.number {
        Some(number) => format!("pull request #{number}"),
        None => format!("bot branch {}", one_line(&pull.branch)),
    }
}

fn paths_text(paths: &[String]) -> String {
    if paths.is_empty() {
        return "files it changes".to_owned();
    }
    paths
        .iter()
        .map(|path| format!("`{}`", postable(&one_line(path)).replace('`', "'")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The comment upkeep leaves after publishing a rebase.
pub(crate) fn rebased_comment(rebased: &Rebased) -> String {
    format!(
        "upkeep rebased this pull request onto its base ({} commit{} by upkeep, {} → {}) because it no longer merged cleanly.",
        rebased.commits,
        if rebased.commits == 1 { "" } else { "s" },
        crate::text::prefix_bytes(&rebased.from.to_string(), 12).0,
        crate::text::prefix_bytes(&rebased.to.to_string(), 12).0,
    )
}

/// The task of a re-doing cycle: the same change, made again on the current base.
pub(crate) fn redo_task(redo: &Redo) -> String {
    let mut text = format!(
        "# Your task: make your change again on the current base\n\nYour {} (\"{}\") no longer merges into its base: the base changed the same lines, in {}. Its commits are yours, and they do not apply on the base's tip. This clone is on the base's tip. Make the same change again here, adapted to what the base holds now (keep what the base changed; do not undo it), then call create_pull_request: it replaces the branch {} with your new commit.\n\nYour earlier change, as a patch against the base it started from:\n\n",
        describe(&redo.pull),
        one_line(&redo.title),
        paths_text(&redo.paths),
        one_line(&redo.pull.branch),
    );
    // Longer than any run of tildes in the change: no line of it can close the fence.
    let longest_run = redo.change.split(|c| c != '~').map(str::len).max().unwrap_or(0);
    let fence = "~".repeat(longest_run.max(3) + 1);
    let _ = write!(text, "{fence}diff\n{}\n{fence}\n", redo.change.trim_end());
    text
}

/// The comment a re-doing cycle leaves after publishing: its marker first, so the try is
/// counted from the forge.
pub(crate) fn redo_comment(redo: &Redo, commit: &str) -> String {
    format!(
        "upkeep made this pull request's change again on the current base (its commits conflicted in {}): {} replaces {}.",
        paths_text(&redo.paths),
        crate::text::prefix_bytes(commit, 12).0,
        crate::text::prefix_bytes(&redo.lease.to_string(), 12).0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redo(change: &str) -> Redo {
        Redo {
            pull: PullRequestRef {
                number: Some(4),
                branch: "upkeep/tick".into(),
            },
            title: "Tick @someone's item\n<!-- upkeep:task x -->".into(),
            lease: Oid::from_str(&"a".repeat(40)).expect("oid"),
            change: change.into(),
            paths: vec!["TODO.md".into()],
        }
    }

    /// The earlier change is the bot's own but its lines are the repository's: a fence it
    /// cannot close, whatever run of tildes it holds.
    #[test]
    fn the_redo_task_fences_the_earlier_change_beyond_its_longest_tilde_run() {
        let task = redo_task(&redo("+~~~~~\n+text\n"));
        assert!(task.contains("~~~~~~diff\n+~~~~~\n+text\n~~~~~~\n"), "{task}");
        assert!(task.contains("pull request #4") && task.contains("`TODO.md`"), "{task}");
        assert!(task.contains("replaces the branch upkeep/tick"), "{task}");
    }

    #[test]
    fn a_note_is_left_once_per_head_commit() {
        let candidate = Candidate {
            pull: redo("").pull,
            title: "t".into(),
            url: String::new(),
            forge_says_conflicts: true,
        };
        let sha = "b".repeat(40);
        let none = MergeableNotes::default();
        let Decision::Leave(Some(note)) = leave_once(&none, NoteKind::GaveUp, &candidate, &sha, "stop".into()) else {
            panic!("a note is due");
        };
        assert_eq!(note.marker, format!("<!-- upkeep:mergeable gave-up sha={sha} -->"));
        let said = MergeableNotes {
            markers: vec![note.marker.clone()],
        };
        assert!(matches!(
            leave_once(&said, NoteKind::GaveUp, &candidate, &sha, "stop".into()),
            Decision::Leave(None)
        ));
        assert!(said.needs_human(None));
        assert!(said.needs_human(Some(&sha)));
        assert!(!said.needs_human(Some(&"c".repeat(40))), "a note on an earlier head");
        assert!(matches!(
            leave_once(&said, NoteKind::HumanCommits, &candidate, &sha, "human".into()),
            Decision::Leave(Some(_))
        ));
    }
}

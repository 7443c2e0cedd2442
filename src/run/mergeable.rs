//! Conflicting bot pull requests as a cycle meets them (DESIGN section 14, "Mergeable"): a
//! rebase decided in the clone is published with a lease and said on the pull request, notes
//! are left on the pull requests upkeep leaves as they are, and a re-doing cycle that published
//! nothing still counts its try. The decisions are [`crate::conversation::mergeable`]'s.

use crate::briefing::Briefing;
use crate::conversation::mergeable::{Note, Rebased, Settled, describe, rebased_comment};
use crate::events::{Event, Scope};
use crate::forge::Forge;
use crate::forge::mergeable::{NoteKind, mergeable_marker};
use crate::outcome::Outcome;
use crate::repo::Workspace;

use super::clones::CycleClone;
use super::ending::{RunError, RunFailure};
use super::record::CycleRecord;
use super::shared::Run;

impl Run<'_> {
    /// Ends a cycle whose work was a conflicting pull request that no model is asked about.
    pub(super) async fn settle_mergeable(
        &self,
        cycle: u32,
        settled: Settled,
        clone: &CycleClone,
        done: &mut CycleRecord,
    ) -> Result<Outcome, RunError> {
        let (workspace, forge) = (&clone.workspace, self.forge.as_ref());
        match settled {
            Settled::Rebased { rebased, notes } => {
                self.leave_mergeable_notes(notes).await;
                self.publish_rebase(cycle, &rebased, workspace, forge, done).await
            }
            Settled::Left { note, reason } => {
                self.leave_mergeable_notes(note.into_iter().collect()).await;
                self.events.alert(&format!("upkeep: {reason}"));
                Ok(Outcome::NoTasks)
            }
        }
    }

    async fn publish_rebase(
        &self,
        cycle: u32,
        rebased: &Rebased,
        workspace: &Workspace,
        forge: &dyn Forge,
        done: &mut CycleRecord,
    ) -> Result<Outcome, RunError> {
        let branch = &rebased.pull.branch;
        if let Err(source) = forge.replace_branch(workspace, branch, rebased.from).await {
            // The lease not held (a commit pushed meanwhile) lands here too: nothing was replaced,
            // and the run says it failed rather than end green with nothing pushed (the next
            // run decides again from what the branch holds then).
            return Err(RunError::Failure(RunFailure::Rebase {
                pull: describe(&rebased.pull),
                source,
            }));
        }
        workspace.mark_saved(rebased.to);
        self.events.emit(
            Scope {
                cycle: Some(cycle),
                turn: None,
            },
            Event::Rebased {
                pr: rebased.pull.number,
                branch: branch.clone(),
                from: rebased.from.to_string(),
                to: rebased.to.to_string(),
            },
        );
        // The pull request was updated: it is reported like one a cycle's model updated.
        let updated = crate::forge::PullRequest {
            url: rebased.url.clone(),
            number: rebased.pull.number,
            branch: branch.clone(),
            title: rebased.title.clone(),
            updated: true,
            task_key: None,
            preview: None,
            answers: Vec::new(),
        };
        self.events.emit(
            Scope {
                cycle: Some(cycle),
                turn: None,
            },
            Event::PullRequest {
                url: updated.url.clone(),
                number: updated.number,
                branch: updated.branch.clone(),
                title: updated.title.clone(),
                updated: true,
            },
        );
        done.pull_requests.push(updated);
        let text = rebased_comment(rebased);
        match forge
            .leave_note(&rebased.pull, &rebased.to.to_string(), "", &text)
            .await
        {
            Ok(places) => {
                for place in places {
                    self.events.say(&format!("said so on the pull request: {place}"));
                }
            }
            Err(error) => self.events.alert(&format!(
                "upkeep: could not comment on {}: {error}",
                describe(&rebased.pull)
            )),
        }
        Ok(Outcome::PullRequest)
    }

    /// Leaves each note on its pull request (its marker first), and says it to people: the
    /// local forge shows people nothing of it.
    pub(super) async fn leave_mergeable_notes(&self, notes: Vec<Note>) {
        let forge = self.forge.as_ref();
        for note in notes {
            match forge.leave_note(&note.pull, &note.sha, &note.marker, &note.text).await {
                Ok(places) => {
                    for place in places {
                        self.events.say(&format!("said so on the pull request: {place}"));
                    }
                }
                Err(error) => self.events.alert(&format!(
                    "upkeep: could not leave a note on {}: {error}",
                    describe(&note.pull)
                )),
            }
            self.events.alert(&format!(
                "upkeep: {} needs a human: {}",
                describe(&note.pull),
                note.text
            ));
        }
    }

    /// Says a re-doing cycle starts.
    pub(super) fn emit_redo(&self, cycle: u32, briefing: &Briefing) {
        if let Some(redo) = briefing.redo.as_deref() {
            self.events.emit(
                Scope {
                    cycle: Some(cycle),
                    turn: None,
                },
                Event::Redo {
                    pr: redo.pull.number,
                    branch: redo.pull.branch.clone(),
                    from: redo.lease.to_string(),
                },
            );
        }
    }

    /// A re-doing cycle that published nothing still used its one try on that head commit: it
    /// is recorded, so the next cycle says it stops instead of trying again.
    pub(super) async fn record_empty_redo(&self, briefing: &Briefing) {
        let Some(redo) = briefing.redo.as_deref() else {
            return;
        };
        let forge = self.forge.as_ref();
        let sha = redo.lease.to_string();
        let marker = mergeable_marker(NoteKind::Redo, &sha);
        let text = "upkeep tried to make this pull request's change again on the current base and published nothing.";
        if let Err(error) = forge.leave_note(&redo.pull, &sha, &marker, text).await {
            self.events.alert(&format!(
                "upkeep: could not record the re-doing on {}: {error}",
                describe(&redo.pull)
            ));
        }
    }
}

/// What `upkeep prompt` says when the first cycle's work is a conflicting pull request that no
/// model is asked about.
pub(super) fn prompt_refusal(settled: &Settled) -> String {
    match settled {
        Settled::Rebased { rebased, .. } => format!(
            "the first cycle rebases {} onto its base without asking a model",
            describe(&rebased.pull)
        ),
        Settled::Left { reason, .. } => reason.clone(),
    }
}

//! Conversation on the forge (DESIGN section 11): what a cycle works on besides `--task` and
//! the backlog, decided before the model is asked anything.
//!
//! - A review follow-up (`--pr N`, an Actions review event, or, in a backlog cycle, the first of
//!   the bot's open pull requests with feedback waiting): the clone is checked out on the pull
//!   request's branch, the prompt carries the maintainers' feedback, and `create_pull_request`
//!   pushes a commit on top and answers ([`follow_up`]).
//! - An issue worked explicitly (`--issue N`, an Actions comment event): its text and comments
//!   (the bot's question and a maintainer's answer) are the task; when the bot already has a
//!   pull request for it, the cycle continues its branch.
//! - A fix cycle (`--pr N` on a bot pull request whose checks fail, DESIGN section 14): the
//!   clone is checked out on its branch, the prompt carries the failing checks, and
//!   `create_pull_request` pushes a commit on top and records the attempt ([`fix`]); or upkeep
//!   stops fixing and says so.
//! - A bot pull request that no longer merges into its base (DESIGN section 14, "Mergeable"):
//!   rebased in the clone when only the bot committed to it (the run publishes it), or its change
//!   made again on the base's tip by a cycle, or left with a note ([`mergeable`]).
//! - A local question answered with `--answer` ([`local`]).
//! - Memory kept in the forge: bot pull requests closed without merging end their tasks
//!   ([`memory`]).
//!
//! Only feedback by authors with write access starts work or reaches the prompt as feedback;
//! all of it is untrusted text, framed by [`render`].

use crate::config::{Config, RepoSettings};
use crate::forge::{ClosedPullRequest, ContinuedPullRequest, Forge, ForgeError, PullRequestFeedback, TaskIssue};
use crate::repo::questions::LocalQuestion;
use crate::repo::{GitAuth, Workspace, WorkspaceError};

pub(crate) mod check_events;
pub(crate) mod fix;
pub(crate) mod follow_up;
pub(crate) mod local;
pub(crate) mod memory;
pub(crate) mod mergeable;
pub(crate) mod no_checks;
pub(crate) mod render;
pub(crate) mod triggers;

/// What a cycle knows from the conversation on the forge.
#[derive(Debug, Default)]
pub(crate) struct CycleConversation {
    /// The issue worked explicitly, with its comments.
    pub issue: Option<TaskIssue>,
    /// The open pull request the cycle continues, when it does.
    pub continued: Option<ContinuedPullRequest>,
    /// The feedback a review follow-up works (maintainers' only, not yet addressed).
    pub feedback: Option<PullRequestFeedback>,
    /// A local question answered with `--answer`.
    pub answered: Option<LocalQuestion>,
    /// The bot's pull requests closed without merging.
    pub closed: Vec<ClosedPullRequest>,
    /// Other open bot pull requests with review feedback waiting.
    pub feedback_waiting: Vec<u64>,
    /// Bot pull requests whose failing checks upkeep stops working, found by a backlog cycle:
    /// the run says so on each (when not already said) and works something else.
    pub gave_up: Vec<fix::GiveUp>,
    /// A conflicting bot pull request whose change the cycle makes again on the base's tip.
    pub redo: Option<Box<mergeable::Redo>>,
    /// Notes to leave on conflicting bot pull requests upkeep leaves as they are.
    pub mergeable_notes: Vec<mergeable::Note>,
}

/// Whether the cycle has work, and what it knows.
#[derive(Debug)]
pub(crate) enum CycleWork {
    Work(Box<CycleConversation>),
    /// Nothing to do, and why (no feedback waits on the pull request): the cycle ends with
    /// `no_tasks` without asking the model.
    Nothing(String),
    /// The checks of the pull request asked for leave no fix cycle to run: they wait, pass, or
    /// upkeep stops fixing them ([`fix::ChecksStop::GiveUp`]). No model is asked.
    Checks {
        report: Option<fix::ChecksReport>,
        stop: Box<fix::ChecksStop>,
    },
    /// A conflicting bot pull request settled without asking a model.
    Mergeable(Box<mergeable::Settled>),
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ConversationError {
    #[error(transparent)]
    Forge(#[from] ForgeError),
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// The run was pointed at something upkeep must not work (a pull request it did not open).
    #[error("{0}")]
    Refused(String),
}

/// Works out the cycle's conversation, and checks the clone out on the branch it continues.
/// `notice` hears what a person should know (a listing that failed and was skipped).
pub(crate) async fn for_cycle(
    config: &Config,
    settings: &RepoSettings,
    forge: &dyn Forge,
    workspace: &Workspace,
    answered: Option<&LocalQuestion>,
    notice: &(dyn Fn(&str) + Sync),
) -> Result<CycleWork, ConversationError> {
    let auth = GitAuth {
        token: config.github.token.clone(),
    };
    let base = workspace.base_branch();
    let mut conversation = CycleConversation {
        answered: answered.cloned(),
        ..CycleConversation::default()
    };
    if let Some(number) = config.pull_request {
        let feedback = forge.pull_request_feedback(number).await?;
        follow_up::check_workable(&feedback.pull_request).map_err(ConversationError::Refused)?;
        let waiting = feedback.unaddressed();
        if !waiting.is_empty() {
            follow_up::start(workspace, &auth, &waiting, &mut conversation).await?;
            return Ok(CycleWork::Work(Box::new(conversation)));
        }
        // No feedback waits: a conflict with the base comes before the checks (which do not
        // run on a pull request that does not merge).
        if feedback.pull_request.conflicts {
            let candidate = mergeable::candidate_of(&feedback.pull_request);
            let decision = mergeable::decide(forge, workspace, &auth, &config.identity, &candidate)
                .await
                .map_err(|error| match error {
                    mergeable::DecideError::Forge(error) => ConversationError::Forge(error),
                    mergeable::DecideError::Workspace(error) => ConversationError::Workspace(error),
                })?;
            match decision {
                mergeable::Decision::Rebased(rebased) => {
                    return Ok(CycleWork::Mergeable(Box::new(mergeable::Settled::Rebased {
                        rebased,
                        notes: Vec::new(),
                    })));
                }
                mergeable::Decision::Redo(redo) => {
                    conversation.redo = Some(redo);
                    return Ok(CycleWork::Work(Box::new(conversation)));
                }
                mergeable::Decision::Leave(Some(note)) => {
                    return Ok(CycleWork::Mergeable(Box::new(mergeable::Settled::Left {
                        note: Some(note),
                        reason: format!(
                            "pull request #{number} no longer merges into its base and upkeep cannot bring it up to date; a human needs to look"
                        ),
                    })));
                }
                mergeable::Decision::Leave(None) => {}
            }
        }
        // No feedback waits: the pull request's checks may.
        let (report, plan) = fix::plan(
            forge,
            &feedback.pull_request,
            settings.max_fix_attempts,
            &settings.protected_paths,
        )
        .await?;
        return match plan {
            fix::ChecksPlan::Fix(cycle) => {
                fix::start(workspace, &auth, &feedback.pull_request, cycle, &mut conversation).await?;
                Ok(CycleWork::Work(Box::new(conversation)))
            }
            fix::ChecksPlan::Nothing(reason) if report.is_none() => Ok(CycleWork::Nothing(format!(
                "no review feedback from maintainers waits on pull request #{number} (feedback by authors without write access starts nothing), and {reason}"
            ))),
            fix::ChecksPlan::Nothing(reason) => Ok(CycleWork::Checks {
                report,
                stop: Box::new(fix::ChecksStop::Nothing(format!(
                    "no review feedback from maintainers waits on pull request #{number}, and {reason}"
                ))),
            }),
            fix::ChecksPlan::GiveUp(give_up) => Ok(CycleWork::Checks {
                report,
                stop: Box::new(fix::ChecksStop::GiveUp(give_up)),
            }),
        };
    }
    if let Some(number) = config.issue {
        // With a task text given (an `issues` event turns the issue into one), the issue only
        // names the branch and where questions go.
        if config.task.is_none() {
            conversation.issue = forge.issue(number).await?;
            if conversation.issue.is_none() && forge.name() == "github" {
                return Err(ConversationError::Refused(format!(
                    "#{number} is a pull request, not an issue; to work its review feedback, run with --pr {number}"
                )));
            }
        }
        // The issue's existing bot pull request: the answer builds on what it holds.
        let prefix = format!("{}{number}-", crate::repo::BOT_BRANCH_PREFIX);
        let open = forge.open_pull_requests(base).await?;
        if let Some((pr_number, branch)) = open
            .iter()
            .find(|pr| pr.branch.starts_with(&prefix))
            .and_then(|pr| Some((pr.number?, pr.branch.clone())))
            .filter(|_| forge.name() == "github")
        {
            workspace.continue_branch(&branch, &auth).await?;
            conversation.continued = Some(ContinuedPullRequest {
                number: pr_number,
                branch,
                threads: Vec::new(),
                review: false,
                fix: None,
            });
        }
        return Ok(CycleWork::Work(Box::new(conversation)));
    }
    if config.task.is_none() {
        conversation.closed = match forge.closed_pull_requests(base).await {
            Ok(closed) => closed,
            Err(error) => {
                notice(&format!(
                    "upkeep: could not list closed pull requests ({error}); closed tasks are not skipped this cycle"
                ));
                Vec::new()
            }
        };
        let (waiting, workable) = follow_up::scan(forge, base, notice).await;
        if let Some((first, rest)) = waiting.split_first() {
            follow_up::start(workspace, &auth, first, &mut conversation).await?;
            conversation.feedback_waiting = rest.iter().map(|f| f.pull_request.number).collect();
            return Ok(CycleWork::Work(Box::new(conversation)));
        }
        // After review feedback and before failing checks and new work: a bot pull request that
        // no longer merges into its base.
        let candidates = match mergeable::candidates(forge, base, &workable).await {
            Ok(candidates) => candidates,
            Err(error) => {
                notice(&format!(
                    "upkeep: could not list bot pull requests to keep them mergeable: {error}"
                ));
                Vec::new()
            }
        };
        let scanned = mergeable::scan(forge, workspace, &auth, &config.identity, &candidates, notice).await;
        conversation.mergeable_notes = scanned.notes;
        match scanned.work {
            Some(mergeable::Decision::Rebased(rebased)) => {
                return Ok(CycleWork::Mergeable(Box::new(mergeable::Settled::Rebased {
                    rebased,
                    notes: std::mem::take(&mut conversation.mergeable_notes),
                })));
            }
            Some(mergeable::Decision::Redo(redo)) => {
                conversation.redo = Some(redo);
                return Ok(CycleWork::Work(Box::new(conversation)));
            }
            Some(mergeable::Decision::Leave(_)) | None => {}
        }
        {
            // After review feedback and before new work: a bot pull request whose checks fail.
            let scanned = fix::scan(forge, &workable, settings, notice).await;
            conversation.gave_up = scanned.gave_up;
            if let Some((pull, cycle)) = scanned.fix {
                fix::start(workspace, &auth, &pull, cycle, &mut conversation).await?;
            }
        }
    }
    Ok(CycleWork::Work(Box::new(conversation)))
}

//! Reading a commit's checks on GitHub (DESIGN section 14, "What it reads"): its check runs
//! (`GET /repos/{o}/{r}/commits/{sha}/check-runs`, paginated) and combined commit status
//! (`GET .../commits/{sha}/status`), classified by [`crate::forge::checks`]; for each failing
//! check its output text and annotations (`GET .../check-runs/{id}/annotations`), and for a
//! failing GitHub Actions job the failing step's tail of its log
//! (`GET .../actions/jobs/{job_id}/logs`, a `302` to a short-lived address followed at once and
//! without the token; see [`super::job_log`]).
//!
//! Bounds: at most [`MAX_CHECK_RUNS`] check runs and [`MAX_STATUSES`] statuses are read; details
//! are read for the first [`MAX_DETAILED_CHECKS`] failing checks (the rest are named with their
//! conclusion); [`MAX_ANNOTATIONS`] annotations per check of at most [`MAX_ANNOTATION_BYTES`]
//! each; [`MAX_OUTPUT_BYTES`] of a check's output text; names are cut to [`MAX_NAME_BYTES`].
//! Nothing here panics on a body of any shape: every field is optional and every text bounded.
//!
//! Reading the details of a failing check never fails the read: a log the token may not read
//! (403: the workflow lacks `actions: read`), an expired download or missing annotations become
//! a note on that check, naming what is missing.

use serde::Deserialize;
use serde_json::Value;

use super::GitHubForge;
use super::api::{Method, encode, parse_list};
use super::job_log::{self, DOWNLOAD_WINDOW_BYTES, MAX_DOWNLOAD_BYTES};
use crate::forge::ForgeError;
use crate::forge::checks::{
    Annotation, CheckKind, ChecksState, FailingCheck, UntrustedText, Verdict, check_run_verdict, combine,
    status_verdict,
};
use crate::forge::fix_attempts::{FixAttempts, count_fix_attempts};
use crate::forge::mergeable::{MergeableNotes, PullRequestRef};

/// Check runs read at most (three pages of 100).
pub(super) const MAX_CHECK_RUNS: usize = 300;
/// Commit statuses read at most (one page).
pub(super) const MAX_STATUSES: usize = 100;
/// Failing checks whose log, output and annotations are read; the rest are named only.
pub(super) const MAX_DETAILED_CHECKS: usize = 5;
/// Annotations read per failing check.
pub(super) const MAX_ANNOTATIONS: usize = 20;
/// Bytes of one annotation's message kept.
pub(super) const MAX_ANNOTATION_BYTES: usize = 1024;
/// Bytes of a check's output (title, summary and text together) kept.
pub(super) const MAX_OUTPUT_BYTES: usize = 4 * 1024;
/// Bytes of a check's name or an annotation's path kept.
pub(super) const MAX_NAME_BYTES: usize = 200;

/// Comments of a pull request read when counting fix attempts (ten pages of 100).
pub(super) const MAX_COMMENTS_READ: usize = 1000;

/// The app whose check runs are GitHub Actions jobs (the check run's id is the job's id).
const ACTIONS_APP: &str = "github-actions";

#[derive(Debug, Deserialize)]
struct CheckRunJson {
    #[serde(default)]
    id: u64,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    conclusion: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    output: Option<OutputJson>,
    #[serde(default)]
    app: Option<AppJson>,
}

#[derive(Debug, Default, Deserialize)]
struct OutputJson {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    annotations_count: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct AppJson {
    #[serde(default)]
    slug: Option<String>,
}

#[derive(Debug, Deserialize)]
struct CombinedStatusJson {
    #[serde(default)]
    statuses: Vec<Value>,
}

#[derive(Debug, Deserialize)]
struct StatusJson {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    context: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    target_url: Option<String>,
}

#[derive(Debug, Deserialize)]
struct AnnotationJson {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    start_line: Option<u64>,
    #[serde(default)]
    annotation_level: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// Text from the forge, cleaned and cut to `max` bytes.
fn bounded(text: &str, max: usize) -> String {
    crate::text::marked(crate::text::prefix_bytes(&job_log::clean(text), max), " […]")
}

/// A name as one line, bounded.
fn name(text: &str) -> String {
    crate::text::one_line(&bounded(text, MAX_NAME_BYTES))
}

impl GitHubForge {
    /// The state of the checks on commit `sha` (a pull request's head).
    pub async fn read_checks(&self, sha: &str) -> Result<ChecksState, ForgeError> {
        let runs = self
            .api
            .list_field(
                &format!("listing the check runs of {}", short(sha)),
                self.route(&format!(
                    "/commits/{}/check-runs?filter=latest&per_page=100",
                    encode(sha)
                )),
                "check_runs",
                MAX_CHECK_RUNS,
            )
            .await?;
        let operation = format!("reading the commit statuses of {}", short(sha));
        let combined = self
            .api
            .send(
                &operation,
                Method::Get,
                &self.route(&format!("/commits/{}/status?per_page={MAX_STATUSES}", encode(sha))),
                None,
            )
            .await?;
        let statuses = serde_json::from_str::<CombinedStatusJson>(&combined.text)
            .map(|combined| combined.statuses)
            .unwrap_or_default();
        let mut verdicts = Vec::new();
        let mut failing_runs = Vec::new();
        let mut failing = Vec::new();
        for run in runs
            .into_iter()
            .filter_map(|v| serde_json::from_value::<CheckRunJson>(v).ok())
        {
            let verdict = check_run_verdict(run.status.as_deref().unwrap_or(""), run.conclusion.as_deref());
            verdicts.push(verdict);
            if verdict == Verdict::Failed {
                failing_runs.push(run);
            }
        }
        for status in statuses
            .into_iter()
            .take(MAX_STATUSES)
            .filter_map(|v| serde_json::from_value::<StatusJson>(v).ok())
        {
            let state = status.state.as_deref().unwrap_or("");
            let verdict = status_verdict(state);
            verdicts.push(verdict);
            if verdict == Verdict::Failed {
                let mut check = FailingCheck::new(
                    name(status.context.as_deref().unwrap_or("(unnamed status)")),
                    CheckKind::Status,
                    state,
                );
                check.url = status.target_url;
                check.output = status
                    .description
                    .filter(|d| !d.trim().is_empty())
                    .map(|d| UntrustedText::new(bounded(&d, MAX_OUTPUT_BYTES)));
                failing.push(check);
            }
        }
        if verdicts.contains(&Verdict::Waiting) {
            return Ok(ChecksState::Pending);
        }
        let mut runs_read = Vec::with_capacity(failing_runs.len());
        for (i, run) in failing_runs.into_iter().enumerate() {
            runs_read.push(self.failing_run(run, i < MAX_DETAILED_CHECKS).await?);
        }
        runs_read.append(&mut failing);
        Ok(combine(&verdicts, runs_read))
    }

    /// A failing check run with its output, annotations and (for an Actions job) log tail,
    /// when `detailed`.
    async fn failing_run(&self, run: CheckRunJson, detailed: bool) -> Result<FailingCheck, ForgeError> {
        let mut check = FailingCheck::new(
            name(run.name.as_deref().unwrap_or("(unnamed check)")),
            CheckKind::CheckRun,
            run.conclusion.as_deref().unwrap_or("failure"),
        );
        check.url = run.html_url;
        if !detailed {
            check.notes.push(format!(
                "details not read: only the first {MAX_DETAILED_CHECKS} failing checks are read in full"
            ));
            return Ok(check);
        }
        let output = run.output.unwrap_or_default();
        let text: Vec<&str> = [&output.title, &output.summary, &output.text]
            .into_iter()
            .filter_map(|part| part.as_deref())
            .filter(|part| !part.trim().is_empty())
            .collect();
        if !text.is_empty() {
            check.output = Some(UntrustedText::new(bounded(&text.join("\n\n"), MAX_OUTPUT_BYTES)));
        }
        if output.annotations_count.unwrap_or(1) > 0 {
            match self.annotations(run.id).await {
                Ok(annotations) => check.annotations = annotations,
                Err(error) if error.is_fatal() && !is_refusal(&error) => return Err(error),
                Err(error) => check.notes.push(format!("annotations not read: {error}")),
            }
        }
        let is_actions_job = run.app.and_then(|app| app.slug).is_some_and(|slug| slug == ACTIONS_APP);
        if is_actions_job {
            match self.job_log_tail(run.id).await {
                Ok(tail) => check.log_tail = Some(UntrustedText::new(tail)),
                Err(note) => check.notes.push(note),
            }
        }
        Ok(check)
    }

    /// The first [`MAX_ANNOTATIONS`] annotations of check run `id`.
    async fn annotations(&self, id: u64) -> Result<Vec<Annotation>, ForgeError> {
        let operation = format!("reading the annotations of check run {id}");
        let route = self.route(&format!("/check-runs/{id}/annotations?per_page={MAX_ANNOTATIONS}"));
        let answer = self.api.send(&operation, Method::Get, &route, None).await?;
        Ok(parse_list(&operation, &answer.text)?
            .into_iter()
            .take(MAX_ANNOTATIONS)
            .filter_map(|v| serde_json::from_value::<AnnotationJson>(v).ok())
            .map(|a| {
                let message = match (a.title.filter(|t| !t.trim().is_empty()), a.message) {
                    (Some(title), Some(message)) => format!("{title}: {message}"),
                    (title, message) => title.or(message).unwrap_or_default(),
                };
                Annotation {
                    path: name(a.path.as_deref().unwrap_or("")),
                    line: a.start_line,
                    level: name(a.annotation_level.as_deref().unwrap_or("failure")),
                    message: UntrustedText::new(bounded(&message, MAX_ANNOTATION_BYTES)),
                }
            })
            .collect())
    }

    /// The failing step's tail of Actions job `job`'s log, or a note saying why there is none.
    async fn job_log_tail(&self, job: u64) -> Result<String, String> {
        let operation = format!("reading the log of job {job}");
        let route = self.route(&format!("/actions/jobs/{job}/logs"));
        let target = match self.api.redirect_target(&operation, &route).await {
            Ok(target) => target,
            Err(refused) if refused.status == Some(403) && !refused.error.to_string().contains("rate limit") => {
                return Err(
                    "log not read: GitHub refused it (403); the token needs `actions: read` (in a workflow, add `actions: read` to its `permissions:`)"
                        .to_owned(),
                );
            }
            Err(refused) => return Err(format!("log not read: {}", refused.error)),
        };
        // The address expires within a minute: downloaded at once, without the token.
        let (bytes, cut) = self
            .api
            .download_tail(&operation, target, DOWNLOAD_WINDOW_BYTES, MAX_DOWNLOAD_BYTES)
            .await
            .map_err(|error| format!("log not read: {error}"))?;
        let mut tail = job_log::failing_step_tail(&bytes, bytes.len() >= DOWNLOAD_WINDOW_BYTES || cut);
        if cut {
            tail.insert_str(
                0,
                &format!(
                    "[the log is longer than {} MiB; its end was not read]\n",
                    MAX_DOWNLOAD_BYTES >> 20
                ),
            );
        }
        Ok(tail)
    }
}

#[derive(Debug, Deserialize)]
struct GitCommitJson {
    #[serde(default)]
    committer: Option<GitUserJson>,
}

#[derive(Debug, Deserialize)]
struct GitUserJson {
    #[serde(default)]
    date: Option<String>,
}

impl GitHubForge {
    /// When commit `sha` was made: its committer date, from the Git database API
    /// (`GET /repos/{o}/{r}/git/commits/{sha}`, which unlike `GET .../commits/{ref}` carries no
    /// files or patches, so the answer stays small). `None` when GitHub gives no readable date.
    pub async fn read_commit_time(&self, sha: &str) -> Result<Option<jiff::Timestamp>, ForgeError> {
        let operation = format!("reading commit {}", short(sha));
        let answer = self
            .api
            .send(
                &operation,
                Method::Get,
                &self.route(&format!("/git/commits/{}", encode(sha))),
                None,
            )
            .await?;
        Ok(serde_json::from_str::<GitCommitJson>(&answer.text)
            .ok()
            .and_then(|commit| commit.committer)
            .and_then(|committer| committer.date)
            .and_then(|date| date.parse::<jiff::Timestamp>().ok()))
    }

    /// The fix attempts recorded on pull request `number`: the markers in the bot's own
    /// comments (up to 1000 comments, oldest first), judged by the account
    /// the token belongs to, as every reader of them judges.
    pub async fn read_fix_attempts(&self, number: u64) -> Result<FixAttempts, ForgeError> {
        Ok(count_fix_attempts(&self.pull_request_comments(number).await?))
    }

    /// Pull request `number`'s comments (at most [`MAX_COMMENTS_READ`]), each with its author's
    /// role: the bot's markers are read from them.
    async fn pull_request_comments(&self, number: u64) -> Result<Vec<crate::forge::Comment>, ForgeError> {
        let operation = format!("reading the comments of pull request #{number}");
        let route = self.route(&format!("/issues/{number}/comments?per_page=100"));
        let items = self.api.list(&operation, route, MAX_COMMENTS_READ).await?;
        let bot = self.bot_login().await;
        Ok(super::reviews::comments_of(items, bot))
    }

    /// The bot's mergeable notes on pull request `pull` (its own comments' markers, read as
    /// [`GitHubForge::read_fix_attempts`] reads the fix attempts').
    pub(super) async fn read_mergeable_notes(&self, pull: &PullRequestRef) -> Result<MergeableNotes, ForgeError> {
        let Some(number) = pull.number else {
            return Ok(MergeableNotes::default());
        };
        Ok(MergeableNotes::from_comments(
            &self.pull_request_comments(number).await?,
        ))
    }

    /// Comments `text` on pull request `pull`, `marker` (when any) its first line.
    pub(super) async fn comment_note(
        &self,
        pull: &PullRequestRef,
        commit: &str,
        marker: &str,
        text: &str,
    ) -> Result<Vec<String>, ForgeError> {
        let Some(number) = pull.number else {
            return Ok(Vec::new());
        };
        self.answer(&crate::forge::FeedbackAnswer {
            pull_request: number,
            commit: commit.to_owned(),
            replies: Vec::new(),
            summary: Some(match marker {
                "" => text.to_owned(),
                marker => format!("{marker}\n{text}"),
            }),
        })
        .await
    }
}

/// A refusal of one detail (a 403 or 404 on annotations) is a note, not the end of the run.
fn is_refusal(error: &ForgeError) -> bool {
    matches!(error, ForgeError::Refused(message) if !message.contains("rate limit"))
}

fn short(sha: &str) -> &str {
    crate::text::prefix_bytes(sha, 12).0
}

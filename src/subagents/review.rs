//! Validation before a pull request (DESIGN section 12): before `create_pull_request` commits and
//! pushes, the operator's checks run and the reviewer agent reads the task, the diff and the
//! repository's instructions and answers `{verdict, findings}`.
//!
//! A round that fails is the call's error (the findings, or the failed checks' output): nothing
//! is committed or pushed, the change stays in the clone and the model fixes it. The
//! `--max-reviews`th round that fails lets the pull request open anyway with the unresolved
//! findings in a section of its body, and the cycle reports them. A change that already passed
//! is not reviewed again (a second call after a failed push). The reviewer's answer is model
//! output: it is validated (schema, then [`read_verdict`]); a reviewer that gives no usable
//! verdict fails its round like a `fail` (a weak reviewer spending its turns lets nothing
//! through), and after the last round the body says the review did not complete.

use sha2::{Digest, Sha256};

use super::checks::{self, FailedCheck};
use super::level::Level;
use super::task_prompt::{ReviewInput, review_message};
use crate::agent::AgentEnd;
use crate::agent::budget::Limit;
use crate::config::agent_catalogue::REVIEWER;
use crate::config::answer_schema::{Verdict, read_verdict};
use crate::events::Event;
use crate::text::fence;
use crate::tools::delegate::{Approval, Proposal};
use crate::tools::{ToolContext, ToolError};

/// Bytes of a failed check's output kept in a pull request body.
const MAX_CHECK_OUTPUT_IN_BODY: usize = 4 * 1024;

fn state<'a>(level: &'a Level<'_, '_>) -> std::sync::MutexGuard<'a, super::team::ReviewState> {
    level
        .team
        .review
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Level<'_, '_> {
    /// The gate: checks, then the reviewer. See the module header.
    pub(super) async fn approve(&self, proposal: &Proposal<'_>, ctx: &ToolContext<'_>) -> Result<Approval, ToolError> {
        approve(self, proposal, ctx).await
    }
}

async fn approve(level: &Level<'_, '_>, proposal: &Proposal<'_>, ctx: &ToolContext<'_>) -> Result<Approval, ToolError> {
    let team = level.team;
    let settings = team.settings;
    if !settings.review && team.checks.is_empty() {
        return Ok(Approval::Approved);
    }
    let continued = ctx.pull_request.continued.map(|continued| continued.branch.as_str());
    let diff = ctx.workspace.proposed_diff(continued).await.map_err(|source| {
        ToolError::Fatal(crate::tools::Failure::Git {
            doing: "reading the change to review",
            source,
        })
    })?;
    // Nothing to review: create_pull_request says there is nothing to propose.
    if diff.trim().is_empty() {
        return Ok(Approval::Approved);
    }
    let digest: [u8; 32] = Sha256::digest(diff.as_bytes()).into();
    let round = {
        let mut state = state(level);
        if state.approved == Some(digest) {
            return Ok(Approval::Approved);
        }
        state.rounds += 1;
        state.rounds
    };
    let max = settings.max_reviews;
    let last = round >= max;

    let failed = checks::run(level, ctx).await?;
    let (findings, failed_checks) = if !failed.is_empty() {
        if !last {
            return Err(ToolError::model(checks::failure_message(&failed, round, max)));
        }
        let findings = failed
            .iter()
            .map(|check| format!("check `{}` failed", check.tool))
            .collect();
        (findings, failed)
    } else if settings.review {
        let verdict = match ask_reviewer(level, proposal, &diff, ctx).await? {
            Ok(verdict) => verdict,
            // No verdict is a failed round, not a pass: a weak reviewer that spends its turns
            // must not let any change through.
            Err(reason) => {
                level.emit(Event::Review {
                    verdict: "none".into(),
                    findings: vec![reason.clone()],
                    round,
                    opened_anyway: last,
                });
                if !last {
                    return Err(ToolError::model(format!(
                        "the review gave no verdict (round {round} of {max}): {reason}. Nothing was committed or pushed; the change is still in the clone. Call create_pull_request again for another review; if round {max} gives no verdict either, the pull request opens with that said in its body."
                    )));
                }
                let findings = vec![format!("the automatic review gave no verdict: {reason}")];
                return Ok(open_with(level, findings, &[], round));
            }
        };
        level.emit(Event::Review {
            verdict: verdict.as_str().into(),
            findings: verdict.findings.clone(),
            round,
            opened_anyway: !verdict.pass && last,
        });
        if verdict.pass {
            state(level).approved = Some(digest);
            return Ok(Approval::Approved);
        }
        let findings = if verdict.findings.is_empty() {
            vec!["the reviewer failed the change without naming a finding".to_owned()]
        } else {
            verdict.findings
        };
        if !last {
            return Err(ToolError::model(review_failure_message(&findings, round, max)));
        }
        (findings, Vec::new())
    } else {
        state(level).approved = Some(digest);
        return Ok(Approval::Approved);
    };
    Ok(open_with(level, findings, &failed_checks, round))
}

/// Records the findings a pull request opens with and renders its section.
fn open_with(level: &Level<'_, '_>, findings: Vec<String>, failed: &[FailedCheck], round: u32) -> Approval {
    let section = findings_section(&findings, failed, round);
    state(level).unresolved = findings;
    Approval::OpenWithFindings { section }
}

/// Runs the reviewer on the change: its verdict, or why it gave none.
async fn ask_reviewer(
    level: &Level<'_, '_>,
    proposal: &Proposal<'_>,
    diff: &str,
    ctx: &ToolContext<'_>,
) -> Result<Result<Verdict, String>, ToolError> {
    let team = level.team;
    let definition = team.settings.catalogue.get(REVIEWER).ok_or_else(|| {
        ToolError::Fatal(crate::tools::Failure::Setup(
            "the reviewer agent is missing from the catalogue".to_owned(),
        ))
    })?;
    let provider = team.provider_for(definition);
    let message = review_message(&ReviewInput {
        task: team.task,
        issue: proposal.issue,
        title: proposal.title,
        body: proposal.body,
        instructions: team.instructions.as_deref(),
        diff,
        continued: ctx.pull_request.continued.map(|continued| continued.number),
        window: team.window_for(provider.model()).or_from_server(provider).await.tokens,
    });
    Ok(match level.run_agent(definition, message, ctx).await {
        Ok(AgentEnd::Answer(answer)) => read_verdict(&answer),
        Ok(AgentEnd::Limit(Limit::Turns { max: turns, .. })) => {
            Err(format!("the reviewer used its {turns} turns without giving a verdict"))
        }
        Ok(AgentEnd::Limit(limit)) => Err(format!("the reviewer stopped: {limit}")),
        Ok(AgentEnd::Cycle(_)) => Err("the reviewer tried to end the cycle".to_owned()),
        Err(ToolError::RespondToModel(reason)) => Err(reason),
        Err(fatal @ (ToolError::Fatal(_) | ToolError::Stopped(_))) => return Err(fatal),
    })
}

/// What the model reads when the reviewer failed the change and the pull request was held back.
fn review_failure_message(findings: &[String], round: u32, max_rounds: u32) -> String {
    let mut text = format!(
        "the reviewer failed the change (round {round} of {max_rounds}), so nothing was committed or pushed; the change is still in the clone. Fix what the findings say (where one is wrong, say why in the pull request body) and call create_pull_request again; if round {max_rounds} fails too, the pull request opens with the findings listed in its body. Findings:"
    );
    for finding in findings {
        text.push_str(&format!("\n- {finding}"));
    }
    text
}

/// The pull request body's section on what the review did not resolve.
fn findings_section(findings: &[String], failed: &[FailedCheck], round: u32) -> String {
    let mut text = format!(
        "## Unresolved review findings\n\nupkeep's review before pushing still had these after {round} round(s); please look at them before merging.\n"
    );
    for finding in findings {
        text.push_str(&format!("\n- {}", crate::text::one_line(finding)));
    }
    text.push('\n');
    for check in failed {
        let output = check.output.as_str();
        let mut start = output.len().saturating_sub(MAX_CHECK_OUTPUT_IN_BODY);
        while !output.is_char_boundary(start) {
            start += 1;
        }
        text.push_str(&format!(
            "\n<details><summary>The end of the output of check <code>{}</code></summary>\n\n{}\n\n</details>\n",
            check.tool,
            fence("text", &output[start..])
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_lists_every_finding_on_its_own_line_and_the_end_of_check_output() {
        let findings = vec!["a.rs:3 off by one".to_owned(), "tests missing\n## Approved".to_owned()];
        let failed = vec![FailedCheck {
            tool: "cargo_test".into(),
            output: format!("{}\nFAILED test_x", "x".repeat(10_000)),
        }];
        let section = findings_section(&findings, &failed, 2);
        assert!(section.starts_with("## Unresolved review findings"), "{section}");
        assert!(section.contains("\n- a.rs:3 off by one\n"), "{section}");
        assert!(
            !section.contains("\n## Approved"),
            "a finding cannot open a section: {section}"
        );
        assert!(section.contains("FAILED test_x"));
        assert!(section.len() < 6_000, "check output is cut: {}", section.len());
    }

    #[test]
    fn the_failure_message_names_the_round_and_every_finding() {
        let message = review_failure_message(&["one".into(), "two".into()], 1, 2);
        assert!(
            message.contains("round 1 of 2") && message.contains("\n- one\n- two"),
            "{message}"
        );
    }
}

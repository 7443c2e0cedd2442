//! The events as people read them on stderr: one or a few lines each, untrusted text flattened
//! and cut (`one_line`), a sub-agent's lines under its name. `--json` and `--trace` carry the
//! events exactly; this is only what a person sees.

use serde_json::Value;

use super::{Event, Scope};

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::text::marked(crate::text::prefix_chars(&flat, max), "…")
}

/// A sub-agent's lines, indented by its depth under its name (`  [explorer] → read_file a.rs`);
/// the main agent's as they are.
pub(super) fn under_agent(agent: Option<&str>, text: &str) -> String {
    let Some(agent) = agent else {
        return text.to_owned();
    };
    let depth = agent.matches(crate::llm::AGENT_PATH_SEPARATOR).count();
    if depth == 0 {
        return text.to_owned();
    }
    let name = agent.rsplit(crate::llm::AGENT_PATH_SEPARATOR).next().unwrap_or(agent);
    let prefix = format!("{}[{name}] ", "  ".repeat(depth));
    text.lines()
        .map(|line| format!("{prefix}{line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) fn render(scope: Scope, event: &Event) -> Option<String> {
    let turn = scope.turn.map(|t| format!("[turn {t}] ")).unwrap_or_default();
    Some(match event {
        Event::RunStarted {
            repo,
            mode,
            provider,
            model,
            dangerous_tools,
            sandbox,
            base,
            base_from,
            ..
        } => format!(
            "upkeep: {repo} ({mode} mode, {provider}/{model}{}){}",
            match (dangerous_tools, sandbox) {
                (true, Some(sandbox)) => format!(", dangerous tools ON, sandbox: {}", sandbox.summary()),
                (true, None) => ", dangerous tools ON".to_owned(),
                (false, Some(sandbox)) => format!(", command tools ON, sandbox: {}", sandbox.summary()),
                (false, None) => String::new(),
            },
            match (base, base_from) {
                (Some(base), Some(from)) => format!("\n  base: {base} ({})", from.describe()),
                _ => String::new(),
            }
        ),
        Event::CycleStarted { base, declared_tools } => {
            let mut line = format!("── cycle {} on {base}", scope.cycle.unwrap_or(1));
            for tool in declared_tools {
                line.push_str(&format!(
                    "\n   declared tool {} runs `{}` (declared in {})",
                    tool.name, tool.program, tool.declared_in
                ));
            }
            line
        }
        Event::ModelResponse { .. } | Event::Context { .. } => return None,
        Event::Plan { plan } => format!("{turn}plan: {}", one_line(plan, 160)),
        Event::ToolCall { tool, arguments } => {
            let detail = ["path", "title", "pattern", "command", "agent"]
                .iter()
                .find_map(|key| arguments.get(*key).and_then(Value::as_str))
                .map(|value| format!(" {}", one_line(value, 100)))
                .unwrap_or_default();
            format!("{turn}→ {tool}{detail}")
        }
        Event::ToolResult { tool, ok, output } => {
            if *ok {
                return None;
            }
            format!("{turn}✗ {tool}: {}", one_line(output, 200))
        }
        Event::ToolRejected { tool, reason } => format!("{turn}✗ {tool} rejected: {}", one_line(reason, 200)),
        Event::ReplyRejected { reason } => format!("{turn}✗ reply rejected: {}", one_line(reason, 200)),
        Event::PullRequest {
            url, title, updated, ..
        } => {
            let what = if *updated {
                "pull request updated"
            } else {
                "pull request opened"
            };
            match crate::forge::local::review_commands(url) {
                Some(commands) => format!("✓ {what}: {title}\n{commands}"),
                None => format!("✓ {what}: {title}\n  {url}"),
            }
        }
        Event::Question { question, .. } => {
            let body: String = question.lines().map(|l| format!("│ {l}\n")).collect();
            format!(
                "┌─ upkeep has a question for a human ─────────────\n{body}└─ answer it, then run upkeep again (exit code 3)"
            )
        }
        // Said in full by the run, with the diff.
        Event::UnsavedChanges { .. } => return None,
        Event::Review {
            verdict,
            findings,
            round,
            opened_anyway,
        } => {
            let mut text = format!("{turn}review round {round}: {verdict}");
            if *opened_anyway {
                text.push_str(" (review rounds spent: the pull request opens with the findings in its body)");
            }
            for finding in findings {
                text.push_str(&format!("\n  - {}", one_line(finding, 200)));
            }
            text
        }
        Event::Check { tool, ok } => format!("{turn}check {tool}: {}", if *ok { "passed" } else { "failed" }),
        Event::CycleFinished {
            outcome,
            unresolved_findings,
        } => {
            let mut text = format!("── cycle {} finished: {outcome}", scope.cycle.unwrap_or(1));
            if !unresolved_findings.is_empty() {
                text.push_str(&format!(
                    " (the pull request opened with {} unresolved review finding(s) listed in its body)",
                    unresolved_findings.len()
                ));
            }
            text
        }
        Event::RunFinished {
            outcome,
            cycles,
            usage,
            cost_usd,
            exit_code,
            ..
        } => format!(
            "upkeep finished: {outcome} after {cycles} cycle(s); {} input + {} output tokens, ${cost_usd:.4}; exit code {exit_code}",
            usage.input_tokens, usage.output_tokens
        ),
        Event::LimitReached { message, .. } => format!("upkeep: {message}"),
        Event::Dashboard { url, action } => format!("dashboard {action}: {url}"),
        Event::Checks {
            pr,
            sha,
            state,
            failing,
            ..
        } => {
            let mut text = format!(
                "checks of pull request #{pr} at {}: {state}",
                sha.get(..12).unwrap_or(sha)
            );
            for check in failing {
                text.push_str(&format!("\n  - {} ({})", one_line(&check.name, 200), check.conclusion));
            }
            text
        }
        Event::FixAttempt { pr, attempt, max } => {
            format!("fixing the checks of pull request #{pr}: attempt {attempt} of {max}")
        }
        Event::Rebased { branch, from, to, .. } => format!(
            "rebased {} onto its base: {} → {}",
            one_line(branch, 200),
            from.get(..12).unwrap_or(from),
            to.get(..12).unwrap_or(to)
        ),
        Event::Redo { branch, from, .. } => format!(
            "making the change of {} again on the base (its head {} conflicts)",
            one_line(branch, 200),
            from.get(..12).unwrap_or(from)
        ),
        Event::FleetFinished {
            repos,
            usage,
            cost_usd,
            exit_code,
            ..
        } => format!(
            "upkeep fleet finished: {repos} repositories; {} input + {} output tokens, ${cost_usd:.4}; exit code {exit_code}",
            usage.input_tokens, usage.output_tokens
        ),
    })
}

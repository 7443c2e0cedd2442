//! The Actions report's formats, escaping and job summaries, one snapshot per outcome.

use super::*;

#[test]
fn multi_line_values_use_a_heredoc_whose_delimiter_is_not_in_the_value() {
    assert_eq!(format_output("outcome", "no_tasks"), "outcome=no_tasks\n");
    assert_eq!(format_output("question", ""), "question=\n");
    let text = format_output("question", "a\nb");
    let (first, rest) = text.split_once('\n').expect("lines");
    let delimiter = first.strip_prefix("question<<").expect("heredoc");
    assert!(delimiter.starts_with("ghadelimiter_"));
    assert_eq!(rest, format!("a\nb\n{delimiter}\n"));
}

#[test]
fn annotation_data_is_escaped_like_the_toolkit() {
    assert_eq!(escape_data("50%\r\ndone"), "50%25%0D%0Adone");
    assert_eq!(workflow_command("error", "a\nb"), "::error::a%0Ab");
}

#[test]
fn control_characters_are_escaped_in_outputs_and_annotations() {
    assert_eq!(
        workflow_command("error", "a\u{1b}[31mb\u{7}\n::set-output x"),
        "::error::a\\u{1b}[31mb\\u{7}%0A::set-output x"
    );
    // A lone carriage return would end the line for the runner's line reader.
    assert_eq!(format_output("q", "a\rb=c"), "q=a\\u{d}b=c\n");
}

/// The outcomes docs/events.md documents (its table, and the two a fleet adds), each with
/// its own headline: none falls through to another's words.
#[test]
fn every_documented_outcome_has_its_own_headline() {
    let docs = include_str!("../../docs/events.md");
    let table = docs
        .split("## Outcomes")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the Outcomes section");
    let mut documented: Vec<&str> = table
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split('`').next())
        .collect();
    assert!(documented.len() >= 12, "{documented:?}");
    for fleet_only in ["not_started", "fleet_budget"] {
        assert!(table.contains(&format!("`{fleet_only}`")), "{fleet_only} is documented");
        documented.push(fleet_only);
    }
    let mut headlines = std::collections::BTreeSet::new();
    for name in &documented {
        let outcome = Outcome::from_name(name).unwrap_or_else(|| panic!("`{name}` is no outcome"));
        assert!(headlines.insert(headline(outcome)), "`{name}` shares a headline");
    }
    assert_eq!(documented.len(), Outcome::ALL.len(), "every outcome is documented");
}

#[test]
fn markdown_escaping_keeps_titles_and_code_intact() {
    assert_eq!(escape_markdown("Fix [x] <b>"), "Fix \\[x\\] \\<b\\>");
    assert_eq!(longest_backtick_run("a ``` b ` c"), 3);
    assert_eq!(
        crate::text::marked(crate::text::prefix_chars("héllo", 2), " […]"),
        "hé […]"
    );
}

/// A run that ended as `outcome`, with what such a run carries: the pull request it opened, the
/// question it asked, the error that ended it.
fn summary_for(outcome: Outcome) -> RunSummary {
    let mut summary = RunSummary::without_work(outcome, None);
    summary.cycles = 1;
    summary.turns = 3;
    summary.usage = crate::llm::Usage {
        input_tokens: 1200,
        output_tokens: 300,
        ..crate::llm::Usage::default()
    };
    summary.cost_usd = 0.0123;
    match outcome {
        Outcome::PullRequest => {
            summary.pull_requests.push(crate::forge::PullRequest {
                url: "https://github.com/octo/widgets/pull/12".into(),
                number: Some(12),
                branch: "upkeep/12-fix-typo".into(),
                title: "Fix the typo in the README".into(),
                updated: false,
                task_key: None,
                preview: None,
                answers: Vec::new(),
            });
            summary
                .unresolved_findings
                .push("the changelog does not mention the fix".into());
        }
        Outcome::Question => summary.question = Some("Which `--base` should the fix target?".into()),
        Outcome::Error => summary.error = Some("provider: 503 Service Unavailable after 3 retries".into()),
        Outcome::UsageError => summary.error = Some("invalid `--max-cost`: must be a positive number".into()),
        Outcome::Interrupted => summary.error = Some("interrupted".into()),
        Outcome::NotStarted => summary.error = Some("interrupted before this repository started".into()),
        Outcome::FleetBudget => summary.error = Some("--fleet-max-cost is spent; not started".into()),
        Outcome::Completed
        | Outcome::NoTasks
        | Outcome::MaxCycles
        | Outcome::PrLimit
        | Outcome::PrHourlyLimit
        | Outcome::OutsideSchedule
        | Outcome::Limit
        | Outcome::Stuck => {}
        Outcome::ChecksFailed => summary.fix_attempts.push(crate::summary::FixAttemptReport {
            pr: 12,
            attempt: 3,
            max: 3,
            gave_up: true,
            why: Some("3 fix attempts were made, max_fix_attempts is 3".into()),
        }),
    }
    summary
}

/// The fix attempts a run made and the pull requests it gave up on: one JSON array output
/// (empty when none) and a section of the job summary.
#[test]
fn fix_attempts_are_an_output_and_a_section_of_the_summary() {
    let mut summary = summary_for(Outcome::PullRequest);
    let output = |summary: &RunSummary| {
        outputs(summary)
            .into_iter()
            .find(|(name, _)| *name == "fix-attempts")
            .map(|(_, value)| value)
    };
    assert_eq!(output(&summary).as_deref(), Some(""));
    summary.fix_attempts = vec![
        crate::summary::FixAttemptReport {
            pr: 3,
            attempt: 2,
            max: 3,
            gave_up: false,
            why: None,
        },
        crate::summary::FixAttemptReport {
            pr: 5,
            attempt: 3,
            max: 3,
            gave_up: true,
            why: Some("the checks fail the same way as before fix attempt 2".into()),
        },
        // No check ever reported: no attempt was made. The reason names a check the forge
        // named, which must not render as a link.
        crate::summary::FixAttemptReport {
            pr: 6,
            attempt: 0,
            max: 3,
            gave_up: true,
            why: Some("[lint](https://evil.example) lost its runner".into()),
        },
    ];
    assert_eq!(
        output(&summary).as_deref(),
        Some(
            r#"[{"pr":3,"attempt":2,"max":3,"gave_up":false},{"pr":5,"attempt":3,"max":3,"gave_up":true,"why":"the checks fail the same way as before fix attempt 2"},{"pr":6,"attempt":0,"max":3,"gave_up":true,"why":"[lint](https://evil.example) lost its runner"}]"#
        )
    );
    let context = RunContext {
        repo: "octo/widgets".into(),
        issue: None,
        dry_run: false,
    };
    let text = job_summary(&summary, &context);
    assert!(
        text.contains("#### Fix attempts\n\n- #3: fix attempt 2 of 3\n- #5: stopped after 3 of 3 fix attempts (the checks fail the same way as before fix attempt 2); a human needs to look\n"),
        "{text}"
    );
    assert!(text.contains("- #6: stopped after 0 of 3 fix attempts ("), "{text}");
    assert!(!text.contains("[lint](https"), "a link from forge text: {text}");
}

/// The job summary of every outcome, as a reader of the workflow run sees it.
#[test]
fn the_job_summary_of_every_outcome() {
    let context = RunContext {
        repo: "octo/widgets".into(),
        issue: Some(12),
        dry_run: false,
    };
    for outcome in Outcome::ALL {
        insta::assert_snapshot!(outcome.name(), job_summary(&summary_for(outcome), &context));
    }
}

/// A run held back by a limit or the schedule (exit 0) says what held it back, never that it
/// failed.
#[test]
fn a_held_back_run_says_what_held_it_back() {
    let context = RunContext {
        repo: "octo/widgets".into(),
        issue: None,
        dry_run: false,
    };
    for (outcome, words) in [
        (Outcome::PrLimit, "held back: `pr_limit` bot pull requests are open"),
        (
            Outcome::PrHourlyLimit,
            "held back: `pr_hourly_limit` pull requests were opened in the last hour",
        ),
        (Outcome::OutsideSchedule, "held back: outside its schedule"),
    ] {
        let summary = summary_for(outcome);
        let text = job_summary(&summary, &context);
        assert!(text.starts_with(&format!("### upkeep {words}\n")), "{text}");
        assert!(!text.contains("failed"), "{text}");
        assert_eq!(annotation(&summary), None);
        assert!(
            text.contains(&format!("- **Outcome:** `{}` (exit code 0)", outcome.name())),
            "{text}"
        );
    }
}

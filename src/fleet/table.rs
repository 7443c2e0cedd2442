//! The table of outcomes at the end of `upkeep fleet`: one line per repository (repository,
//! outcome, pull requests, questions, cost) and a total, as text for a terminal and as Markdown
//! for a GitHub Actions job summary. The pull requests' URLs follow the table, one per line, so
//! the table stays narrow.

use std::fmt::Write as _;

use crate::repo_outcome::RepoOutcome;

const HEADERS: [&str; 5] = ["repository", "outcome", "pull requests", "questions", "cost"];

fn cells(outcome: &RepoOutcome) -> [String; 5] {
    [
        outcome.repo.clone(),
        outcome.outcome.name().to_owned(),
        outcome.pull_requests.len().to_string(),
        outcome.questions.to_string(),
        format!("${:.4}", outcome.cost_usd),
    ]
}

fn total(outcomes: &[RepoOutcome]) -> [String; 5] {
    [
        format!("{} repositories", outcomes.len()),
        String::new(),
        outcomes
            .iter()
            .map(|o| o.pull_requests.len())
            .sum::<usize>()
            .to_string(),
        outcomes.iter().map(|o| o.questions).sum::<u32>().to_string(),
        format!("${:.4}", total_cost(outcomes)),
    ]
}

/// The fleet's cost. (Summed from +0.0: an empty `f64` sum is -0.0, which prints as "$-0.0000".)
pub(crate) fn total_cost(outcomes: &[RepoOutcome]) -> f64 {
    outcomes.iter().fold(0.0, |total, outcome| total + outcome.cost_usd)
}

/// The table for a terminal (column widths from the content; numbers right-aligned).
pub(crate) fn render_text(outcomes: &[RepoOutcome]) -> String {
    let mut rows: Vec<[String; 5]> = vec![HEADERS.map(str::to_owned)];
    rows.extend(outcomes.iter().map(cells));
    rows.push(total(outcomes));
    let widths: Vec<usize> = (0..HEADERS.len())
        .map(|column| rows.iter().map(|row| row[column].chars().count()).max().unwrap_or(0))
        .collect();
    let mut text = String::new();
    for (index, row) in rows.iter().enumerate() {
        if index == rows.len() - 1 {
            let rule: Vec<String> = widths.iter().map(|width| "-".repeat(*width)).collect();
            let _ = writeln!(text, "{}", rule.join("  "));
        }
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(column, cell)| {
                let width = widths[column];
                if column >= 2 {
                    format!("{cell:>width$}")
                } else {
                    format!("{cell:<width$}")
                }
            })
            .collect();
        let _ = writeln!(text, "{}", line.join("  ").trim_end());
    }
    for outcome in outcomes {
        for url in &outcome.pull_requests {
            let _ = writeln!(text, "{}: {url}", outcome.repo);
        }
    }
    text
}

/// Text inside a Markdown table cell: no line breaks, no cell separators, no HTML.
fn markdown_cell(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
        .replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The table as Markdown, for a job summary. `title` heads it (the shard, for one worker).
pub(crate) fn render_markdown(title: &str, outcomes: &[RepoOutcome]) -> String {
    let mut text = format!("## {}\n\n", markdown_cell(title));
    let _ = writeln!(text, "| {} |", HEADERS.join(" | "));
    let _ = writeln!(text, "|---|---|---:|---:|---:|");
    for outcome in outcomes {
        let mut row = cells(outcome).map(|cell| markdown_cell(&cell));
        if !outcome.pull_requests.is_empty() {
            let links: Vec<String> = outcome
                .pull_requests
                .iter()
                .enumerate()
                .map(|(index, url)| format!("[{}]({})", index + 1, markdown_cell(url).replace(')', "%29")))
                .collect();
            row[2] = links.join(" ");
        }
        let _ = writeln!(text, "| {} |", row.join(" | "));
    }
    let totals = total(outcomes).map(|cell| markdown_cell(&cell));
    let _ = writeln!(
        text,
        "| **{}** | {} | {} | {} | {} |",
        totals[0], totals[1], totals[2], totals[3], totals[4]
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Outcome;

    fn outcome(repo: &str, name: Outcome, urls: &[&str], cost: f64) -> RepoOutcome {
        let mut outcome = RepoOutcome::not_run(repo, name, None);
        outcome.pull_requests = urls.iter().map(|url| (*url).to_owned()).collect();
        outcome.cost_usd = cost;
        outcome
    }

    #[test]
    fn the_text_table_lines_up_and_totals() {
        let outcomes = [
            outcome(
                "octo/a",
                Outcome::PullRequest,
                &["https://github.com/octo/a/pull/1"],
                0.5,
            ),
            outcome("octo/longer-name", Outcome::NoTasks, &[], 0.25),
        ];
        let text = render_text(&outcomes);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "repository        outcome       pull requests  questions     cost"
        );
        assert_eq!(
            lines[1],
            "octo/a            pull_request              1          0  $0.5000"
        );
        assert_eq!(
            lines[2],
            "octo/longer-name  no_tasks                  0          0  $0.2500"
        );
        assert!(lines[3].starts_with("----------------"));
        assert_eq!(
            lines[4],
            "2 repositories                              1          0  $0.7500"
        );
        assert_eq!(lines[5], "octo/a: https://github.com/octo/a/pull/1");
        // An empty shard costs $0.0000, not "-0" (an empty f64 sum is negative zero).
        assert!(
            render_text(&[]).trim_end().ends_with("0          0  $0.0000"),
            "{}",
            render_text(&[])
        );
    }

    #[test]
    fn markdown_cells_cannot_break_the_table() {
        // The outcome is one of the documented names; the repository's name is the operator's.
        let outcomes = [outcome(
            "octo/a|b\n<script>",
            Outcome::Error,
            &["https://x/pull/1)"],
            0.0,
        )];
        let text = render_markdown("shard 0/2", &outcomes);
        assert!(
            text.contains("| octo/a\\|b &lt;script&gt; | error | [1](https://x/pull/1%29) |"),
            "{text}"
        );
        assert!(text.starts_with("## shard 0/2\n"));
    }
}

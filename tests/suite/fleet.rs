//! `upkeep fleet` and the fleet limits end to end, with the real binary: repositories made with
//! the git CLI (local, or behind the loopback git server of
//! [`super::support::github_fleet`]), scripted model replies, and a GitHub API fake whose bodies
//! are checked against the published API description.

use serde_json::{Value, json};

use super::support::{RunOutput, Script, TestRepo, finish, reply};

/// The fake's bodies against GitHub's published API description.
mod conformance;
/// The dashboard issue: created once, edited after, single under a race.
mod dashboard;
/// Every command and file shown in docs/fleet.md, run and read.
mod docs;
/// The engines: the Actions matrix workflow and the Kubernetes manifests.
mod engines;
/// pr_limit, pr_hourly_limit, schedule.
mod limits;
/// Organisation listings, topics and pagination.
mod org;
/// Sharding, isolation of failures, interrupts, per-repository options.
mod runs;

/// The `fleet_finished` event of a run (exactly one).
fn fleet_finished(out: &RunOutput) -> Value {
    let finished = out.events_of("fleet_finished");
    assert_eq!(finished.len(), 1, "one fleet_finished\n{}\n{}", out.stdout, out.stderr);
    finished.into_iter().next().expect("one")
}

/// `(repo, outcome)` of every repository of the fleet, in the fleet's order.
fn outcomes(out: &RunOutput) -> Vec<(String, String)> {
    fleet_finished(out)["outcomes"]
        .as_array()
        .expect("outcomes")
        .iter()
        .map(|o| {
            (
                o["repo"].as_str().expect("repo").to_owned(),
                o["outcome"].as_str().expect("outcome").to_owned(),
            )
        })
        .collect()
}

/// A reply script whose one reply finds nothing to do.
fn nothing_to_do() -> Script {
    Script::new(&[finish("no_tasks")])
}

/// A reply that writes a file and proposes it: what a held run must never get to.
fn propose(path: &str) -> String {
    reply(
        "write and propose",
        &[
            ("write_file", json!({"path": path, "content": "new\n"})),
            (
                "create_pull_request",
                json!({"title": format!("Add {path}"), "body": "Adds it."}),
            ),
            ("finish", json!({"status": "completed", "summary": "added"})),
        ],
    )
}

/// A list file with one repository path per line.
fn list_file(dir: &std::path::Path, repos: &[&TestRepo]) -> std::path::PathBuf {
    let path = dir.join("fleet.txt");
    let lines: Vec<String> = repos.iter().map(|repo| repo.path().display().to_string()).collect();
    std::fs::write(&path, format!("# the fleet\n{}\n", lines.join("\n"))).expect("write list");
    path
}

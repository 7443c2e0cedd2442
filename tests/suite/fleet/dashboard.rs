use std::time::Duration;

use secrecy::SecretString;
use serde_json::Value;

use super::super::support::RunOutput;
use super::super::support::github_fleet::{BOT, FleetHub, issue, pull_request};
use super::nothing_to_do;
use upkeep::config::GitHubSettings;
use upkeep::forge::github::GitHubForge;
use upkeep::forge::github::dashboard::DASHBOARD_MARKER;
use upkeep::forge::{DashboardUpdate, Forge};

const REPO: &str = "octo/widgets";

fn open_dashboards(hub: &FleetHub) -> Vec<Value> {
    hub.issues(REPO)
        .into_iter()
        .filter(|issue| {
            issue["state"] == "open" && issue["body"].as_str().is_some_and(|b| b.contains(DASHBOARD_MARKER))
        })
        .collect()
}

fn dashboard_event(out: &RunOutput) -> Value {
    let events = out.events_of("dashboard");
    assert_eq!(events.len(), 1, "{}\n{}", out.stdout, out.stderr);
    events[0].clone()
}

/// `dashboard = true`: the first run creates the issue, the next edits that same issue (found by
/// its hidden marker); a human's issue that copies the marker is not taken for it.
#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_issue_is_created_once_and_then_edited() {
    let hub = FleetHub::start().await;
    hub.add_repo(REPO, &[("README.md", "hi\n"), (".upkeep.toml", "dashboard = true\n")])
        .await;
    hub.serve_pulls(
        REPO,
        vec![pull_request(
            REPO,
            3,
            "upkeep/3-fix-docs",
            "2024-01-01T00:00:00Z",
            "open",
        )],
    );
    // A task for the bot, waiting.
    hub.add_issue(
        REPO,
        issue(REPO, 5, 5, "Add a changelog", Some("please"), "alice", &["upkeep"]),
    );
    let script = nothing_to_do();
    let run = || hub.run(&["run", "--repo", REPO], &script);
    let first = run().await;
    first.assert_code(0);
    assert_eq!(dashboard_event(&first)["action"], "created");
    let second = run().await;
    second.assert_code(0);
    assert_eq!(dashboard_event(&second)["action"], "updated");

    assert_eq!(
        hub.requests("POST", &format!("/repos/{REPO}/issues")).await.len(),
        1,
        "created once"
    );
    let dashboards = open_dashboards(&hub);
    assert_eq!(dashboards.len(), 1, "never duplicated: {dashboards:?}");
    let dashboard = &dashboards[0];
    assert_eq!(dashboard["title"], "upkeep dashboard");
    assert_eq!(dashboard["user"]["login"], BOT);
    let body = dashboard["body"].as_str().expect("body");
    assert!(body.contains("`no_tasks` (exit code 0)"), "{body}");
    assert!(
        body.contains("### Open pull requests\n\n- #3 (`upkeep/3-fix-docs`)"),
        "{body}"
    );
    assert!(
        body.contains("### Pending tasks (issues labelled `upkeep`)\n\n- #5\n"),
        "{body}"
    );
    let edits = hub
        .requests("PATCH", &format!("/repos/{REPO}/issues/{}", dashboard["number"]))
        .await;
    assert_eq!(edits.len(), 1, "the second run edited the issue the first created");
    // The event says where it is, and run_finished stays the run's last event.
    assert_eq!(second.events().last().expect("events")["type"], "run_finished");
}

fn forge(hub: &FleetHub) -> GitHubForge {
    let settings = GitHubSettings {
        server_url: hub.git.url(),
        api_url: hub.api.uri(),
        token: Some(SecretString::from(hub.token.clone())),
        bot_login: Some(BOT.to_owned()),
    };
    let (owner, name) = REPO.split_once('/').expect("owner/name");
    GitHubForge::new(&settings, owner, name, false).expect("forge")
}

/// Two runs update the dashboard at the same moment, both finding none (the API answers both
/// listings with the empty tracker): both create one, and both converge on the lower number,
/// closing the other as its duplicate. After the race exactly one dashboard is open, holding
/// the text of a run, and every later update edits it.
#[tokio::test(flavor = "multi_thread")]
async fn racing_runs_leave_exactly_one_dashboard() {
    let hub = FleetHub::start().await;
    hub.delay_issue_listings(Duration::from_millis(300));
    let (left, right) = (forge(&hub), forge(&hub));
    let (a, b) = tokio::join!(
        left.update_dashboard("from run A"),
        right.update_dashboard("from run B")
    );
    let (a, b) = (
        a.expect("A").expect("github keeps one"),
        b.expect("B").expect("github keeps one"),
    );
    assert_eq!(
        hub.requests("POST", &format!("/repos/{REPO}/issues")).await.len(),
        2,
        "the race really happened: both created"
    );
    let dashboards = open_dashboards(&hub);
    assert_eq!(dashboards.len(), 1, "one stays open: {dashboards:?}");
    assert_eq!(dashboards[0]["number"], 1, "the lower number wins");
    let closed: Vec<Value> = hub
        .issues(REPO)
        .into_iter()
        .filter(|i| i["state"] == "closed")
        .collect();
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0]["state_reason"], "duplicate");
    assert!(
        closed[0]["body"]
            .as_str()
            .is_some_and(|b| b.contains("Duplicate of #1"))
    );
    let body = dashboards[0]["body"].as_str().expect("body");
    assert!(body.contains("from run A") || body.contains("from run B"), "{body}");
    // Exactly one of the two says it created the dashboard.
    let created = [&a, &b]
        .iter()
        .filter(|u| matches!(u, DashboardUpdate::Created(_)))
        .count();
    assert_eq!(created, 1, "{a:?} {b:?}");

    hub.delay_issue_listings(Duration::ZERO);
    let later = forge(&hub)
        .update_dashboard("later")
        .await
        .expect("later")
        .expect("kept");
    assert!(matches!(later, DashboardUpdate::Updated(_)), "{later:?}");
    assert_eq!(
        hub.requests("POST", &format!("/repos/{REPO}/issues")).await.len(),
        2,
        "no third"
    );
    assert_eq!(open_dashboards(&hub).len(), 1);
}

/// An issue by someone else that carries the marker is not the dashboard: upkeep creates its
/// own and leaves that issue alone.
#[tokio::test(flavor = "multi_thread")]
async fn a_copied_marker_does_not_make_someone_elses_issue_the_dashboard() {
    let hub = FleetHub::start().await;
    let body = format!("{DASHBOARD_MARKER}\nmine");
    hub.add_issue(REPO, issue(REPO, 1, 1, "upkeep dashboard", Some(&body), "mallory", &[]));
    let created = forge(&hub)
        .update_dashboard("real")
        .await
        .expect("update")
        .expect("kept");
    assert!(matches!(created, DashboardUpdate::Created(_)), "{created:?}");
    let issues = hub.issues(REPO);
    assert_eq!(issues.len(), 2);
    assert_eq!(issues[0]["body"], body.as_str(), "mallory's issue untouched");
    assert_eq!(issues[0]["state"], "open");
    assert_eq!(issues[1]["user"]["login"], BOT);
    assert!(
        hub.requests("PATCH", &format!("/repos/{REPO}/issues/1"))
            .await
            .is_empty()
    );
}

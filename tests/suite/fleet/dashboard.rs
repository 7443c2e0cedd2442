use std::time::Duration;

use secrecy::SecretString;
use serde_json::Value;

use super::super::support::RunOutput;
use super::super::support::github_fleet::{BOT, FleetHub, issue, pull_request};
use super::nothing_to_do;
use upkeep::config::GitHubSettings;
use upkeep::forge::github::GitHubForge;
use upkeep::forge::github::dashboard::{DASHBOARD_CLAIM_REF, DASHBOARD_MARKER};
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
/// listings with the empty tracker): both try to claim the creation, GitHub lets one create the
/// claim reference and refuses the other (422), the winner creates the issue and the loser
/// waits for it and edits it. One issue is ever created, and every later update edits it.
#[tokio::test(flavor = "multi_thread")]
async fn racing_runs_leave_exactly_one_dashboard() {
    let hub = FleetHub::start().await;
    hub.add_repo(REPO, &[("README.md", "hi\n")]).await;
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
    let claims = hub.requests("POST", &format!("/repos/{REPO}/git/refs")).await;
    assert_eq!(claims.len(), 2, "the race really happened: both claimed");
    assert_eq!(hub.refs(REPO, "refs/upkeep/"), [DASHBOARD_CLAIM_REF]);
    assert_eq!(
        hub.requests("POST", &format!("/repos/{REPO}/issues")).await.len(),
        1,
        "only the claim's winner created an issue"
    );
    let issues = hub.issues(REPO);
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!(open_dashboards(&hub).len(), 1);
    // Exactly one of the two says it created the dashboard; the other edited it.
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
        1,
        "no second"
    );
    assert_eq!(open_dashboards(&hub).len(), 1);
}

/// A claim whose dashboard never appeared (its run stopped between the claim and the issue, or
/// someone closed the dashboard by hand) does not block the dashboard for ever: a later run
/// waits its few seconds, then creates the issue.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_without_a_dashboard_does_not_block_it_for_ever() {
    let hub = FleetHub::start().await;
    hub.add_repo(REPO, &[("README.md", "hi\n")]).await;
    let bare = hub.bare(REPO);
    super::super::support::git(&bare, &["update-ref", DASHBOARD_CLAIM_REF, "main"]);
    let update = forge(&hub)
        .update_dashboard("after a crash")
        .await
        .expect("update")
        .expect("kept");
    assert!(matches!(update, DashboardUpdate::Created(_)), "{update:?}");
    assert_eq!(
        hub.requests("POST", &format!("/repos/{REPO}/git/refs")).await.len(),
        1,
        "claimed first, and was refused"
    );
    assert!(
        hub.requests("GET", &format!("/repos/{REPO}/issues")).await.len() >= 3,
        "looked for the winner's issue before creating one"
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

/// Reproduces two upkeep processes finishing on one repository at the same moment (two shards,
/// or a scheduled run beside a manual one): both looked for the dashboard, both found none, and
/// both created one, so the repository got two dashboard issues (one later closed as a
/// duplicate, still notifying watchers twice). DESIGN section 13: creation is claimed
/// atomically first, so exactly one issue is ever created. The stand-in answers every issue
/// listing two seconds late with what it held when asked, so both processes see "no dashboard"
/// before either creates it.
#[tokio::test(flavor = "multi_thread")]
async fn two_upkeep_processes_racing_leave_exactly_one_dashboard_issue() {
    let hub = FleetHub::start().await;
    hub.add_repo(REPO, &[("README.md", "hi\n"), (".upkeep.toml", "dashboard = true\n")])
        .await;
    hub.serve_pulls(REPO, Vec::new());
    hub.delay_issue_listings(Duration::from_secs(2));
    let script = nothing_to_do();
    let run = || hub.run(&["run", "--repo", REPO], &script);
    let (a, b) = tokio::join!(run(), run());
    a.assert_code(0);
    b.assert_code(0);

    // The race was real: both processes asked for the dashboard before any issue was created.
    let requests = hub.api.received_requests().await.expect("recorded");
    let issues_path = format!("/repos/{REPO}/issues");
    let first_create = requests
        .iter()
        .position(|r| r.method.as_str() == "POST" && r.url.path() == issues_path)
        .expect("a dashboard was created");
    let lookups_before = requests[..first_create]
        .iter()
        .filter(|r| {
            r.method.as_str() == "GET"
                && r.url.path() == issues_path
                && r.url.query().is_some_and(|q| q.contains("creator="))
        })
        .count();
    assert!(
        lookups_before >= 2,
        "both looked before either created: {lookups_before}"
    );
    assert_eq!(
        hub.requests("POST", &format!("/repos/{REPO}/git/refs")).await.len(),
        2,
        "both claimed the creation; GitHub granted one"
    );
    assert_eq!(hub.refs(REPO, "refs/upkeep/"), [DASHBOARD_CLAIM_REF]);

    let dashboards: Vec<Value> = hub
        .issues(REPO)
        .into_iter()
        .filter(|issue| issue["body"].as_str().is_some_and(|b| b.contains(DASHBOARD_MARKER)))
        .collect();
    assert_eq!(
        dashboards.len(),
        1,
        "exactly one dashboard issue, ever: {dashboards:#?}"
    );
    assert_eq!(dashboards[0]["state"], "open");
    assert_eq!(hub.requests("POST", &issues_path).await.len(), 1, "created once");
    let mut actions = vec![
        dashboard_event(&a)["action"].as_str().unwrap_or_default().to_owned(),
        dashboard_event(&b)["action"].as_str().unwrap_or_default().to_owned(),
    ];
    actions.sort();
    assert_eq!(actions, ["created", "updated"], "the loser edited the winner's issue");
}

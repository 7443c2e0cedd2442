use serde_json::Value;

use super::super::support::github_fleet::{FleetHub, pull_request};
use super::super::support::{RunOutput, Script, TestRepo, run_local};
use super::{outcomes, propose};

/// The one `limit_reached` event, and that no model was asked and no cycle started.
fn held_before_any_work(out: &RunOutput, limit: &str) -> Value {
    let held = out.events_of("limit_reached");
    assert_eq!(held.len(), 1, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(held[0]["limit"], limit);
    assert!(out.events_of("model_response").is_empty(), "no model call");
    assert!(out.events_of("cycle_started").is_empty(), "no cycle");
    let finished = &out.events_of("run_finished")[0];
    assert_eq!(finished["outcome"], limit);
    assert_eq!(finished["exit_code"], 0);
    assert_eq!(finished["cycles"], 0);
    held[0].clone()
}

/// `pr_limit` reached on GitHub: the cycle opens nothing (no push, no pull request, no model
/// call), says so, and the run exits 0. Counted from the forge: pull requests against another
/// base and closed ones count as they should, a fork's `upkeep/` branch does not.
#[tokio::test(flavor = "multi_thread")]
async fn pr_limit_reached_opens_nothing() {
    let hub = FleetHub::start().await;
    hub.add_repo(
        "octo/widgets",
        &[("README.md", "hi\n"), (".upkeep.toml", "pr_limit = 2\n")],
    )
    .await;
    let mut on_other_base = pull_request("octo/widgets", 3, "upkeep/three", "2024-01-01T00:00:00Z", "open");
    on_other_base["base"]["ref"] = "release".into();
    let mut from_a_fork = pull_request("octo/widgets", 4, "upkeep/four", "2024-01-01T00:00:00Z", "open");
    from_a_fork["head"]["repo"]["full_name"] = "mallory/widgets".into();
    hub.serve_pulls(
        "octo/widgets",
        vec![
            pull_request("octo/widgets", 2, "upkeep/two", "2024-01-01T00:00:00Z", "open"),
            on_other_base,
            from_a_fork,
            pull_request("octo/widgets", 1, "feature/human", "2024-01-01T00:00:00Z", "open"),
        ],
    );
    let script = Script::new(&[propose("NEW.md")]);
    let out = hub.run(&["run", "--repo", "octo/widgets"], &script).await;
    out.assert_code(0);
    let held = held_before_any_work(&out, "pr_limit");
    assert!(
        held["message"]
            .as_str()
            .is_some_and(|m| m.contains("2 bot pull requests are open (limit 2)")),
        "{held}"
    );
    assert!(out.stderr.contains("pr_limit reached"), "says so: {}", out.stderr);
    assert!(hub.requests("POST", "/repos/octo/widgets/pulls").await.is_empty());
    assert!(
        !hub.git.requests().iter().any(|r| r.path.contains("git-receive-pack")),
        "nothing pushed"
    );
    assert_eq!(out.leftover_temp_entries, 0);
}

/// `pr_hourly_limit`: a bot pull request opened (and since closed) within the hour uses the
/// hour's allowance; one from yesterday does not.
#[tokio::test(flavor = "multi_thread")]
async fn pr_hourly_limit_counts_the_last_hour_in_every_state() {
    let hub = FleetHub::start().await;
    hub.add_repo("octo/widgets", &[("README.md", "hi\n")]).await;
    let recent = (jiff::Timestamp::now() - jiff::SignedDuration::from_mins(10)).to_string();
    hub.serve_pulls(
        "octo/widgets",
        vec![
            pull_request("octo/widgets", 7, "upkeep/recent", &recent, "closed"),
            pull_request("octo/widgets", 6, "upkeep/old", "2024-01-01T00:00:00Z", "closed"),
        ],
    );
    let operator = tempfile::tempdir().expect("tempdir");
    let config = operator.path().join("operator.toml");
    std::fs::write(&config, "pr_hourly_limit = 1\n").expect("write");
    let script = Script::new(&[propose("NEW.md")]);
    let config = config.to_str().expect("utf-8 path");
    let out = hub
        .run(&["run", "--repo", "octo/widgets", "--config", config], &script)
        .await;
    out.assert_code(0);
    let held = held_before_any_work(&out, "pr_hourly_limit");
    assert!(
        held["message"]
            .as_str()
            .is_some_and(|m| m.contains("1 bot pull requests were opened in the last hour")),
        "{held}"
    );
    assert!(hub.requests("POST", "/repos/octo/widgets/pulls").await.is_empty());
}

/// The hour's count reads as many pages as the hour fills: with 120 pull requests by others
/// opened in the last minutes, the bot's one from 20 minutes ago is on the second page of 100
/// and still counts (a single page used to miss it, and the run opened another).
#[tokio::test(flavor = "multi_thread")]
async fn pr_hourly_limit_reads_every_page_of_the_last_hour() {
    let hub = FleetHub::start().await;
    hub.add_repo("octo/widgets", &[("README.md", "hi\n")]).await;
    let ago = |minutes: i64| (jiff::Timestamp::now() - jiff::SignedDuration::from_mins(minutes)).to_string();
    let mut pulls: Vec<Value> = (0..120)
        .map(|n| pull_request("octo/widgets", 200 + n, &format!("feature/{n}"), &ago(5), "open"))
        .collect();
    pulls.push(pull_request("octo/widgets", 7, "upkeep/earlier", &ago(20), "closed"));
    pulls.push(pull_request(
        "octo/widgets",
        6,
        "upkeep/old",
        "2024-01-01T00:00:00Z",
        "closed",
    ));
    hub.serve_pulls("octo/widgets", pulls);
    let operator = tempfile::tempdir().expect("tempdir");
    let config = operator.path().join("operator.toml");
    std::fs::write(&config, "pr_hourly_limit = 1\n").expect("write");
    let config = config.to_str().expect("utf-8 path");
    let script = Script::new(&[propose("NEW.md")]);
    let out = hub
        .run(&["run", "--repo", "octo/widgets", "--config", config], &script)
        .await;
    out.assert_code(0);
    held_before_any_work(&out, "pr_hourly_limit");
    assert!(hub.requests("POST", "/repos/octo/widgets/pulls").await.is_empty());
    let listed = hub.requests("GET", "/repos/octo/widgets/pulls").await;
    assert!(
        listed
            .iter()
            .any(|request| request.url.query().is_some_and(|query| query.contains("page=2"))),
        "the second page was never read"
    );
}

/// Continuous mode stops when the limit is reached between cycles (exit 0): the first cycle's
/// pull request fills `pr_limit = 1`, so the second cycle never starts. Local forge: the open
/// bot branches are its pull requests.
#[test]
fn continuous_mode_stops_at_the_limit() {
    let repo = TestRepo::with_files(&[("README.md", "hi\n"), (".upkeep.toml", "pr_limit = 1\n")]);
    let script = Script::new(&[propose("ONE.md"), propose("TWO.md")]);
    let out = run_local(&repo, &script, &["--continuous"]);
    out.assert_code(0);
    assert_eq!(out.events_of("pull_request").len(), 1);
    assert_eq!(out.events_of("limit_reached")[0]["limit"], "pr_limit");
    let finished = &out.events_of("run_finished")[0];
    assert_eq!(finished["outcome"], "pr_limit");
    assert_eq!(finished["cycles"], 1, "the held cycle never started");
    assert_eq!(repo.bot_branches(), ["upkeep/add-one-md"]);
}

/// The weekday three days from now (UTC), which today is not, whenever the test runs.
fn another_day() -> &'static str {
    let day = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(72))
        .to_zoned(jiff::tz::TimeZone::UTC)
        .weekday();
    ["mon", "tue", "wed", "thu", "fri", "sat", "sun"][day.to_monday_zero_offset() as usize]
}

/// Outside the repository's schedule a run does nothing, says so, and exits 0.
#[test]
fn a_run_outside_its_schedule_does_nothing_and_exits_0() {
    let config = format!("schedule = [\"on {}\"]\ntimezone = \"UTC\"\n", another_day());
    let repo = TestRepo::with_files(&[("README.md", "hi\n"), (".upkeep.toml", &config)]);
    let script = Script::new(&[propose("NEW.md")]);
    let out = run_local(&repo, &script, &[]);
    out.assert_code(0);
    let held = held_before_any_work(&out, "outside_schedule");
    assert!(
        held["message"].as_str().is_some_and(|m| m.contains("opens next at")),
        "{held}"
    );
    assert!(out.stderr.contains("outside the schedule"), "{}", out.stderr);
    assert!(repo.bot_branches().is_empty());
}

/// Outside the operator's schedule a fleet does not even clone: every repository is held.
#[tokio::test(flavor = "multi_thread")]
async fn outside_the_operators_schedule_a_fleet_clones_nothing() {
    let hub = FleetHub::start().await;
    hub.add_repo("octo/one", &[("README.md", "one\n")]).await;
    hub.add_repo("octo/two", &[("README.md", "two\n")]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let list = dir.path().join("fleet.txt");
    std::fs::write(&list, "octo/one\nocto/two\n").expect("write");
    let config = dir.path().join("operator.toml");
    std::fs::write(&config, format!("schedule = [\"on {}\"]\n", another_day())).expect("write");
    let script = Script::new(&[propose("NEW.md")]);
    let (list, config) = (list.to_str().expect("utf-8"), config.to_str().expect("utf-8"));
    let out = hub.run(&["fleet", "--repos", list, "--config", config], &script).await;
    out.assert_code(0);
    assert_eq!(
        outcomes(&out),
        [
            ("octo/one".to_owned(), "outside_schedule".to_owned()),
            ("octo/two".to_owned(), "outside_schedule".to_owned())
        ]
    );
    assert!(out.events_of("model_response").is_empty());
    assert!(
        hub.git.requests().is_empty(),
        "nothing cloned: {:?}",
        hub.git.requests()
    );
}

/// `pr_limit` stopped an explicit `--task` and exited 0 without a word about the request: limits
/// hold back the work the bot picks itself, while the operator's own request runs, with a note.
/// The same repository without `--task` (the bot picks from TODO.md) is still held, and the
/// message says how a local pull request is closed.
#[test]
fn an_explicit_task_passes_over_pr_limit_and_picked_work_does_not() {
    let repo = TestRepo::with_files(&[
        ("README.md", "hi\n"),
        ("TODO.md", "- [ ] add NEW.md\n"),
        (".upkeep.toml", "pr_limit = 1\n"),
    ]);
    repo.git(&["branch", "upkeep/earlier-work"]);
    repo.git(&["checkout", "-q", "upkeep/earlier-work"]);
    repo.write("EARLIER.md", "earlier\n");
    repo.commit("earlier bot work");
    repo.git(&["checkout", "-q", "-"]);

    let picked = run_local(&repo, &Script::new(&[propose("NEW.md")]), &[]);
    picked.assert_code(0);
    let held = held_before_any_work(&picked, "pr_limit");
    assert!(
        held["message"]
            .as_str()
            .is_some_and(|m| m.contains("git branch -D upkeep/")),
        "says how to close a local pull request: {held}"
    );

    let asked = run_local(&repo, &Script::new(&[propose("NEW.md")]), &["--task", "add NEW.md"]);
    asked.assert_code(0);
    assert!(asked.events_of("limit_reached").is_empty(), "{}", asked.stdout);
    assert_eq!(asked.events_of("pull_request").len(), 1, "{}", asked.stderr);
    assert!(
        asked.stderr.contains("pr_limit reached") && asked.stderr.contains("passed over"),
        "notes the limit it passed over: {}",
        asked.stderr
    );
    assert_eq!(repo.bot_branches(), ["upkeep/add-new-md", "upkeep/earlier-work"]);
}

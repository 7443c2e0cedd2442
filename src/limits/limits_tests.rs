use async_trait::async_trait;

use super::*;
use crate::config::FileConfig;
use crate::forge::{OpenPullRequest, PullRequestActivity, PullRequestDraft};
use crate::repo::Workspace;

fn file(text: &str) -> FileConfig {
    FileConfig::parse(text, "test.toml").expect("valid")
}

#[test]
fn a_repository_tightens_but_never_loosens() {
    let operator = file("pr_limit = 4\npr_hourly_limit = 0\n");
    let cases = [
        ("", Some(4), None),
        ("pr_limit = 10\n", Some(4), None),
        ("pr_limit = 0\n", Some(4), None),
        ("pr_limit = 2\npr_hourly_limit = 1\n", Some(2), Some(1)),
    ];
    for (repository, pr_limit, hourly) in cases {
        let limits = Limits::resolve(operator.limit_keys(), file(repository).limit_keys());
        assert_eq!(
            (limits.pr_limit, limits.pr_hourly_limit),
            (pr_limit, hourly),
            "{repository:?}"
        );
    }
    let defaults = Limits::resolve(FileConfig::default().limit_keys(), FileConfig::default().limit_keys());
    assert_eq!(defaults.pr_limit, Some(DEFAULT_PR_LIMIT));
    assert_eq!(defaults.pr_hourly_limit, Some(DEFAULT_PR_HOURLY_LIMIT));
}

#[test]
fn both_schedules_must_allow_the_moment() {
    let operator = file("schedule = [\"after 20:00\"]\n");
    let repository = file("schedule = [\"before 23:00\"]\n");
    let limits = Limits::resolve(operator.limit_keys(), repository.limit_keys());
    let at = |hour: i8| {
        jiff::civil::date(2024, 1, 2)
            .at(hour, 30, 0, 0)
            .to_zoned(jiff::tz::TimeZone::UTC)
            .expect("exists")
            .timestamp()
    };
    assert!(limits.outside_schedule(at(21)).is_none());
    let held = limits
        .outside_schedule(at(23))
        .expect("the repository's window is closed");
    assert_eq!(held.by, HeldBy::Schedule);
    assert!(held.message.contains("before 23:00"), "{}", held.message);
    let held = limits
        .outside_schedule(at(12))
        .expect("the operator's window is closed");
    assert!(
        held.message.contains("opens next at Tue 20:00 (UTC)"),
        "{}",
        held.message
    );
}

/// Before the clone only the operator's file is known: its limits and schedule hold alone, as
/// if the repository set nothing.
#[test]
fn the_operators_limits_alone_hold_before_the_clone() {
    let operator = file("pr_limit = 3\nschedule = [\"after 20:00\"]\n");
    let limits = Limits::operator_only(operator.limit_keys());
    assert_eq!(
        (limits.pr_limit, limits.pr_hourly_limit),
        (Some(3), Some(DEFAULT_PR_HOURLY_LIMIT))
    );
    let noon = jiff::civil::date(2024, 1, 2)
        .at(12, 0, 0, 0)
        .to_zoned(jiff::tz::TimeZone::UTC)
        .expect("exists")
        .timestamp();
    let held = limits.outside_schedule(noon).expect("the operator's window is closed");
    assert!(held.message.contains("after 20:00"), "{}", held.message);
    assert!(
        Limits::operator_only(FileConfig::default().limit_keys())
            .schedules
            .is_empty()
    );
}

/// A forge that reports fixed activity.
struct Counting(PullRequestActivity);

#[async_trait]
impl Forge for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    async fn open_pull_requests(&self, _base: &str) -> Result<Vec<OpenPullRequest>, ForgeError> {
        Ok(Vec::new())
    }
    async fn publish(&self, _workspace: &Workspace, _draft: &PullRequestDraft) -> Result<PullRequest, ForgeError> {
        Err(ForgeError::Other("not in this test".into()))
    }
    async fn post_question(&self, _issue: Option<u64>, _question: &str) -> Result<Option<String>, ForgeError> {
        Ok(None)
    }
    async fn pull_request_activity(&self, _base: &str, _since: Timestamp) -> Result<PullRequestActivity, ForgeError> {
        Ok(self.0.clone())
    }
}

fn branches(names: &[&str]) -> Vec<String> {
    names.iter().map(|name| (*name).to_owned()).collect()
}

fn opened(branch: &str) -> PullRequest {
    PullRequest {
        url: String::new(),
        number: None,
        branch: branch.to_owned(),
        title: String::new(),
        updated: false,
        task_key: None,
        preview: None,
        answers: Vec::new(),
    }
}

#[tokio::test]
async fn open_and_hourly_counts_hold_the_cycle() {
    let limits = Limits {
        pr_limit: Some(2),
        pr_hourly_limit: Some(1),
        schedules: Vec::new(),
    };
    let now = Timestamp::now();
    let one_open = Counting(PullRequestActivity {
        open: branches(&["upkeep/a"]),
        opened_since: Some(Vec::new()),
    });
    assert_eq!(limits.check(&one_open, "main", &[], now).await.expect("checked"), None);
    // This run's own pull request, which a dry run's forge does not show, counts too.
    let held = limits
        .check(&one_open, "main", &[opened("upkeep/b")], now)
        .await
        .expect("checked")
        .expect("held");
    assert_eq!(held.by, HeldBy::PrLimit);
    assert!(
        held.message.contains("2 bot pull requests are open (limit 2)"),
        "{}",
        held.message
    );
    // The same branch reported by the forge is not counted twice.
    let shown = Counting(PullRequestActivity {
        open: branches(&["upkeep/a"]),
        opened_since: Some(branches(&["upkeep/a"])),
    });
    let held = limits
        .check(&shown, "main", &[opened("upkeep/a")], now)
        .await
        .expect("checked")
        .expect("held by the hour");
    assert_eq!(held.by, HeldBy::PrHourlyLimit);
    let unlimited = Limits::default();
    assert_eq!(unlimited.check(&shown, "main", &[], now).await.expect("checked"), None);
    // A forge without dates (local) is not held by the hour, even after this run's own.
    let undated = Counting(PullRequestActivity {
        open: Vec::new(),
        opened_since: None,
    });
    let many = [opened("upkeep/x"), opened("upkeep/y"), opened("upkeep/z")];
    let roomy = Limits {
        pr_limit: Some(5),
        ..limits
    };
    assert_eq!(roomy.check(&undated, "main", &many, now).await.expect("checked"), None);
}

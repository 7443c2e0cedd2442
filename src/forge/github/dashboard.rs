//! The repository's "upkeep dashboard" issue on GitHub (DESIGN section 13): found by a hidden
//! marker in its body, created the first time, edited after.
//!
//! Never duplicated. GitHub has no conditional create for issues, so two runs that look at the
//! same moment would both find no dashboard and both create one. A run that finds none first
//! claims the creation atomically: it creates the git reference `refs/upkeep/dashboard`
//! (`POST /git/refs`, at the default branch's newest commit), which GitHub refuses to create
//! twice (422 "Reference already exists"). The run that created the reference creates the
//! issue; a run that was refused waits for that issue to appear (a few seconds, in growing
//! steps) and edits it. The reference is never deleted: it says "the dashboard was created".
//!
//! Where the claim cannot decide (the token may not create references, the repository has no
//! commit, or the claim is held but no dashboard appears: its creator stopped between claim and
//! issue, or someone closed the dashboard), the run creates the issue anyway, and convergence
//! keeps one open: the dashboard is the lowest-numbered open issue that the bot's account
//! opened with the marker, every update closes any other as a duplicate of it (`state_reason:
//! duplicate`), and a run re-reads the list after creating. Only issues opened by the bot's
//! account count (when the account can be told), so nobody else's issue is taken over by
//! copying the marker into it.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use super::GitHubForge;
use super::api::{Method, encode, parse_list, parse_object};
use super::json::UserJson;
use crate::forge::{DashboardUpdate, ForgeError};

/// Hidden in the dashboard issue's body; how runs find it.
pub const DASHBOARD_MARKER: &str = "<!-- upkeep:dashboard -->";
pub const DASHBOARD_TITLE: &str = "upkeep dashboard";
/// Open issues looked through for the marker when the bot's account is unknown (with it, only
/// the account's own issues are listed).
const MAX_SCANNED: usize = 1000;
/// The reference whose creation claims the dashboard's creation: outside `refs/heads/` and
/// `refs/tags/`, so it is no branch or tag, and clones do not fetch it.
pub const DASHBOARD_CLAIM_REF: &str = "refs/upkeep/dashboard";
/// How long a run that lost the claim waits before each look for the winner's issue (about 8
/// seconds in all: the winner creates it right after its claim, and listings can lag a little).
const WAIT_FOR_WINNER: [Duration; 5] = [
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
];

/// What claiming the creation decided.
#[derive(Debug)]
enum Claim {
    /// This run created the reference: it creates the issue.
    Won,
    /// Another run created it: its issue is (or will be) there.
    Lost,
    /// No decision (why): create, and let convergence keep one.
    Undecided(String),
}

#[derive(Debug, Deserialize)]
struct DashboardIssue {
    number: u64,
    #[serde(default)]
    html_url: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<UserJson>,
    #[serde(default)]
    pull_request: Option<serde_json::Value>,
}

impl GitHubForge {
    /// Open dashboard issues, lowest number first.
    async fn dashboards(&self, bot: Option<&str>) -> Result<Vec<DashboardIssue>, ForgeError> {
        let mut route = "/issues?state=open&sort=created&direction=asc&per_page=100".to_owned();
        if let Some(login) = bot {
            route.push_str(&format!("&creator={}", encode(login)));
        }
        let items = self
            .api
            .list("looking for the dashboard issue", self.route(&route), MAX_SCANNED)
            .await?;
        let mut found: Vec<DashboardIssue> = items
            .into_iter()
            .filter_map(|value| serde_json::from_value::<DashboardIssue>(value).ok())
            .filter(|issue| issue.pull_request.is_none())
            .filter(|issue| {
                issue
                    .body
                    .as_deref()
                    .is_some_and(|body| body.contains(DASHBOARD_MARKER))
            })
            .filter(|issue| match (bot, &issue.user) {
                (Some(bot), Some(user)) => user.login.eq_ignore_ascii_case(bot),
                (Some(_), None) => false,
                (None, _) => true,
            })
            .collect();
        found.sort_by_key(|issue| issue.number);
        Ok(found)
    }

    async fn edit_issue(&self, number: u64, change: serde_json::Value) -> Result<String, ForgeError> {
        let operation = format!("updating the dashboard issue #{number}");
        let route = self.route(&format!("/issues/{number}"));
        let answer = self.api.send(&operation, Method::Patch, &route, Some(&change)).await?;
        Ok(parse_object::<DashboardIssue>(&operation, &answer.text)
            .map(|issue| issue.html_url)
            .unwrap_or_default())
    }

    /// Closes every dashboard but `keeper` as its duplicate.
    async fn close_duplicates(&self, keeper: u64, others: &[DashboardIssue]) -> Result<(), ForgeError> {
        for duplicate in others.iter().filter(|issue| issue.number != keeper) {
            let change = json!({
                "state": "closed",
                "state_reason": "duplicate",
                "body": format!("{DASHBOARD_MARKER}\nDuplicate of #{keeper}: upkeep keeps one dashboard per repository."),
            });
            self.edit_issue(duplicate.number, change).await?;
        }
        Ok(())
    }

    /// Edits the lowest-numbered of `existing`, closing the others; `None` when there is none.
    async fn update_existing(
        &self,
        body: &str,
        existing: &[DashboardIssue],
    ) -> Result<Option<DashboardUpdate>, ForgeError> {
        let Some(keeper) = existing.first() else {
            return Ok(None);
        };
        let url = self.edit_issue(keeper.number, json!({"body": body})).await?;
        self.close_duplicates(keeper.number, existing).await?;
        Ok(Some(DashboardUpdate::Updated(url)))
    }

    /// Creates [`DASHBOARD_CLAIM_REF`] at the default branch's newest commit: GitHub creates a
    /// reference once and answers every later attempt 422 "Reference already exists".
    async fn claim_creation(&self) -> Claim {
        let operation = "reading the newest commit (to claim the dashboard's creation)";
        let newest = match self
            .api
            .send(operation, Method::Get, &self.route("/commits?per_page=1"), None)
            .await
            .and_then(|answer| parse_list(operation, &answer.text))
        {
            Ok(commits) => commits.first().and_then(|c| c["sha"].as_str()).map(str::to_owned),
            Err(error) => return Claim::Undecided(error.to_string()),
        };
        let Some(sha) = newest.filter(|sha| sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit())) else {
            return Claim::Undecided("the repository has no commit to claim the dashboard at".into());
        };
        let request = json!({"ref": DASHBOARD_CLAIM_REF, "sha": sha});
        let operation = "claiming the dashboard's creation";
        match self
            .api
            .send(operation, Method::Post, &self.route("/git/refs"), Some(&request))
            .await
        {
            Ok(_) => Claim::Won,
            Err(ForgeError::Api {
                status: 422, message, ..
            }) if message.to_ascii_lowercase().contains("already exists") => Claim::Lost,
            Err(error) => Claim::Undecided(error.to_string()),
        }
    }

    pub(super) async fn write_dashboard(&self, body: &str) -> Result<DashboardUpdate, ForgeError> {
        let body = format!("{DASHBOARD_MARKER}\n{body}");
        let bot = self.bot_login().await.map(str::to_owned);
        let existing = self.dashboards(bot.as_deref()).await?;
        if let Some(updated) = self.update_existing(&body, &existing).await? {
            return Ok(updated);
        }
        match self.claim_creation().await {
            Claim::Won => {}
            Claim::Lost => {
                for pause in WAIT_FOR_WINNER {
                    tokio::time::sleep(pause).await;
                    let now = self.dashboards(bot.as_deref()).await?;
                    if let Some(updated) = self.update_existing(&body, &now).await? {
                        return Ok(updated);
                    }
                }
                tracing::warn!("{DASHBOARD_CLAIM_REF} exists but no open dashboard issue appeared; creating one");
            }
            Claim::Undecided(why) => {
                tracing::warn!("the dashboard's creation could not be claimed ({why}); creating it unclaimed");
            }
        }
        let operation = "creating the dashboard issue";
        let request = json!({"title": DASHBOARD_TITLE, "body": body});
        let answer = self
            .api
            .send(operation, Method::Post, &self.route("/issues"), Some(&request))
            .await?;
        let created = parse_object::<DashboardIssue>(operation, &answer.text)?;
        // Another run may have created one meanwhile: the lowest number wins, everywhere.
        let now = self.dashboards(bot.as_deref()).await?;
        match now.first() {
            Some(keeper) if keeper.number < created.number => {
                let url = self.edit_issue(keeper.number, json!({"body": body})).await?;
                self.close_duplicates(keeper.number, &now).await?;
                // Listings can lag behind a create: make sure this run's own issue is closed.
                if !now.iter().any(|issue| issue.number == created.number) {
                    self.close_duplicates(keeper.number, std::slice::from_ref(&created))
                        .await?;
                }
                Ok(DashboardUpdate::Updated(url))
            }
            _ => {
                self.close_duplicates(created.number, &now).await?;
                Ok(DashboardUpdate::Created(created.html_url))
            }
        }
    }
}

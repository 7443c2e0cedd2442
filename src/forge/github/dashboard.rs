//! The repository's "upkeep dashboard" issue on GitHub (DESIGN section 13): found by a hidden
//! marker in its body, created the first time, edited after.
//!
//! GitHub has no conditional create for issues, so two runs that look at the same moment can
//! both find no dashboard and both create one. upkeep does not try to lock (a lock kept in the
//! forge outlives a worker that crashes while holding it); it converges instead: the
//! dashboard is the lowest-numbered open issue that the bot's account opened with the marker,
//! and every update closes any other such issue as a duplicate of it (`state_reason:
//! duplicate`). Each run re-reads the list after creating, so after any run that finishes at
//! most one dashboard is open, and it holds the latest run's text. Only issues opened by the
//! bot's account count (when the account can be told), so nobody else's issue is taken over by
//! copying the marker into it.

use serde::Deserialize;
use serde_json::json;

use super::GitHubForge;
use super::api::{Method, encode, parse_object};
use super::json::UserJson;
use crate::forge::{DashboardUpdate, ForgeError};

/// Hidden in the dashboard issue's body; how runs find it.
pub const DASHBOARD_MARKER: &str = "<!-- upkeep:dashboard -->";
pub const DASHBOARD_TITLE: &str = "upkeep dashboard";
/// Open issues looked through for the marker when the bot's account is unknown (with it, only
/// the account's own issues are listed).
const MAX_SCANNED: usize = 1000;

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

    pub(super) async fn write_dashboard(&self, body: &str) -> Result<DashboardUpdate, ForgeError> {
        let body = format!("{DASHBOARD_MARKER}\n{body}");
        let bot = self.bot_login().await.map(str::to_owned);
        let existing = self.dashboards(bot.as_deref()).await?;
        if let Some(keeper) = existing.first() {
            let url = self.edit_issue(keeper.number, json!({"body": body})).await?;
            self.close_duplicates(keeper.number, &existing).await?;
            return Ok(DashboardUpdate::Updated(url));
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

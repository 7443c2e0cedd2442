//! The bot's pull requests on GitHub, counted for `pr_limit` and `pr_hourly_limit` (DESIGN
//! section 13). Read from the API on every check, so a worker keeps no state: whatever another
//! worker or an earlier, crashed run opened is counted the same way.
//!
//! A bot pull request is one whose head branch is under `upkeep/` in this repository (a fork's
//! `upkeep/` branch is someone else's). Open ones are counted whatever their base; "opened in
//! the last hour" counts every state (a pull request merged or closed within the hour still
//! used the hour's allowance): the repository's pulls, newest first, page after page until one
//! ends before the hour (at most ten pages of 100, so a repository where more than 1,000 pull
//! requests were opened in the last hour, by anyone, counts the bot's among the newest 1,000).

use serde::Deserialize;

use super::GitHubForge;
use crate::forge::{ForgeError, PullRequestActivity};
use crate::repo::BOT_BRANCH_PREFIX;

#[derive(Debug, Deserialize)]
struct PullSummary {
    head: super::json::HeadJson,
}

impl GitHubForge {
    fn bot_branch(&self, pull: &PullSummary) -> Option<String> {
        (pull.head.ref_name.starts_with(BOT_BRANCH_PREFIX) && self.is_this_repo(&pull.head))
            .then(|| pull.head.ref_name.clone())
    }

    pub(super) async fn activity(&self, since: jiff::Timestamp) -> Result<PullRequestActivity, ForgeError> {
        let open = self
            .api
            .list(
                "counting open bot pull requests",
                self.route("/pulls?state=open&per_page=100"),
                usize::MAX,
            )
            .await?;
        let open = open
            .into_iter()
            .filter_map(|value| serde_json::from_value::<PullSummary>(value).ok())
            .filter_map(|pull| self.bot_branch(&pull))
            .collect();
        let created_since = |value: &serde_json::Value| {
            value["created_at"]
                .as_str()
                .and_then(|created| created.parse::<jiff::Timestamp>().ok())
                .is_some_and(|created| created >= since)
        };
        // Newest first: once the last one listed is older than the hour, so is every later page.
        let recent = self
            .api
            .list_while(
                "counting bot pull requests opened in the last hour",
                self.route("/pulls?state=all&sort=created&direction=desc&per_page=100"),
                |listed| listed.last().is_some_and(created_since),
            )
            .await?;
        let opened_since = recent
            .into_iter()
            .filter(created_since)
            .filter_map(|value| serde_json::from_value::<PullSummary>(value).ok())
            .filter_map(|pull| self.bot_branch(&pull))
            .collect();
        Ok(PullRequestActivity {
            open,
            opened_since: Some(opened_since),
        })
    }
}

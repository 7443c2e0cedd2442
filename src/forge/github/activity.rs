//! The bot's pull requests on GitHub, counted for `pr_limit` and `pr_hourly_limit` (DESIGN
//! section 13). Read from the API on every check, so a worker keeps no state: whatever another
//! worker or an earlier, crashed run opened is counted the same way.
//!
//! A bot pull request is one whose head branch is under `upkeep/` in this repository (a fork's
//! `upkeep/` branch is someone else's). Open ones are counted whatever their base; "opened in
//! the last hour" counts every state (a pull request merged or closed within the hour still
//! used the hour's allowance), from the most recently created page of the repository's pulls.

use serde::Deserialize;

use super::GitHubForge;
use super::api::encode;
use crate::forge::{ForgeError, PullRequestActivity};
use crate::repo::BOT_BRANCH_PREFIX;

/// The most recent pull requests looked at for the hourly count: one page. A repository whose
/// last hour saw more pull requests than that (from anyone) counts the bot's among them.
const RECENT: usize = 100;

#[derive(Debug, Deserialize)]
struct PullSummary {
    #[serde(default)]
    created_at: Option<String>,
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
        let recent = self
            .api
            .list(
                "counting bot pull requests opened in the last hour",
                self.route(&format!(
                    "/pulls?state=all&sort=created&direction=desc&per_page={}",
                    encode(&RECENT.to_string())
                )),
                RECENT,
            )
            .await?;
        let opened_since = recent
            .into_iter()
            .filter_map(|value| serde_json::from_value::<PullSummary>(value).ok())
            .filter(|pull| {
                pull.created_at
                    .as_deref()
                    .and_then(|created| created.parse::<jiff::Timestamp>().ok())
                    .is_some_and(|created| created >= since)
            })
            .filter_map(|pull| self.bot_branch(&pull))
            .collect();
        Ok(PullRequestActivity {
            open,
            opened_since: Some(opened_since),
        })
    }
}

//! `upkeep fleet --org ORG [--topic T]`: the repositories of a GitHub organisation (or a user's
//! own), page after page.
//!
//! `GET /users/{name}` says whether the name is an organisation or a user; then
//! `GET /orgs/{org}/repos?type=all` or `GET /users/{user}/repos?type=owner` lists the
//! repositories (GitHub's minimal-repository objects, which carry `archived`, `disabled`,
//! `fork` and `topics`). Archived and disabled repositories (nobody can push to them) and forks
//! (their upstream is where the work belongs) are skipped; with topics, only repositories
//! carrying at least one of them are kept (topics compare case-insensitively, as GitHub stores
//! them lower-cased). Pagination follows the `Link` header on the API's own origin only, as
//! every listing does ([`super::api`]).

use serde::Deserialize;

use super::api::{Api, Method, encode, parse_list, parse_object};
use crate::forge::ForgeError;
use crate::settings::GitHubSettings;

/// Pages followed at most: 100 repositories each, so organisations of up to 10 000.
const MAX_PAGES: usize = 100;

#[derive(Debug, Deserialize)]
struct AccountJson {
    #[serde(rename = "type", default)]
    kind: String,
}

#[derive(Debug, Deserialize)]
struct RepositoryJson {
    full_name: String,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    disabled: bool,
    #[serde(default)]
    fork: bool,
    #[serde(default)]
    topics: Option<Vec<String>>,
}

/// What a listing found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct OrgListing {
    /// `owner/name` of every repository kept, in GitHub's order.
    pub repositories: Vec<String>,
    pub skipped_archived: usize,
    pub skipped_forks: usize,
    pub skipped_without_topic: usize,
}

/// Lists `org`'s repositories, keeping those that carry one of `topics` (all, when empty).
pub(crate) async fn list_repositories(
    settings: &GitHubSettings,
    org: &str,
    topics: &[String],
) -> Result<OrgListing, ForgeError> {
    let api = Api::new(settings, org)?;
    let account = api
        .send(
            &format!("looking up the account {org}"),
            Method::Get,
            &format!("/users/{}", encode(org)),
            None,
        )
        .await
        .map_err(|error| in_listing(org, error))?;
    let account: AccountJson = parse_object(&format!("reading the account {org}"), &account.text)?;
    let first = if account.kind.eq_ignore_ascii_case("organization") {
        format!("/orgs/{}/repos?type=all&per_page=100", encode(org))
    } else {
        format!("/users/{}/repos?type=owner&per_page=100", encode(org))
    };
    let operation = format!("listing the repositories of {org}");
    let wanted: Vec<String> = topics.iter().map(|topic| topic.trim().to_ascii_lowercase()).collect();
    let mut listing = OrgListing::default();
    let mut route = Some(first);
    let mut pages = 0;
    while let Some(current) = route.take() {
        let answer = api
            .send(&operation, Method::Get, &current, None)
            .await
            .map_err(|error| in_listing(org, error))?;
        for value in parse_list(&operation, &answer.text)? {
            let Ok(repository) = serde_json::from_value::<RepositoryJson>(value) else {
                continue;
            };
            if repository.archived || repository.disabled {
                listing.skipped_archived += 1;
            } else if repository.fork {
                listing.skipped_forks += 1;
            } else if !wanted.is_empty()
                && !repository
                    .topics
                    .iter()
                    .flatten()
                    .any(|topic| wanted.contains(&topic.to_ascii_lowercase()))
            {
                listing.skipped_without_topic += 1;
            } else if plausible_full_name(&repository.full_name) {
                listing.repositories.push(repository.full_name);
            } else {
                tracing::warn!(
                    "skipping a repository whose name is not owner/name: {:?}",
                    repository.full_name
                );
            }
        }
        pages += 1;
        if pages >= MAX_PAGES {
            if answer.next_page().is_some() {
                tracing::warn!(
                    "{org} has more than {} repositories; only the first are taken",
                    MAX_PAGES * 100
                );
            }
            break;
        }
        route = answer.next_page().map(str::to_owned);
    }
    Ok(listing)
}

/// `owner/name` of the characters GitHub allows: the name becomes part of a clone URL.
fn plausible_full_name(full_name: &str) -> bool {
    let part = |text: &str| {
        !text.is_empty()
            && text != "."
            && text != ".."
            && text.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    full_name
        .split_once('/')
        .is_some_and(|(owner, name)| part(owner) && part(name))
}

/// A 404 names the account, not a repository.
fn in_listing(org: &str, error: ForgeError) -> ForgeError {
    match error {
        ForgeError::Refused(message) if message.contains("404") => ForgeError::Refused(format!(
            "no GitHub organisation or user {org:?}, or the token cannot see it ({message})"
        )),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::plausible_full_name;

    #[test]
    fn only_owner_name_becomes_part_of_a_clone_url() {
        assert!(plausible_full_name("acme/widgets.rs"));
        for bad in [
            "acme",
            "acme/../x",
            "acme/..",
            "a/b/c",
            "acme/wid gets",
            "user@host/x",
            "/x",
        ] {
            assert!(!plausible_full_name(bad), "{bad}");
        }
    }
}

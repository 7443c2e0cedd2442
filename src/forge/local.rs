//! `--forge local`: the repository is a local path. The bot branch is pushed into that
//! repository and the pull request is recorded as the branch description
//! (`branch.<name>.description`: title, blank line, body), the convention `git request-pull`
//! and `git format-patch --cover-letter` read. A bot branch counts as open until it is merged
//! into the base branch.

use std::path::PathBuf;

use async_trait::async_trait;
use git2::{BranchType, Repository};

use super::{Forge, ForgeError, OpenPullRequest, PullRequest, PullRequestDraft, body_with_issue};
use crate::workspace::{BOT_BRANCH_PREFIX, Workspace};

/// The git config key, beside the branch description, holding the task a bot branch is for.
const TASK_KEY_CONFIG: &str = "upkeeptask";

#[derive(Debug)]
pub struct LocalForge {
    source: PathBuf,
}

impl LocalForge {
    pub fn new(source: PathBuf) -> Self {
        Self { source }
    }

    fn url(&self, branch: &str) -> String {
        format!("file://{}#{branch}", self.source.display())
    }

    fn list_open(&self, base: &str) -> Result<Vec<OpenPullRequest>, git2::Error> {
        let repo = Repository::open(&self.source)?;
        let config = repo.config()?;
        let base_tip = repo
            .find_branch(base, BranchType::Local)
            .ok()
            .and_then(|b| b.get().target());
        let mut open = Vec::new();
        for entry in repo.branches(Some(BranchType::Local))? {
            let (branch, _) = entry?;
            let Some(name) = branch
                .name()?
                .filter(|n| n.starts_with(BOT_BRANCH_PREFIX))
                .map(str::to_owned)
            else {
                continue;
            };
            let Some(tip) = branch.get().target() else { continue };
            let merged = match base_tip {
                Some(base_tip) => tip == base_tip || repo.graph_descendant_of(base_tip, tip)?,
                None => false,
            };
            if merged {
                continue;
            }
            let description = config
                .get_string(&format!("branch.{name}.description"))
                .unwrap_or_default();
            let title = description.lines().next().unwrap_or(&name).to_owned();
            open.push(OpenPullRequest {
                number: None,
                task_key: config.get_string(&format!("branch.{name}.{TASK_KEY_CONFIG}")).ok(),
                url: self.url(&name),
                branch: name,
                title,
            });
        }
        Ok(open)
    }
}

#[async_trait]
impl Forge for LocalForge {
    fn name(&self) -> &'static str {
        "local"
    }

    async fn open_pull_requests(&self, base: &str) -> Result<Vec<OpenPullRequest>, ForgeError> {
        tokio::task::block_in_place(|| self.list_open(base)).map_err(|e| {
            ForgeError::Other(format!(
                "listing bot branches in {}: {}",
                self.source.display(),
                e.message()
            ))
        })
    }

    async fn publish(&self, workspace: &Workspace, draft: &PullRequestDraft) -> Result<PullRequest, ForgeError> {
        let existed = tokio::task::block_in_place(|| -> Result<bool, ForgeError> {
            let repo = Repository::open(&self.source)
                .map_err(|e| ForgeError::Other(format!("opening {}: {}", self.source.display(), e.message())))?;
            let existed = repo.find_branch(&draft.branch, BranchType::Local).is_ok();
            transfer_branch(&repo, workspace, &draft.branch).map_err(|e| {
                ForgeError::Other(format!(
                    "pushing {} into {}: {}",
                    draft.branch,
                    self.source.display(),
                    e.message()
                ))
            })?;
            let description = format!(
                "{}\n\n{}\n",
                draft.title.trim(),
                body_with_issue(&draft.body, draft.issue).trim_end()
            );
            repo.config()
                .and_then(|mut config| {
                    config.set_str(&format!("branch.{}.description", draft.branch), &description)?;
                    let task = format!("branch.{}.{TASK_KEY_CONFIG}", draft.branch);
                    match &draft.task_key {
                        Some(key) => config.set_str(&task, key),
                        None => config.remove(&task).or(Ok(())),
                    }
                })
                .map_err(|e| ForgeError::Other(format!("recording the pull request description: {}", e.message())))?;
            Ok(existed)
        })?;
        Ok(PullRequest {
            url: self.url(&draft.branch),
            number: None,
            branch: draft.branch.clone(),
            title: draft.title.clone(),
            updated: existed,
            preview: None,
            task_key: None,
        })
    }

    async fn post_question(&self, _issue: Option<u64>, _question: &str) -> Result<Option<String>, ForgeError> {
        // A local repository has nowhere to post; the question is shown on stderr and in events.
        Ok(None)
    }
}

/// Brings the bot branch from the clone into the source repository. libgit2 cannot push into a
/// non-bare repository, so the source fetches from the clone instead: the same ref update,
/// refused when the branch is checked out there (updating it would desynchronise that work tree).
fn transfer_branch(source: &Repository, workspace: &Workspace, branch: &str) -> Result<(), git2::Error> {
    let refname = format!("refs/heads/{branch}");
    if !branch.starts_with(BOT_BRANCH_PREFIX) {
        return Err(git2::Error::from_str("only branches under upkeep/ are pushed"));
    }
    if source
        .head()
        .ok()
        .and_then(|head| head.name().ok().map(str::to_owned))
        .as_deref()
        == Some(refname.as_str())
    {
        return Err(git2::Error::from_str(
            "the branch is checked out in the repository; check out another branch first",
        ));
    }
    let url = workspace
        .root()
        .to_str()
        .ok_or_else(|| git2::Error::from_str("clone path is not UTF-8"))?;
    // Not HTTP, but registering upkeep's HTTP transport must not race a transport's creation.
    crate::git_http::install()?;
    let mut remote = source.remote_anonymous(url)?;
    remote.fetch(&[format!("+{refname}:{refname}")], None, None)
}

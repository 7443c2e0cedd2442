//! What the model is told when a cycle starts: the enabled tools, the system prompt and the
//! first message (task or task sources, the bot's open pull requests, the file tree).
//!
//! One function builds it for both `upkeep run` and `upkeep prompt`, so the prompt that
//! `upkeep prompt` prints is byte for byte the one a cycle sends. Repository files are read
//! only through the gate ([`WorkTree`]); forge text (issues, comments) is framed by the prompt
//! renderer as untrusted.

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent::file_tree::{FileTree, tree_budget};
use crate::agent::prompt::{CyclePrompt, SystemPrompt, TaskSource};
use crate::config::{Config, ConfigError, DeclaredToolConfig, RepoSettings};
use crate::conversation::{CycleConversation, memory, render};
use crate::events::DeclaredToolReport;
use crate::forge::{ContinuedPullRequest, Forge, ForgeError, OpenPullRequest, PullRequest};
use crate::instructions::AgentInstructions;
use crate::repo::WorkTree;
use crate::tools::declared_tool::DeclaredTool;
use crate::tools::registry::ExtraTool;
use crate::tools::targets::{ClosedIssue, Targets};
use crate::tools::{ToolRegistry, ToolSelection, spec::reply_schema};

/// Largest task file read (the prompt shows its first 16 KiB).
const MAX_TASKS_FILE_BYTES: u64 = 1024 * 1024;

/// Everything a cycle starts from.
pub(crate) struct Briefing {
    pub registry: ToolRegistry,
    /// The JSON schema of the reply, one branch per enabled tool.
    pub reply_schema: Value,
    pub system: String,
    pub first_message: String,
    pub open_pull_requests: Vec<OpenPullRequest>,
    /// The issues calls may name, and the one they work on when they name none.
    pub targets: Targets,
    /// The repository's agent instructions file the system prompt carries (AGENTS.md or the
    /// like); the reviewer reads it too.
    pub agent_instructions: Option<AgentInstructions>,
    /// The open pull request the cycle continues, when it does.
    pub continued: Option<ContinuedPullRequest>,
    /// The conflicting pull request whose change the cycle makes again on the base.
    pub redo: Option<Box<crate::conversation::mergeable::Redo>>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum BriefingError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Forge(#[from] ForgeError),
    /// The interrupt came while the briefing was read from the work tree.
    #[error(transparent)]
    Stopped(#[from] crate::repo::StopReason),
}

/// Whether the operator exposes a declared tool: by name (`--allow-tool`), or all of them
/// (`--allow-dangerous-tools`).
fn exposed(config: &Config, name: &str) -> bool {
    config.dangerous_tools || config.allow_tools.iter().any(|allowed| allowed == name)
}

/// The declared command tools the model is offered, with the program each runs and where it
/// was declared, for `run_started` and `cycle_started`.
pub(crate) fn exposed_declared_tools(config: &Config, declarations: &[DeclaredToolConfig]) -> Vec<DeclaredToolReport> {
    declarations
        .iter()
        .filter(|declaration| exposed(config, &declaration.name))
        .map(|declaration| DeclaredToolReport {
            name: declaration.name.clone(),
            program: declaration.cmd.clone(),
            declared_in: declaration.declared_in.clone(),
        })
        .collect()
}

/// The declared command tools, each marked allowed or not. Declarations are checked here,
/// before the first model call; `--allow-tool` naming no declared tool is a usage error too.
fn declared_tools(config: &Config, settings: &RepoSettings) -> Result<Vec<ExtraTool>, ConfigError> {
    let mut tools: Vec<ExtraTool> = Vec::new();
    for declaration in &settings.declared_tools {
        let tool = DeclaredTool::new(declaration, &declaration.declared_in)?;
        // The registry offers a withheld declared tool anyway under --allow-dangerous-tools.
        let allowed = config.allow_tools.iter().any(|name| name == tool.name());
        tools.push((Box::new(tool), allowed));
    }
    for name in &config.allow_tools {
        if !settings.declared_tools.iter().any(|declared| &declared.name == name) {
            return Err(ConfigError::key(
                "--allow-tool",
                format!("no declared tool is named `{name}` (declare it under [[tools]] in --config or .upkeep.toml)"),
            ));
        }
    }
    Ok(tools)
}

/// Builds the cycle's briefing. `opened_this_run` are the pull requests earlier cycles of this
/// run opened: they count as open even where the forge keeps none (`--dry-run`,
/// `--forge none`), so continuous mode does not redo them. `notice` hears what a person should
/// know (a task file that could not be read).
#[expect(
    clippy::too_many_arguments,
    reason = "each is one input of the prompt; `run` and `prompt` pass the same ones"
)]
pub(crate) async fn brief(
    config: &Config,
    settings: &RepoSettings,
    files: &WorkTree,
    base: &str,
    forge: &dyn Forge,
    opened_this_run: &[PullRequest],
    conversation: &CycleConversation,
    notice: &(dyn Fn(&str) + Sync),
    cancel: &CancellationToken,
) -> Result<Briefing, BriefingError> {
    let mut registry = ToolRegistry::new(
        &ToolSelection {
            dangerous: config.dangerous_tools,
            // Review replies are an argument only where there are review threads to answer.
            review: conversation
                .continued
                .as_ref()
                .is_some_and(|continued| continued.review),
        },
        declared_tools(config, settings)?,
    );
    crate::subagents::equip_main_agent(&mut registry, &config.agents);
    let specs = registry.specs();
    let reply_schema = reply_schema(&specs);
    let agent_instructions = crate::instructions::read(files, notice);
    let system = SystemPrompt {
        tools: &specs,
        protected_paths: &settings.protected_paths,
        max_turns: settings.max_turns,
        instructions: settings.instructions.as_deref(),
        agent_instructions: agent_instructions.as_ref(),
    }
    .render();

    let mut open_pull_requests = forge.open_pull_requests(base).await?;
    for pull_request in opened_this_run {
        if !open_pull_requests.iter().any(|open| open.branch == pull_request.branch) {
            open_pull_requests.push(OpenPullRequest {
                number: pull_request.number,
                branch: pull_request.branch.clone(),
                title: pull_request.title.clone(),
                url: pull_request.url.clone(),
                task_key: pull_request.task_key.clone(),
                head_sha: None,
            });
        }
    }
    // A follow-up or an explicit issue is the whole task; only a backlog cycle lists issues.
    let fix = conversation
        .continued
        .as_ref()
        .and_then(|continued| continued.fix.as_deref());
    let backlog = config.task.is_none()
        && conversation.feedback.is_none()
        && conversation.issue.is_none()
        && fix.is_none()
        && conversation.redo.is_none();
    let issues = if backlog {
        forge.task_issues(&settings.label).await?
    } else {
        Vec::new()
    };
    // Issues that already have an open bot pull request are not offered again.
    let issues: Vec<_> = issues
        .into_iter()
        .filter(|issue| {
            let prefix = format!("{}{}-", crate::repo::BOT_BRANCH_PREFIX, issue.number);
            !open_pull_requests.iter().any(|pr| pr.branch.starts_with(&prefix))
        })
        .collect();
    let (issues, skipped) = memory::skip_closed(issues, &conversation.closed);
    let tasks_file = match files.read_text(&settings.tasks_file, MAX_TASKS_FILE_BYTES) {
        Ok(text) => text,
        Err(error) => {
            notice(&format!("upkeep: the task file is not read: {error}"));
            None
        }
    };
    let continued_issue = conversation
        .continued
        .as_ref()
        .map(|continued| continued.branch.as_str())
        .or(conversation.redo.as_ref().map(|redo| redo.pull.branch.as_str()))
        .and_then(crate::forge::discussion::issue_of_branch);
    let only_issue = match issues.as_slice() {
        [only] if backlog => Some(only.number),
        _ => None,
    };
    // The window before any server is asked (the operator's, the table's or the guess): a
    // small one gets a smaller tree.
    let model = config.provider.model.as_deref().unwrap_or_default();
    let window = crate::llm::window::window_for(&config.provider, model).tokens;
    let tree = FileTree::scan_until(files, tree_budget(window), cancel).await?;
    let rendered = match (&conversation.feedback, &conversation.issue, &config.task) {
        (Some(feedback), _, _) => Some(render::follow_up_task(feedback)),
        (None, None, None) if fix.is_some() => conversation
            .continued
            .as_ref()
            .zip(fix)
            .map(|(continued, fix)| render::fix_task(continued, fix)),
        (None, Some(issue), None) => Some(render::issue_task(issue, conversation.continued.as_ref())),
        (None, None, None) if conversation.redo.is_some() => conversation
            .redo
            .as_deref()
            .map(crate::conversation::mergeable::redo_task),
        _ => None,
    };
    let task = match (&rendered, &config.task) {
        (Some(rendered), _) => TaskSource::Rendered(rendered),
        (None, Some(task)) => TaskSource::Given(task),
        (None, None) => TaskSource::Backlog {
            tasks_file: tasks_file
                .as_deref()
                .map(|content| (settings.tasks_file.as_str(), content)),
            issues: &issues,
        },
    };
    let closed_tasks = if backlog {
        memory::closed_task_branches(&conversation.closed)
    } else {
        Vec::new()
    };
    // What the model may aim at is settled here, from what the run was given and the prompt
    // offers, before the model says anything.
    let targets = if backlog && config.issue.is_none() && conversation.continued.is_none() {
        Targets::backlog(
            issues.iter().map(|issue| issue.number).collect(),
            only_issue,
            skipped
                .iter()
                .map(|skipped| ClosedIssue {
                    issue: skipped.issue,
                    pull_request: skipped.pull_request,
                })
                .collect(),
            closed_tasks.iter().map(|closed| closed.branch.clone()).collect(),
        )
    } else {
        Targets::run_for(config.issue.or(continued_issue))
    };
    let mut sections = Vec::new();
    if let Some(question) = &conversation.answered {
        sections.push(render::answered(question));
    }
    let memory = render::memory(&skipped, &closed_tasks);
    if !memory.is_empty() {
        sections.push(memory);
    }
    let first_message = CyclePrompt {
        repo: &config.source.prompt_name(),
        base,
        task,
        open_pull_requests: &open_pull_requests,
        file_tree: &tree,
        conversation: &sections.join("\n\n"),
        feedback_waiting: &conversation.feedback_waiting,
    }
    .render();
    Ok(Briefing {
        registry,
        reply_schema,
        system,
        first_message,
        open_pull_requests,
        targets,
        agent_instructions,
        continued: conversation.continued.clone(),
        redo: conversation.redo.clone(),
    })
}

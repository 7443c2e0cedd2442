//! The run's events: one type per thing that happens, written as JSON Lines.
//!
//! With `--json` the events are the only thing on stdout; with `--trace FILE` they are
//! appended to a file; a trace fed back through `--replay` reproduces the run, because every
//! model reply is a `model_response` event with its `content`. People read a rendering of the
//! same events on stderr. Every line passes through the [`Redactor`] before it is written, so a
//! secret cannot leave the process through an event.

use std::io::Write;
use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;

use crate::llm::Usage;
use crate::secrets::Redactor;

mod human;

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        repo: String,
        mode: String,
        provider: String,
        model: String,
        dangerous_tools: bool,
        /// What commands run in (`null` when no command tool is enabled): see
        /// [`crate::exec::SandboxReport`] and `docs/commands.md`.
        sandbox: Option<crate::exec::SandboxReport>,
        /// The operator's declared command tools the model is offered.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        declared_tools: Vec<DeclaredToolReport>,
        /// The repository's agent instructions file the system prompt carries (`AGENTS.md`...),
        /// as read for the first cycle; empty when there is none.
        instructions_files: Vec<String>,
        /// The branch pull requests target, as the first cycle's clone found it (`null` when the
        /// run ended before cloning: a pending question, a schedule).
        base: Option<String>,
        /// Why that branch.
        base_from: Option<BaseOrigin>,
    },
    CycleStarted {
        base: String,
        /// Every declared command tool offered in this cycle (the operator's and the
        /// repository's `.upkeep.toml`'s), with the program it runs.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        declared_tools: Vec<DeclaredToolReport>,
    },
    /// Before each model call: the request's estimated size, the window it was fitted into,
    /// and how many older tool results are masked in it.
    Context {
        estimated_tokens: u64,
        window: u64,
        /// Where the window came from: `operator`, `server`, `built_in` or `guess`.
        window_from: crate::llm::window::WindowSource,
        masked_results: usize,
    },
    ModelResponse {
        content: String,
        usage: CallUsage,
        cost_usd: f64,
        /// What the parser repaired to read the reply (names in docs/events.md); absent when
        /// nothing was.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        repairs: Vec<&'static str>,
    },
    /// A reply that could not be used, and why: the model gets the reason in its next message,
    /// and the history keeps a fixed placeholder instead of the reply.
    ReplyRejected {
        reason: String,
    },
    Plan {
        plan: String,
    },
    ToolCall {
        tool: String,
        arguments: Value,
    },
    ToolResult {
        tool: String,
        ok: bool,
        output: String,
    },
    ToolRejected {
        tool: String,
        reason: String,
    },
    PullRequest {
        url: String,
        number: Option<u64>,
        branch: String,
        title: String,
        /// An open pull request for the branch was updated instead of a new one opened.
        updated: bool,
    },
    Question {
        question: String,
        issue: Option<u64>,
    },
    /// A cycle ended without `finish` while the clone held changes no pull request carries.
    UnsavedChanges {
        files: Vec<String>,
        diff: String,
    },
    /// The reviewer's verdict on a change before it is pushed (round 1, 2, ...). `opened_anyway`:
    /// the last round failed and the pull request opens with the findings in its body.
    Review {
        verdict: String,
        findings: Vec<String>,
        round: u32,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        opened_anyway: bool,
    },
    /// An operator check (a declared command tool) run before a push.
    Check {
        tool: String,
        ok: bool,
    },
    CycleFinished {
        outcome: crate::outcome::Outcome,
        /// Review findings (and failed checks) a pull request of the cycle opened with, after
        /// `--max-reviews` rounds did not resolve them.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        unresolved_findings: Vec<String>,
    },
    RunFinished {
        outcome: crate::outcome::Outcome,
        exit_code: u8,
        cycles: u32,
        usage: Usage,
        cost_usd: f64,
        /// What went wrong, when the run failed (redacted like every event).
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A fleet limit held the cycle back before any model call (DESIGN section 13): `limit` is
    /// `pr_limit`, `pr_hourly_limit` or `outside_schedule`.
    LimitReached {
        limit: String,
        message: String,
    },
    /// The repository's dashboard issue after the run: `created` or `updated`.
    Dashboard {
        url: String,
        action: String,
    },
    /// The checks on a bot pull request's head commit (DESIGN section 14): `state` is
    /// `passing`, `pending`, `failing` or `none`; `failing` names each failing check and its
    /// conclusion (what the checks printed stays out of events).
    Checks {
        pr: u64,
        sha: String,
        state: &'static str,
        failing: Vec<crate::forge::checks::CheckSummary>,
    },
    /// A fix cycle starts on a bot pull request whose checks fail: attempt `attempt` of `max`.
    FixAttempt {
        pr: u64,
        attempt: u32,
        max: u32,
    },
    /// A bot pull request that no longer merged into its base was rebased onto it and pushed
    /// with a lease (`pr` is `null` on the local forge, which numbers none).
    Rebased {
        pr: Option<u64>,
        branch: String,
        from: String,
        to: String,
    },
    /// A cycle starts that makes a conflicting bot pull request's change again on the base's
    /// tip, replacing head commit `from`.
    Redo {
        pr: Option<u64>,
        branch: String,
        from: String,
    },
    /// `upkeep fleet` is done: every repository's outcome, in the fleet's order.
    FleetFinished {
        repos: usize,
        outcomes: Vec<crate::repo_outcome::RepoOutcome>,
        usage: Usage,
        cost_usd: f64,
        exit_code: u8,
    },
}

/// Why pull requests target the base they do (`run_started.base_from`), in the order the
/// first cycle's clone chooses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BaseOrigin {
    /// `--base` or `UPKEEP_BASE`.
    Flag,
    /// `base` in the operator's `--config`.
    OperatorConfig,
    /// `base` in the repository's `.upkeep.toml`.
    RepositoryConfig,
    /// A review follow-up works on its pull request's base.
    PullRequest,
    /// A local repository's checked-out branch.
    CheckedOut,
    /// The remote's default branch.
    RemoteDefault,
}

impl BaseOrigin {
    /// The reason in words, for the line people read.
    pub fn describe(self) -> &'static str {
        match self {
            BaseOrigin::Flag => "--base",
            BaseOrigin::OperatorConfig => "base in --config",
            BaseOrigin::RepositoryConfig => "base in the repository's .upkeep.toml",
            BaseOrigin::PullRequest => "the base of the pull request being followed up",
            BaseOrigin::CheckedOut => "the branch checked out in the repository; --base picks another",
            BaseOrigin::RemoteDefault => "the remote's default branch; --base picks another",
        }
    }
}

/// One call's usage in its `model_response` event: the counts, and `"estimated": true` when the
/// provider left them out and upkeep estimated them (see `agent::usage::settle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CallUsage {
    #[serde(flatten)]
    pub usage: Usage,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

/// A declared command tool the model is offered: what it runs, and who declared it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeclaredToolReport {
    pub name: String,
    pub program: String,
    /// `--config <path>` or `.upkeep.toml`.
    pub declared_in: String,
}

/// Where in the run an event happened.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scope {
    pub cycle: Option<u32>,
    pub turn: Option<u32>,
}

#[derive(Serialize)]
struct Envelope<'a> {
    #[serde(flatten)]
    event: &'a Event,
    run_id: &'a str,
    ts: String,
    /// The repository, in runs that `upkeep fleet` started.
    #[serde(skip_serializing_if = "Option::is_none")]
    repo: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cycle: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    turn: Option<u32>,
    /// The agent path (`root`, `root>explorer`) of events an agent emits.
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'a str>,
}

/// How much people see on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    /// Progress lines: plans, tool calls, results in one line each.
    Normal,
    /// Nothing but errors, questions and the final summary (tests, scripts).
    Quiet,
}

pub struct EventSink {
    run_id: String,
    redactor: Redactor,
    json_stdout: bool,
    trace: Option<Mutex<std::fs::File>>,
    verbosity: Verbosity,
    /// Set for a repository's run inside `upkeep fleet` (see [`EventSink::for_repo`]).
    repo: Option<String>,
}

impl EventSink {
    pub fn new(redactor: Redactor, json_stdout: bool, trace: Option<std::fs::File>, verbosity: Verbosity) -> Self {
        Self {
            run_id: uuid::Uuid::new_v4().to_string(),
            redactor,
            json_stdout,
            trace: trace.map(Mutex::new),
            verbosity,
            repo: None,
        }
    }

    /// Tags every event with `repo` and starts every line for people with `[repo]`, for runs
    /// that share stdout, stderr and the trace file with others (`upkeep fleet`).
    pub fn for_repo(mut self, repo: String) -> Self {
        self.repo = Some(repo);
        self
    }

    /// The run's id, as every event carries it.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// A spinner while waiting for the model, where people can see one (see [`crate::progress`]).
    pub fn waiting(&self, turn: u32, usage: crate::llm::Usage, cost_usd: f64) -> Option<crate::progress::Waiting> {
        // Spinners of runs that share the terminal would overwrite each other.
        let shared_terminal = self.repo.is_some();
        (!shared_terminal && crate::progress::spinner_allowed(self.verbosity == Verbosity::Quiet)).then(|| {
            crate::progress::Waiting::start(format!(
                "turn {turn}: waiting for the model; {} tokens, ${cost_usd:.4} so far",
                usage.total()
            ))
        })
    }

    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    pub fn emit(&self, scope: Scope, event: Event) {
        self.write(scope, None, event);
    }

    /// An event of the agent `agent` (its path, `root>explorer`): the event carries it, and
    /// people see a sub-agent's lines indented under its name.
    pub fn emit_as(&self, scope: Scope, agent: &str, event: Event) {
        self.write(scope, Some(agent), event);
    }

    fn write(&self, scope: Scope, agent: Option<&str>, event: Event) {
        let envelope = Envelope {
            event: &event,
            run_id: &self.run_id,
            ts: jiff::Timestamp::now().to_string(),
            repo: self.repo.as_deref(),
            cycle: scope.cycle,
            turn: scope.turn,
            agent,
        };
        let line = match serde_json::to_string(&envelope) {
            Ok(line) => self.redactor.redact(&line),
            Err(error) => {
                tracing::error!("could not serialise an event: {error}");
                return;
            }
        };
        if self.json_stdout {
            let mut stdout = std::io::stdout().lock();
            // A closed stdout (`upkeep --json | head`) must not end the run.
            let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
        }
        if let Some(trace) = &self.trace {
            if let Ok(mut file) = trace.lock() {
                // One write per line: runs of a fleet append to the same file, and an append of
                // a whole line is never interleaved with another.
                if let Err(error) = file.write_all(format!("{line}\n").as_bytes()) {
                    tracing::warn!("could not write to the trace file: {error}");
                }
            }
        }
        // Quiet still shows what a person must see: a question waiting for them, and the end.
        let shown = match self.verbosity {
            Verbosity::Normal => true,
            Verbosity::Quiet => matches!(
                event,
                Event::Question { .. }
                    | Event::RunFinished { .. }
                    | Event::FleetFinished { .. }
                    | Event::LimitReached { .. }
            ),
        };
        if shown {
            if let Some(text) = human::render(scope, &event) {
                self.write_stderr(&human::under_agent(agent, &text));
            }
        }
    }

    /// A progress line for people on stderr (not with `--quiet`).
    pub fn say(&self, text: &str) {
        if self.verbosity == Verbosity::Normal {
            self.write_stderr(text);
        }
    }

    /// A line people must see even with `--quiet`: an error, a question, work that was not
    /// saved, why the run stopped.
    pub fn alert(&self, text: &str) {
        self.write_stderr(text);
    }

    /// Writes a line to stderr, redacted like everything else, with control characters
    /// escaped: it carries model text, file names, command output and issue titles, none of
    /// which may move the cursor, recolour the terminal or hide a line. (JSON output is exact.)
    fn write_stderr(&self, text: &str) {
        let text = crate::text::escape_terminal(&self.redactor.redact(text));
        let text = match &self.repo {
            Some(repo) => {
                let prefix = format!("[{}] ", crate::text::escape_terminal(repo));
                text.lines().map(|line| format!("{prefix}{line}\n")).collect::<String>()
            }
            None => format!("{text}\n"),
        };
        // One write, so lines of runs that share stderr do not interleave mid-line.
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}

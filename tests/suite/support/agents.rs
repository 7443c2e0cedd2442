//! Helpers for runs with sub-agents: scripted replies that name their agent, the calls that
//! delegate and complete, the operator's config file, and a run's events by agent.

use serde_json::{Value, json};

use super::{RunOutput, Script, TestRepo, Upkeep, reply, run_replay};

/// A scripted reply that names the agent it is for, as a trace records it.
pub fn line(agent: &str, content: String) -> Value {
    json!({"type": "model_response", "agent": agent, "content": content})
}

/// A reply that delegates `task` to `agent`.
pub fn delegate(agent: &str, task: &str) -> String {
    reply(
        "ask a sub-agent",
        &[("delegate", json!({"agent": agent, "task": task}))],
    )
}

/// A sub-agent's reply that completes its task with `answer`.
pub fn complete(answer: Value) -> String {
    reply("answer", &[("complete_task", json!({"answer": answer}))])
}

/// An operator config file (`--config`) in its own directory.
pub struct OperatorConfig {
    dir: tempfile::TempDir,
}

impl OperatorConfig {
    pub fn new(text: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("upkeep.toml"), text).expect("write config");
        Self { dir }
    }

    pub fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("upkeep.toml")
    }

    /// The path as a command-line argument.
    pub fn arg(&self) -> String {
        self.path().to_str().expect("utf-8 path").to_owned()
    }
}

/// `upkeep run --task t` on `repo`, replaying `lines`.
pub fn run(repo: &TestRepo, lines: Vec<Value>, extra: &[&str]) -> RunOutput {
    let script = Script::from_lines(lines.into_iter());
    run_replay(Upkeep::new(), repo, &script, &[&["--task", "t"], extra].concat())
}

/// The same with `--config`.
pub fn run_with_config(repo: &TestRepo, config: &OperatorConfig, lines: Vec<Value>, extra: &[&str]) -> RunOutput {
    let path = config.arg();
    run(repo, lines, &[&["--config", path.as_str()], extra].concat())
}

/// The events of one type emitted by one agent.
pub fn of_agent(out: &RunOutput, kind: &str, agent: &str) -> Vec<Value> {
    out.events_of(kind)
        .into_iter()
        .filter(|e| e["agent"] == agent)
        .collect()
}

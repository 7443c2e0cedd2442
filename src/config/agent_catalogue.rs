//! Which agents exist: the built-in `explorer` and `reviewer`, and the operator's `[[agents]]`.
//!
//! An `[[agents]]` entry is checked when the run starts (exit 2 on a problem): a valid, unique
//! name; a description; tools that a sub-agent may hold (never the tools that end a cycle or
//! publish, which belong to the main agent); at least one turn; and an `output_schema` that is a
//! JSON schema of an object, self-contained (no `$ref`) because it is embedded in the reply
//! schema sent to the provider. Whether each tool is one the run allows is checked once the
//! run's tools are known (see [`crate::subagents::team`]). An entry named like a built-in replaces it (the
//! reviewer keeps its verdict shape, which the gate before a push reads).

use serde_json::Value;

use super::answer_schema::{AnswerSchema, verdict_schema};
use crate::config::ConfigError;
use crate::config::file::AgentConfig;

/// The built-in read-only agent that answers questions about the code.
pub(crate) const EXPLORER: &str = "explorer";
/// The built-in agent that approves a change before it is pushed.
pub(crate) const REVIEWER: &str = "reviewer";
/// Turns an `[[agents]]` entry gets when it names none.
pub(crate) const DEFAULT_AGENT_TURNS: u32 = 10;
/// Tools that only the main agent holds: they end the cycle, publish, or end a sub-agent.
const MAIN_AGENT_ONLY: &[&str] = &["finish", "ask_question", "create_pull_request", "complete_task"];
/// What the reading agents hold.
const READ_TOOLS: &[&str] = &["read_file", "list_files", "search_files"];

/// What a sub-agent's answer must be.
#[derive(Debug, Clone, PartialEq)]
pub enum AnswerShape {
    /// Plain text.
    Text,
    /// A JSON object that satisfies this schema.
    Schema(Value),
}

/// One agent, ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDefinition {
    pub name: String,
    pub description: String,
    pub instructions: String,
    pub tools: Vec<String>,
    pub max_turns: u32,
    pub model: Option<String>,
    pub answer: AnswerShape,
}

/// The agents of a run, built-ins first, in the order the `delegate` tool lists them.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalogue {
    agents: Vec<AgentDefinition>,
}

fn read_tools() -> Vec<String> {
    READ_TOOLS.iter().map(|tool| (*tool).to_owned()).collect()
}

fn explorer() -> AgentDefinition {
    AgentDefinition {
        name: EXPLORER.into(),
        description: "answers a question about the code (where something is, how it works) by reading and searching files; use it when that takes many files".into(),
        instructions: "Answer the caller's question about the repository. Read, list and search as much as you need, then answer briefly and precisely: name the files and line numbers, quote only the lines that matter, and say what you could not find. You cannot change files.".into(),
        tools: read_tools(),
        max_turns: 10,
        model: None,
        answer: AnswerShape::Text,
    }
}

fn reviewer() -> AgentDefinition {
    AgentDefinition {
        name: REVIEWER.into(),
        description: "reviews a change against its task and the repository's instructions; create_pull_request already asks it before every push".into(),
        instructions: "You review a change before it is proposed as a pull request. Check that it does what the task asks and nothing unrelated, that it is correct (read the surrounding code where the diff alone does not tell), that it follows the repository's instructions, and that it adds no secrets, debugging leftovers or broken references. Fail the change only for problems a maintainer would block the pull request for; style preferences are not failures. Each finding names the file (and line where it can), what is wrong and what to do. Answer with verdict \"pass\" and no findings when the change is fine.".into(),
        tools: read_tools(),
        max_turns: 6,
        model: None,
        answer: AnswerShape::Schema(verdict_schema()),
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name != "root"
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Whether a schema refers to anything by `$ref` (an embedded schema's refs would dangle).
fn has_ref(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map.contains_key("$ref") || map.values().any(has_ref),
        Value::Array(items) => items.iter().any(has_ref),
        _ => false,
    }
}

impl Catalogue {
    /// The built-in agents alone.
    pub fn builtin() -> Self {
        Self {
            agents: vec![explorer(), reviewer()],
        }
    }

    /// The built-ins plus the operator's `[[agents]]`, checked.
    pub fn new(configs: &[AgentConfig]) -> Result<Self, ConfigError> {
        let mut catalogue = Self::builtin();
        let mut seen: Vec<&str> = Vec::new();
        for config in configs {
            let definition = Self::check(config)?;
            if seen.contains(&config.name.as_str()) {
                return Err(ConfigError(format!(
                    "--config: [[agents]] `{}` is declared twice",
                    config.name
                )));
            }
            seen.push(&config.name);
            match catalogue.agents.iter_mut().find(|agent| agent.name == definition.name) {
                Some(builtin) => *builtin = definition,
                None => catalogue.agents.push(definition),
            }
        }
        Ok(catalogue)
    }

    fn check(config: &AgentConfig) -> Result<AgentDefinition, ConfigError> {
        let fail = |problem: String| ConfigError(format!("--config: [[agents]] `{}`: {problem}", config.name));
        if !valid_name(&config.name) {
            return Err(fail(
                "`name` must be 1-64 letters, digits, `_` or `-`, and not `root`".into(),
            ));
        }
        if config.description.trim().is_empty() {
            return Err(fail("`description` is empty: the delegate tool lists it".into()));
        }
        if let Some(tool) = config
            .tools
            .iter()
            .find(|tool| MAIN_AGENT_ONLY.contains(&tool.as_str()))
        {
            return Err(fail(format!(
                "`tools` may not include `{tool}`: only the main agent ends the cycle or opens pull requests, and every sub-agent ends with complete_task"
            )));
        }
        if config.max_turns == Some(0) {
            return Err(fail("`max_turns` must be at least 1".into()));
        }
        let model = match config.model.as_deref().map(str::trim) {
            Some("") => return Err(fail("`model` is empty".into())),
            other => other.map(str::to_owned),
        };
        let answer = match (&config.output_schema, config.name.as_str()) {
            (Some(_), REVIEWER) => {
                return Err(fail(
                    "the reviewer's answer is always the verdict {\"verdict\", \"findings\"}; leave `output_schema` out".into(),
                ));
            }
            (None, REVIEWER) => AnswerShape::Schema(verdict_schema()),
            (None, _) => AnswerShape::Text,
            (Some(schema), _) => {
                if schema.get("type").and_then(Value::as_str) != Some("object") {
                    return Err(fail(
                        "`output_schema` must describe a JSON object (`type = \"object\"`)".into(),
                    ));
                }
                if has_ref(schema) {
                    return Err(fail(
                        "`output_schema` must be self-contained: write it without `$ref`".into(),
                    ));
                }
                AnswerSchema::compile(schema)
                    .map_err(|error| fail(format!("`output_schema` is not a valid JSON schema: {error}")))?;
                AnswerShape::Schema(schema.clone())
            }
        };
        Ok(AgentDefinition {
            name: config.name.clone(),
            description: config.description.trim().to_owned(),
            instructions: config.instructions.trim().to_owned(),
            tools: config.tools.clone(),
            max_turns: config.max_turns.unwrap_or(DEFAULT_AGENT_TURNS),
            model,
            answer,
        })
    }

    pub fn get(&self, name: &str) -> Option<&AgentDefinition> {
        self.agents.iter().find(|agent| agent.name == name)
    }

    pub fn agents(&self) -> &[AgentDefinition] {
        &self.agents
    }

    /// The models the agents name, for building their providers.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        self.agents.iter().filter_map(|agent| agent.model.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(toml_text: &str) -> Result<Catalogue, ConfigError> {
        let file = crate::config::file::FileConfig::parse(toml_text, "ops.toml").expect("parses");
        Catalogue::new(&file.agents)
    }

    #[test]
    fn an_operator_agent_is_checked_and_listed_after_the_builtins() {
        let catalogue = agent(
            r#"
[[agents]]
name = "summariser"
description = "Summarises a folder"
instructions = "Summarise."
tools = ["read_file", "list_files"]
max_turns = 3
model = "gpt-4.1-mini"
[agents.output_schema]
type = "object"
required = ["summary"]
properties = { summary = { type = "string" } }
"#,
        )
        .expect("valid");
        let names: Vec<&str> = catalogue.agents().iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["explorer", "reviewer", "summariser"]);
        let summariser = catalogue.get("summariser").expect("declared");
        assert_eq!(summariser.max_turns, 3);
        assert!(matches!(&summariser.answer, AnswerShape::Schema(schema) if schema["required"][0] == "summary"));
        assert_eq!(catalogue.models().collect::<Vec<_>>(), ["gpt-4.1-mini"]);
    }

    #[test]
    fn broken_entries_are_refused_with_the_key_named() {
        let base = "name = \"a\"\ndescription = \"d\"\ninstructions = \"i\"\n";
        for (extra, expected) in [
            ("tools = [\"finish\"]", "`finish`"),
            ("tools = [\"create_pull_request\"]", "`create_pull_request`"),
            ("max_turns = 0", "`max_turns`"),
            ("[agents.output_schema]\ntype = \"string\"", "`output_schema`"),
            (
                "[agents.output_schema]\ntype = \"object\"\n\"$ref\" = \"#/x\"",
                "`$ref`",
            ),
            (
                "[agents.output_schema]\ntype = \"object\"\nrequired = 5",
                "not a valid JSON schema",
            ),
        ] {
            let error = agent(&format!("[[agents]]\n{base}{extra}\n"))
                .expect_err(extra)
                .to_string();
            assert!(error.contains(expected), "{extra}: {error}");
        }
        let error = agent("[[agents]]\nname = \"root\"\ndescription = \"d\"\ninstructions = \"i\"\n")
            .expect_err("root is the main agent")
            .to_string();
        assert!(error.contains("`name`"), "{error}");
        let twice = format!("[[agents]]\n{base}\n[[agents]]\n{base}\n");
        assert!(agent(&twice).expect_err("twice").to_string().contains("twice"));
        let error = agent("[[agents]]\nname = \"reviewer\"\ndescription = \"d\"\ninstructions = \"i\"\n[agents.output_schema]\ntype = \"object\"\n")
            .expect_err("the verdict shape is fixed")
            .to_string();
        assert!(error.contains("verdict"), "{error}");
    }

    #[test]
    fn an_entry_named_like_a_builtin_replaces_it_and_the_reviewer_keeps_its_verdict() {
        let catalogue = agent(
            "[[agents]]\nname = \"reviewer\"\ndescription = \"Strict review\"\ninstructions = \"Be strict.\"\ntools = [\"read_file\"]\nmodel = \"small\"\n",
        )
        .expect("valid");
        assert_eq!(catalogue.agents().len(), 2);
        let reviewer = catalogue.get(REVIEWER).expect("present");
        assert_eq!(reviewer.instructions, "Be strict.");
        assert_eq!(reviewer.answer, AnswerShape::Schema(verdict_schema()));
    }
}

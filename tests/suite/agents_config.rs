//! Where sub-agents and checks may be declared: only in the operator's `--config` (a repository
//! that sets them is refused before any work), with tools the run has, as docs/agents.md shows.

use serde_json::Value;

use super::support::agents::{OperatorConfig, line, run, run_with_config};
use super::support::{Script, TestRepo, Upkeep, finish, run_replay};

#[test]
fn agents_and_checks_in_the_repositorys_file_are_a_usage_error() {
    for (text, key) in [
        (
            "[[agents]]\nname = \"x\"\ndescription = \"d\"\ninstructions = \"i\"\ntools = [\"write_file\"]\n",
            "`agents`",
        ),
        ("checks = [\"cargo_test\"]\n", "`checks`"),
    ] {
        let repo = TestRepo::with_files(&[("README.md", "x\n"), (".upkeep.toml", text)]);
        let out = run(&repo, vec![line("root", finish("no_tasks"))], &[]);
        out.assert_code(2);
        assert!(
            out.stderr.contains(key) && out.stderr.contains("operator-only"),
            "{key}: {}",
            out.stderr
        );
        assert!(
            out.events_of("model_response").is_empty(),
            "refused before any model call"
        );
    }
}

#[test]
fn an_agent_naming_a_tool_the_run_does_not_have_is_a_usage_error() {
    let config = OperatorConfig::new(
        "[[agents]]\nname = \"x\"\ndescription = \"d\"\ninstructions = \"i\"\ntools = [\"no_such_tool\"]\n",
    );
    let out = run_with_config(&TestRepo::new(), &config, vec![line("root", finish("no_tasks"))], &[]);
    out.assert_code(2);
    assert!(out.stderr.contains("`no_such_tool`"), "{}", out.stderr);
}

#[test]
fn an_agent_whose_tool_this_run_withholds_is_warned_about_once() {
    let config = OperatorConfig::new(
        "[[agents]]\nname = \"tester\"\ndescription = \"Runs the tests\"\ninstructions = \"i\"\ntools = [\"read_file\", \"run_shell_command\"]\n",
    );
    let script = Script::from_lines([line("root", finish("completed")), line("root", finish("no_tasks"))].into_iter());
    let out = run_replay(
        Upkeep::new(),
        &TestRepo::new(),
        &script,
        &["--continuous", "--config", &config.arg()],
    );
    out.assert_code(0);
    assert_eq!(out.events_of("run_finished")[0]["cycles"], 2, "two cycles, one warning");
    let warning = "agent `tester` runs without `run_shell_command`, which this run withholds";
    assert_eq!(out.stderr.matches(warning).count(), 1, "{}", out.stderr);
}

/// The configuration docs/agents.md shows is what upkeep accepts, and `upkeep tools --config`
/// (which the page tells readers to run) lists the declared agent with `delegate`.
#[test]
fn the_configuration_on_the_agents_page_is_accepted() {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/agents.md")).expect("the page");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for text in page.lines() {
        match (&mut current, text) {
            (None, "```toml") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), text) => {
                block.push_str(text);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    assert_eq!(blocks.len(), 2, "the agent and the checks examples");
    // Top-level keys first: `checks` then the tables.
    let config = OperatorConfig::new(&format!("{}\n{}", blocks[1], blocks[0]));
    let out = Upkeep::new()
        .args(["tools", "--json", "--config"])
        .args([config.path()])
        .run();
    out.assert_code(0);
    let listing: Value = serde_json::from_str(&out.stdout).expect("JSON");
    let delegate = listing["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|tool| tool["name"] == "delegate")
        .expect("delegate is offered");
    let description = delegate["description"].as_str().expect("description");
    assert!(description.contains("- `mapper`: Lists the modules"), "{description}");
    // A run resolves the checks and the agents' tools before any model call.
    let out = run_with_config(&TestRepo::new(), &config, vec![line("root", finish("no_tasks"))], &[]);
    out.assert_code(0);
}

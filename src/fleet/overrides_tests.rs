use std::path::PathBuf;

use clap::Args;

use super::*;
use crate::cli::{ForgeKind, ProviderKind, StructuredOutputMode};

/// Every field set to something other than its default. Written without `..`, so an option
/// added to `RunOptions` fails to compile here until the tests below cover it.
fn every_option_set() -> RunOptions {
    RunOptions {
        task: Some("Fix the typo".into()),
        task_file: None,
        continuous: true,
        max_cycles: Some(3),
        max_turns: Some(7),
        allow_dangerous_tools: true,
        provider: Some(ProviderKind::Anthropic),
        model: Some("claude-sonnet-4-5".into()),
        base_url: Some("http://127.0.0.1:9/v1".into()),
        request_timeout: Some(30),
        context_window: Some(32_000),
        structured_output: Some(StructuredOutputMode::JsonObject),
        max_reply_tokens: Some(2048),
        temperature: Some(0.5),
        replay: Some(PathBuf::from("/scripts/replay.jsonl")),
        forge: Some(ForgeKind::None),
        base: Some("develop".into()),
        dry_run: true,
        max_tokens: Some(100_000),
        max_cost: Some(0.25),
        timeout: Some("1h 30m".parse().expect("a duration")),
        label: Some("bot".into()),
        config: Some(PathBuf::from("/etc/upkeep.toml")),
        depth: Some(0),
        draft: true,
        git_stall_timeout: Some(60),
        shell_timeout: Some(90),
        pass_env: vec!["CARGO_HOME".into()],
        allow_tool: vec!["tests".into()],
        require_sandbox: true,
        allow_network: true,
        max_depth: Some(1),
        max_reviews: Some(3),
        no_review: true,
        review_model: Some("gpt-4.1-mini".into()),
        trigger_phrase: Some("@bot".into()),
    }
}

/// The long names of `RunOptions`' flags, spelled as fleet keys (`_` for `-`).
fn flag_keys() -> Vec<String> {
    RunOptions::augment_args(clap::Command::new("run"))
        .get_arguments()
        .filter_map(|arg| arg.get_long())
        .map(|long| long.replace('-', "_"))
        .collect()
}

/// Reads a `[[repos]]` list holding `options` (as TOML text) for one repository.
fn overrides_from(options: &str) -> Result<RunOverrides, ConfigError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let list = dir.path().join("fleet.toml");
    std::fs::write(&list, format!("[[repos]]\nrepo = \"octo/widgets\"\n{options}")).expect("write");
    let entries = super::super::list::read_list(&list, "https://github.com")?;
    Ok(entries.into_iter().next().expect("one entry").overrides)
}

#[test]
fn every_run_option_a_fleet_may_override_is_accepted_from_the_fleet_file() {
    let every = RunOptions {
        // `task` and `task_file` replace each other: the file is checked on its own below.
        task_file: None,
        ..every_option_set()
    };
    let written = as_table(&every).expect("writes");
    let mut keys: Vec<String> = written.keys().cloned().collect();
    keys.push("task_file".into());
    let mut flags = flag_keys();
    keys.sort();
    flags.sort();
    assert_eq!(keys, flags, "each option's fleet key is its flag's name");

    let overrides = overrides_from(&toml::to_string(&written).expect("TOML")).expect("every key is accepted");
    assert_eq!(overrides.apply(&RunOptions::default()).expect("applies"), every);
    let from_file = overrides_from("task_file = \"/tasks/one.md\"\n").expect("accepted");
    let applied = from_file.apply(&every).expect("applies");
    assert_eq!(
        (applied.task, applied.task_file),
        (None, Some(PathBuf::from("/tasks/one.md")))
    );

    // docs/fleet.md names every key a table may hold.
    let docs = include_str!("../../docs/fleet.md");
    for key in flag_keys() {
        assert!(
            docs.contains(&format!("`{key}`")),
            "docs/fleet.md does not list `{key}`"
        );
    }
}

#[test]
fn a_key_given_replaces_the_fleets_value_and_others_keep_it() {
    let fleet = every_option_set();
    let overrides =
        overrides_from("dry_run = false\nallow_tool = []\nmax_cost = 0.5\ntimeout = \"10m\"\n").expect("valid");
    let applied = overrides.apply(&fleet).expect("applies");
    let expected = RunOptions {
        dry_run: false,
        allow_tool: Vec::new(),
        max_cost: Some(0.5),
        timeout: Some("10m".parse().expect("a duration")),
        ..fleet.clone()
    };
    assert_eq!(applied, expected);
    assert_eq!(RunOverrides::default().apply(&fleet).expect("applies"), fleet);
}

#[test]
fn an_unknown_or_fleet_wide_key_or_a_wrong_type_is_an_error_naming_the_key() {
    for (text, key) in [
        ("max_cots = 1.0\n", "max_cots"),
        // Options of the whole fleet are not per repository.
        ("json = true\n", "json"),
        ("author_name = \"x\"\n", "author_name"),
        ("max_turns = \"many\"\n", "max_turns"),
        ("timeout = \"soon\"\n", "timeout"),
        ("forge = \"gitlab\"\n", "forge"),
    ] {
        let error = overrides_from(text).expect_err(text).to_string();
        assert!(error.contains(key) && error.contains("[[repos]] #1"), "{text}: {error}");
    }
}

#[test]
fn paths_are_relative_to_the_list() {
    let overrides = overrides_from("replay = \"script.jsonl\"\nconfig = \"/abs/ops.toml\"\n").expect("valid");
    let applied = overrides.apply(&RunOptions::default()).expect("applies");
    assert!(applied.replay.expect("set").is_absolute());
    assert_eq!(applied.config, Some(PathBuf::from("/abs/ops.toml")));
}

//! Dangerous tools, contained: `run_shell_command` and declared command tools, run by the real
//! binary in a real clone.

use serde_json::{Value, json};

use super::support::{RunOutput, Script, TestRepo, Upkeep, finish, reply, run_local};

const DECLARED: &str = r#"
[[tools]]
name = "greet"
description = "Say hello"
cmd = "echo"
args = ["hello", "{{name}}"]
[tools.parameters.name]
type = "string"
pattern = "^[a-z]+$"
maxLength = 10

[[tools]]
name = "echo_raw"
description = "Echo one argument"
cmd = "echo"
args = ["{{text}}"]
[tools.parameters.text]
type = "string"

[[tools]]
name = "list_root"
description = "List the clone's root"
cmd = "ls"
args = ["-a"]
"#;

fn result_of(out: &RunOutput, tool: &str) -> Vec<Value> {
    out.events_of("tool_result")
        .into_iter()
        .filter(|e| e["tool"] == tool)
        .collect()
}

fn output(event: &Value) -> &str {
    event["output"].as_str().unwrap_or_default()
}

#[test]
fn declared_tools_run_with_validated_whole_arguments() {
    let repo = TestRepo::with_files(&[(".upkeep.toml", DECLARED)]);
    let script = Script::new(&[
        reply("greet", &[("greet", json!({"name": "world"}))]),
        reply("inject", &[("greet", json!({"name": "x;pwned"}))]),
        reply("literal", &[("echo_raw", json!({"text": "x; touch pwned"}))]),
        reply("look", &[("list_root", json!({}))]),
        finish("no_tasks"),
    ]);
    let allow = [
        "--task",
        "t",
        "--allow-tool",
        "greet",
        "--allow-tool",
        "echo_raw",
        "--allow-tool",
        "list_root",
    ];
    let out = run_local(&repo, &script, &allow);
    out.assert_code(0);
    let greets = result_of(&out, "greet");
    assert_eq!(greets[0]["ok"], true);
    assert!(
        output(&greets[0]).starts_with("hello world\n"),
        "{}",
        output(&greets[0])
    );
    assert_eq!(greets[1]["ok"], false, "the pattern refuses the injection");
    assert!(output(&greets[1]).contains("does not match the pattern"));
    let echoed = &result_of(&out, "echo_raw")[0];
    assert!(
        output(echoed).starts_with("x; touch pwned\n"),
        "one literal argument: {}",
        output(echoed)
    );
    let listing = output(&result_of(&out, "list_root")[0]).to_owned();
    assert!(listing.contains(".upkeep.toml"), "{listing}");
    assert!(!listing.contains("pwned"), "no shell ever ran `touch pwned`: {listing}");
}

#[test]
fn a_repositorys_declared_tool_is_not_offered_without_allow_tool() {
    let repo = TestRepo::with_files(&[(".upkeep.toml", DECLARED)]);
    let script = Script::new(&[
        reply("greet", &[("greet", json!({"name": "world"}))]),
        finish("no_tasks"),
    ]);
    let out = run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(0);
    let rejected = out.events_of("tool_rejected");
    assert_eq!(rejected.len(), 1);
    assert!(
        rejected[0]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("--allow-tool greet")
    );
    assert!(result_of(&out, "greet").is_empty(), "never executed");
    // `upkeep tools` style check on what the model is told: the prompt lists only allowed tools.
    let out = run_local(
        &repo,
        &Script::new(&[finish("no_tasks")]),
        &["--task", "t", "--allow-tool", "greet"],
    );
    out.assert_code(0);
}

#[test]
fn allow_tool_naming_no_declared_tool_is_a_usage_error() {
    let repo = TestRepo::new();
    let out = run_local(&repo, &Script::new(&[finish("no_tasks")]), &["--allow-tool", "nope"]);
    out.assert_code(2);
    assert!(out.stderr.contains("nope"), "{}", out.stderr);
}

#[test]
fn shell_commands_are_capped_timed_out_and_blocklisted() {
    let repo = TestRepo::new();
    let script = Script::new(&[
        reply(
            "big output",
            &[("run_shell_command", json!({"command": "seq 1 200000"}))],
        ),
        reply(
            "hang",
            &[(
                "run_shell_command",
                json!({"command": "sleep 30 & sleep 30; echo never"}),
            )],
        ),
        reply("destroy", &[("run_shell_command", json!({"command": "rm -rf /"}))]),
        reply(
            "wait for input",
            &[("run_shell_command", json!({"command": "read line; echo got:$line"}))],
        ),
        finish("no_tasks"),
    ]);
    let out = run_local(
        &repo,
        &script,
        &["--task", "t", "--allow-dangerous-tools", "--shell-timeout", "1"],
    );
    out.assert_code(0);
    let results = result_of(&out, "run_shell_command");
    assert_eq!(results.len(), 4);
    let big = output(&results[0]);
    assert!(
        big.starts_with("1\n2\n3\n") && big.contains("bytes omitted") && big.contains("200000\n"),
        "head, notice, tail"
    );
    assert!(big.len() < 31_000, "capped near 30 KB: {}", big.len());
    assert_eq!(results[1]["ok"], false);
    assert!(
        output(&results[1]).contains("timed out after 1s"),
        "{}",
        output(&results[1])
    );
    assert!(!output(&results[1]).contains("never"));
    assert_eq!(results[2]["ok"], false);
    assert!(output(&results[2]).contains("refused"), "{}", output(&results[2]));
    assert!(
        output(&results[3]).contains("got:"),
        "stdin is closed, the read returns at once"
    );
}

#[test]
fn operator_env_passes_named_variables_only() {
    let repo = TestRepo::new();
    let script = Script::new(&[
        reply("env", &[("run_shell_command", json!({"command": "env"}))]),
        finish("no_tasks"),
    ]);
    let out = Upkeep::new()
        .env("UPKEEP_TEST_PASSED", "passed-value")
        .env("UPKEEP_TEST_HIDDEN", "hidden-value")
        .args([
            "run",
            "--json",
            "--task",
            "t",
            "--allow-dangerous-tools",
            "--env",
            "UPKEEP_TEST_PASSED",
            "--repo",
        ])
        .args([repo.path()])
        .args(["--replay"])
        .args([script.path()])
        .run();
    out.assert_code(0);
    let env = output(&result_of(&out, "run_shell_command")[0]).to_owned();
    assert!(env.contains("UPKEEP_TEST_PASSED=passed-value"), "{env}");
    assert!(!env.contains("hidden-value"), "{env}");
    let names: Vec<&str> = env
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .collect();
    for name in names {
        assert!(
            [
                "PATH",
                "HOME",
                "USER",
                "LANG",
                "LC_ALL",
                "TERM",
                "TZ",
                "TMPDIR",
                // Where history is: the git directory is outside the work tree (docs/git.md).
                "GIT_DIR",
                "GIT_WORK_TREE",
                "UPKEEP_TEST_PASSED",
                "PWD",
                "SHLVL",
                "_",
                "OLDPWD"
            ]
            .contains(&name),
            "unexpected variable {name} in {env}"
        );
    }
}

#[test]
fn landlock_confines_writes_to_the_clone() {
    let repo = TestRepo::new();
    let upkeep = Upkeep::new();
    let outside = upkeep.tmp.path().join("home").join("outside.txt");
    let command = format!(
        "echo in > inside.txt && cat inside.txt && rm inside.txt; echo out > {}",
        outside.display()
    );
    let script = Script::new(&[
        reply(
            "write in and out",
            &[("run_shell_command", json!({"command": command}))],
        ),
        finish("no_tasks"),
    ]);
    let out = upkeep
        .args(["run", "--json", "--task", "t", "--allow-dangerous-tools", "--repo"])
        .args([repo.path()])
        .args(["--replay"])
        .args([script.path()])
        .run();
    out.assert_code(0);
    let filesystem = out.events_of("run_started")[0]["sandbox"]["filesystem"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let result = &result_of(&out, "run_shell_command")[0];
    if filesystem == "landlock" {
        assert!(
            output(result).starts_with("in\n"),
            "the write inside the clone worked: {}",
            output(result)
        );
        assert!(output(result).contains("Permission denied"), "{}", output(result));
        assert!(!outside.exists(), "the write outside the clone was blocked");
    } else {
        // Without Landlock the run says so, and writes are not confined.
        assert_eq!(filesystem, "none");
        assert!(out.stderr.contains("filesystem confinement"), "{}", out.stderr);
        eprintln!("SKIP: this kernel does not enforce Landlock");
    }
}

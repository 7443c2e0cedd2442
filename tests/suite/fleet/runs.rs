use super::super::support::model_api::model_requests;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer};

use super::super::support::model_api::{openai_stream, openai_usage};
use super::super::support::{Script, TestRepo, Upkeep};
use super::{fleet_finished, list_file, nothing_to_do, outcomes};

/// The test: four workers given shards 0/4 .. 3/4 of one 40-repository list, each
/// deciding alone, work every repository exactly once.
#[test]
fn four_shards_of_a_forty_repository_fleet_cover_each_repository_exactly_once() {
    let repos: Vec<TestRepo> = (0..40)
        .map(|i| TestRepo::with_files(&[("README.md", &format!("# repository {i}\n"))]))
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let list = list_file(dir.path(), &repos.iter().collect::<Vec<_>>());
    let script = nothing_to_do();
    let mut seen: Vec<String> = Vec::new();
    for shard in 0..4 {
        let out = Upkeep::new()
            .args(["fleet", "--repos"])
            .args([&list])
            .args([
                "--shard",
                &format!("{shard}/4"),
                "--jobs",
                "4",
                "--json",
                "--quiet",
                "--replay",
            ])
            .args([script.path()])
            .run();
        out.assert_code(0);
        assert_eq!(out.leftover_temp_entries, 0, "every clone removed");
        let shard_outcomes = outcomes(&out);
        assert!(
            shard_outcomes.iter().all(|(_, outcome)| outcome == "no_tasks"),
            "{shard_outcomes:?}"
        );
        // Each run's events carry its repository.
        let tagged: BTreeSet<String> = out
            .events_of("run_finished")
            .iter()
            .map(|event| event["repo"].as_str().expect("repo tag").to_owned())
            .collect();
        let listed: BTreeSet<String> = shard_outcomes.iter().map(|(repo, _)| repo.clone()).collect();
        assert_eq!(tagged, listed);
        seen.extend(listed);
    }
    let expected: BTreeSet<String> = repos.iter().map(|repo| repo.path().display().to_string()).collect();
    assert_eq!(seen.len(), 40, "no repository in two shards: {seen:?}");
    assert_eq!(
        seen.into_iter().collect::<BTreeSet<_>>(),
        expected,
        "every repository in one shard"
    );
}

/// One repository whose run fails (its script runs out), one with a broken `.upkeep.toml` and one listed wrongly do
/// not stop the others; the exit code is the worst outcome (failure before usage error).
#[test]
fn failing_repositories_do_not_stop_the_others_and_the_exit_code_says_the_worst() {
    let first = TestRepo::new();
    let exhausted = TestRepo::new();
    let broken = TestRepo::with_files(&[("README.md", "x\n"), (".upkeep.toml", "max_turn = 3\n")]);
    let last = TestRepo::new();
    let dir = tempfile::tempdir().expect("tempdir");
    // One reply that does not end the cycle: the script runs out at the second turn (exit 1).
    let short = serde_json::json!({"content": super::super::support::reply(
        "look",
        &[("read_file", json!({"path": "README.md"}))]
    )});
    std::fs::write(dir.path().join("short.jsonl"), format!("{short}\n")).expect("write");
    let list = dir.path().join("fleet.toml");
    let entry = |repo: &TestRepo| format!("[[repos]]\nrepo = {:?}\n", repo.path().display().to_string());
    std::fs::write(
        &list,
        format!(
            "{}{}replay = \"short.jsonl\"\n{}[[repos]]\nrepo = \"no/such/place\"\n{}",
            entry(&first),
            entry(&exhausted),
            entry(&broken),
            entry(&last)
        ),
    )
    .expect("write list");
    let script = nothing_to_do();
    let out = Upkeep::new()
        .args(["fleet", "--repos"])
        .args([&list])
        .args(["--jobs", "1", "--json", "--replay"])
        .args([script.path()])
        .run();
    out.assert_code(1);
    let got: Vec<(String, String)> = outcomes(&out);
    let name = |repo: &TestRepo| repo.path().display().to_string();
    assert_eq!(
        got,
        [
            (name(&first), "no_tasks".to_owned()),
            (name(&exhausted), "error".to_owned()),
            (name(&broken), "usage_error".to_owned()),
            ("no/such/place".to_owned(), "usage_error".to_owned()),
            (name(&last), "no_tasks".to_owned()),
        ]
    );
    let finished = fleet_finished(&out);
    assert_eq!(finished["exit_code"], 1);
    assert_eq!(finished["repos"], 5);
    assert!(
        finished["outcomes"][2]["error"]
            .as_str()
            .is_some_and(|e| e.contains("max_turn")),
        "{finished}"
    );
    // The table is on stderr with --json, one line per repository.
    assert!(out.stderr.contains("5 repositories"), "{}", out.stderr);
    assert_eq!(out.leftover_temp_entries, 0);
}

/// Ctrl-C while two repositories wait for the model: both runs stop and remove their clones,
/// the third never starts, and the fleet exits 130 with every repository accounted for.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_stops_every_run_and_cleans_up() {
    let repos = [TestRepo::new(), TestRepo::new(), TestRepo::new()];
    let dir = tempfile::tempdir().expect("tempdir");
    let list = list_file(dir.path(), &repos.iter().collect::<Vec<_>>());
    let model = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            openai_stream(
                &super::super::support::finish("no_tasks"),
                "stop",
                openai_usage(10, 5, 0),
            )
            .set_delay(Duration::from_secs(120)),
        )
        .mount(&model)
        .await;
    let mut upkeep = Upkeep::new()
        .args(["fleet", "--repos"])
        .args([&list])
        .args([
            "--jobs",
            "2",
            "--json",
            "--task",
            "t",
            "--provider",
            "openai",
            "--base-url",
        ])
        .args([format!("{}/v1", model.uri())]);
    let child = upkeep.spawn();
    let deadline = Instant::now() + Duration::from_secs(60);
    while model_requests(&model).await.len() < 2 {
        assert!(Instant::now() < deadline, "two runs never called the model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        upkeep.leftover_temp_entries(),
        2,
        "two clones exist while the model thinks"
    );
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid fits"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("signal sent");
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("joined")
        .expect("waited");
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(upkeep.leftover_temp_entries(), 0, "every clone removed");
    let events: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("json line"))
        .collect();
    let finished = events
        .iter()
        .find(|e| e["type"] == "fleet_finished")
        .expect("fleet_finished");
    let mut got: Vec<&str> = finished["outcomes"]
        .as_array()
        .expect("outcomes")
        .iter()
        .map(|o| o["outcome"].as_str().expect("outcome"))
        .collect();
    got.sort_unstable();
    assert_eq!(got, ["interrupted", "interrupted", "not_started"]);
    assert_eq!(finished["exit_code"], 130);
    assert_eq!(model_requests(&model).await.len(), 2, "the third never asked");
}

/// Flags and lists that cannot work stop the fleet before any repository starts (exit 2).
#[test]
fn fleet_usage_errors_exit_2_before_any_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let list = dir.path().join("fleet.txt");
    std::fs::write(&list, "octo/widgets\n").expect("write");
    let script = Script::new(&[]);
    for (args, expected) in [
        (vec!["--shard", "4/4"], "--shard"),
        (vec!["--shard", "x"], "--shard"),
        (vec!["--fleet-max-cost=-1"], "--fleet-max-cost"),
        (vec!["--repo", "octo/widgets"], "--repos FILE or --org ORG"),
    ] {
        let out = Upkeep::new()
            .args(["fleet", "--json", "--repos"])
            .args([&list])
            .args(["--replay"])
            .args([script.path()])
            .args(&args)
            .run();
        out.assert_code(2);
        assert!(out.stderr.contains(expected), "{args:?}: {}", out.stderr);
        assert_eq!(fleet_finished(&out)["repos"], 0);
    }
    // Without a token, no GitHub repository of the list can run: said once, before any work.
    let github_list = dir.path().join("github.txt");
    std::fs::write(&github_list, "octo/widgets\nocto/gadgets\nocto/gizmos\n").expect("write");
    let no_token = Upkeep::new()
        .args(["fleet", "--json", "--task", "t", "--repos"])
        .args([&github_list])
        .args(["--replay"])
        .args([script.path()])
        .run();
    no_token.assert_code(2);
    assert_eq!(
        no_token.stderr.matches("GITHUB_TOKEN").count(),
        1,
        "{}",
        no_token.stderr
    );
    assert_eq!(fleet_finished(&no_token)["repos"], 0);
    // With --dry-run they need none, and the fleet starts (the repositories then fail to clone:
    // there is no GitHub here).
    let dry = Upkeep::new()
        .args(["fleet", "--json", "--task", "t", "--dry-run", "--repos"])
        .args([&github_list])
        .args(["--replay"])
        .args([script.path()])
        .env("GITHUB_SERVER_URL", "http://127.0.0.1:9")
        .env("GITHUB_API_URL", "http://127.0.0.1:9")
        .run();
    assert_eq!(fleet_finished(&dry)["repos"], 3, "{}", dry.stderr);
    let missing = Upkeep::new().args(["fleet", "--repos", "/no/such/list"]).run();
    missing.assert_code(2);
    let neither = Upkeep::new().args(["fleet"]).run();
    neither.assert_code(2);
    assert!(
        neither.stderr.contains("--repos") || neither.stderr.contains("--org"),
        "{}",
        neither.stderr
    );
}

/// `--fleet-max-cost` binds the whole fleet: each run gets a share of what is left as its cost
/// budget, so the runs together never spend more than the fleet budget, and once it is spent
/// the rest stop before their first model call (exit 4: a budget cut them short).
#[tokio::test(flavor = "multi_thread")]
async fn the_fleet_budget_binds_every_repository_together() {
    let repos = [TestRepo::new(), TestRepo::new(), TestRepo::new()];
    let dir = tempfile::tempdir().expect("tempdir");
    let list = list_file(dir.path(), &repos.iter().collect::<Vec<_>>());
    // Every reply reads a file (the cycle never ends by itself) and reports 5000 + 500 tokens:
    // $0.014 a call at gpt-4.1's built-in price.
    let content = super::super::support::reply("read", &[("read_file", json!({"path": "README.md"}))]);
    let model = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(openai_stream(&content, "stop", openai_usage(5000, 500, 0)))
        .mount(&model)
        .await;
    let out = Upkeep::new()
        .args(["fleet", "--repos"])
        .args([&list])
        .args([
            "--jobs",
            "1",
            "--json",
            "--task",
            "t",
            "--model",
            "gpt-4.1",
            "--provider",
            "openai",
        ])
        .args(["--fleet-max-cost", "0.03", "--base-url"])
        .args([format!("{}/v1", model.uri())])
        .run_async()
        .await;
    out.assert_code(4);
    let finished = fleet_finished(&out);
    let total = finished["cost_usd"].as_f64().expect("cost");
    assert!(total > 0.0 && total <= 0.03, "spent {total}");
    let requests = model_requests(&model).await;
    assert_eq!(requests.len(), 2, "two calls fit in $0.03, a third would not");
    super::super::support::conformance::assert_each_request_conforms(&requests);
    let got: Vec<(String, String)> = outcomes(&out);
    assert!(got.iter().all(|(_, outcome)| outcome == "limit"), "{got:?}");
    // The later repositories stopped before any call, and said which budget.
    assert!(out.stderr.contains("--max-cost"), "{}", out.stderr);
}

/// Why: repositories in one fleet are strangers, but a command of one could read the clone
/// of another running beside it in upkeep's temporary directory (and its source, and
/// anything else in `/tmp`), and push what it read in its own pull request. Two repositories
/// run at once; one holds its clone while the other's command looks for it.
#[test]
fn a_fleet_repositorys_command_cannot_read_a_siblings_clone() {
    let sibling_secret = format!("sibling-secret-{}", fastrand::u64(..));
    let reader = TestRepo::new();
    let sibling = TestRepo::with_files(&[("SIBLING.txt", &sibling_secret)]);
    let planted =
        super::super::sandbox::isolation::Planted::in_dir(std::path::Path::new("/tmp"), "upkeep-fleet-planted");
    let dir = tempfile::tempdir().expect("tempdir");
    let upkeep = Upkeep::new();
    let temp = upkeep.temp_dir();
    // Waits (up to 20 s) for the sibling's clone to appear, unless it cannot even list the
    // directory where clones live.
    let snoop = format!(
        "for i in $(seq 200); do \
           if ! ls {temp} >/dev/null 2>&1; then echo cannot-list; break; fi; \
           f=$(ls -d {temp}/upkeep-*/repo/SIBLING.txt 2>/dev/null | head -n 1); \
           if [ -n \"$f\" ]; then cat \"$f\"; echo; break; fi; sleep 0.1; \
         done; cat {source}/SIBLING.txt {planted}; echo tried",
        temp = temp.display(),
        source = sibling.path().display(),
        planted = planted.path.display(),
    );
    let script = |command: &str| {
        let path = dir.path().join(format!("{}.jsonl", fastrand::u64(..)));
        let lines = [
            super::super::support::reply("run", &[("run_shell_command", json!({"command": command}))]),
            super::super::support::finish("no_tasks"),
        ];
        let text: String = lines
            .iter()
            .map(|line| format!("{}\n", json!({"content": line})))
            .collect();
        std::fs::write(&path, text).expect("script");
        path
    };
    let list = dir.path().join("fleet.toml");
    std::fs::write(
        &list,
        format!(
            "[[repos]]\nrepo = {:?}\nreplay = {:?}\n[[repos]]\nrepo = {:?}\nreplay = {:?}\n",
            reader.path().display().to_string(),
            script(&snoop).display().to_string(),
            sibling.path().display().to_string(),
            script("sleep 4").display().to_string(),
        ),
    )
    .expect("list");
    let out = upkeep
        .args(["fleet", "--repos"])
        .args([&list])
        .args(["--jobs", "2", "--json", "--task", "t", "--allow-dangerous-tools"])
        .run();
    out.assert_code(0);
    let results: Vec<String> = out
        .results_of("run_shell_command")
        .iter()
        .map(|event| event["output"].as_str().unwrap_or_default().to_owned())
        .collect();
    let snooped = results
        .iter()
        .find(|output| output.contains("tried"))
        .expect("the reader ran");
    assert!(!snooped.contains(&sibling_secret), "read the sibling: {snooped}");
    assert!(!snooped.contains(&planted.secret), "read /tmp: {snooped}");
}

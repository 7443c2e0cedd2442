//! How the token travels: only through git's credential callback over HTTP and in the API's
//! headers, never into the clone, events, trace or stderr; a wrong one fails fast; the API is
//! reached through the configured proxy like git and the model APIs.

use base64::Engine as _;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::super::support::{Script, Upkeep, finish, git, reply};
use super::{GitHub, ISSUES, NAME, OWNER, PULLS, ok, pull_json, result_of, trace_arg, unique_token, write_and_propose};

#[tokio::test(flavor = "multi_thread")]
async fn a_shallow_clone_over_http_pushes_the_bot_branch_with_the_token() {
    let hub = GitHub::start().await;
    hub.mount_empty_lists().await;
    hub.mount(
        "POST",
        PULLS,
        ResponseTemplate::new(201).set_body_json(pull_json(12, "upkeep/add-notes", "Add notes")),
    )
    .await;
    let script = Script::new(&[
        reply(
            "how deep is the clone",
            &[("run_shell_command", json!({"command": "git rev-list --count HEAD"}))],
        ),
        write_and_propose("NOTES.md", "notes\n", "Add notes", None),
    ]);
    let out = hub.run(&script, &["--task", "add notes", "--allow-dangerous-tools"]);
    out.assert_code(0);

    let count = result_of(&out, "run_shell_command");
    assert_eq!(count["ok"], true, "{count}");
    let output = count["output"].as_str().unwrap_or("");
    assert_eq!(output.lines().next(), Some("1"), "depth 1 by default: {output}");

    assert_eq!(hub.bot_branches(), vec!["upkeep/add-notes"]);
    let bare = hub.bare();
    assert_eq!(
        git(&bare, &["rev-parse", "upkeep/add-notes~1"]),
        git(&bare, &["rev-parse", "main"]),
        "one commit on top of main"
    );
    let pushes: Vec<_> = hub
        .git
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("git-receive-pack") && r.method == "POST")
        .collect();
    assert!(!pushes.is_empty(), "a push reached the server");
    assert!(pushes.iter().all(|r| r.auth_valid), "pushed with the token");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_token_never_reaches_the_clone_config_events_trace_or_stderr() {
    let hub = GitHub::start().await;
    hub.mount_empty_lists().await;
    hub.mount(
        "POST",
        PULLS,
        ResponseTemplate::new(201).set_body_json(pull_json(5, "upkeep/add-notes", "Add notes")),
    )
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (trace, trace_arg) = trace_arg(dir.path());
    let script = Script::new(&[
        reply(
            "look at the git config",
            &[("run_shell_command", json!({"command": "cat \"$GIT_DIR/config\""}))],
        ),
        write_and_propose("NOTES.md", "notes\n", "Add notes", None),
    ]);
    // Every log line on too: the HTTP and TLS libraries' own debug output included.
    let out = hub
        .upkeep(&["--task", "add notes", "--allow-dangerous-tools", "--trace", &trace_arg])
        .env("UPKEEP_LOG", "trace")
        .args(["--replay"])
        .args([script.path()])
        .run();
    out.assert_code(0);
    assert!(
        out.stderr.contains("git-upload-pack"),
        "git requests were logged: {}",
        out.stderr
    );

    let config = result_of(&out, "run_shell_command");
    let config = config["output"].as_str().unwrap_or("");
    assert!(config.contains("[core]"), "the config was read: {config}");
    // Fetches and pushes use the operator's URL directly: no remote is configured at all.
    assert!(!config.contains("[remote") && !config.contains("url"), "{config}");
    assert!(!config.contains(&hub.token), "{config}");
    // Redaction would hide a leak; its absence proves there was nothing to hide.
    assert!(!config.contains("[REDACTED]"), "{config}");

    let trace_text = std::fs::read_to_string(&trace).expect("trace written");
    assert!(!trace_text.is_empty());
    // As git sends it: HTTP Basic credentials, base64.
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{}", hub.token));
    for (place, text) in [("stdout", &out.stdout), ("trace", &trace_text), ("stderr", &out.stderr)] {
        assert!(!text.contains(&hub.token), "token leaked into {place}");
        assert!(!text.contains(&basic), "token leaked into {place} as Basic credentials");
    }
    // The API saw the token, as a header.
    let posts = hub.requests("POST", PULLS).await;
    assert_eq!(posts.len(), 1);
    let authorization = posts[0]
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    assert_eq!(authorization, format!("Bearer {}", hub.token));
    assert!(!posts[0].url.as_str().contains(&hub.token));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_token_fails_fast_without_a_credential_loop() {
    let right = unique_token();
    let hub = GitHub::with_tokens(&right, unique_token()).await;
    hub.mount_empty_lists().await;
    let out = hub.run(&Script::new(&[finish("no_tasks")]), &[]);
    out.assert_code(1);
    assert!(out.stderr.contains("rejected the token"), "{}", out.stderr);
    assert!(out.stderr.contains("GITHUB_TOKEN"), "{}", out.stderr);
    assert!(!out.stderr.contains(&hub.token) && !out.stdout.contains(&hub.token));
    let requests = hub.git.requests();
    assert!(
        !requests.is_empty() && requests.len() <= 4,
        "a handful of requests, not a loop: {}",
        requests.len()
    );
    assert!(requests.iter().all(|r| !r.auth_valid));
    assert!(out.events_of("model_response").is_empty(), "no model call");
}

/// octocrab, which the GitHub API client used before, ignored HTTP_PROXY while git and the
/// model APIs honoured it: behind a proxy, the API calls went around it (or nowhere). The API
/// host here does not resolve: the calls can only succeed through the loopback proxy.
#[tokio::test(flavor = "multi_thread")]
async fn the_github_api_goes_through_the_configured_proxy() {
    let hub = GitHub::start().await;
    let proxy = MockServer::start().await;
    for route in [PULLS, ISSUES] {
        Mock::given(method("GET"))
            .and(path(route))
            .respond_with(ok(json!([])))
            .mount(&proxy)
            .await;
    }
    let out = Upkeep::new()
        .env("GITHUB_SERVER_URL", hub.git.url())
        .env("GITHUB_API_URL", "http://api.github.invalid")
        .env("GITHUB_TOKEN", &hub.token)
        .env("HTTP_PROXY", proxy.uri())
        // The git server is on loopback: direct.
        .env("NO_PROXY", "127.0.0.1,localhost")
        .args(["run", "--repo", &format!("{OWNER}/{NAME}"), "--json", "--replay"])
        .args([Script::new(&[finish("no_tasks")]).path()])
        .run_async()
        .await;
    out.assert_code(0);
    let proxied = proxy.received_requests().await.unwrap_or_default();
    assert!(
        proxied.iter().any(|request| request.url.path() == PULLS),
        "the API call went through the proxy: {proxied:?}"
    );
    assert!(
        proxied
            .iter()
            .all(|request| request.headers.get("authorization").is_some()),
        "authenticated through the proxy"
    );
}

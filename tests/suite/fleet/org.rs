use super::super::support::github_fleet::{FleetHub, minimal_repository};
use super::{nothing_to_do, outcomes};

/// `--org acme --topic upkeep`: every page of the organisation's listing is read (following the
/// `Link` header), archived repositories and forks are skipped, and only repositories carrying
/// the topic (in any case) are worked, each cloned and run; a name that is not `owner/name` is
/// never made into a clone URL.
#[tokio::test(flavor = "multi_thread")]
async fn org_listing_follows_pages_and_keeps_the_topic_without_archived_or_forks() {
    let hub = FleetHub::start().await;
    for name in ["acme/one", "acme/five", "acme/six"] {
        hub.add_repo(name, &[("README.md", &format!("# {name}\n"))]).await;
    }
    let listing = [
        minimal_repository("acme/one", 1, &["upkeep"], false, false),
        minimal_repository("acme/two", 2, &["upkeep"], true, false),
        minimal_repository("acme/three", 3, &["upkeep", "rust"], false, true),
        minimal_repository("acme/four", 4, &["rust"], false, false),
        minimal_repository("acme/five", 5, &["rust", "Upkeep"], false, false),
        minimal_repository("acme/six", 6, &["upkeep"], false, false),
        // Not a name GitHub gives out: it would become part of a clone URL.
        minimal_repository("acme/../evil", 7, &["upkeep"], false, false),
    ];
    // Two per page: four pages.
    hub.serve_org("acme", &listing, 2).await;
    let script = nothing_to_do();
    let out = hub.run(&["fleet", "--org", "acme", "--topic", "upkeep"], &script).await;
    out.assert_code(0);
    assert_eq!(
        outcomes(&out),
        [
            ("acme/one".to_owned(), "no_tasks".to_owned()),
            ("acme/five".to_owned(), "no_tasks".to_owned()),
            ("acme/six".to_owned(), "no_tasks".to_owned()),
        ]
    );
    let pages: Vec<String> = hub
        .requests("GET", "/orgs/acme/repos")
        .await
        .iter()
        .map(|request| request.url.query().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        pages,
        [
            "type=all&per_page=100",
            "type=all&per_page=100&page=2",
            "type=all&per_page=100&page=3",
            "type=all&per_page=100&page=4"
        ]
    );
    // Each kept repository was cloned over the git server with the token.
    for name in ["acme/one", "acme/five", "acme/six"] {
        assert!(
            hub.git
                .requests()
                .iter()
                .any(|request| request.path.starts_with(&format!("/{name}.git/")) && request.auth_valid),
            "{name} cloned"
        );
    }
    for skipped in ["acme/two", "acme/three", "acme/four"] {
        assert!(
            !hub.git
                .requests()
                .iter()
                .any(|r| r.path.starts_with(&format!("/{skipped}.git/")))
        );
    }
}

/// Without `--topic`, every repository that is neither archived nor a fork is taken; an
/// account the API does not know fails the fleet before any repository starts.
#[tokio::test(flavor = "multi_thread")]
async fn without_a_topic_every_active_repository_is_taken_and_a_bad_org_fails_cleanly() {
    let hub = FleetHub::start().await;
    hub.add_repo("acme/one", &[("README.md", "one\n")]).await;
    hub.add_repo("acme/four", &[("README.md", "four\n")]).await;
    hub.serve_org(
        "acme",
        &[
            minimal_repository("acme/one", 1, &[], false, false),
            minimal_repository("acme/two", 2, &[], true, false),
            minimal_repository("acme/four", 4, &[], false, false),
        ],
        100,
    )
    .await;
    let script = nothing_to_do();
    let out = hub.run(&["fleet", "--org", "acme", "--shard", "0/1"], &script).await;
    out.assert_code(0);
    let repos: Vec<String> = outcomes(&out).into_iter().map(|(repo, _)| repo).collect();
    assert_eq!(repos, ["acme/one", "acme/four"]);

    // An organisation the API does not know: a failure before any repository (exit 1).
    let out = hub.run(&["fleet", "--org", "nobody"], &script).await;
    out.assert_code(1);
    assert!(out.stderr.contains("nobody"), "{}", out.stderr);
    assert!(!out.stderr.contains(&hub.token), "no token in messages");
}

//! upkeep's own smart-HTTP transport for libgit2 (src/repo/transport.rs), against a real
//! `git http-backend` on loopback and, for what a git host may answer besides git, wiremock:
//! tokens, pushes of more than a few bytes, redirects of a moved repository, a missing
//! repository and a server that does not speak the smart protocol.

use std::path::PathBuf;

use secrecy::SecretString;
use upkeep::repo::{CloneRequest, GitAuth, Identity, Stop, Workspace, WorkspaceError};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::support::git_http::GitHttpServer;
use super::support::{TestRepo, bare_copy, git};

/// A bare copy of a small repository at `<served>/o/r.git`, for a server rooted at `served`.
fn served_repository() -> (tempfile::TempDir, PathBuf, TestRepo) {
    let served = tempfile::tempdir().expect("tempdir");
    let origin = TestRepo::new();
    let bare = served.path().join("o/r.git");
    bare_copy(&origin, &bare);
    (served, bare, origin)
}

fn request(url: String, token: Option<&str>) -> CloneRequest {
    CloneRequest {
        base: Some("main".into()),
        auth: GitAuth {
            token: token.map(|token| SecretString::from(token.to_owned())),
        },
        ..CloneRequest::new(url, false)
    }
}

fn clone(request: &CloneRequest) -> Result<Workspace, WorkspaceError> {
    Workspace::clone_blocking(request, &Stop::never())
}

#[test]
fn a_private_repository_clones_and_pushes_with_the_token_as_basic_credentials() {
    let (served, bare, _origin) = served_repository();
    let token = "tok-transport-3f9a";
    let server = GitHttpServer::start(served.path(), Some(token));
    let auth = request(format!("{}/o/r.git", server.url()), Some(token));
    let workspace = clone(&auth).expect("clone with the token");
    let git_dir = workspace.git_dir().to_str().expect("utf-8");
    assert_eq!(
        git(
            workspace.root(),
            &["--git-dir", git_dir, "rev-parse", "--is-shallow-repository"]
        ),
        "true"
    );

    // More than a socket buffer's worth, so the push body is written in many pieces.
    let mut noise = Vec::with_capacity(3 << 20);
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    while noise.len() < 3 << 20 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        noise.extend_from_slice(&state.to_le_bytes());
    }
    std::fs::write(workspace.root().join("blob.bin"), &noise).expect("write");
    let commit = workspace
        .commit_blocking(
            "upkeep/big",
            "Add a big file",
            &Identity::default(),
            &upkeep::secrets::Redactor::default(),
        )
        .expect("commit");
    workspace.push_blocking("upkeep/big", &auth.auth).expect("push");
    assert_eq!(git(&bare, &["rev-parse", "refs/heads/upkeep/big"]), commit.to_string());

    let requests = server.requests();
    assert!(requests.len() >= 4, "{requests:#?}");
    assert!(
        requests.iter().all(|r| r.status == 200 && r.auth_valid),
        "every request carried the token, none was refused first: {requests:#?}"
    );
    // `x-access-token:tok-transport-3f9a`, base64.
    let expected = "Basic eC1hY2Nlc3MtdG9rZW46dG9rLXRyYW5zcG9ydC0zZjlh";
    assert!(
        requests.iter().all(|r| r.authorization.as_deref() == Some(expected)),
        "{requests:#?}"
    );
    let config = std::fs::read_to_string(workspace.git_dir().join("config")).expect("config");
    assert!(!config.contains(token), "{config}");
}

#[test]
fn a_private_repository_without_a_token_asks_for_one() {
    let (served, _bare, _origin) = served_repository();
    let server = GitHttpServer::start(served.path(), Some("tok-needed"));
    let error = clone(&request(format!("{}/o/r.git", server.url()), None)).expect_err("refused");
    assert!(matches!(error, WorkspaceError::AuthRejected { .. }), "{error:?}");
    assert!(error.to_string().contains("set GITHUB_TOKEN"), "{error}");
    assert_eq!(server.requests().len(), 1, "one refusal ends it");
}

#[test]
fn a_wrong_token_is_named_as_rejected_without_showing_it() {
    let (served, _bare, _origin) = served_repository();
    let server = GitHttpServer::start(served.path(), Some("tok-right"));
    let error = clone(&request(format!("{}/o/r.git", server.url()), Some("tok-wrong-77"))).expect_err("refused");
    assert!(matches!(error, WorkspaceError::AuthRejected { .. }), "{error:?}");
    assert!(!format!("{error} {error:?}").contains("tok-wrong-77"), "{error:?}");
    assert_eq!(server.requests().len(), 1, "one refusal ends it");
}

#[test]
fn a_missing_repository_is_not_mistaken_for_a_missing_branch() {
    let (served, _bare, _origin) = served_repository();
    let server = GitHttpServer::start(served.path(), None);
    let error = clone(&request(format!("{}/o/missing.git", server.url()), None)).expect_err("no such repository");
    assert!(!matches!(error, WorkspaceError::MissingBase { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("404") && message.contains("no such repository"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_does_not_speak_smart_http_is_a_clear_error() {
    let host = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/o/r.git/info/refs"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw("<html><body>Sign in</body></html>", "text/html; charset=utf-8"),
        )
        .mount(&host)
        .await;
    let error = Workspace::clone_repo(request(format!("{}/o/r.git", host.uri()), None), Stop::never())
        .await
        .expect_err("not a git server");
    let message = error.to_string();
    assert!(
        message.contains("not a smart-HTTP git server") && message.contains("text/html"),
        "{message}"
    );
}

/// A renamed repository answers its old URL with a redirect; git follows it for the whole
/// fetch, so the POST that brings the objects must go where the advertisement came from. The
/// token is for the host it was given for: a redirect to another host does not take it along.
#[tokio::test(flavor = "multi_thread")]
async fn a_moved_repository_is_fetched_from_where_it_moved() {
    let (served, _bare, origin) = served_repository();
    let server = GitHttpServer::start(served.path(), None);
    let old_host = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/o/old-name.git/info/refs"))
        .respond_with(ResponseTemplate::new(301).insert_header(
            "Location",
            format!("{}/o/r.git/info/refs?service=git-upload-pack", server.url()).as_str(),
        ))
        .expect(1)
        .mount(&old_host)
        .await;
    let workspace = Workspace::clone_repo(
        request(format!("{}/o/old-name.git", old_host.uri()), Some("tok-stays-home")),
        Stop::never(),
    )
    .await
    .expect("clone through the redirect");
    let git_dir = workspace.git_dir().to_str().expect("utf-8");
    assert_eq!(
        git(workspace.root(), &["--git-dir", git_dir, "rev-parse", "HEAD"]),
        origin.git(&["rev-parse", "main"])
    );
    assert!(
        std::fs::read_to_string(workspace.root().join("README.md")).is_ok_and(|readme| !readme.is_empty()),
        "files checked out"
    );
    let posts: Vec<_> = server.requests().into_iter().filter(|r| r.method == "POST").collect();
    assert!(
        !posts.is_empty() && posts.iter().all(|r| r.path == "/o/r.git/git-upload-pack"),
        "{posts:#?}"
    );
    assert!(
        server.requests().iter().all(|r| !r.auth_present),
        "the other host never saw the token: {:#?}",
        server.requests()
    );
    let asked = old_host.received_requests().await.unwrap_or_default();
    assert_eq!(asked.len(), 1, "only the advertisement was asked of the old host");
    assert!(
        asked[0].headers.contains_key("authorization"),
        "the token went to its own host"
    );
}

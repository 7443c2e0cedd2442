//! Self-tests for the loopback smart-HTTP git server in `support::git_http`,
//! driven by the git CLI only.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::suite::support::git_http::GitHttpServer;

const TOKEN: &str = "ghs_test-token-123";
const REPO: &str = "owner/name.git";

/// A work tree with two commits on `main`, pushed into a bare repository at
/// `root/owner/name.git`.
struct Fixture {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    root: PathBuf,
    work: PathBuf,
    base: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().to_path_buf();
        let home = base.join("home");
        let root = base.join("root");
        let work = base.join("work");
        std::fs::create_dir_all(&home).expect("create home");
        std::fs::create_dir_all(root.join("owner")).expect("create root");
        let fixture = Fixture {
            _tmp: tmp,
            home,
            root,
            work,
            base,
        };
        fixture.git_ok(&fixture.base, &["init", "-q", "-b", "main", "work"]);
        fixture.commit_file("a.txt", b"first\n", "first commit");
        fixture.commit_file("b.txt", b"second\n", "second commit");
        let bare = fixture.bare();
        let bare_arg = bare.to_str().expect("utf-8 path");
        fixture.git_ok(&fixture.base, &["init", "-q", "--bare", "-b", "main", bare_arg]);
        fixture.git_ok(&fixture.work, &["push", "-q", bare_arg, "main:main"]);
        fixture
    }

    fn bare(&self) -> PathBuf {
        self.root.join(REPO)
    }

    /// Runs git in `dir` with no user/system config, no prompts and no askpass.
    fn git(&self, dir: &Path, args: &[&str]) -> Output {
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env_remove("GIT_ASKPASS")
            .env_remove("SSH_ASKPASS")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_CONFIG_PARAMETERS")
            .env_remove("GIT_CONFIG_COUNT")
            .output()
            .expect("run git")
    }

    fn git_ok(&self, dir: &Path, args: &[&str]) -> String {
        let output = self.git(dir, args);
        assert!(
            output.status.success(),
            "git {args:?} failed: {}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    fn commit_file(&self, name: &str, contents: &[u8], message: &str) {
        std::fs::write(self.work.join(name), contents).expect("write file");
        self.git_ok(&self.work, &["add", name]);
        self.git_ok(
            &self.work,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "-m",
                message,
            ],
        );
    }

    /// `Some(sha)` if `refname` exists in the bare repository.
    fn bare_ref(&self, refname: &str) -> Option<String> {
        let bare = self.bare();
        let bare_arg = bare.to_str().expect("utf-8 path");
        let output = self.git(
            &self.base,
            &["--git-dir", bare_arg, "rev-parse", "--verify", "--quiet", refname],
        );
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }
}

fn repo_url(server: &GitHttpServer, token: &str) -> String {
    let base = server.url();
    let host = base.strip_prefix("http://").expect("http url");
    format!("http://x-access-token:{token}@{host}/{REPO}")
}

#[test]
fn shallow_clone_with_token_has_one_commit() {
    let fx = Fixture::new();
    let server = GitHttpServer::start(&fx.root, Some(TOKEN));
    let url = repo_url(&server, TOKEN);

    fx.git_ok(
        &fx.base,
        &["-c", "protocol.version=2", "clone", "-q", "--depth", "1", &url, "clone"],
    );
    let clone = fx.base.join("clone");
    assert_eq!(fx.git_ok(&clone, &["rev-list", "--count", "HEAD"]), "1");
    assert_eq!(fx.git_ok(&clone, &["rev-parse", "--is-shallow-repository"]), "true");
    assert_eq!(
        fx.git_ok(&clone, &["rev-parse", "HEAD"]),
        fx.git_ok(&fx.work, &["rev-parse", "HEAD"])
    );

    let requests = server.requests();
    assert!(!requests.is_empty());
    assert!(
        requests
            .iter()
            .all(|r| r.status == 401 || (r.auth_present && r.auth_valid)),
        "{requests:#?}"
    );
    let authorized: Vec<_> = requests.iter().filter(|r| r.status == 200).collect();
    assert!(
        authorized
            .iter()
            .any(|r| r.method == "POST" && r.path == "/owner/name.git/git-upload-pack"),
        "{requests:#?}"
    );
    assert!(
        authorized
            .iter()
            .all(|r| { r.authorization.as_deref().is_some_and(|a| a.starts_with("Basic ")) })
    );
    assert!(
        requests
            .iter()
            .any(|r| r.git_protocol.as_deref() == Some("version=2") && r.status == 200),
        "protocol v2 was not negotiated: {requests:#?}"
    );
}

#[test]
fn clone_with_wrong_token_fails() {
    let fx = Fixture::new();
    let server = GitHttpServer::start(&fx.root, Some(TOKEN));
    let url = repo_url(&server, "wrong-token");

    let output = fx.git(&fx.base, &["clone", "-q", &url, "clone"]);
    assert!(!output.status.success(), "clone with a wrong token succeeded");
    assert!(!fx.base.join("clone").join(".git").exists());

    let requests = server.requests();
    assert!(requests.iter().all(|r| r.status == 401), "{requests:#?}");
    assert!(
        requests.iter().any(|r| r.auth_present && !r.auth_valid),
        "{requests:#?}"
    );
    assert!(requests.iter().all(|r| !r.auth_valid));
}

#[test]
fn push_new_branch_with_token() {
    let fx = Fixture::new();
    let server = GitHttpServer::start(&fx.root, Some(TOKEN));
    let url = repo_url(&server, TOKEN);

    fx.git_ok(&fx.work, &["checkout", "-q", "-b", "feature"]);
    fx.commit_file("c.txt", b"feature\n", "feature commit");
    fx.git_ok(&fx.work, &["push", "-q", &url, "feature"]);

    let head = fx.git_ok(&fx.work, &["rev-parse", "HEAD"]);
    assert_eq!(fx.bare_ref("refs/heads/feature"), Some(head));
    let requests = server.requests();
    assert!(
        requests.iter().any(|r| r.method == "POST"
            && r.path == "/owner/name.git/git-receive-pack"
            && r.status == 200
            && r.auth_valid),
        "{requests:#?}"
    );
}

#[test]
fn large_push_with_chunked_body() {
    let fx = Fixture::new();
    let server = GitHttpServer::start(&fx.root, Some(TOKEN));
    let url = repo_url(&server, TOKEN);

    // Incompressible content well above http.postBuffer makes git send the
    // receive-pack request with `Transfer-Encoding: chunked`.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let noise: Vec<u8> = (0..512 * 1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect();
    fx.git_ok(&fx.work, &["checkout", "-q", "-b", "big"]);
    fx.commit_file("noise.bin", &noise, "large commit");
    fx.git_ok(&fx.work, &["-c", "http.postBuffer=65536", "push", "-q", &url, "big"]);

    let head = fx.git_ok(&fx.work, &["rev-parse", "HEAD"]);
    assert_eq!(fx.bare_ref("refs/heads/big"), Some(head));
    let requests = server.requests();
    assert!(
        requests.iter().any(|r| r.path == "/owner/name.git/git-receive-pack"
            && r.status == 200
            && r.header("transfer-encoding")
                .is_some_and(|te| te.eq_ignore_ascii_case("chunked"))),
        "no chunked receive-pack request: {requests:#?}"
    );
}

#[test]
fn rejected_ref_push_fails_and_ref_is_not_created() {
    let fx = Fixture::new();
    let server = GitHttpServer::start(&fx.root, Some(TOKEN));
    server.reject_pushes_to("refs/heads/protected");
    let url = repo_url(&server, TOKEN);

    fx.commit_file("c.txt", b"third\n", "third commit");
    let output = fx.git(
        &fx.work,
        &["push", &url, "HEAD:refs/heads/protected", "HEAD:refs/heads/allowed"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "push succeeded: {stderr}");
    assert!(
        stderr.contains("[remote rejected]") && stderr.contains("protected"),
        "{stderr}"
    );
    assert_eq!(fx.bare_ref("refs/heads/protected"), None);
    // Only the refused ref is refused.
    let head = fx.git_ok(&fx.work, &["rev-parse", "HEAD"]);
    assert_eq!(fx.bare_ref("refs/heads/allowed"), Some(head));
}

#[test]
fn anonymous_clone_without_token() {
    let fx = Fixture::new();
    let server = GitHttpServer::start(&fx.root, None);
    let url = format!("{}/{REPO}", server.url());

    fx.git_ok(&fx.base, &["clone", "-q", &url, "clone"]);
    assert_eq!(fx.git_ok(&fx.base.join("clone"), &["rev-list", "--count", "HEAD"]), "2");
    let requests = server.requests();
    assert!(
        requests.iter().all(|r| r.status == 200 && !r.auth_present),
        "{requests:#?}"
    );
}

#[test]
fn malformed_request_gets_400() {
    let fx = Fixture::new();
    let server = GitHttpServer::start(&fx.root, Some(TOKEN));
    let addr = server.url().strip_prefix("http://").expect("http url").to_owned();

    for garbage in [
        &b"NONSENSE\r\n\r\n"[..],
        b"GET /owner/name.git/info/refs HTTP/1.1\r\nno colon here\r\n\r\n",
        b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ] {
        let mut stream = TcpStream::connect(&addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        stream.write_all(garbage).expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read");
        assert!(response.starts_with("HTTP/1.1 400 "), "{response}");
    }
    assert_eq!(server.requests().iter().filter(|r| r.status == 400).count(), 3);
    // (Whether the port is closed after `drop` cannot be checked reliably: another test's
    // server may bind the same ephemeral port at once.)
}

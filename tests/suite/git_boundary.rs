//! Git cannot be turned against the operator (DESIGN section 8), each case built for real: a
//! hostile user and XDG git configuration, a command that writes git files into the work tree,
//! a repository whose tree holds `.git`-like paths, a server that stalls mid-push or mid-fetch,
//! and interrupts in the middle of a large clone. The real `upkeep` binary runs against real
//! `git http-backend` servers on loopback (one of them a decoy that must never be contacted).

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use upkeep::repo::{CloneRequest, GitAuth, Stop, Workspace};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::git_proxy::{Behaviour, GitProxy};
use super::support::git_http::GitHttpServer;
use super::support::{RunOutput, Script, TestRepo, Upkeep, git, reply};

const PULLS: &str = "/repos/owner/name/pulls";

/// A bare `owner/name.git` behind a git server, and a GitHub API mock that lists nothing and
/// opens pull request #1.
struct Hub {
    _tmp: tempfile::TempDir,
    bare: PathBuf,
    server: GitHttpServer,
    api: MockServer,
    token: String,
}

impl Hub {
    async fn start(token: Option<&str>) -> Self {
        Self::serving(&TestRepo::new(), token).await
    }

    async fn serving(origin: &TestRepo, token: Option<&str>) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let bare = tmp.path().join("root/owner/name.git");
        super::support::bare_copy(origin, &bare);
        let server = GitHttpServer::start(&tmp.path().join("root"), token);
        let api = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path(PULLS))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
            .mount(&api)
            .await;
        Mock::given(method("POST"))
            .and(path(PULLS))
            .respond_with(ResponseTemplate::new(201).set_body_json(pull_json()))
            .mount(&api)
            .await;
        Self {
            _tmp: tmp,
            bare,
            server,
            api,
            token: token.unwrap_or("tok-unused").to_owned(),
        }
    }

    /// `upkeep run` on `owner/name` at `server_url`, with the token, JSON events.
    fn upkeep(&self, server_url: &str, extra: &[&str]) -> Upkeep {
        Upkeep::new()
            .env("GITHUB_SERVER_URL", server_url)
            .env("GITHUB_API_URL", self.api.uri())
            .env("GITHUB_TOKEN", &self.token)
            .args(["run", "--repo", "owner/name", "--json", "--task", "t"])
            .args(extra)
    }

    fn branches(&self) -> String {
        git(
            &self.bare,
            &["for-each-ref", "--format=%(refname)", "refs/heads/upkeep/"],
        )
    }

    async fn pull_requests_opened(&self) -> usize {
        let requests = self.api.received_requests().await.unwrap_or_default();
        requests
            .iter()
            .filter(|r| r.method.as_str() == "POST" && r.url.path() == PULLS)
            .count()
    }
}

/// `POST /repos/{owner}/{repo}/pulls`'s answer (abridged).
fn pull_json() -> Value {
    let repo = json!({"id": 1, "name": "name", "full_name": "owner/name", "private": false,
                      "owner": {"login": "owner", "id": 1, "type": "User"},
                      "html_url": "https://github.com/owner/name", "default_branch": "main"});
    json!({"url": "https://api.github.com/repos/owner/name/pulls/1", "id": 1001,
           "html_url": "https://github.com/owner/name/pull/1", "number": 1, "state": "open",
           "title": "Add notes", "body": "", "draft": false,
           "user": {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"},
           "head": {"label": "owner:upkeep/add-notes", "ref": "upkeep/add-notes",
                    "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "repo": repo},
           "base": {"label": "owner:main", "ref": "main",
                    "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "repo": repo}})
}

fn propose(extra_calls: &[(&str, Value)]) -> Script {
    let mut calls: Vec<(&str, Value)> = extra_calls.to_vec();
    calls.extend([
        ("write_file", json!({"path": "NOTES.md", "content": "notes\n"})),
        ("create_pull_request", json!({"title": "Add notes", "body": "notes"})),
        ("finish", json!({"status": "completed", "summary": "notes"})),
    ]);
    Script::new(&[reply("propose", &calls)])
}

fn result_of(out: &RunOutput, tool: &str) -> Value {
    out.events_of("tool_result")
        .into_iter()
        .find(|event| event["tool"] == tool)
        .unwrap_or_else(|| panic!("no {tool} result\n{}\n{}", out.stdout, out.stderr))
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, content).expect("write");
}

/// `~/.gitconfig`, `~/.config/git/config` and `~/.config/git/attributes` of upkeep's HOME, as
/// an attacker who can write the user's dotfiles (or a careless CI image) would leave them:
/// every fetch and push of the real server rewritten to the decoy, an extra header, an SSH
/// command, and attributes that would make a checkout write CRLF.
fn hostile_home(home: &Path, real: &str, decoy: &str, marker: &Path) {
    let rewrite = format!(
        "[url \"{decoy}/\"]\n\tinsteadOf = {real}/\n\tpushInsteadOf = {real}/\n\
         [http]\n\textraHeader = X-Hostile: 1\n\
         [core]\n\tsshCommand = touch {marker}\n\tautocrlf = true\n\tattributesFile = {attributes}\n",
        marker = marker.display(),
        attributes = home.join(".config/git/attributes").display(),
    );
    write(&home.join(".gitconfig"), &rewrite);
    write(&home.join(".config/git/config"), &rewrite);
    write(&home.join(".config/git/attributes"), "* text eol=crlf\n");
}

/// Fails on code that reads the user's git configuration: libgit2 would clone from and push to
/// the decoy (insteadOf), with the token, and check files out with CRLF.
#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_user_git_config_cannot_redirect_the_push_or_the_token() {
    let token = "tok-boundary-5c1e";
    let hub = Hub::start(Some(token)).await;
    // The decoy serves the same repository and takes any credentials: a redirect would work.
    let decoy = Hub::start(None).await;
    let upkeep = hub.upkeep(&hub.server.url(), &[]);
    let home = upkeep.tmp.path().join("home");
    let marker = upkeep.tmp.path().join("ssh-command-ran");
    hostile_home(&home, &hub.server.url(), &decoy.server.url(), &marker);

    let script = propose(&[("read_file", json!({"path": "README.md"}))]);
    let out = upkeep.args(["--replay"]).args([script.path()]).run_async().await;
    out.assert_code(0);

    assert_eq!(
        hub.branches(),
        "refs/heads/upkeep/add-notes",
        "pushed to the real server"
    );
    assert!(
        decoy.server.requests().is_empty(),
        "the decoy was contacted: {:#?}",
        decoy.server.requests()
    );
    assert_eq!(decoy.branches(), "");
    let requests = hub.server.requests();
    assert!(
        requests.iter().all(|r| r.header("x-hostile").is_none()),
        "{requests:#?}"
    );
    assert!(!marker.exists(), "no command from the config ran");
    let readme = result_of(&out, "read_file");
    assert!(!readme["output"].as_str().unwrap_or("\r").contains('\r'), "{readme}");
    let pushed = git(&hub.bare, &["cat-file", "blob", "upkeep/add-notes:NOTES.md"]);
    assert_eq!(pushed, "notes", "committed as written");
    assert_eq!(out.leftover_temp_entries, 0);
    assert_eq!(hub.pull_requests_opened().await, 1);
}

/// Fails on code whose git directory is the work tree's `.git`: the command rewrites the
/// remote, and the push (with the token) goes to the decoy.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_writing_git_files_into_the_work_tree_cannot_change_where_the_push_goes() {
    if !super::support::landlock_available() {
        eprintln!("SKIP: Landlock is not available, so commands may write anywhere upkeep can");
        return;
    }
    let token = "tok-boundary-9a7d";
    let hub = Hub::start(Some(token)).await;
    let decoy = Hub::start(None).await;
    let (real, fake) = (hub.server.url(), decoy.server.url());
    let config = format!(
        "[remote \\\"origin\\\"]\\n\\turl = {fake}/owner/name.git\\n[url \\\"{fake}/\\\"]\\n\\tinsteadOf = {real}/\\n"
    );
    let command = format!(
        "mkdir -p .git sub && printf \"{config}\" > .git/config && printf 'gitdir: /tmp\\n' > sub/.git; \
         if printf \"{config}\" >> \"$GIT_DIR/config\" 2>/dev/null; then echo WROTE-GIT-DIR; else echo git-dir-read-only; fi; \
         git log --oneline | wc -l"
    );
    let script = propose(&[("run_shell_command", json!({"command": command}))]);
    let out = hub
        .upkeep(&real, &["--allow-dangerous-tools"])
        .args(["--replay"])
        .args([script.path()])
        .run_async()
        .await;
    out.assert_code(0);
    let shell = result_of(&out, "run_shell_command");
    let output = shell["output"].as_str().unwrap_or("");
    assert!(
        output.contains("git-dir-read-only") && !output.contains("WROTE"),
        "{output}"
    );
    assert!(
        output.lines().any(|line| line.trim() == "1"),
        "history is readable: {output}"
    );

    assert_eq!(hub.branches(), "refs/heads/upkeep/add-notes");
    assert!(decoy.server.requests().is_empty(), "{:#?}", decoy.server.requests());
    let files = git(&hub.bare, &["ls-tree", "-r", "--name-only", "upkeep/add-notes"]);
    assert!(
        !files.split('\n').any(|f| f.starts_with(".git") || f.contains("/.git")),
        "{files}"
    );
}

/// A repository whose commits hold `.git`, `.GIT`, `sub/.git` (a gitlink file) and a
/// `.git/config`, made with git's plumbing (porcelain refuses them).
fn hostile_tree_commit(repo: &TestRepo) {
    let blob = |content: &str| {
        let path = repo.path().join("blob.tmp");
        std::fs::write(&path, content).expect("write");
        let id = repo.git(&["hash-object", "-w", "blob.tmp"]);
        std::fs::remove_file(path).expect("rm");
        id
    };
    let mktree = |entries: &str| {
        let mut child = std::process::Command::new("git")
            .current_dir(repo.path())
            .args(["mktree"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("git mktree");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(entries.as_bytes())
            .expect("entries");
        let out = child.wait_with_output().expect("mktree output");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let config = blob("[core]\n\tbare = false\n[remote \"origin\"]\n\turl = http://127.0.0.1:9/evil.git\n");
    let gitlink = blob("gitdir: /tmp\n");
    let readme = blob("# hostile\n");
    let dot_git = mktree(&format!("100644 blob {config}\tconfig\n"));
    let sub = mktree(&format!("100644 blob {gitlink}\t.git\n100644 blob {readme}\tok.md\n"));
    let root = mktree(&format!(
        "040000 tree {dot_git}\t.GIT\n100644 blob {readme}\tREADME.md\n040000 tree {dot_git}\t.git\n040000 tree {sub}\tsub\n"
    ));
    let parent = repo.git(&["rev-parse", "HEAD"]);
    let commit = repo.git(&["commit-tree", &root, "-p", &parent, "-m", "hostile tree"]);
    repo.git(&["update-ref", "refs/heads/main", &commit]);
}

/// Fails on code that keeps the git directory at the work tree's `.git`.
#[test]
fn the_work_tree_has_no_git_entry_and_committed_git_paths_cannot_appear() {
    let origin = TestRepo::new();
    let request = CloneRequest::new(origin.path().display().to_string(), true);
    let mut workspace = Workspace::clone_blocking(&request, &Stop::never()).expect("clone");
    let root = workspace.root().to_owned();
    assert!(
        std::fs::symlink_metadata(root.join(".git")).is_err(),
        "no .git entry of any kind after a clone"
    );
    assert!(
        !workspace.git_dir().starts_with(&root),
        "the git directory is outside the work tree"
    );
    let config_before = std::fs::read(workspace.git_dir().join("config")).expect("config");

    hostile_tree_commit(&origin);
    // A refresh onto the hostile tip either refuses it or writes none of its git paths.
    let refreshed = workspace.refresh_blocking(&GitAuth::default(), &Stop::never());
    for path in [".git", ".GIT", "sub/.git"] {
        assert!(
            std::fs::symlink_metadata(root.join(path)).is_err(),
            "{path} appeared ({refreshed:?})"
        );
    }
    assert_eq!(
        std::fs::read(workspace.git_dir().join("config")).expect("config"),
        config_before
    );

    // A fresh clone of the hostile tip: the same.
    let fresh = Workspace::clone_blocking(&request, &Stop::never());
    if let Ok(fresh) = &fresh {
        for path in [".git", ".GIT", "sub/.git"] {
            assert!(
                std::fs::symlink_metadata(fresh.root().join(path)).is_err(),
                "{path} appeared"
            );
        }
    }
}

/// A repository of `files` files of `size` incompressible bytes each, made with fast-import.
fn large_repository(files: usize, size: usize) -> TestRepo {
    let repo = TestRepo::new();
    let mut stream = Vec::new();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    stream.extend_from_slice(
        b"commit refs/heads/main\ncommitter T <t@example.com> 0 +0000\ndata 5\nlarge\nfrom refs/heads/main^0\n",
    );
    for n in 0..files {
        let mut content = Vec::with_capacity(size);
        while content.len() < size {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            content.extend_from_slice(&state.to_le_bytes());
        }
        stream.extend_from_slice(format!("M 100644 inline data/{n}.bin\ndata {size}\n").as_bytes());
        stream.extend_from_slice(&content[..size]);
        stream.push(b'\n');
    }
    let mut child = std::process::Command::new("git")
        .current_dir(repo.path())
        .args(["fast-import", "--quiet"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("git fast-import");
    use std::io::Write as _;
    child.stdin.take().expect("stdin").write_all(&stream).expect("stream");
    assert!(child.wait().expect("fast-import").success());
    repo.git(&["reset", "-q", "--hard", "main"]);
    repo
}

fn signal(child: &Child) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT sent");
}

/// Waits for the child, killing it (and failing) after `limit`.
async fn wait_at_most(mut child: Child, limit: Duration) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let waited = tokio::task::spawn_blocking(move || {
        while started.elapsed() < limit {
            if let Ok(Some(_)) = child.try_wait() {
                let output = child.wait_with_output().expect("output");
                return Some(output);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    })
    .await
    .expect("joined");
    let output = waited.unwrap_or_else(|| panic!("upkeep was still running after {limit:?}"));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr, started.elapsed())
}

/// Waits until upkeep has created its clone's directory.
async fn wait_for_clone_dir(upkeep: &Upkeep) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while upkeep.leftover_temp_entries() == 0 {
        assert!(Instant::now() < deadline, "upkeep never started its clone");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Starts `upkeep run` (the proposing script) against the hub through `proxy`.
/// The script is returned to be kept until upkeep ends.
fn spawn_through(hub: &Hub, proxy: &GitProxy, extra: &[&str], env: &[(&str, &str)]) -> (Upkeep, Child, Script) {
    let script = propose(&[]);
    let mut upkeep = hub.upkeep(&proxy.url(), extra).args(["--replay"]).args([script.path()]);
    for (name, value) in env {
        upkeep = upkeep.env(name, value);
    }
    let child = upkeep.spawn();
    (upkeep, child, script)
}

/// Waits for an interrupted upkeep: exit 130 within a few seconds, nothing left in its TMPDIR.
async fn assert_interrupted(upkeep: &Upkeep, child: Child) -> String {
    let (code, stderr, took) = wait_at_most(child, Duration::from_secs(20)).await;
    assert_eq!(code, Some(130), "{stderr}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(upkeep.leftover_temp_entries(), 0, "{stderr}");
    stderr
}

/// Waits until the proxy has stalled a connection.
async fn wait_for_stall(proxy: &GitProxy) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while proxy.stalls() == 0 {
        assert!(Instant::now() < deadline, "git never reached the stalling server");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Fails on code whose HTTP reads cannot be interrupted: the clone stays blocked on the silent
/// server, and the process exits (or hangs) with the partial clone on disk.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_while_the_server_stalls_mid_clone_exits_130_and_removes_the_clone() {
    let hub = Hub::start(None).await;
    let proxy = GitProxy::start(&hub.server.url(), Behaviour::Stall("git-upload-pack"));
    let (upkeep, child, _script) = spawn_through(&hub, &proxy, &[], &[]);
    wait_for_stall(&proxy).await;
    assert_eq!(upkeep.leftover_temp_entries(), 1, "the partial clone is on disk");
    signal(&child);
    let stderr = assert_interrupted(&upkeep, child).await;
    assert!(stderr.contains("the temporary clone was removed"), "{stderr}");
}

/// Fails on code that exits on the second interrupt without removing the clone in progress: the
/// server goes silent in the middle of the pack, so git work that only notices an interrupt
/// when data arrives never ends by itself.
#[tokio::test(flavor = "multi_thread")]
async fn a_double_interrupt_during_a_large_clone_exits_130_and_leaves_no_directory() {
    let origin = large_repository(400, 64 * 1024);
    let hub = Hub::serving(&origin, None).await;
    let proxy = GitProxy::start(&hub.server.url(), Behaviour::StallAfter(4 << 20));
    let (upkeep, child, _script) = spawn_through(&hub, &proxy, &[], &[]);
    wait_for_stall(&proxy).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(upkeep.leftover_temp_entries(), 1, "the partial clone is on disk");
    signal(&child);
    tokio::time::sleep(Duration::from_millis(30)).await;
    signal(&child);
    assert_interrupted(&upkeep, child).await;
    assert_eq!(hub.branches(), "");
}

/// The same large clone, one interrupt: the clone stops mid-transfer and is removed.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_during_a_large_clone_exits_130_and_removes_the_clone() {
    let origin = large_repository(400, 64 * 1024);
    let hub = Hub::serving(&origin, None).await;
    // 25 MiB at 2 MiB/s: the clone is still downloading when the interrupt comes.
    let proxy = GitProxy::start(&hub.server.url(), Behaviour::Throttle(2 << 20));
    let (upkeep, child, _script) = spawn_through(&hub, &proxy, &[], &[]);
    wait_for_clone_dir(&upkeep).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    signal(&child);
    let stderr = assert_interrupted(&upkeep, child).await;
    assert!(stderr.contains("the temporary clone was removed"), "{stderr}");
}

/// `--timeout` is a budget (exit 4), also when it runs out while a push waits on a silent
/// server. Fails on code whose push cannot be interrupted: the run never ends.
#[tokio::test(flavor = "multi_thread")]
async fn timeout_during_a_stalled_push_ends_the_run_with_exit_4() {
    let hub = Hub::start(Some("tok-stall-push")).await;
    let proxy = GitProxy::start(&hub.server.url(), Behaviour::Stall("git-receive-pack"));
    let (upkeep, child, _script) = spawn_through(&hub, &proxy, &["--timeout", "3s"], &[]);
    let (code, stderr, took) = wait_at_most(child, Duration::from_secs(30)).await;
    assert_eq!(code, Some(4), "{stderr}");
    assert!(proxy.stalls() >= 1, "the push reached the stalling server");
    assert!(took < Duration::from_secs(9), "took {took:?}");
    assert!(stderr.contains("--timeout"), "{stderr}");
    assert_eq!(upkeep.leftover_temp_entries(), 0);
    assert_eq!(hub.pull_requests_opened().await, 0, "nothing opened");
}

/// Without `--timeout`, a fetch the server stops answering fails after the stall timeout
/// (exit 1) with a message that says so.
#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_fetch_fails_after_the_stall_timeout() {
    let hub = Hub::start(None).await;
    let proxy = GitProxy::start(&hub.server.url(), Behaviour::Stall("git-upload-pack"));
    let (upkeep, child, _script) = spawn_through(&hub, &proxy, &[], &[("UPKEEP_GIT_STALL_TIMEOUT", "2")]);
    let (code, stderr, took) = wait_at_most(child, Duration::from_secs(30)).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("stalled") && stderr.contains("2 s"), "{stderr}");
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert_eq!(upkeep.leftover_temp_entries(), 0);
}

/// A malformed stall timeout is a usage error before any work.
#[test]
fn a_bad_stall_timeout_is_a_usage_error() {
    let repo = TestRepo::new();
    let script = propose(&[]);
    let out = super::support::run_replay(
        Upkeep::new().env("UPKEEP_GIT_STALL_TIMEOUT", "soon"),
        &repo,
        &script,
        &[],
    );
    out.assert_code(2);
    assert!(out.stderr.contains("--git-stall-timeout"), "{}", out.stderr);
}

/// The source of a local clone is untrusted too: a `commondir` file in its git directory would
/// make every write (the bot branch, its objects, its description) land in another repository.
/// Fails on code that writes the branch wherever libgit2 resolves the source to.
#[test]
fn a_local_source_whose_commondir_points_elsewhere_gets_no_writes() {
    let source = TestRepo::new();
    let elsewhere = TestRepo::new();
    let refs_before = elsewhere.refs();
    let config_before = std::fs::read_to_string(elsewhere.path().join(".git/config")).expect("config");
    std::fs::write(
        source.path().join(".git/commondir"),
        format!("{}\n", elsewhere.path().join(".git").display()),
    )
    .expect("write commondir");
    let out = super::support::run_local(&source, &propose(&[]), &[]);
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("common directory"), "{}", out.stderr);
    assert_eq!(
        elsewhere.refs(),
        refs_before,
        "nothing written into the other repository"
    );
    assert_eq!(
        std::fs::read_to_string(elsewhere.path().join(".git/config")).expect("config"),
        config_before
    );
    assert_eq!(out.leftover_temp_entries, 0);
}

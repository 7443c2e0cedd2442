//! The file tools on the clone: every path escape refused with nothing written outside, and
//! listing that honours `.gitignore`.

use serde_json::json;

use super::super::support::{Script, TestRepo, finish, reply, run_local};

#[test]
fn every_path_escape_is_refused_and_nothing_is_written_outside() {
    let outside = tempfile::tempdir().expect("tempdir");
    let repo = TestRepo::new();
    std::os::unix::fs::symlink(outside.path(), repo.path().join("escape")).expect("symlink");
    repo.commit("add a symlink that points outside");
    let attempts = [
        json!({"path": "../outside.txt", "content": "x"}),
        json!({"path": "src/../../outside.txt", "content": "x"}),
        json!({"path": outside.path().join("abs.txt").display().to_string(), "content": "x"}),
        json!({"path": ".git/config", "content": "x"}),
        json!({"path": ".git/hooks/pre-commit", "content": "x"}),
        json!({"path": "escape/through-link.txt", "content": "x"}),
        json!({"path": ".github/workflows/ci.yml", "content": "x"}),
    ];
    let mut replies: Vec<String> = attempts
        .iter()
        .map(|args| reply("escape", &[("write_file", args.clone())]))
        .collect();
    replies.push(reply(
        "read outside",
        &[("read_file", json!({"path": "escape/secret.txt"}))],
    ));
    replies.push(finish("no_tasks"));
    std::fs::write(outside.path().join("secret.txt"), "outside secret").expect("write");
    let out = run_local(&repo, &Script::new(&replies), &["--task", "t"]);
    out.assert_code(0);
    let results = out.events_of("tool_result");
    let writes: Vec<_> = results.iter().filter(|e| e["tool"] == "write_file").collect();
    assert_eq!(writes.len(), attempts.len());
    for result in &writes {
        assert_eq!(result["ok"], false, "{result}");
    }
    let read = results
        .iter()
        .find(|e| e["tool"] == "read_file")
        .expect("read attempted");
    assert_eq!(read["ok"], false);
    assert!(!read["output"].as_str().unwrap_or("").contains("outside secret"));
    let outside_entries: Vec<_> = std::fs::read_dir(outside.path())
        .expect("read")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        outside_entries,
        vec![std::ffi::OsString::from("secret.txt")],
        "nothing written outside"
    );
    assert!(!repo.path().parent().expect("parent").join("outside.txt").exists());
}

#[test]
fn list_files_honours_gitignore() {
    let repo = TestRepo::with_files(&[(".gitignore", "build/\n*.log\n"), ("src/a.rs", "a\n")]);
    std::fs::create_dir_all(repo.path().join("build")).expect("mkdir");
    let script = Script::new(&[
        reply(
            "list",
            &[
                ("write_file", json!({"path": "build/out.bin", "content": "x"})),
                ("write_file", json!({"path": "debug.log", "content": "x"})),
                ("list_files", json!({})),
                ("search_files", json!({"pattern": "^a$"})),
            ],
        ),
        finish("no_tasks"),
    ]);
    let out = run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(0);
    let results = out.events_of("tool_result");
    let listing = results.iter().find(|e| e["tool"] == "list_files").expect("listed")["output"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(
        listing.contains("src/a.rs") && listing.contains(".gitignore"),
        "{listing}"
    );
    assert!(
        !listing.contains("build/out.bin") && !listing.contains("debug.log"),
        "{listing}"
    );
    let search = results.iter().find(|e| e["tool"] == "search_files").expect("searched")["output"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert_eq!(search, "src/a.rs:1: a");
}

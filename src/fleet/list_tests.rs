use super::*;

const SERVER: &str = "https://github.com";

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write list");
    path
}

#[test]
fn lines_with_comments_and_blank_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        dir.path(),
        "fleet.txt",
        "# the fleet\n\nocto/widgets\n  octo/gadgets   # the other one\nhttps://example.com/Team/Tool.git\n",
    );
    let entries = read_list(&path, SERVER).expect("valid list");
    let names: Vec<(&str, &str)> = entries.iter().map(|e| (e.display.as_str(), e.key.as_str())).collect();
    assert_eq!(
        names,
        [
            ("octo/widgets", "octo/widgets"),
            ("octo/gadgets", "octo/gadgets"),
            ("https://example.com/Team/Tool.git", "example.com/Team/Tool"),
        ]
    );
    assert_eq!(entries[0].repo_arg, "octo/widgets");
}

#[test]
fn one_repository_under_several_names_is_one_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        dir.path(),
        "fleet.txt",
        "Octo/Widgets\nhttps://github.com/octo/widgets.git\nhttps://github.com/octo/widgets\nocto/other\n",
    );
    let (kept, repeated) = dedupe(read_list(&path, SERVER).expect("valid"));
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(repeated.len(), 2);
    assert_eq!(kept[0].key, "octo/widgets");
    assert_eq!(github_entry("Octo/Widgets", SERVER).key, "octo/widgets");
    assert_eq!(
        github_entry("octo/widgets", "https://ghe.example/").repo_arg,
        "https://ghe.example/octo/widgets.git"
    );
}

#[test]
fn urls_normalise_to_host_and_path() {
    for (url, key) in [
        ("ssh://git@Example.com/team/tool.git", "example.com/team/tool"),
        ("git@example.com:team/tool.git", "example.com/team/tool"),
        ("https://example.com/team/tool/", "example.com/team/tool"),
    ] {
        assert_eq!(normalised_url(url), key, "{url}");
    }
}

#[test]
fn relative_paths_are_relative_to_the_list() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("projects/one");
    std::fs::create_dir_all(&repo).expect("mkdir");
    let status = std::process::Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .arg(&repo)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .expect("git runs");
    assert!(status.success());
    let path = write(dir.path(), "fleet.txt", "projects/one\n");
    let entries = read_list(&path, SERVER).expect("valid");
    assert_eq!(entries[0].repo_arg, repo.display().to_string());
}

#[test]
fn a_toml_list_carries_per_repository_options() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        dir.path(),
        "fleet.toml",
        "[[repos]]\nrepo = \"octo/widgets\"\nmax_cost = 0.5\nreplay = \"script.jsonl\"\ndry_run = true\n\n[[repos]]\nrepo = \"octo/gadgets\"\n",
    );
    let entries = read_list(&path, SERVER).expect("valid");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].overrides.get("max_cost"), Some(&toml::Value::Float(0.5)));
    let script = dir.path().join("script.jsonl").display().to_string();
    assert_eq!(entries[0].overrides.get("replay"), Some(&toml::Value::String(script)));
    assert_eq!(entries[1].overrides, RunOverrides::default());

    let fleet = crate::cli::RunOptions {
        max_cost: Some(2.0),
        dry_run: false,
        ..Default::default()
    };
    let options = entries[0].overrides.apply(&fleet).expect("applies");
    assert_eq!(options.max_cost, Some(0.5));
    assert!(options.dry_run);

    let typo = write(dir.path(), "typo.toml", "[[repos]]\nrepo = \"o/r\"\nmax_cots = 1.0\n");
    let error = read_list(&typo, SERVER).expect_err("unknown key").to_string();
    assert!(error.contains("max_cots") && error.contains("[[repos]] #1"), "{error}");
    let missing = write(dir.path(), "missing.toml", "[[repos]]\nmax_cost = 1.0\n");
    assert!(
        read_list(&missing, SERVER)
            .expect_err("no repo")
            .to_string()
            .contains("needs `repo")
    );
}

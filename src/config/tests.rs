use super::*;
use crate::cli::RunArgs;

#[test]
fn owner_name_is_github_unless_a_path_exists() {
    let source = RepoSource::parse("octo/widgets", "https://ghe.example").expect("parses");
    assert_eq!(
        source,
        RepoSource::GitHub {
            owner: "octo".into(),
            name: "widgets".into(),
            clone_url: "https://ghe.example/octo/widgets.git".into()
        }
    );
    assert!(matches!(
        RepoSource::parse("https://github.com/a/b.git", DEFAULT_GITHUB_SERVER),
        Ok(RepoSource::GitHub { .. })
    ));
    assert!(matches!(
        RepoSource::parse("git@gitlab.com:a/b.git", DEFAULT_GITHUB_SERVER),
        Ok(RepoSource::Remote(_))
    ));
    assert!(RepoSource::parse("not a repo at all", DEFAULT_GITHUB_SERVER).is_err());
}

#[test]
fn credentials_in_a_repository_url_are_refused_without_echoing_them() {
    for spec in [
        "https://ghp_secretvalue123@github.com/o/r.git",
        "https://user:hunter2pass@example.com/o/r.git",
        "ssh://git:hunter2pass@example.com/o/r.git",
    ] {
        let error = RepoSource::parse(spec, DEFAULT_GITHUB_SERVER)
            .expect_err(spec)
            .to_string();
        assert!(error.contains("GITHUB_TOKEN"), "{error}");
        assert!(!error.contains("secretvalue") && !error.contains("hunter2"), "{error}");
    }
    assert!(RepoSource::parse("ssh://git@example.com/o/r.git", DEFAULT_GITHUB_SERVER).is_ok());
    assert!(RepoSource::parse("git@gitlab.com:a/b.git", DEFAULT_GITHUB_SERVER).is_ok());
}

#[test]
fn a_repository_cannot_loosen_the_operators_policy() {
    let error = FileConfig::parse_repository("[prices.\"gpt-4.1\"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n")
        .expect_err("prices are operator-only")
        .to_string();
    assert!(error.contains("`prices`"), "{error}");
    for value in ["/dev/stdin", "../outside", ".git/config", ".GIT/HEAD"] {
        let error = FileConfig::parse_repository(&format!("tasks_file = {value:?}"))
            .expect_err(value)
            .to_string();
        assert!(error.contains("`tasks_file`"), "{value}: {error}");
    }
    let repo = FileConfig::parse_repository("protected_paths = []\nmax_turns = 1000\n").expect("parses");
    let config = test_config();
    let settings = config.repo_settings(&repo);
    assert!(settings.protected_paths.iter().any(|p| p == ".github/workflows/**"));
    assert!(settings.protected_paths.iter().any(|p| p == ".upkeep.toml"));
    assert_eq!(settings.max_turns, DEFAULT_MAX_TURNS);
    let lower = FileConfig::parse_repository("max_turns = 5\nprotected_paths = [\"LICENSE\"]").expect("parses");
    let settings = config.repo_settings(&lower);
    assert_eq!(settings.max_turns, 5);
    assert!(settings.protected_paths.iter().any(|p| p == "LICENSE"));
    assert!(settings.protected_paths.iter().any(|p| p == ".github/workflows/**"));
}

/// The command line's settings, which tests may change (a resolved [`Config`] cannot be).
fn test_config() -> RunSettings {
    let args = RunArgs {
        repo: ".".into(),
        options: crate::cli::RunOptions {
            replay: Some(PathBuf::from("Cargo.toml")),
            ..crate::cli::RunOptions::default()
        },
        ..RunArgs::default()
    };
    super::resolve::command_line(&args, Purpose::Run).expect("a replay config on this checkout")
}

#[test]
fn unknown_keys_in_a_file_are_errors_naming_the_key() {
    let error = FileConfig::parse("max_turn = 3", ".upkeep.toml").expect_err("typo is refused");
    assert!(error.to_string().contains("max_turn"), "{error}");
    let error = FileConfig::parse("max_turns = \"many\"", ".upkeep.toml").expect_err("wrong type is refused");
    assert!(error.to_string().contains("max_turns"), "{error}");
}

#[test]
fn limits_are_operator_only() {
    let file = FileConfig::parse("[limits]\nprocesses = 10\n", ".upkeep.toml").expect("parses");
    assert_eq!(file.limits.and_then(|limits| limits.processes), Some(10));
    let error =
        FileConfig::parse_repository("[limits]\nprocesses = 10\n").expect_err("a repository may not set limits");
    assert!(error.to_string().contains("`limits`"), "{error}");
    assert!(FileConfig::parse_repository("").is_ok());
    let error = FileConfig::parse("[limits]\nmemory = 1\n", "ops.toml").expect_err("unknown key");
    assert!(error.to_string().contains("memory"), "{error}");
}

#[test]
fn the_base_and_the_label_resolve_in_one_place_with_the_same_precedence() {
    let mut config = test_config();
    let repo = FileConfig::parse_repository("base = \"develop\"\nlabel = \"bot\"\n").expect("parses");
    // Nothing from the operator: the repository's file decides, the defaults fill in before it.
    assert_eq!(config.operator_base(), None);
    assert_eq!(config.operator_label(), DEFAULT_LABEL);
    assert_eq!(config.repo_settings(&repo).base.as_deref(), Some("develop"));
    assert_eq!(config.repo_settings(&repo).label, "bot");
    // The operator's file outranks the repository's; a flag outranks both.
    config.operator.base = Some("stable".into());
    config.operator.label = Some("ops".into());
    assert_eq!(config.operator_base().as_deref(), Some("stable"));
    assert_eq!(config.operator_label(), "ops");
    assert_eq!(config.repo_settings(&repo).base.as_deref(), Some("stable"));
    config.overrides.base = Some("main".into());
    config.overrides.label = Some("flag".into());
    assert_eq!(config.operator_base().as_deref(), Some("main"));
    assert_eq!(config.operator_label(), "flag");
    let settings = config.repo_settings(&repo);
    assert_eq!(
        (settings.base.as_deref(), settings.label.as_str()),
        (Some("main"), "flag")
    );
}

/// A repository may spend fewer fix cycles than the operator allows, never more; nobody may
/// ask for more than the cap.
#[test]
fn max_fix_attempts_defaults_to_three_and_the_repository_only_lowers_it() {
    let mut config = test_config();
    let none = FileConfig::parse_repository("").expect("parses");
    assert_eq!(config.repo_settings(&none).max_fix_attempts, 3);
    let more = FileConfig::parse_repository("max_fix_attempts = 9").expect("parses");
    assert_eq!(config.repo_settings(&more).max_fix_attempts, 3);
    let fewer = FileConfig::parse_repository("max_fix_attempts = 1").expect("parses");
    assert_eq!(config.repo_settings(&fewer).max_fix_attempts, 1);
    config.operator = FileConfig::parse("max_fix_attempts = 5", "operator.toml").expect("parses");
    assert_eq!(config.repo_settings(&more).max_fix_attempts, 5);
    assert_eq!(config.repo_settings(&none).max_fix_attempts, 5);
    let error = FileConfig::parse("max_fix_attempts = 11", "operator.toml").expect_err("above the cap");
    assert!(error.to_string().contains("max_fix_attempts"), "{error}");
}

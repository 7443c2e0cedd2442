//! docs/fleet.md shows files and commands; here every list and config it shows is read by
//! upkeep, and every `upkeep` command it shows runs as written, in a directory holding the
//! files it names, against the GitHub fake (with `UPKEEP_REPLAY` standing in for the model).

use super::super::support::github_fleet::{FleetHub, minimal_repository};
use super::nothing_to_do;

/// The fenced code blocks of a Markdown text: (language, content).
fn code_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(language)) => current = Some((language.trim().to_owned(), String::new())),
            (Some(_), Some(_)) => blocks.extend(current.take()),
            (Some((_, content)), None) => {
                content.push_str(line);
                content.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

#[tokio::test(flavor = "multi_thread")]
async fn every_file_and_command_in_the_fleet_docs_works() {
    let docs = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/fleet.md"))
        .expect("docs/fleet.md");
    let blocks = code_blocks(&docs);
    let dir = tempfile::tempdir().expect("tempdir");
    // The reader's repository: `upkeep init` writes only at a work tree's root.
    super::super::support::git(dir.path(), &["init", "-q"]);
    let mut commands = Vec::new();
    let mut files = 0;
    for (language, content) in &blocks {
        let first = content.lines().next().unwrap_or_default();
        match (language.as_str(), first) {
            ("text" | "toml", "# fleet.txt" | "# fleet.toml") => {
                std::fs::write(dir.path().join(first.trim_start_matches("# ")), content).expect("write");
                files += 1;
            }
            ("toml", "# .upkeep.toml") => {
                let parsed =
                    upkeep::config::FileConfig::parse_repository(content).expect("the documented .upkeep.toml");
                assert!(parsed.schedule.is_some() && parsed.dashboard == Some(true));
            }
            ("sh", _) => commands.extend(content.lines().filter(|l| l.starts_with("upkeep ")).map(str::to_owned)),
            _ => {}
        }
    }
    assert_eq!(files, 2, "the list in both formats");
    assert_eq!(commands.len(), 4, "{commands:?}");

    let hub = FleetHub::start().await;
    for name in ["acme/widgets", "acme/gadgets"] {
        hub.add_repo(name, &[("README.md", "hi\n")]).await;
    }
    hub.serve_org(
        "acme",
        &[
            minimal_repository("acme/widgets", 1, &["upkeep"], false, false),
            minimal_repository("acme/gadgets", 2, &["upkeep"], false, false),
        ],
        100,
    )
    .await;
    let script = nothing_to_do();
    for command in commands {
        let words: Vec<&str> = command.split_whitespace().skip(1).collect();
        let out = hub
            .upkeep()
            .current_dir(dir.path())
            .env("UPKEEP_REPLAY", script.path())
            .args(&words)
            .run_async()
            .await;
        assert_eq!(out.code, Some(0), "{command}\n{}\n{}", out.stdout, out.stderr);
        if words[0] == "fleet" {
            assert!(out.stderr.contains(" of 2 repositories"), "{command}: {}", out.stderr);
        }
    }
    assert!(dir.path().join(".github/workflows/upkeep-fleet.yml").is_file());
}

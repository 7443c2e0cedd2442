//! `upkeep demo`: the whole pipeline offline, with no keys and no network.
//!
//! It creates a small sample repository, runs one real cycle against it with a scripted model
//! (the replay provider serving `src/demo_script.jsonl`), and the local forge opens a real pull
//! request: a pushed `upkeep/...` branch with its description. Then it shows the branch, the
//! description and the diff, and how to run upkeep on your own repository.

use std::io::Write;
use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use crate::cli::{DemoArgs, RunArgs, RunOptions};
use crate::exit::ExitStatus;
use crate::kinds::ForgeKind;

const SCRIPT: &str = include_str!("demo_script.jsonl");

const SAMPLE_FILES: &[(&str, &str)] = &[
    (
        "README.md",
        "# greet\n\nA tiny greeter. Run it and recieve a friendly greeting.\n\n## License\n\nMIT\n",
    ),
    (
        "greet.py",
        "import sys\n\n\ndef greet(name: str) -> str:\n    return f\"Hello, {name}!\"\n\n\nif __name__ == \"__main__\":\n    print(greet(sys.argv[1] if len(sys.argv) > 1 else \"world\"))\n",
    ),
    (
        "TODO.md",
        "# Tasks\n\n- [ ] Fix the typo in README.md and add a usage section\n- [ ] Add tests for greet()\n",
    ),
];

/// Creates the sample repository with one commit on `main`.
pub fn create_sample_repository(dir: &Path) -> Result<(), git2::Error> {
    crate::repo::setup::setup()?;
    crate::repo::setup::setup()?;
    let mut options = git2::RepositoryInitOptions::new();
    options.initial_head("main");
    let repo = git2::Repository::init_opts(dir, &options)?;
    for (name, content) in SAMPLE_FILES {
        std::fs::write(dir.join(name), content).map_err(|e| git2::Error::from_str(&e.to_string()))?;
    }
    let mut index = repo.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let signature = git2::Signature::now("Sample Maintainer", "maintainer@example.com")?;
    repo.commit(Some("HEAD"), &signature, &signature, "Initial commit", &tree, &[])?;
    Ok(())
}

/// The bot branches of `repo` with their descriptions and diffs against `main`.
fn describe_result(repo_dir: &Path) -> Result<String, git2::Error> {
    crate::repo::setup::setup()?;
    let repo = crate::repo::setup::open_repository(repo_dir)?;
    let config = repo.config()?;
    let main_tree = repo.revparse_single("main")?.peel_to_tree()?;
    let mut text = String::new();
    for entry in repo.branches(Some(git2::BranchType::Local))? {
        let (branch, _) = entry?;
        let Some(name) = branch.name()?.map(str::to_owned) else {
            continue;
        };
        if !name.starts_with(crate::repo::BOT_BRANCH_PREFIX) {
            continue;
        }
        let description = config
            .get_string(&format!("branch.{name}.description"))
            .unwrap_or_default();
        let tree = branch.get().peel_to_tree()?;
        let diff = repo.diff_tree_to_tree(Some(&main_tree), Some(&tree), None)?;
        let patch = crate::repo::patch_text(&diff)?;
        text.push_str(&format!(
            "branch: {name}\n\ndescription (git config branch.{name}.description):\n{}\n\ndiff (git diff main {name}):\n{}\n",
            description.trim_end(),
            patch
        ));
    }
    Ok(text)
}

pub async fn run(args: &DemoArgs, cancel: CancellationToken) -> ExitStatus {
    // Registered for cleanup, so that a second Ctrl-C removes it too.
    let temp = match crate::repo::cleanup::TempRoot::create("upkeep-demo-", &crate::repo::cleanup::Scope::default()) {
        Ok(temp) => temp,
        Err(error) => {
            eprintln!("upkeep demo: cannot create a temporary directory: {error}");
            return ExitStatus::Failure;
        }
    };
    let repo_dir: PathBuf = args.dir.clone().unwrap_or_else(|| temp.path().join("greet"));
    if repo_dir.exists()
        && std::fs::read_dir(&repo_dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        eprintln!(
            "upkeep demo: {} exists and is not empty; give a new directory to --dir",
            repo_dir.display()
        );
        return ExitStatus::Usage;
    }
    if let Err(error) = std::fs::create_dir_all(&repo_dir)
        .map_err(|e| e.to_string())
        .and_then(|()| create_sample_repository(&repo_dir).map_err(|e| e.message().to_owned()))
    {
        eprintln!("upkeep demo: cannot create the sample repository: {error}");
        return ExitStatus::Failure;
    }
    let script = temp.path().join("demo-script.jsonl");
    if let Err(error) = std::fs::write(&script, SCRIPT) {
        eprintln!("upkeep demo: cannot write the demo script: {error}");
        return ExitStatus::Failure;
    }
    eprintln!("upkeep demo: sample repository at {}", repo_dir.display());
    eprintln!("upkeep demo: the model is scripted (replay provider); no keys, no network\n");
    let run_args = RunArgs {
        repo: repo_dir.display().to_string(),
        options: RunOptions {
            replay: Some(script),
            forge: Some(ForgeKind::Local),
            ..RunOptions::default()
        },
        json: args.json,
        ..RunArgs::default()
    };
    let config = match crate::startup::for_run(&run_args, crate::config::Purpose::Run).await {
        Ok(config) => config,
        Err(error) => {
            eprintln!("upkeep demo: {error}");
            return ExitStatus::Usage;
        }
    };
    let status = crate::run::run(config, cancel).await.status();
    if status != ExitStatus::Done {
        return status;
    }
    let result = match describe_result(&repo_dir) {
        Ok(result) => result,
        Err(error) => {
            eprintln!("upkeep demo: cannot read the result: {}", error.message());
            return ExitStatus::Failure;
        }
    };
    // The result is what the demo produced: stdout, unless stdout carries JSON Lines events.
    let report = format!(
        "── the pull request, as the local forge recorded it in {}\n\n{result}",
        repo_dir.display()
    );
    if args.json {
        let _ = writeln!(std::io::stderr().lock(), "\n{report}");
    } else {
        let _ = writeln!(std::io::stdout().lock(), "{report}");
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "── the base branch `main` is unchanged; the change lives on the bot branch.{}\n\nRun upkeep on your own repository with a real model:\n  OPENAI_API_KEY=... upkeep run --repo /path/to/your/repo --task \"Fix the typos in the README\"\n  upkeep run --repo /path/to/your/repo --provider ollama --model qwen2.5-coder:14b --task \"Fix the typos in the README\"   # fully local\nSee README.md (and docs/) for GitHub, continuous mode and the other providers.",
        if args.dir.is_some() {
            format!("\n   Inspect it: git -C {} log --all --oneline", repo_dir.display())
        } else {
            String::new()
        }
    );
    ExitStatus::Done
}

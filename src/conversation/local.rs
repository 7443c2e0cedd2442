//! Questions about a local repository: asked, kept in its git config
//! ([`crate::repo::questions`]), answered with `upkeep run --repo PATH --answer TEXT`.
//!
//! Before any work, a run on a local repository looks at the questions kept there: with
//! `--answer`, it records the answer to the one question it selects and resumes that question's
//! task (its `--task` text or issue) with the exchange in the prompt; without, a question still
//! waiting is printed with the exact command that answers it, and the run ends with exit code 3
//! without cloning anything. An answered question whose run did not finish resumes by itself.

use std::path::{Path, PathBuf};

use crate::config::{Config, ConfigError, RepoSource, RunSettings};
use crate::kinds::ForgeKind;
use crate::repo::WorkspaceError;
use crate::repo::questions::{LocalQuestion, SECTION, answer_command, shell_quote};
use crate::repo::source::LocalSource;

/// Why the questions kept in the repository could not be applied to the run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResumeError {
    /// `--answer` (or the question it selects) does not fit what the repository keeps.
    #[error(transparent)]
    Usage(#[from] ConfigError),
    /// The repository's git config could not be read or written: a runtime failure.
    #[error("{action} in {}", path.display())]
    Repository {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: WorkspaceError,
    },
}

pub(crate) use crate::config::LocalResume;

/// Reads the questions kept in a local repository and selects the one `--answer` answers (or
/// an answered one to resume), writing nothing: [`record_answer`] keeps the answer once a run
/// starts with it. [`Config::resolve`] makes the resumed question's task and issue the run's.
pub(crate) async fn read(config: &RunSettings) -> Result<LocalResume, ResumeError> {
    let (ForgeKind::Local, RepoSource::Local(path)) = (config.forge, &config.source) else {
        return Ok(LocalResume::Nothing);
    };
    let path = path.clone();
    let source = LocalSource::new(path.clone());
    let questions = source.questions().await.map_err(|source| ResumeError::Repository {
        action: "reading upkeep's questions",
        path: path.clone(),
        source,
    })?;
    let selected = match (config.issue, &config.task) {
        (Some(number), _) => Some(LocalQuestion::key_for(Some(number), None)),
        (None, Some(task)) => Some(LocalQuestion::key_for(None, Some(&crate::forge::task::task_key(task)))),
        (None, None) => None,
    };
    let relevant: Vec<LocalQuestion> = questions
        .into_iter()
        .filter(|q| selected.as_ref().is_none_or(|key| &q.key == key))
        .collect();
    let chosen = match (&config.answer, relevant.as_slice()) {
        (Some(_), []) => {
            return Err(ConfigError::key(
                "--answer",
                format!(
                    "no question from upkeep waits in {} (`git -C {} config --get-regexp '^{SECTION}\\.'` lists them)",
                    path.display(),
                    shell_quote(&path.display().to_string())
                ),
            )
            .into());
        }
        (Some(answer), [one]) => LocalQuestion {
            answer: Some(answer.clone()),
            ..one.clone()
        },
        (Some(_), many) => {
            let commands: Vec<String> = many.iter().map(|q| format!("  {}", answer_command(&path, q))).collect();
            return Err(ConfigError::key(
                "--answer",
                format!(
                    "{} questions wait in {}; answer one at a time:\n{}",
                    many.len(),
                    path.display(),
                    commands.join("\n")
                ),
            )
            .into());
        }
        (None, questions) => {
            let pending: Vec<LocalQuestion> = questions.iter().filter(|q| q.answer.is_none()).cloned().collect();
            if !pending.is_empty() {
                return Ok(LocalResume::Pending(pending));
            }
            match questions.first() {
                Some(answered) => answered.clone(),
                None => return Ok(LocalResume::Nothing),
            }
        }
    };
    Ok(LocalResume::Resume(chosen))
}

/// Keeps the `--answer` of the question a run resumes in the repository, so that a run that
/// does not finish resumes it by itself next time. Nothing to do without `--answer`.
pub(crate) async fn record_answer(config: &Config, resumed: &LocalQuestion) -> Result<(), ResumeError> {
    let (Some(answer), RepoSource::Local(path)) = (&config.answer, &config.source) else {
        return Ok(());
    };
    LocalSource::new(path.clone())
        .record_answer(&resumed.key, answer)
        .await
        .map_err(|source| ResumeError::Repository {
            action: "recording the answer",
            path: path.clone(),
            source,
        })
}

/// Forgets a resumed question once a cycle ended with its exchange in the prompt.
pub(crate) async fn settle(config: &Config, resumed: &LocalQuestion) -> Result<(), String> {
    let RepoSource::Local(path) = &config.source else {
        return Ok(());
    };
    LocalSource::new(path.clone())
        .forget_question(&resumed.key)
        .await
        .map_err(|error| {
            format!(
                "could not remove the answered question from {}: {error}",
                path.display()
            )
        })
}

/// What people read about waiting questions: each question and the command that answers it.
pub(crate) fn describe_pending(path: &Path, pending: &[LocalQuestion]) -> String {
    let mut text = String::new();
    for question in pending {
        let about = match (question.issue, &question.task) {
            (Some(number), _) => format!(" about issue #{number}"),
            (None, Some(task)) => format!(
                " about the task \"{}\"",
                crate::text::marked(crate::text::prefix_chars(task.trim(), 80), "…")
            ),
            (None, None) => String::new(),
        };
        let body: String = question.question.lines().map(|line| format!("│ {line}\n")).collect();
        text.push_str(&format!(
            "upkeep asked a question{about} and waits for the answer:\n{body}answer it with:\n  {}\n",
            answer_command(path, question)
        ));
    }
    text
}

//! Questions the bot asked about a local repository (the `local` forge), kept in that
//! repository's own git configuration, where `git config` shows them and nothing else reads them:
//!
//! ```text
//! [upkeep-question "issue-7"]          # or "task-<key of the --task text>", or "next"
//!     question = Keep the old name as an alias?
//!     issue = 7                        # when it was about an issue
//!     task = Rename greet to hello     # when it was about a --task
//!     asked = 2025-01-01T12:00:00Z
//!     answer = Yes, for one release    # once `upkeep run --answer` gave one
//! ```
//!
//! One question per task: asking again about the same task replaces it. A question stays until a
//! run resumed from its answer ends (with a pull request, nothing to do, or a new question), so
//! an answer is never lost to a run that failed. Written and read like the branch descriptions
//! beside it, through [`LocalSource`]'s checked open (no `commondir` or include redirects the
//! write), on a blocking thread. Printed with the exact command that answers each one
//! ([`where_to_answer`]).

use std::path::Path;

use git2::Repository;

use super::git::WorkspaceError;
use super::source::LocalSource;

/// The git config section that holds the questions.
pub(crate) const SECTION: &str = "upkeep-question";

/// A question kept in the source repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalQuestion {
    /// The subsection: `issue-<N>`, `task-<key>` or `next`.
    pub key: String,
    pub question: String,
    pub answer: Option<String>,
    pub issue: Option<u64>,
    /// The `--task` text the question was about, so that answering resumes the same task.
    pub task: Option<String>,
    pub asked: Option<String>,
}

impl LocalQuestion {
    /// The key of a question about `issue`, or else the task with `task_key`, or else the
    /// backlog.
    pub fn key_for(issue: Option<u64>, task_key: Option<&str>) -> String {
        match (issue, task_key) {
            (Some(number), _) => format!("issue-{number}"),
            (None, Some(key)) => format!("task-{key}"),
            (None, None) => "next".to_owned(),
        }
    }
}

impl LocalSource {
    /// Every question kept in the repository, in key order.
    pub(crate) async fn questions(&self) -> Result<Vec<LocalQuestion>, WorkspaceError> {
        let source = self.clone();
        blocking(move || source.questions_blocking()).await
    }

    /// Keeps `question`, replacing any question with the same key.
    pub(crate) async fn record_question(&self, question: LocalQuestion) -> Result<(), WorkspaceError> {
        let source = self.clone();
        blocking(move || {
            let repo = source.open()?;
            remove(&repo, &question.key)?;
            let mut config = repo.config()?;
            let name = |variable: &str| format!("{SECTION}.{}.{variable}", question.key);
            config.set_str(&name("question"), &question.question)?;
            if let Some(issue) = question.issue {
                config.set_str(&name("issue"), &issue.to_string())?;
            }
            if let Some(task) = &question.task {
                config.set_str(&name("task"), task)?;
            }
            if let Some(asked) = &question.asked {
                config.set_str(&name("asked"), asked)?;
            }
            if let Some(answer) = &question.answer {
                config.set_str(&name("answer"), answer)?;
            }
            Ok(())
        })
        .await
    }

    /// Records the answer to the question with `key`.
    pub(crate) async fn record_answer(&self, key: &str, answer: &str) -> Result<(), WorkspaceError> {
        let (source, key, answer) = (self.clone(), key.to_owned(), answer.to_owned());
        blocking(move || {
            let repo = source.open()?;
            repo.config()?.set_str(&format!("{SECTION}.{key}.answer"), &answer)?;
            Ok(())
        })
        .await
    }

    /// Forgets the question with `key` (its exchange reached a cycle that ended).
    pub(crate) async fn forget_question(&self, key: &str) -> Result<(), WorkspaceError> {
        let (source, key) = (self.clone(), key.to_owned());
        blocking(move || remove(&source.open()?, &key)).await
    }

    fn questions_blocking(&self) -> Result<Vec<LocalQuestion>, WorkspaceError> {
        let repo = self.open()?;
        let config = repo.config()?.snapshot()?;
        let mut questions: Vec<LocalQuestion> = Vec::new();
        let pattern = format!("^{}\\.", regex::escape(SECTION));
        let mut entries = config.entries(Some(&pattern))?;
        while let Some(entry) = entries.next() {
            let entry = entry?;
            let (Ok(name), Ok(value)) = (entry.name(), entry.value()) else {
                continue;
            };
            // `upkeep-question.<key>.<variable>`: the key may itself contain dots.
            let Some(rest) = name.strip_prefix(SECTION).and_then(|r| r.strip_prefix('.')) else {
                continue;
            };
            let Some((key, variable)) = rest.rsplit_once('.') else {
                continue;
            };
            let index = match questions.iter().position(|q| q.key == key) {
                Some(index) => index,
                None => {
                    questions.push(LocalQuestion {
                        key: key.to_owned(),
                        question: String::new(),
                        answer: None,
                        issue: None,
                        task: None,
                        asked: None,
                    });
                    questions.len() - 1
                }
            };
            let question = &mut questions[index];
            match variable {
                "question" => question.question = value.to_owned(),
                "answer" => question.answer = Some(value.to_owned()),
                "issue" => question.issue = value.parse().ok(),
                "task" => question.task = Some(value.to_owned()),
                "asked" => question.asked = Some(value.to_owned()),
                _ => {}
            }
        }
        questions.retain(|q| !q.question.trim().is_empty());
        questions.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(questions)
    }
}

/// Removes the subsection `key` (every variable of it); absent is fine.
fn remove(repo: &Repository, key: &str) -> Result<(), WorkspaceError> {
    let mut config = repo.config()?;
    for variable in ["question", "answer", "issue", "task", "asked"] {
        match config.remove(&format!("{SECTION}.{key}.{variable}")) {
            Ok(()) => {}
            Err(error) if error.code() == git2::ErrorCode::NotFound => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, WorkspaceError> + Send + 'static,
) -> Result<T, WorkspaceError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|join| WorkspaceError::Io(std::io::Error::other(join.to_string())))?
}

/// The line printed when a question is recorded: where, and the command that answers it.
pub(crate) fn where_to_answer(path: &Path, question: &LocalQuestion) -> String {
    format!(
        "question recorded in {} (git config {SECTION}.{}.question); answer it with:\n  {}",
        path.display(),
        question.key,
        answer_command(path, question)
    )
}

/// The exact command that answers `question`.
pub(crate) fn answer_command(path: &Path, question: &LocalQuestion) -> String {
    let selector = match (question.issue, &question.task) {
        (Some(number), _) => format!(" --issue {number}"),
        (None, Some(task)) => format!(" --task {}", shell_quote(task)),
        (None, None) => String::new(),
    };
    format!(
        "upkeep run --repo {}{selector} --answer 'YOUR ANSWER'",
        shell_quote(&path.display().to_string())
    )
}

/// `text` as one POSIX shell word.
pub(crate) fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_command_selects_the_question_and_survives_the_shell() {
        let question = LocalQuestion {
            key: "issue-7".into(),
            question: "q".into(),
            answer: None,
            issue: Some(7),
            task: None,
            asked: None,
        };
        assert_eq!(
            answer_command(Path::new("/src/my repo"), &question),
            "upkeep run --repo '/src/my repo' --issue 7 --answer 'YOUR ANSWER'"
        );
        let task = LocalQuestion {
            issue: None,
            task: Some("Fix Bob's typo".into()),
            ..question
        };
        assert_eq!(
            answer_command(Path::new("/src/r"), &task),
            "upkeep run --repo /src/r --task 'Fix Bob'\\''s typo' --answer 'YOUR ANSWER'"
        );
    }
}

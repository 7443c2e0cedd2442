//! The fleet's repositories: `--repos FILE` (lines, or TOML with per-repository options) or an
//! organisation listing, each normalised so that one repository named two ways is one entry
//! and every worker computes the same shard for it.
//!
//! `--repos FILE`, one repository per line: `owner/name` (GitHub), a URL (`https://`, `ssh://`,
//! `git@host:path`, `file://`) or a local path (relative to the file's directory); blank lines
//! and `#` comments (whole-line or after the entry) are ignored. A file whose name ends in
//! `.toml` holds `[[repos]]` tables instead: `repo = "..."` plus any of the run options of
//! [`super::overrides::RunOverrides`] for that repository.
//!
//! The normalised name (the shard key): `owner/name` lower-cased for GitHub (GitHub names are
//! case-insensitive; `https://github.com/Owner/Name.git` is `owner/name` too); `host/path` for
//! other URLs (host lower-cased, `.git` and trailing `/` dropped); the canonical path for local
//! repositories.

use std::path::Path;

use serde::Deserialize;

use super::overrides::RunOverrides;
use crate::config::{ConfigError, RepoSource};

/// Largest list file read.
const MAX_LIST_BYTES: u64 = 16 * 1024 * 1024;

/// One repository of the fleet.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FleetEntry {
    /// What the table and the events call it: `owner/name`, a URL, or a path.
    pub display: String,
    /// What the repository's run gets as `--repo`.
    pub repo_arg: String,
    /// The normalised name: the shard key, and how duplicates are found.
    pub key: String,
    /// Run options for this repository alone (TOML lists).
    pub overrides: RunOverrides,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlList {
    #[serde(default)]
    repos: Vec<toml::Table>,
}

/// Reads `--repos FILE`. Entries keep the file's order; a repository listed twice (under any of
/// its names) is kept once, with a warning from the caller (see [`dedupe`]).
pub(crate) fn read_list(path: &Path, github_server: &str) -> Result<Vec<FleetEntry>, ConfigError> {
    let text = read_capped(path)?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let is_toml = path
        .extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("toml"));
    if is_toml {
        let list: TomlList =
            toml::from_str(&text).map_err(|error| ConfigError(format!("--repos {}: {error}", path.display())))?;
        return list
            .repos
            .into_iter()
            .enumerate()
            .map(|(index, mut table)| {
                let problem = |error: String| {
                    ConfigError(format!("--repos {}: [[repos]] #{}: {error}", path.display(), index + 1))
                };
                let repo = match table.remove("repo") {
                    Some(toml::Value::String(repo)) => repo,
                    _ => return Err(problem("needs `repo = \"owner/name\"` (or a URL or a path)".into())),
                };
                let overrides = RunOverrides::parse(table, &dir).map_err(problem)?;
                let mut fleet_entry = entry_for(&repo, &dir, github_server).map_err(problem)?;
                fleet_entry.overrides = overrides;
                Ok(fleet_entry)
            })
            .collect();
    }
    text.lines()
        .enumerate()
        .filter_map(|(number, line)| {
            let entry = line.split_once(" #").map_or(line, |(entry, _)| entry).trim();
            (!entry.is_empty() && !entry.starts_with('#')).then_some((number + 1, entry))
        })
        .map(|(number, entry)| {
            entry_for(entry, &dir, github_server)
                .map_err(|error| ConfigError(format!("--repos {}:{number}: {error}", path.display())))
        })
        .collect()
}

fn read_capped(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read as _;
    let file =
        std::fs::File::open(path).map_err(|error| ConfigError(format!("--repos {}: {error}", path.display())))?;
    let mut text = String::new();
    file.take(MAX_LIST_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|error| ConfigError(format!("--repos {}: {error}", path.display())))?;
    if text.len() as u64 > MAX_LIST_BYTES {
        return Err(ConfigError(format!(
            "--repos {}: larger than {} MiB",
            path.display(),
            MAX_LIST_BYTES >> 20
        )));
    }
    Ok(text)
}

/// The entry for one line of a list. Entries that do not parse as a repository still get an
/// entry (their run reports the problem), so one bad line never stops the fleet.
fn entry_for(spec: &str, dir: &Path, github_server: &str) -> Result<FleetEntry, String> {
    let spec = spec.trim();
    if spec.chars().any(char::is_control) {
        return Err(format!("{spec:?} contains control characters"));
    }
    let is_url = spec.contains("://") || (spec.contains('@') && spec.contains(':'));
    // A relative local path is relative to the list, not to wherever upkeep was started.
    let local = (!is_url && !Path::new(spec).is_absolute())
        .then(|| dir.join(spec))
        .filter(|candidate| candidate.exists());
    let repo_arg = local
        .as_ref()
        .map_or_else(|| spec.to_owned(), |path| path.display().to_string());
    let (display, key) = match RepoSource::parse(&repo_arg, github_server) {
        Ok(source) => (source.display_name(), normalised_name(&source)),
        Err(_) => (spec.to_owned(), spec.to_owned()),
    };
    Ok(FleetEntry {
        display,
        repo_arg,
        key,
        overrides: RunOverrides::default(),
    })
}

/// An entry of an organisation's listing (`owner/name` as GitHub gives it), cloned from the
/// operator's GitHub server.
pub(crate) fn github_entry(full_name: &str, github_server: &str) -> FleetEntry {
    FleetEntry {
        display: full_name.to_owned(),
        repo_arg: format!("{}/{full_name}.git", github_server.trim_end_matches('/')),
        key: full_name.to_ascii_lowercase(),
        overrides: RunOverrides::default(),
    }
}

/// The normalised name of a repository (see the module documentation).
pub(crate) fn normalised_name(source: &RepoSource) -> String {
    match source {
        RepoSource::GitHub { owner, name, .. } => format!("{owner}/{name}").to_ascii_lowercase(),
        RepoSource::Local(path) => path.display().to_string(),
        RepoSource::Remote(url) => normalised_url(url),
    }
}

fn normalised_url(url: &str) -> String {
    let rest = match url.split_once("://") {
        Some((_, rest)) => rest.to_owned(),
        // `git@host:path`
        None => url.replacen(':', "/", 1),
    };
    let rest = rest
        .rsplit_once('@')
        .map_or(rest.as_str(), |(_, host_and_path)| host_and_path);
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path).trim_end_matches('/');
    format!("{}/{path}", host.to_ascii_lowercase())
}

/// Keeps the first entry of each normalised name; returns the names that were listed twice.
pub(crate) fn dedupe(entries: Vec<FleetEntry>) -> (Vec<FleetEntry>, Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    let mut kept = Vec::with_capacity(entries.len());
    let mut repeated = Vec::new();
    for entry in entries {
        if seen.insert(entry.key.clone()) {
            kept.push(entry);
        } else {
            repeated.push(entry.display);
        }
    }
    (kept, repeated)
}

#[cfg(test)]
#[path = "list_tests.rs"]
mod tests;

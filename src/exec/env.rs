//! The environment a command gets: an allowlist, never upkeep's own environment.
//!
//! Why: upkeep's environment holds its credentials (`GITHUB_TOKEN`, API keys). A command gets
//! only the base variables a build needs ([`BASE_ENVIRONMENT`]) and the names the operator
//! passes with `--env`, with upkeep's values; a name that looks like a credential holder is
//! refused even when passed.

/// Variables taken from upkeep's own environment for every command: enough for tools to find
/// programs, a home directory, a locale and a temporary directory, and nothing that identifies
/// or authorises anyone.
pub(crate) const BASE_ENVIRONMENT: [&str; 8] = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "TZ", "TMPDIR"];

// Names that hold credentials by convention (upkeep's own credential variables) are refused
// even when an operator passes them.
use crate::secrets::SECRET_VARIABLES as SECRET_NAMES;
/// Fragments that mark a name as a credential holder (`NPM_TOKEN`, `AWS_SECRET_ACCESS_KEY`...).
const SECRET_FRAGMENTS: [&str; 7] = [
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "API_KEY",
    "PRIVATE_KEY",
    "CREDENTIAL",
];

/// The environment for a command: the base variables ([`BASE_ENVIRONMENT`]) and the names in
/// `pass`, with the values upkeep itself has (unset ones are left out). A name that looks like a
/// credential holder is never included, even when passed; each refusal is logged by name only.
pub fn allowlisted_environment(pass: &[String]) -> Vec<(String, String)> {
    allowlisted_from(pass, |name| std::env::var_os(name))
}

fn allowlisted_from(pass: &[String], lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let names = BASE_ENVIRONMENT.iter().copied().chain(pass.iter().map(String::as_str));
    for name in names {
        if env.iter().any(|(seen, _)| seen == name) {
            continue;
        }
        if is_secret_name(name) {
            tracing::warn!(variable = name, "not passing a credential-like variable to commands");
            continue;
        }
        match lookup(name).map(|value| value.into_string()) {
            Some(Ok(value)) => env.push((name.to_owned(), value)),
            Some(Err(_)) => {
                tracing::warn!(variable = name, "not passing a variable whose value is not UTF-8");
            }
            None => {}
        }
    }
    env
}

/// The environment of a command whose scratch directory is `scratch`: the allowlist, with
/// `TMPDIR` and `HOME` pointing into the scratch directory (private, writable, removed with the
/// clone: caches and dotfiles a tool writes go there, and no file of upkeep's user's home is
/// read by accident), and `RUSTUP_HOME` and `CARGO_HOME` naming the operator's toolchains,
/// which stay readable (see `readable`), so that rustup's proxies still find them.
pub fn command_environment(pass: &[String], scratch: &std::path::Path) -> Vec<(String, String)> {
    let scratch = scratch.display().to_string();
    let mut env = allowlisted_environment(pass);
    let homes = super::readable::toolchain_homes();
    env.retain(|(name, _)| name != "TMPDIR" && name != "HOME" && !homes.iter().any(|(home, _)| home == name));
    env.push(("TMPDIR".into(), scratch.clone()));
    env.push(("HOME".into(), scratch));
    env.extend(
        homes
            .into_iter()
            .map(|(name, dir)| (name.to_owned(), dir.display().to_string())),
    );
    env
}

/// Whether a variable name looks like it holds a credential.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAMES.contains(&upper.as_str()) || SECRET_FRAGMENTS.iter().any(|fragment| upper.contains(fragment))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_recognised() {
        for name in [
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "NPM_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "my_api_key",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "RUST_BACKTRACE", "CARGO_TERM_COLOR", "LANG"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn allowlist_takes_base_and_passed_names_but_no_secrets() {
        let lookup = |name: &str| match name {
            "PATH" => Some("/usr/bin:/bin".into()),
            "HOME" => Some("/home/bot".into()),
            "GITHUB_TOKEN" => Some("ghp_secret".into()),
            "EXTRA" => Some("1".into()),
            "SHELL" => Some("/bin/bash".into()),
            _ => None,
        };
        let env = allowlisted_from(
            &["GITHUB_TOKEN".into(), "EXTRA".into(), "UNSET".into(), "PATH".into()],
            lookup,
        );
        assert_eq!(
            env,
            [
                ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
                ("HOME".to_owned(), "/home/bot".to_owned()),
                ("EXTRA".to_owned(), "1".to_owned()),
            ]
        );
    }
}

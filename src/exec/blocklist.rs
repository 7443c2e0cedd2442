//! A lexical blocklist for `run_shell_command`: a backstop, not the boundary.
//!
//! Why: a model can be talked into (or drift into) a destructive command. This refuses the
//! well-known catastrophes before they start, and says why, so the model can change course:
//! privilege escalation, powering off or rebooting, formatting or partitioning disks, writing
//! to raw devices, recursive deletion of `/`, home or a system directory, opening system paths
//! to everyone with `chmod`, and fork bombs.
//!
//! It is a backstop, not the protection. The check is lexical: it reads the command line as
//! text, without expanding variables, aliases, functions or scripts, so `$(printf sudo) id`,
//! `x=/; rm -rf $x`, a script file or another language's `os.system` all get through it. The
//! protection is what the rest of [`crate::exec`] enforces: an allowlisted environment, the
//! sandbox (Landlock confining writes to the clone, no network, no capabilities, limits) and
//! the cleanup that leaves no process behind. Being lexical, it can also refuse a harmless line
//! that mentions one of these commands where a command could start (after `;`, `|`, `&&`,
//! `$(`... even inside quotes), which is why it looks only at command positions and not at
//! every occurrence of a word:
//! `grep -r sudo docs/` and `git commit -m "halt on error"` pass.

use std::sync::LazyLock;

use regex::{Captures, Regex};

/// Where a command may start: the beginning, after a separator or an opening of a command
/// substitution, subshell or group, or at the start of the script of `sh -c '...'`.
const COMMAND_START: &str = r#"(?:^|[;&|(){}\n`!]|\$\(|\b(?:sh|bash|dash|zsh|ksh|ash)\s+(?:-[A-Za-z]+\s+)*-[A-Za-z]*c\s+['"]?|\beval\s+['"]?)\s*"#;
/// Assignments and wrapper commands that run the command after them (`env X=1 cmd`, `nohup cmd`,
/// `timeout 5 cmd`, `xargs cmd`...), with their options and a numeric argument.
const WRAPPERS: &str = r"(?:(?:[A-Za-z_][A-Za-z0-9_]*=\S*|env|exec|command|builtin|nohup|time|nice|ionice|stdbuf|setsid|xargs|watch|chrt|taskset|unbuffer|sudo|doas|timeout|busybox)(?:\s+-{1,2}[^\s;&|]+)*(?:\s+\d[\w.]*)?\s+)*";
/// A directory before the command's name (`/usr/bin/sudo`) or a backslash defeating aliases.
const PATH_PREFIX: &str = r"\\?(?:[^\s;&|()'`]*/)?";
/// Where a command's name ends.
const NAME_END: &str = r#"(?:$|[\s;&|)`'"])"#;

/// Devices that are fine to write to.
const HARMLESS_DEVICE: &str = r"^(?:null|zero|full|stdout|stderr|stdin|tty|random|urandom|fd/\d+|pts/\d+|shm/.*)$";

/// Top-level system directories (and a few well-known ones below them) whose recursive
/// deletion or permission change would wreck the machine.
const SYSTEM_DIRS: [&str; 31] = [
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/media",
    "/mnt",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/snap",
    "/srv",
    "/sys",
    "/usr",
    "/var",
    "/usr/bin",
    "/usr/lib",
    "/usr/lib64",
    "/usr/local",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/share",
    "/var/lib",
    "/var/log",
    "/etc/ssh",
];

/// A refusal by word: the pattern, and what to tell the model.
struct Rule {
    pattern: Regex,
    why: &'static str,
}

struct Guard {
    rules: Vec<Rule>,
    /// `rm`, `chmod`, `chown`... and the rest of their command, for argument checks.
    invocations: Regex,
    /// `of=/dev/X` and redirections to `/dev/X`.
    device_targets: Regex,
    harmless_device: Regex,
    fork_bomb: Regex,
}

/// Compiled once. A pattern that does not compile (a bug, caught by the tests) leaves the guard
/// refusing everything rather than nothing.
static GUARD: LazyLock<Result<Guard, regex::Error>> = LazyLock::new(Guard::new);

fn at_command(names: &str, rest: &str) -> String {
    format!("{COMMAND_START}{WRAPPERS}{PATH_PREFIX}(?:{names}){rest}")
}

impl Guard {
    fn new() -> Result<Guard, regex::Error> {
        let rule = |pattern: String, why: &'static str| -> Result<Rule, regex::Error> {
            Ok(Rule {
                pattern: Regex::new(&pattern)?,
                why,
            })
        };
        let rules = vec![
            rule(
                at_command("sudo|su|doas|pkexec|run0", NAME_END),
                "privilege escalation (sudo, su, doas, pkexec) is not available: commands run as the bot's own user",
            )?,
            rule(
                at_command("shutdown|reboot|poweroff|halt|kexec", NAME_END),
                "powering off or rebooting the machine is not allowed",
            )?,
            rule(
                at_command("init|telinit", r"\s+[06](?:$|[\s;&|)])"),
                "changing to runlevel 0 or 6 powers off or reboots the machine",
            )?,
            rule(
                at_command(
                    "systemctl|loginctl",
                    r"(?:\s+-\S+)*\s+(?:poweroff|reboot|halt|kexec|soft-reboot|suspend|hibernate|hybrid-sleep|suspend-then-hibernate|rescue|emergency)\b",
                ),
                "powering off, rebooting or suspending the machine is not allowed",
            )?,
            rule(
                at_command(
                    r"mkfs|mkfs\.[A-Za-z0-9]+|mke2fs|mkswap|mkdosfs|mkntfs|wipefs|blkdiscard",
                    NAME_END,
                ),
                "formatting or wiping filesystems is not allowed",
            )?,
            rule(
                at_command("fdisk|sfdisk|cfdisk|gdisk|sgdisk|parted", r"[^;&|\n]*\s/dev/"),
                "partitioning disks is not allowed",
            )?,
        ];
        Ok(Guard {
            rules,
            invocations: Regex::new(&at_command(
                "(rm|chmod|chown|chgrp|tee|shred|cp)",
                r#"(?:$|[\s'"])([^;&|\n)`]*)"#,
            ))?,
            device_targets: Regex::new(r"(?:\bof=|&>>?\s*|\d?>>?\|?\s*)/dev/([\w./+-]*)")?,
            harmless_device: Regex::new(HARMLESS_DEVICE)?,
            fork_bomb: Regex::new(
                r"(?:\bfunction\s+([\w:.-]+)\s*(?:\(\s*\))?|([\w:.-]+)\s*\(\s*\))\s*\{\s*([\w:.-]+)\s*\|\s*([\w:.-]+)\s*&",
            )?,
        })
    }

    fn check(&self, command: &str) -> Result<(), String> {
        for rule in &self.rules {
            if rule.pattern.is_match(command) {
                return Err(refusal(rule.why));
            }
        }
        if self.fork_bomb.captures_iter(command).any(|c| is_fork_bomb(&c)) {
            return Err(refusal(
                "a function that pipes into itself in the background is a fork bomb",
            ));
        }
        for found in self.device_targets.captures_iter(command) {
            let device = found.get(1).map_or("", |m| m.as_str());
            if !self.harmless_device.is_match(device) {
                return Err(refusal(&format!(
                    "writing to the raw device /dev/{device} is not allowed"
                )));
            }
        }
        for found in self.invocations.captures_iter(command) {
            let name = found.get(1).map_or("", |m| m.as_str());
            let args = words(found.get(2).map_or("", |m| m.as_str()));
            if let Some(why) = self.check_invocation(name, &args) {
                return Err(refusal(&why));
            }
        }
        Ok(())
    }

    fn check_invocation(&self, name: &str, args: &[String]) -> Option<String> {
        let parsed = Arguments::parse(args);
        match name {
            "rm" => {
                if parsed.long.iter().any(|flag| flag == "--no-preserve-root") {
                    return Some("`rm --no-preserve-root` is not allowed".to_owned());
                }
                let recursive = parsed.has_short(&['r', 'R']) || parsed.long.iter().any(|flag| flag == "--recursive");
                let target = parsed.operands.iter().find(|t| is_system_dir(t));
                match target {
                    Some(target) if recursive => Some(format!(
                        "recursive deletion of {target} is not allowed; delete paths inside the repository instead"
                    )),
                    _ => None,
                }
            }
            "chmod" => {
                let (recursive, mode, files) = chmod_arguments(args);
                if let Some(target) = files.iter().find(|t| is_system_dir(t)) {
                    if recursive {
                        return Some(format!("`chmod -R` on {target} is not allowed"));
                    }
                }
                if mode.is_some_and(grants_write_to_others) {
                    if let Some(target) = files.iter().find(|t| is_system_path(t)) {
                        return Some(format!(
                            "making the system path {target} writable by everyone is not allowed"
                        ));
                    }
                }
                None
            }
            "chown" | "chgrp" => {
                let recursive = parsed.has_short(&['R']) || parsed.long.iter().any(|flag| flag == "--recursive");
                // The first operand is the owner or group.
                let target = parsed.operands.iter().skip(1).find(|t| is_system_dir(t));
                match target {
                    Some(target) if recursive => Some(format!("`{name} -R` on {target} is not allowed")),
                    _ => None,
                }
            }
            "tee" | "shred" => parsed
                .operands
                .iter()
                .find(|t| self.is_raw_device(t))
                .map(|t| format!("writing to the raw device {t} is not allowed")),
            "cp" => parsed
                .operands
                .last()
                .filter(|t| parsed.operands.len() > 1 && self.is_raw_device(t))
                .map(|t| format!("writing to the raw device {t} is not allowed")),
            // (dd's `of=` targets are checked with the redirections.)
            _ => None,
        }
    }

    fn is_raw_device(&self, path: &str) -> bool {
        path.strip_prefix("/dev/")
            .is_some_and(|device| !self.harmless_device.is_match(device))
    }
}

/// Refuses the catastrophic commands listed in the module's documentation, saying why.
/// Lexical, so a backstop only (see the module's documentation).
pub(crate) fn check(command: &str) -> Result<(), String> {
    match &*GUARD {
        Ok(guard) => guard.check(command),
        Err(error) => Err(format!("the command guard is broken ({error}); refusing all commands")),
    }
}

fn refusal(why: &str) -> String {
    format!("refused: {why}. upkeep's command guard blocks this command; reach the goal another way.")
}

fn is_fork_bomb(found: &Captures<'_>) -> bool {
    let name = found.get(1).or_else(|| found.get(2)).map(|m| m.as_str());
    let left = found.get(3).map(|m| m.as_str());
    let right = found.get(4).map(|m| m.as_str());
    name.is_some() && name == left && name == right
}

/// The arguments of one invocation, sorted.
#[derive(Debug, Default)]
struct Arguments {
    /// Letters of short options (`-rf` gives `r`, `f`).
    short: Vec<char>,
    long: Vec<String>,
    operands: Vec<String>,
}

impl Arguments {
    fn parse(args: &[String]) -> Arguments {
        let mut parsed = Arguments::default();
        let mut options_ended = false;
        for arg in args {
            if options_ended || arg == "-" || !arg.starts_with('-') {
                parsed.operands.push(arg.clone());
            } else if arg == "--" {
                options_ended = true;
            } else if arg.starts_with("--") {
                parsed.long.push(arg.clone());
            } else {
                parsed.short.extend(arg.chars().skip(1));
            }
        }
        parsed
    }

    fn has_short(&self, letters: &[char]) -> bool {
        self.short.iter().any(|c| letters.contains(c))
    }
}

/// chmod's arguments: whether recursive, the mode, the files. The mode is the first operand,
/// or an option-like mode such as `-w` (which never holds `R`) if that comes first.
fn chmod_arguments(args: &[String]) -> (bool, Option<&str>, Vec<&String>) {
    let mut recursive = false;
    let mut mode: Option<&str> = None;
    let mut reference = false;
    let mut files = Vec::new();
    let mut options_ended = false;
    for arg in args {
        let option_like_mode = arg.len() > 1 && arg.chars().skip(1).all(|c| "rwxXst".contains(c));
        if options_ended || arg == "-" || !arg.starts_with('-') {
            if mode.is_none() && !reference {
                mode = Some(arg);
            } else {
                files.push(arg);
            }
        } else if arg == "--" {
            options_ended = true;
        } else if arg == "--recursive" {
            recursive = true;
        } else if arg.starts_with("--reference") {
            reference = true;
        } else if arg.starts_with("--") {
        } else if option_like_mode && mode.is_none() {
            mode = Some(arg);
        } else if arg.contains('R') {
            recursive = true;
        }
    }
    (recursive, mode, files)
}

/// Splits a command's arguments into words as a shell would, roughly: whitespace separates,
/// quotes group and are removed, a backslash escapes. Variables stay as written.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
                in_word = true;
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// The path as a comparable spelling: repeated and trailing slashes dropped, a trailing `/*`
/// or `/.` meaning the directory itself, `${HOME}` as `$HOME`, `/..` as `/`.
fn normalize(path: &str) -> String {
    let mut path = path.replace("${HOME}", "$HOME");
    while path.contains("//") {
        path = path.replace("//", "/");
    }
    loop {
        if let Some(stripped) = path.strip_suffix("/*").or_else(|| path.strip_suffix("/.")) {
            path = stripped.to_owned();
        } else if path.len() > 1 && path.ends_with('/') {
            path.pop();
        } else {
            break;
        }
    }
    if path.is_empty()
        || (path.starts_with('/')
            && path
                .split('/')
                .all(|part| part.is_empty() || part == "." || part == ".."))
    {
        return "/".to_owned();
    }
    path
}

/// `/`, home, or a system directory itself.
fn is_system_dir(path: &str) -> bool {
    let path = normalize(path);
    matches!(path.as_str(), "/" | "~" | "$HOME") || SYSTEM_DIRS.contains(&path.as_str())
}

/// A system directory or anything below one (home excepted: below it is the user's own).
fn is_system_path(path: &str) -> bool {
    let normalized = normalize(path);
    is_system_dir(path)
        || SYSTEM_DIRS
            .iter()
            .any(|dir| normalized.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/')) && *dir != "/home")
}

/// Whether a chmod mode gives write permission to others (`777`, `o+w`, `a=rwx`, `+w`).
fn grants_write_to_others(mode: &str) -> bool {
    if !mode.is_empty() && mode.chars().all(|c| c.is_ascii_digit()) {
        return mode
            .chars()
            .last()
            .and_then(|c| c.to_digit(8))
            .is_some_and(|others| others & 2 != 0);
    }
    mode.split(',').any(|clause| {
        let mut chars = clause.chars().peekable();
        let mut who = String::new();
        while let Some(c) = chars.next_if(|c| "ugoa".contains(*c)) {
            who.push(c);
        }
        let for_others = who.is_empty() || who.contains(['o', 'a']);
        // After the `who` part: operators each followed by permissions, e.g. `+w-x`.
        let mut granting = false;
        for c in chars {
            match c {
                '+' | '=' => granting = true,
                '-' => granting = false,
                'w' if granting && for_others => return true,
                _ => {}
            }
        }
        false
    })
}

#[cfg(test)]
#[path = "blocklist_tests.rs"]
mod tests;

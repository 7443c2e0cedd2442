//! Which tools the model is offered, and dispatch by name.
//!
//! Safe mode is the default: dangerous tools are not in [`ToolRegistry::specs`], so they are
//! absent from the prompt and from every schema sent to a provider. A call to one anyway is
//! [`Lookup::Rejected`] (never executed); a name nobody knows is [`Lookup::Unknown`].

use std::sync::Arc;

use super::{Tool, ToolClass, ToolSpec};

/// What the operator enabled.
#[derive(Debug, Clone, Default)]
pub struct ToolSelection {
    /// `--allow-dangerous-tools`: run_shell_command and every declared command tool.
    pub dangerous: bool,
    /// The cycle follows up review comments: `create_pull_request` takes `replies`.
    pub review: bool,
}

/// A tool beyond the built-ins (a declared command tool) and whether the operator allowed it.
pub(crate) type ExtraTool = (Box<dyn Tool>, bool);

pub enum Lookup<'a> {
    Found(&'a dyn Tool),
    Rejected(String),
    Unknown(String),
}

pub struct ToolRegistry {
    /// Shared, so a sub-agent's registry holds the very tools of the run (see [`ToolRegistry::subset`]).
    enabled: Vec<(ToolSpec, Arc<dyn Tool>)>,
    /// Known tools that are not enabled, with the reason a call to one is rejected.
    withheld: Vec<(String, String)>,
}

/// Every built-in tool, in the order the model sees them.
fn builtins(selection: &ToolSelection) -> Vec<Box<dyn Tool>> {
    vec![
        Box::new(super::read_file::ReadFile),
        Box::new(super::list_files::ListFiles),
        Box::new(super::search_files::SearchFiles),
        Box::new(super::write_file::WriteFile),
        Box::new(super::edit_file::EditFile),
        Box::new(super::create_pull_request::CreatePullRequest::new(selection.review)),
        Box::new(super::ask_question::AskQuestion),
        Box::new(super::finish::Finish),
        Box::new(super::run_shell_command::RunShellCommand),
    ]
}

impl ToolRegistry {
    /// The built-in tools, plus `extra` tools (declared command tools) that the operator allowed.
    pub fn new(selection: &ToolSelection, extra: Vec<ExtraTool>) -> Self {
        let mut registry = Self {
            enabled: Vec::new(),
            withheld: Vec::new(),
        };
        for tool in builtins(selection) {
            let spec = tool.spec();
            if spec.class == ToolClass::Safe || selection.dangerous {
                registry.enabled.push((spec, Arc::from(tool)));
            } else {
                registry.withheld.push((
                    spec.name,
                    "dangerous tools are disabled; upkeep runs in safe mode unless started with --allow-dangerous-tools".into(),
                ));
            }
        }
        for (tool, allowed) in extra {
            let spec = tool.spec();
            if allowed || selection.dangerous {
                registry.enabled.push((spec, Arc::from(tool)));
            } else {
                registry.withheld.push((
                    spec.name.clone(),
                    format!(
                        "the declared tool `{}` is not enabled; the operator enables it with --allow-tool {}",
                        spec.name, spec.name
                    ),
                ));
            }
        }
        registry
    }

    /// Offers one more tool (`delegate`, a sub-agent's `complete_task`).
    pub fn add(&mut self, tool: Box<dyn Tool>) {
        let spec = tool.spec();
        self.withheld.retain(|(name, _)| *name != spec.name);
        self.enabled.retain(|(enabled, _)| enabled.name != spec.name);
        self.enabled.push((spec, Arc::from(tool)));
    }

    /// Stops offering `name`; a call to it is rejected with `reason`.
    pub fn withhold(&mut self, name: &str, reason: &str) {
        self.enabled.retain(|(spec, _)| spec.name != name);
        self.withheld.retain(|(withheld, _)| withheld != name);
        self.withheld.push((name.to_owned(), reason.to_owned()));
    }

    /// Why `name` is withheld in this registry, when it is.
    pub fn withheld_reason(&self, name: &str) -> Option<&str> {
        self.withheld
            .iter()
            .find(|(withheld, _)| withheld == name)
            .map(|(_, reason)| reason.as_str())
    }

    /// Whether `name` is a tool of this registry, offered or withheld.
    pub fn knows(&self, name: &str) -> bool {
        self.enabled.iter().any(|(spec, _)| spec.name == name)
            || self.withheld.iter().any(|(withheld, _)| withheld == name)
    }

    /// A registry for a sub-agent: the tools named in `names` that this registry offers, in this
    /// registry's order. A named tool withheld here stays withheld (with this registry's reason);
    /// every other tool known here is withheld with `outside`, so a call to it is rejected, never
    /// run. A sub-agent can never hold a tool its caller's run does not offer.
    pub fn subset(&self, names: &[String], outside: &str) -> ToolRegistry {
        let named = |name: &str| names.iter().any(|wanted| wanted == name);
        let mut registry = ToolRegistry {
            enabled: Vec::new(),
            withheld: Vec::new(),
        };
        for (spec, tool) in &self.enabled {
            if named(&spec.name) {
                registry.enabled.push((spec.clone(), Arc::clone(tool)));
            } else {
                registry.withheld.push((spec.name.clone(), outside.to_owned()));
            }
        }
        for (name, reason) in &self.withheld {
            let reason = if named(name) {
                reason.clone()
            } else {
                outside.to_owned()
            };
            registry.withheld.push((name.clone(), reason));
        }
        registry
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.enabled.iter().map(|(spec, _)| spec.clone()).collect()
    }

    pub fn lookup(&self, name: &str) -> Lookup<'_> {
        if let Some((_, tool)) = self.enabled.iter().find(|(spec, _)| spec.name == name) {
            return Lookup::Found(tool.as_ref());
        }
        if let Some((_, reason)) = self.withheld.iter().find(|(withheld, _)| withheld == name) {
            return Lookup::Rejected(reason.clone());
        }
        let known: Vec<&str> = self.enabled.iter().map(|(spec, _)| spec.name.as_str()).collect();
        Lookup::Unknown(format!(
            "unknown tool `{name}`; the available tools are: {}",
            known.join(", ")
        ))
    }
}

//! The providers sub-agents ask when they name another model than the run's (`--review-model`,
//! `[[agents]] model`): the run's provider settings (API, endpoint, key, timeouts) with that
//! model, built once per run so a bad setting is found before any work.
//!
//! With `--replay` there are none: every agent is served from the one script, in the order the
//! agents asked (see [`crate::llm::replay`]), so a trace replays whatever models it used.

use std::collections::BTreeMap;

use crate::cli::ProviderKind;
use crate::config::{Config, ConfigError, ProviderSettings};
use crate::llm::{self, Provider};

#[derive(Default)]
pub(crate) struct Models {
    by_model: BTreeMap<String, Box<dyn Provider>>,
}

impl Models {
    /// No provider but the run's.
    pub(crate) fn none() -> Self {
        Self::default()
    }

    /// A provider for every model the reviewer and the agents name, other than the run's own.
    pub(crate) fn build(config: &Config) -> Result<Self, ConfigError> {
        let mut models = Self::none();
        if config.provider.kind == ProviderKind::Replay {
            return Ok(models);
        }
        let main = config
            .provider
            .model
            .as_deref()
            .map(str::trim)
            .filter(|model| !model.is_empty())
            .unwrap_or_else(|| config.provider.kind.default_model());
        let named = config
            .agents
            .review_model
            .as_deref()
            .into_iter()
            .chain(config.agents.catalogue.models());
        for model in named {
            if model == main || models.by_model.contains_key(model) {
                continue;
            }
            let settings = ProviderSettings {
                model: Some(model.to_owned()),
                ..config.provider.clone()
            };
            models.by_model.insert(model.to_owned(), llm::build(&settings)?);
        }
        Ok(models)
    }

    /// The provider of `model`, when it is not the run's.
    pub(crate) fn get(&self, model: &str) -> Option<&dyn Provider> {
        self.by_model.get(model).map(Box::as_ref)
    }
}

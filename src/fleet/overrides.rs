//! Per-repository run options in a TOML fleet list (`[[repos]]` tables).
//!
//! The keys are those of [`RunOptions`], the struct `upkeep run`'s command line is parsed into:
//! the option's long name with `_` for `-` (`max_cost`, `allow_tool`, `env`...), with the
//! option's value type. Nothing is copied field by field: a table is read as `RunOptions`, and
//! applied by laying the keys it gives over the fleet's own options and reading the result as
//! `RunOptions` again, so a key given replaces the fleet's value for that repository only (a
//! `false` switches a fleet-wide flag off, an empty list empties one) and a key not given
//! keeps it. Options that belong to the fleet as a whole (`--json`, `--trace`, `--quiet`, the
//! commit author, `--keep-clone`) are not in `RunOptions`, so they are unknown keys here, and
//! unknown keys are errors naming the key, so a typo does not silently do nothing. The list is
//! the operator's file, as trusted as the command line.

use std::path::Path;

use crate::cli::RunOptions;
use crate::config::ConfigError;

/// The options one `[[repos]]` table gives, as written there (checked to be `RunOptions` keys
/// of the right types when the list is read).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RunOverrides {
    given: toml::Table,
}

impl RunOverrides {
    /// Reads a table's options; paths in the list are relative to the list file's directory.
    /// Errors name the key that is unknown or of the wrong type.
    pub(crate) fn parse(table: toml::Table, dir: &Path) -> Result<Self, String> {
        let mut options: RunOptions = toml::Value::Table(table.clone())
            .try_into()
            .map_err(|error: toml::de::Error| error.to_string())?;
        for path in [&mut options.task_file, &mut options.replay, &mut options.config]
            .into_iter()
            .flatten()
        {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
        // The options as upkeep writes them back, limited to the keys the table gave.
        let mut given = as_table(&options)?;
        given.retain(|key, _| table.contains_key(key));
        Ok(RunOverrides { given })
    }

    /// The option named `key`, as the table gave it (paths made absolute).
    #[cfg(test)]
    pub(crate) fn get(&self, key: &str) -> Option<&toml::Value> {
        self.given.get(key)
    }

    /// The fleet's options with this repository's laid over them.
    pub(crate) fn apply(&self, fleet: &RunOptions) -> Result<RunOptions, ConfigError> {
        if self.given.is_empty() {
            return Ok(fleet.clone());
        }
        let mut merged = as_table(fleet).map_err(ConfigError)?;
        if self.given.contains_key("task") || self.given.contains_key("task_file") {
            // One replaces the other, as on a command line that gives only one of them.
            merged.remove("task");
            merged.remove("task_file");
        }
        merged.extend(self.given.clone());
        toml::Value::Table(merged)
            .try_into()
            .map_err(|error: toml::de::Error| ConfigError(format!("the fleet list's options: {error}")))
    }
}

/// Options as a TOML table (unset options are left out).
fn as_table(options: &RunOptions) -> Result<toml::Table, String> {
    match toml::Value::try_from(options) {
        Ok(toml::Value::Table(table)) => Ok(table),
        Ok(_) => Err("the run options are not a table".into()),
        Err(error) => Err(format!("the run options cannot be written as TOML: {error}")),
    }
}

#[cfg(test)]
#[path = "overrides_tests.rs"]
mod tests;

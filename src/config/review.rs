//! Editorial review of what enters the public rankings (`[review]`).

use serde::{Deserialize, Serialize};

/// `[review]`: whether articles entering a public ranking wait for an
/// editor (see README, "Curation").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct ReviewConfig {
    pub mode: ReviewMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ReviewMode {
    /// Nothing is held.
    #[default]
    Off,
    /// An article about to be served in a public ranking for the first
    /// time is held until an editor allows it.
    NewEntries,
    /// Hold only articles whose rise comes from a narrow slice of the
    /// network. Not available yet: the configuration refuses it.
    Suspicious,
}

impl ReviewMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewMode::Off => "off",
            ReviewMode::NewEntries => "new_entries",
            ReviewMode::Suspicious => "suspicious",
        }
    }
}

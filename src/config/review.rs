//! Editorial review of what enters the public rankings (`[review]`).

use serde::{Deserialize, Serialize};

/// `[review]`: whether articles entering a public ranking wait for an
/// editor (see README, "Curation").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReviewConfig {
    pub mode: ReviewMode,
    /// `suspicious`: the hours the evidence covers, the current one
    /// included (the rising window).
    pub window_hours: u32,
    /// `suspicious`: the narrow-network rule applies from this many
    /// unique visitors (with a known address) in the window.
    pub min_visitors: u64,
    /// `suspicious`: held when distinct network blocks / unique visitors
    /// is at most this.
    pub max_block_share: f64,
    /// `suspicious`: held when the gate held back at least this share of
    /// the article's events in the window (with at least `min_visitors`
    /// events in all).
    pub max_held_share: f64,
}

impl Default for ReviewConfig {
    fn default() -> Self {
        ReviewConfig {
            mode: ReviewMode::Off,
            window_hours: 2,
            min_visitors: 20,
            max_block_share: 0.2,
            max_held_share: 0.5,
        }
    }
}

impl ReviewConfig {
    /// Hours of network evidence the stores keep: `window_hours` under
    /// `suspicious`, else 0 (none kept, nothing spent).
    pub fn evidence_hours(&self) -> u32 {
        if self.mode == ReviewMode::Suspicious {
            self.window_hours
        } else {
            0
        }
    }
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
    /// An article about to be served in a public ranking is held when its
    /// rise comes from a narrow slice of the network
    /// ([`crate::curation::suspicious`]).
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

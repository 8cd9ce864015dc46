//! The widget's click-through counts (`[ctr]`).

use serde::{Deserialize, Serialize};

/// Impressions and clicks of the lists the widget shows (`[ctr]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CtrConfig {
    /// Most distinct lists (`list` of impression and click events)
    /// counted; events of a new list past it are refused
    /// (`too_many_lists`), so clients cannot grow the counts without bound.
    pub max_lists: usize,
    /// Embedded store: seconds between writes of `ctr.json` in the data
    /// dir (also written at shutdown). A crash loses at most this much.
    pub flush_secs: u64,
}

impl Default for CtrConfig {
    fn default() -> Self {
        CtrConfig {
            max_lists: 1000,
            flush_secs: 5,
        }
    }
}

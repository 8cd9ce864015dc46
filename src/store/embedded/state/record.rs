//! The write-ahead log's record: what one logged write holds. Its
//! encoding is [`crate::store::embedded::persist`]'s.

use serde::{Deserialize, Serialize};

use crate::model::{ArticleId, ArticleMeta, Event, Verdict, VoteDirection};

/// One write-ahead log record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LogRecord {
    /// An event and the verdict the gate gave it.
    Event { ev: Event, verdict: Verdict },
    /// Metadata set by `PUT /api/articles/{id}`.
    Put { id: ArticleId, meta: ArticleMeta },
    /// `DELETE /api/articles/{id}`.
    Delete { id: ArticleId },
    /// Seed 003 posting as logs before 2026-11-23 wrote it: the poster's
    /// vote recorded (they cannot vote again) but not counted. Replayed as
    /// it was; new posts are [`LogRecord::PostVoted`].
    Post {
        id: ArticleId,
        meta: ArticleMeta,
        poster: u128,
    },
    /// A counted seed 003 vote (refused votes change nothing and are not logged).
    Vote {
        id: ArticleId,
        user: u128,
        direction: VoteDirection,
    },
    /// Seed 003 posting: the id was taken from the post counter, and the
    /// poster's up-vote is recorded and counted, as Redis in Action's
    /// `post_article` does (`votes` 1, score `publishedAt + 432`). Last in
    /// the enum, so older logs keep their variant numbers.
    PostVoted {
        id: ArticleId,
        meta: ArticleMeta,
        poster: u128,
    },
}

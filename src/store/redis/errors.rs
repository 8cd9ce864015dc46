//! What a Redis error means to a caller: client errors mapped onto
//! [`StoreError`] (503 for what a retry can fix), and the errors the call
//! layer retries itself (`NOSCRIPT`, a slot being moved).

use crate::store::StoreError;

/// Maps a client error: the server unreachable, slow, loading, or
/// refusing writes it will take again (at `maxmemory` with `noeviction`:
/// OOM; unable to persist: MISCONF; a long script: BUSY), or a Redis that
/// lost the site's data (EPOCH, marker.rs) is `Unavailable` (503, retry;
/// nothing was written); anything else is a bug or a corrupt key.
pub(crate) fn store_err(e: redis::RedisError) -> StoreError {
    use redis::ServerErrorKind as S;
    tracing::debug!(error = %e, "redis call failed");
    let why = match server_code(&e).as_deref() {
        Some("OOM") => "Redis refuses writes: it is out of memory (maxmemory, noeviction)",
        Some("MISCONF") => "Redis refuses writes: it cannot persist to disk",
        Some("BUSY") => "Redis is busy running a script",
        Some("EPOCH") => "Redis lost this site's data (docs/design.md, \"Disaster recovery\")",
        _ => "",
    };
    if !why.is_empty() {
        return StoreError::Unavailable(format!("{why}: redis: {e}"));
    }
    let transient = e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(
            e.kind(),
            redis::ErrorKind::ClusterConnectionNotFound
                | redis::ErrorKind::Server(
                    S::BusyLoading
                        | S::TryAgain
                        | S::ClusterDown
                        | S::MasterDown
                        | S::ReadOnly
                        | S::Moved
                        | S::Ask
                )
        );
    if transient {
        StoreError::Unavailable(format!("redis: {e}"))
    } else {
        StoreError::Internal(format!("redis: {e}"))
    }
}

/// The server's error code of `e` (`OOM`, `MISCONF`, `EPOCH`, ...), also
/// when it failed a command of a pipeline, where the client's `code()`
/// answers only the kinds it knows.
fn server_code(e: &redis::RedisError) -> Option<String> {
    let code = e.code().map(str::to_string).or_else(|| {
        let errors = e.clone().into_server_errors()?;
        errors.first().map(|(_, s)| s.code().to_string())
    })?;
    if code == "ERR"
        && let Some(inner) = script_error_code(&e.to_string())
    {
        return Some(inner);
    }
    Some(code)
}

/// Redis 6 wraps the error a command gave inside a script in one of its
/// own: `ERR Error running script (call to f_…): @user_script:1:
/// @user_script: 1: -OOM command not allowed …`. The command's code, if
/// the text is such a wrapper.
fn script_error_code(text: &str) -> Option<String> {
    let rest = &text[text.find("Error running script")?..];
    let after = &rest[rest.find(": -")? + 3..];
    let code: String = after
        .chars()
        .take_while(|c| c.is_ascii_uppercase())
        .collect();
    (!code.is_empty()).then_some(code)
}

pub(super) fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// Whether `e` says the slot is being moved (it has a primary).
pub(super) fn slot_moving(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    matches!(
        e.kind(),
        ErrorKind::Server(
            ServerErrorKind::Ask | ServerErrorKind::Moved | ServerErrorKind::TryAgain
        )
    )
}

//! The configuration with its secrets hidden, as `hotrank check-config`
//! prints it.

use super::Config;

impl Config {
    /// The configuration as `hotrank check-config` prints it: the tokens,
    /// and the passwords in the Redis, archive and journal URLs, replaced
    /// by a note that they are set and how long they are.
    pub fn redacted(&self) -> Config {
        let mut c = self.clone();
        for token in [&mut c.admin_token, &mut c.ingest_token]
            .into_iter()
            .flatten()
        {
            *token = redaction(token);
        }
        for url in [
            &mut c.redis.url,
            &mut c.archive.url,
            &mut c.pipeline.log_url,
        ] {
            *url = url.split(',').map(redact_url).collect::<Vec<_>>().join(",");
        }
        c
    }
}

/// What a secret is shown as.
fn redaction(secret: &str) -> String {
    format!("<redacted: set, {} characters>", secret.chars().count())
}

/// `scheme://user:password@host/...` with the password redacted, and any
/// `password=` query parameter (libpq's spelling).
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, password)) => format!("{user}:{}@{host}", redaction(password)),
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) if k.eq_ignore_ascii_case("password") => {
                        format!("{k}={}", redaction(v))
                    }
                    _ => kv.to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

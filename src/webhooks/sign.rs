//! A delivery's body and signature: `X-Hotrank-Signature: sha256=<hex of
//! HMAC-SHA256(secret, raw body)>` (README, "Webhooks", shows a receiver
//! checking it).

use hmac::{Hmac, Mac};
use serde_json::json;

use super::model::{Entry, Subscription};

/// The JSON body of `entry`'s delivery to `sub`.
pub fn body(entry: &Entry, sub: &Subscription) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "delivery": entry.delivery,
        "event": entry.event.as_str(),
        "articleId": entry.article_id,
        "rank": entry.rank,
        "query": sub.query,
        "at": entry.at,
    }))
    .expect("a delivery body serializes")
}

/// `sha256=<hex>`: the signature header's value for `body`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac =
        Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256=");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_4231_case_2() {
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}

//! A receiver's URL, and the rule that keeps webhooks out of the internal
//! network (SSRF): unless `webhooks.allow_private` is set, a receiver must
//! be a public address. The rule is checked when a subscription is
//! created (an IP literal, and `localhost` names: no DNS lookup holds up
//! the request) and on every address each delivery resolves and connects
//! to (a name can point anywhere, and be re-pointed later: DNS
//! rebinding).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// A parsed `http://` or `https://` receiver URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub https: bool,
    /// The host as written (brackets removed from an IPv6 literal).
    pub host: String,
    pub port: u16,
    /// Path and query, from the first `/` (at least `/`).
    pub path: String,
}

impl Target {
    /// Parses `http(s)://host[:port][/path][?query]`; no user info, no
    /// fragment, no whitespace, at most 2048 bytes.
    pub fn parse(url: &str) -> Result<Target, String> {
        if url.len() > 2048 {
            return Err("url is longer than 2048 bytes".into());
        }
        if url
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err("url must not contain whitespace or control characters".into());
        }
        let (https, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(r), _) => (false, r),
            (_, Some(r)) => (true, r),
            _ => return Err("url must start with http:// or https://".into()),
        };
        if rest.contains('#') {
            return Err("url must not have a fragment".into());
        }
        let cut = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(cut);
        if authority.contains('@') {
            return Err("url must not carry user info".into());
        }
        let (host, port) = split_port(authority)?;
        // `localhost.` is `localhost`.
        let host = host.strip_suffix('.').unwrap_or(host);
        if host.is_empty() {
            return Err("url has no host".into());
        }
        let valid_name = host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
        if host.parse::<IpAddr>().is_err() && !valid_name {
            return Err(format!(
                "url host {host:?} is not a host name or IP address"
            ));
        }
        let path = match path {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        Ok(Target {
            https,
            host: host.to_ascii_lowercase(),
            port: port.unwrap_or(if https { 443 } else { 80 }),
            path,
        })
    }

    /// `host:port` for the `Host` header (IPv6 in brackets, default ports
    /// left out).
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == if self.https { 443 } else { 80 } {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// The addresses the host names now, each checked against the rule.
    pub async fn resolve(&self, allow_private: bool) -> Result<Vec<SocketAddr>, String> {
        let addrs: Vec<SocketAddr> = match self.host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, self.port)],
            Err(_) => tokio::net::lookup_host((self.host.as_str(), self.port))
                .await
                .map_err(|e| format!("cannot resolve {}: {e}", self.host))?
                .collect(),
        };
        if addrs.is_empty() {
            return Err(format!("{} resolves to no address", self.host));
        }
        if !allow_private && let Some(a) = addrs.iter().find(|a| !is_public(a.ip())) {
            return Err(format!(
                "{} resolves to {}, a non-public address (webhooks.allow_private = false)",
                self.host,
                a.ip()
            ));
        }
        Ok(addrs)
    }

    /// The creation-time check of the rule: a non-public IP literal or a
    /// `localhost` name is refused. Other names are checked by every
    /// delivery, on what they resolve to then.
    pub fn check_at_creation(&self, allow_private: bool) -> Result<(), String> {
        if allow_private {
            return Ok(());
        }
        if self.host == "localhost" || self.host.ends_with(".localhost") {
            return Err(format!(
                "{} is a loopback name (webhooks.allow_private = false)",
                self.host
            ));
        }
        match self.host.parse::<IpAddr>() {
            Ok(ip) if !is_public(ip) => Err(format!(
                "{ip} is not a public address (webhooks.allow_private = false)"
            )),
            _ => Ok(()),
        }
    }
}

fn split_port(authority: &str) -> Result<(&str, Option<u16>), String> {
    let bad_port = || format!("url port in {authority:?} is not a number in 1..65535");
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| "url has an unclosed [ in its host".to_string())?;
        if host.parse::<Ipv6Addr>().is_err() {
            return Err(format!("url host [{host}] is not an IPv6 address"));
        }
        return match after.strip_prefix(':') {
            None if after.is_empty() => Ok((host, None)),
            None => Err(bad_port()),
            Some(p) => Ok((host, Some(port(p).ok_or_else(bad_port)?))),
        };
    }
    match authority.rsplit_once(':') {
        None => Ok((authority, None)),
        Some((h, p)) => Ok((h, Some(port(p).ok_or_else(bad_port)?))),
    }
}

fn port(p: &str) -> Option<u16> {
    p.parse::<u16>().ok().filter(|&n| n > 0)
}

/// Whether `ip` is a public unicast address: not loopback, private
/// (RFC 1918, fc00::/7), link-local, CGNAT (100.64/10), unspecified,
/// multicast, broadcast, documentation or benchmarking ranges, nor an
/// IPv4-mapped or NAT64 form of one.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let s = v6.segments();
            // NAT64 (64:ff9b::/96) carries an IPv4 address.
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let v4 =
                    Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
                return is_public_v4(v4);
            }
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
                || (s[0] == 0x2001 && s[1] == 0x0db8)) // documentation
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || o[0] == 0
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // CGNAT 100.64/10
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF 192.0.0/24
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // benchmarking 198.18/15
        || o[0] >= 240) // reserved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_receivers() {
        let t = Target::parse("https://hooks.example.com/in?x=1").unwrap();
        assert_eq!(
            (t.https, t.host.as_str(), t.port, t.path.as_str()),
            (true, "hooks.example.com", 443, "/in?x=1")
        );
        let t = Target::parse("http://[::1]:8080").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("::1", 8080, "/")
        );
        assert_eq!(t.host_header(), "[::1]:8080");
        for bad in [
            "ftp://x/",
            "http://",
            "http://a b/",
            "http://u:p@x/",
            "http://x:0/",
            "http://x:99999/",
            "http://x/#f",
            "http://[::1/",
            "http://ex%41mple.com/",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_public_addresses_are_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
            "255.255.255.255",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:2800:220:1::1", "::ffff:8.8.8.8"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn private_targets_are_refused_unless_allowed() {
        let t = Target::parse("http://127.0.0.1:9/").unwrap();
        assert!(t.check_at_creation(false).is_err());
        assert!(t.resolve(false).await.is_err());
        assert!(t.check_at_creation(true).is_ok());
        assert!(t.resolve(true).await.is_ok());
        for name in [
            "http://localhost:9/",
            "http://LOCALHOST.:9/",
            "http://a.localhost/",
        ] {
            let t = Target::parse(name).unwrap();
            assert!(t.check_at_creation(false).is_err(), "{name}");
        }
        let t = Target::parse("http://localhost:9/").unwrap();
        // A name is checked by delivery, on what it resolves to.
        assert!(t.resolve(false).await.is_err());
    }
}

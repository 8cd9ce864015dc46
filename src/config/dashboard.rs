//! The dashboard's settings (`[dashboard]`).

use serde::{Deserialize, Serialize};

/// `[dashboard]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DashboardConfig {
    /// The site's time zone (an IANA name, `Europe/Paris`): the dashboard
    /// shows times in it until a reader picks another in their browser.
    pub time_zone: String,
}

impl Default for DashboardConfig {
    fn default() -> Self {
        DashboardConfig {
            time_zone: "UTC".to_string(),
        }
    }
}

/// Whether `z` has the shape of an IANA time zone name: `UTC`, or one to
/// three `/`-separated parts of letters, digits, `_`, `+` and `-`, each
/// starting with a letter (`America/Argentina/Buenos_Aires`, `Etc/GMT+5`).
/// No time zone database is built in: whether the zone exists is the
/// browser's check (`Intl`), which falls back to UTC when it does not.
pub fn valid_time_zone(z: &str) -> bool {
    let parts: Vec<&str> = z.split('/').collect();
    z.len() <= 64
        && (1..=3).contains(&parts.len())
        && parts.iter().all(|p| {
            p.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-'))
        })
}

#[cfg(test)]
mod tests {
    use super::valid_time_zone;

    #[test]
    fn a_bad_time_zone_is_refused_at_start_by_name() {
        let mut c = crate::config::Config::default();
        assert!(c.validate().is_ok());
        c.dashboard.time_zone = "Mars/Olympus Mons".into();
        let e = c.validate().unwrap_err();
        assert!(
            e.starts_with("dashboard.time_zone = \"Mars/Olympus Mons\" is invalid"),
            "{e}"
        );
        let c: crate::config::Config =
            toml::from_str("[dashboard]\ntime_zone = \"Europe/Paris\"\n").unwrap();
        assert_eq!(c.dashboard.time_zone, "Europe/Paris");
    }

    #[test]
    fn time_zone_shapes() {
        for ok in [
            "UTC",
            "Europe/Paris",
            "America/Argentina/Buenos_Aires",
            "Etc/GMT+5",
            "America/Port-au-Prince",
        ] {
            assert!(valid_time_zone(ok), "{ok}");
        }
        for bad in [
            "",
            "/",
            "Europe/",
            "Europe//Paris",
            "Europe/Paris ",
            "1Zone",
            "a/b/c/d",
            "Europe/Par;is",
            "../etc",
        ] {
            assert!(!valid_time_zone(bad), "{bad}");
        }
    }
}

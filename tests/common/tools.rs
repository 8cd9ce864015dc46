//! Outside programs the tests drive (Prometheus's promtool, systemd's
//! analyzer): found on the PATH, or the test is skipped with a message,
//! unless the environment variable `CI` is set: then it fails.

use std::path::PathBuf;

/// The path of `name`, or `None` (after saying so) when it is missing and
/// `CI` is not set; `install` says where it comes from.
pub fn tool(name: &str, install: &str) -> Option<PathBuf> {
    let found = ["/usr/bin", "/usr/local/bin"]
        .iter()
        .map(|d| PathBuf::from(d).join(name))
        .find(|p| p.is_file())
        .or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        });
    if found.is_none() {
        let msg = format!("this test needs {name} ({install})");
        if std::env::var_os("CI").is_some() {
            panic!("{msg} (CI is set, so this is a failure)");
        }
        eprintln!("SKIPPED: {msg}");
    }
    found
}

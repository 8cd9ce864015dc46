//! Outside programs the tests drive (Prometheus's promtool, systemd's
//! analyzer): found on the PATH, or the test is skipped with a message,
//! unless the environment variable `CI` is set: then it fails.

use std::path::PathBuf;
use std::process::Command;

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

/// libfaketime's shared library, or `None` after printing why the test is
/// skipped. Panics under CI.
pub fn libfaketime() -> Option<PathBuf> {
    let named = std::env::var_os("HOTRANK_LIBFAKETIME").map(PathBuf::from);
    let found = named.or_else(|| {
        let out = Command::new("python3")
            .args([
                "-c",
                "import libfaketime, os; print(os.path.join(os.path.dirname(libfaketime.__file__), \
                 'vendor', 'libfaketime', 'src', 'libfaketime.so.1'))",
            ])
            .output()
            .ok()?;
        let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
        out.status.success().then_some(path)
    });
    match found {
        Some(p) if p.is_file() => Some(p),
        p => {
            let msg = format!(
                "clock tests need libfaketime (pip install libfaketime, or HOTRANK_LIBFAKETIME \
                 naming libfaketime.so.1); found {p:?}"
            );
            if std::env::var_os("CI").is_some() {
                panic!("{msg} (CI is set, so this is a failure)");
            }
            eprintln!("SKIPPED: {msg}");
            None
        }
    }
}

//! The secrets a site keeps in its data dir, each in a file of its own
//! (mode 0600): the admin token when none is configured, and the identity
//! key every visitor and IP hash is keyed with, which all nodes of a site
//! and the tools that hash ids for it (`import --from-redis`, dumps) share.

use std::path::Path;

/// Reads `name` from the data dir, or creates it with `make()` (mode 0600).
pub fn load_or_create(
    dir: &Path,
    name: &str,
    make: impl FnOnce() -> String,
) -> Result<(String, bool), String> {
    if let Some(s) = read_secret(dir, name)? {
        return Ok((s, false));
    }
    let value = make();
    write_secret(dir, name, &value)?;
    Ok((value, true))
}

/// The trimmed text of `name` in the data dir; `None` if it is missing or
/// empty.
fn read_secret(dir: &Path, name: &str) -> Result<Option<String>, String> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Writes `name` in the data dir (created if need be), mode 0600, synced.
fn write_secret(dir: &Path, name: &str, value: &str) -> Result<(), String> {
    let path = dir.join(name);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    use std::io::Write;
    let mut f = opts
        .open(&path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    f.write_all(value.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

pub fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

/// The file in the data dir that holds the key of every identity hash.
pub const IDENTITY_FILE: &str = "identity.key";

/// The key of every identity hash, `data_dir/identity.key` (created on
/// first use): all nodes of one site, and tools that hash ids for it
/// (`hotrank import --from-redis`), must share it.
pub fn identity_secret(data_dir: &Path) -> Result<[u8; 16], String> {
    let (secret_hex, _) = load_or_create(data_dir, IDENTITY_FILE, || random_hex(16))?;
    parse_identity_key(data_dir, &secret_hex)
}

/// The data dir's identity key as its 32 hex digits, if it has one
/// (`hotrank export` carries it in the dump).
pub fn read_identity_key(data_dir: &Path) -> Result<Option<String>, String> {
    let key = read_secret(data_dir, IDENTITY_FILE)?;
    if let Some(k) = &key {
        parse_identity_key(data_dir, k)?;
    }
    Ok(key)
}

/// Installs an identity key (32 hex digits) in a data dir (`hotrank
/// import` of a dump that carries one).
pub fn write_identity_key(data_dir: &Path, key: &str) -> Result<(), String> {
    parse_identity_key(data_dir, key)?;
    write_secret(data_dir, IDENTITY_FILE, key)
}

fn parse_identity_key(data_dir: &Path, hex: &str) -> Result<[u8; 16], String> {
    let bad = || {
        format!(
            "{} must hold 32 hex digits",
            data_dir.join(IDENTITY_FILE).display()
        )
    };
    if hex.len() != 32 {
        return Err(bad());
    }
    let mut secret = [0u8; 16];
    for (i, b) in secret.iter_mut().enumerate() {
        *b = hex
            .get(2 * i..2 * i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .ok_or_else(bad)?;
    }
    Ok(secret)
}

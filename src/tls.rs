//! The TLS client configuration of every outgoing https connection
//! (`hotrank top` and `stats`, webhook deliveries): rustls on ring (no C
//! toolchain beyond ring's own, no aws-lc), with Mozilla's roots compiled
//! in.

use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;

/// rustls on ring with Mozilla's roots, and those of `ca` (a PEM file:
/// a private CA, or a self-signed certificate).
pub fn client_config(ca: Option<&std::path::Path>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca {
        let mut n = 0;
        for cert in rustls::pki_types::CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("--ca {}: {e}", path.display()))?
        {
            let cert = cert.map_err(|e| format!("--ca {}: {e}", path.display()))?;
            roots
                .add(cert)
                .map_err(|e| format!("--ca {}: {e}", path.display()))?;
            n += 1;
        }
        if n == 0 {
            return Err(format!("--ca {}: no PEM certificate in it", path.display()));
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

//! The command line as an operator meets it: `export --help` without the
//! server's flags, and `hotrank top`/`stats` against an https server (a
//! TLS front with a self-signed certificate before a real server on a
//! loopback port), trusted with `--ca` and refused without it.

mod common;

use std::process::{Command, Output};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

use common::TestServer;

async fn hotrank(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_hotrank"))
            .args(&args)
            .env_remove("HOTRANK_URL")
            .env_remove("HOTRANK_CA_FILE")
            .output()
            .expect("run hotrank")
    })
    .await
    .expect("join")
}

#[test]
fn export_help_lists_no_server_flags() {
    let out = Command::new(env!("CARGO_BIN_EXE_hotrank"))
        .args(["export", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("--data-dir"), "{help}");
    assert!(help.contains("--file"), "{help}");
    for flag in [
        "--listen",
        "--admin-token",
        "--ingest-token",
        "--log-format",
    ] {
        assert!(!help.contains(flag), "{flag} in {help}");
    }
}

/// A TLS front for `backend` on a loopback port, with a self-signed
/// certificate for `localhost`: its port and the certificate (PEM).
async fn tls_front(backend: String) -> (u16, String) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let pem = cert.cert.pem();
    let key = rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, backend) = (acceptor.clone(), backend.clone());
            tokio::spawn(async move {
                // A client that refuses the certificate ends here.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut plain = TcpStream::connect(&backend).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    (port, pem)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_and_stats_reach_an_https_server() {
    let server = TestServer::start().await;
    let (s, b) = server
        .admin_put(
            "/api/articles/a1",
            &serde_json::json!({"title": "Over TLS", "category": "c", "publishedAt": common::T0 - 600}),
        )
        .await;
    assert!(s.is_success(), "{b}");
    server.view("a1", "v1").await;
    let backend = server.base.trim_start_matches("http://").to_string();
    let (port, pem) = tls_front(backend).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, pem).unwrap();
    let url = format!("https://localhost:{port}");
    let ca = ca.to_str().unwrap().to_string();

    let out = hotrank(vec![
        "top".into(),
        "--url".into(),
        url.clone(),
        "--ca".into(),
        ca.clone(),
    ])
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Over TLS"), "{text}");
    assert!(text.contains(&url), "{text}");

    let out = hotrank(vec![
        "stats".into(),
        "--url".into(),
        url.clone(),
        "--ca".into(),
        ca,
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("page views"));

    // Without --ca the self-signed certificate is refused.
    let out = hotrank(vec!["top".into(), "--url".into(), url]).await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TLS") && err.contains("certificate"), "{err}");
}

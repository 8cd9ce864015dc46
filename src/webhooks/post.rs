//! One HTTP POST to a receiver: the address checked against the SSRF
//! rule ([`super::target`]) after resolving, a connect timeout over DNS,
//! TCP and TLS (rustls on ring, Mozilla's roots: the `hotrank top`
//! client's configuration), then hyper's HTTP/1 client with a response
//! timeout over the answer's head and body.

use std::time::Duration;

use axum::body::Body;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;

use super::target::Target;

/// How a POST is made.
#[derive(Clone)]
pub struct Poster {
    tls: TlsConnector,
    pub allow_private: bool,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
}

/// Most bytes of an answer read (the rest is dropped with the connection).
const MAX_ANSWER: usize = 64 << 10;

impl Poster {
    pub fn new(cfg: &crate::config::WebhooksConfig) -> Result<Self, String> {
        Ok(Poster {
            tls: TlsConnector::from(crate::tls::client_config(None)?),
            allow_private: cfg.allow_private,
            connect_timeout: Duration::from_millis(cfg.connect_timeout_ms),
            response_timeout: Duration::from_millis(cfg.response_timeout_ms),
        })
    }

    /// POSTs `body` with `headers` to `url`; the answer's status code, or
    /// why there is none.
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: Vec<u8>,
    ) -> Result<u16, String> {
        let target = Target::parse(url)?;
        let connected = tokio::time::timeout(self.connect_timeout, self.connect(&target)).await;
        let io = connected.map_err(|_| {
            format!(
                "connect timed out after {} ms",
                self.connect_timeout.as_millis()
            )
        })??;
        let answer =
            tokio::time::timeout(self.response_timeout, exchange(io, &target, headers, body)).await;
        answer.map_err(|_| format!("no answer within {} ms", self.response_timeout.as_millis()))?
    }

    async fn connect(&self, target: &Target) -> Result<Box<dyn Io>, String> {
        let addrs = target.resolve(self.allow_private).await?;
        let mut last = String::new();
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(tcp) => {
                    let _ = tcp.set_nodelay(true);
                    if !target.https {
                        return Ok(Box::new(tcp));
                    }
                    let name = ServerName::try_from(target.host.clone())
                        .map_err(|e| format!("{:?} is not a TLS server name: {e}", target.host))?;
                    let tls = self
                        .tls
                        .connect(name, tcp)
                        .await
                        .map_err(|e| format!("TLS with {addr}: {e}"))?;
                    return Ok(Box::new(tls));
                }
                Err(e) => last = format!("connect to {addr}: {e}"),
            }
        }
        Err(last)
    }
}

/// A connected stream, plain or TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

async fn exchange(
    io: Box<dyn Io>,
    target: &Target,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> Result<u16, String> {
    let (mut sender, conn) = http1::handshake::<_, Body>(TokioIo::new(io))
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
    let conn = tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = axum::http::Request::post(&target.path)
        .header("host", target.host_header())
        .header("content-type", "application/json")
        .header(
            "user-agent",
            concat!("hotrank-webhooks/", env!("CARGO_PKG_VERSION")),
        );
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let req = req
        .body(Body::from(body))
        .map_err(|e| format!("request: {e}"))?;
    let result = async {
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| format!("HTTP: {e}"))?;
        let status = resp.status().as_u16();
        // The answer is read (bounded) so the receiver is not cut off
        // mid-write; its content does not matter.
        let _ = axum::body::to_bytes(Body::new(resp.into_body()), MAX_ANSWER).await;
        Ok(status)
    }
    .await;
    conn.abort();
    result
}

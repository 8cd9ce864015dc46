//! Two tiny clients for load generation, written for speed and for control
//! over what goes on the wire: HTTP/1.1 with keep-alive, and RESP with
//! pipelining. Neither is a general-purpose client.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// One keep-alive HTTP/1.1 connection, over TCP or any other stream (TLS
/// for `hotrank top`).
pub struct Http<S = TcpStream> {
    stream: S,
    host: String,
    buf: Vec<u8>,
}

impl Http {
    pub async fn connect(addr: &str) -> io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Http::over(stream, addr))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Http<S> {
    /// HTTP on an open stream to `host` (the `Host` header: `name:port`).
    pub fn over(stream: S, host: &str) -> Self {
        Http {
            stream,
            host: host.to_string(),
            buf: Vec::with_capacity(16 * 1024),
        }
    }

    /// Sends one request and reads the whole answer: (status, body).
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<(u16, Vec<u8>)> {
        let mut req = Vec::with_capacity(256 + body.len());
        req.extend_from_slice(
            format!(
                "{method} {path} HTTP/1.1\r\nhost: {}\r\ncontent-length: {}\r\n",
                self.host,
                body.len()
            )
            .as_bytes(),
        );
        for (k, v) in headers {
            req.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        req.extend_from_slice(b"\r\n");
        req.extend_from_slice(body);
        self.stream.write_all(&req).await?;
        self.read_response().await
    }

    async fn read_response(&mut self) -> io::Result<(u16, Vec<u8>)> {
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let head =
                    std::str::from_utf8(&self.buf[..end]).map_err(|_| bad("non-UTF-8 head"))?;
                let status: u16 = head
                    .get(9..12)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| bad("bad status line"))?;
                let len = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .ok_or_else(|| bad("answer without content-length"))?;
                let total = end + 4 + len;
                while self.buf.len() < total {
                    self.fill().await?;
                }
                let body = self.buf[end + 4..total].to_vec();
                self.buf.drain(..total);
                return Ok((status, body));
            }
            self.fill().await?;
        }
    }

    async fn fill(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed the connection",
            ));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// A RESP reply, as much of it as load generation needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

/// One pipelining RESP connection.
pub struct Resp {
    stream: TcpStream,
    buf: Vec<u8>,
    pos: usize,
}

impl Resp {
    pub async fn connect(addr: &str) -> io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Resp {
            stream,
            buf: Vec::new(),
            pos: 0,
        })
    }

    /// Encodes one command into `out`.
    pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
    }

    /// Sends pre-encoded commands and reads `n` replies.
    pub async fn pipeline(&mut self, encoded: &[u8], n: usize) -> io::Result<Vec<Reply>> {
        self.stream.write_all(encoded).await?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.reply().await?);
        }
        Ok(out)
    }

    pub async fn command(&mut self, args: &[&[u8]]) -> io::Result<Reply> {
        let mut enc = Vec::new();
        Self::encode(&mut enc, args);
        Ok(self.pipeline(&enc, 1).await?.remove(0))
    }

    async fn line(&mut self) -> io::Result<String> {
        loop {
            if let Some(i) = find(&self.buf[self.pos..], b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[self.pos..self.pos + i]).into_owned();
                self.pos += i + 2;
                return Ok(line);
            }
            self.fill().await?;
        }
    }

    async fn fill(&mut self) -> io::Result<()> {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "redis closed the connection",
            ));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    fn reply(
        &mut self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<Reply>> + Send + '_>> {
        Box::pin(async move {
            let line = self.line().await?;
            let (tag, rest) = line.split_at(1.min(line.len()));
            Ok(match tag {
                "+" => Reply::Status(rest.to_string()),
                "-" => Reply::Error(rest.to_string()),
                ":" => Reply::Int(rest.parse().map_err(|_| bad("bad integer"))?),
                "$" => {
                    let len: i64 = rest.parse().map_err(|_| bad("bad bulk length"))?;
                    if len < 0 {
                        Reply::Bulk(None)
                    } else {
                        let len = len as usize;
                        while self.buf.len() < self.pos + len + 2 {
                            self.fill().await?;
                        }
                        let b = self.buf[self.pos..self.pos + len].to_vec();
                        self.pos += len + 2;
                        Reply::Bulk(Some(b))
                    }
                }
                "*" => {
                    let n: i64 = rest.parse().map_err(|_| bad("bad array length"))?;
                    let mut items = Vec::new();
                    for _ in 0..n.max(0) {
                        items.push(self.reply().await?);
                    }
                    Reply::Array(items)
                }
                _ => return Err(bad("unknown RESP type")),
            })
        })
    }
}

//! The contract's JSON error for request heads the HTTP parser refuses.
//!
//! hyper answers a head it cannot parse itself: `431` when the head does
//! not fit its buffer ([`HttpConfig::parser_buffer_bytes`]) or has more
//! header lines than its table, `414` for a target over 64 KiB, `400` for
//! one that is not HTTP/1.x, each with an empty body, and it offers no
//! hook to answer otherwise. Smaller excesses never get that far: the
//! accept loop refuses them with the JSON error first
//! ([`crate::api::head_refusal`]). For the rest, the connection's I/O is
//! wrapped in [`ParseErrorsAsJson`], which recognises hyper's bare answer
//! as it is written (a `400`, `414` or `431` head with `content-length: 0`:
//! every answer hotrank writes itself with those statuses has a JSON body)
//! and writes the contract's error in its place. The connection closes
//! afterwards, as hyper closes it.
//!
//! A head that overflows the buffer before its first line ended has an
//! overlong target: the wrapper notes whether a line end was read since
//! the last answer was written, and answers `414 uri_too_long` then,
//! `431 headers_too_large` otherwise.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use axum::http::StatusCode;

use crate::api::ApiError;
use crate::config::HttpConfig;

pin_project_lite::pin_project! {
    /// A connection's I/O with hyper's bare parse-error answers replaced.
    pub struct ParseErrorsAsJson<T> {
        #[pin]
        inner: T,
        limits: std::sync::Arc<HttpConfig>,
        // The peer's address: the client the access log names (the head,
        // with any X-Forwarded-For, could not be read).
        peer: std::net::IpAddr,
        // A line end was read since the last answer was written.
        line_ended: bool,
        // The replacement answer and how much of it is written.
        reply: Option<(Vec<u8>, usize)>,
    }
}

impl<T> ParseErrorsAsJson<T> {
    pub fn new(inner: T, limits: std::sync::Arc<HttpConfig>, peer: std::net::IpAddr) -> Self {
        ParseErrorsAsJson {
            inner,
            limits,
            peer,
            line_ended: false,
            reply: None,
        }
    }
}

/// The status of hyper's own answer to an unparseable head, if `buf` is
/// one: exactly a head, with no body.
fn bare_error(buf: &[u8]) -> Option<u16> {
    let rest = buf
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| buf.strip_prefix(b"HTTP/1.0 "))?;
    let status = match rest.get(..4)? {
        b"400 " => 400,
        b"414 " => 414,
        b"431 " => 431,
        _ => return None,
    };
    let head = buf.strip_suffix(b"\r\n\r\n")?;
    head.windows(19)
        .any(|w| w.eq_ignore_ascii_case(b"\r\ncontent-length: 0"))
        .then_some(status)
}

/// The answer that replaces hyper's: the contract's error, then close.
fn json_reply(status: u16, line_ended: bool, h: &HttpConfig) -> (StatusCode, Vec<u8>) {
    let error = match status {
        414 => uri_too_long(h),
        431 if !line_ended => uri_too_long(h),
        431 => ApiError::HeadersTooLarge(format!(
            "the request head is larger than the server reads ({} bytes, at most {} header lines); \
             at most {} header lines (http.max_headers) and {} bytes (http.max_header_bytes)",
            h.parser_buffer_bytes(),
            h.parser_max_headers().unwrap_or(100),
            h.max_headers,
            h.max_header_bytes
        )),
        _ => ApiError::bad(
            "malformed_request",
            "the request head is not valid HTTP/1.1",
        ),
    };
    let body = serde_json::to_vec(&error.body()).expect("a JSON value serializes");
    let status = error.status();
    let mut out = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        status.as_str(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    (status, out)
}

fn uri_too_long(h: &HttpConfig) -> ApiError {
    ApiError::UriTooLong(format!(
        "the request target is longer than the server reads; at most {} bytes (http.max_uri_bytes)",
        h.max_uri_bytes
    ))
}

impl<T: AsyncWrite> ParseErrorsAsJson<T> {
    /// Writes what is left of the replacement answer.
    fn poll_reply(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut this = self.project();
        while let Some((bytes, done)) = this.reply.as_mut() {
            if *done == bytes.len() {
                *this.reply = None;
                break;
            }
            let n = ready!(this.inner.as_mut().poll_write(cx, &bytes[*done..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *done += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Whether `buf`, about to be written, is hyper's bare answer: then
    /// the replacement is queued and `buf` counts as written.
    fn replaced(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Option<Poll<io::Result<usize>>> {
        let this = self.as_mut().project();
        let Some(status) = bare_error(buf) else {
            *this.line_ended = false;
            return None;
        };
        let (status, reply) = json_reply(status, *this.line_ended, this.limits);
        *this.reply = Some((reply, 0));
        // Counted like the accept loop's own refusals. (The method is only
        // logged, for 500s; the head had none that could be read.)
        crate::api::record_request(
            "unmatched",
            &axum::http::Method::GET,
            status,
            std::time::Duration::ZERO,
            *this.peer,
        );
        Some(match self.poll_reply(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            // The rest goes out on flush or shutdown.
            _ => Poll::Ready(Ok(buf.len())),
        })
    }
}

impl<T: AsyncRead> AsyncRead for ParseErrorsAsJson<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        ready!(this.inner.poll_read(cx, buf))?;
        if !*this.line_ended {
            *this.line_ended = buf.filled()[before..].contains(&b'\n');
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite> AsyncWrite for ParseErrorsAsJson<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.as_mut().poll_reply(cx))?;
        if let Some(done) = self.as_mut().replaced(cx, buf) {
            return done;
        }
        self.project().inner.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready!(self.as_mut().poll_reply(cx))?;
        // hyper's answer to a bad head is a head alone: one slice.
        if let [only] = bufs
            && let Some(done) = self.as_mut().replaced(cx, only)
        {
            return done;
        }
        if bufs.len() > 1 {
            *self.as_mut().project().line_ended = false;
        }
        self.project().inner.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.as_mut().poll_reply(cx))?;
        self.project().inner.poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.as_mut().poll_reply(cx))?;
        self.project().inner.poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_only_bare_error_heads() {
        let bare = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert_eq!(bare_error(bare), Some(431));
        let ours = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\ncontent-length: 80\r\n\r\n";
        assert_eq!(bare_error(ours), None);
        let with_body = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\nx";
        assert_eq!(bare_error(with_body), None);
        assert_eq!(
            bare_error(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
            None
        );
        let (status, reply) = json_reply(431, false, &HttpConfig::default());
        assert_eq!(status, StatusCode::URI_TOO_LONG);
        let reply = String::from_utf8(reply).unwrap();
        assert!(
            reply.starts_with("HTTP/1.1 414 URI Too Long\r\n"),
            "{reply}"
        );
        assert!(reply.contains("\"uri_too_long\""), "{reply}");
    }
}

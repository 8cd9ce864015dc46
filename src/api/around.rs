//! A middleware that runs plain code before and after the inner service:
//! [`Hooks::before`] looks at the request, [`Hooks::after`] amends the
//! response. Request metrics and CORS headers are both this shape.
//!
//! Why not `axum::middleware::from_fn`: it clones the inner service and
//! boxes a future for every request, which cost a single `POST /api/views`
//! about 8,000 instructions per layer (callgrind); this layer calls the
//! inner service in place and allocates nothing.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::Response;
use tower::{Layer, Service};

/// What an [`Around`] layer does around each request.
pub trait Hooks: Clone + Send + Sync + 'static {
    /// What `before` hands to `after`: all `after` knows of the request, so
    /// that nothing else (the hooks themselves) is cloned per request.
    type Seen: Send + 'static;
    fn before(&self, req: &Request) -> Self::Seen;
    fn after<B>(seen: Self::Seen, resp: &mut Response<B>);
}

#[derive(Clone)]
pub struct Around<H>(pub H);

impl<S, H: Hooks> Layer<S> for Around<H> {
    type Service = AroundService<S, H>;

    fn layer(&self, inner: S) -> Self::Service {
        AroundService {
            inner,
            hooks: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct AroundService<S, H> {
    inner: S,
    hooks: H,
}

impl<S, H, B> Service<Request> for AroundService<S, H>
where
    S: Service<Request, Response = Response<B>>,
    H: Hooks,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = AroundFuture<S::Future, H>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let seen = self.hooks.before(&req);
        AroundFuture {
            inner: self.inner.call(req),
            seen: Some(seen),
        }
    }
}

pin_project_lite::pin_project! {
    pub struct AroundFuture<F, H: Hooks> {
        #[pin]
        inner: F,
        seen: Option<H::Seen>,
    }
}

impl<F, E, H, B> Future for AroundFuture<F, H>
where
    F: Future<Output = Result<Response<B>, E>>,
    H: Hooks,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut out = std::task::ready!(this.inner.poll(cx));
        if let (Ok(resp), Some(seen)) = (&mut out, this.seen.take()) {
            H::after(seen, resp);
        }
        Poll::Ready(out)
    }
}

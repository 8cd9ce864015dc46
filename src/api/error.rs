//! The API's one error type.

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 with a specific code (`invalid_article_id`, `invalid_json`, ...).
    #[error("{1}")]
    BadRequest(&'static str, String),
    #[error("{0}")]
    Unauthorized(String),
    /// 404 with a specific code (`not_found`, `unknown_article`).
    #[error("{1}")]
    NotFound(&'static str, String),
    #[error("method not allowed")]
    MethodNotAllowed,
    /// 409 with a specific code.
    #[error("{1}")]
    Conflict(&'static str, String),
    /// 410 with a specific code.
    #[error("{1}")]
    Gone(&'static str, String),
    /// 408: the body did not arrive in time.
    #[error("{0}")]
    RequestTimeout(String),
    #[error("request body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    /// 414: the request target is longer than `http.max_uri_bytes`.
    #[error("{0}")]
    UriTooLong(String),
    /// 431: the header section is over `http.max_header_bytes` or `http.max_headers`.
    #[error("{0}")]
    HeadersTooLarge(String),
    /// 429 with a specific code (`rate_limited`, `too_many_articles`) and
    /// `Retry-After` (whole seconds, at least 1).
    #[error("{message}")]
    TooManyRequests {
        code: &'static str,
        message: String,
        retry_after_secs: u64,
    },
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    Unavailable(String),
    /// `/readyz`'s 503: as `Unavailable`, with why in the body (`reason`).
    #[error("{0}")]
    NotReady(String),
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(..) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::NotFound(..) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(..) => StatusCode::CONFLICT,
            ApiError::Gone(..) => StatusCode::GONE,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UriTooLong(_) => StatusCode::URI_TOO_LONG,
            ApiError::HeadersTooLarge(_) => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable(_) | ApiError::NotReady(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(code, _)
            | ApiError::NotFound(code, _)
            | ApiError::Conflict(code, _)
            | ApiError::Gone(code, _)
            | ApiError::TooManyRequests { code, .. } => code,
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::RequestTimeout(_) => "request_timeout",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::UriTooLong(_) => "uri_too_long",
            ApiError::HeadersTooLarge(_) => "headers_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::Unavailable(_) | ApiError::NotReady(_) => "store_unavailable",
            ApiError::Internal(_) => "internal",
        }
    }

    pub fn bad(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::BadRequest(code, message.into())
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(m) => ApiError::Unavailable(m),
            StoreError::InvalidCursor(m) => ApiError::BadRequest("invalid_cursor", m),
            StoreError::Internal(m) => ApiError::Internal(m),
        }
    }
}

impl From<crate::store::IngestReject> for ApiError {
    fn from(r: crate::store::IngestReject) -> Self {
        use crate::store::IngestReject as R;
        match r {
            R::UnknownArticle => ApiError::NotFound(r.code(), r.message().into()),
            // Articles are not freed by waiting; a minute is a polite pace.
            R::TooManyArticles => ApiError::TooManyRequests {
                code: r.code(),
                message: r.message().into(),
                retry_after_secs: 60,
            },
        }
    }
}

impl ApiError {
    /// The contract's error body, `{"error": {"code", "message"}}`.
    pub fn body(&self) -> serde_json::Value {
        let message = match self {
            ApiError::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                "internal error".to_string()
            }
            ApiError::Unavailable(detail) => {
                // Logged once per episode by the readiness tracker; keep
                // the request path quiet.
                tracing::debug!(%detail, "store unavailable");
                "the store is unavailable; retry later".to_string()
            }
            ApiError::NotReady(_) => "the store is not ready; retry later".to_string(),
            other => other.to_string(),
        };
        let mut error = json!({"code": self.code(), "message": message});
        if let ApiError::NotReady(reason) = self {
            error["reason"] = json!(reason);
        }
        json!({ "error": error })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status(), Json(self.body())).into_response();
        let retry_after = match &self {
            ApiError::Unavailable(_) | ApiError::NotReady(_) => Some(1),
            ApiError::TooManyRequests {
                retry_after_secs, ..
            } => Some((*retry_after_secs).max(1)),
            _ => None,
        };
        if let Some(secs) = retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
        }
        if matches!(
            self,
            ApiError::UriTooLong(_) | ApiError::HeadersTooLarge(_) | ApiError::RequestTimeout(_)
        ) {
            // The rest of the request was not read: the connection cannot
            // carry another one.
            resp.headers_mut().insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
        }
        resp
    }
}

pub async fn not_found() -> ApiError {
    ApiError::NotFound("not_found", "no such route".into())
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

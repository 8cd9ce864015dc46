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
    #[error("request body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    Unavailable(String),
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
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(code, _)
            | ApiError::NotFound(code, _)
            | ApiError::Conflict(code, _)
            | ApiError::Gone(code, _) => code,
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::Unavailable(_) => "store_unavailable",
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = match &self {
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
            other => other.to_string(),
        };
        let body = Json(json!({"error": {"code": self.code(), "message": message}}));
        let mut resp = (status, body).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
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

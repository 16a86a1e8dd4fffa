//! `ApiError`: every error a request can meet, and the one place where
//! errors become status codes and JSON bodies.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Every error a request can meet, with its status.
#[derive(Debug)]
pub enum ApiError {
    NotFound(String),
    BadRequest(String),
    Unauthorized(String),
    MethodNotAllowed(String),
    PayloadTooLarge(String),
    Internal(String),
    Unavailable(String),
}

#[derive(Serialize)]
struct ErrorBody {
    error: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            ApiError::NotFound(m) => (StatusCode::NOT_FOUND, m),
            ApiError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            ApiError::Unauthorized(m) => (StatusCode::UNAUTHORIZED, m),
            ApiError::MethodNotAllowed(m) => (StatusCode::METHOD_NOT_ALLOWED, m),
            ApiError::PayloadTooLarge(m) => (StatusCode::PAYLOAD_TOO_LARGE, m),
            ApiError::Internal(m) => (StatusCode::INTERNAL_SERVER_ERROR, m),
            ApiError::Unavailable(m) => (StatusCode::SERVICE_UNAVAILABLE, m),
        };
        let mut response = (status, axum::Json(ErrorBody { error: message })).into_response();
        let extra = match status {
            StatusCode::UNAUTHORIZED => Some((
                header::WWW_AUTHENTICATE,
                "Basic realm=\"latencyd\", charset=\"UTF-8\"",
            )),
            StatusCode::METHOD_NOT_ALLOWED => Some((header::ALLOW, "GET, HEAD")),
            StatusCode::SERVICE_UNAVAILABLE => Some((header::RETRY_AFTER, "1")),
            _ => None,
        };
        if let Some((name, value)) = extra {
            response
                .headers_mut()
                .insert(name, HeaderValue::from_static(value));
        }
        response
    }
}

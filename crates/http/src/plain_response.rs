//! The plain-text answers of the endpoint (errors, health probes).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

const TEXT_PLAIN: &str = "text/plain; charset=utf-8";

/// `message` and a newline as `text/plain` with `status`.
pub(crate) fn plain(status: StatusCode, message: String) -> Response {
    let mut response = (status, message + "\n").into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_PLAIN));
    response
}

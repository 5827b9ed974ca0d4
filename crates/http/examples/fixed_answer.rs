//! The floor of a poll's HTTP side: answers every `GET /metrics` with the
//! same bytes, read once from a file, on the HTTP stack and runtime `multiprom
//! serve` uses (axum over hyper, tokio with two workers), with no
//! collection and no encoding. The polling benchmark (`just bench-poll`,
//! docs/benchmarks.md "Polling") polls it with each scenario's own answer,
//! so what a poll of `serve` costs beyond it is the collection's and the
//! encoding's.
//!
//! ```sh
//! cargo run --release -p multiprom-http --example fixed_answer -- 127.0.0.1:9400 BODY CONTENT_TYPE [CONTENT_ENCODING]
//! ```

use std::net::SocketAddr;
use std::process::ExitCode;

use axum::body::Bytes;
use axum::http::header::{CONTENT_ENCODING, CONTENT_TYPE};
use axum::http::HeaderValue;
use axum::response::IntoResponse;
use axum::routing::get;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, body, content_type, rest @ ..] = args.as_slice() else {
        eprintln!("usage: fixed_answer ADDRESS BODY_FILE CONTENT_TYPE [CONTENT_ENCODING]");
        return ExitCode::from(2);
    };
    let address: SocketAddr = match listen.parse() {
        Ok(address) => address,
        Err(err) => {
            eprintln!("fixed_answer: {listen}: {err}");
            return ExitCode::from(2);
        }
    };
    let body = match std::fs::read(body) {
        Ok(body) => Bytes::from(body),
        Err(err) => {
            eprintln!("fixed_answer: {body}: {err}");
            return ExitCode::from(2);
        }
    };
    let (Ok(content_type), Ok(encoding)) = (
        HeaderValue::from_str(content_type),
        HeaderValue::from_str(rest.first().map_or("", String::as_str)),
    ) else {
        eprintln!("fixed_answer: a header value is not valid");
        return ExitCode::from(2);
    };
    let answer = move || {
        let (body, content_type, encoding) = (body.clone(), content_type.clone(), encoding.clone());
        async move {
            let mut response = (([(CONTENT_TYPE, content_type)]), body).into_response();
            if !encoding.is_empty() {
                response.headers_mut().insert(CONTENT_ENCODING, encoding);
            }
            response
        }
    };
    let app = axum::Router::new().route("/metrics", get(answer));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("fixed_answer: {err}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(address).await?;
        axum::serve(listener, app).await
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("fixed_answer: {err}");
            ExitCode::FAILURE
        }
    }
}

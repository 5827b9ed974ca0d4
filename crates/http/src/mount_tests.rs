//! The endpoint merged into a host app that has routes of its own.

use std::io::{Read, Write};
use std::net::TcpStream;

use axum::http::StatusCode;
use axum::routing::get;
use multiprom_collector::DirCollector;
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};

use crate::{serve, Endpoint, EndpointConfig, ServerConfig};

/// `GET path` over a fresh connection: the status line and the body.
fn get_text(address: std::net::SocketAddr, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

#[test]
fn the_metrics_router_leaves_the_hosts_root_and_fallback_alone() {
    let dir = tempfile::tempdir().unwrap();
    let name = FileName::new(MetricKind::Counter, "1").unwrap();
    let mut file = FileWriter::open(dir.path(), &name).unwrap();
    let key = encode_key("requests", "requests_total", [], "Requests.");
    file.slot(&key).unwrap().add(3.0);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let endpoint = Endpoint::new(DirCollector::new(dir.path()), EndpointConfig::default());
    // Merging `router()` here panics in axum: two `/` routes, two fallbacks.
    let app = axum::Router::new()
        .route("/", get(|| async { "the host's page" }))
        .merge(endpoint.metrics_router())
        .fallback(|| async { (StatusCode::NOT_FOUND, "the host's 404") });
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    runtime.spawn(serve(
        listener,
        app,
        ServerConfig::default(),
        std::future::pending(),
    ));

    let (status, body) = get_text(address, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    assert!(body.contains("requests_total 3.0\n"), "{body}");
    assert_eq!(get_text(address, "/").1, "the host's page");
    let (status, body) = get_text(address, "/-/ready");
    assert!(status.contains(" 404 "), "{status}");
    assert_eq!(body, "the host's 404");
}

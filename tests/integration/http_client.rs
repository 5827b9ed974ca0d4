//! A tiny HTTP/1.1 client over `std::net::TcpStream` for tests against the
//! real binary: one request per connection (`Connection: close`), bounded by
//! read/write timeouts, loopback addresses only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Every test request gives up after this long.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// A parsed response.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub status: u16,
    /// Header names lowercased, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header named `name` (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as UTF-8 text.
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("UTF-8 body")
    }
}

/// Sends `method path` with `headers` to `addr` (must be loopback).
pub(crate) fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Response {
    assert!(
        addr.ip().is_loopback(),
        "tests only talk to loopback: {addr}"
    );
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("send request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response");
    parse_response(&raw, method == "HEAD")
}

/// `GET path`.
pub(crate) fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Response {
    request(addr, "GET", path, headers)
}

fn parse_response(raw: &[u8], head_request: bool) -> Response {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of headers in {:?}", String::from_utf8_lossy(raw)));
    let head = std::str::from_utf8(&raw[..split]).expect("ASCII headers");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (k, v) = l.split_once(':').expect("header line");
            (k.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    let rest = &raw[split + 4..];
    let response = Response {
        status,
        headers,
        body: Vec::new(),
    };
    if head_request {
        assert!(rest.is_empty(), "HEAD response with a body");
        return response;
    }
    let body = if response.header("transfer-encoding") == Some("chunked") {
        decode_chunked(rest)
    } else {
        if let Some(len) = response.header("content-length") {
            let len: usize = len.parse().expect("content-length");
            assert_eq!(rest.len(), len, "body length differs from Content-Length");
        }
        rest.to_vec()
    };
    Response { body, ..response }
}

fn decode_chunked(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size_text = std::str::from_utf8(&rest[..line_end]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
            .expect("chunk size");
        rest = &rest[line_end + 2..];
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// Decompresses a gzip body.
pub(crate) fn gunzip(bytes: &[u8]) -> String {
    let mut out = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut out)
        .expect("valid gzip");
    out
}

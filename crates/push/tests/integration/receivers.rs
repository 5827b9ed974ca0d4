//! A pusher against receivers that fail in every way a network can: it
//! retries what is worth retrying (as `Retry-After` says), gives up on a
//! refusal, and never waits past the next push, whatever the receiver does.
//! The receivers are sockets of this test that answer as told.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use multiprom_collector::{DirCollector, ServedView};
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};
use multiprom_push::{Protocol, PushConfig, Pusher, RemoteWriteVersion};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// A receiver on a loopback port answering the n-th request (0-based)
/// with `answer(n)` (raw bytes; `None`: accept and never answer), and
/// counting the requests.
async fn receiver(answer: fn(usize) -> Option<&'static [u8]>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/api/v1/write", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&requests);
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let n = counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                // Read the request's head (the body follows; it is not
                // looked at).
                let mut buf = vec![0u8; 1 << 16];
                let _ = stream.read(&mut buf).await;
                match answer(n) {
                    Some(bytes) => {
                        let _ = stream.write_all(bytes).await;
                        let _ = stream.shutdown().await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(3600)).await,
                }
            });
        }
    });
    (url, requests)
}

fn pusher(url: &str, timeout: Duration) -> (Pusher, tempfile::TempDir) {
    pusher_of(RemoteWriteVersion::V1, url, timeout)
}

fn pusher_of(
    version: RemoteWriteVersion,
    url: &str,
    timeout: Duration,
) -> (Pusher, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let view = Arc::new(ServedView::new(DirCollector::new(dir.path())));
    let mut config = PushConfig::new(Protocol::RemoteWrite { version }, url).unwrap();
    config.timeout = timeout;
    (Pusher::new(view, config).unwrap(), dir)
}

/// A Remote-Write 2.0 pusher of a directory holding one counter sample.
fn pusher_v2_of_a_sample(url: &str) -> (Pusher, tempfile::TempDir) {
    let (pusher, dir) = pusher_of(RemoteWriteVersion::V2, url, Duration::from_secs(5));
    let name = FileName::new(MetricKind::Counter, "1").unwrap();
    FileWriter::open(dir.path(), &name)
        .unwrap()
        .slot(&encode_key("jobs", "jobs_total", [], "Jobs."))
        .unwrap()
        .add(1.0);
    (pusher, dir)
}

const NO_CONTENT: &[u8] = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n";

#[tokio::test]
async fn a_refusal_is_not_retried() {
    let (url, requests) =
        receiver(|_| Some(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 8\r\n\r\nbad body")).await;
    let (mut pusher, _dir) = pusher(&url, Duration::from_secs(5));
    let started = Instant::now();
    assert!(!pusher.push(Instant::now() + Duration::from_secs(10)).await);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    let stats = pusher.report().stats;
    assert_eq!((stats.pushes(), stats.failures()), (1, 1));
    assert!(
        stats.failing().unwrap().contains("400"),
        "{:?}",
        stats.failing()
    );
}

#[tokio::test]
async fn a_retryable_status_is_sent_again_when_retry_after_says() {
    let (url, requests) = receiver(|n| {
        Some(if n == 0 {
            b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n"
        } else {
            NO_CONTENT
        })
    })
    .await;
    let (mut pusher, _dir) = pusher(&url, Duration::from_secs(5));
    let started = Instant::now();
    assert!(pusher.push(Instant::now() + Duration::from_secs(10)).await);
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(requests.load(Ordering::SeqCst), 2);
    let stats = pusher.report().stats;
    assert_eq!((stats.pushes(), stats.failures()), (2, 1));
    assert!(stats.failing().is_none() && stats.last_success().is_some());
}

#[tokio::test]
async fn garbage_silence_dns_and_tls_failures_are_retried_until_the_next_push_is_due() {
    let (garbage, garbage_requests) = receiver(|_| Some(b"\x00\x01not http at all\r\n\r\n")).await;
    let (silent, _) = receiver(|_| None).await;
    let (plain, _) = receiver(|_| Some(NO_CONTENT)).await;
    let tls_to_plain = plain.replace("http://", "https://");
    for url in [
        garbage.as_str(),
        silent.as_str(),
        "http://no-such-host.invalid/api/v1/write",
        tls_to_plain.as_str(),
    ] {
        let (mut pusher, _dir) = pusher(url, Duration::from_millis(300));
        let started = Instant::now();
        let due = Duration::from_secs(2);
        assert!(!pusher.push(Instant::now() + due).await, "{url}");
        // Never past the next push (give or take one request's timeout).
        let took = started.elapsed();
        assert!(took < due + Duration::from_millis(500), "{url}: {took:?}");
        let stats = pusher.report().stats;
        assert!(
            stats.failures() >= 2,
            "{url}: {} failures",
            stats.failures()
        );
        assert_eq!(stats.failures(), stats.pushes(), "{url}");
        eprintln!("{url}: {:?}", stats.failing());
    }
    assert!(garbage_requests.load(Ordering::SeqCst) >= 2);
}

/// A receiver that does not take Remote-Write 2.0 answers 415, as the
/// specification says: refused at once, and the failure says why.
#[tokio::test]
async fn a_415_to_version_2_says_the_receiver_does_not_take_it() {
    let (url, requests) =
        receiver(|_| Some(b"HTTP/1.1 415 Unsupported Media Type\r\nContent-Length: 0\r\n\r\n"))
            .await;
    let (mut pusher, _dir) = pusher_v2_of_a_sample(&url);
    assert!(!pusher.push(Instant::now() + Duration::from_secs(10)).await);
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    let failing = pusher.report().stats.failing().unwrap();
    assert!(
        failing.contains("415") && failing.contains("does not take Remote-Write 2.0"),
        "{failing}"
    );
}

/// A 2xx whose written counts say nothing was written (a 1.0 receiver
/// reading the body as an empty 1.0 request) is a failure; one that
/// wrote them, or says nothing, is a success.
#[tokio::test]
async fn a_version_2_receiver_that_wrote_nothing_failed() {
    let (url, _) = receiver(|_| {
        Some(
            b"HTTP/1.1 204 No Content\r\nX-Prometheus-Remote-Write-Samples-Written: 0\r\n\
              X-Prometheus-Remote-Write-Histograms-Written: 0\r\n\
              X-Prometheus-Remote-Write-Exemplars-Written: 0\r\nContent-Length: 0\r\n\r\n",
        )
    })
    .await;
    let (mut pusher, _dir) = pusher_v2_of_a_sample(&url);
    assert!(!pusher.push(Instant::now() + Duration::from_secs(10)).await);
    let failing = pusher.report().stats.failing().unwrap();
    assert!(failing.contains("wrote none of 1 samples"), "{failing}");
    let (url, _) = receiver(|_| {
        Some(
            b"HTTP/1.1 204 No Content\r\nX-Prometheus-Remote-Write-Samples-Written: 1\r\n\
              Content-Length: 0\r\n\r\n",
        )
    })
    .await;
    let (mut pusher, _dir) = pusher_v2_of_a_sample(&url);
    assert!(pusher.push(Instant::now() + Duration::from_secs(10)).await);
    let (url, _) = receiver(|_| Some(NO_CONTENT)).await;
    let (mut pusher, _dir) = pusher_v2_of_a_sample(&url);
    assert!(pusher.push(Instant::now() + Duration::from_secs(10)).await);
}

//! The HTTP request path: arbitrary bytes sent as a raw HTTP/1.1 request
//! stream to the real server (`multiprom_http::serve` with an `Endpoint`'s
//! router, default limits, on 127.0.0.1) over a fresh connection, then the
//! write side closed. The server must neither panic (libFuzzer's panic hook
//! aborts on a panic in any thread, including the server's tasks and its
//! blocking pool) nor answer without bound, must close the connection within
//! a bounded time, and must still answer a normal scrape afterwards.
#![no_main]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use multiprom_collector::DirCollector;
use multiprom_format::{encode_key, FileName, FileWriter, GaugeMode, MetricKind};
use multiprom_http::{serve, Endpoint, EndpointConfig, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

/// Far more than any answer to 4 KiB of requests (libFuzzer's default
/// input size): a few hundred pipelined scrapes of a few KiB each.
const RESPONSE_LIMIT: u64 = 16 << 20;
/// Longer than every server-side timeout (10 s for headers and for a
/// scrape): only a connection that would never end runs into it.
const PATIENCE: Duration = Duration::from_secs(30);

const SCRAPE: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n";
const EXPECTED_LINE: &str = "requests_total{code=\"200\"} 5.0\n";

struct Server {
    /// Single-threaded: the server runs only while an exchange is being
    /// driven, so one input's requests are served in a repeatable order.
    runtime: Runtime,
    address: SocketAddr,
}

/// The metrics directory of each fuzzing process is named after its pid:
/// libFuzzer ends the process without running destructors, so each start
/// removes the directories of processes that are gone.
const DIR_PREFIX: &str = "multiprom-fuzz-http-";

fn metrics_dir() -> PathBuf {
    let temp = std::env::temp_dir();
    for entry in std::fs::read_dir(&temp).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let pid = name.to_str().and_then(|n| n.strip_prefix(DIR_PREFIX));
        if pid.is_some_and(|pid| !Path::new("/proc").join(pid).exists()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let dir = temp.join(format!("{DIR_PREFIX}{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).expect("a metrics directory");
    dir
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let dir = metrics_dir();
        write_worker_files(&dir);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("a loopback port");
        let address = listener.local_addr().expect("the port's address");
        let endpoint = Endpoint::new(DirCollector::new(dir), EndpointConfig::default());
        runtime.spawn(serve(
            listener,
            endpoint.router(),
            ServerConfig::default(),
            std::future::pending(),
        ));
        Server { runtime, address }
    })
}

/// Files of every type, so that scrapes and the status page have content.
fn write_worker_files(dir: &Path) {
    let kinds = [
        MetricKind::Counter,
        MetricKind::Gauge(GaugeMode::LiveSum),
        MetricKind::Histogram,
        MetricKind::Summary,
    ];
    for (pid, requests) in [("1", 2.0), ("2", 3.0)] {
        for kind in kinds {
            let name = FileName::new(kind, pid).expect("a valid file name");
            let mut file = FileWriter::open(dir, &name).expect("a writable directory");
            let mut set = |family: &str, sample: &str, labels: &[(&str, &str)], value: f64| {
                let key = encode_key(family, sample, labels.iter().copied(), "Help <&>.");
                file.slot(&key).expect("room for a key").add(value);
            };
            match kind {
                MetricKind::Counter => {
                    set("requests", "requests_total", &[("code", "200")], requests)
                }
                MetricKind::Gauge(_) => set("busy", "busy", &[], 1.0),
                MetricKind::Histogram => {
                    set("wait", "wait_sum", &[], 0.25);
                    set("wait", "wait_bucket", &[("le", "0.5")], 1.0);
                    set("wait", "wait_bucket", &[("le", "+Inf")], 1.0);
                }
                MetricKind::Summary => {
                    set("size", "size_sum", &[], 10.0);
                    set("size", "size_count", &[], 1.0);
                }
            }
        }
    }
}

/// Sends `request` on a fresh connection, closes the write side, and reads
/// until the server closes (or [`RESPONSE_LIMIT`] + 1 bytes).
async fn exchange(address: SocketAddr, request: &[u8]) -> Vec<u8> {
    let stream = TcpStream::connect(address)
        .await
        .expect("the server accepts connections");
    let (mut reader, mut writer) = stream.into_split();
    // Both at once: a server answering pipelined requests while we are
    // still writing must not fill a buffer that nobody drains.
    let send = async {
        // The server may close before taking everything (a bad request):
        // that is an answer, not a failure.
        let _ = writer.write_all(request).await;
        let _ = writer.shutdown().await;
    };
    let receive = async {
        let mut response = Vec::new();
        // A reset after the server closed with our bytes unread is fine too.
        let _ = (&mut reader)
            .take(RESPONSE_LIMIT + 1)
            .read_to_end(&mut response)
            .await;
        response
    };
    let ((), response) = tokio::join!(send, receive);
    response
}

fn exchange_in_time(server: &Server, request: &[u8]) -> Vec<u8> {
    server
        .runtime
        .block_on(async { tokio::time::timeout(PATIENCE, exchange(server.address, request)).await })
        .unwrap_or_else(|_| panic!("the connection was still open after {PATIENCE:?}"))
}

fuzz_target!(|data: &[u8]| {
    let server = server();
    let response = exchange_in_time(server, data);
    assert!(
        response.len() as u64 <= RESPONSE_LIMIT,
        "more than {RESPONSE_LIMIT} bytes in answer to {} bytes",
        data.len()
    );
    // A 503 (scrapes queued past their wait, or over their timeout on a
    // loaded machine) is the server working as designed, not a fault: ask
    // again, within the same patience.
    let deadline = std::time::Instant::now() + PATIENCE;
    let scrape = loop {
        let scrape = exchange_in_time(server, SCRAPE);
        if !scrape.starts_with(b"HTTP/1.1 503 ") || std::time::Instant::now() >= deadline {
            break scrape;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let scrape = String::from_utf8_lossy(&scrape);
    assert!(
        scrape.starts_with("HTTP/1.1 200 OK\r\n") && scrape.contains(EXPECTED_LINE),
        "a normal scrape after this input got:\n{scrape}"
    );
});

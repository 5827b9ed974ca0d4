//! Load shedding over real HTTP: a scrape that finds every slot busy for
//! the whole queue wait, and a scrape that overruns its timeout, answer 503
//! and leave the endpoint working. A collection is held deterministically by
//! the endpoint's before-collect hook, so no timing decides the outcome.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use crate::endpoint::BeforeCollect;
use crate::{serve, Endpoint, EndpointConfig, ServerConfig};
use multiprom_collector::DirCollector;
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};

/// How long any wait here lasts before the test fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(60);

/// Holds every collection that starts while it is closed.
#[derive(Default)]
struct Gate {
    /// (closed, collections waiting at it)
    state: Mutex<(bool, usize)>,
    changed: Condvar,
}

impl Gate {
    fn closed() -> Arc<Gate> {
        let gate = Arc::new(Gate::default());
        gate.state.lock().unwrap().0 = true;
        gate
    }

    /// The hook: wait while the gate is closed (at most `PATIENCE`).
    fn hook(self: &Arc<Self>) -> BeforeCollect {
        let gate = Arc::clone(self);
        Arc::new(move || {
            let mut state = gate.state.lock().unwrap();
            state.1 += 1;
            gate.changed.notify_all();
            let (mut state, _) = gate
                .changed
                .wait_timeout_while(state, PATIENCE, |s| s.0)
                .unwrap();
            state.1 -= 1;
            gate.changed.notify_all();
        })
    }

    fn wait_for_a_waiter(&self) {
        let state = self.state.lock().unwrap();
        let (state, timeout) = self
            .changed
            .wait_timeout_while(state, PATIENCE, |s| s.1 == 0)
            .unwrap();
        assert!(
            !timeout.timed_out() && state.1 > 0,
            "no collection reached the gate"
        );
    }

    fn waiting(&self) -> usize {
        self.state.lock().unwrap().1
    }

    fn open(&self) {
        self.state.lock().unwrap().0 = false;
        self.changed.notify_all();
    }
}

/// What the endpoint logged, from every thread (the scrapes run on the
/// runtime's threads and its blocking pool).
fn log() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || LogWriter(Arc::clone(&sink)))
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        log
    })
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged() -> String {
    String::from_utf8_lossy(&log().lock().unwrap()).into_owned()
}

/// A directory with one counter file (`requests_total 3.0`).
fn metrics_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let name = FileName::new(MetricKind::Counter, "1").unwrap();
    let mut file = FileWriter::open(dir.path(), &name).unwrap();
    let key = encode_key("requests", "requests_total", [], "Requests.");
    file.slot(&key).unwrap().add(3.0);
    dir
}

/// The endpoint served on a loopback port by a runtime of its own, which
/// lives as long as the returned value.
struct Served {
    _runtime: tokio::runtime::Runtime,
    address: SocketAddr,
    gate: Arc<Gate>,
}

impl Drop for Served {
    /// Opens the gate before the runtime goes, so a failing test ends at
    /// once instead of waiting out a held collection.
    fn drop(&mut self) {
        self.gate.open();
    }
}

fn serve_endpoint(dir: &std::path::Path, config: EndpointConfig, gate: &Arc<Gate>) -> Served {
    log();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    let endpoint = Endpoint::with_before_collect(DirCollector::new(dir), config, gate.hook());
    runtime.spawn(serve(
        listener,
        endpoint.router(),
        ServerConfig::default(),
        std::future::pending(),
    ));
    Served {
        _runtime: runtime,
        address,
        gate: Arc::clone(gate),
    }
}

/// An answer: status code, header block (lowercase) and body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// `GET path` on a new connection, read to its end.
fn get(address: SocketAddr, path: &str) -> Answer {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    Answer {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

#[test]
fn a_scrape_finding_every_slot_busy_answers_503_and_the_endpoint_recovers() {
    let dir = metrics_dir();
    let gate = Gate::closed();
    let config = EndpointConfig {
        max_concurrent_scrapes: 1,
        scrape_queue_wait: Duration::from_millis(100),
        ..EndpointConfig::default()
    };
    let served = serve_endpoint(dir.path(), config, &gate);
    let address = served.address;
    // The first scrape takes the only slot and waits at the gate...
    let first = std::thread::spawn(move || get(address, "/metrics"));
    gate.wait_for_a_waiter();
    // ...so the next one waits 100 ms for a slot and gets 503, as does the
    // status page, which collects too.
    let busy = get(address, "/metrics");
    assert_eq!(busy.status, 503);
    assert!(busy.head.contains("\r\nretry-after: 1"), "{}", busy.head);
    assert!(
        busy.body.contains("too many scrapes at once (limit 1)"),
        "{}",
        busy.body
    );
    assert_eq!(get(address, "/").status, 503);
    gate.open();
    let first = first.join().unwrap();
    assert_eq!(first.status, 200);
    assert!(
        first.body.contains("requests_total 3.0\n"),
        "{}",
        first.body
    );
    let after = get(address, "/metrics");
    assert_eq!(after.status, 200);
    assert!(
        after
            .body
            .contains("multiprom_scrapes_total{result=\"busy\"} 1.0\n"),
        "{}",
        after.body
    );
    assert!(
        after
            .body
            .contains("multiprom_scrapes_total{result=\"ok\"} 2.0\n"),
        "{}",
        after.body
    );
}

#[test]
fn an_overrunning_scrape_answers_503_and_the_endpoint_recovers() {
    let dir = metrics_dir();
    let gate = Gate::closed();
    let config = EndpointConfig {
        scrape_timeout: Duration::from_millis(200),
        ..EndpointConfig::default()
    };
    let served = serve_endpoint(dir.path(), config, &gate);
    let timed_out = get(served.address, "/metrics");
    assert_eq!(timed_out.status, 503);
    assert!(
        timed_out.body.contains("scrape timed out after 200ms"),
        "{}",
        timed_out.body
    );
    // The answer did not wait for the collection, which is still held.
    assert_eq!(gate.waiting(), 1, "the scrape is still held at the gate");
    let logged = logged();
    assert!(
        logged.contains("answering 503: scrape timed out after 200ms"),
        "{logged}"
    );
    gate.open();
    let after = get(served.address, "/metrics");
    assert_eq!(after.status, 200);
    assert!(
        after
            .body
            .contains("multiprom_scrapes_total{result=\"timeout\"} 1.0\n"),
        "{}",
        after.body
    );
}

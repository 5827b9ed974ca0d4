//! Malformed, slow and hostile HTTP requests beside normal scrapes.

use super::*;

/// Sends `bytes` on a fresh connection and reads whatever comes back (the
/// server may close early: a reset is an answer too). Returns the status
/// line's code, if any.
fn send_raw(addr: std::net::SocketAddr, bytes: &[u8]) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream.set_write_timeout(Some(PATIENCE)).unwrap();
    let _ = stream.write_all(bytes);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
}

/// Slow clients (200 connections sending headers a byte at a time),
/// oversized and malformed requests and 50 concurrent scrapes against
/// `serve`: each abusive request gets an error status or a closed
/// connection, never a crash; a normal scrape keeps answering 200 with the
/// right body within a generous bound; memory stays bounded and the
/// descriptors are given back.
#[test]
fn http_abuse_leaves_normal_scrapes_served() {
    let dir = temp_dir();
    write_good_counter(&dir.path().join("counter_1.db"), 7.0);
    let (server, addr) = serve(dir.path(), &[]);
    let pid = server.pid();
    // The second scrape sets the directory watch, which holds descriptors
    // of its own for as long as the server lives.
    for _ in 0..2 {
        assert_eq!(get(addr, "/metrics", &[]).status, 200);
    }
    let baseline_fds = fd_count(pid);
    let stop = AtomicBool::new(false);
    let slow_latency = Duration::from_secs(5);
    // Slowloris: 200 connections with half a request each.
    let mut streams: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    for stream in &mut streams {
        stream.set_write_timeout(Some(PATIENCE)).unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
    }
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        // Slowloris: the 200 connections dribble their headers.
        let slow = s.spawn(|| {
            let mut sent = 0;
            while !stop.load(Ordering::Relaxed) {
                for stream in &mut streams {
                    let _ = stream.write_all(b"X");
                }
                sent += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
            sent
        });
        // Malformed and oversized requests.
        let mut line = b"GET /".to_vec();
        line.extend(std::iter::repeat_n(b'a', 1 << 20));
        line.extend_from_slice(b" HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut many_headers = b"GET /metrics HTTP/1.1\r\nHost: x\r\n".to_vec();
        for i in 0..10_000 {
            many_headers.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
        }
        many_headers.extend_from_slice(b"\r\n");
        let mut garbage = vec![0u8; 64 * 1024];
        let mut chance = Chance(0x2545_f491_4f6c_dd1d);
        for b in &mut garbage {
            *b = chance.below(256) as u8;
        }
        let bad_requests: Vec<(&str, Vec<u8>)> =
            vec![
            ("a 1 MiB request line", line),
            ("10,000 headers", many_headers),
            ("64 KiB of random bytes", garbage),
            ("no method", b" /metrics HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
            ("HTTP/9.9", b"GET /metrics HTTP/9.9\r\nHost: x\r\n\r\n".to_vec()),
            (
                "a 1 GB body announced",
                b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\nabc"
                    .to_vec(),
            ),
            (
                "bad chunked body",
                b"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
                    .to_vec(),
            ),
            ("a header line with no colon", b"GET /metrics HTTP/1.1\r\nHost x\r\n\r\n".to_vec()),
        ];
        let abuse = s.spawn(move || {
            for round in 0..3 {
                for (what, bytes) in &bad_requests {
                    let status = send_raw(addr, bytes);
                    assert!(
                        status.is_none_or(|code| code >= 400),
                        "{what} (round {round}) answered {status:?}"
                    );
                }
            }
        });
        // 50 concurrent scrapes, three times over.
        let crowd = s.spawn(|| {
            let mut answered = 0;
            for _ in 0..3 {
                let statuses: Vec<u16> = std::thread::scope(|inner| {
                    let handles: Vec<_> = (0..50)
                        .map(|_| inner.spawn(|| get(addr, "/metrics", &[]).status))
                        .collect();
                    handles.into_iter().map(|h| h.join().unwrap()).collect()
                });
                for status in statuses {
                    // More scrapes than the endpoint runs at once wait, then
                    // get 503: overload is answered, never a hang or crash.
                    assert!(status == 200 || status == 503, "{status}");
                    answered += usize::from(status == 200);
                }
            }
            answered
        });
        // Meanwhile, a normal scrape keeps being answered.
        let mut normal = 0;
        let busy_until = Instant::now() + Duration::from_secs(2);
        while !abuse.is_finished() || !crowd.is_finished() || Instant::now() < busy_until {
            let started = Instant::now();
            let response = get(addr, "/metrics", &[]);
            let took = started.elapsed();
            assert_eq!(response.status, 200);
            assert!(response.text().contains("\nc_total 7.0\n"));
            assert!(took < slow_latency, "a normal scrape took {took:?}");
            normal += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        abuse.join().unwrap();
        let answered = crowd.join().unwrap();
        assert!(answered > 0, "no concurrent scrape answered 200");
        let rss = rss_kib(pid);
        assert!(rss < 128 * 1024, "RSS {rss} KiB under abuse");
        stop.store(true, Ordering::Relaxed);
        let sent = slow.join().unwrap();
        assert!(sent >= 5, "the slow clients sent only {sent} times");
        eprintln!("http_abuse: {normal} normal scrapes, {answered} of 150 concurrent ones answered 200, RSS {rss} KiB");
    });
    drop(streams);
    // Every abusive connection is closed by now on our side; the server
    // gives its descriptors back.
    eventually("descriptors back to the baseline", || {
        fd_count(pid) <= baseline_fds
    });
}

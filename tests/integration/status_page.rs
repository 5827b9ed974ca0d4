//! The status page at `/` with thousands of files: summary and problems
//! first, families with their series counts, the chart, and a paged file
//! table; rendered by a real headless Chromium.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{ensure_tool, temp_dir, write_aged};
use crate::http_client::get;
use crate::serve::{fixture, serve};
use crate::spawned_server::PATIENCE;

/// The fixture's 39 files (3 exited workers) copied under 80 more pids each,
/// plus two bad files: 39 * 81 + 2 = 3161 files.
fn big_dir() -> (tempfile::TempDir, usize) {
    let source = fixture();
    let dir = temp_dir();
    let mut count = 0;
    for entry in std::fs::read_dir(source.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let (stem, pid) = name.trim_end_matches(".db").rsplit_once('_').unwrap();
        for copy in 0..81u32 {
            let new_pid = if copy == 0 {
                pid.to_owned()
            } else {
                // Far above any real pid_max: these processes never existed.
                (1_000_000_000 + copy * 1000 + pid.parse::<u32>().unwrap() % 1000).to_string()
            };
            std::fs::copy(
                entry.path(),
                dir.path().join(format!("{stem}_{new_pid}.db")),
            )
            .unwrap();
            count += 1;
        }
    }
    write_aged(&dir.path().join("counter_2000000007.db"), b"");
    write_aged(&dir.path().join("histogram_2000000008.db"), b"garbage!");
    (dir, count + 2)
}

fn position(html: &str, needle: &str) -> usize {
    html.find(needle)
        .unwrap_or_else(|| panic!("no {needle:?} in the page"))
}

#[test]
fn thousands_of_files_summary_first_and_paged() {
    let (dir, files) = big_dir();
    assert_eq!(files, 3161);
    let (_server, addr) = serve(dir.path(), &[]);
    for _ in 0..3 {
        assert_eq!(get(addr, "/metrics", &[]).status, 200);
    }
    let page = get(addr, "/", &[]);
    assert_eq!(page.status, 200);
    let html = page.text();
    assert!(
        html.contains(&format!(
            "{files} files: {} ok, 2 bad, 0 vanished",
            files - 2
        )),
        "{}",
        &html[..2000]
    );
    // Nobody holds the fixture's files: the kernel says so of each.
    let writers = html
        .lines()
        .find(|l| l.contains("id=\"liveness\""))
        .unwrap();
    assert_eq!(
        writers,
        format!("<p id=\"liveness\">Writers: known: 0 files held by a live writer, {files} whose writer is gone</p>")
    );
    // Order: summary, writers, problems, types, families, chart, files.
    let order = [
        "id=\"summary\"",
        "id=\"liveness\"",
        "id=\"problems\"",
        "id=\"types\"",
        "id=\"families\"",
        "id=\"chart\"",
        "id=\"files\"",
    ];
    let positions: Vec<usize> = order.iter().map(|n| position(&html, n)).collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "{order:?} at {positions:?}"
    );
    assert!(
        html.contains("<h2>2 bad files (skipped)</h2>"),
        "problems on top"
    );
    assert!(
        html.contains("counter_2000000007.db: offset 0: 0-byte file"),
        "problem listed"
    );
    assert!(
        html.contains("<tr><td>gauge livesum</td><td class=\"n\">243</td><td class=\"n\">0</td>"),
        "types"
    );
    // Families with their series, biggest first: a pid-labelled `all` gauge
    // grows with every process (243 pids x 2 models).
    let families = &html[position(&html, "id=\"families\"")..position(&html, "id=\"chart\"")];
    let first = families
        .lines()
        .find(|l| l.starts_with("<tr><td><code>"))
        .unwrap();
    assert_eq!(
        first,
        "<tr><td><code>g_all</code></td><td>gauge</td><td class=\"n\">486</td><td></td></tr>"
    );
    assert!(html.contains("<svg id=\"chart\""), "chart after 3 scrapes");
    assert!(html.contains("polyline"), "chart lines");
    // Paged: 500 rows, collapsed, with a link to the next page.
    assert_eq!(html.matches("<tr class=").count(), 500);
    assert!(html.contains("<details id=\"files\"><summary>Files 1-500 of 3161 (page 1 of 7)"));
    assert!(html.contains("<a href=\"?page=2\">next</a>"));
    let last = get(addr, "/?page=7", &[]).text();
    assert_eq!(last.matches("<tr class=").count(), 161);
    assert!(last.contains("(page 7 of 7)"));
    assert!(last.contains("<a href=\"?page=6\">previous</a>"));
    assert!(html.len() < 400_000, "page is {} bytes", html.len());
}

/// Runs headless Chromium with `args` on `url`; killed after PATIENCE.
fn chromium(profile: &Path, args: &[&str], url: &str) -> String {
    let program = ensure_tool("chromium", "chromium");
    let stdout = profile.with_extension("stdout");
    let stderr = profile.with_extension("stderr");
    let mut child = Command::new(program)
        .args([
            "--headless",
            "--no-sandbox", // CI runs as root
            "--disable-gpu",
            "--no-first-run",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        // Files, not pipes: a DOM bigger than a pipe's buffer would block
        // Chromium while this waits for it to exit.
        .stdout(Stdio::from(std::fs::File::create(&stdout).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&stderr).unwrap()))
        .spawn()
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    let log = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(status.success(), "{status}: {log}");
    let text = std::fs::read_to_string(&stdout).unwrap();
    assert!(
        !text.is_empty() || !args.contains(&"--dump-dom"),
        "chromium printed nothing; stderr:\n{log}"
    );
    text
}

#[test]
fn headless_chromium_renders_the_page() {
    let (dir, files) = big_dir();
    let (_server, addr) = serve(dir.path(), &[]);
    for _ in 0..3 {
        get(addr, "/metrics", &[]);
    }
    let work = temp_dir();
    let url = format!("http://{addr}/");
    // The DOM as Chromium built it: the same page, nothing lost in parsing.
    let dom = chromium(&work.path().join("profile-dom"), &["--dump-dom"], &url);
    assert!(
        dom.contains(&format!("{files} files: ")),
        "{:?}",
        &dom[..dom.len().min(300)]
    );
    assert_eq!(
        dom.matches("<tr class=\"ok\">").count() + dom.matches("<tr class=\"bad\">").count(),
        500
    );
    assert!(dom.contains("<polyline"), "the chart survives parsing");
    assert!(dom.contains("<details id=\"files\">"));
    // A screenshot: what a person sees (kept under target/ for a look).
    let shot = crate::harness::target_dir().join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    chromium(
        &work.path().join("profile-shot"),
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1600",
            "--hide-scrollbars",
        ],
        &url,
    );
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(png.len() > 20_000, "{} bytes: a blank page?", png.len());
}

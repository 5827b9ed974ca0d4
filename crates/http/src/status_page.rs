//! `GET /`: one self-contained HTML page (no scripts, no external assets)
//! that shows the directory at a glance: one row per `*.db` file.

use std::fmt::Write as _;
use std::path::Path;

use multiprom_collector::{FileState, Scrape};

use crate::process::ProcessState;

/// Escapes text for HTML element content and double-quoted attributes.
///
/// ```
/// assert_eq!(multiprom_http::html_escape(r#"<a href="x">&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
/// ```
#[must_use]
pub fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}\
td.n{text-align:right;font-variant-numeric:tabular-nums}tr.bad{background:#fdd}\
tr.vanished{background:#eee}code{background:#f4f4f4;padding:0 .2em}";

/// Renders the status page for `scrape` of `dir`. `state_of` tells whether a
/// pid's process is alive.
pub fn render_status_page(
    dir: &Path,
    scrape: &Scrape,
    mut state_of: impl FnMut(u32) -> ProcessState,
) -> String {
    let dir = html_escape(&dir.display().to_string());
    let stats = &scrape.stats;
    let mut html = String::with_capacity(2048 + scrape.files.len() * 256);
    // Writing into a String cannot fail.
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>multiprom: {dir}</title><style>{STYLE}</style></head><body>\n\
<h1>multiprom</h1>\n<p>Merged metrics of <code>{dir}</code>: <a href=\"/metrics\">/metrics</a></p>\n\
<p>{files} files: {ok} ok, {bad} bad, {vanished} vanished; {series} samples; \
{bytes} bytes read in {ms:.1} ms.</p>\n",
        files = scrape.files.len(),
        ok = stats.files_ok,
        bad = stats.files_bad,
        vanished = stats.files_vanished,
        series = stats.series,
        bytes = stats.bytes_read,
        ms = stats.duration.as_secs_f64() * 1000.0,
    );
    if scrape.files.is_empty() {
        html.push_str("<p>No <code>*.db</code> files yet.</p>\n</body></html>\n");
        return html;
    }
    html.push_str(
        "<table>\n<thead><tr><th>file</th><th>type</th><th>gauge mode</th><th>pid</th>\
<th>process</th><th>entries</th><th>used</th><th>size</th><th>problem</th></tr></thead>\n<tbody>\n",
    );
    for file in &scrape.files {
        let file_name = file
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (kind, mode, id) = match &file.name {
            Some(name) => (
                name.kind().type_name(),
                name.kind().gauge_mode().map_or("", |m| m.as_str()),
                name.id().to_owned(),
            ),
            None => ("?", "", String::new()),
        };
        let process = match file.name.as_ref().and_then(|n| n.pid()) {
            Some(pid) => state_of(pid).as_str(),
            None => "",
        };
        let state = file.state();
        let (entries, used, size) = if state == FileState::Ok {
            (
                file.entries.to_string(),
                file.used.to_string(),
                file.file_size.to_string(),
            )
        } else {
            (String::new(), String::new(), String::new())
        };
        let problem = file.problem.as_ref().map_or(String::new(), |p| {
            format!("offset {}: {}", p.offset, p.kind)
        });
        let _ = writeln!(
            html,
            "<tr class=\"{state}\"><td><code>{file}</code></td><td>{kind}</td><td>{mode}</td>\
<td class=\"n\">{id}</td><td>{process}</td><td class=\"n\">{entries}</td><td class=\"n\">{used}</td>\
<td class=\"n\">{size}</td><td>{problem}</td></tr>",
            state = state.as_str(),
            file = html_escape(&file_name),
            id = html_escape(&id),
            problem = html_escape(&problem),
        );
    }
    html.push_str("</tbody></table>\n</body></html>\n");
    html
}

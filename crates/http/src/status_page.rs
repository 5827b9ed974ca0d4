//! `GET /`: one self-contained HTML page (no scripts, no external assets)
//! that answers an operator's questions in order: is anything wrong (summary
//! and problems first), what is in the directory (whether its writers can
//! be told gone, files by type and state), which families are how big (series per family: the
//! cardinality question; with the latest exemplar of each, a way into a
//! trace), how scrapes have gone lately (a small chart), and
//! only then the files themselves, a page of rows at a time so a directory
//! of many thousands of files stays a page a browser renders at once.

use crate::html::html_escape;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use multiprom_collector::{FileState, Scrape};
use multiprom_format::Exemplar;

use multiprom_maintain::{CompactionStatus, LivenessState, MaintenanceStatus};

use crate::latest_exemplar::{exemplar_cell, latest_exemplar};
use crate::metrics_path::DEFAULT_METRICS_PATH;

/// File rows per page of the file table.
pub(crate) const FILES_PER_PAGE: usize = 500;
/// Problems listed at the top; the rest are in the file table.
const PROBLEMS_LISTED: usize = 100;

/// One past collection, for the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScrapePoint {
    /// How long it took.
    pub duration: Duration,
    /// Files it saw.
    pub files: usize,
}

/// What the page shows besides the collection itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StatusView<'a> {
    /// Where the metrics are served (linked from the page).
    pub metrics_path: &'a str,
    /// Which page of the file table (0-based; past the end shows the last).
    pub page: usize,
    /// Recent collections, oldest first, for the chart.
    pub history: &'a [ScrapePoint],
    /// What the directory's maintainer has done, if there is one.
    pub maintenance: Option<&'a MaintenanceStatus>,
    /// A line from each sibling over the same view (a pusher).
    pub siblings: &'a [String],
}

impl Default for StatusView<'_> {
    fn default() -> Self {
        StatusView {
            metrics_path: DEFAULT_METRICS_PATH,
            page: 0,
            history: &[],
            maintenance: None,
            siblings: &[],
        }
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:80em}\
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}\
td.n{text-align:right;font-variant-numeric:tabular-nums}tr.bad{background:#fdd}\
tr.vanished{background:#eee}code{background:#f4f4f4;padding:0 .2em}\
.problems{background:#fdd;border:1px solid #c66;padding:.5em 1em}\
.ok{color:#262}summary{cursor:pointer;font-weight:bold}svg{border:1px solid #ccc}";

/// What the liveness walks say of one file's writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    /// A process holds the file for writing (this one, where the walk
    /// looked through `/proc`; the kernel's answer names none).
    Held(Option<u32>),
    /// No process held it in the last two walks.
    Gone,
    /// Not known (no walk, liveness unknown, a file the walk did not see).
    Unknown,
}

/// Renders the status page for `scrape` of `dir`. `writer_of` tells what
/// the liveness walks say of a file's writer (asked for the rows shown).
pub(crate) fn render_status_page(
    dir: &Path,
    scrape: &Scrape,
    view: StatusView<'_>,
    mut writer_of: impl FnMut(&Path) -> Writer,
) -> String {
    let dir = html_escape(&dir.display().to_string());
    let metrics = html_escape(view.metrics_path);
    let stats = &scrape.stats;
    let mut html = String::with_capacity(8192 + scrape.files.len().min(FILES_PER_PAGE) * 256);
    // Writing into a String cannot fail.
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>multiprom: {dir}</title><style>{STYLE}</style></head><body>\n\
<h1>multiprom</h1>\n<p>Merged metrics of <code>{dir}</code>: <a href=\"{metrics}\">{metrics}</a> \
(health: <a href=\"/-/healthy\">/-/healthy</a>, <a href=\"/-/ready\">/-/ready</a>)</p>\n\
<p id=\"summary\">{files} files: {ok} ok, {bad} bad, {vanished} vanished; {series} samples; \
{bytes} bytes read in {ms:.1} ms.</p>\n",
        files = scrape.files.len(),
        ok = stats.files_ok,
        bad = stats.files_bad,
        vanished = stats.files_vanished,
        series = stats.series,
        bytes = stats.bytes_read,
        ms = stats.duration.as_secs_f64() * 1000.0,
    );

    // Whether exited writers can be told apart: everything about them
    // (settling, live gauges left out, reaping, compaction) rests on it.
    let liveness = match view.maintenance.map(|m| &m.liveness) {
        Some(LivenessState::Known { held, free }) => {
            format!("known: {held} files held by a live writer, {free} whose writer is gone")
        }
        Some(LivenessState::Unknown(why)) => format!(
            "liveness unknown: {why}. Every file is read on every scrape, no live gauge is left out and nothing is folded or reaped, as with Python's collector."
        ),
        Some(_) => "not looked at yet".to_owned(),
        None => "not looked at (no maintenance): every file is read on every scrape".to_owned(),
    };
    let _ = writeln!(
        html,
        "<p id=\"liveness\">Writers: {}</p>",
        html_escape(&liveness)
    );

    for line in view.siblings {
        let _ = writeln!(html, "<p class=\"sibling\">{}</p>", html_escape(line));
    }

    push_problems(&mut html, scrape);

    if scrape.files.is_empty() {
        html.push_str("<p>No <code>*.db</code> files yet.</p>\n");
    } else {
        push_files_by_type(&mut html, scrape);
        push_families(&mut html, scrape);
    }
    push_chart(&mut html, view.history);
    if !scrape.files.is_empty() {
        push_file_table(&mut html, scrape, view.page, &mut writer_of);
    }
    if let Some(compaction) = view.maintenance.and_then(|m| m.compaction.as_ref()) {
        push_compaction(&mut html, compaction);
    }
    html.push_str("</body></html>\n");
    html
}

/// One paragraph on what compaction has done.
fn push_compaction(html: &mut String, compaction: &CompactionStatus) {
    let line = format!(
        "Compaction: {} passes ({} failed), {} files of exited workers folded, {} bytes reclaimed; last pass {:.1} ms.",
        compaction.passes_ok + compaction.passes_failed,
        compaction.passes_failed,
        compaction.files_folded,
        compaction.bytes_reclaimed,
        compaction.last_duration.as_secs_f64() * 1000.0
    );
    let _ = writeln!(html, "<p>{}</p>", html_escape(&line));
}

fn push_problems(html: &mut String, scrape: &Scrape) {
    let problems: Vec<_> = scrape
        .files
        .iter()
        .filter(|f| f.state() == FileState::Bad)
        .filter_map(|f| f.problem.as_ref())
        .collect();
    if problems.is_empty() {
        html.push_str("<p id=\"problems\" class=\"ok\">No problems: every file was read.</p>\n");
        return;
    }
    let _ = writeln!(
        html,
        "<div id=\"problems\" class=\"problems\"><h2>{} bad file{} (skipped)</h2><ul>",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for problem in problems.iter().take(PROBLEMS_LISTED) {
        let _ = writeln!(
            html,
            "<li><code>{}</code></li>",
            html_escape(&problem.to_string())
        );
    }
    html.push_str("</ul>");
    if problems.len() > PROBLEMS_LISTED {
        let _ = write!(
            html,
            "<p>and {} more: <code>multiprom inspect --check DIR</code> lists them all.</p>",
            problems.len() - PROBLEMS_LISTED
        );
    }
    html.push_str("</div>\n");
}

fn push_files_by_type(html: &mut String, scrape: &Scrape) {
    // type (with gauge mode) -> [ok, bad, vanished]
    let mut by_type: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    for file in scrape.files.iter() {
        let kind = match &file.name {
            Some(name) => match name.kind().gauge_mode() {
                Some(mode) => format!("{} {}", name.kind().type_name(), mode.as_str()),
                None => name.kind().type_name().to_owned(),
            },
            None => "not a metrics file name".to_owned(),
        };
        let counts = by_type.entry(kind).or_default();
        counts[match file.state() {
            FileState::Ok => 0,
            FileState::Bad => 1,
            FileState::Vanished => 2,
        }] += 1;
    }
    html.push_str(
        "<h2>Files by type</h2>\n<table id=\"types\"><thead><tr><th>type</th><th>ok</th><th>bad</th>\
<th>vanished</th></tr></thead><tbody>\n",
    );
    for (kind, [ok, bad, vanished]) in &by_type {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td class=\"n\">{ok}</td><td class=\"n\">{bad}</td><td class=\"n\">{vanished}</td></tr>",
            html_escape(kind)
        );
    }
    html.push_str("</tbody></table>\n");
}

fn push_families(html: &mut String, scrape: &Scrape) {
    let mut families: Vec<(&str, &str, usize, Option<&Exemplar>)> = scrape
        .families
        .iter()
        .map(|f| {
            let latest = latest_exemplar(f);
            (&*f.name, f.family_type.as_str(), f.samples.len(), latest)
        })
        .collect();
    // Biggest first: the families that drive cardinality.
    families.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    let now = SystemTime::now();
    let _ = writeln!(
        html,
        "<h2>Metric families</h2>\n<p>{} families, {} series (sample lines), biggest first.</p>\n\
<table id=\"families\"><thead><tr><th>family</th><th>type</th><th>series</th>\
<th>latest exemplar</th></tr></thead><tbody>",
        families.len(),
        scrape.stats.series
    );
    for (name, kind, series, latest) in families {
        let exemplar = latest.map_or_else(|| "<td></td>".to_owned(), |e| exemplar_cell(e, now));
        let _ = writeln!(
            html,
            "<tr><td><code>{}</code></td><td>{kind}</td><td class=\"n\">{series}</td>{exemplar}</tr>",
            html_escape(name)
        );
    }
    html.push_str("</tbody></table>\n");
}

/// Two polylines in one inline SVG: scrape duration and file count, each
/// scaled to its own maximum (stated in the legend).
fn push_chart(html: &mut String, history: &[ScrapePoint]) {
    html.push_str("<h2>Recent scrapes</h2>\n");
    if history.len() < 2 {
        html.push_str("<p id=\"chart\">Not enough scrapes yet for a chart.</p>\n");
        return;
    }
    const W: f64 = 600.0;
    const H: f64 = 120.0;
    let max_ms = history
        .iter()
        .map(|p| p.duration.as_secs_f64() * 1000.0)
        .fold(0.0_f64, f64::max)
        .max(0.001);
    let max_files = history.iter().map(|p| p.files).max().unwrap_or(0).max(1) as f64;
    let step = W / (history.len() - 1) as f64;
    let line = |value: &dyn Fn(&ScrapePoint) -> f64, max: f64| {
        let mut points = String::new();
        for (i, p) in history.iter().enumerate() {
            let _ = write!(
                points,
                "{:.1},{:.1} ",
                i as f64 * step,
                H - value(p) / max * (H - 4.0) - 2.0
            );
        }
        points
    };
    let durations = line(&|p| p.duration.as_secs_f64() * 1000.0, max_ms);
    let files = line(&|p| p.files as f64, max_files);
    let _ = writeln!(
        html,
        "<svg id=\"chart\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" role=\"img\" \
aria-label=\"last {n} scrapes\"><polyline fill=\"none\" stroke=\"#c33\" stroke-width=\"2\" points=\"{durations}\"/>\
<polyline fill=\"none\" stroke=\"#36c\" stroke-width=\"2\" points=\"{files}\"/></svg>\n\
<p>Last {n} scrapes, oldest left: <span style=\"color:#c33\">duration</span> (top: {max_ms:.1} ms), \
<span style=\"color:#36c\">files</span> (top: {max_files}).</p>",
        n = history.len(),
    );
}

fn push_file_table(
    html: &mut String,
    scrape: &Scrape,
    page: usize,
    writer_of: &mut dyn FnMut(&Path) -> Writer,
) {
    let pages = scrape.files.len().div_ceil(FILES_PER_PAGE);
    let page = page.min(pages - 1);
    let first = page * FILES_PER_PAGE;
    let rows = &scrape.files[first..(first + FILES_PER_PAGE).min(scrape.files.len())];
    // Open when it fits on one page; a long table waits to be asked for.
    let _ = writeln!(
        html,
        "<details id=\"files\"{}><summary>Files {}-{} of {} (page {} of {pages})</summary>",
        if pages == 1 { " open" } else { "" },
        first + 1,
        first + rows.len(),
        scrape.files.len(),
        page + 1,
    );
    if pages > 1 {
        html.push_str("<p class=\"pager\">");
        if page > 0 {
            let _ = write!(html, "<a href=\"?page={}\">previous</a> ", page);
        }
        if page + 1 < pages {
            let _ = write!(html, "<a href=\"?page={}\">next</a>", page + 2);
        }
        html.push_str("</p>\n");
    }
    html.push_str(
        "<table>\n<thead><tr><th>file</th><th>type</th><th>gauge mode</th><th>pid</th>\
<th>writer</th><th>entries</th><th>used</th><th>size</th><th>problem</th></tr></thead>\n<tbody>\n",
    );
    for file in rows {
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
        let process = match writer_of(&file.path) {
            Writer::Held(Some(pid)) => format!("held (pid {pid})"),
            Writer::Held(None) => "held".to_owned(),
            Writer::Gone => "gone".to_owned(),
            Writer::Unknown => String::new(),
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
    html.push_str("</tbody></table>\n</details>\n");
}

/// The page number asked for in a query string (`page=N`, 1-based), as a
/// 0-based index; anything else is the first page.
#[must_use]
pub(crate) fn status_page_index(query: Option<&str>) -> usize {
    query
        .unwrap_or("")
        .split('&')
        .find_map(|pair| pair.strip_prefix("page="))
        .and_then(|n| n.parse::<usize>().ok())
        .map_or(0, |n| n.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_html() {
        assert_eq!(
            html_escape(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn page_index_from_the_query() {
        assert_eq!(status_page_index(Some("page=3")), 2);
        assert_eq!(status_page_index(Some("x=1&page=1")), 0);
        assert_eq!(status_page_index(Some("page=zero")), 0);
        assert_eq!(status_page_index(None), 0);
    }
}

//! `multiprom completions SHELL` and `multiprom man`: generated from the CLI
//! definition, checked with the real bash and groff.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Stdio};

use crate::harness::{ensure_tool, multiprom, temp_dir};

fn output_of(args: &[&str]) -> String {
    let out = multiprom().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What bash completes for `words` (the last one being completed).
fn bash_completes(script: &str, words: &str) -> String {
    let dir = temp_dir();
    let file = dir.path().join("multiprom.bash");
    std::fs::write(&file, script).unwrap();
    let program = format!(
        "source '{}'; COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; n=${{#COMP_WORDS[@]}}; _multiprom multiprom \"${{COMP_WORDS[n-1]}}\" \"${{COMP_WORDS[n-2]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let out = Command::new(ensure_tool("bash", "bash"))
        .args(["--norc", "-c", &program])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn bash_completes_subcommands_and_flags() {
    let script = output_of(&["completions", "bash"]);
    let commands = bash_completes(&script, "multiprom s");
    assert_eq!(commands, "serve\nscrape\n", "{commands}");
    let flags = bash_completes(&script, "multiprom serve --re");
    assert!(flags.lines().any(|l| l == "--reap-dead"), "{flags}");
    assert!(flags.lines().any(|l| l == "--reap-grace"), "{flags}");
    let all = bash_completes(&script, "multiprom serve --");
    for flag in [
        "--web.telemetry-path",
        "--log.format",
        "--worker-process-metrics",
    ] {
        assert!(all.lines().any(|l| l == flag), "{flag}: {all}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        assert!(
            output_of(&["completions", shell]).contains("multiprom"),
            "{shell}"
        );
    }
    let out = multiprom().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn man_pages_render_with_groff() {
    let page = output_of(&["man"]);
    let groff = ensure_tool("groff", "groff-base");
    let mut render = Command::new(groff)
        .args(["-man", "-Tutf8", "-P-cbou"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    render
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = render.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // groff justifies lines with extra spaces.
    let text = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(text.contains("NAME"), "{text}");
    assert!(text.contains("multiprom - One /metrics endpoint"), "{text}");
    for command in [
        "serve",
        "scrape",
        "run",
        "inspect",
        "demo",
        "completions",
        "man",
    ] {
        assert!(
            text.contains(&format!("multiprom-{command}(1)")),
            "{command}:\n{text}"
        );
    }

    let dir = temp_dir();
    let pages = dir.path().join("man1");
    output_of(&["man", "--dir", pages.to_str().unwrap()]);
    let serve = std::fs::read_to_string(pages.join("multiprom-serve.1")).unwrap();
    assert!(serve.contains("reap\\-dead"), "{serve}");
    assert!(!serve.contains("test\\-scrape\\-gate"), "{serve}");
    assert!(pages.join("multiprom.1").is_file());
}

//! `multiprom completions SHELL` and `multiprom man`: shell completions and
//! man pages generated from the CLI definition itself, so they can never
//! disagree with the binary. Generated at run time rather than at build
//! time: a binary from `cargo install`, a container image or a copied file
//! can produce its own, and packagers write them out with one command.

use std::io::Write;
use std::path::PathBuf;

use clap::CommandFactory;

use crate::exit_code::ExitCode;

/// Arguments of `multiprom completions`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  multiprom completions bash > /etc/bash_completion.d/multiprom
  multiprom completions zsh > \"${fpath[1]}/_multiprom\"
  multiprom completions fish > ~/.config/fish/completions/multiprom.fish")]
pub(crate) struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Arguments of `multiprom man`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  multiprom man | man -l -
  multiprom man --dir /usr/local/share/man/man1   # multiprom.1, multiprom-serve.1, ...")]
pub(crate) struct ManArgs {
    /// Write one page per command (multiprom.1, multiprom-serve.1, ...) into
    /// this directory instead of printing multiprom(1).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Prints the completion script.
pub(crate) fn completions(args: CompletionsArgs) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(
        args.shell,
        &mut crate::Cli::command(),
        "multiprom",
        &mut script,
    );
    print(&script, "completions")
}

/// Prints multiprom(1), or writes every page into `--dir`.
pub(crate) fn man(args: ManArgs) -> ExitCode {
    let command = crate::Cli::command();
    if let Some(dir) = args.dir {
        if let Err(err) =
            std::fs::create_dir_all(&dir).and_then(|()| clap_mangen::generate_to(command, &dir))
        {
            eprintln!("multiprom man: {}: {err}", dir.display());
            return ExitCode::FAILURE;
        }
        return ExitCode::SUCCESS;
    }
    let mut page = Vec::new();
    if let Err(err) = clap_mangen::Man::new(command).render(&mut page) {
        eprintln!("multiprom man: {err}");
        return ExitCode::FAILURE;
    }
    print(&page, "man")
}

fn print(bytes: &[u8], command: &str) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        // `| head`: the reader is gone, which is not our error.
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("multiprom {command}: cannot write to stdout: {err}");
            ExitCode::FAILURE
        }
    }
}

//! `redlock`: the command line over the redlock library.
//!
//! `run` holds a lock while a command runs (and kills the command before the lock can end
//! under it), `status` shows a lock on every node, `release --force` removes a stuck one and
//! `nodes` shows the nodes; `elect` runs a command while this process leads an election and
//! `leader` shows who leads; `stats` reads the counters of a running `run` or `elect`;
//! `completions` and `man` print what shells and `man` read. The grammar is one clap
//! description, below and in each command's module, from which the help, the completions and
//! the man pages are all generated. Exit codes: [`exit::TABLE`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[macro_use]
mod output;
mod args;
mod elect;
mod exit;
mod manual;
mod metrics;
mod nodes;
mod run;
mod show;
mod supervise;

use exit::{Failure, one_line};

/// The Redlock distributed lock from the command line
///
/// Every command but stats reaches the nodes named by --nodes URL,URL,..., --nodes-file PATH
/// or the environment variable REDLOCK_NODES: redis:// or rediss:// URLs of an odd number of
/// independent masters (a Sentinel-managed master, redis+sentinel://, or a whole Redis
/// Cluster, redis+cluster://, is one node). A password in --nodes shows in `ps`: for URLs with
/// passwords use REDLOCK_NODES or --nodes-file (readable by you alone: redlock warns
/// otherwise). Each node's warnings go to stderr once connected. 'redlock COMMAND --help'
/// shows a command's options, the nodes' among them.
///
/// Durations take a unit: 500ms, 30s, 5m, 1h (a bare number is seconds).
#[derive(Parser, Debug)]
#[command(
    name = "redlock",
    version,
    verbatim_doc_comment,
    subcommand_required = true,
    // A repeated option takes its last value, so that a script may add to a default set.
    args_override_self = true,
    after_help = exit::TABLE
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Run(run::Args),
    Status(show::StatusArgs),
    Release(show::ReleaseArgs),
    Nodes(show::NodesArgs),
    Elect(elect::Args),
    Leader(elect::LeaderArgs),
    Stats(metrics::StatsArgs),
    /// Print the completion script of a shell
    ///
    /// bash: source <(redlock completions bash) in ~/.bashrc, or save it as
    /// /usr/share/bash-completion/completions/redlock; zsh: save it as _redlock in a
    /// directory of $fpath; fish: save it as ~/.config/fish/completions/redlock.fish.
    /// scripts/install installs all three.
    #[command(verbatim_doc_comment)]
    Completions {
        /// The shell
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print the man page of redlock, or of one of its commands
    ///
    /// man -l <(redlock man run) shows it; with --out-dir every page is written there instead
    /// (redlock.1, redlock-run.1, ...), as scripts/install does into share/man/man1.
    #[command(verbatim_doc_comment)]
    Man {
        /// Write every page into this directory
        #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath, conflicts_with = "command")]
        out_dir: Option<PathBuf>,
        /// The command whose page to print (default: redlock's own)
        #[arg(value_name = "COMMAND")]
        command: Option<String>,
    },
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    #[cfg(target_os = "linux")]
    let outcome = if args.get(1).is_some_and(|a| a == supervise::reaper::ARG) {
        supervise::reaper::main(args[2..].to_vec())
    } else {
        dispatch(&args)
    };
    #[cfg(not(target_os = "linux"))]
    let outcome = dispatch(&args);
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            errln!("redlock: {}", one_line(&f.message));
            ExitCode::from(f.code)
        }
    }
}

fn dispatch(args: &[OsString]) -> Result<u8, Failure> {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return refused(&e, args),
    };
    match cli.command {
        Command::Run(a) => run::main(a),
        Command::Status(a) => show::status(a),
        Command::Release(a) => show::release(a),
        Command::Nodes(a) => show::nodes(a),
        Command::Elect(a) => elect::main(a),
        Command::Leader(a) => elect::leader(a),
        Command::Stats(a) => metrics::stats(a),
        Command::Completions { shell } => {
            out!("{}", manual::completions(Cli::command(), shell));
            Ok(0)
        }
        Command::Man {
            out_dir: Some(dir), ..
        } => manual::write_pages(Cli::command(), &dir)
            .map(|()| 0)
            .map_err(|e| {
                Failure::new(
                    exit::EXIT_SOFTWARE,
                    format!("cannot write the man pages into {}: {e}", dir.display()),
                )
            }),
        Command::Man {
            out_dir: None,
            command,
        } => match manual::page(Cli::command(), command.as_deref()) {
            Some(page) => {
                out!("{page}");
                Ok(0)
            }
            None => Err(Failure::usage(
                "man",
                format!(
                    "no command '{}' (expected one of: {})",
                    command.unwrap_or_default(),
                    commands().join(", ")
                ),
            )),
        },
    }
}

/// The names of redlock's commands.
fn commands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_owned())
        .collect()
}

/// What clap's refusal `e` of `args` means: help or the version, printed on stdout (exit 0), or
/// bad arguments, one line on stderr naming the help to read (exit 64).
fn refused(e: &clap::Error, args: &[OsString]) -> Result<u8, Failure> {
    use clap::error::ErrorKind;
    let text = e.render().to_string();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            out!("{text}");
            return Ok(0);
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            return Err(Failure::usage(
                "",
                format!("missing command ({})", commands().join(", ")),
            ));
        }
        _ => {}
    }
    // The error and its suggestions; the usage and the pointer to --help that follow give way
    // to ours, and so does the tip on `--`, which the usage line shows.
    let message = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(|l| l.trim().trim_start_matches("error: "))
        .filter(|l| !l.is_empty() && !l.starts_with("tip: to pass"))
        .collect::<Vec<_>>()
        .join("; ")
        .replace(":; ", ": ");
    let command = args
        .get(1)
        .and_then(|a| a.to_str())
        .filter(|a| commands().iter().any(|c| c == a))
        .unwrap_or_default();
    Err(Failure::usage(command, message))
}

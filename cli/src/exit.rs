//! How `redlock` ends: one table of exit codes for every command ([`TABLE`], which `redlock
//! --help`, the man page and the README print), and the failure that carries a code and its
//! one-line message.

/// The nodes answered, and nobody holds the lock (`status`) or leads the election (`leader`):
/// what an init script's `status` says of a service that is not running.
pub const EXIT_NOBODY: u8 = 3;
/// Bad arguments (EX_USAGE).
pub const EXIT_USAGE: u8 = 64;
/// Too few nodes answered (EX_UNAVAILABLE).
pub const EXIT_UNAVAILABLE: u8 = 69;
/// The lock was lost while the command ran, or an internal error (EX_SOFTWARE).
pub const EXIT_SOFTWARE: u8 = 70;
/// Another owner holds the lock (EX_TEMPFAIL).
pub const EXIT_TEMPFAIL: u8 = 75;

/// The exit codes, as every command uses them.
pub const TABLE: &str = "\
Exit codes, the same for every command:
  0        Done: run and elect --once exit with the command's own code; status: the lock is
           held; leader: someone leads; release: the keys are gone; nodes: a quorum answers
  3        The nodes answered, and nobody holds the lock (status) or leads (leader)
  64       Bad arguments
  69       Too few nodes answered to do it or to tell (no quorum); stats: ADDR cannot be read
  70       The lock or leadership was lost while the command ran (or an internal error)
  75       Another owner holds the lock: run (after --wait; or --conflict-exit-code N),
           release --token
  126, 127 run, elect: the command cannot be run, or is not found
  128+N    run: redlock got signal N while waiting (the command's own 128+N when it dies of
           signal N)
  141      The reader of the output went away (as for a tool killed by SIGPIPE)";

/// A failure that ends the program: a one-line message for stderr and the exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    /// Bad arguments to `command` (empty: to `redlock` itself), pointing at its help.
    pub fn usage(command: &str, message: impl std::fmt::Display) -> Failure {
        let help = if command.is_empty() {
            "redlock --help".to_owned()
        } else {
            format!("redlock {command} --help")
        };
        Failure {
            code: EXIT_USAGE,
            message: format!("{message} (see '{help}')"),
        }
    }

    pub fn new(code: u8, message: impl std::fmt::Display) -> Failure {
        Failure {
            code,
            message: message.to_string(),
        }
    }
}

/// One line, whatever the text: errors of the library can span lines.
pub fn one_line(text: &str) -> String {
    text.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

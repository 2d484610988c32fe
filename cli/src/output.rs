//! Standard output that ends the program quietly when its reader is gone (`redlock status x |
//! head`), as tools killed by SIGPIPE do, instead of panicking as `print!` does: [`out!`] and
//! [`outln!`]; standard error never panics either ([`errln!`]). Rust ignores SIGPIPE, so a write
//! to a closed pipe fails with `EPIPE`; exiting on it, rather than restoring SIGPIPE's default,
//! keeps `run` and `elect`, which supervise a command, from dying of a closed output.

use std::io::{ErrorKind, Write};

/// The exit code when standard output is closed: 128 + SIGPIPE, what a shell reports for a
/// tool that SIGPIPE killed.
pub const EXIT_CLOSED_PIPE: i32 = 128 + libc::SIGPIPE;

/// `print!` to standard output; exits with [`EXIT_CLOSED_PIPE`] when its reader is gone, with
/// 74 (EX_IOERR) and a message on another write error.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write(format_args!($($arg)*))
    };
}

/// [`out!`] with a newline.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that never panics: a message to a closed standard error is dropped, so that
/// `redlock run … 2>&1 | head` does not end redlock (and its command) while it holds a lock.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub fn write(text: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(text).and_then(|()| stdout.flush()) {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(EXIT_CLOSED_PIPE);
        }
        let _ = writeln!(std::io::stderr(), "redlock: cannot write the output: {e}");
        std::process::exit(74);
    }
}

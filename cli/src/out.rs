//! Standard output that ends quietly when the reader goes away.
//!
//! `println!` panics when a write fails, so `verbsim run … | head` used to
//! end in "failed printing to stdout: Broken pipe", a backtrace and exit
//! status 101. Every command prints through [`say`] instead: when the
//! reader has closed the pipe, the command stops at once, prints nothing
//! more, and exits with status 141, what a shell reports for a program
//! ended by SIGPIPE (`yes | head` ends so). Any other write error is one
//! line on standard error and exit status 1.

use std::io::Write as _;

/// Exit status of a command whose reader closed the pipe: 128 + SIGPIPE,
/// as the shell reports for `yes | head`.
pub(crate) const EXIT_BROKEN_PIPE: i32 = 128 + 13;

/// Writes `text` to standard output and flushes it; ends the process
/// quietly when the reader is gone.
pub(crate) fn say(text: core::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout.write_fmt(text).and_then(|()| stdout.flush());
    if let Err(e) = written {
        drop(stdout);
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(EXIT_BROKEN_PIPE);
        }
        eprintln!("verbsim: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// `print!` through [`say`].
macro_rules! out {
    ($($t:tt)*) => { $crate::out::say(format_args!($($t)*)) };
}

/// `println!` through [`say`].
macro_rules! outln {
    () => { $crate::out::say(format_args!("\n")) };
    ($($t:tt)*) => { $crate::out::say(format_args!("{}\n", format_args!($($t)*))) };
}

pub(crate) use {out, outln};

/// Whether `path` can be written, checked before any work starts: an
/// existing file is opened for writing (and left as it is), a new one is
/// created and removed again.
pub(crate) fn check_writable(path: &std::path::Path) -> std::io::Result<()> {
    if path.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "is a directory",
        ));
    }
    if path.exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
    } else {
        std::fs::File::create(path)?;
        std::fs::remove_file(path)
    }
}

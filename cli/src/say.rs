//! zk-recipes' own messages and log on stderr: best-effort.
//!
//! A stderr that cannot be written (a full disk, `2>/dev/full`, a pipe whose reader has
//! gone, a terminal that was closed) must not change what zk-recipes does: the exit status
//! is the contract, the messages are not. So nothing here fails or panics on a write
//! error (`eprintln!` would panic, and so would tracing's own fallback to it): a message
//! that cannot be written is dropped.

use std::fmt;
use std::io::{self, Write as _};

/// Writes `zk-recipes: MESSAGE` and a newline on stderr, if it can.
macro_rules! say {
    ($($message:tt)*) => {
        $crate::say::line(format_args!($($message)*))
    };
}
pub(crate) use say;

/// See [`say!`].
pub fn line(message: fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "zk-recipes: {message}");
}

/// stderr for the log: a write that fails counts as done.
#[derive(Clone, Copy, Debug)]
pub struct LogWriter;

impl io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let _ = io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = io::stderr().flush();
        Ok(())
    }
}

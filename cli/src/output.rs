//! What zk-recipes prints on stdout, for `observe`, `status` and `members`: one line at a
//! time, node data quoted where it could forge a line, and the end of the reader noticed
//! while nothing is printed.
//!
//! * **Quoting.** Ids, data, node names and paths are anyone's to write. In a text line,
//!   one that is empty or holds anything but printable characters (a control character, an
//!   escape, a bidirectional override), whitespace, or one of `,` `;` `=` `"` `\` is shown
//!   quoted with Rust's escapes ([`shown`]): `"a\n/x: leader b"`, `"web 1"`. So no text
//!   can forge a line, an entry of a list or a `ID=DATA` pair, nor reach the terminal as a
//!   control sequence. JSON lines carry the text as it is (JSON escapes it).
//! * **A closed stdout.** `observe` and `members --watch` print only when something
//!   changes; a reader that has gone (`| head -1` once `head` exited, a hung-up terminal)
//!   would be noticed only at the next write, which on a quiet path never comes.
//!   [`until_closed`] also watches stdout meanwhile: a thread waits in poll(2) until it
//!   reports `POLLERR` (a pipe whose reader has gone) or `POLLHUP` (a hung-up terminal or
//!   socket). A file or `/dev/null` is never closed.

use std::borrow::Cow;
use std::future::Future;
use std::io::{self, Write as _};
use std::os::fd::AsFd as _;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use tokio::sync::oneshot;
use tracing::debug;

/// `text` as printed in a text line: as it is if it can neither forge a line nor an entry
/// of one, else quoted, with escapes.
pub fn shown(text: &str) -> Cow<'_, str> {
    let plain = |c: char| {
        c.escape_debug().len() == 1
            && !c.is_whitespace()
            && !matches!(c, ',' | ';' | '=' | '"' | '\\')
    };
    match !text.is_empty() && text.chars().all(plain) {
        true => Cow::Borrowed(text),
        false => Cow::Owned(format!("{text:?}")),
    }
}

/// Prints `line` on stdout at once; `false` if stdout is closed (or cannot be written).
pub fn print(line: &str) -> bool {
    let mut out = io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).is_ok()
}

/// Runs `work` (a loop that prints on every change) until it ends or stdout is closed,
/// whichever comes first; `Ok(())` for a closed stdout.
pub async fn until_closed<E>(work: impl Future<Output = Result<(), E>>) -> Result<(), E> {
    tokio::select! {
        done = work => done,
        () = closed() => {
            debug!("stdout closed");
            Ok(())
        }
    }
}

/// Resolves once stdout is closed; never if that cannot be watched.
async fn closed() {
    let (tell, told) = oneshot::channel();
    // A thread of its own, not a blocking task: the runtime would wait for it at exit.
    let watching = std::thread::Builder::new()
        .name("stdout-closed".into())
        .spawn(move || {
            if await_closed() {
                let _ = tell.send(());
            }
        });
    if watching.is_ok() && told.await.is_ok() {
        return;
    }
    std::future::pending().await
}

/// Blocks until stdout is closed (`true`), or polling it fails (`false`).
fn await_closed() -> bool {
    let out = io::stdout();
    // No event asked for: poll(2) returns only for POLLERR, POLLHUP and POLLNVAL.
    let mut fds = [PollFd::new(out.as_fd(), PollFlags::empty())];
    loop {
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(0) | Err(Errno::EINTR) => {}
            Ok(_) => return true,
            Err(err) => {
                debug!(%err, "cannot watch stdout");
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_that_could_forge_a_line_or_an_entry_is_quoted() {
        for plain in ["web-1", "10.0.0.1:80", "host/17", "ünïcødé✓", "/g/x"] {
            assert_eq!(shown(plain), plain);
        }
        for (text, quoted) in [
            ("", r#""""#),
            ("web 1", r#""web 1""#),
            ("a=b", r#""a=b""#),
            ("1.2.3.4\nmembers: x=9", r#""1.2.3.4\nmembers: x=9""#),
            ("\u{1b}[31mred", r#""\u{1b}[31mred""#),
            ("nul\0", r#""nul\0""#),
            ("b, c; d", r#""b, c; d""#),
            ("x\u{202e}y", r#""x\u{202e}y""#),
            ("no\u{a0}break", r#""no\u{a0}break""#),
        ] {
            assert_eq!(shown(text), quoted, "{text:?}");
        }
    }
}

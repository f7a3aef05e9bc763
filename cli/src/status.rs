//! Exit statuses: CMD's own when it ran to its end, else one of zk-recipes' own.
//!
//! zk-recipes' statuses avoid the ones shells and common tools give meaning to (1 and 2
//! for general errors and misuse, 124–125 for `timeout(1)`, 126–127 for a command that
//! cannot run, 128+N for death by signal N) and follow `sysexits.h` where it has a
//! meaning that fits:
//!
//! | status | meaning |
//! |---|---|
//! | CMD's | CMD ran to its end (128+N if it died of signal N), also after a forwarded signal |
//! | 64 (`EX_USAGE`) | bad arguments (checked before connecting where they can be): unknown option, malformed path, `--hosts` or duration, a duration over 24h, an id the library refuses (`join`: not one node name; `elect`, `lock --id`: empty, a NUL, `__REVOKE__`), an unreadable or malformed auth file or PEM, a creator ACL without credentials, a `--semaphore` N other than the holders' |
//! | 66 (`EX_NOINPUT`) | `status`: PATH does not exist (a typo; or a lock, semaphore or election path nobody used for a while: ZooKeeper deletes such a path once it stands empty); `PATH: no such path` is printed |
//! | 69 (`EX_UNAVAILABLE`) | ZooKeeper cannot be used: no server reachable, credentials refused, TLS refused, the ACL denies it, the session ended |
//! | 71 (`EX_OSERR`) | the operating system refused: signal handlers, waiting for CMD, starting CMD's watchdog |
//! | 75 (`EX_TEMPFAIL`) | not acquired within `--timeout`; CMD did not run: try again later |
//! | 79 | the lock or leadership was lost while CMD ran; CMD was killed |
//! | 80 | `lock`/`elect --on-revoke=release`: someone asked the holder to let go (`zk-recipes revoke`, Curator's `Revoker`); CMD was stopped and the lock or leadership let go |
//! | 81 | `revoke`: nobody holds PATH; nobody was asked |
//! | 126, 127 | CMD could not be run, or was not found (as in shells) |
//! | 128+N | stopped by signal N (SIGINT, SIGTERM, SIGHUP, SIGQUIT) while waiting; CMD did not run |
//!
//! 79 is the first status past the `sysexits.h` range, which has no status for "lost"; 80
//! and 81 follow it.

use std::io;
use std::process::ExitStatus;

use nix::sys::signal::Signal;
use zk_recipes::{zookeeper, Error};

use crate::say::say;

/// Bad arguments (`EX_USAGE`).
pub const USAGE: u8 = 64;
/// `status`: PATH does not exist (`EX_NOINPUT`).
pub const NO_SUCH_PATH: u8 = 66;
/// ZooKeeper cannot be used (`EX_UNAVAILABLE`).
pub const UNAVAILABLE: u8 = 69;
/// The operating system refused (`EX_OSERR`).
pub const OS_ERROR: u8 = 71;
/// Not acquired within `--timeout` (`EX_TEMPFAIL`).
pub const TIMED_OUT: u8 = 75;
/// Lost while CMD ran; CMD was killed.
pub const LOST: u8 = 79;
/// Asked to let go with `--on-revoke=release`; CMD was stopped.
pub const REVOKED: u8 = 80;
/// `revoke`: nobody holds PATH.
pub const NOBODY: u8 = 81;
/// CMD was found but could not be run.
pub const CANNOT_RUN: u8 = 126;
/// CMD was not found.
pub const NOT_FOUND: u8 = 127;

/// The table above, for `--help`.
pub const HELP: &str = "\
Exit status:
  CMD's status   CMD ran to its end (128+N if it died of signal N)
  64             bad arguments (also a duration over 24h, an unusable auth file or PEM,
                 another --semaphore N)
  66             status: no such path (a typo, or a path ZooKeeper deleted once it
                 stood empty)
  69             ZooKeeper cannot be used (no server reachable, credentials or TLS refused,
                 ACL denies, session ended)
  71             the operating system refused (signal handlers, waiting for CMD or
                 starting its watchdog)
  75             not acquired within --timeout; CMD did not run
  79             the lock or leadership was lost while CMD ran; CMD was killed
  80             --on-revoke=release: the holder was asked to let go (zk-recipes
                 revoke, Curator's Revoker); CMD was stopped, the hold let go
  81             revoke: nobody holds PATH; nobody was asked
  126, 127       CMD could not be run, or was not found
  128+N          stopped by signal N while waiting; CMD did not run";

/// Reports a failure of the library on stderr, in one line with what to check; returns
/// its status.
pub fn report(err: &Error) -> u8 {
    let message = in_cli_terms(&err.to_string());
    match hint(err) {
        Some(hint) => say!("{message}; {hint}"),
        None => say!("{message}"),
    }
    of_error(err)
}

/// The library's words for its settings, and the options that give them.
const SETTINGS: [(&str, &str); 4] = [
    ("use the `tls` feature and tls_ca_pem", "use --tls-ca"),
    ("tls_ca_pem", "--tls-ca"),
    ("tls_identity_pem", "--tls-cert and --tls-key"),
    ("SessionBuilder::digest_auth", "--auth-file"),
];

/// `message` with the library's names of settings replaced by the options that give them.
fn in_cli_terms(message: &str) -> String {
    SETTINGS
        .iter()
        .fold(message.to_owned(), |message, (library, option)| {
            message.replace(library, option)
        })
}

/// What to check, for the failures that come from the security options.
fn hint(err: &Error) -> Option<&'static str> {
    match err {
        Error::AuthFailed { .. } => Some("check the user and password of --auth-file"),
        Error::Tls { .. } => Some("check --tls-ca, --tls-cert and --tls-key, and the port"),
        Error::InvalidAcl { .. } => Some("a creator-only --node-acl needs --auth-file"),
        Error::NoAuth { .. } | Error::ZooKeeper(zookeeper::Error::NoAuth) => {
            Some("check --auth-file (a wrong digest password shows this way) and the path's ACL")
        }
        _ => None,
    }
}

/// The status for a failure of the library: the caller's input, or ZooKeeper.
pub fn of_error(err: &Error) -> u8 {
    match err {
        Error::InvalidPath { .. }
        | Error::InvalidArgument(_)
        | Error::InvalidAcl { .. }
        | Error::InvalidConnectString { .. }
        | Error::EphemeralParent { .. }
        | Error::MaxLeasesConflict { .. } => USAGE,
        _ => UNAVAILABLE,
    }
}

/// The status that passes on how a process ended, as a shell reports it.
pub fn of_exit(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(OS_ERROR),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(u8::MAX),
        (None, None) => OS_ERROR,
    }
}

/// The status for being stopped by `signal` while waiting (128+N).
pub fn of_signal(signal: Signal) -> u8 {
    u8::try_from(128 + signal as i32).unwrap_or(u8::MAX)
}

/// The status for a CMD that could not be started.
pub fn of_spawn_error(err: &io::Error) -> u8 {
    match err.kind() {
        io::ErrorKind::NotFound => NOT_FOUND,
        _ => CANNOT_RUN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_settings_are_named_as_options() {
        let plaintext = "closed the connection on a plaintext request: a TLS port \
                         (use the `tls` feature and tls_ca_pem)";
        assert_eq!(
            in_cli_terms(plaintext),
            "closed the connection on a plaintext request: a TLS port (use --tls-ca)"
        );
        assert_eq!(
            in_cli_terms("tls_identity_pem: no certificate in the PEM"),
            "--tls-cert and --tls-key: no certificate in the PEM"
        );
    }
}

//! SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to zk-recipes: caught from the start, so that
//! whatever is under way (waiting, holding, running CMD) ends cleanly instead of leaving a
//! node behind until the session times out. SIGHUP (a terminal or an ssh session closing)
//! and SIGQUIT stop zk-recipes as SIGTERM does: a CMD gets SIGTERM for each of them
//! ([`Signals::for_cmd`]), as `reload` (SIGHUP) or `dump` (SIGQUIT, the JVM) is not what
//! is asked of it; SIGINT is passed on as it is.

use std::future::Future;
use std::io;

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// The signals that stop zk-recipes.
#[derive(Debug)]
pub struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Signals {
    /// Catches SIGINT, SIGTERM, SIGHUP and SIGQUIT from now on (their default action,
    /// dying, no longer applies).
    pub fn catch() -> io::Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
            quit: signal(SignalKind::quit())?,
        })
    }

    /// The signal a CMD gets when zk-recipes got `signal`.
    pub fn for_cmd(signal: Signal) -> Signal {
        match signal {
            Signal::SIGINT => Signal::SIGINT,
            _ => Signal::SIGTERM,
        }
    }

    /// The next signal.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal that arrives meanwhile is kept for the next call.
    pub async fn recv(&mut self) -> Signal {
        tokio::select! {
            Some(()) = self.interrupt.recv() => Signal::SIGINT,
            Some(()) = self.terminate.recv() => Signal::SIGTERM,
            Some(()) = self.hangup.recv() => Signal::SIGHUP,
            Some(()) = self.quit.recv() => Signal::SIGQUIT,
            else => std::future::pending().await,
        }
    }

    /// Runs `work` unless a signal comes first: then `work` is dropped and the signal
    /// returned.
    pub async fn or<F: Future>(&mut self, work: F) -> Result<F::Output, Signal> {
        tokio::select! {
            output = work => Ok(output),
            signal = self.recv() => Err(signal),
        }
    }
}

//! SIGINT and SIGTERM sent to zk-recipes: caught from the start, so that whatever is
//! under way (waiting, holding, running CMD) ends cleanly instead of leaving a node behind
//! until the session times out.

use std::future::Future;
use std::io;

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// The signals that stop zk-recipes.
#[derive(Debug)]
pub struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    /// Catches SIGINT and SIGTERM from now on (their default action, dying, no longer
    /// applies).
    pub fn catch() -> io::Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// The next signal.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal that arrives meanwhile is kept for the next call.
    pub async fn recv(&mut self) -> Signal {
        tokio::select! {
            Some(()) = self.interrupt.recv() => Signal::SIGINT,
            Some(()) = self.terminate.recv() => Signal::SIGTERM,
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

//! Bounds on what a test waits for.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

/// Upper bound for anything a test waits on; reaching it fails the test.
///
/// Generous on purpose: the tests share two cores with other work, and a wait that reaches
/// this bound means something never happened, not that it was slow.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// How long a contender holds the lock (or a leader leads) in a loop of critical sections:
/// simulated work, never synchronisation.
pub const WORK: Duration = Duration::from_millis(2);

/// Awaits `fut`; fails the test, naming `what`, if it takes longer than `within`.
pub async fn bounded<T>(what: &str, within: Duration, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(within, fut).await {
        Ok(done) => done,
        Err(_) => panic!("{what}: not within {within:?}"),
    }
}

/// Waits until the value `receiver` shows satisfies `done`, looking at the current value
/// first (as [`watch::Receiver::wait_for`] does); fails the test, naming `what`, after
/// [`PATIENCE`] or if the sender is gone.
///
/// A watch channel shows its latest value only, and a value replaced before this looks is
/// never seen: wait this way for a state that lasts (a session suspended while cut off, a
/// candidate that stepped down), and with [`await_events`](crate::await_events) for events
/// that happened.
pub async fn await_watch<T>(
    what: &str,
    receiver: &mut watch::Receiver<T>,
    done: impl FnMut(&T) -> bool,
) {
    if let Err(err) = bounded(what, PATIENCE, receiver.wait_for(done)).await {
        panic!("{what}: {err}");
    }
}

/// `fut`'s output, or `None` if `stop` is true first (at once if it already is, or if its
/// sender is gone): how a looping contender waits on anything while it can be told to stop.
pub async fn unless_stopped<T>(
    stop: &mut watch::Receiver<bool>,
    fut: impl Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        out = fut => Some(out),
        _ = stop.wait_for(|&stop| stop) => None,
    }
}

/// Now, in ms since the epoch: the clock every process on the machine shares, for the times
/// processes print and the faults a test does to them.
pub fn now_ms() -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970");
    u64::try_from(since.as_millis()).expect("ms since 1970 fit in 64 bits")
}

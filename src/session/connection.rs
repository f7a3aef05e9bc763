//! What every request of the recipes needs to know about the connection: whether it is up,
//! when it is back, and how to retry a request whose outcome is unknown.

use std::future::Future;
use std::time::Duration;

use tracing::debug;
use zookeeper_client::{Client, SessionState, StateWatcher};

use crate::error::{outcome_unknown, Error, Result};
use crate::loss::Loss;

/// How many times one request is sent while its outcome stays unknown (the connection broke
/// with it in flight) before it fails with [`Error::ConnectionLoss`]. A request the servers
/// refuse by dropping the connection (one over their size limit, for example) would
/// otherwise be sent again on every reconnect, forever.
const ATTEMPTS: usize = 3;

/// Runs `op`, and again after each connection loss once the connection is back, at most
/// [`ATTEMPTS`] times; fails when the session ends.
///
/// # Notable errors
/// * [`Error::ConnectionLoss`] if the outcome was still unknown after the last attempt.
/// * [`Error::SessionExpired`] or [`Error::Closed`] if the session ended meanwhile.
pub(crate) async fn retry<T, F, Fut>(client: &Client, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<T, zookeeper_client::Error>>,
{
    for attempt in 1..=ATTEMPTS {
        match op().await {
            Err(err) if outcome_unknown(&err) && attempt < ATTEMPTS => {
                debug!(%err, attempt, "outcome unknown; trying again once connected");
                reconnected(client).await?;
            }
            other => return other.map_err(Error::from),
        }
    }
    Err(Error::ConnectionLoss)
}

/// How long after we last could have been heard the servers have certainly expired a
/// session of (negotiated) `timeout`: they expire it a timeout after they last heard from
/// it, rounded up to their next tick (at most half a timeout, since a timeout is at least
/// two ticks).
pub(crate) fn gone_after(timeout: Duration) -> Duration {
    timeout * 3 / 2
}

/// Waits until `client` is connected; fails if its session ended.
///
/// # Cancel safety
/// Cancel safe.
pub(crate) async fn reconnected(client: &Client) -> Result<()> {
    let mut states = client.state_watcher();
    let mut state = states.state();
    while connecting(state)? {
        state = states.changed().await;
    }
    Ok(())
}

/// Whether a connection in `state` is still to be waited for (down, or read-only);
/// `false` once connected.
///
/// # Notable errors
/// * [`Error::SessionExpired`] or [`Error::Closed`] if its session ended.
pub(crate) fn connecting(state: SessionState) -> Result<bool> {
    match state {
        SessionState::SyncConnected => Ok(false),
        SessionState::Disconnected | SessionState::ConnectedReadOnly => Ok(true),
        ended => Err(terminal(ended)),
    }
}

/// Resolves once `client` is not connected (any more).
///
/// # Cancel safety
/// Cancel safe.
pub(crate) async fn disconnected(client: &Client) {
    let mut states = client.state_watcher();
    let mut state = states.state();
    while state == SessionState::SyncConnected {
        state = states.changed().await;
    }
}

/// `Ok` if `client` is connected now; never waits.
///
/// # Notable errors
/// * [`Error::Disconnected`] if the client is reconnecting (or connected read-only).
/// * [`Error::SessionExpired`] or [`Error::Closed`] if its session ended.
pub(crate) fn connected_now(client: &Client) -> Result<()> {
    match client.state() {
        SessionState::SyncConnected => Ok(()),
        SessionState::Disconnected | SessionState::ConnectedReadOnly => Err(Error::Disconnected),
        ended => Err(terminal(ended)),
    }
}

/// The error for a session that ended in `state`.
pub(crate) fn terminal(state: SessionState) -> Error {
    match state {
        SessionState::Closed => Error::Closed,
        _ => Error::SessionExpired,
    }
}

/// Resolves when the connection whose `states` these are can no longer be trusted to keep
/// what it holds: the session ended, or the connection was suspended (at once, or once it
/// stayed suspended for the `tolerated` time). Takes the state watcher, not the client, so
/// that waiting does not keep a closed session's client alive.
///
/// # Cancel safety
/// Cancel safe.
pub(crate) async fn connection_lost(mut states: StateWatcher, tolerated: Option<Duration>) -> Loss {
    let mut state = states.state();
    loop {
        state = match (state, tolerated) {
            (SessionState::SyncConnected | SessionState::ConnectedReadOnly, _) => {
                states.changed().await
            }
            (SessionState::Disconnected, None) => return Loss::Suspended,
            (SessionState::Disconnected, Some(grace)) => {
                match tokio::time::timeout(grace, states.changed()).await {
                    Ok(next) => next,
                    Err(_) => return Loss::Suspended,
                }
            }
            (SessionState::Closed, _) => return Loss::Closed,
            _ => return Loss::SessionExpired,
        }
    }
}

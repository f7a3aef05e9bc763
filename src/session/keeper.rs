//! The session's keeper: the task that follows the client's state, publishes it as
//! [`SessionEvent`]s, confirms the session to the servers, and makes a new session after
//! expiry, until the session ends.
//!
//! A new session is tried again, with back-off, while the servers cannot be reached; one
//! they refuse for good (see [`lasting`]) ends the session with [`CloseReason::Refused`].
//! If the runtime running the keeper shuts down, the session ends with
//! [`CloseReason::RuntimeGone`].

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};
use zookeeper_client::{Client, SessionState, StateWatcher};

use super::connection::connection_lost;
use super::dialer::Dialer;
use super::liveness::{keep_confirming, Liveness};
use super::nodelay::Servers;
use super::{CloseReason, Current, Inner, SessionEvent};
use crate::error::{Error, Result};
use crate::loss::Loss;

/// Publishes the client's state changes and renews the session after expiry, until the
/// session is closed or every `Session` clone is gone; sets `TCP_NODELAY` on every new
/// connection; confirms the session to the servers (see [`Liveness`]). Keeps only weak
/// references, so that replacing [`Current`] is what ends a session.
///
/// If this future is dropped before it is done (its runtime shut down, even before it first
/// ran), `abandoned` ends the session with [`CloseReason::RuntimeGone`]: nothing would
/// watch or renew it any more.
pub(super) async fn keep(
    mut abandoned: Abandoned,
    target: String,
    client: (Weak<Client>, Arc<Liveness>),
    servers: Servers,
) {
    keep_until_done(abandoned.session.clone(), target, client, servers).await;
    abandoned.armed = false;
}

/// The keeper's guard: ends the session with [`CloseReason::RuntimeGone`] if dropped while
/// armed.
pub(super) struct Abandoned {
    pub(super) session: Weak<Inner>,
    pub(super) armed: bool,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(session) = self.session.upgrade().filter(|_| self.armed) else {
            return;
        };
        let first = session.close_reason.get().is_none();
        // The end is published before it is logged: a subscriber that panics cannot keep
        // the holders from learning it. No event while the thread unwinds (a second panic
        // in a destructor aborts).
        session.end(CloseReason::RuntimeGone);
        if first && !std::thread::panicking() {
            warn!("the session's runtime shut down: the session is closed");
        }
    }
}

async fn keep_until_done(
    inner: Weak<Inner>,
    target: String,
    (mut client, mut liveness): (Weak<Client>, Arc<Liveness>),
    servers: Servers,
) {
    loop {
        let Some(states) = client
            .upgrade()
            .map(|client| (client.state_watcher(), client.session_id()))
        else {
            return;
        };
        let tolerated = match (inner.upgrade(), client.upgrade()) {
            (Some(session), Some(client)) => session.builder.tolerated(client.session_timeout()),
            _ => return,
        };
        // The epoch first: a loss is published before anything else is done about it.
        let ended = tokio::select! {
            biased;
            () = end_epochs(&liveness, &client, tolerated) => return,
            ended = follow(&inner, states, &servers) => ended,
            () = keep_confirming(liveness.clone(), client.clone()) => return,
        };
        let Some(session) = inner.upgrade() else {
            return;
        };
        if ended == SessionState::Closed {
            session.end(CloseReason::Requested);
            return;
        }
        session.current.send_replace(Current::Renewing);
        session.publish(SessionEvent::Expired);
        let dialer = session.dialer.clone();
        drop(session);
        let renewed = renew(&dialer, &target).await;
        let Some(session) = inner.upgrade() else {
            return;
        };
        let (renewed, dialed) = match renewed {
            Ok((renewed, dialed)) => (Arc::new(renewed), dialed),
            Err(err) => {
                warn!(%err, "a new session was refused for good: the session is closed");
                session.end(CloseReason::Refused(err));
                return;
            }
        };
        // Runs by itself, off the runtime's workers.
        drop(servers.set_nodelay());
        liveness = Liveness::of(&renewed, dialed);
        if let Ok(mut current) = session.liveness.lock() {
            *current = liveness.clone();
        }
        client = Arc::downgrade(&renewed);
        session.current.send_replace(Current::Live(renewed));
        session.publish(SessionEvent::Connected);
    }
}

/// Ends the session's epoch (see [`Liveness::end`]) on every loss of the connection that
/// the holds made on it cannot survive: a suspension (at once, or once it lasted the
/// `tolerated` time), the session's expiry, its close. The holds of the session read it at
/// their next look, and the awaited ones wake up, without a task of their own. Returns
/// only once `client` is gone.
async fn end_epochs(liveness: &Liveness, client: &Weak<Client>, tolerated: Option<Duration>) {
    loop {
        let Some(states) = client.upgrade().map(|client| client.state_watcher()) else {
            return;
        };
        let loss = connection_lost(states.clone(), tolerated).await;
        liveness.end(liveness.epoch(), loss);
        if loss != Loss::Suspended || !back(states).await {
            // The session ended: the keeper's other branches end it.
            return std::future::pending().await;
        }
    }
}

/// Resolves once the connection whose `states` these are is up again (`true`) or its
/// session ended (`false`). Takes the state watcher, not the client, so that waiting does
/// not keep a closed session's client alive.
async fn back(mut states: StateWatcher) -> bool {
    let mut state = states.state();
    loop {
        match state {
            SessionState::SyncConnected | SessionState::ConnectedReadOnly => return true,
            SessionState::Disconnected => state = states.changed().await,
            _ => return false,
        }
    }
}

/// Publishes Suspended / Reconnected until the client reaches a terminal state; returns it.
async fn follow(
    inner: &Weak<Inner>,
    (mut states, session_id): (zookeeper_client::StateWatcher, zookeeper_client::SessionId),
    servers: &Servers,
) -> SessionState {
    // The client may have left the connected state before this task first ran (a loaded
    // machine): start from the state it is in, not from its next change.
    let mut state = states.state();
    if matches!(
        state,
        SessionState::SyncConnected | SessionState::ConnectedReadOnly
    ) {
        state = states.changed().await;
    }
    loop {
        let event = match state {
            SessionState::Disconnected => SessionEvent::Suspended,
            SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                drop(servers.set_nodelay());
                SessionEvent::Reconnected
            }
            SessionState::Expired | SessionState::AuthFailed => {
                warn!(session = %session_id, ?state, "session ended");
                return SessionState::Expired;
            }
            SessionState::Closed => return SessionState::Closed,
        };
        debug!(session = %session_id, ?event, "session state");
        match inner.upgrade() {
            Some(session) => session.publish(event),
            None => return SessionState::Closed,
        };
        state = states.changed().await;
    }
}

/// Connects a fresh session with the credentials and TLS settings of the first one, backing
/// off between attempts that failed for a passing reason (100 ms doubling to 5 s, a TLS
/// refusal included, see [`lasting`]); with the instant its connect began.
///
/// # Notable errors
/// A refusal that retrying cannot fix (see [`lasting`]).
pub(super) async fn renew(dialer: &Dialer, target: &str) -> Result<(Client, Instant)> {
    let mut backoff = Duration::from_millis(100);
    loop {
        let dialed = Instant::now();
        match dialer.dial(target).await {
            Ok(client) => {
                info!(session = %client.session_id(), "new session after expiry");
                return Ok((client, dialed));
            }
            Err(err) if lasting(&err) => return Err(err),
            Err(err) => {
                debug!(%err, ?backoff, "renewing failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Whether a failed dial would fail the same way every time: the servers refused the
/// credentials, or the settings themselves are unusable. Servers that cannot be reached (or
/// give no session in time) may be back later.
///
/// [`Error::Tls`] is not lasting here: the same TLS settings made a session on these hosts
/// before, and a server starting up or going down closes connections the way a TLS
/// mismatch does (a plaintext port that closes after five silent bytes looks like a TLS
/// port; a TLS port that closes during the handshake looks like a plaintext one). A server
/// whose certificate was replaced or expired can be put right by its operator, while the
/// session's own settings never change: renewing goes on, with back-off.
fn lasting(err: &Error) -> bool {
    matches!(
        err,
        Error::AuthFailed { .. }
            | Error::InvalidConnectString { .. }
            | Error::InvalidArgument(_)
            | Error::InvalidPath { .. }
    )
}

//! What a session tells its users: the events it publishes ([`SessionEvent`]), why it
//! ended ([`CloseReason`]), and the future of its close ([`Closing`]).

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::Duration;

use tracing::{debug, info_span, Instrument};
use zookeeper_client::StateWatcher;

use super::connection::gone_after;
use crate::error::Error;
#[cfg(doc)]
use crate::Session;

/// What happened to the session, as published by [`Session::events`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionEvent {
    /// A session is established (the first one, or a new one after expiry).
    Connected,
    /// The connection is lost; the session may still be alive and the client is reconnecting.
    Suspended,
    /// The connection is back and the same session survived.
    Reconnected,
    /// The servers expired the session; a new session is being made.
    Expired,
    /// The session ended for good; nothing more will happen. [`Session::close_reason`] says
    /// why: [`Session::close`] was called, a new session after expiry was refused for good,
    /// or the tokio runtime that ran the session shut down.
    Closed,
}

impl SessionEvent {
    /// The state a session is in after this event, as metrics name it; `None` once closed.
    pub(super) fn state(self) -> Option<&'static str> {
        match self {
            SessionEvent::Connected | SessionEvent::Reconnected => Some("connected"),
            SessionEvent::Suspended => Some("suspended"),
            SessionEvent::Expired => Some("renewing"),
            SessionEvent::Closed => None,
        }
    }
}

/// Why a session ended for good, as [`Session::close_reason`] tells. From then on the
/// recipes of the session fail with [`Error::Closed`] and what they held is lost with
/// [`Loss::Closed`](crate::Loss::Closed).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum CloseReason {
    /// [`Session::close`] was called.
    Requested,
    /// After expiry, the servers refused the new session for a reason that retrying does
    /// not fix: the error the attempt failed with ([`Error::AuthFailed`], ...).
    /// Unreachable servers are not such a reason, nor a TLS refusal (the settings made a
    /// session on these hosts before, and a server starting up closes connections as a
    /// TLS mismatch does): the session keeps trying, with back-off, until they answer.
    Refused(Error),
    /// The tokio runtime that ran the session's tasks shut down: nothing watches the
    /// connection or renews the session any more.
    RuntimeGone,
}

/// A [`Session::close`] that took effect; await it to wait until the servers have ended
/// the ZooKeeper session (see [`Session::close`]). Dropping it does not undo the close.
#[derive(Debug)]
pub struct Closing {
    /// The state of the client that was live at the close, and its session timeout.
    pub(super) states: Option<(StateWatcher, Duration)>,
}

impl IntoFuture for Closing {
    type Output = ();
    type IntoFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(ended(self.states).instrument(info_span!("zk.session.close")))
    }
}

/// Resolves once the client whose `states` these are has ended (the servers answered its
/// close, or told it that the session expired), or once the servers have certainly
/// expired it (see [`gone_after`]).
async fn ended(states: Option<(StateWatcher, Duration)>) {
    let Some((mut states, timeout)) = states else {
        return;
    };
    let closed = async {
        let mut state = states.state();
        while !state.is_terminated() {
            state = states.changed().await;
        }
        state
    };
    match tokio::time::timeout(gone_after(timeout), closed).await {
        Ok(state) => debug!(?state, "session ended"),
        Err(_) => debug!("session not confirmed closed; the servers have expired it"),
    }
}

//! The state one [`Session`](super::Session) and its clones share: the live client
//! ([`Current`]), the published events, the entry permits, what the servers confirmed, the
//! runtime its work runs on; and how it ends for good ([`Inner::end`]).

use std::sync::{Arc, OnceLock};

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use zookeeper_client::Client;

use super::apart::Apart;
use super::builder::SessionBuilder;
use super::deferrals::Deferrals;
use super::dialer::Dialer;
use super::events::{CloseReason, SessionEvent};
use super::liveness::Liveness;
use super::permits::EntryPermits;
use super::roots::KnownRoots;
use crate::error::{Error, Result};
use crate::loss::Loss;
use crate::metrics;

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) builder: SessionBuilder,
    /// Makes the new session after expiry, with the same credentials and TLS settings.
    pub(super) dialer: Dialer,
    /// Makes sessions apart with the same settings (see [`apart`](super::apart)).
    pub(super) apart: Apart,
    pub(super) current: watch::Sender<Current>,
    pub(super) events: watch::Sender<SessionEvent>,
    pub(super) keeper: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// Permits to enter a queue: a bounded number at once per root.
    pub(super) entries: EntryPermits,
    /// Roots it, or another session to the same servers, entered a queue under lately
    /// (see [`roots`](super::roots)).
    pub(super) roots: Arc<KnownRoots>,
    /// Why the session ended for good; the first reason stays.
    pub(super) close_reason: OnceLock<CloseReason>,
    /// What the servers confirmed of the live session (see [`Liveness`]).
    pub(super) liveness: std::sync::Mutex<Arc<Liveness>>,
    /// The runtime the session was made on, whose tasks run its client: removals of nodes
    /// run there, even when their owner is dropped outside any runtime.
    pub(super) runtime: tokio::runtime::Handle,
    /// Work its holds put off (see [`deferrals`](super::deferrals)).
    pub(super) deferrals: Arc<Deferrals>,
    /// Notified once `current` is [`Current::Closed`] (see [`Session::closed`](super::Session::closed)).
    pub(super) closes: Notify,
}

impl Inner {
    /// Ends the session for good because of `reason` (unless it ended already): no client
    /// any more, [`SessionEvent::Closed`], no more permits to enter a queue.
    pub(super) fn end(&self, reason: CloseReason) {
        let _ = self.close_reason.set(reason);
        // Every hold of the session is lost before anything else is done about it.
        if let Ok(liveness) = self.liveness.lock() {
            liveness.end(liveness.epoch(), Loss::Closed);
        }
        self.current.send_replace(Current::Closed);
        self.closes.notify_waiters();
        self.publish(SessionEvent::Closed);
        self.entries.close();
    }

    /// Publishes `event` (and counts the session's new state, see [`metrics`]).
    pub(super) fn publish(&self, event: SessionEvent) {
        let from = self.events.send_replace(event);
        if from != event {
            metrics::session_moved(from.state(), event.state());
        }
    }
}

/// The client of the live session, if there is one. This is the only lasting strong
/// reference to a client inside the crate (recipes keep `Weak` ones), so replacing it
/// ends the ZooKeeper session once requests in flight are answered.
#[derive(Clone, Debug)]
pub(super) enum Current {
    Live(Arc<Client>),
    Renewing,
    Closed,
}

impl Current {
    /// Whether a wait for the live client ends here: a live client that has not ended (one
    /// that has just ended is replaced as soon as the keeper sees it), or the close.
    pub(super) fn settled(&self) -> bool {
        match self {
            Current::Live(client) => !client.state().is_terminated(),
            Current::Renewing => false,
            Current::Closed => true,
        }
    }

    /// The live client.
    ///
    /// # Notable errors
    /// * [`Error::Closed`] unless there is one (after the close).
    pub(super) fn client(&self) -> Result<Arc<Client>> {
        match self {
            Current::Live(client) => Ok(client.clone()),
            Current::Renewing | Current::Closed => Err(Error::Closed),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(keeper) = self.keeper.get_mut().ok().and_then(Option::take) {
            keeper.abort();
        }
    }
}

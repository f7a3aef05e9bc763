//! A hand-off that needs no request: what a waiter watches besides its blocker, so that
//! when the blocker's node is gone it knows, from notifications alone, that it is first
//! and that its own node exists.
//!
//! ZooKeeper sends one session's notifications in the order of the changes that fired
//! them, and zookeeper-client hands them to their watchers in that order. So, while one
//! connection lasts, a waiter that watches its own node has heard of that node's deletion
//! before it hears of any later change: when its blocker's deletion arrives with no word
//! about its own node, its own node existed at that moment. Whether the blocker was first
//! when it left comes from a *signal node*: a contender that leaves while first creates
//! `<its node>.left-first` and deletes it again in the transaction that deletes its node,
//! so its successor, watching that path, hears the creation just before the deletion (no
//! one ever sees the signal in a listing). A waiter whose blocker was already first when
//! it looked waits for the signal all the same: without it, a deletion of its own node in
//! the same transaction as its blocker's, after it (as `zkCli deleteall` makes), would be
//! heard only after the hand-off, while the blocker's own transaction never deletes it.
//!
//! Anything else (the own node was written into, the signal never came, the connection
//! broke and watches were set again, which the servers answer in no particular order)
//! sends the waiter back to the one-request look after its blocker left.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use tracing::debug;
use zookeeper_client::{Client, EventType, OneshotWatcher, StateWatcher, WatchedEvent};

use crate::error::Result;
use crate::rwlock::READER;
use crate::session::retry;

/// The suffix of a node's left-first signal.
const SIGNAL: &str = ".left-first";

/// The path of the signal that the node at `node` left while first.
pub(super) fn signal(node: &str) -> String {
    format!("{node}{SIGNAL}")
}

/// A watch that has been set, waiting for its notification.
pub(super) type Armed = Pin<Box<dyn Future<Output = WatchedEvent> + Send + Sync>>;

/// Keeps `watcher` waiting for its notification (boxed: a waiter keeps one per watch).
pub(super) fn armed(watcher: OneshotWatcher) -> Armed {
    Box::pin(watcher.changed())
}

/// What a waiter watches besides its blocker.
pub(super) struct HandOff {
    /// The connection's state as of arming: any change means the watches were set again.
    states: StateWatcher,
    /// An exists watch on our own node, set while it existed.
    own: Option<Armed>,
    /// An exists watch on the blocker's left-first signal; `None` if it could not be
    /// watched, or the blocker is a reader (readers never signal).
    signal: Option<Armed>,
}

impl std::fmt::Debug for HandOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandOff")
            .field("own", &self.own.is_some())
            .field("signal", &self.signal.is_some())
            .finish_non_exhaustive()
    }
}

impl HandOff {
    /// Watches `node` (our own, unless `own` already watches it) and the left-first signal
    /// of `blocker` (unless it is a reader). Meant to be sent with the blocker's watch, so
    /// that all are answered in one round trip.
    ///
    /// # Notable errors
    /// * [`Error::ConnectionLoss`], [`Error::SessionExpired`], [`Error::Closed`] as
    ///   [`retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: watches set are removed when dropped.
    pub(super) async fn arm(
        client: &Client,
        node: &str,
        own: Option<Armed>,
        blocker: &str,
    ) -> Result<Box<HandOff>> {
        let states = client.state_watcher();
        let watch_own = async {
            match own {
                Some(own) => Ok(Some(own)),
                None => watch_existing(client, node).await,
            }
        };
        let watch_signal = async {
            if blocker.contains(READER) {
                return Ok(None);
            }
            let path = signal(blocker);
            match retry(client, || client.check_and_watch_stat(&path)).await? {
                (None, watcher) => Ok(Some(armed(watcher))),
                // Someone made it: it proves nothing.
                (Some(_), _) => Ok(None),
            }
        };
        let (own, signal) = tokio::try_join!(watch_own, watch_signal)?;
        Ok(Box::new(HandOff {
            states,
            own,
            signal,
        }))
    }

    /// Once the blocker's deletion was heard: whether we are first with our own node known
    /// to exist, from what was heard before it alone.
    pub(super) fn taken(&mut self) -> bool {
        let connection_same = ready(pin!(self.states.changed())).is_none();
        // A watch that fired is spent (and must not be polled again).
        if let Some(own) = self.own.as_mut() {
            if ready(own.as_mut()).is_some() {
                self.own = None;
            }
        }
        let own_there = self.own.is_some();
        // Even a blocker that was first when we looked must signal: a deletion of our node
        // in the same transaction as the blocker's, after it (`deleteall`), is heard only
        // after the blocker's, while the blocker's own transaction never deletes our node.
        let left_first = self.signal.as_mut().is_some_and(|signal| {
            ready(signal.as_mut()).is_some_and(|event| event.event_type == EventType::NodeCreated)
        });
        // A fired or stale signal watch is of no further use.
        self.signal = None;
        debug!(
            connection_same,
            own_there, left_first, "blocker gone; what was heard"
        );
        connection_same && own_there && left_first
    }

    /// Resolves once the watch on our own node says that it was deleted; never if it is
    /// not set, or after it fired for anything else (a write: the watch is then spent).
    ///
    /// # Cancel safety
    /// Cancel safe: the watch stays set.
    pub(super) async fn own_deleted(&mut self) {
        if let Some(own) = self.own.as_mut() {
            let event = own.await;
            self.own = None;
            if event.event_type == EventType::NodeDeleted {
                return;
            }
        }
        std::future::pending().await
    }

    /// The watch on our own node, if it is set: still waiting, or, if it fired, already
    /// resolved with what it heard.
    pub(super) fn into_own(self) -> Option<Armed> {
        let mut own = self.own?;
        match ready(own.as_mut()) {
            None => Some(own),
            Some(event) => Some(Box::pin(std::future::ready(event))),
        }
    }
}

/// Sets an exists watch on `node`; `None` if it does not exist (the watch is dropped).
async fn watch_existing(client: &Client, node: &str) -> Result<Option<Armed>> {
    match retry(client, || client.check_and_watch_stat(node)).await? {
        (Some(_), watcher) => Ok(Some(armed(watcher))),
        (None, _) => Ok(None),
    }
}

/// Polls `future` once, without waiting: its output if it is ready now.
fn ready<F: Future + ?Sized>(future: Pin<&mut F>) -> Option<F::Output> {
    /// Wakes no one: nothing waits on a future polled only to see whether it is ready.
    struct Nobody;
    impl Wake for Nobody {
        fn wake(self: Arc<Self>) {}
    }
    let waker = Waker::from(Arc::new(Nobody));
    match future.poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

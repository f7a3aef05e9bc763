//! Our node in a queue ([`Ticket`]): what it is, waiting to be first, and leaving (the
//! removal itself is [`leaving`](super::leaving)'s).
//!
//! Waiting to be first: watch the blocker and hear what the servers say (see
//! [`handoff`](super::handoff)); when the blocker is gone, hold on what was heard, or else
//! confirm our own node (behind a blocker that was first) or list the root (behind one of
//! unknown place). Waiting for a crowded root to thin out: list it with a child watch until
//! few enough are left.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tracing::{debug, warn};
use zookeeper_client::{Client, EventType};

use super::decide::{listed, Place};
use super::handoff::{Armed, HandOff, Heard};
use super::leaving::{spawn_removal, Removal, Removing};
use super::{Blockers, Wait};
use crate::error::{Error, Result};
use crate::metrics::NodeKind;
use crate::session::{reconnected, retry, terminal, Session};

/// How a wait to be first ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// First (for [`Blockers::Crowd`](super::Blockers::Crowd): among few enough), with the
    /// own node known to exist.
    First,
    /// The deadline passed first; the contender keeps its place.
    Late,
    /// The contender's node is gone, deleted by someone. It is disowned; enter again to
    /// contend.
    Evicted,
    /// The contender's session expired, and its node with it. It is disowned; enter again
    /// (on the new session) to contend.
    Expired,
}

/// How long a waiter that gives up may spend deleting its node before leaving that to the
/// background.
const GIVE_UP_GRACE: Duration = Duration::from_secs(1);

/// Our node in a queue. Dropping it deletes the node in the background.
#[derive(Debug)]
pub(crate) struct Ticket {
    pub(super) session: Session,
    /// The client of the session the node belongs to. Weak: only [`Session`] keeps a
    /// client alive, so that closing it ends the ZooKeeper session.
    pub(super) client: Weak<Client>,
    /// Full path of the node; the root is its parent. Shared with the hold's core, which
    /// keeps the same path: one copy per node.
    pub(super) node: Arc<str>,
    pub(super) czxid: i64,
    pub(super) place: Place,
    /// Who keeps it from holding, and who signals.
    pub(super) blockers: Blockers,
    /// What the node is, for metrics.
    pub(super) kind: NodeKind,
    /// Whether dropping it deletes the node.
    pub(super) armed: bool,
    /// While it waits: what it watches so that a hand-off needs no request.
    pub(super) handoff: Option<Box<HandOff>>,
    /// Latched once a request to let go was seen in the node. A request belongs to the
    /// node: every holding, fence, guard and leadership made for it shares this one latch
    /// (a leader's later terms on the node too), so none misses a request that another
    /// handle saw before the holder's own write (a proclamation) replaced the marker.
    /// Made when the node first holds: a waiter keeps none.
    pub(super) asked: Option<Arc<AtomicBool>>,
}

impl Ticket {
    /// Full path of the node.
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// Full path of the node, shared.
    pub(crate) fn shared_node(&self) -> Arc<str> {
        self.node.clone()
    }

    /// The zxid that created the node: a fencing token, greater for every later node.
    pub(crate) fn token(&self) -> u64 {
        u64::try_from(self.czxid).unwrap_or_default()
    }

    /// Whether nothing is known to keep it from holding (for [`Blockers::Every`]: whether it
    /// is first).
    pub(crate) fn is_first(&self) -> bool {
        matches!(self.place, Place::First)
    }

    /// Whether leaving now must signal the successor: an exclusive contender that is first,
    /// whether it entered first or not (see [`Heard::Taken`]).
    fn signals(&self) -> bool {
        self.blockers.signals(self.is_first())
    }

    /// What the node is, for metrics.
    pub(crate) fn kind(&self) -> NodeKind {
        self.kind
    }

    /// The client the node belongs to.
    ///
    /// # Notable errors
    /// * [`Error::Closed`] if the session was closed, [`Error::SessionExpired`] if the
    ///   node's session ended and was replaced.
    fn live_client(&self) -> Result<Arc<Client>> {
        self.client.upgrade().ok_or_else(|| self.session.ended())
    }

    /// The client of the session the node belongs to (weak: only the session keeps it).
    pub(crate) fn client(&self) -> Weak<Client> {
        self.client.clone()
    }

    /// The session the ticket was entered on.
    pub(crate) fn session(&self) -> &Session {
        &self.session
    }

    /// The node's latch of a request to let go, shared by every handle of the node.
    pub(crate) fn latch(&mut self) -> Arc<AtomicBool> {
        self.asked.get_or_insert_with(Arc::default).clone()
    }

    /// The watch on our own node set while it waited, if it is still set: a holding keeps
    /// it rather than setting another.
    pub(crate) fn take_own_watch(&mut self) -> Option<Armed> {
        self.handoff.take().and_then(|handoff| handoff.into_own())
    }

    /// Forgets the node without deleting it: it went with its session, or was deleted.
    pub(crate) fn disown(mut self) {
        self.armed = false;
    }

    /// Starts deleting the node, whatever was written into it (the first delete is sent
    /// now if the connection is up); the returned [`Removing`] resolves once it is gone:
    /// deleted now, or once the connection is back, or gone with its session. Never fails
    /// for a connection that is down: the delete is sent again, with back-off, until the
    /// node is gone or its session is over. Not an `async fn`: what is awaited keeps
    /// nothing of the ticket.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the servers refuse the delete: the node may still be there
    ///   (it goes with the session).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped [`Removing`] goes on in the background.
    pub(crate) fn leave(mut self) -> Removing {
        self.armed = false;
        let removal = Removal::Node(std::mem::take(&mut self.node), self.signals());
        spawn_removal(&self.session, self.client.clone(), removal)
    }

    /// Leaves the queue after waiting in vain: waits at most a second for the node to be
    /// gone; the removal goes on in the background after that.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`leave`](Self::leave).
    pub(crate) async fn give_up(self) {
        match tokio::time::timeout(GIVE_UP_GRACE, self.leave()).await {
            Ok(Ok(left)) => debug!(?left, "left the queue"),
            Ok(Err(err)) => {
                warn!(%err, "could not leave the queue; the node goes with the session")
            }
            Err(_) => debug!("leaving the queue is slow; in the background"),
        }
    }

    /// Waits until this contender is first, `wait`'s deadline passes, or its node is gone:
    /// the protocol's "Waiting and hand-off" (the queue's module doc). Behind a blocker it
    /// arms the hand-off's watches ([`HandOff::arm`]), hears what the servers send
    /// ([`HandOff::hear`]), and once the blocker is gone holds on what was heard
    /// ([`Heard::Taken`]) or asks the servers once ([`ask`](Self::ask)). A contender that
    /// is first already is told so by its caller without this wait
    /// ([`Queue::acquire`](super::Queue::acquire)).
    ///
    /// # Notable errors
    /// * [`Error::Closed`] if the session was closed, at once, even with the connection
    ///   down (a watch ends only once its client does: with the connection down, not at
    ///   the close but when the client gives up).
    /// * [`Error::ConnectionLoss`] if a request's outcome stayed unknown (see
    ///   [`retry`](crate::session::retry)).
    ///
    /// # Cancel safety
    /// Cancel safe: the contender keeps its place and the hand-off's watches.
    pub(crate) async fn wait_first(&mut self, wait: Wait) -> Result<Turn> {
        let session = self.session.clone();
        let first = async {
            loop {
                let (blocker, blocker_first) = match &self.place {
                    Place::First => return Ok(Turn::First),
                    Place::Crowded => {
                        // Boxed, here and below: what runs after a wake-up takes no room
                        // while waiting (`lock()`: 648 bytes; 976 with this one unboxed,
                        // 3,208 with the arming, 1,072 with the asking).
                        if !Box::pin(self.thinned()).await? {
                            return Ok(self.evicted());
                        }
                        continue;
                    }
                    // The blocker's path is borrowed, not copied: only the fields beside
                    // it change until the wait ends.
                    Place::Behind {
                        blocker,
                        blocker_first,
                    } => (blocker, *blocker_first),
                };
                let client = self.client.upgrade().ok_or_else(|| self.session.ended())?;
                let own = self.handoff.take().and_then(|handoff| handoff.into_own());
                let signals = self.blockers.signalled_by(blocker);
                let sent = Instant::now();
                let arming = HandOff::arm(&client, &self.node, own, blocker, signals);
                let mut handoff = Box::pin(arming).await?;
                // The answer confirms the session: a hold made on it now is trusted.
                session.confirm(&client, sent);
                drop(client);
                // Not boxed: hearing keeps only references while it waits.
                let heard = handoff.hear(&self.client, blocker).await;
                self.handoff = Some(handoff);
                let placed = match heard? {
                    Heard::OwnDeleted => false,
                    Heard::Taken => {
                        debug!(node = %self.node, "blocker gone; first, as heard without a request");
                        self.place = Place::First;
                        true
                    }
                    Heard::BlockerGone => Box::pin(self.ask(blocker_first)).await?,
                };
                if !placed {
                    return Ok(self.evicted());
                }
            }
        };
        // The close first, then the turn: a contender that is first holds even with its
        // deadline passed.
        let waited = tokio::select! {
            biased;
            () = session.closed() => Err(Error::Closed),
            turn = first => turn,
            () = wait.passed() => Ok(Turn::Late),
        };
        match waited {
            Ok(turn) => Ok(turn),
            Err(err) => self.failed(err),
        }
    }

    /// For a contender that held until its connection was suspended: once connected again,
    /// whether its node is still there. If it is, it is still first (no one can have come
    /// ahead of it).
    ///
    /// # Notable errors
    /// As [`wait_first`](Self::wait_first).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn still_first(&mut self) -> Result<Turn> {
        let session = self.session.clone();
        let exists = async {
            let client = self.live_client()?;
            reconnected(&client).await?;
            // Sent once back: the answer confirms the session from then on.
            let sent = Instant::now();
            let stat = retry(&client, || client.check_stat(&self.node)).await?;
            session.confirm(&client, sent);
            Ok(stat)
        };
        let exists = tokio::select! {
            biased;
            () = session.closed() => Err(Error::Closed),
            exists = exists => exists,
        };
        match exists {
            Ok(Some(_)) if self.is_first() => Ok(Turn::First),
            Ok(_) => Ok(self.evicted()),
            Err(err) => self.failed(err),
        }
    }

    /// A session that expired under a waiting contender took its node along.
    fn failed(&mut self, err: Error) -> Result<Turn> {
        match err {
            Error::SessionExpired => {
                warn!(node = %self.node, "session expired; our node went with it");
                self.armed = false;
                Ok(Turn::Expired)
            }
            err => Err(err),
        }
    }

    fn evicted(&mut self) -> Turn {
        warn!(node = %self.node, "our node is gone; we are out of the queue");
        self.armed = false;
        Turn::Evicted
    }

    /// Once a blocker left and what was heard does not say that we hold, asks the servers,
    /// once: behind a blocker that was first (no one else can be ahead: sequence numbers
    /// only grow), whether our own node exists; behind a blocker of unknown place, the
    /// root's children, to learn who blocks us now. `false` if our own node is gone.
    async fn ask(&mut self, blocker_first: bool) -> Result<bool> {
        let client = self.live_client()?;
        let (root, own) = self.node.rsplit_once('/').unwrap_or_default();
        let sent = Instant::now();
        let place = if blocker_first {
            let stat = retry(&client, || client.check_stat(&self.node)).await?;
            debug!(node = %self.node, there = stat.is_some(), "blocker gone; our node asked for");
            stat.map(|_| Place::First)
        } else {
            let children = retry(&client, || client.list_children(root)).await?;
            debug!(node = %self.node, children = children.len(), "blocker left; looked again");
            Place::of(root, own, &children, self.blockers)
        };
        self.session.confirm(&client, sent);
        let placed = place.is_some();
        if let Some(place) = place {
            self.place = place;
        }
        Ok(placed)
    }

    /// Lists the root with a child watch until it has few enough children to hold (then
    /// `true`, with our node in the listing) or our node is not among them (`false`). Every
    /// notification is only a reason to list again; the watch goes with the last listing.
    async fn thinned(&mut self) -> Result<bool> {
        let Place::Crowded = self.place else {
            return Ok(true);
        };
        let (root, own) = self.node.rsplit_once('/').unwrap_or_default();
        let holds = loop {
            let client = self.live_client()?;
            let sent = Instant::now();
            let (children, watcher) =
                retry(&client, || client.list_and_watch_children(root)).await?;
            self.session.confirm(&client, sent);
            drop(client);
            if !listed(own, &children) {
                break false;
            }
            if !self.blockers.crowded(children.len()) {
                debug!(node = %self.node, children = children.len(), "few enough; holds");
                break true;
            }
            debug!(node = %self.node, children = children.len(), "crowded; watching the root");
            let event = watcher.changed().await;
            if event.event_type == EventType::Session {
                return Err(terminal(event.session_state));
            }
        };
        if holds {
            self.place = Place::First;
        }
        Ok(holds)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.armed {
            let removal = Removal::Node(std::mem::take(&mut self.node), self.signals());
            drop(spawn_removal(&self.session, self.client.clone(), removal));
        }
    }
}

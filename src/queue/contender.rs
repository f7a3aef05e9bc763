//! Our node in a queue ([`Contender`]): what it is, waiting to be first, and leaving (the
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
use super::handoff::{self, armed, Armed, HandOff, Heard};
use super::leaving::{spawn_removal, Left, Removal};
use super::{Blockers, Wait};
use crate::error::{Error, Result};
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

/// How waiting on a blocker ended.
enum Gone {
    /// It left, and what was heard says that we are first, with our node there.
    Heard,
    /// Our own node was heard to be gone.
    Evicted,
    /// It left; what was heard does not say whether we are first.
    Left,
}

/// How long a waiter that gives up may spend deleting its node before leaving that to the
/// background.
const GIVE_UP_GRACE: Duration = Duration::from_secs(1);

/// Our node in a queue. Dropping it deletes the node in the background.
#[derive(Debug)]
pub(crate) struct Contender {
    pub(super) session: Session,
    /// The client of the session the node belongs to. Weak: only [`Session`] keeps a
    /// client alive, so that closing it ends the ZooKeeper session.
    pub(super) client: Weak<Client>,
    /// Full path of the node; the root is its parent. Boxed: a waiting acquisition keeps
    /// the contender, and is the smaller for it.
    pub(super) node: Box<str>,
    pub(super) czxid: i64,
    pub(super) place: Place,
    /// Who keeps it from holding, and who signals.
    pub(super) blockers: Blockers,
    /// Whether dropping it deletes the node.
    pub(super) armed: bool,
    /// While it waits: what it watches so that a hand-off needs no request.
    pub(super) handoff: Option<Box<handoff::HandOff>>,
    /// Latched once a request to let go was seen in the node. A request belongs to the
    /// node: every holding, fence, guard and leadership made for it shares this one latch
    /// (a leader's later terms on the node too), so none misses a request that another
    /// handle saw before the holder's own write (a proclamation) replaced the marker.
    pub(super) asked: Arc<AtomicBool>,
}

impl Contender {
    /// Full path of the node.
    pub(crate) fn node(&self) -> &str {
        &self.node
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
    /// whether it entered first or not (see [`HandOff::taken`](handoff::HandOff::taken)).
    fn signals(&self) -> bool {
        self.blockers.signals(self.is_first())
    }

    /// The recipe root (the node's parent) and the node's own name.
    fn root_and_name(&self) -> (&str, &str) {
        self.node.rsplit_once('/').unwrap_or_default()
    }

    /// The client the node belongs to.
    ///
    /// # Notable errors
    /// * [`Error::Closed`] if the session was closed, [`Error::SessionExpired`] if the
    ///   node's session ended and was replaced.
    fn client(&self) -> Result<Arc<Client>> {
        self.client.upgrade().ok_or_else(|| self.session.ended())
    }

    /// Forgets the node without deleting it: it went with its session, or was deleted.
    pub(crate) fn disown(mut self) {
        self.armed = false;
    }

    /// Deletes the node, whatever was written into it, and waits until it is gone: deleted
    /// now, or once the connection is back, or gone with its session. Never fails for a
    /// connection that is down: the delete is sent again, with back-off, until the node is
    /// gone or its session is over.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the servers refuse the delete: the node may still be there
    ///   (it goes with the session).
    ///
    /// # Cancel safety
    /// Cancel safe: the removal goes on in the background.
    pub(crate) async fn leave(mut self) -> Result<Left> {
        self.armed = false;
        let removal = Removal::Node(std::mem::take(&mut self.node).into(), self.signals());
        spawn_removal(&self.session, self.client.clone(), removal).await
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

    /// Waits until this contender is first, `wait`'s deadline passes, or its node is gone.
    ///
    /// # Notable errors
    /// * [`Error::Closed`] if the session was closed.
    /// * [`Error::ConnectionLoss`] if a request's outcome stayed unknown (see
    ///   [`retry`](crate::session::retry)).
    ///
    /// # Cancel safety
    /// Cancel safe: the contender keeps its place and its blocker.
    pub(crate) async fn wait_first(&mut self, wait: Wait) -> Result<Turn> {
        // Closing the session drops its client, which ends the watches with a session
        // event: no wait of its own is needed for it (it would cost every waiter room).
        // The turn first: a contender that is first holds even with its deadline passed.
        let waited = tokio::select! {
            biased;
            turn = self.wait_until_first() => turn,
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
        // Two steps: the answer confirms the session from when it was asked, once back.
        let exists = async {
            self.until_closed(async { reconnected(&*self.client()?).await })
                .await?;
            self.until_closed(async {
                let client = self.client()?;
                retry(&client, || client.check_stat(&self.node)).await
            })
            .await
        };
        match exists.await {
            Ok(Some(_)) if self.is_first() => Ok(Turn::First),
            Ok(_) => Ok(self.evicted()),
            Err(err) => self.failed(err),
        }
    }

    /// Runs `work` (requests on the contender's client) unless the session is closed first:
    /// then [`Error::Closed`] at once, and the client `work` kept is let go, so that a
    /// request waiting for a connection never keeps a closed session open. An answer
    /// confirms the session (see [`Liveness`](crate::trust::Liveness)).
    ///
    /// # Cancel safety
    /// As `work`.
    async fn until_closed<T>(
        &self,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let sent = Instant::now();
        let done = self.unless_closed(work).await.and_then(|done| done);
        // An answer confirms the session: a hold made on it now is trusted.
        if let (Ok(_), Ok(client)) = (&done, self.client()) {
            self.session.confirm(&client, sent);
        }
        done
    }

    /// Waits for `event` (a notification, or requests) unless the session is closed first:
    /// then [`Error::Closed`] at once. A watch waited on ends only once its client does,
    /// which, with the connection down, is not the close but the client giving up.
    ///
    /// # Cancel safety
    /// As `event`.
    async fn unless_closed<T>(&self, event: impl std::future::Future<Output = T>) -> Result<T> {
        tokio::select! {
            biased;
            () = self.session.closed() => Err(Error::Closed),
            heard = event => Ok(heard),
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

    async fn wait_until_first(&mut self) -> Result<Turn> {
        loop {
            let handoff = self.handoff.take();
            let (blocker, blocker_first) = match &self.place {
                Place::First => {
                    self.handoff = handoff;
                    return Ok(Turn::First);
                }
                Place::Crowded => {
                    if !Box::pin(self.thinned()).await? {
                        return Ok(self.evicted());
                    }
                    continue;
                }
                Place::Behind {
                    blocker,
                    blocker_first,
                } => (blocker, *blocker_first),
            };
            let (gone, handoff) = self.gone(blocker, handoff).await?;
            self.handoff = handoff;
            // Boxed, here and below: what runs after a wake-up takes no room while waiting.
            let placed = match gone {
                Gone::Heard => {
                    debug!(node = %self.node, "blocker gone; first, as heard without a request");
                    self.place = Place::First;
                    true
                }
                Gone::Evicted => false,
                // Behind a blocker that was first, no one else can be ahead: our own node
                // is all there is to confirm.
                Gone::Left if blocker_first => Box::pin(self.own_exists()).await?,
                Gone::Left => Box::pin(self.look_again()).await?,
            };
            if !placed {
                return Ok(self.evicted());
            }
        }
    }

    fn evicted(&mut self) -> Turn {
        warn!(node = %self.node, "our node is gone; we are out of the queue");
        self.armed = false;
        Turn::Evicted
    }

    /// Resolves once the node at `blocker` is gone ([`Gone::Heard`] if what was heard
    /// says we hold, see [`HandOff::taken`]), or once our own node is heard to be gone. A
    /// write into the blocker is someone's write, not a departure: it is watched again. The
    /// hand-off's watches (`handoff`: ours, kept from an earlier blocker) are set with the
    /// blocker's, in the same round trip.
    async fn gone(
        &self,
        blocker: &str,
        handoff: Option<Box<HandOff>>,
    ) -> Result<(Gone, Option<Box<HandOff>>)> {
        let own = handoff.and_then(|handoff| handoff.into_own());
        let client = self.client()?;
        let signals = self.blockers.signalled_by(blocker);
        let arming = HandOff::arm(&client, &self.node, own, blocker, signals);
        // Boxed: setting the watches takes no room while waiting on them.
        let (watched, handoff) =
            Box::pin(self.until_closed(async { Ok(tokio::join!(self.watch(blocker), arming)) }))
                .await?;
        drop(client);
        // Watches that could not be set only cost a request once the blocker left.
        let mut handoff = handoff.unwrap_or_else(|_| HandOff::unarmed());
        let mut watched = watched?;
        while let Some(mut watcher) = watched {
            // Boxed: hearing takes room only while it runs.
            let event = match Box::pin(self.unless_closed(handoff.hear(&mut watcher))).await? {
                Heard::OwnDeleted => return Ok((Gone::Evicted, Some(handoff))),
                Heard::Blocker(event) => event,
            };
            match event.event_type {
                EventType::NodeDeleted => break,
                EventType::Session => return Err(terminal(event.session_state)),
                other => debug!(%blocker, ?other, "blocker changed but may be there"),
            }
            // Boxed: setting the watch takes no room while waiting on it.
            watched = Box::pin(self.until_closed(self.watch(blocker))).await?;
        }
        let gone = match handoff.taken() {
            true => Gone::Heard,
            false => Gone::Left,
        };
        Ok((gone, Some(handoff)))
    }

    /// Sets an exists watch on the node at `path` (its data is not needed: an election's
    /// can be large); `None` if it does not exist.
    async fn watch(&self, path: &str) -> Result<Option<Armed>> {
        let client = self.client()?;
        let (stat, watcher) = retry(&client, || client.check_and_watch_stat(path)).await?;
        debug!(node = %self.node, blocker = %path, there = stat.is_some(), "watching the blocker");
        Ok(stat.map(|_| armed(watcher)))
    }

    /// Whether our own node exists, asked of the servers (behind a blocker that was first,
    /// when what was heard did not say).
    async fn own_exists(&mut self) -> Result<bool> {
        let stat = self
            .until_closed(async {
                let client = self.client()?;
                retry(&client, || client.check_stat(&self.node)).await
            })
            .await?;
        if stat.is_some() {
            debug!(node = %self.node, "blocker gone; first, our node confirmed");
            self.place = Place::First;
        }
        Ok(stat.is_some())
    }

    /// Lists the root to learn who blocks us now, after a blocker of unknown place left;
    /// `false` if our own node is not there.
    async fn look_again(&mut self) -> Result<bool> {
        let (root, own) = self.root_and_name();
        let children = self
            .until_closed(async {
                let client = self.client()?;
                retry(&client, || client.list_children(root)).await
            })
            .await?;
        let Some(place) = Place::of(root, own, &children, self.blockers) else {
            return Ok(false);
        };
        debug!(node = %self.node, children = children.len(), "blocker left; looked again");
        self.place = place;
        Ok(true)
    }

    /// Lists the root with a child watch until it has few enough children to hold (then
    /// `true`, with our node in the listing) or our node is not among them (`false`). Every
    /// notification is only a reason to list again; the watch goes with the last listing.
    async fn thinned(&mut self) -> Result<bool> {
        let Place::Crowded = self.place else {
            return Ok(true);
        };
        let (root, own) = self.root_and_name();
        let holds = loop {
            let (children, watcher) = self
                .until_closed(async {
                    let client = self.client()?;
                    retry(&client, || client.list_and_watch_children(root)).await
                })
                .await?;
            if !listed(own, &children) {
                break false;
            }
            if !self.blockers.crowded(children.len()) {
                debug!(node = %self.node, children = children.len(), "few enough; holds");
                break true;
            }
            debug!(node = %self.node, children = children.len(), "crowded; watching the root");
            let event = Box::pin(self.unless_closed(watcher.changed())).await?;
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

impl Drop for Contender {
    fn drop(&mut self) {
        if self.armed {
            let removal = Removal::Node(std::mem::take(&mut self.node).into(), self.signals());
            drop(spawn_removal(&self.session, self.client.clone(), removal));
        }
    }
}

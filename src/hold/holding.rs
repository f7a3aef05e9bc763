//! Holding: a first contender watched in the background for the moment it can no longer be
//! trusted, and released so that nothing of ours is left behind.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Weak;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tracing::{debug, info_span, warn, Instrument};
use zookeeper_client::{Client, EventType, OneshotWatcher};

use super::trust::{Announce, Report, Trust};
use super::Core;
use crate::error::{Error, Result};
use crate::loss::Loss;
use crate::metrics::{self, NodeKind};
use crate::queue::{armed, Armed, Left, Ticket};
use crate::session::{connection_lost, retry, terminal};

/// How long after acquisition a holder starts watching its own node for deletion by someone
/// else (at once when its loss is awaited): short critical sections then cost no watch
/// request; session expiry and suspension are noticed from the start regardless.
const NODE_WATCH_DELAY: Duration = Duration::from_millis(10);

/// How a lock's or a lease's holding watches its node: from [`NODE_WATCH_DELAY`] on, or at
/// once when its loss is awaited.
pub(crate) const LOCK_WATCH: NodeWatch = NodeWatch::After(NODE_WATCH_DELAY);

/// When a holder starts watching its own node for deletion by someone else.
pub(crate) enum NodeWatch {
    /// At once.
    Now,
    /// After this delay, or as soon as someone awaits the loss: a short critical section
    /// then costs no watch request. Expiry and suspension are noticed from the start.
    After(Duration),
    /// It is watched already: this watch was set while it waited.
    Set(Armed),
}

/// A contender that holds (first, or among few enough), with its node known to exist: the
/// owner of a hold's [`Core`], watched in the background for its loss, and the one way a
/// hold's node is released. Dropping it deletes the node in the background.
#[derive(Debug)]
pub(crate) struct Holding {
    ticket: Option<Ticket>,
    core: Core,
    /// The loss, as reported to `trust` (by the monitor, or [`end`](Self::end), which
    /// reports [`Loss::Closed`] before the node is deleted on purpose, so that its deletion
    /// is not a loss).
    report: Report,
    monitor: JoinHandle<()>,
    /// When it started holding, and what the node is, for metrics.
    since: (Instant, NodeKind),
}

impl Holding {
    /// Starts watching `contender`, which must hold (be first, or among few enough), for its
    /// loss; `announce` runs as part of publishing it.
    pub(crate) fn start(
        mut ticket: Ticket,
        node_watch: NodeWatch,
        announce: Option<Announce>,
    ) -> Holding {
        // A watch on the node that is set already (while it waited) costs nothing to keep.
        let set = ticket.take_own_watch();
        let session = ticket.session();
        let client = ticket.client();
        let live = client.upgrade();
        let liveness = live.as_ref().and_then(|c| session.liveness(c));
        let (trust, report) = Trust::new(liveness);
        let watching = Watching {
            client: client.clone(),
            node: ticket.node().into(),
            trust: trust.clone(),
            tolerated: live.as_ref().and_then(|c| session.tolerated(c)),
        };
        let core = Core::new(&ticket, trust);
        // Not the session itself: a monitor that waits for its watch to fire must not keep
        // a session open that its owner dropped.
        let closing = session.closing();
        let node_watch = match set {
            Some(set) => NodeWatch::Set(set),
            None => node_watch,
        };
        let span = info_span!("zk.hold.watch", node = %ticket.node());
        let kind = ticket.kind();
        let mut publisher = report.publisher(announce);
        let monitor = tokio::spawn(
            async move {
                let loss = watching.lost(node_watch, closing).await;
                if publisher.ended() {
                    // Released or dropped: its deletion was no loss.
                    return;
                }
                publisher.saw(loss);
                // Published before anything else is done about it: nothing that follows
                // (a subscriber that panics, a stderr that cannot be written) can keep
                // the holder from learning it.
                drop(publisher);
                metrics::lost(kind, loss);
                warn!(?loss, "can no longer be trusted");
            }
            .instrument(span),
        );
        Holding {
            since: (Instant::now(), ticket.kind()),
            ticket: Some(ticket),
            core,
            report,
            monitor,
        }
    }

    /// The hold's core, which every handle of it shares.
    pub(crate) fn core(&self) -> &Core {
        &self.core
    }

    /// Stops watching and gives the ticket back, to wait or hold again.
    pub(crate) fn into_ticket(mut self) -> Option<Ticket> {
        self.end();
        self.monitor.abort();
        self.ticket.take()
    }

    /// Ends the holding for everyone who watches its trust, before the caller goes on: a
    /// holding released or dropped is lost ([`Loss::Closed`] unless a loss came first, even
    /// one its monitor has not published yet: the session's clock or another hold of the
    /// session saw it). The monitor then stops by itself, once a watch it set on the node,
    /// if any, has fired (see [`Watching::lost`]).
    fn end(&self) {
        self.report.publish(self.loss().unwrap_or(Loss::Closed));
    }

    /// The loss seen so far, if any ([`Loss::Lapsed`] once the session is no longer
    /// confirmed).
    fn loss(&self) -> Option<Loss> {
        self.core.trust().loss()
    }

    /// Deletes the node, whatever was written into it, and returns once it is gone:
    /// deleted, or gone with its session. A connection that is down is waited for, at most
    /// until the session would have expired.
    ///
    /// # Notable errors
    /// * [`Error::Lost`] if it could no longer be trusted before the release, or its
    ///   node was gone already: what was done under it may have overlapped with another
    ///   holder. The node, if still there, is deleted all the same.
    /// * [`Error::NoAuth`] if the servers refuse the delete: the node stays until the
    ///   session ends.
    ///
    /// # Cancel safety
    /// Cancel safe: the removal goes on in the background.
    pub(crate) async fn release(mut self) -> Result<()> {
        let lost = self.loss();
        self.end();
        let Some(ticket) = self.ticket.take() else {
            return Ok(());
        };
        if matches!(lost, Some(Loss::SessionExpired | Loss::Closed)) {
            ticket.disown();
            return Err(self.core.lost_error());
        }
        match (ticket.leave().await?, lost) {
            (Left::Deleted | Left::WithSession, None) => {
                debug!(node = %self.core.node(), "released");
                Ok(())
            }
            (Left::AlreadyGone, _) | (_, Some(_)) => Err(self.core.lost_error()),
        }
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.end();
        let (since, kind) = self.since;
        metrics::hold_ended(kind, since.elapsed());
        if let Some(ticket) = self.ticket.take() {
            debug!(node = %ticket.node(), "dropped while held; leaving in the background");
        }
    }
}

/// What the monitor of a holding needs; no strong reference to the client or the session.
struct Watching {
    client: Weak<Client>,
    node: Box<str>,
    /// The holding's trust: whether its loss is awaited, and what the servers confirmed.
    trust: Trust,
    /// How long a suspended connection is tolerated (`None`: not at all).
    tolerated: Option<Duration>,
}

impl Watching {
    /// Resolves when the holding can no longer be trusted, or once it ended (released or
    /// dropped: [`Loss::Closed`]). A watch on the node that is set when it ends is kept until
    /// it fires (the node is being deleted), or the session ends: a watch dropped unfired
    /// costs a request to remove it from the servers (zookeeper-client sends one, and
    /// another if the node's notification still comes). `closing` resolves once the
    /// session is closed or dropped.
    async fn lost(&self, node_watch: NodeWatch, closing: impl Future<Output = ()>) -> Loss {
        let Some(states) = self.client.upgrade().map(|client| client.state_watcher()) else {
            return Loss::Closed;
        };
        let mut closing = pin!(closing);
        // A watch set while it waited is kept until it fires, even if the holding ends
        // before the monitor first looks at it.
        let watching = AtomicBool::new(matches!(node_watch, NodeWatch::Set(_)));
        let node_lost = async {
            let set = match node_watch {
                NodeWatch::Now => None,
                NodeWatch::After(delay) => {
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = self.trust.awaited() => {}
                    }
                    None
                }
                NodeWatch::Set(set) => Some(set),
            };
            self.node_lost(set, &watching).await
        };
        let mut node_lost = pin!(node_lost);
        // A loss of the whole session is the one its first sighting, by any hold of the
        // session, decided (see `Trust::of_session`); the end of this hold is its own.
        tokio::select! {
            biased;
            () = &mut closing => self.trust.of_session(Loss::Closed),
            loss = connection_lost(states, self.tolerated) => self.trust.of_session(loss),
            loss = self.trust.lapsed() => loss,
            // Before the node: a holding that ended sets no new watch on it.
            () = self.trust.settled() => {
                if watching.load(Ordering::Relaxed) {
                    tokio::select! {
                        _ = node_lost => {}
                        () = closing => {}
                    }
                }
                Loss::Closed
            }
            loss = &mut node_lost => loss,
        }
    }

    /// Resolves when the node is deleted (a write into it is no loss) or the session ends;
    /// `set`, if given, is a watch on it set already. `watching` tells whether a watch is
    /// set (or its request sent) and waited on.
    async fn node_lost(&self, mut set: Option<Armed>, watching: &AtomicBool) -> Loss {
        loop {
            let watcher = match set.take() {
                Some(set) => set,
                None => match self.watch(watching).await {
                    Ok(watcher) => armed(watcher),
                    Err(loss) => return loss,
                },
            };
            watching.store(true, Ordering::Relaxed);
            let event = watcher.await;
            watching.store(false, Ordering::Relaxed);
            match event.event_type {
                EventType::NodeDeleted => return Loss::NodeDeleted,
                EventType::Session => {
                    return self.trust.of_session(match terminal(event.session_state) {
                        Error::Closed => Loss::Closed,
                        _ => Loss::SessionExpired,
                    })
                }
                other => debug!(?other, "our node changed; a write is no loss"),
            }
        }
    }

    /// Sets an exists watch on the node (its data is not needed), unless the holding ended
    /// ([`Loss::Closed`]: its node is being deleted, and a watch set after the delete would
    /// watch a node that is gone); the loss if it cannot be set. `watching` is set once the
    /// request is sent.
    async fn watch(&self, watching: &AtomicBool) -> std::result::Result<OneshotWatcher, Loss> {
        let Some(client) = self.client.upgrade() else {
            return Err(Loss::Closed);
        };
        let client = &client;
        let watched = retry(client, || {
            let sent = self.trust.unless_settled(|| {
                watching.store(true, Ordering::Relaxed);
                client.check_and_watch_stat(&self.node)
            });
            async move {
                match sent {
                    Some(watched) => watched.await.map(Some),
                    None => Ok(None),
                }
            }
        })
        .await;
        match watched {
            Ok(Some((Some(_), watcher))) => Ok(watcher),
            Ok(Some((None, _))) => Err(Loss::NodeDeleted),
            // The hold ended: its own end.
            Ok(None) => Err(Loss::Closed),
            Err(Error::Closed) => Err(self.trust.of_session(Loss::Closed)),
            Err(Error::SessionExpired) => Err(self.trust.of_session(Loss::SessionExpired)),
            Err(err @ (Error::ConnectionLoss | Error::Disconnected)) => {
                warn!(node = %self.node, %err, "cannot watch our node: the connection fails");
                Err(Loss::Suspended)
            }
            Err(err) => {
                warn!(node = %self.node, %err, "cannot watch our node");
                Err(Loss::Unwatched)
            }
        }
    }
}

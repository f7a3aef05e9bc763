//! Holding: a first contender watched for the moment it can no longer be trusted, and
//! released so that nothing of ours is left behind.
//!
//! What ends every hold of a session (a suspension, expiry, the close, the clock) is read
//! from the session's [`Liveness`](crate::session::Liveness), which its keeper ends, at
//! every look: no task per hold. What ends one hold (its node deleted by someone) needs a
//! watch on its node, kept by a task of the hold's own, the monitor: started at once for an
//! election's leadership and a holder that waited (its watch is set already), and for a
//! lock's or a lease's holder only once the hold has lasted the session's deferral or its
//! loss is awaited. A short critical section then costs no task, no timer, no watch.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tracing::{debug, info_span, warn, Instrument};
use zookeeper_client::{Client, EventType, OneshotWatcher, SessionState};

use super::trust::{Announce, LossCell, LossPlace, Publisher, Report, Trust};
use super::Core;
use crate::error::{Error, Result};
use crate::loss::Loss;
use crate::metrics::{self, NodeKind};
use crate::queue::{armed, Armed, Left, Removing, Ticket};
use crate::session::{connection_lost, retry, terminal, Due, Session};

/// How a lock's or a lease's holding watches its node: from the session's deferral on
/// ([`Session::defer`]: 10 to 20 ms after acquisition), or at once when its loss is
/// awaited; short critical sections then cost no watch request, and no task. Session
/// expiry and suspension are noticed from the start regardless (the session's keeper ends
/// the hold's epoch, see [`Liveness`](crate::session::Liveness)).
pub(crate) const LOCK_WATCH: NodeWatch = NodeWatch::Deferred;

/// When a holder starts watching its own node for deletion by someone else.
pub(crate) enum NodeWatch {
    /// At once.
    Now,
    /// After the session's deferral ([`Session::defer`]), or as soon as someone awaits the
    /// loss; a hold that ends before costs no task.
    Deferred,
    /// It is watched already: this watch was set while it waited.
    Set(Armed),
}

/// A contender that holds (first, or among few enough), with its node known to exist: the
/// owner of a hold's [`Core`], watched for its loss, and the one way a hold's node is
/// released. Dropping it deletes the node in the background.
#[derive(Debug)]
pub(crate) struct Holding {
    ticket: Option<Ticket>,
    core: Core,
    /// The loss, as reported to `trust` (by the monitor, or [`end`](Self::end), which
    /// reports [`Loss::Closed`] before the node is deleted on purpose, so that its deletion
    /// is not a loss).
    report: Report,
    /// Its monitor: the task that watches it for its loss, once started.
    monitor: Arc<Monitoring>,
    /// When it started holding, and what the node is, for metrics.
    since: (Instant, NodeKind),
}

impl Holding {
    /// Starts watching `contender`, which must hold (be first, or among few enough), for its
    /// loss; `announce` runs as part of publishing it. The monitor, a task, starts at once
    /// unless `node_watch` defers it; a deferred hold's losses of the whole session are read
    /// from its session's [`Liveness`](crate::session::Liveness) meanwhile.
    pub(crate) fn start(
        mut ticket: Ticket,
        node_watch: NodeWatch,
        announce: Option<Announce>,
    ) -> Holding {
        // A watch on the node that is set already (while it waited) costs nothing to keep.
        let node_watch = match ticket.take_own_watch() {
            Some(set) => NodeWatch::Set(set),
            None => node_watch,
        };
        let session = ticket.session().clone();
        let client = ticket.client();
        let live = client.upgrade();
        let liveness = live.as_ref().and_then(|c| session.liveness(c));
        // A hold made on a connection that is down already is watched at once: the keeper
        // may have ended the epoch of that suspension before this one began.
        let connected = live
            .as_ref()
            .is_some_and(|c| c.state() == SessionState::SyncConnected);
        let deferred = matches!(node_watch, NodeWatch::Deferred) && announce.is_none() && connected;
        let monitoring = Arc::new(Monitoring {
            loss: LossCell::default(),
            monitor: Mutex::new(Monitor::Ended),
        });
        let (trust, report) = Trust::new(liveness, monitoring.clone(), deferred);
        let core = Core::new(&mut ticket, trust);
        let kind = ticket.kind();
        let pending = Pending {
            watching: Watching {
                client,
                node: core.shared_node(),
                trust: core.trust().clone(),
                tolerated: live.as_ref().and_then(|c| session.tolerated(c)),
            },
            publisher: report.publisher(announce),
            set: match node_watch {
                NodeWatch::Set(set) => Some(set),
                NodeWatch::Now | NodeWatch::Deferred => None,
            },
            session,
            kind,
        };
        if deferred {
            monitoring.set(Monitor::Pending(pending));
            ticket
                .session()
                .defer(Arc::downgrade(&monitoring) as Weak<dyn Due>);
        } else {
            monitoring.set(Monitor::Running(pending.spawn()));
        }
        Holding {
            since: (Instant::now(), kind),
            ticket: Some(ticket),
            core,
            report,
            monitor: monitoring,
        }
    }

    /// The hold's core, which every handle of it shares.
    pub(crate) fn core(&self) -> &Core {
        &self.core
    }

    /// Stops watching and gives the ticket back, to wait or hold again.
    pub(crate) fn into_ticket(mut self) -> Option<Ticket> {
        self.end();
        if let Monitor::Running(task) = self.monitor.take() {
            task.abort();
        }
        self.ticket.take()
    }

    /// Ends the holding for everyone who watches its trust, before the caller goes on: a
    /// holding released or dropped is lost ([`Loss::Closed`] unless a loss came first, even
    /// one its monitor has not published yet: the session's clock or another hold of the
    /// session saw it). A running monitor then stops by itself, once a watch it set on the
    /// node, if any, has fired (see [`Watching::lost`]); one not started never starts,
    /// and a loss it did not see is counted and logged here.
    fn end(&self) {
        let loss = self.loss();
        self.report.publish(loss.unwrap_or(Loss::Closed));
        if let Monitor::Pending(_) = self.monitor.take() {
            if let Some(loss) = loss {
                metrics::lost(self.since.1, loss);
                // Logged by a task, as a monitor would: not in the caller's release or
                // drop, where a subscriber that panics would hit the caller (or abort the
                // process, in a drop while its thread unwinds).
                let span = info_span!("zk.hold.watch", node = %self.core.node());
                let logged = async move { warn!(?loss, "can no longer be trusted") };
                drop(self.core.session().spawn(logged.instrument(span)));
            }
        }
    }

    /// The loss seen so far, if any ([`Loss::Lapsed`] once the session is no longer
    /// confirmed).
    fn loss(&self) -> Option<Loss> {
        self.core.trust().loss()
    }

    /// Deletes the node, whatever was written into it, and returns once it is gone:
    /// deleted, or gone with its session. A connection that is down is waited for, at most
    /// until the session would have expired. The hold ends, and the first delete is sent,
    /// at the call: what is awaited, [`Releasing`], keeps only the holding and the removal
    /// (small enough not to be boxed by a guard's `release`).
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
    pub(crate) fn release(mut self) -> Releasing {
        let lost = self.loss();
        self.end();
        let leaving = match self.ticket.take() {
            Some(ticket) if matches!(lost, Some(Loss::SessionExpired | Loss::Closed)) => {
                ticket.disown();
                Leaving::Lost
            }
            Some(ticket) => Leaving::Removing(ticket.leave()),
            None => Leaving::Nothing,
        };
        Releasing {
            holding: self,
            lost,
            leaving,
        }
    }
}

/// A release under way ([`Holding::release`]): its removal, awaited in place, and the
/// holding, dropped once it is done. Dropped before, the removal goes on in the background.
pub(crate) struct Releasing {
    holding: Holding,
    /// The loss seen before the release.
    lost: Option<Loss>,
    leaving: Leaving,
}

/// How a released holding leaves.
enum Leaving {
    /// It had no node (any longer).
    Nothing,
    /// Its node went with its session, or the session was closed: nothing to delete.
    Lost,
    Removing(Removing),
}

impl Future for Releasing {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = &mut *self;
        let left = match &mut this.leaving {
            Leaving::Nothing => return Poll::Ready(Ok(())),
            Leaving::Lost => return Poll::Ready(Err(this.holding.core.lost_error())),
            Leaving::Removing(removing) => match Pin::new(removing).poll(cx) {
                Poll::Ready(left) => left,
                Poll::Pending => return Poll::Pending,
            },
        };
        Poll::Ready(match (left?, self.lost) {
            (Left::Deleted | Left::WithSession, None) => {
                debug!(node = %self.holding.core.node(), "released");
                Ok(())
            }
            (Left::AlreadyGone, _) | (_, Some(_)) => Err(self.holding.core.lost_error()),
        })
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

/// A holding's monitor: not started yet, running, or over (its holding ended first).
enum Monitor {
    /// Deferred: what it needs to start (inline: the monitor's place is allocated once
    /// per hold already).
    Pending(Pending),
    Running(JoinHandle<()>),
    Ended,
}

/// Where a holding's monitor is, and where its loss is reported (one allocation per hold);
/// shared with the trust and with the session's deferrals (weakly), which start the
/// monitor. A monitor that is pending keeps the trust, and so this, alive: the holding
/// takes it at its end (or it starts), which breaks that circle.
struct Monitoring {
    loss: LossCell,
    monitor: Mutex<Monitor>,
}

impl std::fmt::Debug for Monitoring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitoring")
            .field("loss", &self.loss)
            .finish_non_exhaustive()
    }
}

impl Monitoring {
    fn set(&self, monitor: Monitor) {
        *self.monitor.lock().unwrap_or_else(PoisonError::into_inner) = monitor;
    }

    /// Takes what it is, leaving [`Monitor::Ended`].
    fn take(&self) -> Monitor {
        std::mem::replace(
            &mut *self.monitor.lock().unwrap_or_else(PoisonError::into_inner),
            Monitor::Ended,
        )
    }

    /// Starts the monitor if it is deferred still.
    fn start(&self) {
        let mut monitor = self.monitor.lock().unwrap_or_else(PoisonError::into_inner);
        if let Monitor::Pending(_) = &*monitor {
            if let Monitor::Pending(pending) = std::mem::replace(&mut *monitor, Monitor::Ended) {
                *monitor = Monitor::Running(pending.spawn());
            }
        }
    }
}

impl Due for Monitoring {
    fn due(&self) {
        self.start();
    }
}

impl LossPlace for Monitoring {
    fn cell(&self) -> &LossCell {
        &self.loss
    }

    fn watch_now(&self) {
        self.start();
    }
}

/// What a monitor needs to start.
struct Pending {
    watching: Watching,
    publisher: Publisher,
    /// A watch on the node set while it waited.
    set: Option<Armed>,
    /// Its session: not kept by the monitor once it runs.
    session: Session,
    kind: NodeKind,
}

impl Pending {
    /// Runs the monitor as a task on the session's runtime.
    fn spawn(self) -> JoinHandle<()> {
        let Pending {
            watching,
            mut publisher,
            set,
            session,
            kind,
        } = self;
        // Not the session itself: a monitor that waits for its watch to fire must not keep
        // a session open that its owner dropped.
        let closing = session.closing();
        let span = info_span!("zk.hold.watch", node = %watching.node);
        session.spawn(
            async move {
                let loss = watching.lost(set, closing).await;
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
        )
    }
}

/// What the monitor of a holding needs; no strong reference to the client or the session.
struct Watching {
    client: Weak<Client>,
    node: Arc<str>,
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
    async fn lost(&self, set: Option<Armed>, closing: impl Future<Output = ()>) -> Loss {
        let Some(states) = self.client.upgrade().map(|client| client.state_watcher()) else {
            return Loss::Closed;
        };
        let mut closing = pin!(closing);
        // A watch set while it waited is kept until it fires, even if the holding ends
        // before the monitor first looks at it.
        let watching = AtomicBool::new(set.is_some());
        let node_lost = self.node_lost(set, &watching);
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

//! Holding: a first contender watched in the background for the moment it can no longer be
//! trusted, and released so that nothing of ours is left behind.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tracing::{debug, info_span, warn, Instrument};
use zookeeper_client::{Client, EventType, OneshotWatcher};

use super::handoff::Armed;
use super::leaving::Left;
use super::Contender;
use crate::error::{Error, Result};
use crate::session::{connection_lost, retry, terminal, Liveness, Session};

/// Why a held lock or leadership can no longer be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Loss {
    /// The ZooKeeper session expired (or the client gave up on it).
    SessionExpired,
    /// The connection was suspended: the session may be alive, but another contender may
    /// be let in before this one hears of it. Also when the node can no longer be watched.
    Suspended,
    /// The node was deleted by someone else.
    NodeDeleted,
    /// The session was closed.
    Closed,
    /// The servers have not confirmed the session for as long as they keep one that they
    /// do not hear from (its session timeout, counted from the sending of the last request
    /// of ours they answered): they may have expired it and let another contender in. The
    /// process was paused or starved past that time, or could not reach the servers.
    Lapsed,
}

/// How long after acquisition a holder starts watching its own node for deletion by someone
/// else (at once when its loss is awaited): short critical sections then cost no watch
/// request; session expiry and suspension are noticed from the start regardless.
pub(super) const NODE_WATCH_DELAY: Duration = Duration::from_millis(10);

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

/// Whether a holding can still be trusted, and why not; shared by the holding, its guards
/// and leaderships.
///
/// A holding is trusted while no loss was seen *and* the servers have confirmed its
/// session recently enough ([`Liveness`]): that part is read from the clock at every look,
/// so a process that wakes from a pause longer than the session timeout sees the loss at
/// its first look, before any I/O completes.
#[derive(Clone, Debug)]
pub(crate) struct Trust {
    loss: watch::Receiver<Option<Loss>>,
    /// Notified when someone awaits the loss: the node is watched from then on at once.
    asked: Arc<Notify>,
    /// What the servers confirmed of the session, and the epoch the holding began in;
    /// `None` if its session had already ended.
    confirmed: Option<(Arc<Liveness>, u64)>,
}

impl Trust {
    /// Whether it can no longer be trusted (a loss was seen, the session is no longer
    /// confirmed, or the holding is over).
    pub(crate) fn is_lost(&self) -> bool {
        self.loss.borrow().is_some() || !self.confirmed()
    }

    /// Whether the servers still certainly keep the session.
    fn confirmed(&self) -> bool {
        self.confirmed
            .as_ref()
            .is_some_and(|(liveness, epoch)| liveness.trusts(*epoch))
    }

    /// Resolves once it can no longer be trusted; [`Loss::Closed`] if the holding ended
    /// without a loss (it was released or dropped).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn lost(&self) -> Loss {
        self.asked.notify_one();
        let mut loss = self.loss.clone();
        tokio::select! {
            biased;
            seen = loss.wait_for(Option::is_some) => {
                seen.map(|loss| *loss).ok().flatten().unwrap_or(Loss::Closed)
            }
            loss = lapsed(self.confirmed.as_ref()) => loss,
        }
    }
}

/// Resolves with [`Loss::Lapsed`] once a holding begun in `confirmed`'s epoch is no longer
/// confirmed ([`Loss::SessionExpired`] at once without a session).
async fn lapsed(confirmed: Option<&(Arc<Liveness>, u64)>) -> Loss {
    match confirmed {
        Some((liveness, epoch)) => {
            liveness.lapsed(*epoch).await;
            Loss::Lapsed
        }
        None => Loss::SessionExpired,
    }
}

/// Run just before a loss is published, as part of publishing it (an election steps its
/// role down with it). It must only publish: send on a channel, never log or wait.
pub(crate) type Announce = Box<dyn FnOnce() + Send>;

/// A contender that holds (first, or among few enough), with its node known to exist.
/// Dropping it deletes the node in the background.
#[derive(Debug)]
pub(crate) struct Holding {
    contender: Option<Contender>,
    trust: Trust,
    /// The loss, as reported to `trust` (by the monitor, or [`end`](Self::end)).
    report: watch::Sender<Option<Loss>>,
    /// Set before the node is deleted on purpose, so that its deletion is not a loss.
    releasing: Arc<AtomicBool>,
    monitor: JoinHandle<()>,
}

impl Holding {
    /// Starts watching `contender`, which must hold (be first, or among few enough), for its
    /// loss; `announce` runs as part of publishing it.
    pub(crate) fn start(
        mut contender: Contender,
        node_watch: NodeWatch,
        announce: Option<Announce>,
    ) -> Holding {
        let (report, loss) = watch::channel(None);
        // A watch on the node that is set already (while it waited) costs nothing to keep.
        let set = contender
            .handoff
            .take()
            .and_then(|handoff| handoff.into_own());
        let releasing = Arc::new(AtomicBool::new(false));
        let confirmed = contender.client.upgrade().and_then(|client| {
            let liveness = contender.session.liveness(&client)?;
            let epoch = liveness.epoch();
            Some((liveness, epoch))
        });
        let trust = Trust {
            loss,
            asked: Arc::new(Notify::new()),
            confirmed,
        };
        let watching = Watching {
            session: contender.session.clone(),
            client: contender.client.clone(),
            node: contender.node.clone(),
            trust: trust.clone(),
        };
        let node_watch = match set {
            Some(set) => NodeWatch::Set(set),
            None => node_watch,
        };
        let span = info_span!("zk.queue.held", node = %contender.node);
        let mut publisher = Publisher {
            report: report.clone(),
            releasing: releasing.clone(),
            announce,
            loss: None,
        };
        let monitor = tokio::spawn(
            async move {
                let loss = watching.lost(node_watch).await;
                publisher.loss = Some(loss);
                // Published before anything else is done about it: nothing that follows
                // (a subscriber that panics, a stderr that cannot be written) can keep
                // the holder from learning it.
                drop(publisher);
                warn!(?loss, "can no longer be trusted");
            }
            .instrument(span),
        );
        Holding {
            contender: Some(contender),
            trust,
            report,
            releasing,
            monitor,
        }
    }
    pub(crate) fn trust(&self) -> &Trust {
        &self.trust
    }

    /// Full path of the node (empty once released).
    pub(crate) fn node(&self) -> &str {
        self.contender.as_ref().map_or("", Contender::node)
    }

    pub(crate) fn token(&self) -> u64 {
        self.contender.as_ref().map_or(0, Contender::token)
    }

    /// Stops watching and gives the contender back, to wait or hold again.
    pub(crate) fn into_contender(mut self) -> Option<Contender> {
        self.end();
        self.contender.take()
    }

    /// Ends the holding for everyone who watches its trust, before the caller goes on: a
    /// holding released or dropped is lost ([`Loss::Closed`] unless a loss came first).
    fn end(&self) {
        self.releasing.store(true, Ordering::SeqCst);
        self.monitor.abort();
        self.report.send_if_modified(|loss| {
            let unset = loss.is_none();
            loss.get_or_insert(Loss::Closed);
            unset
        });
    }

    /// The loss seen so far, if any ([`Loss::Lapsed`] once the session is no longer
    /// confirmed).
    fn loss(&self) -> Option<Loss> {
        let seen = *self.trust.loss.borrow();
        seen.or_else(|| (!self.trust.confirmed()).then_some(Loss::Lapsed))
    }

    /// Deletes the node, whatever was written into it, and returns once it is gone:
    /// deleted, or gone with its session. A connection that is down is waited for, at most
    /// until the session would have expired.
    ///
    /// # Notable errors
    /// * [`Error::LockLost`] if it could no longer be trusted before the release, or its
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
        let Some(contender) = self.contender.take() else {
            return Ok(());
        };
        let lost_error = Error::LockLost {
            node: contender.node().to_owned(),
        };
        if matches!(lost, Some(Loss::SessionExpired | Loss::Closed)) {
            contender.disown();
            return Err(lost_error);
        }
        match (contender.leave().await?, lost) {
            (Left::Deleted | Left::WithSession, None) => Ok(()),
            (Left::AlreadyGone, _) | (_, Some(_)) => Err(lost_error),
        }
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.end();
        if let Some(contender) = self.contender.take() {
            debug!(node = %contender.node(), "dropped while held; leaving in the background");
        }
    }
}

/// Publishes a holding's loss when dropped: when its monitor saw the loss, and also when
/// the monitor ended any other way (it panicked: the holding can no longer be watched),
/// unless the holding is being released.
struct Publisher {
    report: watch::Sender<Option<Loss>>,
    releasing: Arc<AtomicBool>,
    announce: Option<Announce>,
    /// The loss the monitor saw, if it saw one.
    loss: Option<Loss>,
}

impl Drop for Publisher {
    fn drop(&mut self) {
        if self.releasing.load(Ordering::SeqCst) {
            return;
        }
        if let Some(announce) = self.announce.take() {
            // It only sends on a channel; a panic must not stop the loss from following.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(announce));
        }
        let loss = self.loss.unwrap_or(Loss::Suspended);
        self.report.send_if_modified(|seen| {
            let unset = seen.is_none();
            seen.get_or_insert(loss);
            unset
        });
    }
}

/// What the monitor of a holding needs; no strong reference to the client.
struct Watching {
    session: Session,
    client: Weak<Client>,
    node: String,
    /// The holding's trust: its `asked` and `confirmed`.
    trust: Trust,
}

impl Watching {
    /// Resolves when the holding can no longer be trusted.
    async fn lost(&self, node_watch: NodeWatch) -> Loss {
        let Some((states, tolerated)) = self.client.upgrade().map(|client| {
            let tolerated = self.session.tolerated(&client);
            (client.state_watcher(), tolerated)
        }) else {
            return Loss::Closed;
        };
        let node_lost = async {
            let set = match node_watch {
                NodeWatch::Now => None,
                NodeWatch::After(delay) => {
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = self.trust.asked.notified() => {}
                    }
                    None
                }
                NodeWatch::Set(set) => Some(set),
            };
            self.node_lost(set).await
        };
        tokio::select! {
            () = self.session.closed() => Loss::Closed,
            loss = connection_lost(states, tolerated) => loss,
            loss = lapsed(self.trust.confirmed.as_ref()) => loss,
            loss = node_lost => loss,
        }
    }

    /// Resolves when the node is deleted (a write into it is no loss) or the session ends;
    /// `set`, if given, is a watch on it set already.
    async fn node_lost(&self, mut set: Option<Armed>) -> Loss {
        loop {
            let event = match set.take() {
                Some(set) => set.await,
                None => match self.watch().await {
                    Ok(watcher) => watcher.changed().await,
                    Err(loss) => return loss,
                },
            };
            match event.event_type {
                EventType::NodeDeleted => return Loss::NodeDeleted,
                EventType::Session => {
                    return match terminal(event.session_state) {
                        Error::Closed => Loss::Closed,
                        _ => Loss::SessionExpired,
                    }
                }
                other => debug!(?other, "our node changed; a write is no loss"),
            }
        }
    }

    /// Sets an exists watch on the node (its data is not needed); the loss if it cannot be
    /// set.
    async fn watch(&self) -> std::result::Result<OneshotWatcher, Loss> {
        let watched = match self.client.upgrade() {
            Some(client) => retry(&client, || client.check_and_watch_stat(&self.node)).await,
            None => return Err(Loss::Closed),
        };
        match watched {
            Ok((Some(_), watcher)) => Ok(watcher),
            Ok((None, _)) => Err(Loss::NodeDeleted),
            Err(Error::Closed) => Err(Loss::Closed),
            Err(Error::SessionExpired) => Err(Loss::SessionExpired),
            Err(err) => {
                warn!(%err, "cannot watch our node");
                Err(Loss::Suspended)
            }
        }
    }
}

/// The methods a guard shares with every other guard on a [`Holding`] (kept in its field
/// `holding`): `fencing_token`, `node`, `is_lost`, `lost` and `release`. `$what` names what
/// it holds in their docs (`"lock"`, `"lease"`).
macro_rules! guard_methods {
    ($what:literal) => {
        #[doc = concat!("The fencing token: the zxid that created the ", $what, "'s node. ")]
        #[doc = "It is greater for every node created later, so a resource that remembers"]
        #[doc = "the largest token it has accepted can refuse a stale holder."]
        pub fn fencing_token(&self) -> u64 {
            self.holding.token()
        }

        #[doc = concat!("Full path of the ", $what, "'s znode.")]
        pub fn node(&self) -> &str {
            self.holding.node()
        }

        #[doc = concat!("Whether the ", $what, " can no longer be trusted (see [`lost`](Self::lost)).")]
        pub fn is_lost(&self) -> bool {
            self.holding.trust().is_lost()
        }

        #[doc = concat!("Resolves once the ", $what, " can no longer be trusted: the session")]
        #[doc = "expired or was closed, the connection was suspended, the node was deleted, or"]
        #[doc = "the servers have not confirmed the session for a session timeout"]
        #[doc = "([`Loss::Lapsed`](crate::Loss::Lapsed)); the first look after a pause sees it;"]
        #[doc = "says which."]
        #[doc = ""]
        #[doc = "# Cancel safety"]
        #[doc = "Cancel safe."]
        pub async fn lost(&self) -> $crate::queue::Loss {
            self.holding.trust().lost().await
        }

        #[doc = concat!("Releases the ", $what, " and returns once its node is gone: deleted,")]
        #[doc = "or gone with its session. While the connection is down it waits for it to come"]
        #[doc = "back, at most until the servers would have expired the session (1.5 session"]
        #[doc = "timeouts); it never fails for a connection that is down."]
        #[doc = ""]
        #[doc = "# Notable errors"]
        #[doc = "* [`Error::LockLost`](crate::Error::LockLost) if it was lost before the release"]
        #[doc = "  (what was done under it may have overlapped with another holder); the node,"]
        #[doc = "  if still there, is deleted all the same."]
        #[doc = "* [`Error::NoAuth`](crate::Error::NoAuth) if the servers refuse the delete: the"]
        #[doc = "  node stays until the session ends."]
        #[doc = ""]
        #[doc = "# Cancel safety"]
        #[doc = "Cancel safe: an unfinished release goes on in the background until the node"]
        #[doc = "is gone or its session is."]
        pub async fn release(self) -> $crate::error::Result<()> {
            // Boxed: a caller that awaits an acquisition then the release in one future
            // reserves room for the larger of the two while it waits.
            Box::pin(self.holding.release()).await
        }
    };
}
pub(crate) use guard_methods;

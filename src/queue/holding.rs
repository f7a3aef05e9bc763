//! Holding: a first contender watched in the background for the moment it can no longer be
//! trusted, and released so that nothing of ours is left behind.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tracing::{debug, info_span, warn, Instrument};
use zookeeper_client::{Client, EventType};

use super::leaving::Left;
use super::Contender;
use crate::error::{Error, Result};
use crate::session::{connection_lost, retry, terminal, Session};

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
}

/// When a holder starts watching its own node for deletion by someone else.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NodeWatch {
    /// At once.
    Now,
    /// After this delay, or as soon as someone awaits the loss: a short critical section
    /// then costs no watch request. Expiry and suspension are noticed from the start.
    After(Duration),
}

/// Whether a holding can still be trusted, and why not; shared by the holding, its guards
/// and leaderships.
#[derive(Clone, Debug)]
pub(crate) struct Trust {
    loss: watch::Receiver<Option<Loss>>,
    /// Notified when someone awaits the loss: the node is watched from then on at once.
    asked: Arc<Notify>,
}

impl Trust {
    /// Whether it can no longer be trusted (a loss was seen, or the holding is over).
    pub(crate) fn is_lost(&self) -> bool {
        self.loss.borrow().is_some()
    }

    /// Resolves once it can no longer be trusted; [`Loss::Closed`] if the holding ended
    /// without a loss (it was released or dropped).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn lost(&self) -> Loss {
        self.asked.notify_one();
        let mut loss = self.loss.clone();
        let seen = loss.wait_for(Option::is_some).await.map(|loss| *loss);
        seen.ok().flatten().unwrap_or(Loss::Closed)
    }
}

/// A contender that holds: first, with its node known to exist. Dropping it deletes the
/// node in the background.
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
    /// Starts watching `contender`, which must be first, for its loss.
    pub(crate) fn start(contender: Contender, node_watch: NodeWatch) -> Holding {
        let (report, loss) = watch::channel(None);
        let asked = Arc::new(Notify::new());
        let releasing = Arc::new(AtomicBool::new(false));
        let watching = Watching {
            session: contender.session.clone(),
            client: contender.client.clone(),
            node: contender.node.clone(),
            asked: asked.clone(),
        };
        let released = releasing.clone();
        let span = info_span!("zk.queue.held", node = %contender.node);
        let monitored = report.clone();
        let monitor = tokio::spawn(
            async move {
                let loss = watching.lost(node_watch).await;
                if !released.load(Ordering::SeqCst) {
                    warn!(?loss, "can no longer be trusted");
                    monitored.send_replace(Some(loss));
                }
            }
            .instrument(span),
        );
        Holding {
            contender: Some(contender),
            trust: Trust { loss, asked },
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

    /// Deletes the node, whatever was written into it, unless it went with its session.
    ///
    /// # Notable errors
    /// * [`Error::LockLost`] if it could no longer be trusted before the release (the node,
    ///   if still there, is deleted all the same).
    /// * [`Error::ConnectionLoss`] if the connection is down: the node is deleted in the
    ///   background.
    ///
    /// # Cancel safety
    /// Cancel safe: an unfinished delete is finished in the background.
    pub(crate) async fn release(mut self) -> Result<()> {
        let lost = *self.trust.loss.borrow();
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
        match (contender.leave().await, lost) {
            (Ok(Left::Deleted), None) => Ok(()),
            (Err(Error::ConnectionLoss), None) => Err(Error::ConnectionLoss),
            (Ok(_), _)
            | (Err(Error::ConnectionLoss | Error::SessionExpired | Error::Closed), _) => {
                Err(lost_error)
            }
            (Err(other), _) => Err(other),
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

/// What the monitor of a holding needs; no strong reference to the client.
struct Watching {
    session: Session,
    client: Weak<Client>,
    node: String,
    asked: Arc<Notify>,
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
            if let NodeWatch::After(delay) = node_watch {
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = self.asked.notified() => {}
                }
            }
            self.node_lost().await
        };
        tokio::select! {
            () = self.session.closed() => Loss::Closed,
            loss = connection_lost(states, tolerated) => loss,
            loss = node_lost => loss,
        }
    }

    /// Resolves when the node is deleted (a write into it is no loss) or the session ends.
    async fn node_lost(&self) -> Loss {
        loop {
            let watched = match self.client.upgrade() {
                Some(client) => retry(&client, || client.get_and_watch_data(&self.node)).await,
                None => return Loss::Closed,
            };
            let watcher = match watched {
                Ok((_, _, watcher)) => watcher,
                Err(Error::ZooKeeper(zookeeper_client::Error::NoNode)) => return Loss::NodeDeleted,
                Err(Error::Closed) => return Loss::Closed,
                Err(Error::SessionExpired) => return Loss::SessionExpired,
                Err(err) => {
                    warn!(%err, "cannot watch our node");
                    return Loss::Suspended;
                }
            };
            let event = watcher.changed().await;
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
}

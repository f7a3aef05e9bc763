//! The hold core ([`Core`]): one type every hold is a thin shell over. It owns the node's
//! identity (its path, its token, the session and client it belongs to), its trust and
//! loss, its fence (the check a [`Fenced`] transaction sends) and the node's latch of a
//! request to let go. [`Holding`](super::Holding) makes it and releases the node.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use tracing::{debug, info, info_span, Instrument};
use zookeeper_client::Client;
use zookeeper_client::Error as Zk;

use super::trust::{LossSignal, Trust};
use super::Fenced;
use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::loss::Loss;
use crate::queue::Ticket;
use crate::revoke::{at, REVOKE};
use crate::session::{connected_now, retry, Session};

/// The hold core: what every hold (a guard, a lease, a leadership) is a thin shell over —
/// its node's identity on the holder's session, its trust (and so its loss), its fence,
/// and the node's latch of a request to let go. Cheap to clone: every handle of one hold
/// shares it. Made only by [`Holding::start`](super::Holding::start).
#[derive(Clone, Debug)]
pub(crate) struct Core {
    /// The ACL of nodes the holder's session creates.
    acl: NodeAcl,
    /// The recipe's session: once it is closed, nothing is written, even while a request
    /// in flight still keeps its client alive.
    session: Session,
    /// The client of the session the node belongs to: a later session never writes for it.
    client: Weak<Client>,
    node: Arc<str>,
    /// The zxid that created the node: the fencing token.
    token: u64,
    trust: Trust,
    /// The node's latch of a request to let go (its contender's: shared by every handle of
    /// the node, across a leader's terms), so that a later write of the holder's own into it
    /// (a proclamation) cannot withdraw the request.
    asked: Arc<AtomicBool>,
}

impl Core {
    /// The core of a hold on `ticket`'s node, trusted as `trust` says.
    pub(super) fn new(ticket: &mut Ticket, trust: Trust) -> Core {
        let session = ticket.session().clone();
        Core {
            acl: session.node_acl(),
            asked: ticket.latch(),
            session,
            client: ticket.client(),
            node: ticket.shared_node(),
            token: ticket.token(),
            trust,
        }
    }

    /// Whether a request to let go was seen in the node.
    pub(crate) fn asked(&self) -> bool {
        self.asked.load(Ordering::Acquire)
    }

    /// Takes note of the node's data, read by the holder: a request to let go in it stays
    /// heard, whatever is written into the node later.
    pub(crate) fn note(&self, data: &[u8]) {
        if data == REVOKE {
            self.asked.store(true, Ordering::Release);
        }
    }

    /// Reads the holder's node, notes a request to let go in it, and returns its version.
    /// Waits for no connection, as the fenced write after it does not: one read.
    ///
    /// # Notable errors
    /// * [`Error::Lost`] if the hold reads as lost or its node is gone.
    /// * [`Error::Disconnected`] at once if the connection is down; [`Error::ConnectionLoss`]
    ///   if it broke with the read in flight.
    pub(crate) async fn read_own_node(&self) -> Result<i32> {
        let client = self.connected()?;
        match client.get_data(self.node()).await {
            Ok((data, stat)) => {
                self.note(&data);
                Ok(stat.version)
            }
            Err(zookeeper_client::Error::NoNode) => Err(self.lost_error()),
            Err(err) => Err(Error::at(self.node(), err)),
        }
    }

    /// Full path of the holder's node.
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// The session the hold was made on.
    pub(super) fn session(&self) -> &Session {
        &self.session
    }

    /// Full path of the holder's node, shared.
    pub(super) fn shared_node(&self) -> Arc<str> {
        self.node.clone()
    }

    /// The fencing token: the zxid that created the node; greater for every later holder.
    pub(crate) fn token(&self) -> u64 {
        self.token
    }

    /// Whether the hold can no longer be trusted.
    pub(crate) fn is_lost(&self) -> bool {
        self.trust.is_lost()
    }

    /// Resolves once the hold can no longer be trusted; says why.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn lost(&self) -> Loss {
        self.trust.lost().await
    }

    /// The hold's loss as a value of its own, for any task.
    pub(crate) fn loss_signal(&self) -> LossSignal {
        LossSignal::new(self.trust.clone())
    }

    /// The ACL of the nodes the holder's session creates.
    pub(crate) fn acl(&self) -> NodeAcl {
        self.acl
    }

    pub(crate) fn trust(&self) -> &Trust {
        &self.trust
    }

    /// The error of a hold that is over.
    pub(crate) fn lost_error(&self) -> Error {
        Error::Lost {
            node: self.node.to_string(),
        }
    }

    /// The holder's client, while the hold reads as intact.
    ///
    /// # Notable errors
    /// * [`Error::Lost`] if the hold reads as lost, or its session is gone or closed.
    pub(crate) fn client(&self) -> Result<Arc<Client>> {
        let open = self.session.close_reason().is_none();
        match self.client.upgrade() {
            Some(client) if open && !self.trust.is_lost() => Ok(client),
            _ => Err(self.lost_error()),
        }
    }

    /// The holder's client, while the hold reads as intact and the client is connected.
    ///
    /// # Notable errors
    /// * [`Error::Disconnected`] if the connection is down.
    /// * [`Error::Lost`] as [`client`](Self::client), or if its session ended.
    pub(crate) fn connected(&self) -> Result<Arc<Client>> {
        let client = self.client()?;
        connected_now(&client).map_err(|err| match err {
            Error::Disconnected => err,
            _ => self.lost_error(),
        })?;
        Ok(client)
    }

    /// An empty transaction fenced by this hold.
    pub(crate) fn fenced(&self) -> Fenced {
        Fenced::new(self.clone())
    }

    /// Resolves once `__REVOKE__` is in the holder's node.
    ///
    /// # Notable errors
    /// * [`Error::Lost`] if the hold ends (or reads as lost) first.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn revocation_requested(&self) -> Result<()> {
        let span = info_span!("zk.revocation_requested", node = %self.node());
        async {
            loop {
                if self.asked() {
                    info!("asked to let go");
                    return Ok(());
                }
                let client = self.client()?;
                let read = tokio::select! {
                    read = retry(&client, || client.get_and_watch_data(self.node())) => read,
                    _ = self.trust().lost() => return Err(self.lost_error()),
                };
                drop(client);
                let watcher = match read {
                    Ok((data, _, _)) if data == REVOKE => {
                        self.note(&data);
                        continue;
                    }
                    Ok((_, _, watcher)) => watcher,
                    Err(Error::ZooKeeper(Zk::NoNode) | Error::SessionExpired | Error::Closed) => {
                        return Err(self.lost_error())
                    }
                    Err(err) => return Err(at(self.node(), err)),
                };
                tokio::select! {
                    event = watcher.changed() => debug!(?event, "our node changed"),
                    _ = self.trust().lost() => return Err(self.lost_error()),
                }
            }
        }
        .instrument(span)
        .await
    }
}

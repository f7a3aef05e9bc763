//! [`Worker`]: a member of a partitioner, handing out the partitions the assignment gives it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch, Mutex as AsyncMutex};
use tracing::{info_span, Instrument};

use crate::error::{Error, Result};
use crate::recipes::group::{Member, Membership};

use super::dealer::Dealer;
use super::hold::PartitionHold;
use super::state::WorkerState;
use super::Partitioner;

/// A member of a [`Partitioner`]'s group: a task of its own takes the lock of each partition
/// the assignment gives this member, and hands each out through
/// [`next_partition`](Self::next_partition); it asks a hold to let go
/// ([`PartitionHold::moved`]) when the assignment moves its partition away.
///
/// Dropping the worker leaves, as [`leave`](Self::leave) does, in the background.
#[derive(Debug)]
pub struct Worker {
    id: Arc<str>,
    node: Arc<str>,
    granted: AsyncMutex<mpsc::UnboundedReceiver<PartitionHold>>,
    state: watch::Receiver<WorkerState>,
    end: watch::Receiver<Option<Error>>,
    /// Tells the dealer to stop; says how its leave went.
    task: Option<(oneshot::Sender<()>, oneshot::Receiver<Result<()>>)>,
}

impl Worker {
    /// Starts dealing for `membership`, which `members` shows.
    pub(crate) fn start(
        partitioner: Partitioner,
        membership: Membership,
        members: watch::Receiver<Vec<Member>>,
    ) -> Worker {
        let (granted_tx, granted) = mpsc::unbounded_channel();
        let (state_tx, state) = watch::channel(WorkerState::default());
        let (end_tx, end) = watch::channel(None);
        let (stop, stopped) = oneshot::channel();
        let (done_tx, done) = oneshot::channel();
        let id = partitioner.id.clone();
        let node: Arc<str> = Arc::from(membership.node());
        let span = info_span!("zk.partition.worker", path = %partitioner.root, id = %id);
        let session = partitioner.session.clone();
        let dealer = Dealer::new(partitioner, members, granted_tx, state_tx, end_tx);
        session.spawn(
            async move {
                let left = dealer.run(membership, stopped).await;
                let _ = done_tx.send(left);
            }
            .instrument(span),
        );
        Worker {
            id,
            node,
            granted: AsyncMutex::new(granted),
            state,
            end,
            task: Some((stop, done)),
        }
    }

    /// This member's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Full path of this member's node in the group.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Waits for the next partition this member holds: each partition the assignment gives
    /// it, as soon as its lock is held (after its previous owner released it, or its
    /// previous owner's session ended), and again after a hold of a partition that is still
    /// this member's was released or dropped. Tasks sharing the worker each get other holds.
    ///
    /// # Notable errors
    /// Once the worker ended (every partition it held was asked to let go):
    /// * [`Error::IdTaken`] if another session took this member's id while it was away.
    /// * [`Error::PartitionsConflict`] if, while this member's node was away (its session
    ///   expired, or someone deleted it), a member that records another set of partitions
    ///   joined: the member made again gives way, as a newer one does at
    ///   [`join`](crate::Partitioner::join).
    /// * [`Error::Closed`] if the session was closed.
    /// * [`Error::NoAuth`], [`Error::InvalidAcl`], [`Error::EphemeralParent`] if a
    ///   partition's lock cannot be taken (its path's ACL, the node ACL, an ephemeral
    ///   parent).
    /// * [`Error::Lost`] if the member node went and could not be made again.
    ///
    /// # Cancel safety
    /// Cancel safe: a hold granted meanwhile waits for the next call.
    pub async fn next_partition(&self) -> Result<PartitionHold> {
        let mut granted = self.granted.lock().await;
        match granted.recv().await {
            Some(hold) => Ok(hold),
            None => Err(self.end.borrow().clone().unwrap_or(Error::Closed)),
        }
    }

    /// The partitions this member holds now, with their fencing tokens.
    pub fn owned(&self) -> BTreeMap<String, u64> {
        self.state.borrow().owned.clone()
    }

    /// The partitions the assignment gives this member now, by its view of the group.
    pub fn assigned(&self) -> BTreeSet<String> {
        self.state.borrow().assigned.clone()
    }

    /// What this member knows, as it changes (a receiver that starts with it now).
    pub fn states(&self) -> watch::Receiver<WorkerState> {
        self.state.clone()
    }

    /// Leaves: stops taking partitions, leaves the group (so the others start waiting for
    /// this member's partitions), asks every hold it handed out to let go
    /// ([`PartitionHold::moved`]), and returns once the member node is gone and every such
    /// hold was released or dropped. Holds granted and not yet handed out are released.
    ///
    /// # Notable errors
    /// As [`Membership::leave`].
    ///
    /// # Cancel safety
    /// Cancel safe: the worker goes on leaving in the background.
    pub async fn leave(mut self) -> Result<()> {
        {
            let granted = self.granted.get_mut();
            granted.close();
            while granted.try_recv().is_ok() {}
        }
        match self.task.take() {
            Some((stop, done)) => {
                let _ = stop.send(());
                done.await.unwrap_or(Ok(()))
            }
            None => Ok(()),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some((stop, _)) = self.task.take() {
            let _ = stop.send(());
        }
    }
}
